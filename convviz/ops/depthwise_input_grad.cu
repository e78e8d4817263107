// The depthwise input gradient on the GPU (launched by convviz/ops/depthwise_input_grad.py).
// Parameters p: those of input_grad (input_grad.cu) for the filter seen as the dense
// [KH, KW, 1, C * M] (ConvParams, cuda_common.cuh).

// One thread per ROW neighbouring input pixels of one row and one channel c (c fastest).  Per
// pixel the terms are added in order of (kh, kw, m), as input_grad adds them: the same bits.  A
// row's pixels share the tap's row check, its weights and the thread's index split.  32-bit
// offsets (the launcher checks).
//
// Two kernels: depthwise_input_grad_rows (4 pixels a thread, any stride, dilation and multiplier)
// and, at stride and dilation 1, multiplier 1 and windows up to DEPTHWISE_INPUT_STRIP_KW wide,
// depthwise_input_grad_strips (8 pixels a thread, each kernel row's output gradient loaded once
// into a register strip).  Paired on an H200 against the rows kernel: dwi_mobilenet 0.078 ->
// 0.040 ms, dwi_k5 0.091 -> 0.040; the strip code in the rows kernel slowed dwi_stride2 by 11%.
#define DEPTHWISE_INPUT_ROW 4
#define DEPTHWISE_INPUT_STRIP_ROW 8
#define DEPTHWISE_INPUT_STRIP_KW 7

template <int TYPE, int ROW, bool STRIP>
__device__ void depthwise_input_grad_body(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                                          typename IO<TYPE>::storage* dx, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const ConvParams<int> prm(p);  // first operand dy, result dx, second w
    const int H = prm.H, W = prm.W, C = prm.Cin, OH = prm.OH, OW = prm.OW, KH = prm.KH, KW = prm.KW, M = prm.cout_g;
    const int sh = prm.sh, sw = prm.sw, dh = prm.dh, dw = prm.dw, pt = prm.pad_top, pl = prm.pad_left;
    const int ys0 = prm.first_strides[0], ys1 = prm.first_strides[1], ys2 = prm.first_strides[2];
    const int ys3 = prm.first_strides[3], xs0 = prm.result_strides[0], xs1 = prm.result_strides[1];
    const int xs2 = prm.result_strides[2], xs3 = prm.result_strides[3];
    const int ws0 = prm.second_strides[0], ws1 = prm.second_strides[1], ws3 = prm.second_strides[3];
    const int row_blocks = (W + ROW - 1) / ROW;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        const int c = idx % C;
        int rest = idx / C;
        const int iw0 = rest % row_blocks * ROW;
        rest /= row_blocks;
        const int ih = rest % H, n = rest / H;
        const int pixels = W - iw0 < ROW ? W - iw0 : ROW;
        typename io::compute acc[ROW];
        for (int j = 0; j < ROW; ++j) acc[j] = 0;
        for (int kh = 0; kh < KH; ++kh) {
            const int oh = cvz_landing(ih + pt - kh * dh, sh);
            if (oh < 0 || oh >= OH) continue;
            if constexpr (STRIP) {
                // The row's output gradient once each, into registers (pixel j's tap kw reads
                // strip[j + S - 1 - kw], output column iw0 + j + pl - kw, S = DEPTHWISE_INPUT_STRIP_KW:
                // indices known at compile time keep the strip in registers), where the loop below
                // loads every (pixel, tap) pair's: KW times as many loads.
                constexpr int S = DEPTHWISE_INPUT_STRIP_KW;
                typename io::compute strip[ROW + S - 1];
                bool real[ROW + S - 1];
                const int ow_first = iw0 + pl - (S - 1);
#pragma unroll
                for (int i = 0; i < ROW + S - 1; ++i) {
                    real[i] = i >= S - KW && i < pixels + S - 1 && ow_first + i >= 0 && ow_first + i < OW;
                    strip[i] = real[i] ? io::load(dy, n * ys0 + oh * ys1 + (ow_first + i) * ys2 + c * ys3) : 0;
                }
#pragma unroll
                for (int kw = 0; kw < S; ++kw) {
                    if (kw >= KW) break;
                    const typename io::compute wv = io::load(w, kh * ws0 + kw * ws1 + c * ws3);
#pragma unroll
                    for (int j = 0; j < ROW; ++j)  // a tap off the output is not added
                        if (real[j + S - 1 - kw]) acc[j] = cvz_fma(strip[j + S - 1 - kw], wv, acc[j]);
                }
                continue;
            }
            for (int kw = 0; kw < KW; ++kw) {
                const int tw0 = iw0 + pl - kw * dw;
#pragma unroll
                for (int j = 0; j < ROW; ++j) {
                    const int ow = cvz_landing(tw0 + j, sw);
                    if (j >= pixels || ow < 0 || ow >= OW) continue;
                    const int ybase = n * ys0 + oh * ys1 + ow * ys2;
                    for (int m = 0; m < M; ++m) {
                        const int q = c * M + m;
                        acc[j] = cvz_fma(io::load(dy, ybase + q * ys3), io::load(w, kh * ws0 + kw * ws1 + q * ws3), acc[j]);
                    }
                }
            }
        }
        const int xq = n * xs0 + ih * xs1 + c * xs3;
#pragma unroll
        for (int j = 0; j < ROW; ++j)
            if (j < pixels) io::store(dx, xq + (iw0 + j) * xs2, acc[j]);
    }
}

template <int TYPE>
__global__ void depthwise_input_grad_rows(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                                          typename IO<TYPE>::storage* dx, const i64* p, i64 total) {
    depthwise_input_grad_body<TYPE, DEPTHWISE_INPUT_ROW, false>(dy, w, dx, p, total);
}

// At most 80 registers (3 blocks of THREADS = 256 an SM), as the kernel ran when measured; left to
// itself nvcc gave it 85-95 (2 blocks).
template <int TYPE>
__global__ void __launch_bounds__(256, 3)
depthwise_input_grad_strips(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                            typename IO<TYPE>::storage* dx, const i64* p, i64 total) {
    depthwise_input_grad_body<TYPE, DEPTHWISE_INPUT_STRIP_ROW, true>(dy, w, dx, p, total);
}
