// The depthwise conv2d forward pass: one file in three parts (Highway's
// foreach_target idiom, see cvz_per_isa.hpp):
//   1. the interface, its argument struct and entry points: all the Cython
//      module includes (it defines CVZ_INTERFACE_ONLY first);
//   2. the entry points, each dispatching on a table [isa][f64] of the body's
//      instantiations;
//   3. the kernel body, compiled once per ISA: cvz_per_isa.hpp includes this
//      file again with CVZ_PER_ISA_PASS defined.
#ifndef CVZ_DEPTHWISE_FORWARD_INTERFACE  // 1. the interface
#define CVZ_DEPTHWISE_FORWARD_INTERFACE

#include "cvz_common.hpp"

namespace cvz {

// y[n, oh, ow, c*M + m] = sum over taps (kh, kw) of
// x[n, oh*sh - pt + kh*dh, ow*sw - pl + kw*dw, c] * w[kh, kw, c, m]: a grouped
// conv with G = Cin groups of one input channel (cin_g = 1) and M = cout_g output
// channels each.  Element strides in logical NHWC order (the caller permutes
// NCHW); the filter is [KH, KW, C, M].
struct DepthwiseForwardArgs : ConvDims {
    Tensor x;
    Tensor w;
    Tensor y;
    // Filled in by prepare(): the vector width, output channels C*M padded to
    // it, whether input rows are read in place and outputs stored straight into
    // y (with streaming stores when y_stream, see streamable()), the output
    // columns [ow_lo, ow_hi) whose taps all read real columns, the per-thread
    // scratch size, the staged-row slots (a ring when `ring`, see ring_slots()),
    // and c_tail: the channels of the last vector where rows read or written in
    // place end in a partial one (read and written through masks: load_lanes), else 0.
    // The caller allocates `packed` ([KH][KW][cm_pad] of the
    // compute type), which pack() fills.
    idx V, cm_pad, ow_lo, ow_hi, scratch_elems, slots, c_tail;
    int x_direct, y_direct, y_stream, ring;
    void* packed;
};

// isa: an Isa code (cvz_isa.hpp); f64: compute in double (else float).
void depthwise_forward_prepare(DepthwiseForwardArgs* a, int isa, int f64);
void depthwise_forward_pack(void* args, int isa, int f64);  // args: a DepthwiseForwardArgs
// One output row (row = n * OH + oh) of the call `args` (a DepthwiseForwardArgs),
// with `scratch` of scratch_elems elements, zeroed before first use (a UnitFn).
void depthwise_forward_row(const void* args, int isa, int f64, idx row, void* scratch);

}  // namespace cvz

#endif  // CVZ_DEPTHWISE_FORWARD_INTERFACE

#if defined(CVZ_INTERFACE_ONLY)
// The Cython module's include: the interface above is all it needs.
#elif !defined(CVZ_PER_ISA_PASS)  // 2. the entry points

#define CVZ_OP_BODY "depthwise_forward.cpp"  // this file again, once per ISA
#include "cvz_per_isa.hpp"

namespace cvz {

namespace {
typedef void (*PrepareFn)(DepthwiseForwardArgs*);
typedef void (*RowFn)(const DepthwiseForwardArgs*, idx, void*);
const PrepareFn prepare_table[ISA_COUNT][2] = CVZ_ISA_TABLE(depthwise_forward_prepare);
const PrepareFn pack_table[ISA_COUNT][2] = CVZ_ISA_TABLE(depthwise_forward_pack);
const RowFn row_table[ISA_COUNT][2] = CVZ_ISA_TABLE(depthwise_forward_row);
}  // namespace

void depthwise_forward_prepare(DepthwiseForwardArgs* a, int isa, int f64) { isa_pick(prepare_table, isa, f64)(a); }

void depthwise_forward_pack(void* args, int isa, int f64) {
    isa_pick(pack_table, isa, f64)(static_cast<DepthwiseForwardArgs*>(args));
}

void depthwise_forward_row(const void* args, int isa, int f64, idx row, void* scratch) {
    isa_pick(row_table, isa, f64)(static_cast<const DepthwiseForwardArgs*>(args), row, scratch);
}

}  // namespace cvz

#else  // CVZ_PER_ISA_PASS: the kernel body, compiled once per ISA by cvz_per_isa.hpp

// The depthwise forward pass, written once against Simd<T>, compiled once per
// instruction set.  Vectors run over the output channels c*M + m; input rows
// are read in place (compute type, contiguous channels, M = 1) or staged with
// each channel repeated M times.  Each output row is written by one call, each
// element sums its taps in one fixed order (kernel rows, then columns), so the
// result does not depend on the thread count.  Taps that land in the padding
// are never added (border columns check each tap), so a NaN or Inf in the
// filter reaches only the cells whose sum contains it.

// Output pixels per register tile (one vector of channels each).
constexpr int DF_MR = per_isa(THIS_ISA, 4, 8, 16);

template <class T>
static void depthwise_forward_prepare(DepthwiseForwardArgs* a) {
    a->V = Simd<T>::V;
    a->cm_pad = round_up(a->Cout, a->V);
    const bool x_same = (sizeof(T) == 4) ? a->x.type == F32 : a->x.type == F64;
    const bool y_same = (sizeof(T) == 4) ? a->y.type == F32 : a->y.type == F64;
    // In place whatever the channel count: every tile reads and writes a channel
    // remainder through masks (load_lanes; 8x56x56x72 3x3, 1 thread: 1.49 ms staged
    // and scattered, 0.80 ms for 64 channels).
    // With a row stride, unaligned rows are staged too where loads that straddle
    // two cache lines cost more than copying each row once (split_line_loads_cost:
    // in-process A/B on a Zen 4, 8x112x112x64: 0.81-0.98x the time staged, with
    // stride 1 staging cost 1.05-1.18x; on an Intel Xeon staging cost 1.7x).
    a->x_direct = x_same && a->x.s[3] == 1 && a->cout_g == 1 &&
                  (a->sh == 1 || !split_line_loads_cost() || vectors_aligned<T>(a->x.data, a->x.s, a->V));
    const idx row_bytes = a->W * a->cm_pad * (idx)sizeof(T);
    a->ring = ring_kept(a->KH, a->dh, row_bytes);
    a->slots = ring_slots(a->KH, a->dh, row_bytes);
    a->y_direct = y_same && a->y.s[3] == 1;
    a->c_tail = a->x_direct || a->y_direct ? a->Cout % a->V : 0;
    a->y_stream = a->y_direct && streamable<T>(a->y.data, a->y.s, a->N * a->OH, a->V);
    const idx span = (a->KW - 1) * a->dw + 1;
    idx lo = (a->pl + a->sw - 1) / a->sw;
    idx hi = a->W - span + a->pl >= 0 ? (a->W - span + a->pl) / a->sw + 1 : 0;
    if (lo > a->OW) lo = a->OW;
    if (hi > a->OW) hi = a->OW;
    if (hi < lo) hi = lo;
    a->ow_lo = lo;
    a->ow_hi = hi;
    a->scratch_elems = round_up(a->x_direct ? 0 : a->slots * a->W * a->cm_pad, 16) +
                       round_up(a->y_direct ? 0 : a->OW * a->cm_pad, 16) +
                       (idx)((a->slots + 2 * a->KH) * sizeof(idx) / sizeof(T)) + 16;
}

// [KH][KW][cm_pad] in the compute type, zero in the padding channels.
template <class T>
static void depthwise_forward_pack(DepthwiseForwardArgs* a) {
    T* packed = (T*)a->packed;
    for (idx kh = 0; kh < a->KH; ++kh)
        for (idx kw = 0; kw < a->KW; ++kw) {
            T* dst = packed + (kh * a->KW + kw) * a->cm_pad;
            for (idx c = 0; c < a->Cin; ++c)
                for (idx m = 0; m < a->cout_g; ++m)
                    dst[c * a->cout_g + m] =
                        load_as<T>(a->w.data, a->w.type, kh * a->w.s[0] + kw * a->w.s[1] + c * a->w.s[2] + m * a->w.s[3]);
            for (idx cm = a->Cout; cm < a->cm_pad; ++cm) dst[cm] = 0;
        }
}

// MR output pixels from ow0 (all taps real), channel vector c0: sum over the
// n_rows kernel rows (input row rows[i], filter row kh_of[i]) and every column.
// TAIL: c0 is the channel remainder (load_lanes).
template <class T, int MR, bool TAIL>
static inline void depthwise_forward_tile(const DepthwiseForwardArgs* a, const T* const* rows, const idx* kh_of,
                                          idx n_rows, idx pixel, idx ow0, idx c0, T* out, idx out_pixel) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    const T* packed = (const T*)a->packed;
    vec acc[MR];
    CVZ_UNROLL(16)
    for (int p = 0; p < MR; ++p) acc[p] = S::zero();
    const idx step = a->sw * pixel;
    for (idx i = 0; i < n_rows; ++i) {
        const T* x = rows[i] + (ow0 * a->sw - a->pl) * pixel + c0;
        const T* w = packed + kh_of[i] * a->KW * a->cm_pad + c0;
        for (idx kw = 0; kw < a->KW; ++kw) {
            const vec wv = S::load(w + kw * a->cm_pad);
            const T* xk = x + kw * a->dw * pixel;
            CVZ_UNROLL(16)
            for (int p = 0; p < MR; ++p) acc[p] = S::fma(load_lanes<T, TAIL>(xk + p * step, a->c_tail), wv, acc[p]);
        }
    }
    CVZ_UNROLL(16)
    for (int p = 0; p < MR; ++p) store_lanes<T, TAIL>(out + (ow0 + p) * out_pixel + c0, acc[p], a->c_tail);
}

// One output pixel near a border, NV channel vectors from c0: only the taps whose
// input column is real.  The NV sums are independent chains, so the FMA latency
// is hidden (one vector at a time, border pixels took a quarter of dwc_k5).  With
// TAIL the last of them is the channel remainder.
template <class T, int NV, bool TAIL>
static inline void depthwise_forward_edge(const DepthwiseForwardArgs* a, const T* const* rows, const idx* kh_of,
                                          idx n_rows, idx pixel, idx ow, idx c0, T* out, idx out_pixel) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    const T* packed = (const T*)a->packed;
    vec acc[NV];
    CVZ_UNROLL(8)
    for (int v = 0; v < NV; ++v) acc[v] = S::zero();
    for (idx i = 0; i < n_rows; ++i)
        for (idx kw = 0; kw < a->KW; ++kw) {
            const idx iw = ow * a->sw - a->pl + kw * a->dw;
            if (iw < 0 || iw >= a->W) continue;  // this tap reads padding here
            const T* x = rows[i] + iw * pixel + c0;
            const T* w = packed + (kh_of[i] * a->KW + kw) * a->cm_pad + c0;
            CVZ_UNROLL(8)
            for (int v = 0; v < NV; ++v) {
                const vec xv = v == NV - 1 ? load_lanes<T, TAIL>(x + v * S::V, a->c_tail) : S::load(x + v * S::V);
                acc[v] = S::fma(xv, S::load(w + v * S::V), acc[v]);
            }
        }
    CVZ_UNROLL(8)
    for (int v = 0; v < NV - 1; ++v) S::store(out + ow * out_pixel + c0 + v * S::V, acc[v]);
    store_lanes<T, TAIL>(out + ow * out_pixel + c0 + (NV - 1) * S::V, acc[NV - 1], a->c_tail);
}

// Every channel vector of border pixel ow, up to 8 vectors at a time.
template <class T>
static inline void depthwise_forward_edge_pixel(const DepthwiseForwardArgs* a, const T* const* rows, const idx* kh_of,
                                                idx n_rows, idx pixel, idx ow, T* out, idx out_pixel) {
    channel_vector_groups<T, 8>(a->cm_pad, a->c_tail, [&](auto nv, idx c0, auto tail) {
        depthwise_forward_edge<T, decltype(nv)::value, decltype(tail)::value>(a, rows, kh_of, n_rows, pixel, ow, c0,
                                                                             out, out_pixel);
    });
}

// A whole output row through stencil tiles of MR pixels by NV channel vectors
// (the channels in groups of NV vectors, the rest in NV/2, NV/4, 1): at stride
// 2, 4 pixels by 2 vectors on AVX-512 and AVX2 alike, where the row path's
// tiles of DF_MR pixels by one vector read twice DF_MR input pixels a vector at
// a time.  In one process, 2 threads, 8 images, 3x3 unless said (ms, 16x1 ->
// 4x2 on AVX-512; 8x1 -> 4x2 on AVX2): 112x112x64 0.77 -> 0.645 and 0.81 ->
// 0.69, 56x56x128 0.38 -> 0.314 and 0.42 -> 0.34, 28x28x256 0.186 -> 0.17 and
// 0.22 -> 0.18, 56x56x96 0.31 -> 0.258 and 0.305 -> 0.245, 56x56x64 5x5 0.31
// -> 0.277 and 0.33 -> 0.31, 112x112x32 0.35 -> 0.33 and 0.376 -> 0.343.  8x1
// lost on both, 2x2 and 1x4 on AVX2; AVX-512's 2x4 won on 64 and 256 channels
// (0.61, 0.16) but lost on 32 (0.35).  At stride 1 the wider tiles lost
// (112x112x32: 2 vectors by 4, 8 or 12 pixels, 0.64 -> 0.72-0.82).
// Kept out of line: inlined, it made GCC stop inlining the full tiles into
// depthwise_forward_row (AVX2 dwc_mobilenet 0.70 -> 0.80 ms).
template <class T, int MR, int NV, int KW, int SW>
CVZ_NOINLINE static void depthwise_forward_stencil_row(const DepthwiseForwardArgs* a, const T* const* rows,
                                                       const idx* kh_of, idx n_rows, idx pixel, T* out,
                                                       idx out_pixel, RowPrefetch& ahead) {
    const T* packed = (const T*)a->packed;
    const idx lines_per_tile = ahead.lines_per(a->OW / MR + 1);
    stencil_row_tiles<MR>(0, a->OW, [&](auto shape, idx ow) {
        ahead.step(lines_per_tile);
        channel_vector_groups<T, NV>(a->cm_pad, a->c_tail, [&](auto nv, idx c0, auto tail) {
            stencil_tile_clipped<T, decltype(shape)::value, KW, SW, decltype(nv)::value, decltype(tail)::value>(
                rows, ow * a->sw - a->pl, a->W, c0, pixel, packed + c0, kh_of, a->KW * a->cm_pad, a->cm_pad,
                n_rows, out + ow * out_pixel + c0, out_pixel, a->y_stream, a->c_tail);
        });
    });
}

template <class T>
static void depthwise_forward_row(const DepthwiseForwardArgs* a, idx row, void* raw) {
    typedef Simd<T> S;
    const idx n = row / a->OH, oh = row % a->OH;
    T* stage = (T*)raw;
    T* out_row = stage + round_up(a->x_direct ? 0 : a->slots * a->W * a->cm_pad, 16);
    idx* slot_key = (idx*)(out_row + round_up(a->y_direct ? 0 : a->OW * a->cm_pad, 16));
    idx* kh_of = slot_key + a->slots;
    const T** rows = (const T**)(kh_of + a->KH);

    // The kernel rows that read a real input row; staged rows are kept in slots
    // (ring_slots: consecutive output rows of a thread share input rows).
    // Output row r's kernel row kh reads input row row_of(r, kh) (< 0: padding).
    const auto row_of = [a](idx r, idx kh) {
        const idx ih = r % a->OH * a->sh - a->pt + kh * a->dh;
        return ih < a->H ? ih : -1;
    };
    const idx pixel = a->x_direct ? a->x.s[2] : a->cm_pad;
    idx n_rows = 0;
    for (idx kh = 0; kh < a->KH; ++kh) {
        const idx ih = row_of(row, kh);
        if (ih < 0) continue;
        if (a->x_direct) {
            rows[n_rows] = (const T*)a->x.data + n * a->x.s[0] + ih * a->x.s[1];
        } else {
            const idx at = a->ring ? ih % a->slots : kh;
            T* slot = stage + at * a->W * a->cm_pad;
            const idx key = n * a->H + ih + 1;
            if (slot_key[at] != key) {
                gather_rows<T>(slot, a->cm_pad, a->x.data, a->x.type, n * a->x.s[0] + ih * a->x.s[1], a->W, a->x.s[2],
                               a->Cin, a->x.s[3], a->cout_g);
                slot_key[at] = key;
            }
            rows[n_rows] = slot;
        }
        kh_of[n_rows] = kh;
        ++n_rows;
    }

    // The input rows the next output row reads first (none of this one's).
    RowPrefetch ahead;
    ahead.add_next_pass(a->x.data, a->x.type, a->x.s, a->W, a->Cin, row, a->N * a->OH, a->OH, a->KH, row_of);

    T* out = a->y_direct ? (T*)a->y.data + n * a->y.s[0] + oh * a->y.s[1] : out_row;
    const idx out_pixel = a->y_direct ? a->y.s[2] : a->cm_pad;
    // Pixels outside, channels inside: a tile finishes whole pixels (every cache
    // line of its inputs and outputs) before the next, so no line is fetched twice.
    // A stencil covers the whole row, its border tiles clipped; otherwise tiles
    // cover [ow_lo, ow_hi) and the border pixels go one at a time.
    const T* packed = (const T*)a->packed;
    const bool stencil = with_stencil(a->KW, a->sw, a->dw, [&](auto kw, auto sw) {
        if constexpr (decltype(sw)::value == 2) {  // see depthwise_forward_stencil_row
            depthwise_forward_stencil_row<T, 4, 2, decltype(kw)::value, 2>(a, rows, kh_of, n_rows, pixel, out,
                                                                          out_pixel, ahead);
        } else {
            const idx lines_per_tile = ahead.lines_per(a->OW / DF_MR + 1);
            stencil_row_tiles<DF_MR>(0, a->OW, [&](auto shape, idx ow) {
                ahead.step(lines_per_tile);
                channel_vectors<T>(a->cm_pad, a->c_tail, [&](idx c0, auto tail) {
                    stencil_tile_clipped<T, decltype(shape)::value, decltype(kw)::value, decltype(sw)::value, 1,
                                         decltype(tail)::value>(
                        rows, ow * a->sw - a->pl, a->W, c0, pixel, packed + c0, kh_of, a->KW * a->cm_pad,
                        a->cm_pad, n_rows, out + ow * out_pixel + c0, out_pixel, a->y_stream, a->c_tail);
                });
            });
        }
    });
    if (!stencil) {
        const idx lines_per_tile = ahead.lines_per((a->ow_hi - a->ow_lo) / DF_MR + 1);
        for (idx ow = 0; ow < a->ow_lo; ++ow)
            depthwise_forward_edge_pixel<T>(a, rows, kh_of, n_rows, pixel, ow, out, out_pixel);
        exact_tiles<DF_MR>(a->ow_lo, a->ow_hi, [&](auto shape, idx ow) {
            ahead.step(lines_per_tile);
            channel_vectors<T>(a->cm_pad, a->c_tail, [&](idx c0, auto tail) {
                depthwise_forward_tile<T, decltype(shape)::value, decltype(tail)::value>(a, rows, kh_of, n_rows, pixel,
                                                                                         ow, c0, out, out_pixel);
            });
        });
        for (idx ow = a->ow_hi; ow < a->OW; ++ow)
            depthwise_forward_edge_pixel<T>(a, rows, kh_of, n_rows, pixel, ow, out, out_pixel);
    }
    if (!a->y_direct)
        scatter_rows<T>(a->y.data, a->y.type, n * a->y.s[0] + oh * a->y.s[1], a->OW, a->y.s[2], a->Cout, a->y.s[3],
                        out_row, a->cm_pad);
    if (a->y_stream) S::fence();
}

#endif  // CVZ_PER_ISA_PASS
