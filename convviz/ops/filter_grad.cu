// The conv2d filter gradient on the GPU (launched by convviz/ops/filter_grad.py).
// Parameters p: [0..11] N H W C_in OH OW C_out KH KW G cin_g cout_g,
// [12..17] sh sw dh dw pad_top pad_left, [18..21] strides of the input,
// [22..25] of the filter gradient, [26..29] of out_backprop (all in elements,
// logical NHWC; the filter gradient HWIO).

// One thread per filter-gradient element dw[kh, kw, ci, co] (co fastest), summing
// over (n, oh, ow) in that order: the same order for any launch, so the result
// is bitwise reproducible.
template <int TYPE>
__global__ void conv2d_filter_grad(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* dy,
                                   typename IO<TYPE>::storage* dw, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const i64 N = p[0], H = p[1], W = p[2], OH = p[4], OW = p[5], Cout = p[6], KW = p[8];
    const i64 cin_g = p[10], cout_g = p[11];
    const i64 sh = p[12], sw = p[13], dh = p[14], dwd = p[15], pt = p[16], pl = p[17];
    const i64* xs = p + 18;
    const i64* ws = p + 22;
    const i64* ys = p + 26;
    for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x) {
        const i64 co = idx % Cout;
        i64 rest = idx / Cout;
        const i64 ci = rest % cin_g;
        rest /= cin_g;
        const i64 kw = rest % KW;
        const i64 kh = rest / KW;
        const i64 cx = co / cout_g * cin_g + ci;  // the input channel this weight reads
        typename io::compute acc = 0;
        for (i64 n = 0; n < N; ++n)
            for (i64 oh = 0; oh < OH; ++oh) {
                const i64 ih = oh * sh - pt + kh * dh;
                if (ih < 0 || ih >= H) continue;
                for (i64 ow = 0; ow < OW; ++ow) {
                    const i64 iw = ow * sw - pl + kw * dwd;
                    if (iw < 0 || iw >= W) continue;
                    acc += io::load(x, n * xs[0] + ih * xs[1] + iw * xs[2] + cx * xs[3]) *
                           io::load(dy, n * ys[0] + oh * ys[1] + ow * ys[2] + co * ys[3]);
                }
            }
        io::store(dw, kh * ws[0] + kw * ws[1] + ci * ws[2] + co * ws[3], acc);
    }
}
