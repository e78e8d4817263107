// The depthwise input gradient on the GPU (launched by convviz/ops/depthwise_input_grad.py).
// Parameters p: those of input_grad (input_grad.cu) for the filter seen as the dense
// [KH, KW, 1, C * M]: [0..11] N H W C OH OW C*M KH KW C 1 M, [12..17] sh sw dh dw pad_top
// pad_left, [18..21] strides of out_backprop, [22..25] of dx, [26..29] of the filter.

// One thread per DEPTHWISE_INPUT_ROW neighbouring input pixels of one row and one channel c (c fastest).
// Per pixel the terms are added in order of (kh, kw, m), as input_grad adds them: the same
// bits.  A row's pixels share the tap's row check, its weights and the thread's index split.
// 32-bit offsets (the launcher checks).
#define DEPTHWISE_INPUT_ROW 4

template <int TYPE>
__global__ void depthwise_input_grad_rows(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                                          typename IO<TYPE>::storage* dx, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const int H = (int)p[1], W = (int)p[2], C = (int)p[3], OH = (int)p[4], OW = (int)p[5];
    const int KH = (int)p[7], KW = (int)p[8], M = (int)p[11];
    const int sh = (int)p[12], sw = (int)p[13], dh = (int)p[14], dw = (int)p[15];
    const int pt = (int)p[16], pl = (int)p[17];
    const int ys0 = (int)p[18], ys1 = (int)p[19], ys2 = (int)p[20], ys3 = (int)p[21];
    const int xs0 = (int)p[22], xs1 = (int)p[23], xs2 = (int)p[24], xs3 = (int)p[25];
    const int ws0 = (int)p[26], ws1 = (int)p[27], ws3 = (int)p[29];
    const int row_blocks = (W + DEPTHWISE_INPUT_ROW - 1) / DEPTHWISE_INPUT_ROW;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        const int c = idx % C;
        int rest = idx / C;
        const int iw0 = rest % row_blocks * DEPTHWISE_INPUT_ROW;
        rest /= row_blocks;
        const int ih = rest % H, n = rest / H;
        const int pixels = W - iw0 < DEPTHWISE_INPUT_ROW ? W - iw0 : DEPTHWISE_INPUT_ROW;
        typename io::compute acc[DEPTHWISE_INPUT_ROW];
        for (int j = 0; j < DEPTHWISE_INPUT_ROW; ++j) acc[j] = 0;
        for (int kh = 0; kh < KH; ++kh) {
            const int oh = cvz_landing(ih + pt - kh * dh, sh);
            if (oh < 0 || oh >= OH) continue;
            for (int kw = 0; kw < KW; ++kw) {
                const int tw0 = iw0 + pl - kw * dw;
#pragma unroll
                for (int j = 0; j < DEPTHWISE_INPUT_ROW; ++j) {
                    const int ow = cvz_landing(tw0 + j, sw);
                    if (j >= pixels || ow < 0 || ow >= OW) continue;
                    const int ybase = n * ys0 + oh * ys1 + ow * ys2;
                    for (int m = 0; m < M; ++m) {
                        const int q = c * M + m;
                        acc[j] += io::load(dy, ybase + q * ys3) * io::load(w, kh * ws0 + kw * ws1 + q * ws3);
                    }
                }
            }
        }
        const int xq = n * xs0 + ih * xs1 + c * xs3;
#pragma unroll
        for (int j = 0; j < DEPTHWISE_INPUT_ROW; ++j)
            if (j < pixels) io::store(dx, xq + (iw0 + j) * xs2, acc[j]);
    }
}
