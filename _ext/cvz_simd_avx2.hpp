// Simd<float> and Simd<double> for AVX2 + FMA + F16C (see cvz_simd_generic.hpp
// for the traits).  Included by cvz_per_isa.hpp inside namespace cvz::avx2 and
// that instruction set's target region (no include guard on purpose).
template <class T>
struct Simd;
template <>
struct Simd<float> {
    typedef __m256 vec;
    static const int V = 8;
    static inline vec zero() { return _mm256_setzero_ps(); }
    static inline vec load(const float* p) { return _mm256_loadu_ps(p); }
    static inline void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
    // The first n lanes (1 <= n <= V), the others zero / left as they are: nothing past
    // them is touched (a channel remainder read and written in place).
    static inline vec load_first(const float* p, idx n) { return _mm256_maskload_ps(p, first_mask(n)); }
    static inline void store_first(float* p, vec v, idx n) { _mm256_maskstore_ps(p, first_mask(n), v); }
    static inline __m256i first_mask(idx n) {
        return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    static inline void stream(float* p, vec v) { _mm256_stream_ps(p, v); }
    static inline void fence() { _mm_sfence(); }
    static inline vec set1(float x) { return _mm256_set1_ps(x); }
    static inline vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
    static inline vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
    // Keep a loaded value in a register: stops the compiler re-loading it per use
    // (an empty asm; compilers without GNU asm do without).
#if defined(__GNUC__)
#if defined(__GNUC__)
    static inline void keep(vec& v) { __asm__("" : "+x"(v)); }
#else
    static inline void keep(vec&) {}
#endif
#else
    static inline void keep(vec&) {}
#endif
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
    static inline vec load_first(const double* p, idx n) { return _mm256_maskload_pd(p, first_mask(n)); }
    static inline void store_first(double* p, vec v, idx n) { _mm256_maskstore_pd(p, first_mask(n), v); }
    static inline __m256i first_mask(idx n) {
        return _mm256_cmpgt_epi64(_mm256_set1_epi64x((long long)n), _mm256_setr_epi64x(0, 1, 2, 3));
    }
    static inline void stream(double* p, vec v) { _mm256_stream_pd(p, v); }
    static inline void fence() { _mm_sfence(); }
    static inline vec set1(double x) { return _mm256_set1_pd(x); }
    static inline vec fma(vec a, vec b, vec c) { return _mm256_fmadd_pd(a, b, c); }
    static inline vec add(vec a, vec b) { return _mm256_add_pd(a, b); }
#if defined(__GNUC__)
    static inline void keep(vec& v) { __asm__("" : "+x"(v)); }
#else
    static inline void keep(vec&) {}
#endif
    // No half conversions or register transpose: cvz_layout.hpp uses them only
    // under `if constexpr (HALF)` / `(TBLOCK > 0)`, so double needs neither.
    static const bool HALF = false;
    static const int TBLOCK = 0;
};
