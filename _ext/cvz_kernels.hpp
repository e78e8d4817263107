// convviz compute kernels, compiled for several instruction sets in one
// portable build (no -march=native): cvz_body.hpp is instantiated below for
// AVX-512, for AVX2+FMA and for plain C++, and cvz_isa_best() picks at run
// time the best one this CPU (and OS) supports.
#pragma once

#include "cvz_common.hpp"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CVZ_X86 1
#include <immintrin.h>
#else
#define CVZ_X86 0
#endif

namespace cvz {

enum Isa : int { ISA_GENERIC = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };

// ----------------------------------------------------------- generic C++
namespace generic {
template <class T>
struct Simd {
    typedef T vec;
    static const int V = 1;
    static inline vec zero() { return T(0); }
    static inline vec load(const T* p) { return *p; }
    static inline void store(T* p, vec v) { *p = v; }
    static inline vec set1(T x) { return x; }
    static inline vec fma(vec a, vec b, vec c) { return a * b + c; }
    static inline void keep(vec&) {}
    static const bool HALF = false;  // half types convert with the scalar code
    static const int TBLOCK = 0;     // no register transpose: layouts move element by element
    static inline void transpose(const T*, idx, T*, idx) {}
    static inline vec load_f16(const std::uint16_t* p) { return (T)f16_to_f32(*p); }
    static inline vec load_bf16(const std::uint16_t* p) { return (T)bf16_to_f32(*p); }
    static inline void store_f16(std::uint16_t* p, vec v) { *p = f32_to_f16((float)v); }
    static inline void store_bf16(std::uint16_t* p, vec v) { *p = f32_to_bf16((float)v); }
};
#define ISA_MR2 4
#define ISA_MR1 4
#define ISA_TAPS 9
#define ISA_BLOCKED_TAPS 0
#define ISA_FUSED 0
#include "cvz_body.hpp"
#undef ISA_FUSED
#undef ISA_MR2
#undef ISA_MR1
#undef ISA_TAPS
#undef ISA_BLOCKED_TAPS
}  // namespace generic

#if CVZ_X86
// ----------------------------------------------------------- AVX2 + FMA
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
template <class T>
struct Simd;
template <>
struct Simd<float> {
    typedef __m256 vec;
    static const int V = 8;
    static inline vec zero() { return _mm256_setzero_ps(); }
    static inline vec load(const float* p) { return _mm256_loadu_ps(p); }
    static inline void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
    static inline vec set1(float x) { return _mm256_set1_ps(x); }
    static inline vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
    // Keep a loaded value in a register: stops the compiler re-loading it per use.
    static inline void keep(vec& v) { __asm__("" : "+x"(v)); }
    static const int TBLOCK = 8;
    // dst row i = column i of the 8 x 8 block whose row r starts at src + r * ss.
    static inline void transpose(const float* src, idx ss, float* dst, idx ds) {
        __m256 r[8], t[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ss);
        for (int i = 0; i < 4; ++i) {
            t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        for (int i = 0; i < 2; ++i) {
            r[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
            r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
            r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
            r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
        }
        for (int i = 0; i < 4; ++i) {
            _mm256_storeu_ps(dst + i * ds, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
            _mm256_storeu_ps(dst + (i + 4) * ds, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
        }
    }
    static const bool HALF = true;
    static inline vec load_f16(const std::uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }
    static inline vec load_bf16(const std::uint16_t* p) {
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16));
    }
    static inline void store_f16(std::uint16_t* p, vec v) {
        _mm_storeu_si128((__m128i*)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    static inline void store_bf16(std::uint16_t* p, vec v) {
        // Round to nearest even on the bits; NaN stays NaN (quiet).
        const __m256i u = _mm256_castps_si256(v);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                               _mm256_set1_epi32(0x7f800000));
        const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
        r = _mm256_blendv_epi8(r, quiet, nan);
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i*)p, _mm256_castsi256_si128(packed));
    }
};
template <>
struct Simd<double> {
    typedef __m256d vec;
    static const int V = 4;
    static inline vec zero() { return _mm256_setzero_pd(); }
    static inline vec load(const double* p) { return _mm256_loadu_pd(p); }
    static inline void store(double* p, vec v) { _mm256_storeu_pd(p, v); }
    static inline vec set1(double x) { return _mm256_set1_pd(x); }
    static inline vec fma(vec a, vec b, vec c) { return _mm256_fmadd_pd(a, b, c); }
    static inline void keep(vec& v) { __asm__("" : "+x"(v)); }
    static const bool HALF = false;
    static const int TBLOCK = 0;
    static inline void transpose(const double*, idx, double*, idx) {}
    static inline vec load_f16(const std::uint16_t*) { return zero(); }
    static inline vec load_bf16(const std::uint16_t*) { return zero(); }
    static inline void store_f16(std::uint16_t*, vec) {}
    static inline void store_bf16(std::uint16_t*, vec) {}
};
#define ISA_MR2 6
#define ISA_MR1 12
#define ISA_TAPS 9
#define ISA_BLOCKED_TAPS 9
#define ISA_TW3 4
#define ISA_FUSED 1
#define ISA_MR_FUSED 8
#define ISA_MR_FUSED2 4
#include "cvz_body.hpp"
#undef ISA_FUSED
#undef ISA_MR_FUSED
#undef ISA_MR_FUSED2
#undef ISA_MR2
#undef ISA_MR1
#undef ISA_TAPS
#undef ISA_BLOCKED_TAPS
#undef ISA_TW3
}  // namespace avx2
#pragma GCC pop_options

// ----------------------------------------------------------- AVX-512
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")
namespace avx512 {
template <class T>
struct Simd;
template <>
struct Simd<float> {
    typedef __m512 vec;
    static const int V = 16;
    static inline vec zero() { return _mm512_setzero_ps(); }
    static inline vec load(const float* p) { return _mm512_loadu_ps(p); }
    static inline void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
    static inline vec set1(float x) { return _mm512_set1_ps(x); }
    static inline vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
    static inline void keep(vec& v) { __asm__("" : "+v"(v)); }
    static const int TBLOCK = 16;
    // dst row i = column i of the 16 x 16 block whose row r starts at src + r * ss.
    static inline void transpose(const float* src, idx ss, float* dst, idx ds) {
        __m512 r[16], t[16];
        for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ss);
        for (int i = 0; i < 8; ++i) {
            t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        for (int i = 0; i < 4; ++i) {
            r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
            r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
            r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
            r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
        }
        for (int h = 0; h < 2; ++h)
            for (int i = 0; i < 4; ++i) {
                t[8 * h + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + i + 4], 0x88);
                t[8 * h + i + 4] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + i + 4], 0xdd);
            }
        for (int i = 0; i < 8; ++i) {
            _mm512_storeu_ps(dst + i * ds, _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88));
            _mm512_storeu_ps(dst + (i + 8) * ds, _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd));
        }
    }
    static const bool HALF = true;
    static inline vec load_f16(const std::uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p)); }
    static inline vec load_bf16(const std::uint16_t* p) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p)), 16));
    }
    static inline void store_f16(std::uint16_t* p, vec v) {
        _mm256_storeu_si256((__m256i*)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    static inline void store_bf16(std::uint16_t* p, vec v) {
        // Round to nearest even on the bits; NaN stays NaN (quiet).
        const __m512i u = _mm512_castps_si512(v);
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                      _mm512_set1_epi32(0x7f800000));
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
        _mm256_storeu_si256((__m256i*)p, _mm512_cvtepi32_epi16(r));
    }
};
template <>
struct Simd<double> {
    typedef __m512d vec;
    static const int V = 8;
    static inline vec zero() { return _mm512_setzero_pd(); }
    static inline vec load(const double* p) { return _mm512_loadu_pd(p); }
    static inline void store(double* p, vec v) { _mm512_storeu_pd(p, v); }
    static inline vec set1(double x) { return _mm512_set1_pd(x); }
    static inline vec fma(vec a, vec b, vec c) { return _mm512_fmadd_pd(a, b, c); }
    static inline void keep(vec& v) { __asm__("" : "+v"(v)); }
    static const bool HALF = false;
    static const int TBLOCK = 0;
    static inline void transpose(const double*, idx, double*, idx) {}
    static inline vec load_f16(const std::uint16_t*) { return zero(); }
    static inline vec load_bf16(const std::uint16_t*) { return zero(); }
    static inline void store_f16(std::uint16_t*, vec) {}
    static inline void store_bf16(std::uint16_t*, vec) {}
};
#define ISA_MR2 14
#define ISA_MR1 24
#define ISA_TAPS 12
#define ISA_BLOCKED_TAPS 25
#define ISA_TW3 8
#define ISA_TW5 4
#define ISA_FUSED 1
#define ISA_MR_FUSED 16
#define ISA_MR_FUSED2 8
#include "cvz_body.hpp"
#undef ISA_FUSED
#undef ISA_MR_FUSED
#undef ISA_MR_FUSED2
#undef ISA_MR2
#undef ISA_MR1
#undef ISA_TAPS
#undef ISA_BLOCKED_TAPS
#undef ISA_TW3
#undef ISA_TW5
}  // namespace avx512
#pragma GCC pop_options
#endif  // CVZ_X86

// ----------------------------------------------------------- dispatch
static inline int isa_best() {
#if CVZ_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("f16c"))
        return ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        return ISA_AVX2;
#endif
    return ISA_GENERIC;
}

}  // namespace cvz

// Entry points for the Cython modules (plain functions, no templates).
static inline int cvz_isa_best() { return cvz::isa_best(); }

static inline int cvz_isa_compiled(int isa) {
#if CVZ_X86
    return isa >= 0 && isa <= 2;
#else
    return isa == 0;
#endif
}

static inline void cvz_input_grad_prepare(cvz::InputGradArgs* a, int isa, int f64) {
    using namespace cvz;
#if CVZ_X86
    if (isa == ISA_AVX512) { if (f64) avx512::input_grad_prepare<double>(a); else avx512::input_grad_prepare<float>(a); return; }
    if (isa == ISA_AVX2) { if (f64) avx2::input_grad_prepare<double>(a); else avx2::input_grad_prepare<float>(a); return; }
#endif
    if (f64) generic::input_grad_prepare<double>(a); else generic::input_grad_prepare<float>(a);
}

static inline void cvz_input_grad_pack(const cvz::InputGradArgs* a, int isa, int f64) {
    using namespace cvz;
#if CVZ_X86
    if (isa == ISA_AVX512) { if (f64) avx512::input_grad_pack<double>(a); else avx512::input_grad_pack<float>(a); return; }
    if (isa == ISA_AVX2) { if (f64) avx2::input_grad_pack<double>(a); else avx2::input_grad_pack<float>(a); return; }
#endif
    if (f64) generic::input_grad_pack<double>(a); else generic::input_grad_pack<float>(a);
}

static inline void cvz_input_grad_row(const cvz::InputGradArgs* a, int isa, int f64, cvz::idx row, void* scratch) {
    using namespace cvz;
#if CVZ_X86
    if (isa == ISA_AVX512) { if (f64) avx512::input_grad_row<double>(a, row, scratch); else avx512::input_grad_row<float>(a, row, scratch); return; }
    if (isa == ISA_AVX2) { if (f64) avx2::input_grad_row<double>(a, row, scratch); else avx2::input_grad_row<float>(a, row, scratch); return; }
#endif
    if (f64) generic::input_grad_row<double>(a, row, scratch); else generic::input_grad_row<float>(a, row, scratch);
}

static inline void cvz_filter_grad_prepare(cvz::FilterGradArgs* a, int isa, int f64) {
    using namespace cvz;
#if CVZ_X86
    if (isa == ISA_AVX512) { if (f64) avx512::filter_grad_prepare<double>(a); else avx512::filter_grad_prepare<float>(a); return; }
    if (isa == ISA_AVX2) { if (f64) avx2::filter_grad_prepare<double>(a); else avx2::filter_grad_prepare<float>(a); return; }
#endif
    if (f64) generic::filter_grad_prepare<double>(a); else generic::filter_grad_prepare<float>(a);
}

static inline void cvz_filter_grad_block(const cvz::FilterGradArgs* a, int isa, int f64, cvz::idx block,
                                         void* scratch, const cvz::idx* ow_first, const cvz::idx* ow_last) {
    using namespace cvz;
#if CVZ_X86
    if (isa == ISA_AVX512) { if (f64) avx512::filter_grad_block<double>(a, block, scratch, ow_first, ow_last); else avx512::filter_grad_block<float>(a, block, scratch, ow_first, ow_last); return; }
    if (isa == ISA_AVX2) { if (f64) avx2::filter_grad_block<double>(a, block, scratch, ow_first, ow_last); else avx2::filter_grad_block<float>(a, block, scratch, ow_first, ow_last); return; }
#endif
    if (f64) generic::filter_grad_block<double>(a, block, scratch, ow_first, ow_last); else generic::filter_grad_block<float>(a, block, scratch, ow_first, ow_last);
}

static inline void cvz_filter_grad_merge(const cvz::FilterGradArgs* a, int isa, int f64, cvz::idx tap_begin, cvz::idx tap_end) {
    using namespace cvz;
    // The merge is a plain sum in block order; it does not depend on the ISA.
    (void)isa;
    if (f64) generic::filter_grad_merge<double>(a, tap_begin, tap_end); else generic::filter_grad_merge<float>(a, tap_begin, tap_end);
}

static inline void* cvz_alloc(std::size_t bytes) { return cvz::alloc_zeroed(bytes); }
static inline void cvz_free(void* p) { cvz::free_aligned(p); }
