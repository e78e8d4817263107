// The precision="fast" input gradients of conv2d: bfloat16 on AVX512_BF16's dot
// product, float16 on AVX512_FP16's FMA.  Each is compiled with its own target
// attribute and chosen at run time (conv2d_input_grad.cpp's entry points ask for
// one only where the CPU has its instruction); a build without that instruction
// gets a path that never applies.  Both walk rows as the default kernel does
// (conv2d_input_grad_rows.hpp).
#define CVZ_INTERFACE_ONLY
#include "conv2d_input_grad.cpp"
#undef CVZ_INTERFACE_ONLY

#include "conv2d_input_grad_rows.hpp"
#include "cvz_isa.hpp"

// A path this build cannot compile: it never applies.
#define CVZ_FAST_PATH_ABSENT(space)                                 \
    namespace cvz {                                                 \
    namespace space {                                               \
    bool applies(const Conv2dInputGradArgs*) { return false; }     \
    void prepare(Conv2dInputGradArgs*) {}                           \
    void pack(Conv2dInputGradArgs*) {}                              \
    void row(const Conv2dInputGradArgs*, idx, void*) {}             \
    }                                                               \
    }

#if CVZ_X86
#include <immintrin.h>

// The AVX-512 layout moves (scatter_rows) for the results, as the default kernel's.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")
#endif
namespace cvz {
namespace avx512 {
[[maybe_unused]] constexpr Isa THIS_ISA = ISA_AVX512;  // (the layout moves may ask)
#include "cvz_simd_avx512.hpp"
#include "cvz_layout.hpp"
}  // namespace avx512
}  // namespace cvz
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

// ---------------------------------------------------------------- precision="fast"
// What both fast paths (bfloat16, float16) do around their tiles.
#if CVZ_X86
namespace cvz {

// dy row (n, oh) as 16-bit elements (the fast paths' staged rows): pixel ow at
// ow * G * group_halves from dst (the row's pixel 0), each group's output
// channels from g * group_halves; the rest of the row stays as it was (zero).
static void stage_halves(const Conv2dInputGradArgs* a, idx n, idx oh, std::uint16_t* dst, idx group_halves) {
    const std::uint16_t* dy = (const std::uint16_t*)a->dy.data + n * a->dy.s[0] + oh * a->dy.s[1];
    const idx pitch = a->G * group_halves;
    const bool runs = a->dy.s[3] == 1;
    if (runs && pitch == a->Cout && a->dy.s[2] == a->Cout) {  // the same layout: one run for the row
        std::memcpy(dst, dy, (std::size_t)(a->OW * a->Cout) * sizeof(std::uint16_t));
        return;
    }
    for (idx ow = 0; ow < a->OW; ++ow)
        for (idx g = 0; g < a->G; ++g) {
            std::uint16_t* d = dst + ow * pitch + g * group_halves;
            const std::uint16_t* src = dy + ow * a->dy.s[2] + g * a->cout_g * a->dy.s[3];
            if (runs) {
                std::memcpy(d, src, (std::size_t)a->cout_g * sizeof(std::uint16_t));
            } else {
                for (idx co = 0; co < a->cout_g; ++co) d[co] = src[co * a->dy.s[3]];
            }
        }
}


// One tile position (pixels from iw, every sw-th, of group g): for each block of
// `step` input channels in [c_begin, c_end), point b_ptrs at every tap's packed
// filter (k_units elements per output channel row of cin_g_pad) and call
// tile(out, out_pixel_stride), out in dx (direct: half types, channels
// contiguous) or in the float32 output row [W][G][cin_g_pad].
template <class U, class Tile>
static inline void fast_channel_blocks(const Conv2dInputGradArgs* a, const U* packed, idx k_units, const idx* tap_k,
                                       idx n_taps, const U** b_ptrs, idx g, idx c_begin, idx c_end, idx step, idx iw,
                                       std::uint16_t* dx_row, float* out_row, int direct, Tile tile) {
    const idx out_pixel = a->G * a->cin_g_pad;
    for (idx c0 = c_begin; c0 < c_end; c0 += step) {
        for (idx t = 0; t < n_taps; ++t) b_ptrs[t] = packed + (tap_k[t] * a->G + g) * k_units * a->cin_g_pad + c0;
        void* out = direct ? (void*)(dx_row + iw * a->dx.s[2] + g * a->cin_g + c0)
                           : (void*)(out_row + iw * out_pixel + g * a->cin_g_pad + c0);
        tile(out, a->sw * (direct ? a->dx.s[2] : out_pixel));
    }
}

// Whether no weight of the half-type filter is Inf or NaN (all exponent bits set,
// exponent_mask: 0x7f80 bfloat16, 0x7c00 float16): the fast paths stand zeros
// for the absent edge pairs, and 0 * Inf would be NaN.
static inline bool fast_filter_finite(const Conv2dInputGradArgs* a, std::uint16_t exponent_mask) {
    const std::uint16_t* w = (const std::uint16_t*)a->w.data;
    for (idx kh = 0; kh < a->KH; ++kh)
        for (idx kw = 0; kw < a->KW; ++kw)
            for (idx ci = 0; ci < a->cin_g; ++ci)
                for (idx co = 0; co < a->Cout; ++co)
                    if ((w[kh * a->w.s[0] + kw * a->w.s[1] + ci * a->w.s[2] + co * a->w.s[3]] & exponent_mask) ==
                        exponent_mask)
                        return false;
    return true;
}

// The float32 output row into dx row `base` (its type, its strides).
static inline void fast_scatter(const Conv2dInputGradArgs* a, idx base, const float* out_row) {
    const idx out_pixel = a->G * a->cin_g_pad;
    for (idx g = 0; g < a->G; ++g)
        avx512::scatter_rows<float>(a->dx.data, a->dx.type, base + g * a->cin_g * a->dx.s[3], a->W, a->dx.s[2],
                                    a->cin_g, a->dx.s[3], out_row + g * a->cin_g_pad, out_pixel);
}

}  // namespace cvz
#endif

// ---------------------------------------------------------------- precision="fast", bfloat16
// bfloat16 input gradients on the CPU's bfloat16 dot-product instruction
// (AVX512_BF16 vdpbf16ps: 16 float32 lanes, each adding two bfloat16 products
// per instruction), compiled once with its own target attribute and chosen at
// run time: the caller asks for it only where the CPU has the instruction.
//
// Layout: output channels go in pairs (k2 = co / 2 of each group; an odd
// count gets a zero partner).  dy rows are staged as [ow][G][K2] pairs of
// bfloat16 (32 bits each, zero outside [0, OW)), the filter packed as
// [KH * KW][G][K2][cin_g_pad] pairs; a tile broadcasts one dy pair and
// multiplies it into a vector of 16 input channels' pairs.  Results are summed
// in float32 (per element: taps, then output-channel pairs, the pair's odd
// channel first) and rounded once to bfloat16.  The instruction treats
// subnormal inputs and results as zero (DAZ/FTZ): that, and the order of terms,
// is the difference from the default path.  Each row is written by one call in
// one fixed order, so results do not depend on the thread count.
#if CVZ_X86 && defined(__GNUC__)
#define CVZ_TARGET_BF16 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma,f16c")))
namespace cvz {
namespace dot_bf16 {

typedef std::uint32_t pair;  // two bfloat16, the even channel in the low half
constexpr int MR2 = 12, MR1 = 24;  // pixels per tile of 2 and of 1 vectors of input channels

// Only bfloat16 everywhere, with a finite filter: zeros stand for the absent
// (output cell, tap) pairs at the edges, and 0 * inf would be NaN.
bool applies(const Conv2dInputGradArgs* a) {
    return a->dy.type == BF16 && a->w.type == BF16 && a->dx.type == BF16 && fast_filter_finite(a, 0x7f80u);
}

// Per-thread scratch: staged dy rows (dy_slots cache slots), the float32 output row,
// then the row walk's tables and pointer arrays.
struct Scratch : RowTaps {
    pair* dy_rows;
    float* out_row;
    const pair** a_ptrs;
    const pair** b_ptrs;
};

static inline idx row_pairs(const Conv2dInputGradArgs* a) { return a->ow_span * a->G * a->K2; }

static Scratch scratch(const Conv2dInputGradArgs* a, void* raw) {
    Scratch s;
    s.dy_rows = (pair*)raw;
    s.out_row = (float*)(s.dy_rows + round_up(a->dy_slots * row_pairs(a), 16));
    s.a_ptrs = (const pair**)carve_row_taps(&s, (idx*)(s.out_row + round_up(a->W * a->G * a->cin_g_pad, 16)), a);
    s.b_ptrs = s.a_ptrs + a->KH * a->KW;
    return s;
}

// After the default prepare (which set cin_g_pad, ow_lo and ow_span for 16
// float32 lanes and tiles of up to 24 pixels, as here).
void prepare(Conv2dInputGradArgs* a) {
    a->K2 = (a->cout_g + 1) / 2;
    a->packed_bytes = a->KH * a->KW * a->G * a->K2 * a->cin_g_pad * (idx)sizeof(pair);
    a->scratch_elems = round_up(a->dy_slots * row_pairs(a), 16) + round_up(a->W * a->G * a->cin_g_pad, 16) +
                       row_taps_bytes(a) / (idx)sizeof(float) + 16;
}

void pack(Conv2dInputGradArgs* a) {
    const std::uint16_t* w = (const std::uint16_t*)a->w.data;
    pair* packed = (pair*)a->packed;
    for (idx tap = 0; tap < a->KH * a->KW; ++tap)
        for (idx g = 0; g < a->G; ++g)
            for (idx k2 = 0; k2 < a->K2; ++k2) {
                pair* dst = packed + ((tap * a->G + g) * a->K2 + k2) * a->cin_g_pad;
                const idx co = g * a->cout_g + 2 * k2;
                const bool odd = 2 * k2 + 1 < a->cout_g;
                const idx src = (tap / a->KW) * a->w.s[0] + (tap % a->KW) * a->w.s[1] + co * a->w.s[3];
                for (idx ci = 0; ci < a->cin_g_pad; ++ci) {
                    if (ci >= a->cin_g) { dst[ci] = 0; continue; }
                    const pair lo = w[src + ci * a->w.s[2]];
                    const pair hi = odd ? w[src + ci * a->w.s[2] + a->w.s[3]] : 0;
                    dst[ci] = lo | hi << 16;
                }
            }
    a->exact_edges = 0;
}

// Store a tile's first n_store pixels: float32 into the output row, or, when
// `bf16` (dx is bfloat16 with contiguous channels, every lane a real channel),
// straight into dx, rounded to nearest even by the instruction (vcvtne2ps2bf16;
// its DAZ changes nothing, the dot products never leave a subnormal sum).
template <int MR, int NRV>
CVZ_TARGET_BF16 static inline void store_tile(const __m512 (&acc)[MR][NRV], void* out, idx out_pixel_stride,
                                              idx n_store, int bf16) {
    if (bf16) {
        std::uint16_t* o = (std::uint16_t*)out;
        for (int p = 0; p < MR; ++p)
            if (p < n_store) {
                if constexpr (NRV == 2)
                    _mm512_storeu_si512((void*)(o + p * out_pixel_stride),
                                        (__m512i)_mm512_cvtne2ps_pbh(acc[p][1], acc[p][0]));
                else
                    _mm256_storeu_si256((__m256i*)(o + p * out_pixel_stride), (__m256i)_mm512_cvtneps_pbh(acc[p][0]));
            }
        return;
    }
    float* o = (float*)out;
    for (int p = 0; p < MR; ++p)
        if (p < n_store)
            CVZ_UNROLL(2)
            for (int q = 0; q < NRV; ++q) _mm512_storeu_ps(o + p * out_pixel_stride + q * 16, acc[p][q]);
}

// MR pixels x NRV vectors of input channels: out[p] = sum over the n_taps taps
// and the K2 pairs of a_rows[t][p * a_pitch + k] . b_rows[t][k * b_pitch + lane].
// The first n_store pixels are stored (store_tile; the staged rows hold slack
// for the rest).
template <int MR, int NRV>
CVZ_TARGET_BF16 static void tile(const pair* const* a_rows, const pair* const* b_rows, idx n_taps, idx a_pitch,
                                 idx K2, idx b_pitch, void* out, idx out_pixel_stride, idx n_store, int bf16) {
    __m512 acc[MR][NRV];
    CVZ_UNROLL(32)
    for (int p = 0; p < MR; ++p)
        CVZ_UNROLL(2)
        for (int q = 0; q < NRV; ++q) acc[p][q] = _mm512_setzero_ps();
    for (idx t = 0; t < n_taps; ++t) {
        const pair* a = a_rows[t];
        const pair* b = b_rows[t];
        for (idx k = 0; k < K2; ++k) {
            __m512i bv[NRV];
            CVZ_UNROLL(2)
            for (int q = 0; q < NRV; ++q) bv[q] = _mm512_loadu_si512((const void*)(b + k * b_pitch + q * 16));
            CVZ_UNROLL(32)
            for (int p = 0; p < MR; ++p) {
                const __m512i av = _mm512_set1_epi32((int)a[p * a_pitch + k]);
                CVZ_UNROLL(2)
                for (int q = 0; q < NRV; ++q) acc[p][q] = _mm512_dpbf16_ps(acc[p][q], (__m512bh)av, (__m512bh)bv[q]);
            }
        }
    }
    store_tile<MR, NRV>(acc, out, out_pixel_stride, n_store, bf16);
}

typedef void (*TileFn)(const pair* const*, const pair* const*, idx, idx, idx, idx, void*, idx, idx, int);

// A tile whose KWT taps per kernel row read one dy window (tap t from pixel
// (KWT - 1 - t) * DSTEP of it, as the default path's fused tile): each dy pair
// is broadcast once for every tap that reads it.  a_rows[s]: the window of
// kernel row s; b_taps[s * KWT + t]: the filter pairs of its tap t.  Per
// element: kernel rows, output-channel pairs, then taps.
template <int MR, int KWT, int DSTEP, int NRV>
CVZ_TARGET_BF16 static void tile_fused(const pair* const* a_rows, const pair* const* b_taps, idx n_rows,
                                       idx a_pitch, idx K2, idx b_pitch, void* out, idx out_pixel_stride,
                                       idx n_store, int bf16) {
    constexpr int E = MR + (KWT - 1) * DSTEP;
    __m512 acc[MR][NRV];
    CVZ_UNROLL(32)
    for (int p = 0; p < MR; ++p)
        CVZ_UNROLL(2)
        for (int q = 0; q < NRV; ++q) acc[p][q] = _mm512_setzero_ps();
    for (idx s = 0; s < n_rows; ++s) {
        const pair* a = a_rows[s];
        const pair* const* b = b_taps + s * KWT;
        for (idx k = 0; k < K2; ++k) {
            __m512i bv[KWT][NRV];
            CVZ_UNROLL(8)
            for (int t = 0; t < KWT; ++t)
                CVZ_UNROLL(2)
                for (int q = 0; q < NRV; ++q)
                    bv[t][q] = _mm512_loadu_si512((const void*)(b[t] + k * b_pitch + q * 16));
            CVZ_UNROLL(64)
            for (int e = 0; e < E; ++e) {
                const __m512i av = _mm512_set1_epi32((int)a[e * a_pitch + k]);
                CVZ_UNROLL(8)
                for (int t = 0; t < KWT; ++t) {
                    const int p = e - (KWT - 1 - t) * DSTEP;
                    if (p >= 0 && p < MR)
                        CVZ_UNROLL(2)
                        for (int q = 0; q < NRV; ++q)
                            acc[p][q] = _mm512_dpbf16_ps(acc[p][q], (__m512bh)av, (__m512bh)bv[t][q]);
                }
            }
        }
    }
    store_tile<MR, NRV>(acc, out, out_pixel_stride, n_store, bf16);
}

// The tile for `rest` pixels of NRV vectors: a full one, else the smallest of
// MR/2, MR/4, MR/8 that covers the rest (in *shape).
template <int NRV>
static TileFn tile_for(idx rest, idx* shape) {
    constexpr int MR = NRV == 2 ? MR2 : MR1;
    if (rest > MR / 2) { *shape = MR; return &tile<MR, NRV>; }
    if (rest > MR / 4) { *shape = MR / 2; return &tile<MR / 2, NRV>; }
    if (rest > MR / 8) { *shape = MR / 4; return &tile<MR / 4, NRV>; }
    *shape = MR / 8;
    return &tile<MR / 8, NRV>;
}

// The fused tile for (kwt, dstep) and `rest` pixels, or nullptr (then the
// plain tiles run): a full one or, for a short rest, one of half the pixels.
template <int NRV>
static TileFn fused_for(idx kwt, idx dstep, idx rest, idx* shape) {
    constexpr int MR = NRV == 2 ? 8 : 16, HALF = MR / 2;
    if (rest <= HALF / 2) return nullptr;
    const bool full = rest > HALF;
    *shape = full ? MR : HALF;
#define CVZ_DOT_FUSED(k, d) \
    if (kwt == k && dstep == d) return full ? &tile_fused<MR, k, d, NRV> : &tile_fused<HALF, k, d, NRV>;
    CVZ_DOT_FUSED(2, 1) CVZ_DOT_FUSED(2, 2) CVZ_DOT_FUSED(3, 1) CVZ_DOT_FUSED(3, 2)
    if (NRV == 1) {
        CVZ_DOT_FUSED(5, 1) CVZ_DOT_FUSED(5, 2) CVZ_DOT_FUSED(7, 1) CVZ_DOT_FUSED(7, 2)
    }
#undef CVZ_DOT_FUSED
    return nullptr;
}

// dy row (n, oh) into a staged row of pairs: pixel ow at (ow - ow_lo) * G * K2
// pairs, each group's channels from pair g * K2 (the rest stays zero, as zeroed).
static void stage_row(const Conv2dInputGradArgs* a, idx n, idx oh, pair* dst_row) {
    stage_halves(a, n, oh, (std::uint16_t*)(dst_row + (0 - a->ow_lo) * a->G * a->K2), 2 * a->K2);
}

// Input row dx[n, ih] (row = n * H + ih): the default path's walk (kernel rows
// reaching the row, staged dy rows cached in dy_slots slots, phases r of the stride,
// their taps), with the pair tiles.
void row(const Conv2dInputGradArgs* a, idx row_index, void* raw) {
    Scratch s = scratch(a, raw);
    const idx n = row_index / a->H, ih = row_index % a->H;
    const idx G = a->G, K2 = a->K2, cin_g_pad = a->cin_g_pad, pitch = G * K2, rp = row_pairs(a);
    const idx n_slots = row_slots(a, ih, &s);
    cache_dy_rows(a, n, n_slots, &s, [&](idx oh, idx slot) { stage_row(a, n, oh, s.dy_rows + slot * rp); });
    const pair* packed = (const pair*)a->packed;
    // Tiles store bfloat16 straight into dx when its channels are contiguous and
    // every lane of a tile is a real channel; else float32 into the output row,
    // scattered below.
    const idx base = n * a->dx.s[0] + ih * a->dx.s[1];
    const int direct = a->dx.s[3] == 1 && a->cin_g == cin_g_pad;
    std::uint16_t* dx_row = (std::uint16_t*)a->dx.data + base;
    for (idx r = 0; r < a->sw && r < a->W; ++r) {
        const idx n_pix = (a->W - r + a->sw - 1) / a->sw;  // pixels iw = r + j * sw
        const idx n_taps = phase_taps(a, r, n_slots, &s);
        const idx kwt = n_slots ? n_taps / n_slots : 0;
        idx dstep = 0;
        const bool fusable = phase_fusable(s, n_taps, kwt, &dstep);
        // Wide blocks (2 vectors of input channels) in one pass over the
        // pixels, then the narrow remainder (1 vector) in another.
        const idx wide_end = cin_g_pad / 32 * 32;
        for (idx g = 0; g < G; ++g)
            for (int wide = 1; wide >= 0; --wide) {
                const idx c_begin = wide ? 0 : wide_end, c_end = wide ? wide_end : cin_g_pad;
                for (idx j0 = 0; j0 < n_pix && c_begin < c_end;) {
                    const idx rest = n_pix - j0;
                    idx shape = 0, n_rows = n_taps;
                    TileFn fn = nullptr;
                    if (fusable) fn = wide ? fused_for<2>(kwt, dstep, rest, &shape) : fused_for<1>(kwt, dstep, rest, &shape);
                    if (fn != nullptr) {  // a window per kernel row, from its last tap's first pixel
                        n_rows = n_slots;
                        for (idx slot = 0; slot < n_slots; ++slot)
                            s.a_ptrs[slot] = s.dy_rows + s.row_of_slot[slot] * rp +
                                             (s.tap_ow0[slot * kwt + kwt - 1] + j0 - a->ow_lo) * pitch + g * K2;
                    } else {
                        fn = wide ? tile_for<2>(rest, &shape) : tile_for<1>(rest, &shape);
                        for (idx t = 0; t < n_taps; ++t)
                            s.a_ptrs[t] = s.dy_rows + s.row_of_slot[s.tap_slot[t]] * rp +
                                          (s.tap_ow0[t] + j0 - a->ow_lo) * pitch + g * K2;
                    }
                    const idx iw = r + j0 * a->sw, n_store = rest < shape ? rest : shape;
                    fast_channel_blocks(a, packed, K2, s.tap_k, n_taps, s.b_ptrs, g, c_begin, c_end, wide ? 32 : 16, iw,
                                        dx_row, s.out_row, direct, [&](void* out, idx out_stride) {
                                            fn(s.a_ptrs, s.b_ptrs, n_rows, pitch, K2, cin_g_pad, out, out_stride,
                                               n_store, direct);
                                        });
                    j0 += n_store;
                }
            }
    }
    if (!direct) fast_scatter(a, base, s.out_row);
}

}  // namespace dot_bf16
}  // namespace cvz
#else  // no AVX512_BF16 code in this build: the path never applies
CVZ_FAST_PATH_ABSENT(dot_bf16)
#endif

// ---------------------------------------------------------------- precision="fast", float16
// float16 input gradients on AVX512_FP16's float16 FMA (vfmadd231ph: 32 lanes
// per instruction, twice the float32 FMA's), compiled once with its own target
// attribute and chosen at run time like the bfloat16 path.
//
// Sums go in two levels: at most CHAIN products of one tap (output channels
// k0 .. k0 + CHAIN) are added in float16, each FMA rounding once; those chains
// are added in float32 (taps, then chains), and the result is rounded once to
// float16.  So that a chain neither overflows nor sinks into float16's
// subnormals, every operand is scaled by a power of two (exact): the filter so
// that its largest magnitude lies in [16, 32), each staged dy row likewise
// (from its largest finite magnitude); a product is then below 2^10 and a chain
// below 2^15, under float16's 65504, and the chain's float32 sum undoes both
// scales.  An Inf or NaN in dy stays one and reaches the same outputs as on the
// default path (their sums are Inf or NaN in any order); the filter must be
// finite (zeros stand for the absent edge pairs).  Layout as the bfloat16
// path, one output channel per element: dy rows staged as [ow][G][K] float16,
// the filter packed as [KH * KW][G][K][cin_g_pad].  Each row is written by one
// call in one fixed order, so results do not depend on the thread count.
#if CVZ_F16_FMA_COMPILED
#define CVZ_TARGET_F16 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512fp16,avx2,fma,f16c")))
namespace cvz {
namespace dot_f16 {

typedef std::uint16_t half;
typedef _Float16 f16_alias __attribute__((may_alias));  // reads of the staged rows as float16
constexpr int CHAIN = 32;     // products summed in float16 before the float32 sum
constexpr int SCALE_EXP = 5;  // operands scaled to a largest magnitude in [2^4, 2^5)

// float16 everywhere, a finite filter, and a wide block of input channels (with
// fewer than 32 per group the 16-lane float16 FMA does no more than float32's).
bool applies(const Conv2dInputGradArgs* a) {
    return a->dy.type == F16 && a->w.type == F16 && a->dx.type == F16 && a->cin_g >= 32 &&
           fast_filter_finite(a, 0x7c00u);
}

// The exponent s that puts a largest magnitude `largest` (a float16's bits,
// finite) in [2^(SCALE_EXP-1), 2^SCALE_EXP) when scaled by 2^s; 0 for zero.
static int scale_exponent(half largest) {
    if ((largest & 0x7fffu) == 0) return 0;
    int e = 0;
    std::frexp(f16_to_f32(largest), &e);
    return SCALE_EXP - e;
}

// Per-thread scratch: staged dy rows (KH cache slots) and their scale
// exponents, each tap's float32 scale, the float32 output row, then the row
// walk's tables and pointer arrays.
struct Scratch : RowTaps {
    half* dy_rows;
    float* out_row;
    float* tap_scale;
    idx* slot_exp;
    const half** a_ptrs;
    const half** b_ptrs;
};

// Halves of one staged row, a whole number of 32-lane vectors.
static inline idx row_halves(const Conv2dInputGradArgs* a) { return round_up(a->ow_span * a->G * a->cout_g, 32); }

static Scratch scratch(const Conv2dInputGradArgs* a, void* raw) {
    Scratch s;
    s.dy_rows = (half*)raw;
    s.out_row = (float*)(s.dy_rows + a->dy_slots * row_halves(a));
    s.tap_scale = s.out_row + round_up(a->W * a->G * a->cin_g_pad, 16);
    s.slot_exp = (idx*)(s.tap_scale + round_up(a->KH * a->KW, 16));
    s.a_ptrs = (const half**)carve_row_taps(&s, s.slot_exp + a->dy_slots, a);
    s.b_ptrs = s.a_ptrs + a->KH * a->KW;
    return s;
}

// After the default prepare (which set cin_g_pad, ow_lo and ow_span for 16
// float32 lanes and tiles of up to 24 pixels, more than these tiles reach).
void prepare(Conv2dInputGradArgs* a) {
    a->packed_bytes = round_up(a->KH * a->KW * a->G * a->cout_g * a->cin_g_pad, 32) * (idx)sizeof(half);
    const idx bytes = a->dy_slots * row_halves(a) * (idx)sizeof(half) +
                      (round_up(a->W * a->G * a->cin_g_pad, 16) + round_up(a->KH * a->KW, 16)) * (idx)sizeof(float) +
                      a->dy_slots * (idx)sizeof(idx) + row_taps_bytes(a);
    a->scratch_elems = bytes / (idx)sizeof(float) + 16;
}

// Scale n halves (a multiple of 32: a staged dy row, the packed filter) so that
// their largest finite magnitude lies in [16, 32); returns the exponent s (row
// = data * 2^s).  Through float32, so that any s is one exact multiplication.
CVZ_TARGET_F16 static int normalize(half* row, idx n) {
    __m512i largest = _mm512_setzero_si512();
    const __m512i magnitude = _mm512_set1_epi16(0x7fff), inf = _mm512_set1_epi16(0x7c00);
    for (idx i = 0; i < n; i += 32) {
        const __m512i m = _mm512_and_si512(_mm512_loadu_si512((const void*)(row + i)), magnitude);
        largest = _mm512_mask_max_epu16(largest, _mm512_cmplt_epu16_mask(m, inf), largest, m);
    }
    alignas(64) half lanes[32];
    _mm512_store_si512((void*)lanes, largest);
    half top = 0;
    for (int l = 0; l < 32; ++l) top = lanes[l] > top ? lanes[l] : top;
    const int s = scale_exponent(top);
    if (s == 0) return 0;
    const __m512 factor = _mm512_set1_ps(std::ldexp(1.0f, s));
    for (idx i = 0; i < n; i += 16) {
        const __m512 x = _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256((const __m256i*)(row + i)));
        _mm256_storeu_si256((__m256i*)(row + i), _mm512_maskz_cvtps_ph(0xffff, _mm512_mul_ps(x, factor), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return s;
}

// The float16 vector of VL lanes.
template <int VL> struct HalfVec;
template <> struct HalfVec<32> { typedef __m512h type; };
template <> struct HalfVec<16> { typedef __m256h type; };

// The filter packed, then scaled by 2^w_exp like a staged row (normalize).
void pack(Conv2dInputGradArgs* a) {
    const half* w = (const half*)a->w.data;
    half* packed = (half*)a->packed;
    const idx total = a->KH * a->KW * a->G * a->cout_g * a->cin_g_pad;
    for (idx tap = 0; tap < a->KH * a->KW; ++tap)
        for (idx g = 0; g < a->G; ++g)
            for (idx k = 0; k < a->cout_g; ++k) {
                half* dst = packed + ((tap * a->G + g) * a->cout_g + k) * a->cin_g_pad;
                const half* src = w + (tap / a->KW) * a->w.s[0] + (tap % a->KW) * a->w.s[1] + (g * a->cout_g + k) * a->w.s[3];
                for (idx ci = 0; ci < a->cin_g_pad; ++ci) dst[ci] = ci < a->cin_g ? src[ci * a->w.s[2]] : 0;
            }
    for (idx i = total; i < round_up(total, 32); ++i) packed[i] = 0;
    a->w_exp = normalize(packed, round_up(total, 32));
    a->exact_edges = 0;
}

// acc += b * (the float16 at m, broadcast), the broadcast folded into the FMA
// (vfmadd231ph m16{1toN}): written out, because the compiler broadcasts into a
// register (an extra shuffle per pixel) once two FMAs share the value.
CVZ_TARGET_F16 static inline void fma_bcast(__m512h& acc, __m512h b, const f16_alias* m) {
    __asm__("vfmadd231ph %2%{1to32%}, %1, %0" : "+v"(acc) : "v"(b), "m"(*m));
}
CVZ_TARGET_F16 static inline void fma_bcast(__m256h& acc, __m256h b, const f16_alias* m) {
    __asm__("vfmadd231ph %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(b), "m"(*m));
}

// One chain: h[p][v] += a[p * a_pitch + k] * b[k * b_pitch + v * VL ..] for
// k in [k0, k1), in float16 (VL = 32 lanes a zmm, 16 a ymm).
template <int MR, int NV, class V>
CVZ_TARGET_F16 static inline void chain(V (&h)[MR][NV], const f16_alias* a, idx a_pitch, const half* b, idx b_pitch,
                                        idx k0, idx k1) {
    constexpr int VL = sizeof(V) / 2;
    for (idx k = k0; k < k1; ++k) {
        V bv[NV];
        CVZ_UNROLL(2)
        for (int v = 0; v < NV; ++v) {
            if constexpr (VL == 32) bv[v] = _mm512_loadu_ph((const void*)(b + k * b_pitch + v * VL));
            else bv[v] = _mm256_loadu_ph((const void*)(b + k * b_pitch + v * VL));
        }
        CVZ_UNROLL(16)
        for (int p = 0; p < MR; ++p)
            CVZ_UNROLL(2)
            for (int v = 0; v < NV; ++v) fma_bcast(h[p][v], bv[v], a + p * a_pitch + k);
    }
}

// MR pixels x LANES input channels (64: two zmm of float16, 32: one, 16: a
// ymm): out[p] = sum over the n_taps taps of scale[t] * (its chains of CHAIN
// output channels of a_rows[t][p * a_pitch + k] * b_rows[t][k * b_pitch +
// lane], each in float16).  The float16 chains live in registers, their
// float32 sums in an L1-resident block (more pixels per tile than registers
// would hold for both, so that enough chains are in flight to hide the FMA's
// latency).  The first n_store pixels are stored: float16 straight into dx
// (`direct`), else float32 into the output row.
template <int MR, int LANES>
CVZ_TARGET_F16 static void tile(const half* const* a_rows, const half* const* b_rows, const float* scale, idx n_taps,
                                idx a_pitch, idx K, idx b_pitch, void* out, idx out_pixel_stride, idx n_store,
                                int direct) {
    constexpr int VL = LANES >= 32 ? 32 : 16, NV = LANES / VL;
    typedef typename HalfVec<VL>::type V;
    alignas(64) float sums[MR][LANES];
    CVZ_UNROLL(16)
    for (int p = 0; p < MR; ++p)
        CVZ_UNROLL(4)
        for (int q = 0; q < LANES; q += 16) _mm512_store_ps(&sums[p][q], _mm512_setzero_ps());
    for (idx t = 0; t < n_taps; ++t) {
        const __m512 sc = _mm512_set1_ps(scale[t]);
        for (idx k0 = 0; k0 < K; k0 += CHAIN) {
            V h[MR][NV];
            CVZ_UNROLL(16)
            for (int p = 0; p < MR; ++p)
                CVZ_UNROLL(2)
                for (int v = 0; v < NV; ++v) {
                    if constexpr (VL == 32) h[p][v] = _mm512_setzero_ph();
                    else h[p][v] = _mm256_setzero_ph();
                }
            chain<MR, NV, V>(h, (const f16_alias*)a_rows[t], a_pitch, b_rows[t], b_pitch, k0,
                             k0 + CHAIN < K ? k0 + CHAIN : K);
            CVZ_UNROLL(16)
            for (int p = 0; p < MR; ++p)
                CVZ_UNROLL(2)
                for (int v = 0; v < NV; ++v) {
                    float* sum = &sums[p][v * VL];
                    if constexpr (VL == 32) {
                        const __m256h lo = _mm512_castph512_ph256(h[p][v]);
                        const __m256h hi = _mm256_castsi256_ph(_mm512_maskz_extracti64x4_epi64(0xff, _mm512_castph_si512(h[p][v]), 1));
                        _mm512_store_ps(sum, _mm512_fmadd_ps(_mm512_cvtxph_ps(lo), sc, _mm512_load_ps(sum)));
                        _mm512_store_ps(sum + 16, _mm512_fmadd_ps(_mm512_cvtxph_ps(hi), sc, _mm512_load_ps(sum + 16)));
                    } else {
                        _mm512_store_ps(sum, _mm512_fmadd_ps(_mm512_cvtxph_ps(h[p][v]), sc, _mm512_load_ps(sum)));
                    }
                }
        }
    }
    for (int p = 0; p < MR; ++p) {
        if (p >= n_store) break;
        CVZ_UNROLL(4)
        for (int q = 0; q < LANES; q += 16) {
            const __m512 x = _mm512_load_ps(&sums[p][q]);
            if (direct)
                _mm256_storeu_si256((__m256i*)((half*)out + p * out_pixel_stride + q),
                                    _mm512_maskz_cvtps_ph(0xffff, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            else
                _mm512_storeu_ps((float*)out + p * out_pixel_stride + q, x);
        }
    }
}

typedef void (*TileFn)(const half* const*, const half* const*, const float*, idx, idx, idx, idx, void*, idx, idx, int);

// The tile of LANES channels for `rest` pixels: a full one, else the smallest
// of MR/2, MR/4, MR/8 that covers the rest (in *shape).
template <int LANES>
static TileFn tile_for(idx rest, idx* shape) {
    constexpr int MR = LANES == 64 ? 8 : 10;
    if (rest > MR / 2) { *shape = MR; return &tile<MR, LANES>; }
    if (rest > MR / 4) { *shape = MR / 2; return &tile<MR / 2, LANES>; }
    if (rest > MR / 8) { *shape = MR / 4; return &tile<MR / 4, LANES>; }
    *shape = MR / 8;
    return &tile<MR / 8, LANES>;
}

// Input row dx[n, ih] (row = n * H + ih): the default path's walk, with the
// float16 tiles and each staged row's scale.
void row(const Conv2dInputGradArgs* a, idx row_index, void* raw) {
    Scratch s = scratch(a, raw);
    const idx n = row_index / a->H, ih = row_index % a->H;
    const idx G = a->G, K = a->cout_g, cin_g_pad = a->cin_g_pad, pitch = G * K, rh = row_halves(a);
    const idx n_slots = row_slots(a, ih, &s);
    cache_dy_rows(a, n, n_slots, &s, [&](idx oh, idx slot) {
        half* dst = s.dy_rows + slot * rh;
        stage_halves(a, n, oh, dst + (0 - a->ow_lo) * pitch, K);
        s.slot_exp[slot] = normalize(dst, rh);
    });
    const half* packed = (const half*)a->packed;
    const idx base = n * a->dx.s[0] + ih * a->dx.s[1];
    const int direct = a->dx.s[3] == 1 && a->cin_g == cin_g_pad;  // float16 straight into dx
    half* dx_row = (half*)a->dx.data + base;
    for (idx r = 0; r < a->sw && r < a->W; ++r) {
        const idx n_pix = (a->W - r + a->sw - 1) / a->sw;  // pixels iw = r + j * sw
        const idx n_taps = phase_taps(a, r, n_slots, &s);
        for (idx t = 0; t < n_taps; ++t)
            s.tap_scale[t] = std::ldexp(1.0f, -(int)(s.slot_exp[s.row_of_slot[s.tap_slot[t]]] + a->w_exp));
        // Blocks of 64 input channels, then of 32 and 16 for the rest, each in
        // its own pass over the pixels.
        const idx end64 = cin_g_pad / 64 * 64, end32 = cin_g_pad / 32 * 32;
        for (idx g = 0; g < G; ++g)
            for (int lanes = 64; lanes >= 16; lanes /= 2) {
                const idx c_begin = lanes == 64 ? 0 : lanes == 32 ? end64 : end32;
                const idx c_end = lanes == 64 ? end64 : lanes == 32 ? end32 : cin_g_pad;
                for (idx j0 = 0; j0 < n_pix && c_begin < c_end;) {
                    const idx rest = n_pix - j0;
                    idx shape = 0;
                    const TileFn fn = lanes == 64 ? tile_for<64>(rest, &shape)
                                      : lanes == 32 ? tile_for<32>(rest, &shape)
                                                    : tile_for<16>(rest, &shape);
                    for (idx t = 0; t < n_taps; ++t)
                        s.a_ptrs[t] = s.dy_rows + s.row_of_slot[s.tap_slot[t]] * rh +
                                      (s.tap_ow0[t] + j0 - a->ow_lo) * pitch + g * K;
                    const idx iw = r + j0 * a->sw, n_store = rest < shape ? rest : shape;
                    fast_channel_blocks(a, packed, K, s.tap_k, n_taps, s.b_ptrs, g, c_begin, c_end, lanes, iw, dx_row,
                                        s.out_row, direct, [&](void* out, idx out_stride) {
                                            fn(s.a_ptrs, s.b_ptrs, s.tap_scale, n_taps, pitch, K, cin_g_pad, out,
                                               out_stride, n_store, direct);
                                        });
                    j0 += n_store;
                }
            }
    }
    if (!direct) fast_scatter(a, base, s.out_row);
}

}  // namespace dot_f16
}  // namespace cvz
#else  // no AVX512_FP16 code in this build: the path never applies
CVZ_FAST_PATH_ABSENT(dot_f16)
#endif
