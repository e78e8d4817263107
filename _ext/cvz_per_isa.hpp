// Compile one op's kernel body once per instruction set, and build its
// dispatch tables.  An op's one .cpp (as Highway's foreach_target does) reads
//
//     #ifndef CVZ_PER_ISA_PASS
//     #include "my_op.hpp"                 // its argument struct and entry points
//     #define CVZ_OP_BODY "my_op.cpp"      // this very file
//     #include "cvz_per_isa.hpp"
//     static const MyFn my_table[ISA_COUNT][2] = CVZ_ISA_TABLE(my_op_entry);
//     ... entry points: isa_pick(my_table, isa, f64)(...)
//     #else
//     ... the kernel body, templates written once against Simd<T>
//     #endif
//
// The body (the file again, with CVZ_PER_ISA_PASS defined) is included in namespaces cvz::generic, cvz::avx2 and cvz::avx512, each time
// after that ISA's Simd<T> traits, the layout helpers and the register tiles, inside a region that
// compiles every function for that ISA (GCC: target pragma; clang: target
// attribute pushed on every function; MSVC: nothing, its intrinsics need no
// target).  THIS_ISA names the ISA for per-ISA tuning (cvz::per_isa).
#pragma once

#ifndef CVZ_OP_BODY
#error "define CVZ_OP_BODY (the op's kernel body header) before including cvz_per_isa.hpp"
#endif

#include "cvz_isa.hpp"
#if CVZ_X86
#include <immintrin.h>
#endif

#define CVZ_PER_ISA_PASS 1  // the op's file, included below, now yields its body

#if defined(__clang__)
#define CVZ_TARGET_PUSH(features) \
    CVZ_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define CVZ_TARGET_POP CVZ_PRAGMA(clang attribute pop)
#elif defined(__GNUC__)
#define CVZ_TARGET_PUSH(features) CVZ_PRAGMA(GCC push_options) CVZ_PRAGMA(GCC target(features))
#define CVZ_TARGET_POP CVZ_PRAGMA(GCC pop_options)
#else
#define CVZ_TARGET_PUSH(features)
#define CVZ_TARGET_POP
#endif

namespace cvz {
namespace generic {
constexpr Isa THIS_ISA = ISA_GENERIC;
#include "cvz_simd_generic.hpp"
#include "cvz_layout.hpp"
#include "cvz_tiles.hpp"
#include CVZ_OP_BODY
}  // namespace generic
}  // namespace cvz

#if CVZ_X86
CVZ_TARGET_PUSH("avx2,fma,f16c")
namespace cvz {
namespace avx2 {
constexpr Isa THIS_ISA = ISA_AVX2;
#include "cvz_simd_avx2.hpp"
#include "cvz_layout.hpp"
#include "cvz_tiles.hpp"
#include CVZ_OP_BODY
}  // namespace avx2
}  // namespace cvz
CVZ_TARGET_POP

CVZ_TARGET_PUSH("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")
namespace cvz {
namespace avx512 {
constexpr Isa THIS_ISA = ISA_AVX512;
#include "cvz_simd_avx512.hpp"
#include "cvz_layout.hpp"
#include "cvz_tiles.hpp"
#include CVZ_OP_BODY
}  // namespace avx512
}  // namespace cvz
CVZ_TARGET_POP

// {float, double} instantiations of the body's template `fn`, one row per ISA.
#define CVZ_ISA_TABLE(fn)                                    \
    {                                                        \
        {&generic::fn<float>, &generic::fn<double>},         \
        {&avx2::fn<float>, &avx2::fn<double>},               \
        {&avx512::fn<float>, &avx512::fn<double>},           \
    }
#else
#define CVZ_ISA_TABLE(fn) \
    {                     \
        {&generic::fn<float>, &generic::fn<double>}, \
    }
#endif  // CVZ_X86

#undef CVZ_PER_ISA_PASS
