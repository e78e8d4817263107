// The conv2d forward pass on the GPU (launched by convviz/ops/forward.py).
// Parameters p: ConvParams (cuda_common.cuh), with the input as the first operand, the output as
// the result and the filter as the second.

// One thread per output element y[n, oh, ow, co] (co fastest: neighbouring
// threads write neighbouring channels in NHWC).  Terms are added in order of
// (kh, kw, input channel), like the CPU kernel.
// Index type I: i64, or int (conv2d_forward_narrow) when every offset fits: 64-bit division is a
// long software routine on the GPU, and each element divides several times.
template <int TYPE, typename I>
__device__ void conv2d_forward_body(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* w,
                                    typename IO<TYPE>::storage* y, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const ConvParams<I> prm(p);  // first operand x, result y, second w
    const I H = prm.H, W = prm.W, OH = prm.OH, OW = prm.OW, Cout = prm.Cout, KH = prm.KH, KW = prm.KW;
    const I cin_g = prm.cin_g, cout_g = prm.cout_g;
    const I sh = prm.sh, sw = prm.sw, dh = prm.dh, dw = prm.dw, pt = prm.pad_top, pl = prm.pad_left;
    I xs[4], ys[4], ws[4];
    for (int k = 0; k < 4; ++k)
        xs[k] = prm.first_strides[k], ys[k] = prm.result_strides[k], ws[k] = prm.second_strides[k];
    for (I idx = (I)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (I)gridDim.x * blockDim.x) {
        const I co = idx % Cout;
        I rest = idx / Cout;
        const I ow = rest % OW;
        rest /= OW;
        const I oh = rest % OH;
        const I n = rest / OH;
        const I ci0 = co / cout_g * cin_g;
        typename io::compute acc = 0;
        for (I kh = 0; kh < KH; ++kh) {
            const I ih = oh * sh - pt + kh * dh;
            if (ih < 0 || ih >= H) continue;
            for (I kw = 0; kw < KW; ++kw) {
                const I iw = ow * sw - pl + kw * dw;
                if (iw < 0 || iw >= W) continue;
                const I xbase = n * xs[0] + ih * xs[1] + iw * xs[2] + ci0 * xs[3];
                const I wbase = kh * ws[0] + kw * ws[1] + co * ws[3];
                for (I ci = 0; ci < cin_g; ++ci)
                    acc = cvz_fma(io::load(x, xbase + ci * xs[3]), io::load(w, wbase + ci * ws[2]), acc);
            }
        }
        io::store(y, n * ys[0] + oh * ys[1] + ow * ys[2] + co * ys[3], acc);
    }
}

template <int TYPE>
__global__ void conv2d_forward(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* w,
                               typename IO<TYPE>::storage* y, const i64* p, i64 total) {
    conv2d_forward_body<TYPE, i64>(x, w, y, p, total);
}

template <int TYPE>
__global__ void conv2d_forward_narrow(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* w,
                                      typename IO<TYPE>::storage* y, const i64* p, i64 total) {
    conv2d_forward_body<TYPE, int>(x, w, y, p, total);
}

// The tiled forward pass (the engine is in cuda_tiles.cuh): rows m are output pixels
// (n, oh, ow), columns the group's output channels, terms k = (kh, kw, ci) in the filter's
// HWIO order; the filter arrives contiguous, so b[k][co] = w[k * C_out + group's first + co].
// Grid: x = pixel tiles, y = channel tiles, z = chunk * G + group.  Parameters: TiledParams
// (cuda_tiles.cuh).  With one chunk the block stores y; with more (too few tiles to fill the
// device: the shape decides, see cuda.split_terms) chunk c of the terms goes to
// partial[c][y's offset], summed in order by merge_chunk_partials.
// A thread fetches one term of 4 rows of a (by term) and 4 terms of a column of the dense b.
template <int TYPE>
struct ForwardTiles {
    typedef typename IO<TYPE>::compute compute;
    CvzFetched<TYPE, true, false> next;
    const typename IO<TYPE>::storage *x, *w;
    typename IO<TYPE>::storage* y;
    compute* partial;
    int H, W, OH, OW, Cout, KW, cin_g, cout_g, sh, sw, dh, dw, xs[4], ys[4];
    int K, M, m0, n0, g, ci0, first_term, chunk, chunks;
    i64 total;
    // The 4 rows this thread loads (its a slots): image offset, top-left tap
    // (CVZ_NO_ROW past the last row: every tap then reads "padding").
    int row_base[4], row_h[4], row_w[4];

    __device__ ForwardTiles(const typename IO<TYPE>::storage* x_, const typename IO<TYPE>::storage* w_,
                            typename IO<TYPE>::storage* y_, compute* partial_, const i64* p)
        : x(x_), w(w_), y(y_), partial(partial_) {
        const TiledParams prm(p);  // first operand x, result y, second w (read dense: cvz_load_dense_b)
        H = prm.H, W = prm.W, OH = prm.OH, OW = prm.OW, Cout = prm.Cout, KW = prm.KW;
        cin_g = prm.cin_g, cout_g = prm.cout_g;
        sh = prm.sh, sw = prm.sw, dh = prm.dh, dw = prm.dw;
        for (int i = 0; i < 4; ++i) xs[i] = prm.first_strides[i], ys[i] = prm.result_strides[i];
        const int terms = prm.KH * KW * cin_g, chunk_terms = prm.per_chunk;
        g = blockIdx.z % prm.G;
        chunk = blockIdx.z / prm.G;
        chunks = prm.chunks;
        total = prm.total;
        first_term = chunk * chunk_terms;
        K = terms - first_term < chunk_terms ? terms - first_term : chunk_terms;
        M = prm.N * OH * OW;
        m0 = blockIdx.x * CVZ_BM;
        n0 = blockIdx.y * CVZ_BN;
        ci0 = g * cin_g;
        for (int i = 0; i < 4; ++i) {
            int kk, row;
            cvz_tile_slot<true>(i, kk, row);
            const int m = m0 + row;
            const int ow = m % OW, oh = (m / OW) % OH;
            row_base[i] = (m / (OW * OH)) * xs[0];
            row_h[i] = m < M ? oh * sh - prm.pad_top : CVZ_NO_ROW;
            row_w[i] = ow * sw - prm.pad_left;
        }
    }

    __device__ void fetch(int k0) {
        int kk, row;
        cvz_tile_slot<true>(0, kk, row);  // this thread's term (the same for its 4 rows)
        const int k = first_term + k0 + kk;
        const int ci = k % cin_g, tap = k / cin_g;
        const int kh = tap / KW, kw = tap % KW;
        for (int i = 0; i < 4; ++i) {
            const int ih = row_h[i] + kh * dh, iw = row_w[i] + kw * dw;
            const bool real = k0 + kk < K && ih >= 0 && ih < H && iw >= 0 && iw < W;
            next.a[i] = real ? IO<TYPE>::load(x, row_base[i] + ih * xs[1] + iw * xs[2] + (ci0 + ci) * xs[3])
                             : (compute)0;
            next.a_real[i] = real;
        }
        cvz_fetch_dense_b<TYPE>(w + (i64)first_term * Cout + g * cout_g, Cout, K, cout_g, k0, n0, next.b);
    }

    __device__ void store(compute (*acc)[4], const int* rows, const int* cols) {
        for (int i = 0; i < 4; ++i) {
            const int m = m0 + rows[i];
            if (m >= M) continue;
            const int base = (m / (OW * OH)) * ys[0] + ((m / OW) % OH) * ys[1] + (m % OW) * ys[2];
            for (int j = 0; j < 4; ++j) {
                const int n = n0 + cols[j];
                if (n < cout_g) cvz_store_or_partial<TYPE>(y, partial, chunk, chunks, total,
                                                           base + (g * cout_g + n) * ys[3], acc[i][j]);
            }
        }
    }
};

template <int TYPE>
__global__ void conv2d_forward_tiled(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* w,
                                     typename IO<TYPE>::storage* y, typename IO<TYPE>::compute* partial,
                                     const i64* p) {
    ForwardTiles<TYPE> op(x, w, y, partial, p);
    cvz_tiled_product(op);
}
