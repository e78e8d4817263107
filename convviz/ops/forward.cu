// The conv2d forward pass on the GPU (launched by convviz/ops/forward.py).
// Parameters p: [0..11] N H W C_in OH OW C_out KH KW G cin_g cout_g,
// [12..17] sh sw dh dw pad_top pad_left, [18..21] strides of the input,
// [22..25] of the output, [26..29] of the filter (all in elements, logical NHWC).

// One thread per output element y[n, oh, ow, co] (co fastest: neighbouring
// threads write neighbouring channels in NHWC).  Terms are added in order of
// (kh, kw, input channel), like the CPU kernel.
template <int TYPE>
__global__ void conv2d_forward(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* w,
                               typename IO<TYPE>::storage* y, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const i64 H = p[1], W = p[2], OH = p[4], OW = p[5], Cout = p[6], KH = p[7], KW = p[8];
    const i64 cin_g = p[10], cout_g = p[11];
    const i64 sh = p[12], sw = p[13], dh = p[14], dw = p[15], pt = p[16], pl = p[17];
    const i64* xs = p + 18;
    const i64* ys = p + 22;
    const i64* ws = p + 26;
    for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x) {
        const i64 co = idx % Cout;
        i64 rest = idx / Cout;
        const i64 ow = rest % OW;
        rest /= OW;
        const i64 oh = rest % OH;
        const i64 n = rest / OH;
        const i64 ci0 = co / cout_g * cin_g;
        typename io::compute acc = 0;
        for (i64 kh = 0; kh < KH; ++kh) {
            const i64 ih = oh * sh - pt + kh * dh;
            if (ih < 0 || ih >= H) continue;
            for (i64 kw = 0; kw < KW; ++kw) {
                const i64 iw = ow * sw - pl + kw * dw;
                if (iw < 0 || iw >= W) continue;
                const i64 xbase = n * xs[0] + ih * xs[1] + iw * xs[2] + ci0 * xs[3];
                const i64 wbase = kh * ws[0] + kw * ws[1] + co * ws[3];
                for (i64 ci = 0; ci < cin_g; ++ci)
                    acc += io::load(x, xbase + ci * xs[3]) * io::load(w, wbase + ci * ws[2]);
            }
        }
        io::store(y, n * ys[0] + oh * ys[1] + ow * ys[2] + co * ys[3], acc);
    }
}
