// The depthwise input gradient on the GPU (launched by convviz/ops/depthwise_input_grad.py).
// Parameters p: those of input_grad (input_grad.cu) for the filter seen as the dense
// [KH, KW, 1, C * M] (ConvParams, cuda_common.cuh).

// One thread per DEPTHWISE_INPUT_ROW neighbouring input pixels of one row and one channel c (c fastest).
// Per pixel the terms are added in order of (kh, kw, m), as input_grad adds them: the same
// bits.  A row's pixels share the tap's row check, its weights and the thread's index split.
// 32-bit offsets (the launcher checks).
#define DEPTHWISE_INPUT_ROW 4

template <int TYPE>
__global__ void depthwise_input_grad_rows(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                                          typename IO<TYPE>::storage* dx, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const ConvParams<int> prm(p);  // first operand dy, result dx, second w
    const int H = prm.H, W = prm.W, C = prm.Cin, OH = prm.OH, OW = prm.OW, KH = prm.KH, KW = prm.KW, M = prm.cout_g;
    const int sh = prm.sh, sw = prm.sw, dh = prm.dh, dw = prm.dw, pt = prm.pad_top, pl = prm.pad_left;
    const int ys0 = prm.first_strides[0], ys1 = prm.first_strides[1], ys2 = prm.first_strides[2];
    const int ys3 = prm.first_strides[3], xs0 = prm.result_strides[0], xs1 = prm.result_strides[1];
    const int xs2 = prm.result_strides[2], xs3 = prm.result_strides[3];
    const int ws0 = prm.second_strides[0], ws1 = prm.second_strides[1], ws3 = prm.second_strides[3];
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
