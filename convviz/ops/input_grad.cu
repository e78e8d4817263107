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
