// Shared, ISA-independent pieces of the convviz kernels: portability macros,
// element types and their exact conversions, aligned scratch memory.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#if defined(_MSC_VER)
#include <malloc.h>
#endif
#if (defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86))
#if defined(_MSC_VER)
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#endif

// x86 (32 or 64 bit) with the SIMD intrinsics: GCC, clang and MSVC.
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)
#define CVZ_X86 1
#else
#define CVZ_X86 0
#endif

// CVZ_UNROLL(n): unroll the next loop n times (GCC and clang spell it
// differently; MSVC has no such pragma and gets nothing).
#define CVZ_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define CVZ_UNROLL(n) CVZ_PRAGMA(unroll n)
#elif defined(__GNUC__)
#define CVZ_UNROLL(n) CVZ_PRAGMA(GCC unroll n)
#else
#define CVZ_UNROLL(n)
#endif

namespace cvz {

// Two memory habits that change no result but whose worth depends on the core
// (each measured on both): software prefetches of the next row pass into L2
// (RowPrefetch) and of the depthwise filter gradient's next tile into L1, and
// staging input rows whose vectors would straddle cache lines (the depthwise
// forward pass with a row stride).  AMD Zen 4: both pay
// (one core, dwc_stride2 2.6 -> 2.15 ms with the prefetch; read in place it
// took 1.02-1.23x the staged time).  Intel Xeon (AVX-512): neither (2 threads,
// dwc_stride2 1.56 -> 0.90 ms read in place, then 0.90 -> 0.83 ms without the
// prefetch; dwc_k5 and dwi_mobilenet 0.93-0.96x without it; dwf_mobilenet 0.42-0.44
// -> 0.34-0.37 ms without the L1 prefetch).  Other CPUs take
// Intel's habits: no software prefetch, no extra copies.
inline bool cpu_is_amd() {
#if CVZ_X86
    static const bool amd = [] {
        unsigned regs[4] = {0, 0, 0, 0};
#if defined(_MSC_VER)
        int r[4];
        __cpuid(r, 0);
        for (int i = 0; i < 4; ++i) regs[i] = (unsigned)r[i];
#else
        __get_cpuid(0, &regs[0], &regs[1], &regs[2], &regs[3]);
#endif
        return regs[1] == 0x68747541u && regs[3] == 0x69746e65u && regs[2] == 0x444d4163u;  // "AuthenticAMD"
    }();
    return amd;
#else
    return false;
#endif
}
inline bool row_prefetch_pays() { return cpu_is_amd(); }
inline bool split_line_loads_cost() { return cpu_is_amd(); }

}  // namespace cvz

// CVZ_PREFETCH(p): fetch the cache line holding p into L1 ahead of its use (a
// hint, with no effect on any result; nothing where the compiler has none).
#if defined(__GNUC__) || defined(__clang__)
#define CVZ_PREFETCH(p) __builtin_prefetch((const void*)(p), 0, 3)
#else
#define CVZ_PREFETCH(p) ((void)(p))
#endif

// CVZ_PREFETCH_L2(p): the same into L2 only (a streaming read ahead of its use
// that should not push the working set out of L1).
#if defined(__GNUC__) || defined(__clang__)
#define CVZ_PREFETCH_L2(p) __builtin_prefetch((const void*)(p), 0, 2)
#else
#define CVZ_PREFETCH_L2(p) ((void)(p))
#endif

// CVZ_OPAQUE(v): the compiler forgets what it knows about v's value, so a
// pointer stepped by a run-time stride stays one register bumped by an add
// rather than a table of precomputed offsets spilled to the stack.
#if defined(__GNUC__) || defined(__clang__)
#define CVZ_OPAQUE(v) __asm__("" : "+r"(v))
#else
#define CVZ_OPAQUE(v) ((void)0)
#endif

// Keep a rarely taken path out of its caller's hot loop.
#if defined(_MSC_VER)
#define CVZ_NOINLINE __declspec(noinline)
#else
#define CVZ_NOINLINE __attribute__((noinline))
#endif

namespace cvz {

typedef std::ptrdiff_t idx;

// Results at least this big are written with streaming stores where a kernel
// can (aligned vectors): far bigger than the per-core caches, they would only
// evict the inputs still to be read.
constexpr idx STREAM_MIN_BYTES = idx(8) << 20;

// How many staged rows a row kernel keeps: the rows one output row reads span
// (KH - 1) * dh + 1 rows, and any such span holds distinct residues, so with that
// many slots row r can live in slot r % slots and a row that serves consecutive
// output rows is staged once (a ring).  A span too big to keep (large dilation)
// gets KH slots, one per kernel row; ring_kept() tells which.
static inline bool ring_kept(idx KH, idx dh, idx row_bytes) {
    const idx span = (KH - 1) * dh + 1;
    return span * row_bytes <= (idx(256) << 10) || span == KH;
}
static inline idx ring_slots(idx KH, idx dh, idx row_bytes) {
    return ring_kept(KH, dh, row_bytes) ? (KH - 1) * dh + 1 : KH;
}

// Whether every vector of V elements of T at p + n*s[0] + h*s[1] + w*s[2] + c
// (c a multiple of V) is aligned to its size.
template <class T>
static inline bool vectors_aligned(const void* p, const idx* s, idx V) {
    return (std::uintptr_t)p % (V * sizeof(T)) == 0 && s[0] % V == 0 && s[1] % V == 0 && s[2] % V == 0;
}

// The last-level cache's size in bytes as cpuid describes it (Intel leaf 4,
// AMD leaf 0x8000001D: the largest data or unified cache), 0 when unknown.
inline idx cpu_llc_bytes() {
#if CVZ_X86 && !defined(_MSC_VER)
    static const idx bytes = [] {
        const bool amd = cpu_is_amd();
        const unsigned leaf = amd ? 0x8000001Du : 4u;
        if ((unsigned)__get_cpuid_max(leaf & 0x80000000u, nullptr) < leaf) return idx(0);
        unsigned a = 0, b = 0, c = 0, d = 0;
        idx best = 0;
        for (unsigned i = 0; i < 16; ++i) {
            __cpuid_count(leaf, i, a, b, c, d);
            const unsigned type = a & 31u;  // 0: no more caches; 1 data, 2 instruction, 3 unified
            if (type == 0) break;
            if (type == 2) continue;
            const idx ways = ((b >> 22) & 0x3ffu) + 1, partitions = ((b >> 12) & 0x3ffu) + 1, line = (b & 0xfffu) + 1;
            const idx size = ways * partitions * line * (idx)(c + 1);  // c + 1 sets
            if (size > best) best = size;
        }
        return best;
    }();
    return bytes;
#else
    return 0;
#endif
}

// Whether a kernel storing such vectors (s[3] == 1), `rows` rows of s[1]
// elements in all, may use streaming stores: every vector aligned and a whole
// cache line, and the result too big to stay in the last-level cache with the
// call's inputs: at least STREAM_MIN_BYTES and a quarter of that cache.  The
// depthwise kernels store a tile's pixels one channel vector at a time, so a
// narrower vector leaves a line half written until a later pass: an Intel Xeon
// then flushes partial lines from its write-combining buffers (AVX2 kernels, 2
// threads: dwc_mobilenet 4.0 ms streamed, dwi_mobilenet 4.1 ms, against
// 0.8-0.9 ms with AVX-512's full-line vectors).  And a result that fits the
// cache is better left there for whoever reads it next (the same Xeon, 260 MiB
// L3, 12.8 MB results: dwc_mobilenet 0.90 -> 0.66 ms, dwi_mobilenet 0.86 ->
// 0.72 ms, dwi_stride2 1.3-1.5 -> 1.07-1.17 ms unstreamed; a Zen 4's 32 MiB
// L3 keeps the 8 MB threshold).
template <class T>
static inline bool streamable(const void* out, const idx* s, idx rows, idx V) {
    const idx bytes = rows * s[1] * (idx)sizeof(T);
    return vectors_aligned<T>(out, s, V) && V * (idx)sizeof(T) >= 64 && s[3] == 1 && bytes >= STREAM_MIN_BYTES &&
           bytes >= cpu_llc_bytes() / 4;
}

// Element types as the Python side names them (see convviz/_backends/cpu.py).
enum DType : int { F16 = 0, BF16 = 1, F32 = 2, F64 = 3 };

static inline idx dtype_bytes(int type) { return type == F64 ? 8 : type == F32 ? 4 : 2; }

// Byte ranges to fetch into L2 a few lines at a time, spread over the work of a
// row pass, so that the rows the next pass reads first arrive while this one
// computes (a row pass otherwise waits on memory while it stages or first reads
// them: one core, dwc_stride2 2.6 -> 2.15 ms, dwc_mobilenet 1.7 -> 1.2-1.4 ms).
struct RowPrefetch {
    const char* start[8];
    idx bytes[8];
    int n = 0, at = 0;
    idx offset = 0, total = 0;

    // Rows next[0..k) of image n_next of the [N][rows][cols][channels] array at
    // base (element strides s, channels contiguous) that are not rows cur[0..j)
    // of image n_cur; a row index < 0 is no row.
    void add_new_rows(const void* base, int type, const idx* s, idx cols, idx channels, idx n_next, const idx* next,
                      idx k, idx n_cur, const idx* cur, idx j) {
        if (s[3] != 1 || !row_prefetch_pays()) return;  // channels strided: a row is no one range
        const idx elem = dtype_bytes(type);
        for (idx a = 0; a < k; ++a) {
            if (next[a] < 0) continue;
            bool read_now = false;
            for (idx b = 0; b < j; ++b) read_now |= n_cur == n_next && cur[b] == next[a];
            if (!read_now && n < 8) {
                start[n] = (const char*)base + (n_next * s[0] + next[a] * s[1]) * elem;
                bytes[n] = ((cols - 1) * s[2] + channels) * elem;
                total += bytes[n++];
            }
        }
    }
    // The rows that row pass `pass` + 1 (of `passes`, per_image to an image)
    // reads and pass `pass` does not: row_of(pass, kh) is the row kernel row kh
    // of a pass reads, or < 0 for none (the rule the row pass itself follows).
    template <class RowOf>
    void add_next_pass(const void* base, int type, const idx* s, idx cols, idx channels, idx pass, idx passes,
                       idx per_image, idx KH, RowOf&& row_of) {
        if (pass + 1 >= passes) return;
        idx next[16], cur[16];
        const idx k = KH < 16 ? KH : 16;
        for (idx kh = 0; kh < k; ++kh) {
            next[kh] = row_of(pass + 1, kh);
            cur[kh] = row_of(pass, kh);
        }
        add_new_rows(base, type, s, cols, channels, (pass + 1) / per_image, next, k, pass / per_image, cur, k);
    }
    // Fetch the next `lines` cache lines of the ranges.
    void step(idx lines) {
        for (; lines > 0 && at < n; --lines) {
            CVZ_PREFETCH_L2(start[at] + offset);
            offset += 64;
            if (offset >= bytes[at]) {
                ++at;
                offset = 0;
            }
        }
    }
    // Lines per step to fetch everything in `steps` steps.
    idx lines_per(idx steps) const { return total / 64 / (steps > 0 ? steps : 1) + 1; }
};

// ---------------------------------------------------------------- conversions
// Bit-exact and round-to-nearest-even, as NumPy (float16) and ml_dtypes
// (bfloat16) convert, so a half result equals float32 result .astype(half).
static inline float f16_to_f32(std::uint16_t h) {
    std::uint32_t sign = (std::uint32_t)(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {  // subnormal: normalise
            int shift = 0;
            while (!(man & 0x400u)) { man <<= 1; ++shift; }
            man &= 0x3ffu;
            bits = sign | ((std::uint32_t)(113 - shift) << 23) | (man << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);  // inf / nan (payload kept)
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

static inline std::uint16_t f32_to_f16(float f) {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    std::uint32_t sign = (x >> 16) & 0x8000u;
    std::uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {  // inf or nan
        if (absx == 0x7f800000u) return (std::uint16_t)(sign | 0x7c00u);
        std::uint32_t payload = (absx >> 13) & 0x3ffu;
        return (std::uint16_t)(sign | 0x7c00u | (payload ? payload : 0x200u));
    }
    if (absx >= 0x477ff000u) return (std::uint16_t)(sign | 0x7c00u);  // rounds to inf
    std::uint32_t exp = absx >> 23;
    if (exp < 113) {  // result is subnormal or zero
        if (exp < 102) return (std::uint16_t)sign;  // below half the smallest subnormal
        std::uint32_t man = (absx & 0x7fffffu) | 0x800000u;
        std::uint32_t shift = 126 - exp;  // 14..24
        std::uint32_t half_man = man >> shift;
        std::uint32_t rest = man & ((1u << shift) - 1u);
        std::uint32_t halfway = 1u << (shift - 1);
        if (rest > halfway || (rest == halfway && (half_man & 1u))) ++half_man;
        return (std::uint16_t)(sign | half_man);
    }
    std::uint32_t half = ((exp - 112) << 10) | ((absx >> 13) & 0x3ffu);
    std::uint32_t rest = absx & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into exp: fine
    return (std::uint16_t)(sign | half);
}

static inline float bf16_to_f32(std::uint16_t h) {
    std::uint32_t bits = (std::uint32_t)h << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

static inline std::uint16_t f32_to_bf16(float f) {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (std::uint16_t)((x >> 16) | 0x40u);  // quiet nan
    x += 0x7fffu + ((x >> 16) & 1u);
    return (std::uint16_t)(x >> 16);
}

template <class CT>
static inline CT load_as(const void* base, int type, idx i) {
    switch (type) {
        case F16: return (CT)f16_to_f32(((const std::uint16_t*)base)[i]);
        case BF16: return (CT)bf16_to_f32(((const std::uint16_t*)base)[i]);
        case F32: return (CT)((const float*)base)[i];
        default: return (CT)((const double*)base)[i];
    }
}

template <class CT>
static inline void store_as(void* base, int type, idx i, CT v) {
    switch (type) {
        case F16: ((std::uint16_t*)base)[i] = f32_to_f16((float)v); break;
        case BF16: ((std::uint16_t*)base)[i] = f32_to_bf16((float)v); break;
        case F32: ((float*)base)[i] = (float)v; break;
        default: ((double*)base)[i] = (double)v; break;
    }
}

// ------------------------------------------------------------------ memory
// The bytes an allocation of `bytes` takes: whole 64-byte lines, at least one.
static inline std::size_t aligned_bytes(std::size_t bytes) {
    return bytes == 0 ? 64 : (bytes + 63) & ~(std::size_t)63;
}

// 64-byte aligned, uninitialised; nullptr when out of memory.  Free with free_aligned.
static inline void* alloc_aligned(std::size_t bytes) {
#if defined(_MSC_VER)
    return _aligned_malloc(aligned_bytes(bytes), 64);
#else
    void* p = nullptr;
    if (posix_memalign(&p, 64, aligned_bytes(bytes)) != 0) return nullptr;
    return p;
#endif
}

// 64-byte aligned, zeroed; nullptr when out of memory.  Free with free_aligned.
static inline void* alloc_zeroed(std::size_t bytes) {
    void* p = alloc_aligned(bytes);
    if (p != nullptr) std::memset(p, 0, aligned_bytes(bytes));
    return p;
}

static inline void free_aligned(void* p) {
#if defined(_MSC_VER)
    _aligned_free(p);
#else
    std::free(p);
#endif
}

// Whether v is NaN or infinite (exponent bits all ones), without a branch.
template <class T>
static inline bool nonfinite_bits(T v) {
    if constexpr (sizeof(T) == 4) {
        std::uint32_t b;
        std::memcpy(&b, &v, 4);
        return (b & 0x7f800000u) == 0x7f800000u;
    } else {
        std::uint64_t b;
        std::memcpy(&b, &v, 8);
        return (b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
    }
}

// Whether any of p[0, n) is NaN or infinite.  The largest masked exponent
// reaches all ones only then; a max reduction vectorizes (a scan of 2.4 M
// weights one compare at a time took 9% of fwd_late).
template <class T>
static inline bool any_nonfinite(const T* p, idx n) {
    typedef typename std::conditional<sizeof(T) == 4, std::uint32_t, std::uint64_t>::type U;
    const U mask = sizeof(T) == 4 ? (U)0x7f800000u : (U)0x7ff0000000000000ull;
    U largest = 0;
    for (idx i = 0; i < n; ++i) {
        U b;
        std::memcpy(&b, p + i, sizeof(T));
        b &= mask;
        largest = b > largest ? b : largest;
    }
    return largest == mask;
}

// The sizes and window of a 2-D convolution, with which every dense op's
// argument struct starts (it derives from this): input [N, H, W, Cin], output
// [N, OH, OW, Cout], a KH x KW kernel, G groups of cin_g input and cout_g
// output channels, strides, dilations, and the top and left padding.
// One tensor a kernel reads or writes: its data, its type code (0 float16,
// 1 bfloat16, 2 float32, 3 float64) and its 4 strides in elements, in logical NHWC
// order for images (the caller permutes NCHW) and the filter's own order for filters.
struct Tensor {
    void* data;
    int type;
    idx s[4];
};

struct ConvDims {
    idx N, H, W, Cin, OH, OW, Cout, KH, KW, G, cin_g, cout_g;
    idx sh, sw, dh, dw, pt, pl;
    // The convolution's multiply-adds times two (ConvGeometry.flops): the work that
    // decides a call's threads (conv_flops in _cvz.pxd) and a kernel's own plans.
    double flops() const { return 2.0 * N * OH * OW * Cout * KH * KW * cin_g; }
};

static inline idx round_up(idx x, idx m) { return (x + m - 1) / m * m; }

// n items cut into `parts` (> 0) runs of sizes within one of each other, the
// longer runs first: run i starts at first(i) and holds size(i) items (the
// balanced tiles of cvz_tiles.hpp, the filter gradient's input-channel tiles).
struct EvenSplit {
    idx base, extra;
    EvenSplit(idx n, idx parts) : base(n / parts), extra(n % parts) {}
    idx first(idx i) const { return i * base + (i < extra ? i : extra); }
    idx size(idx i) const { return base + (i < extra ? 1 : 0); }
};

static inline idx floor_div(idx a, idx b) {  // b > 0
    idx q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

}  // namespace cvz
