// The depthwise forward pass on the GPU (launched by convviz/ops/depthwise_forward.py).
// Parameters p: those of conv2d_forward (forward.cu) for the filter seen as the dense
// [KH, KW, 1, C * M] (ConvParams, cuda_common.cuh).

// One thread per DEPTHWISE_FORWARD_ROW neighbouring output pixels of one row and one channel q = c * M + m
// (q fastest: neighbouring threads read and write neighbouring channels in NHWC).  Per pixel
// the terms are added in order of (kh, kw), as conv2d_forward adds them: the same bits.  The
// thread loads each weight once for its DEPTHWISE_FORWARD_ROW pixels and splits its index once, where the
// one-thread-per-element kernel did both per pixel.  32-bit offsets (the launcher checks).
#define DEPTHWISE_FORWARD_ROW 4

template <int TYPE>
__global__ void depthwise_forward_rows(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* w,
                                       typename IO<TYPE>::storage* y, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const ConvParams<int> prm(p);  // first operand x, result y, second w
    const int H = prm.H, W = prm.W, OH = prm.OH, OW = prm.OW, CM = prm.Cout, KH = prm.KH, KW = prm.KW, M = prm.cout_g;
    const int sh = prm.sh, sw = prm.sw, dh = prm.dh, dw = prm.dw, pt = prm.pad_top, pl = prm.pad_left;
    const int xs0 = prm.first_strides[0], xs1 = prm.first_strides[1], xs2 = prm.first_strides[2];
    const int xs3 = prm.first_strides[3], ys0 = prm.result_strides[0], ys1 = prm.result_strides[1];
    const int ys2 = prm.result_strides[2], ys3 = prm.result_strides[3];
    const int ws0 = prm.second_strides[0], ws1 = prm.second_strides[1], ws3 = prm.second_strides[3];
    const int row_blocks = (OW + DEPTHWISE_FORWARD_ROW - 1) / DEPTHWISE_FORWARD_ROW;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        const int q = idx % CM;
        int rest = idx / CM;
        const int ow0 = rest % row_blocks * DEPTHWISE_FORWARD_ROW;
        rest /= row_blocks;
        const int oh = rest % OH, n = rest / OH;
        const int pixels = OW - ow0 < DEPTHWISE_FORWARD_ROW ? OW - ow0 : DEPTHWISE_FORWARD_ROW;
        const int xq = n * xs0 + q / M * xs3;
        typename io::compute acc[DEPTHWISE_FORWARD_ROW];
        for (int j = 0; j < DEPTHWISE_FORWARD_ROW; ++j) acc[j] = 0;
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = oh * sh - pt + kh * dh;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                const typename io::compute wv = io::load(w, kh * ws0 + kw * ws1 + q * ws3);
                const int iw0 = ow0 * sw - pl + kw * dw;
#pragma unroll
                for (int j = 0; j < DEPTHWISE_FORWARD_ROW; ++j) {
                    const int iw = iw0 + j * sw;
                    if (j < pixels && iw >= 0 && iw < W) acc[j] += io::load(x, xq + ih * xs1 + iw * xs2) * wv;
                }
            }
        }
        const int yq = n * ys0 + oh * ys1 + q * ys3;
#pragma unroll
        for (int j = 0; j < DEPTHWISE_FORWARD_ROW; ++j)
            if (j < pixels) io::store(y, yq + (ow0 + j) * ys2, acc[j]);
    }
}
