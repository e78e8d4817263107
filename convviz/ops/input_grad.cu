// The conv2d input gradient on the GPU (launched by convviz/ops/input_grad.py).
// Parameters p: [0..11] N H W C_in OH OW C_out KH KW G cin_g cout_g,
// [12..17] sh sw dh dw pad_top pad_left, [18..21] strides of out_backprop,
// [22..25] of dx, [26..29] of the filter (all in elements, logical NHWC).

// One thread per input-gradient element dx[n, ih, iw, ci] (ci fastest: neighbouring
// threads write neighbouring channels in NHWC).  Terms are added in order of
// (kh, kw, output channel), like the CPU kernels' plain path.
template <int TYPE>
__global__ void input_grad(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                           typename IO<TYPE>::storage* dx, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const i64 H = p[1], W = p[2], Cin = p[3], OH = p[4], OW = p[5], KH = p[7], KW = p[8];
    const i64 cin_g = p[10], cout_g = p[11];
    const i64 sh = p[12], sw = p[13], dh = p[14], dw = p[15], pt = p[16], pl = p[17];
    const i64* ys = p + 18;
    const i64* xs = p + 22;
    const i64* ws = p + 26;
    for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x) {
        const i64 ci = idx % Cin;
        i64 rest = idx / Cin;
        const i64 iw = rest % W;
        rest /= W;
        const i64 ih = rest % H;
        const i64 n = rest / H;
        const i64 g = ci / cin_g, cl = ci % cin_g;
        typename io::compute acc = 0;
        for (i64 kh = 0; kh < KH; ++kh) {
            const i64 th = ih + pt - kh * dh;
            if (th < 0 || th % sh != 0) continue;
            const i64 oh = th / sh;
            if (oh >= OH) continue;
            for (i64 kw = 0; kw < KW; ++kw) {
                const i64 tw = iw + pl - kw * dw;
                if (tw < 0 || tw % sw != 0) continue;
                const i64 ow = tw / sw;
                if (ow >= OW) continue;
                const i64 ybase = n * ys[0] + oh * ys[1] + ow * ys[2];
                const i64 wbase = kh * ws[0] + kw * ws[1] + cl * ws[2];
                for (i64 co = g * cout_g; co < (g + 1) * cout_g; ++co)
                    acc += io::load(dy, ybase + co * ys[3]) * io::load(w, wbase + co * ws[3]);
            }
        }
        io::store(dx, n * xs[0] + ih * xs[1] + iw * xs[2] + ci * xs[3], acc);
    }
}

// The tiled input gradient (the engine is in cuda_tiles.cuh): rows m are input pixels
// (n, ih, iw), columns the group's input channels, terms k = (kh, kw, co) in that order (the
// order of the kernel above).  Term k of row m is out_backprop at (oh, ow) with
// oh * sh = ih + pad_top - kh * dh, when that lands on an output cell (else it does not exist).
// b[k][ci] is the filter's [kh, kw, ci, co], read where it lies (any strides): neighbouring
// threads load neighbouring co.  Grid: x = pixel tiles, y = channel tiles, z = groups.
template <int TYPE>
struct InputGradTiles {
    typedef typename IO<TYPE>::compute compute;
    const typename IO<TYPE>::storage *dy, *w;
    typename IO<TYPE>::storage* dx;
    int H, W, OH, OW, KW, cin_g, cout_g, sh, sw, dh, dw, ys[4], xs[4], ws[4];
    int K, M, m0, n0;
    // The 4 rows this thread loads: image offset in out_backprop, ih + pad_top, iw + pad_left.
    int row_base[4], row_h[4], row_w[4];

    __device__ InputGradTiles(const typename IO<TYPE>::storage* dy_, const typename IO<TYPE>::storage* w_,
                              typename IO<TYPE>::storage* dx_, const i64* p)
        : dy(dy_), w(w_), dx(dx_) {
        const int N = (int)p[0], KH = (int)p[7];
        H = (int)p[1], W = (int)p[2], OH = (int)p[4], OW = (int)p[5], KW = (int)p[8];
        cin_g = (int)p[10], cout_g = (int)p[11];
        sh = (int)p[12], sw = (int)p[13], dh = (int)p[14], dw = (int)p[15];
        for (int i = 0; i < 4; ++i) ys[i] = (int)p[18 + i], xs[i] = (int)p[22 + i], ws[i] = (int)p[26 + i];
        K = KH * KW * cout_g;
        M = N * H * W;
        m0 = blockIdx.x * CVZ_BM;
        n0 = blockIdx.y * CVZ_BN;
        for (int i = 0; i < 4; ++i) {
            const int m = m0 + threadIdx.x / 16 + 16 * i;
            row_base[i] = (m / (W * H)) * ys[0];
            row_h[i] = m < M ? (m / W) % H + (int)p[16] : CVZ_NO_ROW;
            row_w[i] = m % W + (int)p[17];
        }
    }

    __device__ void load_a(compute (*a)[CVZ_BM + CVZ_PAD], unsigned char (*a_real)[CVZ_BM], int k0) {
        const int kk = threadIdx.x % 16, k = k0 + kk;
        const int co = blockIdx.z * cout_g + k % cout_g, tap = k / cout_g;
        const int kh = tap / KW, kw = tap % KW;
        for (int i = 0; i < 4; ++i) {
            const int mm = threadIdx.x / 16 + 16 * i;
            const int th = row_h[i] - kh * dh, tw = row_w[i] - kw * dw;
            // th >= 0 before dividing: C's division truncates toward zero.
            const int oh = th >= 0 && th % sh == 0 ? th / sh : -1, ow = tw >= 0 && tw % sw == 0 ? tw / sw : -1;
            const bool real = k < K && oh >= 0 && oh < OH && ow >= 0 && ow < OW;
            a[kk][mm] = real ? IO<TYPE>::load(dy, row_base[i] + oh * ys[1] + ow * ys[2] + co * ys[3]) : (compute)0;
            a_real[kk][mm] = real;
        }
    }

    __device__ bool load_b(compute (*b)[CVZ_BN + CVZ_PAD], int k0) {
        const int kk = threadIdx.x % 16, k = k0 + kk;
        const int co = blockIdx.z * cout_g + k % cout_g, tap = k / cout_g;
        const int base = (tap / KW) * ws[0] + (tap % KW) * ws[1] + co * ws[3];
        bool finite = true;
        for (int i = 0; i < 4; ++i) {
            const int nn = threadIdx.x / 16 + 16 * i;
            compute v = 0;
            if (k < K && n0 + nn < cin_g) v = IO<TYPE>::load(w, base + (n0 + nn) * ws[2]);
            finite = finite && cvz_is_finite(v);
            b[kk][nn] = v;
        }
        return finite;
    }

    __device__ void store(compute (*acc)[4], int row, int col) {
        for (int i = 0; i < 4; ++i) {
            const int m = m0 + row + i;
            if (m >= M) continue;
            const int base = (m / (W * H)) * xs[0] + ((m / W) % H) * xs[1] + (m % W) * xs[2];
            for (int j = 0; j < 4; ++j) {
                const int n = n0 + col + j;
                if (n < cin_g) IO<TYPE>::store(dx, base + (blockIdx.z * cin_g + n) * xs[3], acc[i][j]);
            }
        }
    }
};

template <int TYPE>
__global__ void input_grad_tiled(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                                 typename IO<TYPE>::storage* dx, const i64* p) {
    InputGradTiles<TYPE> op(dy, w, dx, p);
    cvz_tiled_product(op);
}
