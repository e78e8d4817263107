// The tiled kernels' engine: one block computes a CVZ_BM x CVZ_BN tile of a product C = A B
// whose operands are gathered on the fly (implicit GEMM), CVZ_BK terms at a time through
// shared memory.  Each op supplies a policy (see forward.cu, input_grad.cu, filter_grad.cu)
// that says where row m / column n / term k of its operands live:
//
//   struct Policy {
//       typedef ... compute;                            // float, double or unsigned int
//       int K, M, m0;                                   // terms per output, rows, the block's first row
//       void load_a(compute (*a)[CVZ_BM + CVZ_PAD], unsigned char (*a_real)[CVZ_BM], int k0);
//       bool load_b(compute (*b)[CVZ_BN + CVZ_PAD], int k0);  // false when a loaded value is not finite
//       void store(compute (*acc)[4], int row, int col);      // rows row + i, columns col + j
//   };
//
// Semantics kept from the one-thread-per-element kernels:
// - Each output sums its terms in ascending k, in one thread: bitwise reproducible.
// - A term that does not exist (padding, a stride gap, past the edge of the tile) is loaded as
//   a = 0 and marked in a_real; multiplying it costs nothing (0 * b adds +-0 to a sum that never
//   is -0) unless b is NaN or infinite, so a block whose b tile holds such a value runs the
//   careful loop, which skips those terms: a NaN weight reaches only the cells whose sum has it.
// - 32-bit indices: the launchers use these kernels only when every offset fits (cuda.tiled_fits).

#define CVZ_BM 64
#define CVZ_BN 64
#define CVZ_BK 16
#define CVZ_TILE_THREADS 256  // 16 x 16 threads, 4 x 4 neighbouring outputs each
// Rows of the shared tiles are padded by 4 elements: a loader that writes down a column (16 k
// for one m) then spreads over the banks, and a row's 4 values stay 16-byte aligned.
#define CVZ_PAD 4
#define CVZ_NO_ROW (-(1 << 30))  // a row past the product's last: any tap of it lands below 0

// Finite for floats (inf - inf and NaN - NaN are NaN), always for unsigned int.
template <typename T>
__device__ inline bool cvz_is_finite(T v) {
    return v - v == (T)0;
}

// The 4 neighbouring values at p (16-byte aligned) in one or two vector loads from shared memory.
__device__ inline void cvz_load4(const float* p, float* v) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
__device__ inline void cvz_load4(const unsigned int* p, unsigned int* v) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
__device__ inline void cvz_load4(const double* p, double* v) {
    const double2 q = reinterpret_cast<const double2*>(p)[0], r = reinterpret_cast<const double2*>(p)[1];
    v[0] = q.x, v[1] = q.y, v[2] = r.x, v[3] = r.y;
}

template <class Policy>
__device__ void cvz_tiled_product(Policy& op) {
    typedef typename Policy::compute T;
    if (op.m0 >= op.M) return;  // the whole block: a smaller stride phase than the grid's largest
    __shared__ __align__(16) T a_tile[CVZ_BK][CVZ_BM + CVZ_PAD];
    __shared__ __align__(16) T b_tile[CVZ_BK][CVZ_BN + CVZ_PAD];
    __shared__ unsigned char a_real[CVZ_BK][CVZ_BM];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    T acc[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0;
    for (int k0 = 0; k0 < op.K; k0 += CVZ_BK) {
        op.load_a(a_tile, a_real, k0);
        const bool b_finite = op.load_b(b_tile, k0);
        if (!__syncthreads_or(!b_finite)) {
#pragma unroll
            for (int k = 0; k < CVZ_BK; ++k) {
                T a[4], b[4];
                cvz_load4(&a_tile[k][4 * ty], a);
                cvz_load4(&b_tile[k][4 * tx], b);
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
            }
        } else {  // a NaN or infinity among the b values: add only the terms that exist
            for (int k = 0; k < CVZ_BK; ++k)
                for (int i = 0; i < 4; ++i) {
                    if (!a_real[k][4 * ty + i]) continue;
                    const T a = a_tile[k][4 * ty + i];
                    for (int j = 0; j < 4; ++j) acc[i][j] += a * b_tile[k][4 * tx + j];
                }
        }
        __syncthreads();
    }
    op.store(acc, 4 * ty, 4 * tx);
}

// b[k][n] = values[k * row_stride + n] for the tile's rows k0.. and columns n0.. (0 outside
// [0, K) x [0, N)): each thread loads 4 of the 16 x 64, consecutive threads consecutive n.
template <int TYPE>
__device__ inline bool cvz_load_dense_b(const typename IO<TYPE>::storage* values, int row_stride, int K, int N,
                                        int k0, int n0, typename IO<TYPE>::compute (*b)[CVZ_BN + CVZ_PAD]) {
    typedef IO<TYPE> io;
    const int n = threadIdx.x % CVZ_BN;
    bool finite = true;
    for (int i = 0; i < 4; ++i) {
        const int kk = threadIdx.x / CVZ_BN + 4 * i, k = k0 + kk;
        typename io::compute v = 0;
        if (k < K && n0 + n < N) v = io::load(values, (i64)k * row_stride + n0 + n);
        finite = finite && cvz_is_finite(v);
        b[kk][n] = v;
    }
    return finite;
}

// The tiled kernels' parameters: the dense ones (ConvParams), then what cuda.chunked_launch
// appends: [30] terms (the filter gradient: pixels) per chunk, [31] chunks, [32] elements of the
// result.  A separate struct because only the tiled launches pack these three.
struct TiledParams : ConvParams<int> {
    int per_chunk, chunks;
    i64 total;

    __device__ explicit TiledParams(const i64* p)
        : ConvParams<int>(p), per_chunk((int)p[30]), chunks((int)p[31]), total(p[32]) {}
};

// A tiled output at offset `at` of its (freshly allocated, so dense) result: stored, or, when
// the terms are split into chunks, this chunk's partial sum for merge_chunk_partials.
template <int TYPE>
__device__ inline void cvz_store_or_partial(typename IO<TYPE>::storage* out, typename IO<TYPE>::compute* partial,
                                            int chunk, int chunks, i64 total, int at,
                                            typename IO<TYPE>::compute v) {
    if (chunks == 1)
        IO<TYPE>::store(out, at, v);
    else
        partial[chunk * total + at] = v;
}

// The second pass of a split sum (the filter gradients' pixel chunks, the forward pass's and
// input gradient's term chunks, cuda.split_terms): out[i] = sum of
// partial[chunk][i] over the chunks, in chunk order, then rounded once to the storage type.
template <int TYPE>
__global__ void merge_chunk_partials(const typename IO<TYPE>::compute* partial, typename IO<TYPE>::storage* out,
                                     i64 n_chunks, i64 per_chunk) {
    typedef IO<TYPE> io;
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= per_chunk) return;
    typename io::compute total = 0;
    for (i64 chunk = 0; chunk < n_chunks; ++chunk) total += partial[chunk * per_chunk + i];
    io::store(out, i, total);
}
