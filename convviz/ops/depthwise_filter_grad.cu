// The depthwise filter gradient on the GPU (launched by
// convviz/ops/depthwise_filter_grad.py).  Parameters p: [0..8] N H W C M OH OW KH KW,
// [12..17] sh sw dh dw pad_top pad_left, [18..21] input strides, [22..25]
// out_backprop strides (in elements, logical NHWC), [26] pixels per chunk.

// Pass 1 of the depthwise filter gradient: blockIdx.x is a chunk of output
// pixels, blockIdx.y walks the (tap, channel block) pairs; each thread owns one
// channel index q = c*M + m and sums, in pixel order, its terms over the chunk's
// pixels into partial[chunk][tap][q].  Chunks are small and fixed so that many
// blocks run at once and the grouping of the sum never depends on the device.
// Index type I: i64, or int (depthwise_filter_grad_partial_narrow) when every offset fits.
template <int TYPE, typename I>
__device__ void depthwise_filter_grad_partial_body(const typename IO<TYPE>::storage* x,
                                                   const typename IO<TYPE>::storage* dy,
                                                   typename IO<TYPE>::compute* partial, const i64* p) {
    typedef IO<TYPE> io;
    const I N = p[0], H = p[1], W = p[2], C = p[3], M = p[4], OH = p[5], OW = p[6], KH = p[7], KW = p[8];
    const I sh = p[12], sw = p[13], dh = p[14], dw = p[15], pt = p[16], pl = p[17];
    I xs[4], ys[4];
    for (int k = 0; k < 4; ++k) xs[k] = (I)p[18 + k], ys[k] = (I)p[22 + k];
    const I chunk_pixels = p[26];
    const I CM = C * M, taps = KH * KW;
    const I q_blocks = (CM + blockDim.x - 1) / blockDim.x;
    const I chunk = blockIdx.x;
    const I total = N * OH * OW;
    const I first = chunk * chunk_pixels;
    const I last = first + chunk_pixels < total ? first + chunk_pixels : total;
    for (I pair = blockIdx.y; pair < taps * q_blocks; pair += gridDim.y) {
        const I tap = pair / q_blocks;
        const I q = (pair % q_blocks) * blockDim.x + threadIdx.x;
        if (q >= CM) continue;
        const I kh = tap / KW, kw = tap % KW, c = q / M;
        typename io::compute acc = 0;
        // (n, oh, ow) of the chunk's first pixel, then stepped: no division per pixel.
        I ow = first % OW, oh = (first / OW) % OH, n = first / (OW * OH);
        for (I pix = first; pix < last; ++pix) {
            const I ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W)  // otherwise the tap reads padding
                acc += io::load(x, n * xs[0] + ih * xs[1] + iw * xs[2] + c * xs[3]) *
                       io::load(dy, n * ys[0] + oh * ys[1] + ow * ys[2] + q * ys[3]);
            if (++ow == OW) {
                ow = 0;
                if (++oh == OH) {
                    oh = 0;
                    ++n;
                }
            }
        }
        partial[(chunk * taps + tap) * CM + q] = acc;
    }
}

template <int TYPE>
__global__ void depthwise_filter_grad_partial(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* dy,
                                              typename IO<TYPE>::compute* partial, const i64* p) {
    depthwise_filter_grad_partial_body<TYPE, i64>(x, dy, partial, p);
}

template <int TYPE>
__global__ void depthwise_filter_grad_partial_narrow(const typename IO<TYPE>::storage* x,
                                                     const typename IO<TYPE>::storage* dy,
                                                     typename IO<TYPE>::compute* partial, const i64* p) {
    depthwise_filter_grad_partial_body<TYPE, int>(x, dy, partial, p);
}

// Pass 2 is merge_chunk_partials (cuda_tiles.cuh): out[tap][q] = the chunks' partial sums, in chunk order.
