// The conv2d filter gradient on the GPU (launched by convviz/ops/filter_grad.py).
// Parameters p: ConvParams (cuda_common.cuh), with the input as the first operand, the filter
// gradient (HWIO) as the result and out_backprop as the second.

// One thread per filter-gradient element dw[kh, kw, ci, co] (co fastest), summing
// over (n, oh, ow) in that order: the same order for any launch, so the result
// is bitwise reproducible.
// Index type I: i64, or int (conv2d_filter_grad_narrow) when every offset fits.
template <int TYPE, typename I>
__device__ void conv2d_filter_grad_body(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* dy,
                                        typename IO<TYPE>::storage* dw, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const ConvParams<I> prm(p);  // first operand x, result dw, second dy
    const I N = prm.N, H = prm.H, W = prm.W, OH = prm.OH, OW = prm.OW, Cout = prm.Cout, KW = prm.KW;
    const I cin_g = prm.cin_g, cout_g = prm.cout_g;
    const I sh = prm.sh, sw = prm.sw, dh = prm.dh, dwd = prm.dw, pt = prm.pad_top, pl = prm.pad_left;
    I xs[4], ws[4], ys[4];
    for (int k = 0; k < 4; ++k)
        xs[k] = prm.first_strides[k], ws[k] = prm.result_strides[k], ys[k] = prm.second_strides[k];
    for (I idx = (I)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (I)gridDim.x * blockDim.x) {
        const I co = idx % Cout;
        I rest = idx / Cout;
        const I ci = rest % cin_g;
        rest /= cin_g;
        const I kw = rest % KW;
        const I kh = rest / KW;
        const I cx = co / cout_g * cin_g + ci;  // the input channel this weight reads
        typename io::compute acc = 0;
        for (I n = 0; n < N; ++n)
            for (I oh = 0; oh < OH; ++oh) {
                const I ih = oh * sh - pt + kh * dh;
                if (ih < 0 || ih >= H) continue;
                for (I ow = 0; ow < OW; ++ow) {
                    const I iw = ow * sw - pl + kw * dwd;
                    if (iw < 0 || iw >= W) continue;
                    acc = cvz_fma(io::load(x, n * xs[0] + ih * xs[1] + iw * xs[2] + cx * xs[3]),
                                  io::load(dy, n * ys[0] + oh * ys[1] + ow * ys[2] + co * ys[3]), acc);
                }
            }
        io::store(dw, kh * ws[0] + kw * ws[1] + ci * ws[2] + co * ws[3], acc);
    }
}

template <int TYPE>
__global__ void conv2d_filter_grad(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* dy,
                                   typename IO<TYPE>::storage* dw, const i64* p, i64 total) {
    conv2d_filter_grad_body<TYPE, i64>(x, dy, dw, p, total);
}

template <int TYPE>
__global__ void conv2d_filter_grad_narrow(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* dy,
                                          typename IO<TYPE>::storage* dw, const i64* p, i64 total) {
    conv2d_filter_grad_body<TYPE, int>(x, dy, dw, p, total);
}

// The tiled filter gradient, pass 1 (the engine is in cuda_tiles.cuh): rows m are the
// filter's (kh, kw, ci), columns the group's output channels, terms k the output pixels
// (n, oh, ow) of one chunk of TiledParams::per_chunk pixels, of its `chunks` chunks.  With one
// chunk the sums go to dw[m][g * cout_g + co]; with more, to partial[chunk][m][g * cout_g + co],
// and merge_chunk_partials adds the chunks in order (pass 2), so the grouping depends on the
// shape alone, never on the device.
// Grid: x = row tiles, y = column tiles, z = chunk * G + group.
// A thread fetches one row of a and one column of b at 4 pixels (terms).
template <int TYPE>
struct FilterGradTiles {
    typedef typename IO<TYPE>::compute compute;
    CvzFetched<TYPE, false, false> next;
    const typename IO<TYPE>::storage *x, *dy;
    typename IO<TYPE>::storage* dw;
    compute* partial;
    int H, W, OH, OW, Cout, cout_g, sh, sw, xs[4], ys[4];
    int K, M, m0, n0, G, g, first_pixel, chunk, chunks;
    i64 total;
    int row_x, row_h, row_w;  // this thread's row of A: input channel offset, tap offsets
    // This thread's 4 pixels of the current step (n, oh, ow), stepped 16 pixels at a time:
    // no division per pixel.
    int step_n[4], step_oh[4], step_ow[4];

    __device__ FilterGradTiles(const typename IO<TYPE>::storage* x_, const typename IO<TYPE>::storage* dy_,
                               typename IO<TYPE>::storage* dw_, compute* partial_, const i64* p)
        : x(x_), dy(dy_), dw(dw_), partial(partial_) {
        // First operand x, result dw (written dense: cvz_store_or_partial), second dy.
        const TiledParams prm(p);
        const int KW = prm.KW, cin_g = prm.cin_g;
        H = prm.H, W = prm.W, OH = prm.OH, OW = prm.OW, Cout = prm.Cout;
        cout_g = prm.cout_g, sh = prm.sh, sw = prm.sw;
        for (int i = 0; i < 4; ++i) xs[i] = prm.first_strides[i], ys[i] = prm.second_strides[i];
        const int chunk_pixels = prm.per_chunk, pixels = prm.N * OH * OW;
        G = prm.G;
        g = blockIdx.z % G;
        chunk = blockIdx.z / G;
        chunks = prm.chunks;
        total = prm.total;
        first_pixel = chunk * chunk_pixels;
        K = pixels - first_pixel < chunk_pixels ? pixels - first_pixel : chunk_pixels;
        M = prm.KH * KW * cin_g;
        m0 = blockIdx.x * CVZ_BM;
        n0 = blockIdx.y * CVZ_BN;
        int first_kk, row;
        cvz_tile_slot<false>(0, first_kk, row);  // this thread's row (the same for its 4 pixels)
        const int m = m0 + row, ci = m % cin_g, tap = m / cin_g;
        row_x = (g * cin_g + ci) * xs[3];
        row_h = m < M ? (tap / KW) * prm.dh - prm.pad_top : CVZ_NO_ROW;
        row_w = (tap % KW) * prm.dw - prm.pad_left;
        for (int i = 0; i < 4; ++i) {
            int kk, col;
            cvz_tile_slot<false>(i, kk, col);
            const int pixel = first_pixel + kk;
            step_ow[i] = pixel % OW, step_oh[i] = (pixel / OW) % OH, step_n[i] = pixel / (OW * OH);
        }
    }

    __device__ void fetch(int k0) {
        for (int i = 0; i < 4; ++i) {
            int kk, n_col;
            cvz_tile_slot<false>(i, kk, n_col);
            const int n = step_n[i], oh = step_oh[i], ow = step_ow[i];
            for (step_ow[i] += CVZ_BK; step_ow[i] >= OW; step_ow[i] -= OW)  // on to the next step's pixel
                if (++step_oh[i] == OH) step_oh[i] = 0, ++step_n[i];
            const bool pixel_real = k0 + kk < K;
            const int ih = oh * sh + row_h, iw = ow * sw + row_w;
            const bool real = pixel_real && ih >= 0 && ih < H && iw >= 0 && iw < W;
            next.a[i] = real ? IO<TYPE>::load(x, n * xs[0] + ih * xs[1] + iw * xs[2] + row_x) : (compute)0;
            next.a_real[i] = real;
            next.b[i] = pixel_real && n0 + n_col < cout_g
                            ? IO<TYPE>::load(dy, n * ys[0] + oh * ys[1] + ow * ys[2] + (g * cout_g + n0 + n_col) * ys[3])
                            : (compute)0;
        }
    }

    __device__ void store(compute (*acc)[4], const int* rows, const int* cols) {
        for (int i = 0; i < 4; ++i) {
            const int m = m0 + rows[i];
            if (m >= M) continue;
            for (int j = 0; j < 4; ++j) {
                const int n = n0 + cols[j];
                if (n < cout_g)
                    cvz_store_or_partial<TYPE>(dw, partial, chunk, chunks, total, m * Cout + g * cout_g + n,
                                               acc[i][j]);
            }
        }
    }
};

template <int TYPE>
__global__ void conv2d_filter_grad_tiled(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* dy,
                                         typename IO<TYPE>::storage* dw, typename IO<TYPE>::compute* partial,
                                         const i64* p) {
    FilterGradTiles<TYPE> op(x, dy, dw, partial, p);
    cvz_tiled_product(op);
}
