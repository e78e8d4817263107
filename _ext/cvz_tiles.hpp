// Register tiles shared by the kernels: an MR x (NRV vectors) block of
// outputs summed over taps and a reduction dimension, as in a GEMM micro-
// kernel.  Written against Simd<T> (cvz_simd_generic.hpp); included by
// cvz_per_isa.hpp once per instruction set (no include guard on purpose).

// A vector at p, or where lanes > 0 its first `lanes` lanes only, read or written
// through a mask (a channel remainder in place: nothing past it touched); the
// lane count known at run time (load_lanes / store_lanes below: at compile time).
template <class T>
static inline typename Simd<T>::vec load_part(const T* p, idx lanes) {
    return lanes ? Simd<T>::load_first(p, lanes) : Simd<T>::load(p);
}

template <class T>
static inline void store_part(T* p, typename Simd<T>::vec v, idx lanes) {
    if (lanes)
        Simd<T>::store_first(p, v, lanes);
    else
        Simd<T>::store(p, v);
}

// One tile: MR output pixels x NRV vectors of channels, accumulated in
// registers over n_taps taps and K reduction channels, then stored once:
//   out[p * out_pixel_stride + c] = sum over t < n_taps, k < K of
//       a_ptrs[t][p * a_pixel_stride + k] * b_ptrs[t][k * b_row_stride + c]
// (c < NRV * V), added in the order of t, then k.  The input gradient's tile
// runs over the taps of one stride phase and the group's output channels; the
// forward's over the kernel's taps and the group's input channels.  With
// `resume`, the sums start from out's first n_pixels pixels instead of zero:
// a sum split into consecutive parts, each part resuming where the last one
// stored, adds the same terms in the same order (the same bits).  With `tail`
// > 0 the last vector is a channel remainder of that many channels: out is
// read and written there through masks (load_part / store_part), nothing past it touched.
template <class T, int MR, int NRV>
static inline void gemm_tile(const T* const* a_ptrs, const T* const* b_ptrs, idx n_taps, idx a_pixel_stride,
                             idx K, idx b_row_stride, T* out, idx out_pixel_stride, idx n_pixels,
                             bool resume = false, idx tail = 0) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    // The lanes of vector q: all, or the remainder's for the last one.
    const auto lanes = [tail](int q) { return q == NRV - 1 ? tail : 0; };
    vec acc[MR][NRV];
    CVZ_UNROLL(32)
    for (int p = 0; p < MR; ++p)
        CVZ_UNROLL(4)
        for (int q = 0; q < NRV; ++q)
            acc[p][q] = resume && p < n_pixels ? load_part(out + p * out_pixel_stride + q * S::V, lanes(q))
                                               : S::zero();
    for (idx t = 0; t < n_taps; ++t) {
        const T* a = a_ptrs[t];
        const T* b = b_ptrs[t];
        for (idx k = 0; k < K; ++k) {
            vec bv[NRV];
            CVZ_UNROLL(4)
            for (int q = 0; q < NRV; ++q) bv[q] = S::load(b + k * b_row_stride + q * S::V);
            CVZ_UNROLL(32)
            for (int p = 0; p < MR; ++p) {
                vec av = S::set1(a[p * a_pixel_stride + k]);
                CVZ_UNROLL(4)
                for (int q = 0; q < NRV; ++q) acc[p][q] = S::fma(av, bv[q], acc[p][q]);
            }
        }
    }
    if (n_pixels == MR) {
        CVZ_UNROLL(32)
        for (int p = 0; p < MR; ++p)
            CVZ_UNROLL(4)
            for (int q = 0; q < NRV; ++q) store_part(out + p * out_pixel_stride + q * S::V, acc[p][q], lanes(q));
    } else {
        for (int p = 0; p < n_pixels; ++p)
            CVZ_UNROLL(4)
            for (int q = 0; q < NRV; ++q) store_part(out + p * out_pixel_stride + q * S::V, acc[p][q], lanes(q));
    }
}

// The tile shape for `rest` remaining pixels: a full MR tile when that wastes
// least, else MR/2 or MR/4 (a half tile plus a quarter tile beats one full tile
// that stores little more than half of its pixels).
template <int MR>
static inline idx tile_shape(idx rest) {
    constexpr idx half = (MR + 1) / 2, quarter = (MR + 3) / 4;
    if (rest >= MR || rest > half + quarter) return MR;
    if (rest > quarter) return half;
    return quarter;
}

// One tile of tile_shape(rest) pixels; returns how many it stored.
template <class T, int MR, int NRV>
static inline idx gemm_tiles(const T* const* a_ptrs, const T* const* b_ptrs, idx n_taps, idx a_pixel_stride,
                             idx K, idx b_row_stride, T* out, idx out_pixel_stride, idx rest) {
    constexpr int half = (MR + 1) / 2, quarter = (MR + 3) / 4;
    const idx shape = tile_shape<MR>(rest);
    const idx np = rest < shape ? rest : shape;
    if (shape == MR)
        gemm_tile<T, MR, NRV>(a_ptrs, b_ptrs, n_taps, a_pixel_stride, K, b_row_stride, out, out_pixel_stride, np);
    else if (shape == half)
        gemm_tile<T, half, NRV>(a_ptrs, b_ptrs, n_taps, a_pixel_stride, K, b_row_stride, out, out_pixel_stride, np);
    else
        gemm_tile<T, quarter, NRV>(a_ptrs, b_ptrs, n_taps, a_pixel_stride, K, b_row_stride, out,
                                   out_pixel_stride, np);
    return np;
}

// Cover [begin, end) exactly with tiles: as many of MR as fit, then at most one of
// MR/2 and one of MR/4, then single pixels -- no tile reaches past `end`.
// tile(std::integral_constant<int, SHAPE>{}, first) handles pixels [first, first + SHAPE).
template <int MR, class Tile>
static inline void exact_tiles(idx begin, idx end, Tile&& tile) {
    constexpr int half = (MR + 1) / 2, quarter = (MR + 3) / 4;
    idx p = begin;
    for (; p + MR <= end; p += MR) tile(std::integral_constant<int, MR>{}, p);
    if (p + half <= end) {
        tile(std::integral_constant<int, half>{}, p);
        p += half;
    }
    if (p + quarter <= end) {
        tile(std::integral_constant<int, quarter>{}, p);
        p += quarter;
    }
    for (; p < end; ++p) tile(std::integral_constant<int, 1>{}, p);
}

// The tile of `size` pixels, SIZE one of [MIN, MAX] (instantiated for each).
template <int MIN, int SIZE, class Tile>
static inline void tile_of_size(idx size, idx first, Tile&& tile) {
    if constexpr (SIZE > MIN) {
        if (size < SIZE) return tile_of_size<MIN, SIZE - 1>(size, first, tile);
    }
    tile(std::integral_constant<int, SIZE>{}, first);
}

// Cover [begin, end) exactly with as few tiles as tiles of MR pixels need, of
// sizes as equal as can be (in [MR/2, MR]); a range shorter than MR/2 in one
// tile of its length where it has MR/4 pixels at least (shorter still: exact_tiles).
// A tile's FMAs chain through its accumulators: a 1-pixel tile of 2 vectors
// waits on the FMA latency at every step (AVX2, a 7-pixel row in tiles of 6
// and 1: the 1 took 39% of the time), where 4 + 3 keeps the units busy.  The
// 7 columns of a network's last layers went as 4 + 1 + 1 + 1 in 16-pixel tiles;
// in one tile of 7, paired (benchmarks/ab.py, 2 threads): depthwise forward
// 8x7x7x1152 5x5 0.37 -> 0.23 ms, 8x7x7x960 3x3 0.137 -> 0.096, input gradient
// 8x7x7x960 5x5 0.266 -> 0.152.
template <int MR, class Tile>
static inline void balanced_tiles(idx begin, idx end, Tile&& tile) {
    constexpr int half = (MR + 1) / 2, quarter = (MR + 3) / 4;
    const idx n = end - begin;
    if constexpr (quarter < half) {
        if (n >= quarter && n < half) return tile_of_size<quarter, half - 1>(n, begin, tile);
    }
    if (n < half) return exact_tiles<MR>(begin, end, tile);
    const idx count = (n + MR - 1) / MR;
    const EvenSplit split(n, count);
    for (idx i = 0; i < count; ++i) tile_of_size<half, MR>(split.size(i), begin + split.first(i), tile);
}

// Cover [begin, end) with tiles of MR pixels only, the last one moved back to
// end - MR where MR does not divide the range: it recomputes a few pixels of the
// tile before it (the same sums, so the same bits) rather than running a half
// and a quarter tile, which cost more per pixel (dwi_k5, 28 columns: tiles at 0
// and 12 beat tiles of 16, 8 and 4 at 0, 16 and 24).  Shorter ranges go to
// exact_tiles.
template <int MR, class Tile>
static inline void overlapping_tiles(idx begin, idx end, Tile&& tile) {
    if (end - begin < MR) return exact_tiles<MR>(begin, end, tile);
    idx p = begin;
    for (; p + MR <= end; p += MR) tile(std::integral_constant<int, MR>{}, p);
    if (p < end) tile(std::integral_constant<int, MR>{}, end - MR);
}

// The tiles of a depthwise stencil row: with 16-pixel tiles (AVX-512) balanced
// ones, 28 columns as 14 + 14 rather than 16 at 0 and 12 (paired, 2 threads:
// dwc_k5 0.651 -> 0.605 ms, dwi_k5 0.724 -> 0.632); with 8-pixel tiles (AVX2)
// overlapping ones, where 7 + 7 + 7 + 7 lost to 8 at 0, 8, 16 and 20 (dwi_k5
// 0.94 -> 1.01 ms, dwc_k5 0.86 -> 0.93).
template <int MR, class Tile>
static inline void stencil_row_tiles(idx begin, idx end, Tile&& tile) {
    if constexpr (MR >= 16)
        balanced_tiles<MR>(begin, end, tile);
    else
        overlapping_tiles<MR>(begin, end, tile);
}

// A channel remainder: where a row's channels end in a partial vector, the last
// vector holds `tail` channels only and is read and written through masks, so rows
// are used in place whatever the channel count (the lanes past it meet zero
// weights, or none, and are never stored).  load_lanes / store_lanes: the whole
// vector, or with TAIL its first `tail` lanes.
template <class T, bool TAIL>
static inline typename Simd<T>::vec load_lanes(const T* p, idx tail) {
    if constexpr (TAIL) return Simd<T>::load_first(p, tail);
    else return Simd<T>::load(p);
}

template <class T, bool TAIL>
static inline void store_lanes(T* p, typename Simd<T>::vec v, idx tail) {
    if constexpr (TAIL) Simd<T>::store_first(p, v, tail);
    else Simd<T>::store(p, v);
}

// f(c0, tail) for each channel vector c0 of a row of `padded` channels (a multiple
// of the vector), `tail` a std::bool_constant: true for the last vector where
// `tail_lanes` > 0 (it holds that many channels only).
template <class T, class F>
static inline void channel_vectors(idx padded, idx tail_lanes, F&& f) {
    const idx full = tail_lanes ? padded - Simd<T>::V : padded;
    for (idx c0 = 0; c0 < full; c0 += Simd<T>::V) f(c0, std::false_type{});
    if (tail_lanes) f(full, std::true_type{});
}

// The same in groups of up to NMAX vectors (exact_tiles): f(nv, c0, tail), nv an
// std::integral_constant (the group's vectors), tail true for the group that ends
// in the partial vector.
template <class T, int NMAX, class F>
static inline void channel_vector_groups(idx padded, idx tail_lanes, F&& f) {
    const idx vectors = padded / Simd<T>::V;
    exact_tiles<NMAX>(0, vectors, [&](auto nv, idx v0) {
        if (tail_lanes && v0 + decltype(nv)::value == vectors)
            f(nv, v0 * Simd<T>::V, std::true_type{});
        else
            f(nv, v0 * Simd<T>::V, std::false_type{});
    });
}

// A stencil tile for per-channel (depthwise) sums, with KW taps per row and
// stride SW known at compile time, over NV channel vectors:
//   out[p * out_pixel + v * V] = sum over i < n_rows, k < KW of
//       rows[i][x_off + (p * SW + k) * pixel + v * V] * w[i][k * w_step + v * V],
//   w[i] = w0 + kh_of[i] * w_row_step,
// added in the order of rows, then k (the order of depthwise_forward_tile);
// stored with S::stream (bypassing the caches) when `stream`.
// Each input vector is loaded once per row and serves every tap that reads it
// (up to KW FMAs per load, against one in a tap-by-tap tile), so loads -- slow
// when a caller's array is not 64-byte aligned -- no longer bound the tile.
// With CLIP, only the input vectors j in [j_lo, j_hi) exist (the others are
// padding): their taps are skipped, not multiplied by zero, so a NaN or Inf in
// the filter reaches only the sums that contain it.  With TAIL, the last of the
// NV vectors is a channel remainder of `tail` channels (load_lanes).
template <class T, int MR, int KW, int SW, int NV, bool CLIP = false, bool TAIL = false>
static inline void stencil_tile(const T* const* rows, idx x_off, idx pixel, const T* w0, const idx* kh_of,
                                idx w_row_step, idx w_step, idx n_rows, T* out, idx out_pixel, bool stream,
                                idx j_lo = 0, idx j_hi = 0, idx tail = 0) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    vec acc[MR][NV];
    CVZ_UNROLL(32)
    for (int p = 0; p < MR; ++p)
        CVZ_UNROLL(4)
        for (int v = 0; v < NV; ++v) acc[p][v] = S::zero();
    for (idx i = 0; i < n_rows; ++i) {
        const T* x = rows[i] + x_off;
        const T* w = w0 + kh_of[i] * w_row_step;
        vec wv[KW][NV];
        CVZ_UNROLL(16)
        for (int k = 0; k < KW; ++k)
            CVZ_UNROLL(4)
            for (int v = 0; v < NV; ++v) wv[k][v] = S::load(w + k * w_step + v * S::V);
        const T* xj = x;
        CVZ_UNROLL(64)
        for (int j = 0; j < (MR - 1) * SW + KW; ++j) {
            if (CLIP && (j < j_lo || j >= j_hi)) {  // a padding column: never read
                xj += pixel;
                CVZ_OPAQUE(xj);
                continue;
            }
            vec xv[NV];
            CVZ_UNROLL(4)
            for (int v = 0; v < NV - 1; ++v) xv[v] = S::load(xj + v * S::V);
            xv[NV - 1] = load_lanes<T, TAIL>(xj + (NV - 1) * S::V, tail);
            xj += pixel;
            CVZ_OPAQUE(xj);
            CVZ_UNROLL(4)
            for (int v = 0; v < NV; ++v)
                CVZ_UNROLL(16)
                for (int k = 0; k < KW; ++k) {
                    const int q = j - k;  // = p * SW for the output pixel p that reads x[j] through tap k
                    if (q >= 0 && q % SW == 0 && q / SW < MR)
                        acc[q / SW][v] = S::fma(xv[v], wv[k][v], acc[q / SW][v]);
                }
        }
    }
    if constexpr (TAIL) {
        CVZ_UNROLL(32)
        for (int p = 0; p < MR; ++p) {
            CVZ_UNROLL(4)
            for (int v = 0; v < NV - 1; ++v) S::store(out + p * out_pixel + v * S::V, acc[p][v]);
            store_lanes<T, TAIL>(out + p * out_pixel + (NV - 1) * S::V, acc[p][NV - 1], tail);
        }
    } else if (stream) {  // out and out_pixel aligned to the vector (the caller checks)
        CVZ_UNROLL(32)
        for (int p = 0; p < MR; ++p)
            CVZ_UNROLL(4)
            for (int v = 0; v < NV; ++v) S::stream(out + p * out_pixel + v * S::V, acc[p][v]);
    } else {
        CVZ_UNROLL(32)
        for (int p = 0; p < MR; ++p)
            CVZ_UNROLL(4)
            for (int v = 0; v < NV; ++v) S::store(out + p * out_pixel + v * S::V, acc[p][v]);
    }
}

// stencil_tile over input columns col0, col0 + 1, ... of rows that hold `cols`
// columns (x_off = col0 * pixel + c0): clipped where the tile reaches into the
// padding on either side, so one tiling covers a whole output row, border
// pixels included (done pixel by pixel, the border took a fifth of a 5x5
// depthwise forward).  With col0 < 0 the tile's input pointer starts before the
// row; the clipped columns are never read.  TAIL, tail: as stencil_tile's.
template <class T, int MR, int KW, int SW, int NV = 1, bool TAIL = false>
static inline void stencil_tile_clipped(const T* const* rows, idx col0, idx cols, idx c0, idx pixel, const T* w0,
                                        const idx* kh_of, idx w_row_step, idx w_step, idx n_rows, T* out,
                                        idx out_pixel, bool stream, idx tail = 0) {
    constexpr idx span = (MR - 1) * SW + KW;
    if (col0 >= 0 && col0 + span <= cols)
        stencil_tile<T, MR, KW, SW, NV, false, TAIL>(rows, col0 * pixel + c0, pixel, w0, kh_of, w_row_step, w_step,
                                                     n_rows, out, out_pixel, stream, 0, 0, tail);
    else
        stencil_tile<T, MR, KW, SW, NV, true, TAIL>(rows, col0 * pixel + c0, pixel, w0, kh_of, w_row_step, w_step,
                                                    n_rows, out, out_pixel, stream, -col0, cols - col0, tail);
}

// Calls f(integral_constant<KW>, integral_constant<SW>) when stencil_tile has an
// instantiation for this window (no dilation; 3 or 5 taps, stride 1 or 2) and
// returns whether it did.
template <class F>
static inline bool with_stencil(idx KW, idx sw, idx dw, F&& f) {
    if (dw != 1) return false;
    if (KW == 3 && sw == 1) return f(std::integral_constant<int, 3>{}, std::integral_constant<int, 1>{}), true;
    if (KW == 3 && sw == 2) return f(std::integral_constant<int, 3>{}, std::integral_constant<int, 2>{}), true;
    if (KW == 5 && sw == 1) return f(std::integral_constant<int, 5>{}, std::integral_constant<int, 1>{}), true;
    if (KW == 5 && sw == 2) return f(std::integral_constant<int, 5>{}, std::integral_constant<int, 2>{}), true;
    return false;
}
