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

// ======================================================= conversions and layouts
// dst[0..n) = src[offset .. offset+n) (contiguous), converted to T.  Half types
// use the ISA's conversion instructions (exact, like NumPy / ml_dtypes).
template <class T, int TYPE>
static inline void convert_run(T* dst, const void* src, idx offset, idx n) {
    typedef Simd<T> S;
    idx i = 0;
    if (TYPE == F16 || TYPE == BF16) {
        const std::uint16_t* p = (const std::uint16_t*)src + offset;
        if constexpr (sizeof(T) == 4 && S::HALF) {
            for (; i + S::V <= n; i += S::V)
                S::store(dst + i, TYPE == F16 ? S::load_f16(p + i) : S::load_bf16(p + i));
        }
        for (; i < n; ++i) dst[i] = (T)(TYPE == F16 ? f16_to_f32(p[i]) : bf16_to_f32(p[i]));
    } else if (TYPE == F32) {
        const float* p = (const float*)src + offset;
        if constexpr (sizeof(T) == 4) {
            std::memcpy(dst, p, (std::size_t)n * sizeof(float));
        } else {
            for (; i < n; ++i) dst[i] = (T)p[i];
        }
    } else {
        const double* p = (const double*)src + offset;
        if constexpr (sizeof(T) == 8) {
            std::memcpy(dst, p, (std::size_t)n * sizeof(double));
        } else {
            for (; i < n; ++i) dst[i] = (T)p[i];
        }
    }
}

// dst[offset .. offset+n) (contiguous, of TYPE) = src[0..n), rounded to nearest even.
template <class T, int TYPE>
static inline void store_run(void* dst, idx offset, const T* src, idx n) {
    typedef Simd<T> S;
    idx i = 0;
    if (TYPE == F16 || TYPE == BF16) {
        std::uint16_t* p = (std::uint16_t*)dst + offset;
        if constexpr (sizeof(T) == 4 && S::HALF) {
            for (; i + S::V <= n; i += S::V) {
                if (TYPE == F16) S::store_f16(p + i, S::load(src + i)); else S::store_bf16(p + i, S::load(src + i));
            }
        }
        for (; i < n; ++i) p[i] = TYPE == F16 ? f32_to_f16((float)src[i]) : f32_to_bf16((float)src[i]);
    } else if (TYPE == F32) {
        float* p = (float*)dst + offset;
        for (; i < n; ++i) p[i] = (float)src[i];
    } else {
        double* p = (double*)dst + offset;
        for (; i < n; ++i) p[i] = (double)src[i];
    }
}

// dst[i * dst_stride + c * repeat + r] = src[offset + i * s_outer + c * s_inner] for
// i < n_outer, c < n_inner, r < repeat: rows of pixels (i) by channels (c), each
// channel repeated `repeat` times (the depthwise multiplier), in the compute type.
// Channels-contiguous sources convert whole runs; channels-strided ones (NCHW)
// walk each channel's contiguous pixel run instead, so reads stay sequential.
template <class T, int TYPE>
static void gather_rows_t(T* dst, idx dst_stride, const void* src, idx offset, idx n_outer, idx s_outer,
                          idx n_inner, idx s_inner, idx repeat) {
    if (s_inner == 1 && repeat == 1) {
        for (idx i = 0; i < n_outer; ++i) convert_run<T, TYPE>(dst + i * dst_stride, src, offset + i * s_outer, n_inner);
        return;
    }
    if (s_inner == 1) {
        T run[256];
        for (idx i = 0; i < n_outer; ++i)
            for (idx c0 = 0; c0 < n_inner; c0 += 256) {
                const idx len = n_inner - c0 < 256 ? n_inner - c0 : 256;
                convert_run<T, TYPE>(run, src, offset + i * s_outer + c0, len);
                T* d = dst + i * dst_stride + c0 * repeat;
                for (idx c = 0; c < len; ++c)
                    for (idx r = 0; r < repeat; ++r) d[c * repeat + r] = run[c];
            }
        return;
    }
    // Channels-strided (NCHW): whole B x B blocks move through a register transpose.
    typedef Simd<T> S;
    constexpr idx B = S::TBLOCK;
    idx c_done = 0;
    if constexpr (B > 0) {
        if (s_outer == 1 && repeat == 1) {
            T block[B * B];
            const idx i_full = n_outer / B * B;
            for (; c_done + B <= n_inner; c_done += B) {
                for (idx i0 = 0; i0 < i_full; i0 += B) {
                    const idx from = offset + c_done * s_inner + i0;
                    if (TYPE == (sizeof(T) == 4 ? F32 : F64)) {
                        S::transpose((const T*)src + from, s_inner, dst + i0 * dst_stride + c_done, dst_stride);
                    } else {
                        for (idx c = 0; c < B; ++c) convert_run<T, TYPE>(block + c * B, src, from + c * s_inner, B);
                        S::transpose(block, B, dst + i0 * dst_stride + c_done, dst_stride);
                    }
                }
                for (idx c = c_done; c < c_done + B; ++c)  // the last pixels of these channels
                    for (idx i = i_full; i < n_outer; ++i)
                        dst[i * dst_stride + c] = load_as<T>(src, TYPE, offset + c * s_inner + i);
            }
        }
    }
    T run[256];
    for (idx c = c_done; c < n_inner; ++c)
        for (idx i0 = 0; i0 < n_outer; i0 += 256) {
            const idx len = n_outer - i0 < 256 ? n_outer - i0 : 256;
            if (s_outer == 1) {
                convert_run<T, TYPE>(run, src, offset + c * s_inner + i0, len);
            } else {
                for (idx i = 0; i < len; ++i) run[i] = load_as<T>(src, TYPE, offset + c * s_inner + (i0 + i) * s_outer);
            }
            for (idx i = 0; i < len; ++i)
                for (idx r = 0; r < repeat; ++r) dst[(i0 + i) * dst_stride + c * repeat + r] = run[i];
        }
}

template <class T>
static void gather_rows(T* dst, idx dst_stride, const void* src, int type, idx offset, idx n_outer, idx s_outer,
                        idx n_inner, idx s_inner, idx repeat = 1) {
    switch (type) {
        case F16: gather_rows_t<T, F16>(dst, dst_stride, src, offset, n_outer, s_outer, n_inner, s_inner, repeat); break;
        case BF16: gather_rows_t<T, BF16>(dst, dst_stride, src, offset, n_outer, s_outer, n_inner, s_inner, repeat); break;
        case F32: gather_rows_t<T, F32>(dst, dst_stride, src, offset, n_outer, s_outer, n_inner, s_inner, repeat); break;
        default: gather_rows_t<T, F64>(dst, dst_stride, src, offset, n_outer, s_outer, n_inner, s_inner, repeat); break;
    }
}

// dst[offset + i * d_outer + c * d_inner] (of TYPE) = src[i * src_stride + c], the inverse layout move.
template <class T, int TYPE>
static void scatter_rows_t(void* dst, idx offset, idx n_outer, idx d_outer, idx n_inner, idx d_inner,
                           const T* src, idx src_stride) {
    if (d_inner == 1) {
        for (idx i = 0; i < n_outer; ++i) store_run<T, TYPE>(dst, offset + i * d_outer, src + i * src_stride, n_inner);
        return;
    }
    // Channels-strided (NCHW): whole B x B blocks move through a register transpose.
    typedef Simd<T> S;
    constexpr idx B = S::TBLOCK;
    idx c_done = 0;
    if constexpr (B > 0) {
        if (d_outer == 1) {
            T block[B * B];
            const idx i_full = n_outer / B * B;
            for (; c_done + B <= n_inner; c_done += B) {
                for (idx i0 = 0; i0 < i_full; i0 += B) {
                    const idx to = offset + c_done * d_inner + i0;
                    if (TYPE == (sizeof(T) == 4 ? F32 : F64)) {
                        S::transpose(src + i0 * src_stride + c_done, src_stride, (T*)dst + to, d_inner);
                    } else {
                        S::transpose(src + i0 * src_stride + c_done, src_stride, block, B);
                        for (idx c = 0; c < B; ++c) store_run<T, TYPE>(dst, to + c * d_inner, block + c * B, B);
                    }
                }
                for (idx c = c_done; c < c_done + B; ++c)  // the last pixels of these channels
                    for (idx i = i_full; i < n_outer; ++i)
                        store_as<T>(dst, TYPE, offset + c * d_inner + i, src[i * src_stride + c]);
            }
        }
    }
    T run[256];
    for (idx c = c_done; c < n_inner; ++c)
        for (idx i0 = 0; i0 < n_outer; i0 += 256) {
            const idx len = n_outer - i0 < 256 ? n_outer - i0 : 256;
            for (idx i = 0; i < len; ++i) run[i] = src[(i0 + i) * src_stride + c];
            if (d_outer == 1) {
                store_run<T, TYPE>(dst, offset + c * d_inner + i0, run, len);
            } else {
                for (idx i = 0; i < len; ++i) store_as<T>(dst, TYPE, offset + c * d_inner + (i0 + i) * d_outer, run[i]);
            }
        }
}

template <class T>
static void scatter_rows(void* dst, int type, idx offset, idx n_outer, idx d_outer, idx n_inner, idx d_inner,
                         const T* src, idx src_stride) {
    switch (type) {
        case F16: scatter_rows_t<T, F16>(dst, offset, n_outer, d_outer, n_inner, d_inner, src, src_stride); break;
        case BF16: scatter_rows_t<T, BF16>(dst, offset, n_outer, d_outer, n_inner, d_inner, src, src_stride); break;
        case F32: scatter_rows_t<T, F32>(dst, offset, n_outer, d_outer, n_inner, d_inner, src, src_stride); break;
        default: scatter_rows_t<T, F64>(dst, offset, n_outer, d_outer, n_inner, d_inner, src, src_stride); break;
    }
}

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

// The tile shape for `rest` remaining pixels: a full MR tile when that wastes
// least, else MR/2 or MR/4 (a half tile plus a quarter tile beats one full tile
// that stores little more than half of its pixels).
template <int MR>
static inline idx input_grad_tile_shape(idx rest) {
    constexpr idx half = (MR + 1) / 2, quarter = (MR + 3) / 4;
    if (rest >= MR || rest > half + quarter) return MR;
    if (rest > quarter) return half;
    return quarter;
}

// One tile of input_grad_tile_shape(rest) pixels; returns how many it stored.
template <class T, int MR, int NRV, class Scratch>
static inline idx input_grad_tiles(const Scratch& s, idx n_taps, idx a_pixel_stride, idx K, idx b_row_stride,
                                   T* out, idx out_pixel_stride, idx rest) {
    constexpr int half = (MR + 1) / 2, quarter = (MR + 3) / 4;
    const idx shape = input_grad_tile_shape<MR>(rest);
    const idx np = rest < shape ? rest : shape;
    if (shape == MR)
        input_grad_tile<T, MR, NRV>(s.a_ptrs, s.b_ptrs, n_taps, a_pixel_stride, K, b_row_stride, out,
                                    out_pixel_stride, np);
    else if (shape == half)
        input_grad_tile<T, half, NRV>(s.a_ptrs, s.b_ptrs, n_taps, a_pixel_stride, K, b_row_stride, out,
                                      out_pixel_stride, np);
    else
        input_grad_tile<T, quarter, NRV>(s.a_ptrs, s.b_ptrs, n_taps, a_pixel_stride, K, b_row_stride, out,
                                         out_pixel_stride, np);
    return np;
}

// A tile whose taps of each kernel row share dy pixels: with KWT taps per row
// whose dy windows are offset by DSTEP pixels from each other (tap t reads
// pixels p + (KWT - 1 - t) * DSTEP of the window), each dy value is broadcast
// once and feeds every tap that reads it -- MR*KWT*NRV FMAs for
// MR + (KWT-1)*DSTEP broadcasts instead of one broadcast per MR*NRV FMAs.
// a_rows[s]: window start of kernel row s; b_taps[s * KWT + t]: filter of tap t.
// Per element the terms are added in order of (kernel row, output channel, tap).
template <class T, int MR, int KWT, int DSTEP, int NRV>
static inline void input_grad_tile_fused(const T* const* a_rows, const T* const* b_taps, idx n_rows,
                                         idx a_pixel_stride, idx K, idx b_row_stride,
                                         T* out, idx out_pixel_stride, idx n_pixels) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    constexpr int E = MR + (KWT - 1) * DSTEP;
    vec acc[MR][NRV];
#pragma GCC unroll 32
    for (int p = 0; p < MR; ++p)
#pragma GCC unroll 4
        for (int q = 0; q < NRV; ++q) acc[p][q] = S::zero();
    for (idx s = 0; s < n_rows; ++s) {
        const T* a = a_rows[s];
        const T* const* b = b_taps + s * KWT;
        for (idx k = 0; k < K; ++k) {
            vec bv[KWT][NRV];
#pragma GCC unroll 8
            for (int t = 0; t < KWT; ++t)
#pragma GCC unroll 4
                for (int q = 0; q < NRV; ++q) bv[t][q] = S::load(b[t] + k * b_row_stride + q * S::V);
#pragma GCC unroll 64
            for (int e = 0; e < E; ++e) {
                const vec av = S::set1(a[e * a_pixel_stride + k]);
#pragma GCC unroll 8
                for (int t = 0; t < KWT; ++t) {
                    const int p = e - (KWT - 1 - t) * DSTEP;
                    if (p >= 0 && p < MR)
#pragma GCC unroll 4
                        for (int q = 0; q < NRV; ++q) acc[p][q] = S::fma(av, bv[t][q], acc[p][q]);
                }
            }
        }
    }
    for (int p = 0; p < MR; ++p)
        if (p < n_pixels)
#pragma GCC unroll 4
            for (int q = 0; q < NRV; ++q) S::store(out + p * out_pixel_stride + q * S::V, acc[p][q]);
}

// The fused tile for this (taps per row, window step, pixels left, vectors), or nullptr.
template <class T>
using FusedTile = void (*)(const T* const*, const T* const*, idx, idx, idx, idx, T*, idx, idx);

template <class T, int NRV>
static FusedTile<T> input_grad_fused_for(idx kwt, idx dstep, idx rest, idx* shape) {
#if ISA_FUSED
    constexpr int MR = NRV == 1 ? ISA_MR_FUSED : ISA_MR_FUSED2, HALF = (MR + 1) / 2;
    const bool full = rest > HALF;
    *shape = full ? MR : HALF;
#define CVZ_FUSED(k, d) \
    if (kwt == k && dstep == d) \
        return full ? &input_grad_tile_fused<T, MR, k, d, NRV> : &input_grad_tile_fused<T, HALF, k, d, NRV>;
    CVZ_FUSED(3, 1) CVZ_FUSED(3, 2)
    if (NRV == 1) {
        CVZ_FUSED(5, 1) CVZ_FUSED(5, 2) CVZ_FUSED(7, 1) CVZ_FUSED(7, 2)
    }
#undef CVZ_FUSED
#endif
    (void)kwt; (void)dstep; (void)rest; (void)shape;
    return nullptr;
}

// Per-thread scratch of the input gradient, carved from one allocation.  When
// dy can be read in place (compute dtype, contiguous channels), tiles read it
// directly and only edge tiles (some tap reads outside [0, OW)) copy their
// pixels, zero-padded, into `stage`.  Otherwise whole dy rows are converted into
// `dy_rows` [KH][ow_span][Cout], zero outside [0, OW).  `out_row` [W][G][cin_g_pad]
// holds results that cannot be stored in place; then the tap tables.
template <class T>
struct InputGradScratch {
    T* dy_rows;
    T* stage;
    T* out_row;
    idx* slot_kh;
    idx* slot_oh;
    idx* slot_key;     // cached dy row of each buffer slot (n * OH + oh + 1, 0 = empty)
    idx* row_of_slot;  // buffer slot holding the dy row of kernel-row slot i
    idx* tap_ow0;
    idx* tap_slot;
    idx* tap_k;
    const T** a_ptrs;
    const T** b_ptrs;
};

static inline idx input_grad_mr_max() { return ISA_MR2 > ISA_MR1 ? ISA_MR2 : ISA_MR1; }

template <class T>
static inline InputGradScratch<T> input_grad_scratch(const InputGradArgs* a, void* raw) {
    InputGradScratch<T> s;
    const idx taps = a->KH * a->KW;
    s.dy_rows = (T*)raw;
    s.stage = s.dy_rows + round_up(a->dy_direct ? 0 : a->KH * a->ow_span * a->Cout, 16);
    s.out_row = s.stage + round_up(a->dy_direct ? taps * input_grad_mr_max() * a->dy_s[2] : 0, 16);
    idx* ints = (idx*)(s.out_row + round_up(a->direct ? 0 : a->W * a->G * a->cin_g_pad, 16));
    s.slot_kh = ints;
    s.slot_oh = ints + a->KH;
    s.slot_key = s.slot_oh + a->KH;
    s.row_of_slot = s.slot_key + a->KH;
    s.tap_ow0 = s.row_of_slot + a->KH;
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
    const bool dx_same = (sizeof(T) == 4) ? a->dx_type == F32 : a->dx_type == F64;
    const bool dy_same = (sizeof(T) == 4) ? a->dy_type == F32 : a->dy_type == F64;
    a->direct = dx_same && a->dx_s[3] == 1 && a->cin_g_pad == a->cin_g;
    a->dy_direct = dy_same && a->dy_s[3] == 1 && a->dy_s[2] == a->Cout;  // plain NHWC rows
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
    const idx taps = a->KH * a->KW;
    a->scratch_elems = round_up(a->dy_direct ? 0 : a->KH * a->ow_span * a->Cout, 16) +
                       round_up(a->dy_direct ? taps * mr * a->dy_s[2] : 0, 16) +
                       round_up(a->direct ? 0 : a->W * a->G * a->cin_g_pad, 16) +
                       (idx)(((4 * a->KH + 3 * taps) * sizeof(idx) + 2 * taps * sizeof(void*)) / sizeof(T)) + 16;
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

// One phase r of an input row, channel blocks [c_begin, c_end) of NRV vectors:
// tiles of MR pixels (smaller at the end), every tap of the phase.  A tile reads
// dy in place when all its windows lie inside [0, OW); an edge tile gives the
// taps that cross the border a zero-padded copy (same pixel pitch as dy).
template <class T, int MR, int NRV>
static void input_grad_row_pass(const InputGradArgs* a, const InputGradScratch<T>& s, idx n, idx g, idx c_begin,
                                idx c_end, idx r, idx n_pix, idx n_taps, T* out_base, idx out_pixel,
                                idx out_group) {
    typedef Simd<T> S;
    const T* dy = (const T*)a->dy;
    const T* packed = (const T*)a->packed;
    const idx Cout = a->Cout, cin_g_pad = a->cin_g_pad;
    const idx row_elems = a->ow_span * Cout;
    const idx mr_max = input_grad_mr_max();
    const idx a_stride = a->dy_direct ? a->dy_s[2] : Cout;
    idx j0 = 0;
    while (j0 < n_pix) {
        const idx rest = n_pix - j0;
        // The tile shape input_grad_tiles will use, and so the dy pixels it reads.
        const idx shape = input_grad_tile_shape<MR>(rest);
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
        idx done = 0;
        for (idx c0 = c_begin; c0 < c_end; c0 += NRV * S::V) {
            for (idx t = 0; t < n_taps; ++t)
                s.b_ptrs[t] = packed + (s.tap_k[t] * a->G + g) * a->cout_g * cin_g_pad + c0;
            T* out = out_base + (r + j0 * a->sw) * out_pixel + g * out_group + c0;
            // A full tile, or the smallest tile shape that covers the rest.
            done = input_grad_tiles<T, MR, NRV>(s, n_taps, a_stride, a->cout_g, cin_g_pad, out, a->sw * out_pixel,
                                                rest);
        }
        j0 += done;
    }
}

// One phase r of an input row, channel blocks [c_begin, c_end) of NRV vectors,
// with fused tiles: each tile reads, per kernel row, one dy window of
// shape + (kwt-1)*dstep pixels (in place, or staged zero-padded at the edges),
// shared by all its channel blocks.
template <class T, int NRV>
static void input_grad_row_fused(const InputGradArgs* a, const InputGradScratch<T>& s, idx n, idx g, idx c_begin,
                                 idx c_end, idx r, idx n_pix, idx n_slots, idx kwt, idx dstep, T* out_base,
                                 idx out_pixel, idx out_group) {
    typedef Simd<T> S;
    const T* dy = (const T*)a->dy;
    const T* packed = (const T*)a->packed;
    const idx Cout = a->Cout, cin_g_pad = a->cin_g_pad;
    const idx row_elems = a->ow_span * Cout;
    const idx mr_max = input_grad_mr_max();
    idx j0 = 0;
    while (j0 < n_pix) {
        idx shape = 0;
        const FusedTile<T> tile = input_grad_fused_for<T, NRV>(kwt, dstep, n_pix - j0, &shape);
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
static void input_grad_row(const InputGradArgs* a, idx row, void* raw_scratch) {
    typedef Simd<T> S;
    InputGradScratch<T> s = input_grad_scratch<T>(a, raw_scratch);
    const idx n = row / a->H, ih = row % a->H;
    const idx Cout = a->Cout, G = a->G, cin_g_pad = a->cin_g_pad;
    const idx row_elems = a->ow_span * Cout;

    // Kernel rows that reach this input row.  When dy is not read in place, each
    // needs a converted copy of its dy row: rows stay cached in the KH slots of
    // this thread's scratch (slot_key = n * OH + oh + 1; 0 = empty, as zeroed),
    // since consecutive input rows share most of their dy rows.
    idx n_slots = 0;
    for (idx kh = 0; kh < a->KH; ++kh) {
        idx t = ih + a->pt - kh * a->dh;
        if (t < 0 || t % a->sh != 0) continue;
        idx oh = t / a->sh;
        if (oh >= a->OH) continue;
        s.slot_kh[n_slots] = kh;
        s.slot_oh[n_slots++] = oh;
    }
    if (!a->dy_direct) {
        // tap_slot[] below indexes s.row_of_slot: the cache slot holding each dy row.
        for (idx i = 0; i < n_slots; ++i) {
            const idx key = n * a->OH + s.slot_oh[i] + 1;
            s.row_of_slot[i] = -1;
            for (idx k = 0; k < a->KH; ++k)
                if (s.slot_key[k] == key) s.row_of_slot[i] = k;
        }
        for (idx i = 0; i < n_slots; ++i) {
            if (s.row_of_slot[i] >= 0) continue;
            idx free_slot = 0;
            for (idx k = 0; k < a->KH; ++k) {
                bool needed = false;
                for (idx j = 0; j < n_slots; ++j) needed = needed || s.row_of_slot[j] == k;
                if (!needed) { free_slot = k; break; }
            }
            T* dst = s.dy_rows + free_slot * row_elems + (0 - a->ow_lo) * Cout;
            gather_rows<T>(dst, Cout, a->dy, a->dy_type, n * a->dy_s[0] + s.slot_oh[i] * a->dy_s[1],
                           a->OW, a->dy_s[2], Cout, a->dy_s[3]);
            s.slot_key[free_slot] = n * a->OH + s.slot_oh[i] + 1;
            s.row_of_slot[i] = free_slot;
        }
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
        // Every kernel row of this phase has the same kw taps; when they form an
        // arithmetic run of windows (step dstep), narrow tiles can fuse them.
        const idx kwt = n_slots ? n_taps / n_slots : 0;
        idx dstep = 0;
        bool fusable = kwt >= 2;
        if (fusable) {
            dstep = s.tap_ow0[0] - s.tap_ow0[1];
            for (idx t = 0; t < n_taps && fusable; ++t) {
                const idx i = t % kwt;
                fusable = s.tap_ow0[t] == s.tap_ow0[t - i] - i * dstep;
            }
            fusable = fusable && dstep >= 1;
        }
        for (idx g = 0; g < G; ++g) {
            // Wide blocks (2 vectors of input channels) share one pass over the
            // tiles, so each tile's dy pointers (and edge copies) serve them all;
            // then the narrow remainder (1 vector), fused when its taps allow.
            const idx wide_end = cin_g_pad / (2 * S::V) * (2 * S::V);
            idx fused_shape = 0;
            if (wide_end > 0) {
                if (fusable && input_grad_fused_for<T, 2>(kwt, dstep, n_pix, &fused_shape) != nullptr)
                    input_grad_row_fused<T, 2>(a, s, n, g, 0, wide_end, r, n_pix, n_slots, kwt, dstep, out_base,
                                               out_pixel, out_group);
                else
                    input_grad_row_pass<T, ISA_MR2, 2>(a, s, n, g, 0, wide_end, r, n_pix, n_taps, out_base,
                                                       out_pixel, out_group);
            }
            if (wide_end < cin_g_pad) {
                if (fusable && input_grad_fused_for<T, 1>(kwt, dstep, n_pix, &fused_shape) != nullptr)
                    input_grad_row_fused<T, 1>(a, s, n, g, wide_end, cin_g_pad, r, n_pix, n_slots, kwt, dstep,
                                               out_base, out_pixel, out_group);
                else
                    input_grad_row_pass<T, ISA_MR1, 1>(a, s, n, g, wide_end, cin_g_pad, r, n_pix, n_taps, out_base,
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

// ======================================================= depthwise filter gradient
template <class T>
static void filter_grad_prepare(FilterGradArgs* a) {
    a->V = Simd<T>::V;
    a->cm = a->C * a->M;
    a->cm_pad = round_up(a->cm, a->V);
    const bool same_type = (sizeof(T) == 4) ? (a->x_type == F32 && a->dy_type == F32)
                                            : (a->x_type == F64 && a->dy_type == F64);
    a->direct = same_type && a->M == 1 && a->cm_pad == a->cm && a->x_s[3] == 1 && a->dy_s[3] == 1;
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
static void filter_grad_taps(const FilterGradArgs* a, const T* const* x_rows, const idx* x_off,
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
    if (hi < lo) hi = lo;
    const idx step = a->sw * x_pixel;
    for (idx q = 0; q < a->cm_pad; q += S::V) {
        const T* xq[NT];
        vec acc[NT];
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) {
            xq[t] = x_rows[t] + x_off[t] + q;
            acc[t] = S::load(partial + tap_index[t] * a->cm_pad + q);
        }
        const T* dq = dy_row + q;
        idx ow = ow_begin;
        for (; ow < lo; ++ow) {  // left border: each tap checks its own range
            const vec d = S::load(dq + ow * dy_pixel);
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t)
                if (ow >= ow_first[t] && ow < ow_last[t]) acc[t] = S::fma(S::load(xq[t] + ow * step), d, acc[t]);
        }
        for (; ow < hi; ++ow) {  // interior: every tap reads a real pixel
            const vec d = S::load(dq + ow * dy_pixel);
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) acc[t] = S::fma(S::load(xq[t] + ow * step), d, acc[t]);
        }
        for (; ow < ow_end; ++ow) {  // right border
            const vec d = S::load(dq + ow * dy_pixel);
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t)
                if (ow >= ow_first[t] && ow < ow_last[t]) acc[t] = S::fma(S::load(xq[t] + ow * step), d, acc[t]);
        }
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) S::store(partial + tap_index[t] * a->cm_pad + q, acc[t]);
    }
}

template <class T>
static void filter_grad_taps_n(idx nt, const FilterGradArgs* a, const T* const* x_rows, const idx* x_off,
                               const T* dy_row, idx x_pixel, idx dy_pixel,
                               const idx* ow_first, const idx* ow_last, T* partial, const idx* tap_index,
                               idx ow_begin, idx ow_end) {
#define CVZ_TAPS_CASE(k) \
    case k: filter_grad_taps<T, k>(a, x_rows, x_off, dy_row, x_pixel, dy_pixel, ow_first, ow_last, partial, \
                                   tap_index, ow_begin, ow_end); break;
    switch (nt) {
        CVZ_TAPS_CASE(1) CVZ_TAPS_CASE(2) CVZ_TAPS_CASE(3) CVZ_TAPS_CASE(4) CVZ_TAPS_CASE(5)
        CVZ_TAPS_CASE(6) CVZ_TAPS_CASE(7) CVZ_TAPS_CASE(8) CVZ_TAPS_CASE(9)
#if ISA_TAPS >= 12
        CVZ_TAPS_CASE(10) CVZ_TAPS_CASE(11) CVZ_TAPS_CASE(12)
#endif
        default: break;
    }
#undef CVZ_TAPS_CASE
}

// One row (n, oh), all columns, for a KH x KW kernel with stride SW and
// dilation DW known at compile time.  The KH*KW accumulators of a channel
// vector stay in registers along the row; in the interior (every tap reads a
// real pixel) TW columns go at a time: their dy vectors sit in registers and
// each x vector is loaded once and used by every (column, tap) pair that reads
// it.  Border columns go one at a time, each tap checking its range.  Per
// element the terms are added in order of ow, as everywhere else.  Kernel rows
// that read padding (x_rows[kh] == nullptr) are skipped.
template <class T, int KH, int KW, int SW, int DW, int TW>
static void filter_grad_row_blocked(const FilterGradArgs* a, const T* const* x_rows, const T* dy_row,
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
    // With several channel vectors, one tile at a time passes every vector: the
    // tile's pixels are then read as whole contiguous runs (prefetch friendly).
    const idx chunk = cm_pad <= S::V ? OW : TW;
    for (idx c0 = 0; c0 < OW; c0 += chunk) {
        const idx c1 = c0 + chunk < OW ? c0 + chunk : OW;
        for (idx q = 0; q < cm_pad; q += S::V) {
            vec acc[KH][KW];
#pragma GCC unroll 8
            for (int kh = 0; kh < KH; ++kh)
#pragma GCC unroll 8
                for (int kw = 0; kw < KW; ++kw) acc[kh][kw] = S::load(partial + (kh * KW + kw) * cm_pad + q);
            idx ow = c0;
            while (ow < c1) {
                if (ow >= lo && ow + TW <= hi && ow + TW <= c1) {
                    vec d[TW];
#pragma GCC unroll 16
                    for (int t = 0; t < TW; ++t) d[t] = S::load(dy_row + (ow + t) * dy_pixel + q);
#pragma GCC unroll 8
                    for (int kh = 0; kh < KH; ++kh) {
                        if (x_rows[kh] == nullptr) continue;
                        const T* xb = x_rows[kh] + (ow * SW - a->pl) * x_pixel + q;
#pragma GCC unroll 64
                        for (int j = 0; j < SPAN; ++j) {
                            bool used = false;
#pragma GCC unroll 8
                            for (int kw = 0; kw < KW; ++kw) {
                                const int u = j - kw * DW;
                                used = used || (u >= 0 && u % SW == 0 && u / SW < TW);
                            }
                            if (!used) continue;
                            vec xv = S::load(xb + j * x_pixel);
                            S::keep(xv);  // one load, reused by every tap below
#pragma GCC unroll 8
                            for (int kw = 0; kw < KW; ++kw) {
                                const int u = j - kw * DW;
                                if (u >= 0 && u % SW == 0 && u / SW < TW)
                                    acc[kh][kw] = S::fma(xv, d[u / SW], acc[kh][kw]);
                            }
                        }
                    }
                    ow += TW;
                } else {
                    const vec d = S::load(dy_row + ow * dy_pixel + q);
#pragma GCC unroll 8
                    for (int kh = 0; kh < KH; ++kh) {
                        if (x_rows[kh] == nullptr) continue;
                        const T* xb = x_rows[kh] + (ow * SW - a->pl) * x_pixel + q;
#pragma GCC unroll 8
                        for (int kw = 0; kw < KW; ++kw)
                            if (ow >= ow_first[kw] && ow < ow_last[kw])
                                acc[kh][kw] = S::fma(S::load(xb + kw * DW * x_pixel), d, acc[kh][kw]);
                    }
                    ++ow;
                }
            }
#pragma GCC unroll 8
            for (int kh = 0; kh < KH; ++kh)
#pragma GCC unroll 8
                for (int kw = 0; kw < KW; ++kw) S::store(partial + (kh * KW + kw) * cm_pad + q, acc[kh][kw]);
        }
    }
}

// The register-blocked row kernel for this shape, or nullptr.
template <class T>
using BlockedRowKernel = void (*)(const FilterGradArgs*, const T* const*, const T*, idx, idx, const idx*,
                                  const idx*, T*);

template <class T>
static BlockedRowKernel<T> filter_grad_blocked_for(const FilterGradArgs* a) {
#if ISA_BLOCKED_TAPS > 0
    const idx k = a->KH * 100 + a->KW, sd = a->sw * 10 + a->dw;
    if (k == 303) {
        if (sd == 11) return &filter_grad_row_blocked<T, 3, 3, 1, 1, ISA_TW3>;
        if (sd == 21) return &filter_grad_row_blocked<T, 3, 3, 2, 1, ISA_TW3>;
        if (sd == 12) return &filter_grad_row_blocked<T, 3, 3, 1, 2, ISA_TW3>;
        if (sd == 22) return &filter_grad_row_blocked<T, 3, 3, 2, 2, ISA_TW3>;
    }
#if ISA_BLOCKED_TAPS >= 25
    if (k == 505) {
        if (sd == 11) return &filter_grad_row_blocked<T, 5, 5, 1, 1, ISA_TW5>;
        if (sd == 21) return &filter_grad_row_blocked<T, 5, 5, 2, 1, ISA_TW5>;
    }
#endif
#endif
    (void)a;
    return nullptr;
}

// Columns [ow_begin, ow_end) of one row, every tap that reads a real row, in
// (kh, kw) order and groups of at most ISA_TAPS, each tap checking its range.
template <class T>
static void filter_grad_generic_range(const FilterGradArgs* a, const T* const* x_row_of_kh, const T* dy_row,
                                      idx x_pixel, idx dy_pixel, const idx* ow_first_kw, const idx* ow_last_kw,
                                      T* partial, idx ow_begin, idx ow_end) {
    if (ow_end <= ow_begin) return;
    const T* x_rows[ISA_TAPS];
    idx offs[ISA_TAPS], firsts[ISA_TAPS], lasts[ISA_TAPS], index[ISA_TAPS];
    idx nt = 0;
    for (idx t = 0; t < a->KH * a->KW; ++t) {
        const idx kh = t / a->KW, kw = t % a->KW;
        if (x_row_of_kh[kh] == nullptr) continue;
        x_rows[nt] = x_row_of_kh[kh];
        offs[nt] = (kw * a->dw - a->pl) * x_pixel;
        firsts[nt] = ow_first_kw[kw];
        lasts[nt] = ow_last_kw[kw];
        index[nt] = t;
        if (++nt == ISA_TAPS) {
            filter_grad_taps_n<T>(nt, a, x_rows, offs, dy_row, x_pixel, dy_pixel, firsts, lasts, partial, index,
                                  ow_begin, ow_end);
            nt = 0;
        }
    }
    if (nt)
        filter_grad_taps_n<T>(nt, a, x_rows, offs, dy_row, x_pixel, dy_pixel, firsts, lasts, partial, index,
                              ow_begin, ow_end);
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
    // Converted x rows are cached in KH slots, keyed by n * H + ih: consecutive
    // output rows share most of their input rows (all but one for stride 1).
    idx* slot_key = (idx*)(x_row_of_kh + KH);
    for (idx slot = 0; slot < KH; ++slot) slot_key[slot] = -1;
    const BlockedRowKernel<T> blocked = filter_grad_blocked_for<T>(a);
    for (idx row = row_begin; row < row_end; ++row) {
        const idx n = row / a->OH, oh = row % a->OH;
        bool any = false;
        for (idx kh = 0; kh < KH; ++kh) {
            const idx ih = oh * a->sh - a->pt + kh * a->dh;
            x_row_of_kh[kh] = nullptr;
            if (ih < 0 || ih >= a->H) continue;  // this kernel row reads padding
            any = true;
            if (a->direct) x_row_of_kh[kh] = (const T*)a->x + n * a->x_s[0] + ih * a->x_s[1];
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
                gather_rows<T>(dst, cm_pad, a->x, a->x_type, n * a->x_s[0] + ih * a->x_s[1], a->W, a->x_s[2],
                               a->C, a->x_s[3], M);
                slot_key[free_slot] = n * a->H + ih;
                x_row_of_kh[kh] = dst;
            }
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
        if (blocked != nullptr)
            blocked(a, x_row_of_kh, dy_row, x_pixel, dy_pixel, ow_first_kw, ow_last_kw, partial);
        else
            filter_grad_generic_range<T>(a, x_row_of_kh, dy_row, x_pixel, dy_pixel, ow_first_kw, ow_last_kw,
                                         partial, 0, a->OW);
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
