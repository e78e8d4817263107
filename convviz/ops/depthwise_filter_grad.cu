// The depthwise filter gradient on the GPU (launched by
// convviz/ops/depthwise_filter_grad.py).  Parameters p: [0..8] N H W C M OH OW KH KW,
// [12..17] sh sw dh dw pad_top pad_left, [18..21] input strides, [22..25]
// out_backprop strides (in elements, logical NHWC), [26] pixels per chunk, [27] QW, [28] P,
// [29] 1 when lanes run along the pixels (see below).

// Pass 1: partial[chunk][tap][q] = the sum over the chunk's output pixels (fixed, small chunks:
// many blocks run at once, and the grouping of the sum never depends on the device) of one tap's
// terms for channel index q = c*M + m.  A thread takes all of its taps at once (up to DWF_TAPS),
// so it reads the output gradient once for them, and one of P pixel phases (phase ph sums pixels
// first + ph, first + ph + P, ... in order); the phases' sums are then added in phase order,
// through shared memory.  A block is QW channels by P phases (QW * P = DWF_THREADS), its lanes
// along the channels where they are contiguous (NHWC: QW = 32, P = 8) or along the pixels
// (NCHW: QW = 8, P = 32; lanes along the channels read 32 channels a plane apart there).  On an
// H200 against the thread-per-(tap, channel) kernel this replaced: NHWC 0.55-0.86x the time
// (dwf_mobilenet 0.089 -> 0.050 ms), NCHW 0.39x (0.154 -> 0.059).  blockIdx.x is the chunk,
// blockIdx.y walks (tap group, channel block) pairs.  Index type I: i64, or int
// (depthwise_filter_grad_phases_narrow) when every offset fits.
// 9 taps (a 3x3 window in one pass): 80 registers a thread, 3 blocks an SM; 16 took 128 (nvcc -Xptxas -v, sm_90).
constexpr int DWF_TAPS = 9;
constexpr int DWF_THREADS = 256;
constexpr int DWF_MIN_QW = 8;

template <int TYPE, typename I>
__device__ void depthwise_filter_grad_phases_body(const typename IO<TYPE>::storage* x,
                                                  const typename IO<TYPE>::storage* dy,
                                                  typename IO<TYPE>::compute* partial, const i64* p) {
    typedef IO<TYPE> io;
    typedef typename io::compute compute;
    // [ph][t][qi] with lanes along the channels, [qi][t][ph] padded to P + 1 with lanes along the
    // pixels: either way a warp's writes, and its reads when the phases are added, hit distinct banks.
    __shared__ compute phase_sums[DWF_TAPS * (DWF_THREADS + DWF_THREADS / DWF_MIN_QW)];
    const I N = p[0], H = p[1], W = p[2], C = p[3], M = p[4], OH = p[5], OW = p[6], KH = p[7], KW = p[8];
    const I sh = p[12], sw = p[13], dh = p[14], dw = p[15], pt = p[16], pl = p[17];
    const I xs0 = p[18], xs1 = p[19], xs2 = p[20], xs3 = p[21], ys0 = p[22], ys1 = p[23], ys2 = p[24], ys3 = p[25];
    const I chunk_pixels = p[26];
    const int QW = (int)p[27], P = (int)p[28];
    const bool along_pixels = p[29] != 0;
    const I CM = C * M, taps = KH * KW, groups = (taps + DWF_TAPS - 1) / DWF_TAPS, q_blocks = (CM + QW - 1) / QW;
    const int qi = along_pixels ? threadIdx.x / P : threadIdx.x % QW;
    const int ph = along_pixels ? threadIdx.x % P : threadIdx.x / QW;
    auto slot = [&](int q_index, int t, int phase) {
        return along_pixels ? (q_index * DWF_TAPS + t) * (P + 1) + phase : (phase * DWF_TAPS + t) * QW + q_index;
    };
    const I chunk = blockIdx.x;
    const I first = chunk * chunk_pixels;
    const I last = first + chunk_pixels < N * OH * OW ? first + chunk_pixels : N * OH * OW;
    for (I pair = blockIdx.y; pair < groups * q_blocks; pair += gridDim.y) {  // block-uniform: the barriers
        const I t0 = pair / q_blocks * DWF_TAPS, q_first = pair % q_blocks * QW, q = q_first + qi;
        const int n_taps = (int)(taps - t0 < DWF_TAPS ? taps - t0 : DWF_TAPS);
        const I c = q / M;
        compute acc[DWF_TAPS];
        I row_shift[DWF_TAPS], col_shift[DWF_TAPS];
#pragma unroll
        for (int t = 0; t < DWF_TAPS; ++t) {
            acc[t] = 0;
            row_shift[t] = (t0 + t) / KW * dh - pt;
            col_shift[t] = (t0 + t) % KW * dw - pl;
        }
        I pix = first + ph;
        I ow = pix % OW, oh = pix / OW % OH, n = pix / (OW * OH);
        for (; q < CM && pix < last; pix += P) {
            const compute d = io::load(dy, n * ys0 + oh * ys1 + ow * ys2 + q * ys3);
            const I x_base = n * xs0 + c * xs3;
#pragma unroll
            for (int t = 0; t < DWF_TAPS; ++t) {
                const I ih = oh * sh + row_shift[t], iw = ow * sw + col_shift[t];
                if (t < n_taps && ih >= 0 && ih < H && iw >= 0 && iw < W)  // otherwise the tap reads padding
                    acc[t] = cvz_fma(io::load(x, x_base + ih * xs1 + iw * xs2), d, acc[t]);
            }
            for (ow += P; ow >= OW; ow -= OW)  // pixel + P: no division per pixel
                if (++oh == OH) oh = 0, ++n;
        }
#pragma unroll
        for (int t = 0; t < DWF_TAPS; ++t)
            if (t < n_taps) phase_sums[slot(qi, t, ph)] = acc[t];
        __syncthreads();
        for (int i = threadIdx.x; i < n_taps * QW; i += blockDim.x) {  // (tap, channel): its phases in order
            const int t = i / QW, k = i % QW;
            if (q_first + k >= CM) continue;
            compute sum = 0;
            for (int phase = 0; phase < P; ++phase) sum = cvz_add(sum, phase_sums[slot(k, t, phase)]);
            partial[(chunk * taps + t0 + t) * CM + q_first + k] = sum;
        }
        __syncthreads();
    }
}

template <int TYPE>
__global__ void depthwise_filter_grad_phases(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* dy,
                                             typename IO<TYPE>::compute* partial, const i64* p) {
    depthwise_filter_grad_phases_body<TYPE, i64>(x, dy, partial, p);
}

template <int TYPE>
__global__ void depthwise_filter_grad_phases_narrow(const typename IO<TYPE>::storage* x,
                                                    const typename IO<TYPE>::storage* dy,
                                                    typename IO<TYPE>::compute* partial, const i64* p) {
    depthwise_filter_grad_phases_body<TYPE, int>(x, dy, partial, p);
}

// Pass 2 is merge_chunk_partials (cuda_tiles.cuh): out[tap][q] = the chunks' partial sums, in chunk order.
