// What every convviz CUDA kernel shares: the element types and their conversions.
// convviz/_backends/cuda.py compiles this, then each op's kernels
// (convviz/ops/<op>.cu, declared by the op's module), as one source, at run time
// by CuPy (NVRTC), once per device.
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
// Parameters travel in one int64 array `p`, laid out by each op (see its .cu); the dense layout,
// which all but the depthwise filter gradient share, is unpacked by ConvParams below.

#include <cuda_fp16.h>

typedef long long i64;

// The dense kernels' parameters, as cuda.dense_params packs them, written down here only: the
// kernels of conv2d, its input and filter gradients and (with the filter seen as the dense
// [KH, KW, 1, C * M], so C_out = C * M, G = C, cout_g = M) the depthwise forward pass and input
// gradient.  [0..11] N H W C_in OH OW C_out KH KW G cin_g cout_g, [12..17] sh sw dh dw pad_top
// pad_left, then the element strides (logical NHWC, filters HWIO) of the kernel's first operand
// [18..21], its result [22..25] and its second operand [26..29], in elements; each kernel says
// which array is which.  I is the kernel's index type (int where the launcher checked that every
// offset fits).  A local of the kernel: it lives in registers, and a field the kernel never reads
// is a load the compiler drops (so no kernel pays for the fields it does not use).
template <typename I>
struct ConvParams {
    I N, H, W, Cin, OH, OW, Cout, KH, KW, G, cin_g, cout_g;
    I sh, sw, dh, dw, pad_top, pad_left;
    I first_strides[4], result_strides[4], second_strides[4];

    __device__ explicit ConvParams(const i64* p)
        : N((I)p[0]), H((I)p[1]), W((I)p[2]), Cin((I)p[3]), OH((I)p[4]), OW((I)p[5]), Cout((I)p[6]),
          KH((I)p[7]), KW((I)p[8]), G((I)p[9]), cin_g((I)p[10]), cout_g((I)p[11]), sh((I)p[12]),
          sw((I)p[13]), dh((I)p[14]), dw((I)p[15]), pad_top((I)p[16]), pad_left((I)p[17]),
          // Spelled out, not a loop: until such a loop is unrolled the arrays live in memory, and
          // the optimizer shapes the kernel's loops around those loads (with one,
          // depthwise_input_grad_rows lost its unswitched stride-1 path).
          first_strides{(I)p[18], (I)p[19], (I)p[20], (I)p[21]},
          result_strides{(I)p[22], (I)p[23], (I)p[24], (I)p[25]},
          second_strides{(I)p[26], (I)p[27], (I)p[28], (I)p[29]} {}
};

// The output index o with o * stride == t (an input-gradient tap landing on an output cell),
// or -1 when t is negative or falls between output cells; no division at stride 1.
template <typename I>
__device__ inline I cvz_landing(I t, I stride) {
    if (t < 0 || (stride != 1 && t % stride != 0)) return -1;
    return stride == 1 ? t : t / stride;
}

// CuPy compiles every kernel with -ftz=true (it appends the option after the caller's, and NVRTC
// keeps the last): plain float arithmetic would flush subnormal inputs and results to zero, where
// the CPU kernels and the float64 reference keep them.  The kernels' sums go through these, which
// name the IEEE instructions (no .ftz) themselves; the same rounding as the fused a * b + c that
// NVRTC made of `acc += a * b`.  double and unsigned int have no flushing to avoid.
__device__ inline float cvz_fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
    float d;
    asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
    return d;
#else
    return a * b + c;
#endif
}
__device__ inline double cvz_fma(double a, double b, double c) { return a * b + c; }
__device__ inline unsigned int cvz_fma(unsigned int a, unsigned int b, unsigned int c) { return a * b + c; }

__device__ inline float cvz_add(float a, float b) {
#ifdef __CUDA_ARCH__
    float d;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
#else
    return a + b;
#endif
}
__device__ inline double cvz_add(double a, double b) { return a + b; }
__device__ inline unsigned int cvz_add(unsigned int a, unsigned int b) { return a + b; }

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
