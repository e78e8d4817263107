// Simd<float> and Simd<double> for AVX-512 (F, VL, BW, DQ) + F16C (see
// cvz_simd_generic.hpp for the traits).  Included by cvz_per_isa.hpp inside
// namespace cvz::avx512 and that instruction set's target region (no include
// guard on purpose).
//
// Unmasked AVX-512 intrinsics that take GCC 12's _mm512_undefined_*() as their
// pass-through operand make it warn -Wmaybe-uninitialized wherever they inline
// (GCC PR 105593).  Their zero-masked forms with an all-ones mask compile to
// the same instructions and pass nothing undefined, so they are used instead.
static const __mmask16 ALL16 = (__mmask16)0xffff;

template <class T>
struct Simd;
template <>
struct Simd<float> {
    typedef __m512 vec;
    static const int V = 16;
    static inline vec zero() { return _mm512_setzero_ps(); }
    static inline vec load(const float* p) { return _mm512_loadu_ps(p); }
    static inline void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
    // The first n lanes (1 <= n <= V), the others zero / left as they are: nothing past
    // them is touched (a channel remainder read and written in place).
    static inline vec load_first(const float* p, idx n) { return _mm512_maskz_loadu_ps(first_mask(n), p); }
    static inline void store_first(float* p, vec v, idx n) { _mm512_mask_storeu_ps(p, first_mask(n), v); }
    static inline __mmask16 first_mask(idx n) { return (__mmask16)((1u << n) - 1u); }
    static inline void stream(float* p, vec v) { _mm512_stream_ps(p, v); }
    static inline void fence() { _mm_sfence(); }
    static inline vec set1(float x) { return _mm512_set1_ps(x); }
    static inline vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
    static inline vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
#if defined(__GNUC__)
    static inline void keep(vec& v) { __asm__("" : "+v"(v)); }
#else
    static inline void keep(vec&) {}
#endif
    static const int TBLOCK = 16;
    // dst row i = column i of the 16 x 16 block whose row r starts at src + r * ss.
    static inline void transpose(const float* src, idx ss, float* dst, idx ds) {
        __m512 r[16], t[16];
        for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ss);
        for (int i = 0; i < 8; ++i) {
            t[2 * i] = _mm512_maskz_unpacklo_ps(ALL16, r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_maskz_unpackhi_ps(ALL16, r[2 * i], r[2 * i + 1]);
        }
        for (int i = 0; i < 4; ++i) {
            r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
            r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
            r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
            r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
        }
        for (int h = 0; h < 2; ++h)
            for (int i = 0; i < 4; ++i) {
                t[8 * h + i] = _mm512_maskz_shuffle_f32x4(ALL16, r[8 * h + i], r[8 * h + i + 4], 0x88);
                t[8 * h + i + 4] = _mm512_maskz_shuffle_f32x4(ALL16, r[8 * h + i], r[8 * h + i + 4], 0xdd);
            }
        for (int i = 0; i < 8; ++i) {
            _mm512_storeu_ps(dst + i * ds, _mm512_maskz_shuffle_f32x4(ALL16, t[i], t[i + 8], 0x88));
            _mm512_storeu_ps(dst + (i + 8) * ds, _mm512_maskz_shuffle_f32x4(ALL16, t[i], t[i + 8], 0xdd));
        }
    }
    static const bool HALF = true;
    static inline vec load_f16(const std::uint16_t* p) {
        return _mm512_maskz_cvtph_ps(ALL16, _mm256_loadu_si256((const __m256i*)p));
    }
    static inline vec load_bf16(const std::uint16_t* p) {
        const __m512i wide = _mm512_maskz_cvtepu16_epi32(ALL16, _mm256_loadu_si256((const __m256i*)p));
        return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(ALL16, wide, 16));
    }
    static inline void store_f16(std::uint16_t* p, vec v) {
        const __m256i half = _mm512_maskz_cvtps_ph(ALL16, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i*)p, half);
    }
    static inline void store_bf16(std::uint16_t* p, vec v) {
        // Round to nearest even on the bits; NaN stays NaN (quiet).
        const __m512i u = _mm512_castps_si512(v);
        const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(ALL16, u, 16), _mm512_set1_epi32(1));
        const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
        __m512i r = _mm512_maskz_srli_epi32(ALL16, rounded, 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                      _mm512_set1_epi32(0x7f800000));
        const __m512i quiet = _mm512_or_si512(_mm512_maskz_srli_epi32(ALL16, u, 16), _mm512_set1_epi32(0x40));
        r = _mm512_mask_mov_epi32(r, nan, quiet);
        _mm256_storeu_si256((__m256i*)p, _mm512_maskz_cvtepi32_epi16(ALL16, r));
    }
};
template <>
struct Simd<double> {
    typedef __m512d vec;
    static const int V = 8;
    static inline vec zero() { return _mm512_setzero_pd(); }
    static inline vec load(const double* p) { return _mm512_loadu_pd(p); }
    static inline void store(double* p, vec v) { _mm512_storeu_pd(p, v); }
    static inline vec load_first(const double* p, idx n) { return _mm512_maskz_loadu_pd(first_mask(n), p); }
    static inline void store_first(double* p, vec v, idx n) { _mm512_mask_storeu_pd(p, first_mask(n), v); }
    static inline __mmask8 first_mask(idx n) { return (__mmask8)((1u << n) - 1u); }
    static inline void stream(double* p, vec v) { _mm512_stream_pd(p, v); }
    static inline void fence() { _mm_sfence(); }
    static inline vec set1(double x) { return _mm512_set1_pd(x); }
    static inline vec fma(vec a, vec b, vec c) { return _mm512_fmadd_pd(a, b, c); }
    static inline vec add(vec a, vec b) { return _mm512_add_pd(a, b); }
#if defined(__GNUC__)
    static inline void keep(vec& v) { __asm__("" : "+v"(v)); }
#else
    static inline void keep(vec&) {}
#endif
    // No half conversions or register transpose: cvz_layout.hpp uses them only
    // under `if constexpr (HALF)` / `(TBLOCK > 0)`, so double needs neither.
    static const bool HALF = false;
    static const int TBLOCK = 0;
};
