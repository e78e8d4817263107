// The instruction sets the kernels are compiled for, their run-time detection
// (cvz_isa.cpp), and the pieces every op uses to compile its kernel once per
// instruction set and dispatch on a table (see cvz_per_isa.hpp).
#pragma once

#include "cvz_common.hpp"

namespace cvz {

// Codes as convviz._openmp_info.ISA_NAMES lists them.
enum Isa : int { ISA_GENERIC = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };

// Variants in every kernel table: all three on x86, the generic one elsewhere.
constexpr int ISA_COUNT = CVZ_X86 ? 3 : 1;

// The best variant this CPU and its OS run (CPU features and saved register state).
int isa_best();

// Whether the CPU has the bfloat16 dot-product instruction (AVX512_BF16) and
// runs AVX-512 code: what precision="fast" uses for bfloat16 input gradients.
bool cpu_has_bf16_dot();

// Whether this compiler builds AVX512_FP16 code under a target attribute (GCC 12
// and later; clang 16 and later: clang 14 declares the float16 vector types
// only when the whole file is compiled for AVX512_FP16).
#if CVZ_X86 && ((defined(__clang__) && __clang_major__ >= 16) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 12))
#define CVZ_F16_FMA_COMPILED 1
#else
#define CVZ_F16_FMA_COMPILED 0
#endif

// Whether the CPU has the float16 FMA (AVX512_FP16), runs AVX-512 code, and
// this build holds the code: what precision="fast" uses for float16 input
// gradients.
bool cpu_has_f16_fma();

inline bool isa_compiled(int isa) { return isa >= 0 && isa < ISA_COUNT; }

// A per-ISA tuning constant: (generic, AVX2, AVX-512) value for `isa`.
constexpr int per_isa(Isa isa, int generic, int avx2, int avx512) {
    return isa == ISA_AVX512 ? avx512 : isa == ISA_AVX2 ? avx2 : generic;
}

// table[isa][f64] of an op's entry point; variants not compiled in run generic.
template <class F>
inline F isa_pick(const F (&table)[ISA_COUNT][2], int isa, int f64) {
    return table[isa_compiled(isa) ? isa : ISA_GENERIC][f64 ? 1 : 0];
}

}  // namespace cvz
