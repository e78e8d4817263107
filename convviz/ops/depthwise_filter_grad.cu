// The depthwise filter gradient on the GPU (launched by
// convviz/ops/depthwise_filter_grad.py).  Parameters p: [0..8] N H W C M OH OW KH KW,
// [12..17] sh sw dh dw pad_top pad_left, [18..21] input strides, [22..25]
// out_backprop strides (in elements, logical NHWC), [26] pixels per chunk.

// Pass 1 of the depthwise filter gradient: blockIdx.x is a chunk of output
// pixels, blockIdx.y walks the (tap, channel block) pairs; each thread owns one
// channel index q = c*M + m and sums, in pixel order, its terms over the chunk's
// pixels into partial[chunk][tap][q].  Chunks are small and fixed so that many
// blocks run at once and the grouping of the sum never depends on the device.
template <int TYPE>
__global__ void depthwise_filter_grad_partial(const typename IO<TYPE>::storage* x, const typename IO<TYPE>::storage* dy,
                                    typename IO<TYPE>::compute* partial, const i64* p) {
    typedef IO<TYPE> io;
    const i64 N = p[0], H = p[1], W = p[2], C = p[3], M = p[4], OH = p[5], OW = p[6], KH = p[7], KW = p[8];
    const i64 sh = p[12], sw = p[13], dh = p[14], dw = p[15], pt = p[16], pl = p[17];
    const i64* xs = p + 18;
    const i64* ys = p + 22;
    const i64 chunk_pixels = p[26];
    const i64 CM = C * M, taps = KH * KW;
    const i64 q_blocks = (CM + blockDim.x - 1) / blockDim.x;
    const i64 chunk = blockIdx.x;
    const i64 total = N * OH * OW;
    const i64 first = chunk * chunk_pixels;
    const i64 last = first + chunk_pixels < total ? first + chunk_pixels : total;
    for (i64 pair = blockIdx.y; pair < taps * q_blocks; pair += gridDim.y) {
        const i64 tap = pair / q_blocks;
        const i64 q = (pair % q_blocks) * blockDim.x + threadIdx.x;
        if (q >= CM) continue;
        const i64 kh = tap / KW, kw = tap % KW, c = q / M;
        typename io::compute acc = 0;
        // (n, oh, ow) of the chunk's first pixel, then stepped: no division per pixel.
        i64 ow = first % OW, oh = (first / OW) % OH, n = first / (OW * OH);
        for (i64 pix = first; pix < last; ++pix) {
            const i64 ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
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

// Pass 2 is merge_chunk_partials (cuda_tiles.cuh): out[tap][q] = the chunks' partial sums, in chunk order.
