// Simd<T> for plain C++: one element per "vector".  Included by cvz_per_isa.hpp
// inside namespace cvz::generic (no include guard on purpose).
//
// The traits every kernel body is written against: vec, V (elements per vector),
// zero, load, store, set1, fma, keep (hold a value in a register), TBLOCK and
// transpose (a TBLOCK x TBLOCK register transpose, 0 = none), HALF (vector
// half-type conversions) with load_f16/load_bf16/store_f16/store_bf16.
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
