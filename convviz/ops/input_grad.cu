// The conv2d input gradient on the GPU (launched by convviz/ops/input_grad.py).
// Parameters p: ConvParams (cuda_common.cuh), with out_backprop as the first operand, dx as the
// result and the filter as the second.

// One thread per input-gradient element dx[n, ih, iw, ci] (ci fastest: neighbouring
// threads write neighbouring channels in NHWC).  Terms are added in order of
// (kh, kw, output channel), like the CPU kernels' plain path.
// Index type I: i64, or int (input_grad_narrow) when every offset fits (see conv2d_forward_body).
template <int TYPE, typename I>
__device__ void input_grad_body(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                                typename IO<TYPE>::storage* dx, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const ConvParams<I> prm(p);  // first operand dy, result dx, second w
    const I H = prm.H, W = prm.W, Cin = prm.Cin, OH = prm.OH, OW = prm.OW, KH = prm.KH, KW = prm.KW;
    const I cin_g = prm.cin_g, cout_g = prm.cout_g;
    const I sh = prm.sh, sw = prm.sw, dh = prm.dh, dw = prm.dw, pt = prm.pad_top, pl = prm.pad_left;
    I ys[4], xs[4], ws[4];
    for (int k = 0; k < 4; ++k)
        ys[k] = prm.first_strides[k], xs[k] = prm.result_strides[k], ws[k] = prm.second_strides[k];
    for (I idx = (I)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (I)gridDim.x * blockDim.x) {
        const I ci = idx % Cin;
        I rest = idx / Cin;
        const I iw = rest % W;
        rest /= W;
        const I ih = rest % H;
        const I n = rest / H;
        const I g = ci / cin_g, cl = ci % cin_g;
        typename io::compute acc = 0;
        for (I kh = 0; kh < KH; ++kh) {
            const I oh = cvz_landing<I>(ih + pt - kh * dh, sh);
            if (oh < 0 || oh >= OH) continue;
            for (I kw = 0; kw < KW; ++kw) {
                const I ow = cvz_landing<I>(iw + pl - kw * dw, sw);
                if (ow < 0 || ow >= OW) continue;
                const I ybase = n * ys[0] + oh * ys[1] + ow * ys[2];
                const I wbase = kh * ws[0] + kw * ws[1] + cl * ws[2];
                for (I co = g * cout_g; co < (g + 1) * cout_g; ++co)
                    acc = cvz_fma(io::load(dy, ybase + co * ys[3]), io::load(w, wbase + co * ws[3]), acc);
            }
        }
        io::store(dx, n * xs[0] + ih * xs[1] + iw * xs[2] + ci * xs[3], acc);
    }
}

template <int TYPE>
__global__ void input_grad(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                           typename IO<TYPE>::storage* dx, const i64* p, i64 total) {
    input_grad_body<TYPE, i64>(dy, w, dx, p, total);
}

template <int TYPE>
__global__ void input_grad_narrow(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                                  typename IO<TYPE>::storage* dx, const i64* p, i64 total) {
    input_grad_body<TYPE, int>(dy, w, dx, p, total);
}

// The tiled input gradient (the engine is in cuda_tiles.cuh).  With strides, an input pixel
// gets terms only from the taps that land on an output cell, and which taps those are depends
// only on its stride phase ((ih + pad_top) mod sh, (iw + pad_left) mod sw): so each block takes
// the pixels of one phase (rows m: (n, qh, qw), ih = first_h + qh * sh) and runs over that
// phase's taps alone -- kh in first_kh, first_kh + step_h, ... -- instead of multiplying the
// 1 - 1 / (sh * sw) of zeros a plain product would.  Columns are the group's input channels,
// terms k = (kh, kw, co) in that order, the order of the kernel above with the zero terms left
// out (they would add +-0 to a sum that never is -0: the same bits).  Term k of row m is
// out_backprop at oh = qh + (first_h + pad_top - kh * dh) / sh (exact), when 0 <= oh < OH.
// b[k][ci] is the filter's [kh, kw, ci, co], read where it lies (any strides): neighbouring
// threads load neighbouring co.  Grid: x = pixel tiles (of the largest phase), y = channel
// tiles, z = (chunk * G + group) * sh * sw + phase.  Parameters: TiledParams (cuda_tiles.cuh;
// the split as in conv2d_forward_tiled).
// A thread fetches one term of 4 rows of a and of 4 channels of b (both by term).
template <int TYPE>
struct InputGradTiles {
    typedef typename IO<TYPE>::compute compute;
    CvzFetched<TYPE, true, true> next;
    const typename IO<TYPE>::storage *dy, *w;
    typename IO<TYPE>::storage* dx;
    typename IO<TYPE>::compute* partial;
    int OH, OW, cin_g, cout_g, g, ys[4], xs[4], ws[4];
    int K, M, m0, n0, first_term, chunk, chunks;
    i64 total;
    // This block's phase: its first input row and column, how many (hq x wq), and its taps.
    int first_h, first_w, hq, wq, first_kh, first_kw, step_h, step_w, taps_w;
    int sh, sw, dh, dw, pt, pl;
    // The 4 rows this thread loads: image offset in out_backprop, qh, qw.
    int row_base[4], row_h[4], row_w[4];

    // The phase's first pixel along one side, how many it has, and its first tap and tap step.
    __device__ static void phase(int size, int pad, int stride, int dilation, int taps, int r, int& first,
                                 int& count, int& first_tap, int& step, int& tap_count) {
        first = ((r - pad) % stride + stride) % stride;
        count = first < size ? (size - 1 - first) / stride + 1 : 0;
        int a = stride, b = dilation % stride;  // step = stride / gcd(stride, dilation)
        while (b) {
            const int t = a % b;
            a = b;
            b = t;
        }
        step = stride / a;
        first_tap = 0;
        while (first_tap < taps && (first_tap * dilation - r) % stride != 0) ++first_tap;
        tap_count = first_tap < taps ? (taps - 1 - first_tap) / step + 1 : 0;
    }

    __device__ InputGradTiles(const typename IO<TYPE>::storage* dy_, const typename IO<TYPE>::storage* w_,
                              typename IO<TYPE>::storage* dx_, compute* partial_, const i64* p)
        : dy(dy_), w(w_), dx(dx_), partial(partial_) {
        const TiledParams prm(p);  // first operand dy, result dx, second w
        OH = prm.OH, OW = prm.OW;
        cin_g = prm.cin_g, cout_g = prm.cout_g;
        sh = prm.sh, sw = prm.sw, dh = prm.dh, dw = prm.dw, pt = prm.pad_top, pl = prm.pad_left;
        for (int i = 0; i < 4; ++i)
            ys[i] = prm.first_strides[i], xs[i] = prm.result_strides[i], ws[i] = prm.second_strides[i];
        const int phases = sh * sw, r = blockIdx.z % phases;
        g = blockIdx.z / phases % prm.G;
        chunk = blockIdx.z / phases / prm.G;
        chunks = prm.chunks;
        total = prm.total;
        int taps_h;
        phase(prm.H, pt, sh, dh, prm.KH, r / sw, first_h, hq, first_kh, step_h, taps_h);
        phase(prm.W, pl, sw, dw, prm.KW, r % sw, first_w, wq, first_kw, step_w, taps_w);
        // This chunk's terms (none when a phase has fewer than the largest).
        const int terms = taps_h * taps_w * cout_g, chunk_terms = prm.per_chunk;
        first_term = chunk * chunk_terms;
        K = terms - first_term < chunk_terms ? terms - first_term : chunk_terms;
        K = K > 0 ? K : 0;
        M = prm.N * hq * wq;
        m0 = blockIdx.x * CVZ_BM;
        n0 = blockIdx.y * CVZ_BN;
        for (int i = 0; i < 4; ++i) {
            int kk, row;
            cvz_tile_slot<true>(i, kk, row);
            const int m = m0 + row;
            row_base[i] = M > 0 ? (m / (wq * hq)) * ys[0] : 0;
            row_h[i] = m < M ? (m / wq) % hq : CVZ_NO_ROW;
            row_w[i] = M > 0 ? m % wq : 0;
        }
    }

    __device__ void fetch(int k0) {
        int kk, slot;
        cvz_tile_slot<true>(0, kk, slot);  // this thread's term (the same for its 4 rows and channels)
        const int k = first_term + k0 + kk, tap = k / cout_g;
        const bool term_real = k0 + kk < K;
        const int term_co = g * cout_g + k % cout_g;
        const int term_kh = first_kh + tap / taps_w * step_h;
        const int term_kw = first_kw + tap % taps_w * step_w;
        // Exact divisions: the phase's taps land on output cells.
        const int oh0 = (first_h + pt - term_kh * dh) / sh, ow0 = (first_w + pl - term_kw * dw) / sw;
        for (int i = 0; i < 4; ++i) {
            const int oh = row_h[i] + oh0, ow = row_w[i] + ow0;
            const bool real = term_real && oh >= 0 && oh < OH && ow >= 0 && ow < OW;
            next.a[i] = real ? IO<TYPE>::load(dy, row_base[i] + oh * ys[1] + ow * ys[2] + term_co * ys[3])
                             : (compute)0;
            next.a_real[i] = real;
        }
        const int base = term_kh * ws[0] + term_kw * ws[1] + term_co * ws[3];
        for (int i = 0; i < 4; ++i) {
            int term, nn;
            cvz_tile_slot<true>(i, term, nn);
            next.b[i] = term_real && n0 + nn < cin_g ? IO<TYPE>::load(w, base + (n0 + nn) * ws[2]) : (compute)0;
        }
    }

    __device__ void store(compute (*acc)[4], const int* rows, const int* cols) {
        for (int i = 0; i < 4; ++i) {
            const int m = m0 + rows[i];
            if (m >= M) continue;
            const int ih = first_h + (m / wq) % hq * sh, iw = first_w + m % wq * sw;
            const int base = (m / (wq * hq)) * xs[0] + ih * xs[1] + iw * xs[2];
            for (int j = 0; j < 4; ++j) {
                const int n = n0 + cols[j];
                if (n < cin_g) cvz_store_or_partial<TYPE>(dx, partial, chunk, chunks, total,
                                                          base + (g * cin_g + n) * xs[3], acc[i][j]);
            }
        }
    }
};

template <int TYPE>
__global__ void input_grad_tiled(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                                 typename IO<TYPE>::storage* dx, typename IO<TYPE>::compute* partial,
                                 const i64* p) {
    InputGradTiles<TYPE> op(dy, w, dx, partial, p);
    cvz_tiled_product(op);
}
