// The conv2d input gradient: one file in three parts (Highway's
// foreach_target idiom, see cvz_per_isa.hpp):
//   1. the interface, its argument struct and entry points: all the Cython
//      module includes (it defines CVZ_INTERFACE_ONLY first);
//   2. the entry points, each dispatching on a table [isa][f64] of the body's
//      instantiations;
//   3. the kernel body, compiled once per ISA: cvz_per_isa.hpp includes this
//      file again with CVZ_PER_ISA_PASS defined.
//
// Where the filter outweighs the output gradient (late layers: few pixels, many
// channels) the public op does not come here at the default precision: it runs
// the forward pass's kernel once per stride phase (convviz/ops/input_grad.py,
// Plan), whose channel blocks keep the filter in cache across rows.
#ifndef CVZ_CONV2D_INPUT_GRAD_INTERFACE  // 1. the interface
#define CVZ_CONV2D_INPUT_GRAD_INTERFACE

#include "cvz_common.hpp"

namespace cvz {

// dx[n, ih, iw, ci] = sum over taps and the group's output channels.
// All element strides are in logical NHWC order (the caller permutes NCHW).
struct Conv2dInputGradArgs : ConvDims {
    const void* dy; int dy_type; idx dy_s[4];
    void* dx; int dx_type; idx dx_s[4];
    const void* w; int w_type; idx w_s[4];
    // Filled in by prepare(): padded channel count per group, dy row buffer
    // window [ow_lo, ow_lo + ow_span), whether tiles store straight into dx or
    // read dy in place, the per-thread scratch size.  The caller allocates
    // `packed` ([KH][KW][G][cout_g][cin_g_pad] of the compute type); pack()
    // fills it and sets exact_edges when a weight is NaN or infinite.
    idx V, cin_g_pad, ow_lo, ow_span, scratch_elems;
    int direct, dy_direct, exact_edges;
    // Cached dy rows per thread, kept as a ring when dy_ring (see dy_cache_slots).
    idx dy_slots;
    int dy_ring;
    // Staged dy rows also kept in blocks of DY_BLOCK channels ([KH][blocks][ow_span]
    // [DY_BLOCK]) for the fused tiles (see input_grad_tile_fused); set by prepare(),
    // with dy_pixel_rows: whether any tile reads the plain staged rows as well.
    int dy_blocked, dy_pixel_rows;
    void* packed;
    // precision="fast": set `dot` before prepare() to the fast paths this CPU
    // runs (FAST_BF16_DOT: AVX512_BF16 vdpbf16ps, FAST_F16_FMA: AVX512_FP16;
    // the caller has checked the CPU); prepare() leaves the one that applies
    // (dot_bf16::applies, dot_f16::applies), or 0 for the default path.
    // packed_bytes: the size of `packed`, set by prepare(); K2: output-channel
    // pairs per group on the bfloat16 path; w_exp: the float16 path's filter
    // scale (packed = w * 2^w_exp), set by pack().
    int dot;
    idx K2, packed_bytes;
    int w_exp;
};

enum FastPath : int { FAST_BF16_DOT = 1, FAST_F16_FMA = 2 };

// isa: an Isa code (cvz_isa.hpp); f64: compute in double (else float).
void conv2d_input_grad_prepare(Conv2dInputGradArgs* a, int isa, int f64);
void conv2d_input_grad_pack(Conv2dInputGradArgs* a, int isa, int f64);
// One input row (row = n * H + ih) of the call `args` (a Conv2dInputGradArgs), with
// `scratch` of scratch_elems elements, zeroed before first use (a UnitFn of _cvz.pxd).
void conv2d_input_grad_row(const void* args, int isa, int f64, idx row, void* scratch);

}  // namespace cvz

#endif  // CVZ_CONV2D_INPUT_GRAD_INTERFACE

#if defined(CVZ_INTERFACE_ONLY)
// The Cython module's include: the interface above is all it needs.
#elif !defined(CVZ_PER_ISA_PASS)  // 2. the entry points

namespace cvz {

// ---------------------------------------------------------------- the row walk
// What both paths (the per-ISA kernels below and the bfloat16 dot path) do to
// walk one input row: the kernel rows that reach it, the dy rows they need
// (cached across consecutive rows), and each stride phase's taps.  ISA-free.

// The tap tables of a row, carved from the end of a thread's scratch.
struct RowTaps {
    idx* slot_kh;      // kernel row of each slot (kernel rows reaching the input row)
    idx* slot_oh;      // its dy row
    idx* slot_key;     // cached dy row of each buffer slot (n * OH + oh + 1, 0 = empty)
    idx* row_of_slot;  // buffer slot holding the dy row of kernel-row slot i
    idx* tap_ow0;      // per tap of a phase: its first dy pixel
    idx* tap_slot;     // its kernel-row slot
    idx* tap_k;        // its kernel tap kh * KW + kw
};

// How many dy rows a thread keeps staged (Conv2dInputGradArgs::dy_slots): the
// dy rows one input row reads lie within a span of (KH - 1) * dh / sh + 1, so
// with that many slots in a ring (row oh in slot oh % span) consecutive input
// rows find every row they share, where KH slots kept none across rows with
// dilation 2 (rows ih and ih + 1 read no common dy row, and each row's three
// evicted the previous row's: each dy row staged three times).  A span too wide
// to keep (large dilations) gets KH slots, refilled as rows need them.
static inline void dy_cache_slots(Conv2dInputGradArgs* a) {
    const idx span = (a->KH - 1) * a->dh / a->sh + 1;
    a->dy_ring = span <= a->KH + 8;
    a->dy_slots = a->dy_ring ? span : a->KH;
}

// Bytes of the tables and of the two pointer arrays (a_ptrs, b_ptrs) after them.
static inline idx row_taps_bytes(const Conv2dInputGradArgs* a) {
    const idx taps = a->KH * a->KW;
    return (idx)((3 * a->KH + a->dy_slots + 3 * taps) * sizeof(idx) + 2 * taps * sizeof(void*));
}

// Fill *t from `ints`; returns where the pointer arrays start.
static inline void* carve_row_taps(RowTaps* t, idx* ints, const Conv2dInputGradArgs* a) {
    const idx taps = a->KH * a->KW;
    t->slot_kh = ints;
    t->slot_oh = ints + a->KH;
    t->slot_key = t->slot_oh + a->KH;
    t->row_of_slot = t->slot_key + a->dy_slots;
    t->tap_ow0 = t->row_of_slot + a->KH;
    t->tap_slot = t->tap_ow0 + taps;
    t->tap_k = t->tap_slot + taps;
    return t->tap_k + taps;
}

// The kernel rows that reach input row ih (slot_kh, slot_oh); returns how many.
static inline idx row_slots(const Conv2dInputGradArgs* a, idx ih, RowTaps* t) {
    idx n_slots = 0;
    for (idx kh = 0; kh < a->KH; ++kh) {
        const idx u = ih + a->pt - kh * a->dh;
        // (Stride 1 without the divisions: this walk runs once per input row, and
        // its divisions were 2-4% of bpi_cifar.)
        if (u < 0 || (a->sh != 1 && u % a->sh != 0)) continue;
        const idx oh = a->sh == 1 ? u : u / a->sh;
        if (oh >= a->OH) continue;
        t->slot_kh[n_slots] = kh;
        t->slot_oh[n_slots++] = oh;
    }
    return n_slots;
}

// Point row_of_slot[i] at a buffer slot holding dy row (n, slot_oh[i]): a cached
// one, else (ring) slot oh % dy_slots or (no ring) a slot no other kernel row
// needs, filled by stage(oh, slot).  The dy_slots slots stay cached across the
// thread's consecutive rows, which share most of their dy rows (slot_key = n * OH
// + oh + 1; 0 = empty, as zeroed).
template <class Stage>
static inline void cache_dy_rows(const Conv2dInputGradArgs* a, idx n, idx n_slots, RowTaps* t, Stage stage) {
    if (a->dy_ring) {
        for (idx i = 0; i < n_slots; ++i) {
            const idx at = t->slot_oh[i] % a->dy_slots, key = n * a->OH + t->slot_oh[i] + 1;
            if (t->slot_key[at] != key) {
                stage(t->slot_oh[i], at);
                t->slot_key[at] = key;
            }
            t->row_of_slot[i] = at;
        }
        return;
    }
    for (idx i = 0; i < n_slots; ++i) {
        t->row_of_slot[i] = -1;
        for (idx k = 0; k < a->dy_slots; ++k)
            if (t->slot_key[k] == n * a->OH + t->slot_oh[i] + 1) t->row_of_slot[i] = k;
    }
    for (idx i = 0; i < n_slots; ++i) {
        if (t->row_of_slot[i] >= 0) continue;
        idx free_slot = 0;
        for (idx k = 0; k < a->dy_slots; ++k) {
            bool needed = false;
            for (idx j = 0; j < n_slots; ++j) needed = needed || t->row_of_slot[j] == k;
            if (!needed) { free_slot = k; break; }
        }
        stage(t->slot_oh[i], free_slot);
        t->slot_key[free_slot] = n * a->OH + t->slot_oh[i] + 1;
        t->row_of_slot[i] = free_slot;
    }
}

// The taps of phase r (pixels iw = r + j * sw): (slot, kw) with r + pl - kw * dw
// divisible by sw, slot-major.  Returns how many.
static inline idx phase_taps(const Conv2dInputGradArgs* a, idx r, idx n_slots, RowTaps* t) {
    idx n_taps = 0;
    for (idx slot = 0; slot < n_slots; ++slot)
        for (idx kw = 0; kw < a->KW; ++kw) {
            const idx u = r + a->pl - kw * a->dw;
            if (a->sw != 1 && ((u % a->sw) + a->sw) % a->sw != 0) continue;
            t->tap_ow0[n_taps] = a->sw == 1 ? u : floor_div(u, a->sw);
            t->tap_slot[n_taps] = slot;
            t->tap_k[n_taps++] = t->slot_kh[slot] * a->KW + kw;
        }
    return n_taps;
}

// Every kernel row of a phase has the same kwt taps; whether their windows form
// an arithmetic run (step *dstep >= 1), so that fused tiles can share dy pixels.
static inline bool phase_fusable(const RowTaps& t, idx n_taps, idx kwt, idx* dstep) {
    *dstep = 0;
    if (kwt < 2) return false;
    *dstep = t.tap_ow0[0] - t.tap_ow0[1];
    bool fusable = *dstep >= 1;
    for (idx row = 0; row < n_taps && fusable; row += kwt)
        for (idx i = 0; i < kwt && fusable; ++i) fusable = t.tap_ow0[row + i] == t.tap_ow0[row] - i * *dstep;
    return fusable;
}


// dy row (n, oh) as 16-bit elements (the fast paths' staged rows): pixel ow at
// ow * G * group_halves from dst (the row's pixel 0), each group's output
// channels from g * group_halves; the rest of the row stays as it was (zero).
static void stage_halves(const Conv2dInputGradArgs* a, idx n, idx oh, std::uint16_t* dst, idx group_halves) {
    const std::uint16_t* dy = (const std::uint16_t*)a->dy + n * a->dy_s[0] + oh * a->dy_s[1];
    const idx pitch = a->G * group_halves;
    const bool runs = a->dy_s[3] == 1;
    if (runs && pitch == a->Cout && a->dy_s[2] == a->Cout) {  // the same layout: one run for the row
        std::memcpy(dst, dy, (std::size_t)(a->OW * a->Cout) * sizeof(std::uint16_t));
        return;
    }
    for (idx ow = 0; ow < a->OW; ++ow)
        for (idx g = 0; g < a->G; ++g) {
            std::uint16_t* d = dst + ow * pitch + g * group_halves;
            const std::uint16_t* src = dy + ow * a->dy_s[2] + g * a->cout_g * a->dy_s[3];
            if (runs) {
                std::memcpy(d, src, (std::size_t)a->cout_g * sizeof(std::uint16_t));
            } else {
                for (idx co = 0; co < a->cout_g; ++co) d[co] = src[co * a->dy_s[3]];
            }
        }
}

}  // namespace cvz

#define CVZ_OP_BODY "conv2d_input_grad.cpp"  // this file again, once per ISA
#include "cvz_per_isa.hpp"

// ---------------------------------------------------------------- precision="fast"
// What both fast paths below (bfloat16, float16) do around their tiles.
#if CVZ_X86
namespace cvz {

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
        void* out = direct ? (void*)(dx_row + iw * a->dx_s[2] + g * a->cin_g + c0)
                           : (void*)(out_row + iw * out_pixel + g * a->cin_g_pad + c0);
        tile(out, a->sw * (direct ? a->dx_s[2] : out_pixel));
    }
}

// Whether no weight of the half-type filter is Inf or NaN (all exponent bits set,
// exponent_mask: 0x7f80 bfloat16, 0x7c00 float16): the fast paths stand zeros
// for the absent edge pairs, and 0 * Inf would be NaN.
static inline bool fast_filter_finite(const Conv2dInputGradArgs* a, std::uint16_t exponent_mask) {
    const std::uint16_t* w = (const std::uint16_t*)a->w;
    for (idx kh = 0; kh < a->KH; ++kh)
        for (idx kw = 0; kw < a->KW; ++kw)
            for (idx ci = 0; ci < a->cin_g; ++ci)
                for (idx co = 0; co < a->Cout; ++co)
                    if ((w[kh * a->w_s[0] + kw * a->w_s[1] + ci * a->w_s[2] + co * a->w_s[3]] & exponent_mask) ==
                        exponent_mask)
                        return false;
    return true;
}

// The float32 output row into dx row `base` (its type, its strides).
static inline void fast_scatter(const Conv2dInputGradArgs* a, idx base, const float* out_row) {
    const idx out_pixel = a->G * a->cin_g_pad;
    for (idx g = 0; g < a->G; ++g)
        avx512::scatter_rows<float>(a->dx, a->dx_type, base + g * a->cin_g * a->dx_s[3], a->W, a->dx_s[2],
                                    a->cin_g, a->dx_s[3], out_row + g * a->cin_g_pad, out_pixel);
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
static bool applies(const Conv2dInputGradArgs* a) {
    return a->dy_type == BF16 && a->w_type == BF16 && a->dx_type == BF16 && fast_filter_finite(a, 0x7f80u);
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
static void prepare(Conv2dInputGradArgs* a) {
    a->K2 = (a->cout_g + 1) / 2;
    a->packed_bytes = a->KH * a->KW * a->G * a->K2 * a->cin_g_pad * (idx)sizeof(pair);
    a->scratch_elems = round_up(a->dy_slots * row_pairs(a), 16) + round_up(a->W * a->G * a->cin_g_pad, 16) +
                       row_taps_bytes(a) / (idx)sizeof(float) + 16;
}

static void pack(Conv2dInputGradArgs* a) {
    const std::uint16_t* w = (const std::uint16_t*)a->w;
    pair* packed = (pair*)a->packed;
    for (idx tap = 0; tap < a->KH * a->KW; ++tap)
        for (idx g = 0; g < a->G; ++g)
            for (idx k2 = 0; k2 < a->K2; ++k2) {
                pair* dst = packed + ((tap * a->G + g) * a->K2 + k2) * a->cin_g_pad;
                const idx co = g * a->cout_g + 2 * k2;
                const bool odd = 2 * k2 + 1 < a->cout_g;
                const idx src = (tap / a->KW) * a->w_s[0] + (tap % a->KW) * a->w_s[1] + co * a->w_s[3];
                for (idx ci = 0; ci < a->cin_g_pad; ++ci) {
                    if (ci >= a->cin_g) { dst[ci] = 0; continue; }
                    const pair lo = w[src + ci * a->w_s[2]];
                    const pair hi = odd ? w[src + ci * a->w_s[2] + a->w_s[3]] : 0;
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
static void row(const Conv2dInputGradArgs* a, idx row_index, void* raw) {
    Scratch s = scratch(a, raw);
    const idx n = row_index / a->H, ih = row_index % a->H;
    const idx G = a->G, K2 = a->K2, cin_g_pad = a->cin_g_pad, pitch = G * K2, rp = row_pairs(a);
    const idx n_slots = row_slots(a, ih, &s);
    cache_dy_rows(a, n, n_slots, &s, [&](idx oh, idx slot) { stage_row(a, n, oh, s.dy_rows + slot * rp); });
    const pair* packed = (const pair*)a->packed;
    // Tiles store bfloat16 straight into dx when its channels are contiguous and
    // every lane of a tile is a real channel; else float32 into the output row,
    // scattered below.
    const idx base = n * a->dx_s[0] + ih * a->dx_s[1];
    const int direct = a->dx_s[3] == 1 && a->cin_g == cin_g_pad;
    std::uint16_t* dx_row = (std::uint16_t*)a->dx + base;
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
namespace cvz {
namespace dot_bf16 {
static bool applies(const Conv2dInputGradArgs*) { return false; }
static void prepare(Conv2dInputGradArgs*) {}
static void pack(Conv2dInputGradArgs*) {}
static void row(const Conv2dInputGradArgs*, idx, void*) {}
}  // namespace dot_bf16
}  // namespace cvz
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
static bool applies(const Conv2dInputGradArgs* a) {
    return a->dy_type == F16 && a->w_type == F16 && a->dx_type == F16 && a->cin_g >= 32 &&
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
static void prepare(Conv2dInputGradArgs* a) {
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
static void pack(Conv2dInputGradArgs* a) {
    const half* w = (const half*)a->w;
    half* packed = (half*)a->packed;
    const idx total = a->KH * a->KW * a->G * a->cout_g * a->cin_g_pad;
    for (idx tap = 0; tap < a->KH * a->KW; ++tap)
        for (idx g = 0; g < a->G; ++g)
            for (idx k = 0; k < a->cout_g; ++k) {
                half* dst = packed + ((tap * a->G + g) * a->cout_g + k) * a->cin_g_pad;
                const half* src = w + (tap / a->KW) * a->w_s[0] + (tap % a->KW) * a->w_s[1] + (g * a->cout_g + k) * a->w_s[3];
                for (idx ci = 0; ci < a->cin_g_pad; ++ci) dst[ci] = ci < a->cin_g ? src[ci * a->w_s[2]] : 0;
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
static void row(const Conv2dInputGradArgs* a, idx row_index, void* raw) {
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
    const idx base = n * a->dx_s[0] + ih * a->dx_s[1];
    const int direct = a->dx_s[3] == 1 && a->cin_g == cin_g_pad;  // float16 straight into dx
    half* dx_row = (half*)a->dx + base;
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
namespace cvz {
namespace dot_f16 {
static bool applies(const Conv2dInputGradArgs*) { return false; }
static void prepare(Conv2dInputGradArgs*) {}
static void pack(Conv2dInputGradArgs*) {}
static void row(const Conv2dInputGradArgs*, idx, void*) {}
}  // namespace dot_f16
}  // namespace cvz
#endif

namespace cvz {

namespace {
typedef void (*PrepareFn)(Conv2dInputGradArgs*);
typedef void (*PackFn)(Conv2dInputGradArgs*);
typedef void (*RowFn)(const Conv2dInputGradArgs*, idx, void*);
const PrepareFn prepare_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_input_grad_prepare);
const PackFn pack_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_input_grad_pack);
const RowFn row_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_input_grad_row);
}  // namespace

void conv2d_input_grad_prepare(Conv2dInputGradArgs* a, int isa, int f64) {
    dy_cache_slots(a);
    isa_pick(prepare_table, isa, f64)(a);
    const int wanted = f64 || isa != ISA_AVX512 ? 0 : a->dot;
    a->dot = (wanted & FAST_BF16_DOT) && dot_bf16::applies(a) ? FAST_BF16_DOT
             : (wanted & FAST_F16_FMA) && dot_f16::applies(a) ? FAST_F16_FMA
                                                                : 0;
    if (a->dot == FAST_BF16_DOT) dot_bf16::prepare(a);
    if (a->dot == FAST_F16_FMA) dot_f16::prepare(a);
}

void conv2d_input_grad_pack(Conv2dInputGradArgs* a, int isa, int f64) {
    if (a->dot == FAST_BF16_DOT) return dot_bf16::pack(a);
    if (a->dot == FAST_F16_FMA) return dot_f16::pack(a);
    isa_pick(pack_table, isa, f64)(a);
}

void conv2d_input_grad_row(const void* args, int isa, int f64, idx row, void* scratch) {
    const Conv2dInputGradArgs* a = static_cast<const Conv2dInputGradArgs*>(args);
    if (a->dot == FAST_BF16_DOT) return dot_bf16::row(a, row, scratch);
    if (a->dot == FAST_F16_FMA) return dot_f16::row(a, row, scratch);
    isa_pick(row_table, isa, f64)(a, row, scratch);
}

}  // namespace cvz

#else  // CVZ_PER_ISA_PASS: the kernel body, compiled once per ISA by cvz_per_isa.hpp

// The conv2d input gradient, written once against Simd<T> (cvz_simd_generic.hpp)
// and compiled once per instruction set by cvz_per_isa.hpp (the entry points and
// their dispatch tables are at the top of this file).
//
// Nothing here depends on the thread count: each input row is written by one
// call of conv2d_input_grad_row, and each element sums its terms in one fixed
// order (taps, then output channels).
//
// Only (output cell, tap) pairs that exist are ever added: where a tile's taps
// read outside [0, OW) they read zeros (a padded copy of dy), which adds nothing
// to a finite sum; when the filter holds a NaN or an infinity (NaN * 0 = NaN),
// such edge tiles take an exact path that skips the absent pairs instead.

// Tile shapes per ISA (generic, AVX2, AVX-512): pixels of a tile of 2 and of 1
// vectors of input channels; fused tiles (1 and 2 vectors), if any.
constexpr int MR2 = per_isa(THIS_ISA, 4, 6, 14);
constexpr int MR1 = per_isa(THIS_ISA, 4, 12, 24);
constexpr bool FUSED = THIS_ISA == ISA_AVX512;
constexpr int MR_FUSED = per_isa(THIS_ISA, 1, 1, 16);
constexpr int MR_FUSED2 = per_isa(THIS_ISA, 1, 1, 8);
// Fused tiles on AVX-512 only: AVX2's (8 x 1 and 4 x 2 vectors) lost to the
// plain tiles (Intel Xeon, paired, 2 threads: bpi_resnet 12.66 -> 11.45 ms,
// bpi_cifar 0.525 -> 0.495, bpi_dilated 2.01 -> 1.89; 8 and 24 input channels,
// 1-vector tiles, 3-4% slower): their 8 accumulators each take KWT chained FMAs
// per output channel, too few chains to hide the FMA latency.  AVX-512's 2-vector
// tiles run only with a window step of 2, reading blocked rows (below); with a
// step of 1 the plain tiles beat them too (bpi_resnet 5.97 -> 5.78).  Tuned on
// Intel; AMD untested.
//
// Channels per block of the blocked dy rows (Conv2dInputGradArgs::dy_blocked),
// which the fused tiles read where their windows span 12 pixels or more: 1-vector
// tiles (MR_FUSED 16: 18 to 22 pixels) and 2-vector tiles with a window step of 2
// (bpi_dilated 1.048 -> 1.021 ms).
constexpr bool BLOCKED_DY = FUSED;
constexpr int DY_BLOCK = 16;

// A tile whose taps of each kernel row share dy pixels: with KWT taps per row
// whose dy windows are offset by DSTEP pixels from each other (tap t reads
// pixels p + (KWT - 1 - t) * DSTEP of the window), each dy value is broadcast
// once and feeds every tap that reads it -- MR*KWT*NRV FMAs for
// MR + (KWT-1)*DSTEP broadcasts instead of one broadcast per MR*NRV FMAs.
// a_rows[s]: window start of kernel row s; b_taps[s * KWT + t]: filter of tap t.
// Per element the terms are added in order of (kernel row, output channel, tap).
// With KB > 0 the dy windows are blocked: channel k of pixel e at
// a[(k / KB) * a_pixel_stride + e * KB + k % KB] (a_pixel_stride the block
// stride), so the E broadcasts of a channel sit at fixed offsets from one
// pointer; at a run-time pixel pitch each needs its own pointer register, more
// than x86 has (AVX-512, MR 16, 3 taps: 125-133 GFLOP/s on one core against
// 155-169 blocked, both from L1).
template <class T, int MR, int KWT, int DSTEP, int NRV, int KB = 0>
static inline void input_grad_tile_fused(const T* const* a_rows, const T* const* b_taps, idx n_rows,
                                         idx a_pixel_stride, idx K, idx b_row_stride,
                                         T* out, idx out_pixel_stride, idx n_pixels) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    constexpr int E = MR + (KWT - 1) * DSTEP;
    vec acc[MR][NRV];
    CVZ_UNROLL(32)
    for (int p = 0; p < MR; ++p)
        CVZ_UNROLL(4)
        for (int q = 0; q < NRV; ++q) acc[p][q] = S::zero();
    const idx run = KB ? KB : K;  // output channels per block (all K when not blocked)
    for (idx s = 0; s < n_rows; ++s) {
        const T* const* b = b_taps + s * KWT;
        for (idx k0 = 0; k0 < K; k0 += run) {
            const idx k_end = K - k0 < run ? K : k0 + run;
            const T* block = KB ? a_rows[s] + k0 / (KB ? KB : 1) * a_pixel_stride : a_rows[s];
            for (idx k = k0; k < k_end; ++k) {
                vec bv[KWT][NRV];
                CVZ_UNROLL(8)
                for (int t = 0; t < KWT; ++t)
                    CVZ_UNROLL(4)
                    for (int q = 0; q < NRV; ++q) bv[t][q] = S::load(b[t] + k * b_row_stride + q * S::V);
                const T* ak = block + (k - k0);
                CVZ_UNROLL(64)
                for (int e = 0; e < E; ++e) {
                    const vec av = S::set1(ak[e * (KB ? KB : a_pixel_stride)]);
                    CVZ_UNROLL(8)
                    for (int t = 0; t < KWT; ++t) {
                        const int p = e - (KWT - 1 - t) * DSTEP;
                        if (p >= 0 && p < MR)
                            CVZ_UNROLL(4)
                            for (int q = 0; q < NRV; ++q) acc[p][q] = S::fma(av, bv[t][q], acc[p][q]);
                    }
                }
            }
        }
    }
    for (int p = 0; p < MR; ++p)
        if (p < n_pixels)
            CVZ_UNROLL(4)
            for (int q = 0; q < NRV; ++q) S::store(out + p * out_pixel_stride + q * S::V, acc[p][q]);
}

// The fused tile for this (taps per row, window step, pixels left, vectors), or nullptr.
template <class T>
using FusedTile = void (*)(const T* const*, const T* const*, idx, idx, idx, idx, T*, idx, idx);

template <class T, int NRV>
static FusedTile<T> input_grad_fused_for(idx kwt, idx dstep, idx rest, idx* shape, bool blocked = false) {
    if constexpr (FUSED) {
        constexpr int MR = NRV == 1 ? MR_FUSED : MR_FUSED2, HALF = (MR + 1) / 2;
        const bool full = rest > HALF;
        *shape = full ? MR : HALF;
#define CVZ_FUSED(k, d) \
    if (kwt == k && dstep == d) { \
        if constexpr (BLOCKED_DY && (NRV == 1 || d > 1)) \
            if (blocked) \
                return full ? &input_grad_tile_fused<T, MR, k, d, NRV, DY_BLOCK> \
                            : &input_grad_tile_fused<T, HALF, k, d, NRV, DY_BLOCK>; \
        if constexpr (NRV == 1) \
            return full ? &input_grad_tile_fused<T, MR, k, d, NRV> : &input_grad_tile_fused<T, HALF, k, d, NRV>; \
    }
        CVZ_FUSED(3, 1) CVZ_FUSED(3, 2)
        if (NRV == 1) {
            CVZ_FUSED(5, 1) CVZ_FUSED(5, 2) CVZ_FUSED(7, 1) CVZ_FUSED(7, 2)
        }
#undef CVZ_FUSED
    }
    (void)kwt; (void)dstep; (void)rest; (void)shape; (void)blocked;
    return nullptr;
}

// Per-thread scratch of the input gradient, carved from one allocation.  When
// dy can be read in place (compute dtype, contiguous channels), tiles read it
// directly and only edge tiles (some tap reads outside [0, OW)) copy their
// pixels, zero-padded, into `stage`.  Otherwise whole dy rows are converted into
// `dy_rows` [KH][ow_span][Cout], zero outside [0, OW).  `out_row` [W][G][cin_g_pad]
// holds results that cannot be stored in place; then the tap tables.
template <class T>
struct InputGradScratch : RowTaps {
    T* dy_rows;
    T* dy_blocks;
    T* stage;
    T* out_row;
    const T** a_ptrs;
    const T** b_ptrs;
};

static inline idx input_grad_mr_max() { return MR2 > MR1 ? MR2 : MR1; }

// Elements of one staged dy row in blocks of DY_BLOCK channels.
static inline idx input_grad_dy_block_elems(const Conv2dInputGradArgs* a) {
    return (a->Cout + DY_BLOCK - 1) / DY_BLOCK * a->ow_span * DY_BLOCK;
}

template <class T>
static inline InputGradScratch<T> input_grad_scratch(const Conv2dInputGradArgs* a, void* raw) {
    InputGradScratch<T> s;
    const idx taps = a->KH * a->KW;
    s.dy_rows = (T*)raw;
    s.dy_blocks = s.dy_rows + round_up(a->dy_direct ? 0 : a->dy_slots * a->ow_span * a->Cout, 16);
    s.stage = s.dy_blocks + (a->dy_blocked ? a->dy_slots * input_grad_dy_block_elems(a) : 0);
    s.out_row = s.stage + round_up(a->dy_direct ? taps * input_grad_mr_max() * a->dy_s[2] : 0, 16);
    s.a_ptrs = (const T**)carve_row_taps(&s, (idx*)(s.out_row + round_up(a->direct ? 0 : a->W * a->G * a->cin_g_pad, 16)), a);
    s.b_ptrs = s.a_ptrs + taps;
    return s;
}

// A thread's staged dy rows at most (beyond it, plain NHWC rows are read in place).
constexpr idx DY_STAGE_MAX_BYTES = idx(4) << 20;

template <class T>
static void conv2d_input_grad_prepare(Conv2dInputGradArgs* a) {
    a->V = Simd<T>::V;
    a->cin_g_pad = round_up(a->cin_g, a->V);
    const bool dx_same = (sizeof(T) == 4) ? a->dx_type == F32 : a->dx_type == F64;
    const bool dy_same = (sizeof(T) == 4) ? a->dy_type == F32 : a->dy_type == F64;
    a->direct = dx_same && a->dx_s[3] == 1 && a->cin_g_pad == a->cin_g;
    // The dy row buffer covers every ow a tile may read, MR pixels of slack included.
    const idx mr = input_grad_mr_max();
    idx lo = 0, hi = a->OW;
    for (idx r = 0; r < a->sw && r < a->W; ++r) {
        const idx n_pix = (a->W - r + a->sw - 1) / a->sw;
        for (idx kw = 0; kw < a->KW; ++kw) {
            idx u = r + a->pl - kw * a->dw;
            if (((u % a->sw) + a->sw) % a->sw != 0) continue;
            idx ow0 = floor_div(u, a->sw);
            if (ow0 < lo) lo = ow0;
            if (ow0 + n_pix + mr > hi) hi = ow0 + n_pix + mr;
        }
    }
    a->ow_lo = lo;
    a->ow_span = hi - lo;
    // Plain NHWC dy rows are read in place only when a thread's staged rows would
    // be big: staged, each dy row is copied once and kept for the KH input rows
    // that read it, while in place every edge tile copies its window per kernel
    // row, and with rows of up to a few tiles every tile is an edge tile (one
    // core, staged against in place: bpi_cifar 0.81 vs 0.85 ms, bpi_resnet 18.0
    // vs 18.5, bpi_k7 3.96 vs 4.07, bpi_stride2 9.7 vs 9.9; 2x224x224x64 and
    // bpi_dilated the same within the noise).
    a->dy_direct = dy_same && a->dy_s[3] == 1 && a->dy_s[2] == a->Cout &&
                   a->dy_slots * a->ow_span * a->Cout * (idx)sizeof(T) > DY_STAGE_MAX_BYTES;
    a->packed_bytes = a->KH * a->KW * a->G * a->cout_g * a->cin_g_pad * (idx)sizeof(T);
    const idx taps = a->KH * a->KW;
    // Blocked copies of the staged rows where a fused tile reads them: at stride
    // 1 every row's taps are KW windows dw pixels apart, so input_grad_fused_for
    // (the tiles' own dispatch) tells, for the 1-vector remainder and the
    // 2-vector blocks of input channels; and only where a group's channels start
    // on a block.
    const bool narrow = a->cin_g_pad / a->V % 2 == 1, wide = a->cin_g_pad >= 2 * a->V;
    idx shape = 0;
    const bool narrow_blocked =
        narrow && a->sw == 1 && input_grad_fused_for<T, 1>(a->KW, a->dw, 1, &shape, true) != nullptr;
    const bool wide_blocked =
        wide && a->sw == 1 && input_grad_fused_for<T, 2>(a->KW, a->dw, 1, &shape, true) != nullptr;
    a->dy_blocked = BLOCKED_DY && !a->dy_direct && (a->G == 1 || a->cout_g % DY_BLOCK == 0) &&
                    (narrow_blocked || wide_blocked);
    // Where every tile reads the blocked rows, the plain rows are not staged at
    // all, and plain float dy is blocked straight from the caller's array
    // (bpi_cifar: the plain copy was 5% of the time).  Edge tiles of a
    // non-finite filter read the plain rows: conv2d_input_grad_row checks that.
    a->dy_pixel_rows = !a->dy_blocked || !dy_same || a->dy_s[3] != 1 || (narrow && !narrow_blocked) ||
                       (wide && !wide_blocked);
    a->scratch_elems = round_up(a->dy_direct ? 0 : a->dy_slots * a->ow_span * a->Cout, 16) +
                       (a->dy_blocked ? a->dy_slots * input_grad_dy_block_elems(a) : 0) +
                       round_up(a->dy_direct ? taps * mr * a->dy_s[2] : 0, 16) +
                       round_up(a->direct ? 0 : a->W * a->G * a->cin_g_pad, 16) + row_taps_bytes(a) / (idx)sizeof(T) + 16;
}

// Pack the HWIO filter as [KH][KW][G][cout_g][cin_g_pad] in the compute type,
// zero in the padding channels, so a tile reads contiguous input channels.
// Notes whether any weight is NaN or infinite (then edge tiles go exact).
template <class T>
static void conv2d_input_grad_pack(Conv2dInputGradArgs* a) {
    T* packed = (T*)a->packed;
    bool nonfinite = false;
    for (idx kh = 0; kh < a->KH; ++kh)
        for (idx kw = 0; kw < a->KW; ++kw)
            for (idx g = 0; g < a->G; ++g)
                for (idx co = 0; co < a->cout_g; ++co) {
                    T* dst = packed + (((kh * a->KW + kw) * a->G + g) * a->cout_g + co) * a->cin_g_pad;
                    idx src = kh * a->w_s[0] + kw * a->w_s[1] + (g * a->cout_g + co) * a->w_s[3];
                    for (idx ci = 0; ci < a->cin_g; ++ci) {
                        dst[ci] = load_as<T>(a->w, a->w_type, src + ci * a->w_s[2]);
                        nonfinite |= nonfinite_bits(dst[ci]);
                    }
                    for (idx ci = a->cin_g; ci < a->cin_g_pad; ++ci) dst[ci] = 0;
                }
    a->exact_edges = nonfinite;
}

// dy pixels [first, last) of one row (pixel pitch `pitch`, cout_g channels used):
// the row itself when all lie inside [0, OW), else a copy in `stage`, same
// pitch, with zeros for the pixels outside.
template <class T>
static inline const T* input_grad_dy_window(const T* src_row, idx first, idx last, idx OW, idx pitch, idx cout_g,
                                            T* stage) {
    if (first >= 0 && last <= OW) return src_row + first * pitch;
    idx lo = first < 0 ? 0 : first;
    if (lo > last) lo = last;
    idx hi = last > OW ? OW : last;
    if (hi < lo) hi = lo;
    if (lo > first) std::memset(stage, 0, (std::size_t)((lo - first) * pitch) * sizeof(T));
    if (hi > lo)
        std::memcpy(stage + (lo - first) * pitch, src_row + lo * pitch,
                    (std::size_t)((hi - lo - 1) * pitch + cout_g) * sizeof(T));
    if (last > hi) std::memset(stage + (hi - first) * pitch, 0, (std::size_t)((last - hi) * pitch) * sizeof(T));
    return stage;
}

// An edge tile of n_pixels pixels from j0, all channel blocks [c_begin, c_end),
// exactly: pixel p gets the terms of tap t only when its dy pixel
// tap_ow0[t] + j0 + p lies in [0, OW).  The taps come as n_rows rows of kwt:
// s.a_ptrs[row] is the dy window of the row, and tap i of the row reads it
// (kwt - 1 - i) * dstep pixels on (kwt = 1: a plain tile, one tap a row).  Per
// element the terms are added in the order of the fast tiles: rows, output
// channels, then the row's taps from last to first.
template <class T, int NRV>
CVZ_NOINLINE static void input_grad_tile_exact(const Conv2dInputGradArgs* a, const InputGradScratch<T>& s, idx g,
                                               idx c_begin, idx c_end, idx n_rows, idx kwt, idx dstep, idx j0,
                                               idx n_pixels, idx a_pixel_stride, T* out, idx out_pixel_stride) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    const T* packed = (const T*)a->packed;
    const idx K = a->cout_g, b_row_stride = a->cin_g_pad;
    for (idx c0 = c_begin; c0 < c_end; c0 += NRV * S::V)
        for (idx p = 0; p < n_pixels; ++p) {
            vec acc[NRV];
            for (int q = 0; q < NRV; ++q) acc[q] = S::zero();
            for (idx row = 0; row < n_rows; ++row)
                for (idx k = 0; k < K; ++k)
                    for (idx i = kwt - 1; i >= 0; --i) {
                        const idx t = row * kwt + i, ow = s.tap_ow0[t] + j0 + p;
                        if (ow < 0 || ow >= a->OW) continue;  // this tap reads padding here
                        const vec av = S::set1(s.a_ptrs[row][(p + (kwt - 1 - i) * dstep) * a_pixel_stride + k]);
                        const T* b = packed + (s.tap_k[t] * a->G + g) * K * b_row_stride + c0 + k * b_row_stride;
                        for (int q = 0; q < NRV; ++q) acc[q] = S::fma(av, S::load(b + q * S::V), acc[q]);
                    }
            for (int q = 0; q < NRV; ++q) S::store(out + p * out_pixel_stride + c0 + q * S::V, acc[q]);
        }
}

// Whether some tap of a tile of n_pixels pixels from j0 reads outside [0, OW).
static inline bool input_grad_edge_tile(const idx* tap_ow0, idx n_taps, idx j0, idx n_pixels, idx OW) {
    bool edge = false;
    for (idx t = 0; t < n_taps; ++t) edge = edge || tap_ow0[t] + j0 < 0 || tap_ow0[t] + j0 + n_pixels > OW;
    return edge;
}

// One phase r of an input row, channel blocks [c_begin, c_end) of NRV vectors:
// tiles of up to MR pixels, every tap of the phase.  A tile reads
// dy in place when all its windows lie inside [0, OW); an edge tile gives the
// taps that cross the border a zero-padded copy (same pixel pitch as dy), or
// with a non-finite filter goes through input_grad_tile_exact.  Out of line:
// inlined into the row function (as GCC did once the fused tiles left AVX2),
// its tiles ran 18% slower (AVX2 bpi_k7 2.52 -> 2.98 ms).
template <class T, int MR, int NRV>
CVZ_NOINLINE static void input_grad_row_pass(const Conv2dInputGradArgs* a, const InputGradScratch<T>& s, idx n,
                                             idx g, idx c_begin, idx c_end, idx r, idx n_pix, idx n_taps, T* out_base,
                                             idx out_pixel, idx out_group) {
    typedef Simd<T> S;
    const T* dy = (const T*)a->dy;
    const T* packed = (const T*)a->packed;
    const idx Cout = a->Cout, cin_g_pad = a->cin_g_pad;
    const idx row_elems = a->ow_span * Cout;
    const idx mr_max = input_grad_mr_max();
    const idx a_stride = a->dy_direct ? a->dy_s[2] : Cout;
    // Rows of MR/2 pixels or more: as few tiles as MR-pixel tiles need, of
    // sizes within one of each other (balanced_tiles); shorter rows: the
    // smallest shape that covers the rest (tile_shape).
    constexpr idx half = (MR + 1) / 2;
    const bool balanced = n_pix >= half;
    const EvenSplit split(n_pix, balanced ? (n_pix + MR - 1) / MR : 1);
    idx j0 = 0, tile_index = 0;
    while (j0 < n_pix) {
        const idx rest = n_pix - j0;
        // The tile's shape, and so the dy pixels it reads.
        const idx shape = balanced ? split.size(tile_index) : tile_shape<MR>(rest);
        ++tile_index;
        if (a->dy_direct) {
            const idx pitch = a->dy_s[2];
            for (idx t = 0; t < n_taps; ++t) {
                const idx first = s.tap_ow0[t] + j0, last = first + shape;
                const T* src_row = dy + n * a->dy_s[0] + s.slot_oh[s.tap_slot[t]] * a->dy_s[1] + g * a->cout_g;
                s.a_ptrs[t] = input_grad_dy_window<T>(src_row, first, last, a->OW, pitch, a->cout_g,
                                                      s.stage + t * mr_max * pitch);
            }
        } else {
            for (idx t = 0; t < n_taps; ++t)
                s.a_ptrs[t] = s.dy_rows + s.row_of_slot[s.tap_slot[t]] * row_elems +
                              (s.tap_ow0[t] + j0 - a->ow_lo) * Cout + g * a->cout_g;
        }
        const idx np = rest < shape ? rest : shape;
        if (a->exact_edges && input_grad_edge_tile(s.tap_ow0, n_taps, j0, np, a->OW)) {
            input_grad_tile_exact<T, NRV>(a, s, g, c_begin, c_end, n_taps, 1, 0, j0, np, a_stride,
                                          out_base + (r + j0 * a->sw) * out_pixel + g * out_group, a->sw * out_pixel);
            j0 += np;
            continue;
        }
        idx done = 0;
        for (idx c0 = c_begin; c0 < c_end; c0 += NRV * S::V) {
            for (idx t = 0; t < n_taps; ++t)
                s.b_ptrs[t] = packed + (s.tap_k[t] * a->G + g) * a->cout_g * cin_g_pad + c0;
            T* out = out_base + (r + j0 * a->sw) * out_pixel + g * out_group + c0;
            if (balanced) {
                tile_of_size<half, MR>(shape, 0, [&](auto size, idx) {
                    gemm_tile<T, decltype(size)::value, NRV>(s.a_ptrs, s.b_ptrs, n_taps, a_stride, a->cout_g,
                                                             cin_g_pad, out, a->sw * out_pixel, decltype(size)::value);
                });
                done = shape;
            } else {  // the smallest tile shape that covers the rest
                done = gemm_tiles<T, MR, NRV>(s.a_ptrs, s.b_ptrs, n_taps, a_stride, a->cout_g, cin_g_pad, out,
                                              a->sw * out_pixel, rest);
            }
        }
        j0 += done;
    }
}

// One phase r of an input row, channel blocks [c_begin, c_end) of NRV vectors,
// with fused tiles: each tile reads, per kernel row, one dy window of
// shape + (kwt-1)*dstep pixels (in place, or staged zero-padded at the edges),
// shared by all its channel blocks.  With a non-finite filter, edge tiles go exact.
template <class T, int NRV>
CVZ_NOINLINE static void input_grad_row_fused(const Conv2dInputGradArgs* a, const InputGradScratch<T>& s, idx n,
                                              idx g, idx c_begin, idx c_end, idx r, idx n_pix, idx n_slots, idx kwt,
                                              idx dstep, T* out_base, idx out_pixel, idx out_group) {
    typedef Simd<T> S;
    const T* dy = (const T*)a->dy;
    const T* packed = (const T*)a->packed;
    const idx Cout = a->Cout, cin_g_pad = a->cin_g_pad;
    const idx row_elems = a->ow_span * Cout;
    const idx mr_max = input_grad_mr_max();
    const bool blocked = a->dy_blocked != 0;  // a 2-vector fused tile is reached only blocked
    idx j0 = 0;
    while (j0 < n_pix) {
        idx shape = 0;
        const FusedTile<T> tile = input_grad_fused_for<T, NRV>(kwt, dstep, n_pix - j0, &shape, blocked);
        const idx window = shape + (kwt - 1) * dstep;
        idx a_stride = Cout;
        for (idx slot = 0; slot < n_slots; ++slot) {
            const idx first = s.tap_ow0[slot * kwt + kwt - 1] + j0;  // the last tap's window starts first
            if (!a->dy_direct) {
                s.a_ptrs[slot] = s.dy_rows + s.row_of_slot[slot] * row_elems + (first - a->ow_lo) * Cout +
                                 g * a->cout_g;
                continue;
            }
            const idx pitch = a->dy_s[2];
            a_stride = pitch;
            const T* src_row = dy + n * a->dy_s[0] + s.slot_oh[slot] * a->dy_s[1] + g * a->cout_g;
            s.a_ptrs[slot] = input_grad_dy_window<T>(src_row, first, first + window, a->OW, pitch, a->cout_g,
                                                     s.stage + slot * mr_max * a->KW * pitch);  // room for a window
        }
        const idx np = n_pix - j0 < shape ? n_pix - j0 : shape;
        if (a->exact_edges && input_grad_edge_tile(s.tap_ow0, n_slots * kwt, j0, np, a->OW)) {
            input_grad_tile_exact<T, NRV>(a, s, g, c_begin, c_end, n_slots, kwt, dstep, j0, np, a_stride,
                                          out_base + (r + j0 * a->sw) * out_pixel + g * out_group, a->sw * out_pixel);
            j0 += np;
            continue;
        }
        if (blocked) {  // the same windows in the blocked rows
            a_stride = a->ow_span * DY_BLOCK;
            for (idx slot = 0; slot < n_slots; ++slot)
                s.a_ptrs[slot] = s.dy_blocks + s.row_of_slot[slot] * input_grad_dy_block_elems(a) +
                                 g * a->cout_g / DY_BLOCK * a_stride +
                                 (s.tap_ow0[slot * kwt + kwt - 1] + j0 - a->ow_lo) * DY_BLOCK;
        }
        for (idx c0 = c_begin; c0 < c_end; c0 += NRV * S::V) {
            for (idx slot = 0; slot < n_slots; ++slot)
                for (idx i = 0; i < kwt; ++i) {
                    const idx t = slot * kwt + i;
                    s.b_ptrs[t] = packed + (s.tap_k[t] * a->G + g) * a->cout_g * cin_g_pad + c0;
                }
            T* out = out_base + (r + j0 * a->sw) * out_pixel + g * out_group + c0;
            tile(s.a_ptrs, s.b_ptrs, n_slots, a_stride, a->cout_g, cin_g_pad, out, a->sw * out_pixel, np);
        }
        j0 += np;
    }
}

// Compute one input row dx[n, ih, :, :] (row = n * H + ih).
template <class T>
static void conv2d_input_grad_row(const Conv2dInputGradArgs* a, idx row, void* raw_scratch) {
    typedef Simd<T> S;
    InputGradScratch<T> s = input_grad_scratch<T>(a, raw_scratch);
    const idx n = row / a->H, ih = row % a->H;
    const idx Cout = a->Cout, G = a->G, cin_g_pad = a->cin_g_pad;
    const idx row_elems = a->ow_span * Cout;

    // Kernel rows that reach this input row.  When dy is not read in place, each
    // needs a converted copy of its dy row, kept in this thread's cache slots
    // (tap_slot[] below then indexes s.row_of_slot).
    const idx n_slots = row_slots(a, ih, &s);
    if (!a->dy_direct)
        cache_dy_rows(a, n, n_slots, &s, [&](idx oh, idx slot) {
            T* staged = s.dy_rows + slot * row_elems + (0 - a->ow_lo) * Cout;
            const bool pixel_rows = a->dy_pixel_rows || a->exact_edges;
            if (pixel_rows)
                gather_rows<T>(staged, Cout, a->dy, a->dy_type, n * a->dy_s[0] + oh * a->dy_s[1], a->OW, a->dy_s[2],
                               Cout, a->dy_s[3]);
            if (a->dy_blocked) {  // the same row, DY_BLOCK channels a block (zeros past Cout stay zero)
                T* blocks = s.dy_blocks + slot * input_grad_dy_block_elems(a) + (0 - a->ow_lo) * DY_BLOCK;
                // From the plain copy, or (plain float dy, see prepare) the caller's row.
                const T* row = pixel_rows ? staged : (const T*)a->dy + n * a->dy_s[0] + oh * a->dy_s[1];
                const idx pitch = pixel_rows ? Cout : a->dy_s[2];
                for (idx c0 = 0; c0 < Cout; c0 += DY_BLOCK)
                    copy_channel_block<T>(blocks + c0 / DY_BLOCK * a->ow_span * DY_BLOCK, DY_BLOCK, row + c0, pitch,
                                          a->OW, Cout - c0 < DY_BLOCK ? Cout - c0 : DY_BLOCK);
            }
        });

    T* out_base;
    idx out_pixel, out_group;
    if (a->direct) {
        out_base = (T*)a->dx + n * a->dx_s[0] + ih * a->dx_s[1];
        out_pixel = a->dx_s[2];
        out_group = a->cin_g;
    } else {
        out_base = s.out_row;
        out_pixel = G * cin_g_pad;
        out_group = cin_g_pad;
    }

    for (idx r = 0; r < a->sw && r < a->W; ++r) {
        const idx n_pix = (a->W - r + a->sw - 1) / a->sw;  // pixels iw = r + j * sw
        const idx n_taps = phase_taps(a, r, n_slots, &s);
        // When the kernel rows' taps form an arithmetic run of windows (step
        // dstep), narrow tiles can fuse them.
        const idx kwt = n_slots ? n_taps / n_slots : 0;
        idx dstep = 0;
        const bool fusable = phase_fusable(s, n_taps, kwt, &dstep);
        for (idx g = 0; g < G; ++g) {
            // Wide blocks (2 vectors of input channels) share one pass over the
            // tiles, so each tile's dy pointers (and edge copies) serve them all;
            // then the narrow remainder (1 vector), fused when its taps allow.
            const idx wide_end = cin_g_pad / (2 * S::V) * (2 * S::V);
            idx fused_shape = 0;
            if (wide_end > 0) {
                if (fusable && input_grad_fused_for<T, 2>(kwt, dstep, n_pix, &fused_shape, a->dy_blocked) != nullptr)
                    input_grad_row_fused<T, 2>(a, s, n, g, 0, wide_end, r, n_pix, n_slots, kwt, dstep, out_base,
                                               out_pixel, out_group);
                else
                    input_grad_row_pass<T, MR2, 2>(a, s, n, g, 0, wide_end, r, n_pix, n_taps, out_base,
                                                       out_pixel, out_group);
            }
            if (wide_end < cin_g_pad) {
                if (fusable && input_grad_fused_for<T, 1>(kwt, dstep, n_pix, &fused_shape, a->dy_blocked) != nullptr)
                    input_grad_row_fused<T, 1>(a, s, n, g, wide_end, cin_g_pad, r, n_pix, n_slots, kwt, dstep,
                                               out_base, out_pixel, out_group);
                else
                    input_grad_row_pass<T, MR1, 1>(a, s, n, g, wide_end, cin_g_pad, r, n_pix, n_taps, out_base,
                                                       out_pixel, out_group);
            }
        }
    }

    if (!a->direct) {  // convert / scatter the row into dx, group by group
        const idx base = n * a->dx_s[0] + ih * a->dx_s[1];
        for (idx g = 0; g < G; ++g)
            scatter_rows<T>(a->dx, a->dx_type, base + g * a->cin_g * a->dx_s[3], a->W, a->dx_s[2], a->cin_g,
                            a->dx_s[3], s.out_row + g * cin_g_pad, G * cin_g_pad);
    }
}

#endif  // CVZ_PER_ISA_PASS