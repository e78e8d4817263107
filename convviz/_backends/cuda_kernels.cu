// convviz CUDA kernels, compiled at run time by CuPy (NVRTC), once per device.
//
// Same semantics as the CPU kernels: arrays arrive in logical NHWC order with
// element strides (so NCHW and non-contiguous views need no copies); half types
// are read into float and rounded once on the way out; int32 is computed as
// unsigned int (wrapping, exactly TensorFlow's int32 arithmetic).
//
// Deterministic: every input-gradient element is computed by one thread in one
// fixed order; the filter gradient sums fixed chunks of pixels into partial sums
// (pass 1) that are then added in chunk order (pass 2) -- no atomics.
//
// Parameters travel in one int64 array `p` (see convviz/_backends/cuda.py):
//   [0..11]  N H W C_in OH OW C_out KH KW G cin_g cout_g      (input gradient)
//   [12..17] sh sw dh dw pad_top pad_left
//   [18..21] strides of out_backprop (or input), [22..25] of dx (or out_backprop),
//   [26..29] of the filter (input gradient only)
//   filter gradient: [0..8] N H W C M OH OW KH KW, [12..17] as above,
//   [18..21] input strides, [22..25] out_backprop strides, [26] pixels per chunk.

#include <cuda_fp16.h>

typedef long long i64;

// Type codes, as on the CPU side: 0 float16, 1 bfloat16 (bits in uint16), 2 float32, 3 float64, 4 int32.
template <int TYPE> struct IO;

template <> struct IO<0> {
    typedef __half storage;
    typedef float compute;
    __device__ static float load(const __half* p, i64 i) { return __half2float(p[i]); }
    __device__ static void store(__half* p, i64 i, float v) { p[i] = __float2half_rn(v); }
};

template <> struct IO<1> {
    typedef unsigned short storage;
    typedef float compute;
    __device__ static float load(const unsigned short* p, i64 i) {
        return __uint_as_float(((unsigned int)p[i]) << 16);
    }
    __device__ static void store(unsigned short* p, i64 i, float v) {
        unsigned int u = __float_as_uint(v);
        if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN stays a (quiet) NaN
            p[i] = (unsigned short)((u >> 16) | 0x40u);
            return;
        }
        u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
        p[i] = (unsigned short)(u >> 16);
    }
};

template <> struct IO<2> {
    typedef float storage;
    typedef float compute;
    __device__ static float load(const float* p, i64 i) { return p[i]; }
    __device__ static void store(float* p, i64 i, float v) { p[i] = v; }
};

template <> struct IO<3> {
    typedef double storage;
    typedef double compute;
    __device__ static double load(const double* p, i64 i) { return p[i]; }
    __device__ static void store(double* p, i64 i, double v) { p[i] = v; }
};

template <> struct IO<4> {
    typedef unsigned int storage;
    typedef unsigned int compute;
    __device__ static unsigned int load(const unsigned int* p, i64 i) { return p[i]; }
    __device__ static void store(unsigned int* p, i64 i, unsigned int v) { p[i] = v; }
};

// One thread per input-gradient element dx[n, ih, iw, ci] (ci fastest: neighbouring
// threads write neighbouring channels in NHWC).  Terms are added in order of
// (kh, kw, output channel), like the CPU kernels' plain path.
template <int TYPE>
__global__ void input_grad(const typename IO<TYPE>::storage* dy, const typename IO<TYPE>::storage* w,
                           typename IO<TYPE>::storage* dx, const i64* p, i64 total) {
    typedef IO<TYPE> io;
    const i64 H = p[1], W = p[2], Cin = p[3], OH = p[4], OW = p[5], KH = p[7], KW = p[8];
    const i64 cin_g = p[10], cout_g = p[11];
    const i64 sh = p[12], sw = p[13], dh = p[14], dw = p[15], pt = p[16], pl = p[17];
    const i64* ys = p + 18;
    const i64* xs = p + 22;
    const i64* ws = p + 26;
    for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x) {
        const i64 ci = idx % Cin;
        i64 rest = idx / Cin;
        const i64 iw = rest % W;
        rest /= W;
        const i64 ih = rest % H;
        const i64 n = rest / H;
        const i64 g = ci / cin_g, cl = ci % cin_g;
        typename io::compute acc = 0;
        for (i64 kh = 0; kh < KH; ++kh) {
            const i64 th = ih + pt - kh * dh;
            if (th < 0 || th % sh != 0) continue;
            const i64 oh = th / sh;
            if (oh >= OH) continue;
            for (i64 kw = 0; kw < KW; ++kw) {
                const i64 tw = iw + pl - kw * dw;
                if (tw < 0 || tw % sw != 0) continue;
                const i64 ow = tw / sw;
                if (ow >= OW) continue;
                const i64 ybase = n * ys[0] + oh * ys[1] + ow * ys[2];
                const i64 wbase = kh * ws[0] + kw * ws[1] + cl * ws[2];
                for (i64 co = g * cout_g; co < (g + 1) * cout_g; ++co)
                    acc += io::load(dy, ybase + co * ys[3]) * io::load(w, wbase + co * ws[3]);
            }
        }
        io::store(dx, n * xs[0] + ih * xs[1] + iw * xs[2] + ci * xs[3], acc);
    }
}

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

// Pass 2: out[tap][q] = sum of partial[chunk][tap][q] over chunks, in chunk order.
template <int TYPE>
__global__ void depthwise_filter_grad_merge(const typename IO<TYPE>::compute* partial, typename IO<TYPE>::storage* out,
                                  i64 n_chunks, i64 per_chunk) {
    typedef IO<TYPE> io;
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= per_chunk) return;
    typename io::compute total = 0;
    for (i64 chunk = 0; chunk < n_chunks; ++chunk) total += partial[chunk * per_chunk + i];
    io::store(out, i, total);
}
