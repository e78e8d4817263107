// Simd<T> for plain C++: one element per "vector".  Included by cvz_per_isa.hpp
// inside namespace cvz::generic (no include guard on purpose).
//
// The traits every kernel body is written against: vec, V (elements per vector),
// zero, load, store, load_first / store_first (the first n lanes only, nothing
// past them touched), stream (a store that bypasses the caches, to an address
// aligned to the vector; fence() makes a thread's streamed stores visible), set1, fma, add, keep (hold a value in a register), TBLOCK and,
// when it is > 0, transpose (a TBLOCK x TBLOCK register transpose), HALF and,
// when it is true, load_f16/load_bf16/store_f16/store_bf16 (vector half-type
// conversions).
template <class T>
struct Simd {
    typedef T vec;
    static const int V = 1;
    static inline vec zero() { return T(0); }
    static inline vec load(const T* p) { return *p; }
    static inline void store(T* p, vec v) { *p = v; }
    static inline vec load_first(const T* p, idx) { return *p; }  // (n is 1: a vector of one)
    static inline void store_first(T* p, vec v, idx) { *p = v; }
    static inline void stream(T* p, vec v) { *p = v; }
    static inline void fence() {}
    static inline vec set1(T x) { return x; }
    static inline vec fma(vec a, vec b, vec c) { return a * b + c; }
    static inline vec add(vec a, vec b) { return a + b; }
    static inline void keep(vec&) {}
    // Half types convert with the scalar code, and layouts move element by element
    // (no register transpose): cvz_layout.hpp asks for neither when these are off.
    static const bool HALF = false;
    static const int TBLOCK = 0;
};
