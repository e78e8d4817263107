// The depthwise conv2d filter gradient: one file in three parts (Highway's
// foreach_target idiom, see cvz_per_isa.hpp):
//   1. the interface, its argument struct and entry points: all the Cython
//      module includes (it defines CVZ_INTERFACE_ONLY first);
//   2. the entry points, each dispatching on a table [isa][f64] of the body's
//      instantiations;
//   3. the kernel body, compiled once per ISA: cvz_per_isa.hpp includes this
//      file again with CVZ_PER_ISA_PASS defined.
#ifndef CVZ_DEPTHWISE_FILTER_GRAD_INTERFACE  // 1. the interface
#define CVZ_DEPTHWISE_FILTER_GRAD_INTERFACE

#include "cvz_common.hpp"

namespace cvz {

// dw[kh, kw, c, m] = sum over n, oh, ow.  Element strides of x and dy are in
// logical NHWC order (the caller permutes NCHW).
struct DepthwiseFilterGradArgs {
    idx N, H, W, C, M, OH, OW, KH, KW;
    idx sh, sw, dh, dw, pt, pl;
    Tensor x;
    Tensor dy;
    Tensor out;  // [KH][KW][C][M], contiguous (strides unused)
    idx n_blocks;
    // ow_first/ow_last[kw]: the output columns whose input column through tap kw is real.
    const idx* ow_first;
    const idx* ow_last;
    // Filled in by prepare(): channels C*M padded to the vector width, whether
    // rows are read in place, the per-thread scratch size.  The caller
    // allocates `partial` ([n_blocks][KH*KW][cm_pad] of the compute type).
    idx V, cm, cm_pad, scratch_elems;
    int direct;
    void* partial;
};

// isa: an Isa code (cvz_isa.hpp); f64: compute in double (else float).
void depthwise_filter_grad_prepare(DepthwiseFilterGradArgs* a, int isa, int f64);
// Sum the rows of block `block` of the call `args` (a DepthwiseFilterGradArgs) into
// its partial sums, with `scratch` of scratch_elems elements (a UnitFn of _cvz.pxd).
void depthwise_filter_grad_block(const void* args, int isa, int f64, idx block, void* scratch);
// out[tap] = the partial sums of tap `tap` added in block order (a UnitFn; no scratch).
void depthwise_filter_grad_merge(const void* args, int isa, int f64, idx tap, void* scratch);

}  // namespace cvz

#endif  // CVZ_DEPTHWISE_FILTER_GRAD_INTERFACE

#if defined(CVZ_INTERFACE_ONLY)
// The Cython module's include: the interface above is all it needs.
#elif !defined(CVZ_PER_ISA_PASS)  // 2. the entry points

#define CVZ_OP_BODY "depthwise_filter_grad.cpp"  // this file again, once per ISA
#include "cvz_per_isa.hpp"

namespace cvz {

namespace {
typedef void (*PrepareFn)(DepthwiseFilterGradArgs*);
typedef void (*BlockFn)(const DepthwiseFilterGradArgs*, idx, void*, const idx*, const idx*);
typedef void (*MergeFn)(const DepthwiseFilterGradArgs*, idx);
const PrepareFn prepare_table[ISA_COUNT][2] = CVZ_ISA_TABLE(depthwise_filter_grad_prepare);
const BlockFn block_table[ISA_COUNT][2] = CVZ_ISA_TABLE(depthwise_filter_grad_block);
const MergeFn merge_table[ISA_COUNT][2] = CVZ_ISA_TABLE(depthwise_filter_grad_merge);
}  // namespace

void depthwise_filter_grad_prepare(DepthwiseFilterGradArgs* a, int isa, int f64) {
    isa_pick(prepare_table, isa, f64)(a);
}

void depthwise_filter_grad_block(const void* args, int isa, int f64, idx block, void* scratch) {
    const DepthwiseFilterGradArgs* a = static_cast<const DepthwiseFilterGradArgs*>(args);
    isa_pick(block_table, isa, f64)(a, block, scratch, a->ow_first, a->ow_last);
}

void depthwise_filter_grad_merge(const void* args, int isa, int f64, idx tap, void* /*scratch*/) {
    isa_pick(merge_table, isa, f64)(static_cast<const DepthwiseFilterGradArgs*>(args), tap);
}

}  // namespace cvz

#else  // CVZ_PER_ISA_PASS: the kernel body, compiled once per ISA by cvz_per_isa.hpp

// The depthwise conv2d filter gradient, written once against Simd<T>
// (cvz_simd_generic.hpp) and compiled once per instruction set by
// cvz_per_isa.hpp (the entry points and their dispatch tables are at the top of
// this file).
//
// Nothing here depends on the thread count: each block sums its rows in a
// fixed order into its own buffer, and the buffers are merged in block order.
// Only (output cell, tap) pairs that exist are ever added: kernel rows that
// read padding are skipped and each tap keeps to its range of output columns,
// so a NaN or an infinity reaches exactly the taps it should.

// Per ISA (generic, AVX2, AVX-512): taps per pass of the generic row kernel,
// the largest register-blocked kernel (0: none, 9: 3x3, 25: also 5x5), and the
// output columns a register-blocked 3x3 / 5x5 tile covers.  AVX2's 3x3 tile of 5
// columns holds 9 accumulators, 5 dy vectors and an x vector in its 16 registers:
// 0.96-0.99x the time of 4 columns in two paired runs (dwf_mobilenet 0.96-0.97,
// dwf_dilated 0.97-0.98, dwf_stride2 0.97-0.99, dwf_mult2 0.94; same bits); 6
// columns gained less, 2 lost 20-30%.
constexpr int TAPS = per_isa(THIS_ISA, 9, 9, 12);
constexpr int BLOCKED_TAPS = per_isa(THIS_ISA, 0, 9, 25);
constexpr int TW3 = per_isa(THIS_ISA, 1, 5, 8);
constexpr int TW5 = per_isa(THIS_ISA, 1, 1, 4);

template <class T>
static void depthwise_filter_grad_prepare(DepthwiseFilterGradArgs* a) {
    a->V = Simd<T>::V;
    a->cm = a->C * a->M;
    a->cm_pad = round_up(a->cm, a->V);
    const bool same_type = (sizeof(T) == 4) ? (a->x.type == F32 && a->dy.type == F32)
                                            : (a->x.type == F64 && a->dy.type == F64);
    a->direct = same_type && a->M == 1 && a->cm_pad == a->cm && a->x.s[3] == 1 && a->dy.s[3] == 1;
    // Buffered rows: KH cached x rows, one dy row; then the x row pointers and
    // the (n, ih) each cache slot holds.
    a->scratch_elems = a->direct ? 16 : (a->KH * a->W + a->OW) * a->cm_pad + 16;
    a->scratch_elems += (idx)((a->KH * (sizeof(void*) + sizeof(idx))) / sizeof(T)) + 16;
}

// For one row (n, oh) and NT taps that all read real input rows, add
// sum over ow of x_t[ow*sw*xp + off_t + q] * dy[ow*dyp + q] into the block's
// partial sums, q over the (padded) channel index c * M + m, one vector of
// channels at a time.  The accumulators of all NT taps stay in registers along
// the row and each dy vector is loaded once for all of them.  Per element the
// terms are added in order of ow.
template <class T, int NT>
static void depthwise_filter_grad_taps(const DepthwiseFilterGradArgs* a, const T* const* x_rows, const idx* x_off,
                                       const T* dy_row, idx x_pixel, idx dy_pixel,
                                       const idx* ow_first, const idx* ow_last, T* partial, const idx* tap_index,
                                       idx ow_begin, idx ow_end) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    idx lo = ow_begin, hi = ow_end;  // columns where every tap reads a real pixel
    for (int t = 0; t < NT; ++t) {
        if (ow_first[t] > lo) lo = ow_first[t];
        if (ow_last[t] < hi) hi = ow_last[t];
    }
    if (lo > ow_end) lo = ow_end;  // a tap that reads no real pixel here (a dilation wider than the row)
    if (hi < lo) hi = lo;
    const idx step = a->sw * x_pixel;
    for (idx q = 0; q < a->cm_pad; q += S::V) {
        const T* xq[NT];
        vec acc[NT];
        CVZ_UNROLL(16)
        for (int t = 0; t < NT; ++t) {
            xq[t] = x_rows[t] + x_off[t] + q;
            acc[t] = S::load(partial + tap_index[t] * a->cm_pad + q);
        }
        const T* dq = dy_row + q;
        idx ow = ow_begin;
        for (; ow < lo; ++ow) {  // left border: each tap checks its own range
            const vec d = S::load(dq + ow * dy_pixel);
            CVZ_UNROLL(16)
            for (int t = 0; t < NT; ++t)
                if (ow >= ow_first[t] && ow < ow_last[t]) acc[t] = S::fma(S::load(xq[t] + ow * step), d, acc[t]);
        }
        for (; ow < hi; ++ow) {  // interior: every tap reads a real pixel
            const vec d = S::load(dq + ow * dy_pixel);
            CVZ_UNROLL(16)
            for (int t = 0; t < NT; ++t) acc[t] = S::fma(S::load(xq[t] + ow * step), d, acc[t]);
        }
        for (; ow < ow_end; ++ow) {  // right border
            const vec d = S::load(dq + ow * dy_pixel);
            CVZ_UNROLL(16)
            for (int t = 0; t < NT; ++t)
                if (ow >= ow_first[t] && ow < ow_last[t]) acc[t] = S::fma(S::load(xq[t] + ow * step), d, acc[t]);
        }
        CVZ_UNROLL(16)
        for (int t = 0; t < NT; ++t) S::store(partial + tap_index[t] * a->cm_pad + q, acc[t]);
    }
}

template <class T>
static void depthwise_filter_grad_taps_n(idx nt, const DepthwiseFilterGradArgs* a, const T* const* x_rows,
                                         const idx* x_off, const T* dy_row, idx x_pixel, idx dy_pixel,
                                         const idx* ow_first, const idx* ow_last, T* partial, const idx* tap_index,
                                         idx ow_begin, idx ow_end) {
#define CVZ_TAPS_CASE(k) \
    case k: depthwise_filter_grad_taps<T, k>(a, x_rows, x_off, dy_row, x_pixel, dy_pixel, ow_first, ow_last, partial, \
                                             tap_index, ow_begin, ow_end); break;
    switch (nt) {
        CVZ_TAPS_CASE(1) CVZ_TAPS_CASE(2) CVZ_TAPS_CASE(3) CVZ_TAPS_CASE(4) CVZ_TAPS_CASE(5)
        CVZ_TAPS_CASE(6) CVZ_TAPS_CASE(7) CVZ_TAPS_CASE(8) CVZ_TAPS_CASE(9)
        default: break;
    }
    if constexpr (TAPS >= 12) {
        switch (nt) {
            CVZ_TAPS_CASE(10) CVZ_TAPS_CASE(11) CVZ_TAPS_CASE(12)
            default: break;
        }
    }
#undef CVZ_TAPS_CASE
}

// One row (n, oh), all columns, for a KH x KW kernel with stride SW and
// dilation DW known at compile time.  The KH*KW accumulators of a channel
// vector stay in registers along the row; in the interior (every tap reads a
// real pixel) TW columns go at a time: their dy vectors sit in registers and
// each x vector is loaded once and used by every (column, tap) pair that reads
// it.  Border columns and the rest of a row go in clipped tiles of up to TW
// columns (only the pairs that exist).  Per element the terms are added in order
// of ow, as everywhere else.  Kernel rows
// that read padding (x_rows[kh] == nullptr) are skipped.
template <class T, int KH, int KW, int SW, int DW, int TW>
static void depthwise_filter_grad_row_blocked(const DepthwiseFilterGradArgs* a, const T* const* x_rows, const T* dy_row,
                                              idx x_pixel, idx dy_pixel, const idx* ow_first, const idx* ow_last,
                                              T* partial) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    constexpr int SPAN = (TW - 1) * SW + (KW - 1) * DW + 1;  // x columns a tile reads
    const idx cm_pad = a->cm_pad, OW = a->OW;
    idx lo = 0, hi = OW;  // interior: every tap reads a real pixel
    for (int kw = 0; kw < KW; ++kw) {
        if (ow_first[kw] > lo) lo = ow_first[kw];
        if (ow_last[kw] < hi) hi = ow_last[kw];
    }
    // With several channel vectors and a row longer than two tiles, one tile at a
    // time passes every vector: the tile's pixels are then read as whole contiguous
    // runs (prefetch friendly).  A shorter row is one chunk, its accumulators
    // loaded once per vector (8x14x14x576, 1 thread: 0.60 -> 0.49 ms).
    // The tiles start where the interior does: the border columns before it are a
    // chunk of their own, so that every full tile of the interior runs blocked (on
    // a 14-column row with a 3-wide window, tiles from column 0 left none blocked),
    // and the columns after the last full tile are one chunk.  A row whose interior
    // holds no full tile keeps chunks of TW columns from column 0 (each chunk
    // reloads the accumulators).
    const bool several = cm_pad > S::V && OW > 2 * TW, tiled = several && hi - lo >= TW;
    const idx pixel_bytes = cm_pad * (idx)sizeof(T);
    for (idx c0 = 0, c1; c0 < OW; c0 = c1) {
        c1 = !several ? OW
             : !tiled ? (c0 + TW < OW ? c0 + TW : OW)
             : c0 < lo ? lo : c0 + TW <= hi ? c0 + TW : OW;
        const idx chunk = c1 - c0;
        if (chunk < OW && row_prefetch_pays()) {
            // Tiles cross the row's pixels a few cache lines at a time, which an
            // AMD core's prefetchers miss (row_prefetch_pays): fetch the next
            // tile's dy pixels and the pixels of the input row that no earlier
            // output row read (the last kernel row's) ahead, while this tile
            // computes.
            const idx p0 = c1, p1 = p0 + chunk < OW ? p0 + chunk : OW;
            for (idx ow = p0; ow < p1; ++ow)
                for (idx b = 0; b < pixel_bytes; b += 64)
                    CVZ_PREFETCH((const char*)(dy_row + ow * dy_pixel) + b);
            const T* x_last = x_rows[KH - 1];
            if (x_last != nullptr && p0 < p1) {
                idx i0 = p0 * SW - a->pl, i1 = (p1 - 1) * SW - a->pl + (KW - 1) * DW + 1;
                if (i0 < 0) i0 = 0;
                if (i1 > a->W) i1 = a->W;
                for (idx iw = i0; iw < i1; ++iw)
                    for (idx b = 0; b < pixel_bytes; b += 64)
                        CVZ_PREFETCH((const char*)(x_last + iw * x_pixel) + b);
            }
        }
        for (idx q = 0; q < cm_pad; q += S::V) {
            vec acc[KH][KW];
            CVZ_UNROLL(8)
            for (int kh = 0; kh < KH; ++kh)
                CVZ_UNROLL(8)
                for (int kw = 0; kw < KW; ++kw) acc[kh][kw] = S::load(partial + (kh * KW + kw) * cm_pad + q);
            // Columns [ow, ow + n), n <= TW: their dy vectors in registers, each x vector
            // loaded once for every (column, tap) pair that reads it.  With CLIP (a tile
            // at a border, or shorter than TW) the x columns in the padding are never
            // read and columns past n never added: only the pairs that exist, in order
            // of ow, as a column at a time would add them.
            const auto tile = [&](auto clip, idx ow, idx n) {
                constexpr bool CLIP = decltype(clip)::value;
                vec d[TW];
                CVZ_UNROLL(16)
                for (int t = 0; t < TW; ++t)
                    d[t] = !CLIP || t < n ? S::load(dy_row + (ow + t) * dy_pixel + q) : S::zero();
                const idx iw0 = ow * SW - a->pl;
                CVZ_UNROLL(8)
                for (int kh = 0; kh < KH; ++kh) {
                    if (x_rows[kh] == nullptr) continue;
                    const T* xb = x_rows[kh] + iw0 * x_pixel + q;
                    CVZ_UNROLL(64)
                    for (int j = 0; j < SPAN; ++j) {
                        bool used = false;
                        CVZ_UNROLL(8)
                        for (int kw = 0; kw < KW; ++kw) {
                            const int u = j - kw * DW;
                            used = used || (u >= 0 && u % SW == 0 && u / SW < TW);
                        }
                        if (!used) continue;
                        if (CLIP && (iw0 + j < 0 || iw0 + j >= a->W)) continue;  // a padding column
                        vec xv = S::load(xb + j * x_pixel);
                        S::keep(xv);  // one load, reused by every tap below
                        CVZ_UNROLL(8)
                        for (int kw = 0; kw < KW; ++kw) {
                            const int u = j - kw * DW;
                            if (u >= 0 && u % SW == 0 && u / SW < TW && (!CLIP || u / SW < n))
                                acc[kh][kw] = S::fma(xv, d[u / SW], acc[kh][kw]);
                        }
                    }
                }
            };
            for (idx ow = c0; ow < c1;) {
                if (ow >= lo && ow + TW <= hi && ow + TW <= c1) {
                    tile(std::false_type{}, ow, TW);
                    ow += TW;
                } else {
                    const idx n = c1 - ow < TW ? c1 - ow : TW;
                    tile(std::true_type{}, ow, n);
                    ow += n;
                }
            }
            CVZ_UNROLL(8)
            for (int kh = 0; kh < KH; ++kh)
                CVZ_UNROLL(8)
                for (int kw = 0; kw < KW; ++kw) S::store(partial + (kh * KW + kw) * cm_pad + q, acc[kh][kw]);
        }
    }
}

// The register-blocked row kernel for this shape, or nullptr.
template <class T>
using BlockedRowKernel = void (*)(const DepthwiseFilterGradArgs*, const T* const*, const T*, idx, idx, const idx*,
                                  const idx*, T*);

template <class T>
static BlockedRowKernel<T> depthwise_filter_grad_blocked_for(const DepthwiseFilterGradArgs* a) {
    if constexpr (BLOCKED_TAPS > 0) {
        const idx k = a->KH * 100 + a->KW, sd = a->sw * 10 + a->dw;
        if (k == 303) {
            if (sd == 11) return &depthwise_filter_grad_row_blocked<T, 3, 3, 1, 1, TW3>;
            if (sd == 21) return &depthwise_filter_grad_row_blocked<T, 3, 3, 2, 1, TW3>;
            if (sd == 12) return &depthwise_filter_grad_row_blocked<T, 3, 3, 1, 2, TW3>;
            if (sd == 22) return &depthwise_filter_grad_row_blocked<T, 3, 3, 2, 2, TW3>;
        }
        if constexpr (BLOCKED_TAPS >= 25) {
            if (k == 505) {
                if (sd == 11) return &depthwise_filter_grad_row_blocked<T, 5, 5, 1, 1, TW5>;
                if (sd == 21) return &depthwise_filter_grad_row_blocked<T, 5, 5, 2, 1, TW5>;
            }
        }
    }
    (void)a;
    return nullptr;
}

// Columns [ow_begin, ow_end) of one row, every tap that reads a real row, in
// (kh, kw) order and groups of at most TAPS, each tap checking its range.
template <class T>
static void depthwise_filter_grad_generic_range(const DepthwiseFilterGradArgs* a, const T* const* x_row_of_kh,
                                                const T* dy_row, idx x_pixel, idx dy_pixel, const idx* ow_first_kw,
                                                const idx* ow_last_kw, T* partial, idx ow_begin, idx ow_end) {
    if (ow_end <= ow_begin) return;
    const T* x_rows[TAPS];
    idx offs[TAPS], firsts[TAPS], lasts[TAPS], index[TAPS];
    idx nt = 0;
    for (idx t = 0; t < a->KH * a->KW; ++t) {
        const idx kh = t / a->KW, kw = t % a->KW;
        if (x_row_of_kh[kh] == nullptr) continue;
        x_rows[nt] = x_row_of_kh[kh];
        offs[nt] = (kw * a->dw - a->pl) * x_pixel;
        firsts[nt] = ow_first_kw[kw];
        lasts[nt] = ow_last_kw[kw];
        index[nt] = t;
        if (++nt == TAPS) {
            depthwise_filter_grad_taps_n<T>(nt, a, x_rows, offs, dy_row, x_pixel, dy_pixel, firsts, lasts, partial,
                                            index, ow_begin, ow_end);
            nt = 0;
        }
    }
    if (nt)
        depthwise_filter_grad_taps_n<T>(nt, a, x_rows, offs, dy_row, x_pixel, dy_pixel, firsts, lasts, partial, index,
                                        ow_begin, ow_end);
}

// Sum rows [row_begin, row_end) of (n, oh) into partial[KH*KW][cm_pad] (zeroed
// here).  When rows cannot be read in place, scratch holds the x rows of the
// valid kernel rows ([KH][W][cm_pad], channel c repeated M times, zero padding
// channels) and one dy row; always, a table of x row pointers per kernel row.
template <class T>
static void depthwise_filter_grad_block(const DepthwiseFilterGradArgs* a, idx block, void* raw_scratch,
                                        const idx* ow_first_kw, const idx* ow_last_kw) {
    const idx KH = a->KH, KW = a->KW, cm = a->cm, cm_pad = a->cm_pad, M = a->M;
    const idx rows = a->N * a->OH;
    const idx row_begin = block * rows / a->n_blocks, row_end = (block + 1) * rows / a->n_blocks;
    T* partial = (T*)a->partial + block * KH * KW * cm_pad;
    std::memset(partial, 0, (std::size_t)(KH * KW * cm_pad) * sizeof(T));
    T* x_buf = (T*)raw_scratch;
    T* dy_buf = x_buf + (a->direct ? 0 : KH * a->W * cm_pad);
    const T** x_row_of_kh = (const T**)(dy_buf + (a->direct ? 16 : a->OW * cm_pad + 16));
    // Converted x rows are cached in KH slots, keyed by n * H + ih: consecutive
    // output rows share most of their input rows (all but one for stride 1).
    idx* slot_key = (idx*)(x_row_of_kh + KH);
    for (idx slot = 0; slot < KH; ++slot) slot_key[slot] = -1;
    const BlockedRowKernel<T> blocked = depthwise_filter_grad_blocked_for<T>(a);
    for (idx row = row_begin; row < row_end; ++row) {
        const idx n = row / a->OH, oh = row % a->OH;
        bool any = false;
        for (idx kh = 0; kh < KH; ++kh) {
            const idx ih = oh * a->sh - a->pt + kh * a->dh;
            x_row_of_kh[kh] = nullptr;
            if (ih < 0 || ih >= a->H) continue;  // this kernel row reads padding
            any = true;
            if (a->direct) x_row_of_kh[kh] = (const T*)a->x.data + n * a->x.s[0] + ih * a->x.s[1];
        }
        if (!a->direct && any) {
            // Rows already cached are used in place; each missing row goes to a
            // slot that holds no row this output row needs.
            for (idx kh = 0; kh < KH; ++kh) {
                const idx ih = oh * a->sh - a->pt + kh * a->dh;
                if (ih < 0 || ih >= a->H) continue;
                for (idx k = 0; k < KH; ++k)
                    if (slot_key[k] == n * a->H + ih) x_row_of_kh[kh] = x_buf + k * a->W * cm_pad;
            }
            for (idx kh = 0; kh < KH; ++kh) {
                const idx ih = oh * a->sh - a->pt + kh * a->dh;
                if (ih < 0 || ih >= a->H || x_row_of_kh[kh] != nullptr) continue;
                idx free_slot = 0;
                for (idx k = 0; k < KH; ++k) {
                    bool needed = false;
                    for (idx j = 0; j < KH; ++j) {
                        const idx jh = oh * a->sh - a->pt + j * a->dh;
                        needed = needed || (x_row_of_kh[j] != nullptr && slot_key[k] == n * a->H + jh);
                    }
                    if (!needed) { free_slot = k; break; }
                }
                T* dst = x_buf + free_slot * a->W * cm_pad;
                gather_rows<T>(dst, cm_pad, a->x.data, a->x.type, n * a->x.s[0] + ih * a->x.s[1], a->W, a->x.s[2],
                               a->C, a->x.s[3], M);
                slot_key[free_slot] = n * a->H + ih;
                x_row_of_kh[kh] = dst;
            }
        }
        if (!any) continue;
        const T* dy_row;
        idx x_pixel, dy_pixel;
        if (a->direct) {
            dy_row = (const T*)a->dy.data + n * a->dy.s[0] + oh * a->dy.s[1];
            dy_pixel = a->dy.s[2];
            x_pixel = a->x.s[2];
        } else {
            gather_rows<T>(dy_buf, cm_pad, a->dy.data, a->dy.type, n * a->dy.s[0] + oh * a->dy.s[1],
                           a->OW, a->dy.s[2], cm, a->dy.s[3]);
            dy_row = dy_buf;
            dy_pixel = cm_pad;
            x_pixel = cm_pad;
        }
        if (blocked != nullptr)
            blocked(a, x_row_of_kh, dy_row, x_pixel, dy_pixel, ow_first_kw, ow_last_kw, partial);
        else
            depthwise_filter_grad_generic_range<T>(a, x_row_of_kh, dy_row, x_pixel, dy_pixel, ow_first_kw, ow_last_kw,
                                                   partial, 0, a->OW);
    }
}

// out[tap][c][m] = 0 + the sum over blocks, in block order, of
// partial[block][tap][c*M+m]: a plain sum per element, so the same bits on every
// ISA, a vector of channels at a time (one at a time it took a fifth of a
// 7x7x960 call's time).
template <class T>
static void depthwise_filter_grad_merge(const DepthwiseFilterGradArgs* a, idx tap) {
    typedef Simd<T> S;
    const T* partial = (const T*)a->partial + tap * a->cm_pad;
    const idx stride = a->KH * a->KW * a->cm_pad;
    T total[S::V];
    for (idx q = 0; q < a->cm; q += S::V) {  // (cm_pad: the partial sums' padding lanes exist)
        typename S::vec acc = S::zero();
        for (idx b = 0; b < a->n_blocks; ++b) acc = S::add(acc, S::load(partial + b * stride + q));
        S::store(total, acc);
        for (idx v = 0; v < S::V && q + v < a->cm; ++v)
            store_as<T>(a->out.data, a->out.type, tap * a->cm + q + v, total[v]);
    }
}

#endif  // CVZ_PER_ISA_PASS