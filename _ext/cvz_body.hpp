// The convviz kernels, written once against a small SIMD traits interface
// (Simd<T>::vec, V, zero, load, store, set1, fma) and the tile-shape macros
// ISA_MR2, ISA_MR1 (pixels per input-gradient tile of 2 and 1 vectors) and
// ISA_TAPS (taps per filter-gradient pass).  cvz_kernels.hpp includes this file
// once per instruction set, inside a namespace and a `#pragma GCC target`
// region, so every function here is compiled for that ISA.
//
// Nothing here depends on the thread count: each input-gradient row is written
// by one call of input_grad_row, each filter-gradient block sums its rows in a
// fixed order into its own buffer, and the buffers are merged in block order.

// ======================================================= input gradient
// One tile: MR output pixels (consecutive in their stride phase) x NRV vectors
// of input channels, accumulated in registers over every tap of the phase and
// every output channel of the group, then stored once.
template <class T, int MR, int NRV>
static inline void input_grad_tile(const T* const* a_ptrs, const T* const* b_ptrs, idx n_taps,
                                   idx a_pixel_stride, idx K, idx b_row_stride,
                                   T* out, idx out_pixel_stride, idx n_pixels) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    vec acc[MR][NRV];
#pragma GCC unroll 32
    for (int p = 0; p < MR; ++p)
#pragma GCC unroll 4
        for (int q = 0; q < NRV; ++q) acc[p][q] = S::zero();
    for (idx t = 0; t < n_taps; ++t) {
        const T* a = a_ptrs[t];
        const T* b = b_ptrs[t];
        for (idx k = 0; k < K; ++k) {
            vec bv[NRV];
#pragma GCC unroll 4
            for (int q = 0; q < NRV; ++q) bv[q] = S::load(b + k * b_row_stride + q * S::V);
#pragma GCC unroll 32
            for (int p = 0; p < MR; ++p) {
                vec av = S::set1(a[p * a_pixel_stride + k]);
#pragma GCC unroll 4
                for (int q = 0; q < NRV; ++q) acc[p][q] = S::fma(av, bv[q], acc[p][q]);
            }
        }
    }
    if (n_pixels == MR) {
#pragma GCC unroll 32
        for (int p = 0; p < MR; ++p)
#pragma GCC unroll 4
            for (int q = 0; q < NRV; ++q) S::store(out + p * out_pixel_stride + q * S::V, acc[p][q]);
    } else {
        for (int p = 0; p < n_pixels; ++p)
#pragma GCC unroll 4
            for (int q = 0; q < NRV; ++q) S::store(out + p * out_pixel_stride + q * S::V, acc[p][q]);
    }
}

// Per-thread scratch of the input gradient, carved from one allocation:
// dy rows [KH][ow_span][Cout] (zero outside [0, OW): edge pixels need no
// special case), a result row [W][G][cin_g_pad] when results are not stored in
// place, and the tap tables.
template <class T>
struct InputGradScratch {
    T* dy_rows;
    T* out_row;
    idx* slot_kh;
    idx* tap_ow0;
    idx* tap_slot;
    idx* tap_k;
    const T** a_ptrs;
    const T** b_ptrs;
};

template <class T>
static inline InputGradScratch<T> input_grad_scratch(const InputGradArgs* a, void* raw) {
    InputGradScratch<T> s;
    const idx taps = a->KH * a->KW;
    s.dy_rows = (T*)raw;
    s.out_row = s.dy_rows + round_up(a->KH * a->ow_span * a->Cout, 16);
    idx* ints = (idx*)(s.out_row + round_up(a->direct ? 0 : a->W * a->G * a->cin_g_pad, 16));
    s.slot_kh = ints;
    s.tap_ow0 = ints + a->KH;
    s.tap_slot = s.tap_ow0 + taps;
    s.tap_k = s.tap_slot + taps;
    s.a_ptrs = (const T**)(s.tap_k + taps);
    s.b_ptrs = s.a_ptrs + taps;
    return s;
}

template <class T>
static void input_grad_prepare(InputGradArgs* a) {
    a->V = Simd<T>::V;
    a->cin_g_pad = round_up(a->cin_g, a->V);
    const bool same_type = (sizeof(T) == 4) ? a->dx_type == F32 : a->dx_type == F64;
    a->direct = same_type && a->dx_s[3] == 1 && a->cin_g_pad == a->cin_g;
    // The dy row buffer covers every ow a tile may read, MR pixels of slack included.
    const idx mr = ISA_MR2 > ISA_MR1 ? ISA_MR2 : ISA_MR1;
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
    const idx taps = a->KH * a->KW;
    a->scratch_elems = round_up(a->KH * a->ow_span * a->Cout, 16) +
                       round_up(a->direct ? 0 : a->W * a->G * a->cin_g_pad, 16) +
                       (idx)(((a->KH + 3 * taps) * sizeof(idx) + 2 * taps * sizeof(void*)) / sizeof(T)) + 16;
}

// Pack the HWIO filter as [KH][KW][G][cout_g][cin_g_pad] in the compute type,
// zero in the padding channels, so a tile reads contiguous input channels.
template <class T>
static void input_grad_pack(const InputGradArgs* a) {
    T* packed = (T*)a->packed;
    for (idx kh = 0; kh < a->KH; ++kh)
        for (idx kw = 0; kw < a->KW; ++kw)
            for (idx g = 0; g < a->G; ++g)
                for (idx co = 0; co < a->cout_g; ++co) {
                    T* dst = packed + (((kh * a->KW + kw) * a->G + g) * a->cout_g + co) * a->cin_g_pad;
                    idx src = kh * a->w_s[0] + kw * a->w_s[1] + (g * a->cout_g + co) * a->w_s[3];
                    for (idx ci = 0; ci < a->cin_g; ++ci)
                        dst[ci] = load_as<T>(a->w, a->w_type, src + ci * a->w_s[2]);
                    for (idx ci = a->cin_g; ci < a->cin_g_pad; ++ci) dst[ci] = 0;
                }
}

// Compute one input row dx[n, ih, :, :] (row = n * H + ih).
template <class T>
static void input_grad_row(const InputGradArgs* a, idx row, void* raw_scratch) {
    typedef Simd<T> S;
    InputGradScratch<T> s = input_grad_scratch<T>(a, raw_scratch);
    const idx n = row / a->H, ih = row % a->H;
    const idx Cout = a->Cout, G = a->G, cin_g_pad = a->cin_g_pad;
    const idx row_elems = a->ow_span * Cout;

    // Kernel rows that reach this input row; copy the dy row each one reads.
    idx n_slots = 0;
    for (idx kh = 0; kh < a->KH; ++kh) {
        idx t = ih + a->pt - kh * a->dh;
        if (t < 0 || t % a->sh != 0) continue;
        idx oh = t / a->sh;
        if (oh >= a->OH) continue;
        T* dst = s.dy_rows + n_slots * row_elems + (0 - a->ow_lo) * Cout;
        gather_rows<T>(dst, Cout, a->dy, a->dy_type, n * a->dy_s[0] + oh * a->dy_s[1],
                       a->OW, a->dy_s[2], Cout, a->dy_s[3]);
        s.slot_kh[n_slots++] = kh;
    }

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

    const T* packed = (const T*)a->packed;
    for (idx r = 0; r < a->sw && r < a->W; ++r) {
        const idx n_pix = (a->W - r + a->sw - 1) / a->sw;  // pixels iw = r + j * sw
        // Taps of this phase: (slot, kw) with r + pl - kw * dw divisible by sw.
        idx n_taps = 0;
        for (idx slot = 0; slot < n_slots; ++slot)
            for (idx kw = 0; kw < a->KW; ++kw) {
                idx u = r + a->pl - kw * a->dw;
                if (((u % a->sw) + a->sw) % a->sw != 0) continue;
                s.tap_ow0[n_taps] = floor_div(u, a->sw);
                s.tap_slot[n_taps] = slot;
                s.tap_k[n_taps] = s.slot_kh[slot] * a->KW + kw;
                ++n_taps;
            }
        for (idx g = 0; g < G; ++g) {
            idx c0 = 0;
            while (c0 < cin_g_pad) {
                const bool wide = c0 + 2 * S::V <= cin_g_pad;
                for (idx t = 0; t < n_taps; ++t)
                    s.b_ptrs[t] = packed + (s.tap_k[t] * G + g) * a->cout_g * cin_g_pad + c0;
                const idx mr = wide ? ISA_MR2 : ISA_MR1;
                for (idx j0 = 0; j0 < n_pix; j0 += mr) {
                    for (idx t = 0; t < n_taps; ++t)
                        s.a_ptrs[t] = s.dy_rows + s.tap_slot[t] * row_elems +
                                      (s.tap_ow0[t] + j0 - a->ow_lo) * Cout + g * a->cout_g;
                    const idx np = (n_pix - j0 < mr) ? n_pix - j0 : mr;
                    T* out = out_base + (r + j0 * a->sw) * out_pixel + g * out_group + c0;
                    if (wide)
                        input_grad_tile<T, ISA_MR2, 2>(s.a_ptrs, s.b_ptrs, n_taps, Cout, a->cout_g, cin_g_pad,
                                                       out, a->sw * out_pixel, np);
                    else
                        input_grad_tile<T, ISA_MR1, 1>(s.a_ptrs, s.b_ptrs, n_taps, Cout, a->cout_g, cin_g_pad,
                                                       out, a->sw * out_pixel, np);
                }
                c0 += wide ? 2 * S::V : S::V;
            }
        }
    }

    if (!a->direct) {  // convert / scatter the row into dx
        const idx base = n * a->dx_s[0] + ih * a->dx_s[1];
        for (idx iw = 0; iw < a->W; ++iw)
            for (idx g = 0; g < G; ++g)
                for (idx ci = 0; ci < a->cin_g; ++ci)
                    store_as<T>(a->dx, a->dx_type, base + iw * a->dx_s[2] + (g * a->cin_g + ci) * a->dx_s[3],
                                s.out_row[iw * G * cin_g_pad + g * cin_g_pad + ci]);
    }
}

// ======================================================= depthwise filter gradient
template <class T>
static void filter_grad_prepare(FilterGradArgs* a) {
    a->V = Simd<T>::V;
    a->cm = a->C * a->M;
    a->cm_pad = round_up(a->cm, a->V);
    const bool same_type = (sizeof(T) == 4) ? (a->x_type == F32 && a->dy_type == F32)
                                            : (a->x_type == F64 && a->dy_type == F64);
    a->direct = same_type && a->M == 1 && a->cm_pad == a->cm && a->x_s[3] == 1 && a->dy_s[3] == 1;
    a->scratch_elems = a->direct ? 16 : (a->KH * a->W + a->OW) * a->cm_pad + 16;
    a->scratch_elems += (idx)((a->KH * sizeof(void*)) / sizeof(T)) + 16;
}

// For rows (n, oh) of one block and up to ISA_TAPS taps, add
// sum over ow of x[n, ih(kh), ow*sw + kw*dw - pl, q] * dy[n, oh, ow, q] into the
// block's partial sums, q over the (padded) channel index c * M + m, one vector
// of channels at a time.  The accumulators for all taps stay in registers along
// the row, and each dy vector is loaded once for every tap.  Per element the
// terms are added in order of ow.
template <class T>
static void filter_grad_taps(const FilterGradArgs* a, const T* const* x_rows, const T* dy_row,
                             idx x_pixel, idx dy_pixel, const idx* tap_kw, idx n_taps,
                             const idx* ow_first, const idx* ow_last, T* partial, const idx* tap_index) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    idx lo = 0, hi = a->OW;  // columns where every tap reads a real pixel
    for (idx t = 0; t < n_taps; ++t) {
        if (ow_first[t] > lo) lo = ow_first[t];
        if (ow_last[t] < hi) hi = ow_last[t];
    }
    if (hi < lo) hi = lo;
    const T* xs[ISA_TAPS];
    idx x_off[ISA_TAPS], first[ISA_TAPS], last[ISA_TAPS];
    for (int t = 0; t < ISA_TAPS; ++t) {
        const bool on = t < n_taps && x_rows[t] != nullptr;
        xs[t] = on ? x_rows[t] : nullptr;
        x_off[t] = on ? (tap_kw[t] * a->dw - a->pl) * x_pixel : 0;
        first[t] = on ? ow_first[t] : 0;
        last[t] = on ? ow_last[t] : 0;
    }
    const idx step = a->sw * x_pixel;
    for (idx q = 0; q < a->cm_pad; q += S::V) {
        vec acc[ISA_TAPS];
#pragma GCC unroll 16
        for (int t = 0; t < ISA_TAPS; ++t)
            acc[t] = (t < n_taps) ? S::load(partial + tap_index[t] * a->cm_pad + q) : S::zero();
        idx ow = 0;
        for (; ow < lo; ++ow) {  // left border: each tap checks its own range
            vec d = S::load(dy_row + ow * dy_pixel + q);
#pragma GCC unroll 16
            for (int t = 0; t < ISA_TAPS; ++t)
                if (xs[t] && ow >= first[t] && ow < last[t])
                    acc[t] = S::fma(S::load(xs[t] + x_off[t] + ow * step + q), d, acc[t]);
        }
        for (; ow + 2 <= hi; ow += 2) {  // interior: every tap valid, two columns a step
            vec d0 = S::load(dy_row + ow * dy_pixel + q);
            vec d1 = S::load(dy_row + (ow + 1) * dy_pixel + q);
#pragma GCC unroll 16
            for (int t = 0; t < ISA_TAPS; ++t)
                if (xs[t]) {
                    const T* p = xs[t] + x_off[t] + ow * step + q;
                    acc[t] = S::fma(S::load(p), d0, acc[t]);
                    acc[t] = S::fma(S::load(p + step), d1, acc[t]);
                }
        }
        for (; ow < a->OW; ++ow) {  // the odd interior column, then the right border
            vec d = S::load(dy_row + ow * dy_pixel + q);
#pragma GCC unroll 16
            for (int t = 0; t < ISA_TAPS; ++t)
                if (xs[t] && ow >= first[t] && ow < last[t])
                    acc[t] = S::fma(S::load(xs[t] + x_off[t] + ow * step + q), d, acc[t]);
        }
        for (idx t = 0; t < n_taps; ++t) S::store(partial + tap_index[t] * a->cm_pad + q, acc[t]);
    }
}

// Sum rows [row_begin, row_end) of (n, oh) into partial[KH*KW][cm_pad] (zeroed
// here).  When rows cannot be read in place, scratch holds the x rows of the
// valid kernel rows ([KH][W][cm_pad], channel c repeated M times, zero padding
// channels) and one dy row; always, a table of x row pointers per kernel row.
template <class T>
static void filter_grad_block(const FilterGradArgs* a, idx block, void* raw_scratch,
                              const idx* ow_first_kw, const idx* ow_last_kw) {
    const idx KH = a->KH, KW = a->KW, cm = a->cm, cm_pad = a->cm_pad, M = a->M;
    const idx rows = a->N * a->OH;
    const idx row_begin = block * rows / a->n_blocks, row_end = (block + 1) * rows / a->n_blocks;
    T* partial = (T*)a->partial + block * KH * KW * cm_pad;
    std::memset(partial, 0, (std::size_t)(KH * KW * cm_pad) * sizeof(T));
    T* x_buf = (T*)raw_scratch;
    T* dy_buf = x_buf + (a->direct ? 0 : KH * a->W * cm_pad);
    const T** x_row_of_kh = (const T**)(dy_buf + (a->direct ? 16 : a->OW * cm_pad + 16));
    for (idx row = row_begin; row < row_end; ++row) {
        const idx n = row / a->OH, oh = row % a->OH;
        bool any = false;
        for (idx kh = 0; kh < KH; ++kh) {
            idx ih = oh * a->sh - a->pt + kh * a->dh;
            x_row_of_kh[kh] = nullptr;
            if (ih < 0 || ih >= a->H) continue;  // this kernel row reads padding
            any = true;
            const idx src = n * a->x_s[0] + ih * a->x_s[1];
            if (a->direct) {
                x_row_of_kh[kh] = (const T*)a->x + src;
                continue;
            }
            T* dst = x_buf + kh * a->W * cm_pad;
            if (M == 1) {
                gather_rows<T>(dst, cm_pad, a->x, a->x_type, src, a->W, a->x_s[2], a->C, a->x_s[3]);
            } else {
                for (idx iw = 0; iw < a->W; ++iw)
                    for (idx c = 0; c < a->C; ++c) {
                        T v = load_as<T>(a->x, a->x_type, src + iw * a->x_s[2] + c * a->x_s[3]);
                        for (idx m = 0; m < M; ++m) dst[iw * cm_pad + c * M + m] = v;
                    }
            }
            x_row_of_kh[kh] = dst;
        }
        if (!any) continue;
        const T* dy_row;
        idx x_pixel, dy_pixel;
        if (a->direct) {
            dy_row = (const T*)a->dy + n * a->dy_s[0] + oh * a->dy_s[1];
            dy_pixel = a->dy_s[2];
            x_pixel = a->x_s[2];
        } else {
            gather_rows<T>(dy_buf, cm_pad, a->dy, a->dy_type, n * a->dy_s[0] + oh * a->dy_s[1],
                           a->OW, a->dy_s[2], cm, a->dy_s[3]);
            dy_row = dy_buf;
            dy_pixel = cm_pad;
            x_pixel = cm_pad;
        }
        // Taps in groups of ISA_TAPS, in (kh, kw) order.
        for (idx t0 = 0; t0 < KH * KW; t0 += ISA_TAPS) {
            const T* x_rows[ISA_TAPS];
            idx kws[ISA_TAPS], firsts[ISA_TAPS], lasts[ISA_TAPS], index[ISA_TAPS];
            idx nt = 0;
            bool live = false;
            for (idx t = t0; t < KH * KW && t < t0 + ISA_TAPS; ++t, ++nt) {
                const idx kh = t / KW, kw = t % KW;
                x_rows[nt] = x_row_of_kh[kh];
                live = live || x_rows[nt] != nullptr;
                kws[nt] = kw;
                firsts[nt] = ow_first_kw[kw];
                lasts[nt] = ow_last_kw[kw];
                index[nt] = t;
            }
            if (live)
                filter_grad_taps<T>(a, x_rows, dy_row, x_pixel, dy_pixel, kws, nt, firsts, lasts, partial, index);
        }
    }
}

// out[tap][c][m] = sum over blocks, in block order, of partial[block][tap][c*M+m]
// for taps [tap_begin, tap_end).
template <class T>
static void filter_grad_merge(const FilterGradArgs* a, idx tap_begin, idx tap_end) {
    const T* partial = (const T*)a->partial;
    const idx stride = a->KH * a->KW * a->cm_pad;
    for (idx tap = tap_begin; tap < tap_end; ++tap)
        for (idx q = 0; q < a->cm; ++q) {
            T total = 0;
            for (idx b = 0; b < a->n_blocks; ++b) total += partial[b * stride + tap * a->cm_pad + q];
            store_as<T>(a->out, a->out_type, tap * a->cm + q, total);
        }
}
