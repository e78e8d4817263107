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
    Tensor dy;
    Tensor dx;
    Tensor w;
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
void conv2d_input_grad_pack(void* args, int isa, int f64);  // args: a Conv2dInputGradArgs
// One input row (row = n * H + ih) of the call `args` (a Conv2dInputGradArgs), with
// `scratch` of scratch_elems elements, zeroed before first use (a UnitFn of _cvz.pxd).
void conv2d_input_grad_row(const void* args, int isa, int f64, idx row, void* scratch);

// The precision="fast" paths (conv2d_input_grad_fast.cpp), one per half type: whether it
// applies to a call (the CPU's instruction is checked by the caller), then as above.
#define CVZ_FAST_PATH_API(space)                                 \
    namespace space {                                            \
    bool applies(const Conv2dInputGradArgs* a);                  \
    void prepare(Conv2dInputGradArgs* a);                        \
    void pack(Conv2dInputGradArgs* a);                           \
    void row(const Conv2dInputGradArgs* a, idx row, void* raw);  \
    }
CVZ_FAST_PATH_API(dot_bf16)  // bfloat16 on AVX512_BF16's dot product
CVZ_FAST_PATH_API(dot_f16)   // float16 on AVX512_FP16's FMA

}  // namespace cvz

#endif  // CVZ_CONV2D_INPUT_GRAD_INTERFACE

#if defined(CVZ_INTERFACE_ONLY)
// The Cython module's include: the interface above is all it needs.
#elif !defined(CVZ_PER_ISA_PASS)  // 2. the entry points

#include "conv2d_input_grad_rows.hpp"

#define CVZ_OP_BODY "conv2d_input_grad.cpp"  // this file again, once per ISA
#include "cvz_per_isa.hpp"

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

void conv2d_input_grad_pack(void* args, int isa, int f64) {
    Conv2dInputGradArgs* a = static_cast<Conv2dInputGradArgs*>(args);
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
    s.out_row = s.stage + round_up(a->dy_direct ? taps * input_grad_mr_max() * a->dy.s[2] : 0, 16);
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
    const bool dx_same = (sizeof(T) == 4) ? a->dx.type == F32 : a->dx.type == F64;
    const bool dy_same = (sizeof(T) == 4) ? a->dy.type == F32 : a->dy.type == F64;
    a->direct = dx_same && a->dx.s[3] == 1 && a->cin_g_pad == a->cin_g;
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
    a->dy_direct = dy_same && a->dy.s[3] == 1 && a->dy.s[2] == a->Cout &&
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
    a->dy_pixel_rows = !a->dy_blocked || !dy_same || a->dy.s[3] != 1 || (narrow && !narrow_blocked) ||
                       (wide && !wide_blocked);
    a->scratch_elems = round_up(a->dy_direct ? 0 : a->dy_slots * a->ow_span * a->Cout, 16) +
                       (a->dy_blocked ? a->dy_slots * input_grad_dy_block_elems(a) : 0) +
                       round_up(a->dy_direct ? taps * mr * a->dy.s[2] : 0, 16) +
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
                    idx src = kh * a->w.s[0] + kw * a->w.s[1] + (g * a->cout_g + co) * a->w.s[3];
                    for (idx ci = 0; ci < a->cin_g; ++ci) {
                        dst[ci] = load_as<T>(a->w.data, a->w.type, src + ci * a->w.s[2]);
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
    const T* dy = (const T*)a->dy.data;
    const T* packed = (const T*)a->packed;
    const idx Cout = a->Cout, cin_g_pad = a->cin_g_pad;
    const idx row_elems = a->ow_span * Cout;
    const idx mr_max = input_grad_mr_max();
    const idx a_stride = a->dy_direct ? a->dy.s[2] : Cout;
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
            const idx pitch = a->dy.s[2];
            for (idx t = 0; t < n_taps; ++t) {
                const idx first = s.tap_ow0[t] + j0, last = first + shape;
                const T* src_row = dy + n * a->dy.s[0] + s.slot_oh[s.tap_slot[t]] * a->dy.s[1] + g * a->cout_g;
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
    const T* dy = (const T*)a->dy.data;
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
            const idx pitch = a->dy.s[2];
            a_stride = pitch;
            const T* src_row = dy + n * a->dy.s[0] + s.slot_oh[slot] * a->dy.s[1] + g * a->cout_g;
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
                gather_rows<T>(staged, Cout, a->dy.data, a->dy.type, n * a->dy.s[0] + oh * a->dy.s[1], a->OW, a->dy.s[2],
                               Cout, a->dy.s[3]);
            if (a->dy_blocked) {  // the same row, DY_BLOCK channels a block (zeros past Cout stay zero)
                T* blocks = s.dy_blocks + slot * input_grad_dy_block_elems(a) + (0 - a->ow_lo) * DY_BLOCK;
                // From the plain copy, or (plain float dy, see prepare) the caller's row.
                const T* row = pixel_rows ? staged : (const T*)a->dy.data + n * a->dy.s[0] + oh * a->dy.s[1];
                const idx pitch = pixel_rows ? Cout : a->dy.s[2];
                for (idx c0 = 0; c0 < Cout; c0 += DY_BLOCK)
                    copy_channel_block<T>(blocks + c0 / DY_BLOCK * a->ow_span * DY_BLOCK, DY_BLOCK, row + c0, pitch,
                                          a->OW, Cout - c0 < DY_BLOCK ? Cout - c0 : DY_BLOCK);
            }
        });

    T* out_base;
    idx out_pixel, out_group;
    if (a->direct) {
        out_base = (T*)a->dx.data + n * a->dx.s[0] + ih * a->dx.s[1];
        out_pixel = a->dx.s[2];
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
        const idx base = n * a->dx.s[0] + ih * a->dx.s[1];
        for (idx g = 0; g < G; ++g)
            scatter_rows<T>(a->dx.data, a->dx.type, base + g * a->cin_g * a->dx.s[3], a->W, a->dx.s[2], a->cin_g,
                            a->dx.s[3], s.out_row + g * cin_g_pad, G * cin_g_pad);
    }
}

#endif  // CVZ_PER_ISA_PASS