// The depthwise conv2d input gradient: one file in three parts (Highway's
// foreach_target idiom, see cvz_per_isa.hpp):
//   1. the interface, its argument struct and entry points: all the Cython
//      module includes (it defines CVZ_INTERFACE_ONLY first);
//   2. the entry points, each dispatching on a table [isa][f64] of the body's
//      instantiations;
//   3. the kernel body, compiled once per ISA: cvz_per_isa.hpp includes this
//      file again with CVZ_PER_ISA_PASS defined.
#ifndef CVZ_DEPTHWISE_INPUT_GRAD_INTERFACE  // 1. the interface
#define CVZ_DEPTHWISE_INPUT_GRAD_INTERFACE

#include "cvz_common.hpp"

namespace cvz {

// dx[n, ih, iw, c] = sum over the (output cell, tap) pairs that read (ih, iw)
// and every m of dy[n, oh, ow, c*M + m] * w[kh, kw, c, m], where
// ih = oh*sh - pt + kh*dh and iw = ow*sw - pl + kw*dw.  A grouped conv with
// G = Cin groups of one input channel (cin_g = 1) and M = cout_g output channels.
// Element strides in logical NHWC order (the caller permutes NCHW); the filter
// is [KH, KW, C, M].
struct DepthwiseInputGradArgs : ConvDims {
    Tensor dy;
    Tensor w;
    Tensor dx;
    // Filled in by prepare(): the vector width, input channels padded to it,
    // whether dy rows are read in place and results stored straight into dx
    // (with streaming stores when dx_stream, see streamable()), the
    // per-thread scratch size, the staged-row slots (a ring when `ring`, see
    // ring_slots()), and c_tail: the channels of the last vector where rows read
    // or written in place end in a partial one (read and written through masks:
    // load_lanes), else 0.  The caller allocates `packed` (packed_elems of
    // the compute type: the filter [KH][KW][M][c_pad], then for each input column
    // the (output column, kernel column) pairs that read it, then for each
    // stride phase the run of its columns that every phase tap reaches), which
    // pack() fills.
    idx V, c_pad, scratch_elems, packed_elems, slots, c_tail;
    int dy_direct, dx_direct, dx_stream, ring;
    void* packed;
};

// isa: an Isa code (cvz_isa.hpp); f64: compute in double (else float).
void depthwise_input_grad_prepare(DepthwiseInputGradArgs* a, int isa, int f64);
void depthwise_input_grad_pack(void* args, int isa, int f64);  // args: a DepthwiseInputGradArgs
// One input row (row = n * H + ih) of the call `args` (a DepthwiseInputGradArgs),
// with `scratch` of scratch_elems elements, zeroed before first use (a UnitFn).
void depthwise_input_grad_row(const void* args, int isa, int f64, idx row, void* scratch);

}  // namespace cvz

#endif  // CVZ_DEPTHWISE_INPUT_GRAD_INTERFACE

#if defined(CVZ_INTERFACE_ONLY)
// The Cython module's include: the interface above is all it needs.
#elif !defined(CVZ_PER_ISA_PASS)  // 2. the entry points

#define CVZ_OP_BODY "depthwise_input_grad.cpp"  // this file again, once per ISA
#include "cvz_per_isa.hpp"

namespace cvz {

namespace {
typedef void (*PrepareFn)(DepthwiseInputGradArgs*);
typedef void (*RowFn)(const DepthwiseInputGradArgs*, idx, void*);
const PrepareFn prepare_table[ISA_COUNT][2] = CVZ_ISA_TABLE(depthwise_input_grad_prepare);
const PrepareFn pack_table[ISA_COUNT][2] = CVZ_ISA_TABLE(depthwise_input_grad_pack);
const RowFn row_table[ISA_COUNT][2] = CVZ_ISA_TABLE(depthwise_input_grad_row);
}  // namespace

void depthwise_input_grad_prepare(DepthwiseInputGradArgs* a, int isa, int f64) {
    isa_pick(prepare_table, isa, f64)(a);
}

void depthwise_input_grad_pack(void* args, int isa, int f64) {
    isa_pick(pack_table, isa, f64)(static_cast<DepthwiseInputGradArgs*>(args));
}

void depthwise_input_grad_row(const void* args, int isa, int f64, idx row, void* scratch) {
    isa_pick(row_table, isa, f64)(static_cast<const DepthwiseInputGradArgs*>(args), row, scratch);
}

}  // namespace cvz

#else  // CVZ_PER_ISA_PASS: the kernel body, compiled once per ISA by cvz_per_isa.hpp

// The depthwise input gradient, written once against Simd<T>, compiled once
// per instruction set.  Vectors run over the input channels c; dy rows are read
// in place (compute type, contiguous channels, M = 1) or staged as [OW][M][c_pad]
// (each multiplier's channels contiguous).  Each input row is written by one
// call, and each element gathers its terms in one fixed order (kernel rows,
// columns, then m), so the result does not depend on the thread count.  Only
// (output cell, tap) pairs that exist are added: a NaN or Inf reaches exactly
// the cells the definition says.

// Input pixels per register tile (one vector of channels each), for stride 1.
constexpr int DI_MR = per_isa(THIS_ISA, 4, 8, 16);

template <class T>
static void depthwise_input_grad_prepare(DepthwiseInputGradArgs* a) {
    a->V = Simd<T>::V;
    a->c_pad = round_up(a->Cin, a->V);
    const bool dy_same = (sizeof(T) == 4) ? a->dy.type == F32 : a->dy.type == F64;
    const bool dx_same = (sizeof(T) == 4) ? a->dx.type == F32 : a->dx.type == F64;
    // In place whatever the channel count: every tile reads and writes a channel
    // remainder through masks (load_lanes; 8x56x56x72 3x3 staged and scattered took
    // 1.8x the time, 5x5 at stride 2 1.4x).
    a->dy_direct = dy_same && a->dy.s[3] == 1 && a->cout_g == 1;
    // The dy rows one input row reads span at most (KH - 1) * dh / sh + 1 rows.
    const idx row_bytes = a->OW * a->cout_g * a->c_pad * (idx)sizeof(T);
    a->ring = ring_kept(a->KH, a->dh, row_bytes);
    a->slots = ring_slots(a->KH, a->dh, row_bytes);
    a->dx_direct = dx_same && a->dx.s[3] == 1;
    a->c_tail = a->dy_direct || a->dx_direct ? a->Cin % a->V : 0;
    a->dx_stream = a->dx_direct && streamable<T>(a->dx.data, a->dx.s, a->N * a->H, a->V);
    a->packed_elems = round_up(a->KH * a->KW * a->cout_g * a->c_pad, 16) +
                      (idx)((a->W * (1 + 2 * a->KW) + 2 * a->sw) * sizeof(idx) / sizeof(T)) + 16;
    a->scratch_elems = round_up(a->dy_direct ? 0 : a->slots * a->OW * a->cout_g * a->c_pad, 16) +
                       round_up(a->dx_direct ? 0 : a->W * a->c_pad, 16) +
                       (idx)((a->slots + 3 * a->KH) * sizeof(idx) / sizeof(T)) + 16;
}

// The column table after the packed filter (see DepthwiseInputGradArgs::packed).
template <class T>
static inline idx* depthwise_input_grad_columns(const DepthwiseInputGradArgs* a) {
    return (idx*)((T*)a->packed + round_up(a->KH * a->KW * a->cout_g * a->c_pad, 16));
}

// [KH][KW][M][c_pad] in the compute type, zero in the padding channels.
template <class T>
static void depthwise_input_grad_pack(DepthwiseInputGradArgs* a) {
    T* packed = (T*)a->packed;
    const idx M = a->cout_g;
    for (idx kh = 0; kh < a->KH; ++kh)
        for (idx kw = 0; kw < a->KW; ++kw)
            for (idx m = 0; m < M; ++m) {
                T* dst = packed + ((kh * a->KW + kw) * M + m) * a->c_pad;
                for (idx c = 0; c < a->Cin; ++c)
                    dst[c] = load_as<T>(a->w.data, a->w.type, kh * a->w.s[0] + kw * a->w.s[1] + c * a->w.s[2] + m * a->w.s[3]);
                for (idx c = a->Cin; c < a->c_pad; ++c) dst[c] = 0;
            }
    // Column pairs: which output columns (and through which kernel column) read
    // input column iw -- the divisions of the scatter, done once per call.
    idx* count = depthwise_input_grad_columns<T>(a);
    idx* ow_of = count + a->W;
    idx* kw_of = ow_of + a->W * a->KW;
    for (idx iw = 0; iw < a->W; ++iw) {
        idx k = 0;
        for (idx kw = 0; kw < a->KW; ++kw) {
            const idx t = iw + a->pl - kw * a->dw;  // = ow * sw for the output column that reads iw
            if (t < 0 || t % a->sw != 0 || t / a->sw >= a->OW) continue;
            ow_of[iw * a->KW + k] = t / a->sw;
            kw_of[iw * a->KW + k] = kw;
            ++k;
        }
        count[iw] = k;
    }
    // Stride phases: input columns iw = ph + q * sw.  Every column of a phase can
    // only be reached through the kernel columns kw with (iw + pl - kw * dw) a
    // multiple of sw; the columns all of those reach form one run [q_lo, q_hi)
    // (each tap reaches an interval of columns).  Along the run the pairs of
    // column ph + q * sw are those of the run's first column with ow + (q - q_lo).
    idx* run = kw_of + a->W * a->KW;
    for (idx ph = 0; ph < a->sw; ++ph) {
        idx taps = 0;
        for (idx kw = 0; kw < a->KW; ++kw) taps += ((ph + a->pl - kw * a->dw) % a->sw + a->sw) % a->sw == 0;
        idx lo = 0, hi = 0;
        for (idx q = 0; ph + q * a->sw < a->W; ++q)
            if (count[ph + q * a->sw] == taps) {
                if (hi == lo) lo = q;
                hi = q + 1;
            }
        run[2 * ph] = lo;
        run[2 * ph + 1] = hi;
    }
}

// f(d, w) for every (kernel row, column pair) that reaches input column iw, in
// the order of the sums: d at channel c0 of the pair's dy pixel (its M vectors
// m_step apart), w at channel c0 of the pair's filter tap (M vectors c_pad apart).
template <class T, class F>
static inline void depthwise_input_grad_pairs(const DepthwiseInputGradArgs* a, const T* const* rows,
                                              const idx* kh_of, idx n_rows, idx pixel, idx iw, idx c0, F&& f) {
    const T* packed = (const T*)a->packed;
    const idx* count = depthwise_input_grad_columns<T>(a);
    const idx* ow_of = count + a->W + iw * a->KW;
    const idx* kw_of = count + a->W + a->W * a->KW + iw * a->KW;
    for (idx i = 0; i < n_rows; ++i)
        for (idx j = 0; j < count[iw]; ++j)
            f(rows[i] + ow_of[j] * pixel + c0, packed + (kh_of[i] * a->KW + kw_of[j]) * a->cout_g * a->c_pad + c0);
}

// One input pixel iw, NV channel vectors from c0: every (kernel row, column, m)
// whose output cell exists.  rows[i]: the dy row of kernel row kh_of[i]; its
// pixel ow holds M vectors of channels at ow * pixel + m * m_step.  The NV sums
// are independent chains, which hides the FMA latency.  With TAIL the last of
// them is the channel remainder (load_lanes, c_tail channels).
template <class T, int NV, bool TAIL>
static inline void depthwise_input_grad_pixel(const DepthwiseInputGradArgs* a, const T* const* rows,
                                              const idx* kh_of, idx n_rows, idx pixel, idx m_step, idx iw, idx c0,
                                              T* out, idx out_pixel) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    vec acc[NV];
    CVZ_UNROLL(8)
    for (int v = 0; v < NV; ++v) acc[v] = S::zero();
    depthwise_input_grad_pairs<T>(a, rows, kh_of, n_rows, pixel, iw, c0, [&](const T* d, const T* w) {
        for (idx m = 0; m < a->cout_g; ++m)
            CVZ_UNROLL(8)
            for (int v = 0; v < NV; ++v) {
                const vec dv = v == NV - 1 ? load_lanes<T, TAIL>(d + m * m_step + v * S::V, a->c_tail)
                                           : S::load(d + m * m_step + v * S::V);
                acc[v] = S::fma(dv, S::load(w + m * a->c_pad + v * S::V), acc[v]);
            }
    });
    CVZ_UNROLL(8)
    for (int v = 0; v < NV - 1; ++v) S::store(out + iw * out_pixel + c0 + v * S::V, acc[v]);
    store_lanes<T, TAIL>(out + iw * out_pixel + c0 + (NV - 1) * S::V, acc[NV - 1], a->c_tail);
}

// Every channel vector of input pixel iw, up to 8 vectors at a time.
template <class T>
static inline void depthwise_input_grad_pixels(const DepthwiseInputGradArgs* a, const T* const* rows, const idx* kh_of,
                                               idx n_rows, idx pixel, idx m_step, idx iw, T* out, idx out_pixel) {
    channel_vector_groups<T, 8>(a->c_pad, a->c_tail, [&](auto nv, idx c0, auto tail) {
        depthwise_input_grad_pixel<T, decltype(nv)::value, decltype(tail)::value>(a, rows, kh_of, n_rows, pixel,
                                                                                  m_step, iw, c0, out, out_pixel);
    });
}

// MR input pixels iw0 + p * sw of one stride phase's run (see
// depthwise_input_grad_pack), channel vector c0: the sums of
// depthwise_input_grad_pixel, in its order, with each weight vector loaded once
// per tile.  Pixel p reads the dy columns of iw0's pairs shifted by p.  TAIL:
// c0 is the channel remainder.
template <class T, int MR, bool TAIL>
static inline void depthwise_input_grad_phase_tile(const DepthwiseInputGradArgs* a, const T* const* rows,
                                                   const idx* kh_of, idx n_rows, idx pixel, idx m_step, idx iw0,
                                                   idx c0, T* out, idx out_pixel) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    vec acc[MR];
    CVZ_UNROLL(16)
    for (int p = 0; p < MR; ++p) acc[p] = S::zero();
    depthwise_input_grad_pairs<T>(a, rows, kh_of, n_rows, pixel, iw0, c0, [&](const T* d, const T* w) {
        for (idx m = 0; m < a->cout_g; ++m) {
            const vec wv = S::load(w + m * a->c_pad);
            CVZ_UNROLL(16)
            for (int p = 0; p < MR; ++p)
                acc[p] = S::fma(load_lanes<T, TAIL>(d + p * pixel + m * m_step, a->c_tail), wv, acc[p]);
        }
    });
    if (TAIL || !a->dx_stream) {
        CVZ_UNROLL(16)
        for (int p = 0; p < MR; ++p)
            store_lanes<T, TAIL>(out + (iw0 + p * a->sw) * out_pixel + c0, acc[p], a->c_tail);
    } else {  // dx and its pixel stride aligned to the vector (streamable())
        CVZ_UNROLL(16)
        for (int p = 0; p < MR; ++p) S::stream(out + (iw0 + p * a->sw) * out_pixel + c0, acc[p]);
    }
}

// MR input pixels from iw0 with stride 1 whose every column tap exists: the same
// sums as depthwise_input_grad_pixel, with each weight vector loaded once per tile.
// Out of line: inlined into the row, its speed hung on how the compiler laid out
// the whole row function (AVX2 dwi_mult2 0.15 or 0.19 ms after unrelated changes).
// TAIL: c0 is the channel remainder.
template <class T, int MR, bool TAIL>
CVZ_NOINLINE static void depthwise_input_grad_tile(const DepthwiseInputGradArgs* a, const T* const* rows,
                                                   const idx* kh_of, idx n_rows, idx pixel, idx m_step, idx iw0,
                                                   idx c0, T* out, idx out_pixel) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    const T* packed = (const T*)a->packed;
    const idx M = a->cout_g;
    vec acc[MR];
    CVZ_UNROLL(16)
    for (int p = 0; p < MR; ++p) acc[p] = S::zero();
    for (idx i = 0; i < n_rows; ++i)
        for (idx kw = 0; kw < a->KW; ++kw) {
            const T* d = rows[i] + (iw0 + a->pl - kw * a->dw) * pixel + c0;
            const T* w = packed + (kh_of[i] * a->KW + kw) * M * a->c_pad + c0;
            for (idx m = 0; m < M; ++m) {
                const vec wv = S::load(w + m * a->c_pad);
                CVZ_UNROLL(16)
                for (int p = 0; p < MR; ++p)
                    acc[p] = S::fma(load_lanes<T, TAIL>(d + p * pixel + m * m_step, a->c_tail), wv, acc[p]);
            }
        }
    CVZ_UNROLL(16)
    for (int p = 0; p < MR; ++p) store_lanes<T, TAIL>(out + (iw0 + p) * out_pixel + c0, acc[p], a->c_tail);
}

// Stride phases of one input row (stride > 1): the run of each phase in
// balanced tiles, the columns around it one at a time.  Kept out of line: inlined,
// it changed how the compiler laid out the stride-1 path (dwi_mult2 0.12 -> 0.16 ms).
template <class T>
CVZ_NOINLINE static void depthwise_input_grad_phases(const DepthwiseInputGradArgs* a, const T* const* rows,
                                                     const idx* kh_of, idx n_rows, idx pixel, idx m_step, T* out,
                                                     idx out_pixel, RowPrefetch& ahead) {
    const idx* run = depthwise_input_grad_columns<T>(a) + a->W + 2 * a->W * a->KW;
    const idx lines_per_tile = ahead.lines_per(a->W / DI_MR + 1);
    for (idx ph = 0; ph < a->sw && ph < a->W; ++ph) {
        const idx q_end = (a->W - ph + a->sw - 1) / a->sw;
        for (idx q = 0; q < run[2 * ph]; ++q)
            depthwise_input_grad_pixels<T>(a, rows, kh_of, n_rows, pixel, m_step, ph + q * a->sw, out, out_pixel);
        balanced_tiles<DI_MR>(run[2 * ph], run[2 * ph + 1], [&](auto shape, idx q) {
            ahead.step(lines_per_tile);
            channel_vectors<T>(a->c_pad, a->c_tail, [&](idx c0, auto tail) {
                depthwise_input_grad_phase_tile<T, decltype(shape)::value, decltype(tail)::value>(
                    a, rows, kh_of, n_rows, pixel, m_step, ph + q * a->sw, c0, out, out_pixel);
            });
        });
        for (idx q = run[2 * ph + 1]; q < q_end; ++q)
            depthwise_input_grad_pixels<T>(a, rows, kh_of, n_rows, pixel, m_step, ph + q * a->sw, out, out_pixel);
    }
}

template <class T>
static void depthwise_input_grad_row(const DepthwiseInputGradArgs* a, idx row, void* raw) {
    typedef Simd<T> S;
    const idx n = row / a->H, ih = row % a->H;
    const idx M = a->cout_g;
    T* stage = (T*)raw;
    T* out_row = stage + round_up(a->dy_direct ? 0 : a->slots * a->OW * M * a->c_pad, 16);
    idx* slot_key = (idx*)(out_row + round_up(a->dx_direct ? 0 : a->W * a->c_pad, 16));
    idx* kh_of = slot_key + a->slots;
    const T** rows = (const T**)(kh_of + a->KH);

    // Input row r's kernel row kh reads dy row row_of(r, kh) (< 0: none).
    const auto row_of = [a](idx r, idx kh) {
        const idx t = r % a->H + a->pt - kh * a->dh;
        return t >= 0 && t % a->sh == 0 && t / a->sh < a->OH ? t / a->sh : -1;
    };
    // The kernel rows whose output row exists for this input row; staged dy rows
    // are kept in slots (ring_slots: consecutive input rows of a thread share them).
    const idx pixel = a->dy_direct ? a->dy.s[2] : M * a->c_pad;
    const idx m_step = a->dy_direct ? 1 : a->c_pad;  // M = 1 when direct
    idx n_rows = 0;
    for (idx kh = 0; kh < a->KH; ++kh) {
        const idx oh = row_of(row, kh);
        if (oh < 0) continue;
        if (a->dy_direct) {
            rows[n_rows] = (const T*)a->dy.data + n * a->dy.s[0] + oh * a->dy.s[1];
        } else {
            const idx at = a->ring ? oh % a->slots : kh;
            T* slot = stage + at * a->OW * M * a->c_pad;
            const idx key = n * a->OH + oh + 1;
            if (slot_key[at] != key) {
                for (idx m = 0; m < M; ++m)  // [OW][M][c_pad]: multiplier m's channels contiguous
                    gather_rows<T>(slot + m * a->c_pad, M * a->c_pad, a->dy.data, a->dy.type,
                                   n * a->dy.s[0] + oh * a->dy.s[1] + m * a->dy.s[3], a->OW, a->dy.s[2], a->Cin,
                                   M * a->dy.s[3]);
                slot_key[at] = key;
            }
            rows[n_rows] = slot;
        }
        kh_of[n_rows] = kh;
        ++n_rows;
    }

    // The dy rows the next input row reads first (none of this one's).
    RowPrefetch ahead;
    ahead.add_next_pass(a->dy.data, a->dy.type, a->dy.s, a->OW, a->Cout, row, a->N * a->H, a->H, a->KH, row_of);

    T* out = a->dx_direct ? (T*)a->dx.data + n * a->dx.s[0] + ih * a->dx.s[1] : out_row;
    const idx out_pixel = a->dx_direct ? a->dx.s[2] : a->c_pad;
    // With stride 1, input columns [iw_lo, iw_hi) have every column tap: tiles.
    idx iw_lo = a->W, iw_hi = a->W;
    if (a->sw == 1) {
        iw_lo = (a->KW - 1) * a->dw - a->pl;  // iw + pl - (KW-1)*dw >= 0
        if (iw_lo < 0) iw_lo = 0;
        iw_hi = a->OW - a->pl;  // iw + pl < OW
        if (iw_hi > a->W) iw_hi = a->W;
        if (iw_lo > a->W) iw_lo = a->W;
        if (iw_hi < iw_lo) iw_hi = iw_lo;
    }
    // Pixels outside, channels inside: a tile finishes whole pixels (every cache
    // line of its inputs and outputs) before the next, so no line is fetched twice.
    if (a->sw > 1) {
        depthwise_input_grad_phases<T>(a, rows, kh_of, n_rows, pixel, m_step, out, out_pixel, ahead);
        if (!a->dx_direct)
            scatter_rows<T>(a->dx.data, a->dx.type, n * a->dx.s[0] + ih * a->dx.s[1], a->W, a->dx.s[2], a->Cin, a->dx.s[3],
                            out_row, a->c_pad);
        if (a->dx_stream) S::fence();
        return;
    }
    // One multiplier: a stencil over the dy row with the kernel row reversed
    // (tap k reads column iw + pl - (KW-1) + k through kernel column KW-1-k),
    // over the whole row, its border tiles clipped.  Otherwise tiles cover
    // [iw_lo, iw_hi) and the border pixels go one at a time.
    const T* packed = (const T*)a->packed;
    const bool stencil = M == 1 && with_stencil(a->KW, a->sw, a->dw, [&](auto kw, auto sw) {
        const idx lines_per_tile = ahead.lines_per(a->W / DI_MR + 1);
        stencil_row_tiles<DI_MR>(0, a->W, [&](auto shape, idx first) {
            ahead.step(lines_per_tile);
            channel_vectors<T>(a->c_pad, a->c_tail, [&](idx c0, auto tail) {
                stencil_tile_clipped<T, decltype(shape)::value, decltype(kw)::value, decltype(sw)::value, 1,
                                     decltype(tail)::value>(
                    rows, first + a->pl - (a->KW - 1), a->OW, c0, pixel, packed + (a->KW - 1) * a->c_pad + c0, kh_of,
                    a->KW * a->c_pad, -a->c_pad, n_rows, out + first * out_pixel + c0, out_pixel, a->dx_stream,
                    a->c_tail);
            });
        });
    });
    if (!stencil) {
        const idx lines_per_tile = ahead.lines_per((iw_hi - iw_lo) / DI_MR + 1);
        for (idx iw = 0; iw < iw_lo; ++iw)
            depthwise_input_grad_pixels<T>(a, rows, kh_of, n_rows, pixel, m_step, iw, out, out_pixel);
        exact_tiles<DI_MR>(iw_lo, iw_hi, [&](auto shape, idx first) {
            ahead.step(lines_per_tile);
            channel_vectors<T>(a->c_pad, a->c_tail, [&](idx c0, auto tail) {
                depthwise_input_grad_tile<T, decltype(shape)::value, decltype(tail)::value>(
                    a, rows, kh_of, n_rows, pixel, m_step, first, c0, out, out_pixel);
            });
        });
        for (idx iw = iw_hi; iw < a->W; ++iw)
            depthwise_input_grad_pixels<T>(a, rows, kh_of, n_rows, pixel, m_step, iw, out, out_pixel);
    }
    if (!a->dx_direct)
        scatter_rows<T>(a->dx.data, a->dx.type, n * a->dx.s[0] + ih * a->dx.s[1], a->W, a->dx.s[2], a->Cin, a->dx.s[3],
                        out_row, a->c_pad);
    if (a->dx_stream) S::fence();
}

#endif  // CVZ_PER_ISA_PASS
