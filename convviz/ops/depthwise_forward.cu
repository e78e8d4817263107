// The depthwise forward pass on the GPU (launched by convviz/ops/depthwise_forward.py).
// Parameters p: those of conv2d_forward (forward.cu) for the filter seen as the dense
// [KH, KW, 1, C * M]: [0..11] N H W C OH OW C*M KH KW C 1 M, [12..17] sh sw dh dw pad_top
// pad_left, [18..21] strides of the input, [22..25] of the output, [26..29] of the filter.

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
    const int H = (int)p[1], W = (int)p[2], OH = (int)p[4], OW = (int)p[5], CM = (int)p[6];
    const int KH = (int)p[7], KW = (int)p[8], M = (int)p[11];
    const int sh = (int)p[12], sw = (int)p[13], dh = (int)p[14], dw = (int)p[15];
    const int pt = (int)p[16], pl = (int)p[17];
    const int xs0 = (int)p[18], xs1 = (int)p[19], xs2 = (int)p[20], xs3 = (int)p[21];
    const int ys0 = (int)p[22], ys1 = (int)p[23], ys2 = (int)p[24], ys3 = (int)p[25];
    const int ws0 = (int)p[26], ws1 = (int)p[27], ws3 = (int)p[29];
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
