// The depthwise forward pass on the GPU (launched by convviz/ops/depthwise_forward.py).
// Parameters p: those of conv2d_forward (forward.cu) for the filter seen as the dense
// [KH, KW, 1, C * M] (ConvParams, cuda_common.cuh).

// One thread per ROW neighbouring output pixels of one row and one channel q = c * M + m (q
// fastest: neighbouring threads read and write neighbouring channels in NHWC).  Per pixel the
// terms are added in order of (kh, kw), as conv2d_forward adds them: the same bits.  The thread
// loads each weight once for its ROW pixels and splits its index once, where the
// one-thread-per-element kernel did both per pixel.  32-bit offsets (the launcher checks).
//
// Two kernels: depthwise_forward_rows (4 pixels a thread, any stride and dilation) and, at
// stride and dilation 1 with windows up to DEPTHWISE_STRIP_KW wide, depthwise_forward_strips
// (8 pixels a thread, each kernel row's inputs loaded once into a register strip).  Paired on an
// H200 against the rows kernel: dwc_mobilenet 0.047 -> 0.035 ms, dwc_k5 0.050 -> 0.036; the strip
// code in the rows kernel (64 -> 72 registers) slowed dwc_stride2 by 4%, hence two kernels.
#define DEPTHWISE_FORWARD_ROW 4
#define DEPTHWISE_FORWARD_STRIP_ROW 8
#define DEPTHWISE_STRIP_KW 7

template <int TYPE, int ROW, bool STRIP>
__device__ void depthwise_forward_body(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* w,
                                       typename IO<TYPE>::storage* y, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const ConvParams<int> prm(p);  // first operand x, result y, second w
    const int H = prm.H, W = prm.W, OH = prm.OH, OW = prm.OW, CM = prm.Cout, KH = prm.KH, KW = prm.KW, M = prm.cout_g;
    const int sh = prm.sh, sw = prm.sw, dh = prm.dh, dw = prm.dw, pt = prm.pad_top, pl = prm.pad_left;
    const int xs0 = prm.first_strides[0], xs1 = prm.first_strides[1], xs2 = prm.first_strides[2];
    const int xs3 = prm.first_strides[3], ys0 = prm.result_strides[0], ys1 = prm.result_strides[1];
    const int ys2 = prm.result_strides[2], ys3 = prm.result_strides[3];
    const int ws0 = prm.second_strides[0], ws1 = prm.second_strides[1], ws3 = prm.second_strides[3];
    const int row_blocks = (OW + ROW - 1) / ROW;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        const int q = idx % CM;
        int rest = idx / CM;
        const int ow0 = rest % row_blocks * ROW;
        rest /= row_blocks;
        const int oh = rest % OH, n = rest / OH;
        const int pixels = OW - ow0 < ROW ? OW - ow0 : ROW;
        const int xq = n * xs0 + q / M * xs3;
        typename io::compute acc[ROW];
        for (int j = 0; j < ROW; ++j) acc[j] = 0;
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = oh * sh - pt + kh * dh;
            if (ih < 0 || ih >= H) continue;
            if constexpr (STRIP) {
                // The row's inputs once each, into registers (pixel j's tap kw reads strip[j + kw]),
                // where the loop below loads every (pixel, tap) pair's input: KW times as many loads.
                typename io::compute strip[ROW + DEPTHWISE_STRIP_KW - 1];
                bool real[ROW + DEPTHWISE_STRIP_KW - 1];
                const int iw0 = ow0 - pl;
#pragma unroll
                for (int i = 0; i < ROW + DEPTHWISE_STRIP_KW - 1; ++i) {
                    real[i] = i < pixels + KW - 1 && iw0 + i >= 0 && iw0 + i < W;
                    strip[i] = real[i] ? io::load(x, xq + ih * xs1 + (iw0 + i) * xs2) : 0;
                }
#pragma unroll
                for (int kw = 0; kw < DEPTHWISE_STRIP_KW; ++kw) {
                    if (kw >= KW) break;
                    const typename io::compute wv = io::load(w, kh * ws0 + kw * ws1 + q * ws3);
#pragma unroll
                    for (int j = 0; j < ROW; ++j)  // a tap in the padding is not added
                        if (real[j + kw]) acc[j] = cvz_fma(strip[j + kw], wv, acc[j]);
                }
                continue;
            }
            for (int kw = 0; kw < KW; ++kw) {
                const typename io::compute wv = io::load(w, kh * ws0 + kw * ws1 + q * ws3);
                const int iw0 = ow0 * sw - pl + kw * dw;
#pragma unroll
                for (int j = 0; j < ROW; ++j) {
                    const int iw = iw0 + j * sw;
                    if (j < pixels && iw >= 0 && iw < W) acc[j] = cvz_fma(io::load(x, xq + ih * xs1 + iw * xs2), wv, acc[j]);
                }
            }
        }
        const int yq = n * ys0 + oh * ys1 + q * ys3;
#pragma unroll
        for (int j = 0; j < ROW; ++j)
            if (j < pixels) io::store(y, yq + (ow0 + j) * ys2, acc[j]);
    }
}

template <int TYPE>
__global__ void depthwise_forward_rows(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* w,
                                       typename IO<TYPE>::storage* y, const i64* p, i64 total) {
    depthwise_forward_body<TYPE, DEPTHWISE_FORWARD_ROW, false>(x, w, y, p, total);
}

// At most 80 registers (3 blocks of THREADS = 256 an SM), as the kernel ran when measured; left to
// itself nvcc gave it 85-95 (2 blocks).
template <int TYPE>
__global__ void __launch_bounds__(256, 3)
depthwise_forward_strips(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* w,
                         typename IO<TYPE>::storage* y, const i64* p, i64 total) {
    depthwise_forward_body<TYPE, DEPTHWISE_FORWARD_STRIP_ROW, true>(x, w, y, p, total);
}
