// The tiled kernels' engine: one block computes a CVZ_BM x CVZ_BN tile of a product C = A B
// whose operands are gathered on the fly (implicit GEMM), CVZ_BK terms at a time through
// shared memory.  Each op supplies a policy (see forward.cu, input_grad.cu, filter_grad.cu)
// that says where row m / column n / term k of its operands live:
//
//   struct Policy {
//       typedef ... compute;                  // float, double or unsigned int
//       int K, M, m0;                         // terms per output, rows, the block's first row
//       CvzFetched<TYPE, A_BY_TERM, B_BY_TERM> next;  // a step's values between fetch and cvz_put
//       void fetch(int k0);                   // read step k0's values into next
//       void store(compute (*acc)[4], const int* rows, const int* cols);  // acc[i][j] at rows[i], cols[j]
//   };
//
// Software pipelined: a step's values are fetched from global memory into registers while the
// block multiplies the previous step's tiles, so global latency hides behind the arithmetic
// (with fetch and store in one call the compiler serialised each load with its shared store).
//
// Semantics kept from the one-thread-per-element kernels:
// - Each output sums its terms in ascending k, in one thread: bitwise reproducible.
// - A term that does not exist (padding, a stride gap, past the edge of the tile) is loaded as
//   a = 0 and marked in a_real; multiplying it costs nothing (0 * b adds +-0 to a sum that never
//   is -0) unless b is NaN or infinite, so a block whose b tile holds such a value runs the
//   careful loop, which skips those terms: a NaN weight reaches only the cells whose sum has it.
// - Half types (float16, bfloat16) multiply on tensor cores where the device has them
//   (mma.sync m16n8k16, float32 accumulators): exact products of the 16-bit values, summed in
//   float32 by the tensor core's adder (16 terms at a time, not rounded after each add: the
//   tests hold it to the accurate bound), one rounding at the store.  A step whose tiles hold a
//   value a tensor core may flush (a subnormal, or one so small that a product could be) or a
//   NaN or infinity runs the careful loop instead.
// - 32-bit indices: the launchers use these kernels only when every offset fits (cuda.tiled_fits).

#define CVZ_BM 64
#define CVZ_BN 64
#define CVZ_BK 16
#define CVZ_TILE_THREADS 256  // 16 x 16 threads, 4 x 4 neighbouring outputs each (8 warps of 32 x 16 with mma)
// Rows of the shared tiles are padded by 4 elements: a loader that writes down a column (16 k
// for one m) then spreads over the banks, and a row's 4 values stay 16-byte aligned.
#define CVZ_PAD 4
#define CVZ_NO_ROW (-(1 << 30))  // a row past the product's last: any tap of it lands below 0

// Finite for floats (inf - inf and NaN - NaN are NaN), always for unsigned int.
template <typename T>
__device__ inline bool cvz_is_finite(T v) {
    return v - v == (T)0;
}

// Whether the tensor-core path may take value v of a half type: finite, and zero or at least
// 2^-56 in magnitude (products of two such, and their sums, are zero or normal floats; float16
// values are, except its subnormals below 2^-14, which take the careful loop too).  Read from the
// bits: under CuPy's -ftz=true a float comparison would see a subnormal as 0.
template <int TYPE>
__device__ inline bool cvz_mma_safe(float v) {
    const unsigned int magnitude = __float_as_uint(v) & 0x7fffffffu;
    const unsigned int least = (TYPE == 0 ? 127u - 14u : 127u - 56u) << 23;  // 2^-14, 2^-56
    return magnitude == 0 || (magnitude >= least && magnitude < 0x7f800000u);
}

// Whether value v of a step lets it take the fast loop: for half types, a value the tensor cores
// multiply exactly (cvz_mma_safe, a and b); else a finite b (a's padding zeros times a NaN or
// infinite b would add NaN where no term exists).
template <int TYPE>
__device__ inline bool cvz_fast_a(typename IO<TYPE>::compute v) {
    return TYPE > 1 || cvz_mma_safe<TYPE>(v);
}
template <int TYPE>
__device__ inline bool cvz_fast_b(typename IO<TYPE>::compute v) {
    return TYPE > 1 ? cvz_is_finite(v) : cvz_mma_safe<TYPE>(v);
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

// Tensor cores: float16 (TYPE 0) or bfloat16 (TYPE 1) storage, on devices of compute capability
// 8.0 and later (NVRTC compiles for the device at hand).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define CVZ_MMA 1
#else
#define CVZ_MMA 0
#endif

// Two values of the tiles (exactly representable in the half type: they were loaded from it) as
// the pair a tensor-core fragment register holds, lo in the low 16 bits.
template <int TYPE>
__device__ inline unsigned int cvz_pack_pair(float lo, float hi) {
#if CVZ_MMA
    if (TYPE == 0) {
        const __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<const unsigned int*>(&h);
    }
    return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);  // the high halves: exact
#else
    return 0;
#endif
}

// d += A B for one 16 x 8 output fragment over 16 terms (PTX mma.m16n8k16, row.col, f32 accumulators).
template <int TYPE>
__device__ inline void cvz_mma_16816(float* d, const unsigned int* a, const unsigned int* b) {
#if CVZ_MMA
    if (TYPE == 0)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Which outputs a thread owns.  FMA path: the 4 x 4 neighbours at (4 ty + i, 4 tx + j).  Tensor
// cores: warp w takes the 32 x 16 tile at (32 (w / 4), 16 (w % 4)) as 2 x 2 fragments of 16 x 8;
// lane l = 4 group + t of a fragment holds rows group and group + 8, columns 2 t and 2 t + 1
// (PTX's accumulator layout): rows[2 mi + h] = 32 (w / 4) + 16 mi + 8 h + group,
// cols[2 ni + c] = 16 (w % 4) + 8 ni + 2 t + c.
template <bool MMA>
__device__ inline void cvz_owned(int* rows, int* cols) {
    if (MMA) {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, t = lane % 4;
        for (int i = 0; i < 4; ++i) {
            rows[i] = 32 * (warp / 4) + 16 * (i / 2) + 8 * (i % 2) + group;
            cols[i] = 16 * (warp % 4) + 8 * (i / 2) + 2 * t + i % 2;
        }
    } else {
        for (int i = 0; i < 4; ++i) rows[i] = 4 * (threadIdx.x / 16) + i, cols[i] = 4 * (threadIdx.x % 16) + i;
    }
}

// One step on tensor cores: acc[2 mi + h][2 ni + c] (the cvz_owned layout) += the step's 16 terms.
template <int TYPE, typename T>
__device__ inline void cvz_mma_step(T (*a_tile)[CVZ_BM + CVZ_PAD], T (*b_tile)[CVZ_BN + CVZ_PAD], T (*acc)[4],
                                    const int* rows, const int* cols) {
#if CVZ_MMA
    const int t = threadIdx.x % 4, k = 2 * t;
    unsigned int a[2][4], b[2][2];
    for (int mi = 0; mi < 2; ++mi) {
        const int r0 = rows[2 * mi], r1 = rows[2 * mi + 1];
        a[mi][0] = cvz_pack_pair<TYPE>(a_tile[k][r0], a_tile[k + 1][r0]);
        a[mi][1] = cvz_pack_pair<TYPE>(a_tile[k][r1], a_tile[k + 1][r1]);
        a[mi][2] = cvz_pack_pair<TYPE>(a_tile[k + 8][r0], a_tile[k + 9][r0]);
        a[mi][3] = cvz_pack_pair<TYPE>(a_tile[k + 8][r1], a_tile[k + 9][r1]);
    }
    for (int ni = 0; ni < 2; ++ni) {
        const int n = (cols[2 * ni] & ~7) + threadIdx.x % 32 / 4;  // B's column for this lane: its group
        b[ni][0] = cvz_pack_pair<TYPE>(b_tile[k][n], b_tile[k + 1][n]);
        b[ni][1] = cvz_pack_pair<TYPE>(b_tile[k + 8][n], b_tile[k + 9][n]);
    }
    for (int mi = 0; mi < 2; ++mi)
        for (int ni = 0; ni < 2; ++ni) {
            float d[4] = {acc[2 * mi][2 * ni], acc[2 * mi][2 * ni + 1], acc[2 * mi + 1][2 * ni],
                          acc[2 * mi + 1][2 * ni + 1]};
            cvz_mma_16816<TYPE>(d, a[mi], b[ni]);
            acc[2 * mi][2 * ni] = d[0], acc[2 * mi][2 * ni + 1] = d[1];
            acc[2 * mi + 1][2 * ni] = d[2], acc[2 * mi + 1][2 * ni + 1] = d[3];
        }
#else  // no tensor cores: each thread sums its own outputs' 16 products, then adds them
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            T sum = 0;
            for (int k = 0; k < CVZ_BK; ++k) sum = cvz_fma(a_tile[k][rows[i]], b_tile[k][cols[j]], sum);
            acc[i][j] = cvz_add(acc[i][j], sum);
        }
#endif
}

// The place of a thread's value i (of 4) in a 16-term x 64 tile: by term, the thread's term is
// threadIdx.x % 16 and its columns threadIdx.x / 16 + 16 i (neighbouring threads take
// neighbouring terms); else its column is threadIdx.x % 64 and its terms threadIdx.x / 64 + 4 i
// (neighbouring threads take neighbouring columns).
template <bool BY_TERM>
__device__ inline void cvz_tile_slot(int i, int& k, int& col) {
    if (BY_TERM)
        k = threadIdx.x % CVZ_BK, col = threadIdx.x / CVZ_BK + CVZ_BK * i;
    else
        k = threadIdx.x / CVZ_BM + 4 * i, col = threadIdx.x % CVZ_BM;
}

// A thread's values of one step, from the policy's fetch to cvz_put, with what every policy
// says alike: its type code and where the values go in the tiles (cvz_tile_slot: a[i] at slot
// i of A_BY_TERM, b[i] at slot i of B_BY_TERM).
template <int TYPE, bool A_BY_TERM, bool B_BY_TERM>
struct CvzFetched {
    static constexpr int type = TYPE;
    static constexpr bool a_by_term = A_BY_TERM, b_by_term = B_BY_TERM;
    typename IO<TYPE>::compute a[4], b[4];
    bool a_real[4];  // whether each a value is a term that exists
};

// The values the policy fetched into the shared tiles; whether the step may take the fast loop
// (cvz_fast_a, cvz_fast_b).
template <class Fetched, typename T>
__device__ inline bool cvz_put(const Fetched& next, T (*a)[CVZ_BM + CVZ_PAD], unsigned char (*a_real)[CVZ_BM],
                               T (*b)[CVZ_BN + CVZ_PAD]) {
    bool fast = true;
    for (int i = 0; i < 4; ++i) {
        int k, col;
        cvz_tile_slot<Fetched::a_by_term>(i, k, col);
        a[k][col] = next.a[i];
        a_real[k][col] = next.a_real[i];
        cvz_tile_slot<Fetched::b_by_term>(i, k, col);
        b[k][col] = next.b[i];
        fast = fast && cvz_fast_a<Fetched::type>(next.a[i]) && cvz_fast_b<Fetched::type>(next.b[i]);
    }
    return fast;
}

template <class Policy>
__device__ void cvz_tiled_product(Policy& op) {
    typedef typename Policy::compute T;
    constexpr int type = decltype(op.next)::type;
    if (op.m0 >= op.M) return;  // the whole block: a smaller stride phase than the grid's largest
    // Half types take the tensor-core layout (cvz_owned); without tensor cores (the CPU
    // emulator, a device before compute capability 8.0) cvz_mma_step sums the same terms itself.
    constexpr bool mma = type <= 1;  // float16, bfloat16
    __shared__ __align__(16) T a_tile[CVZ_BK][CVZ_BM + CVZ_PAD];
    __shared__ __align__(16) T b_tile[CVZ_BK][CVZ_BN + CVZ_PAD];
    __shared__ unsigned char a_real[CVZ_BK][CVZ_BM];
    int rows[4], cols[4];
    cvz_owned<mma>(rows, cols);
    T acc[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0;
    if (op.K > 0) op.fetch(0);
    for (int k0 = 0; k0 < op.K; k0 += CVZ_BK) {
        const bool fast = cvz_put(op.next, a_tile, a_real, b_tile);
        if (k0 + CVZ_BK < op.K) op.fetch(k0 + CVZ_BK);  // in flight while this step multiplies
        if (!__syncthreads_or(!fast)) {
            if constexpr (mma) {
                cvz_mma_step<type>(a_tile, b_tile, acc, rows, cols);
            } else {
#pragma unroll
                for (int k = 0; k < CVZ_BK; ++k) {
                    T a[4], b[4];
                    cvz_load4(&a_tile[k][rows[0]], a);
                    cvz_load4(&b_tile[k][cols[0]], b);
#pragma unroll
                    for (int i = 0; i < 4; ++i)
#pragma unroll
                        for (int j = 0; j < 4; ++j) acc[i][j] = cvz_fma(a[i], b[j], acc[i][j]);
                }
            }
        } else {  // a NaN or infinity among the b values (or a tiny one): add only the terms that exist
            for (int k = 0; k < CVZ_BK; ++k)
                for (int i = 0; i < 4; ++i) {
                    if (!a_real[k][rows[i]]) continue;
                    const T a = a_tile[k][rows[i]];
                    for (int j = 0; j < 4; ++j) acc[i][j] = cvz_fma(a, b_tile[k][cols[j]], acc[i][j]);
                }
        }
        __syncthreads();
    }
    op.store(acc, rows, cols);
}

// b[k][n] = values[k * row_stride + n] for the tile's rows k0.. and columns n0.. (0 outside
// [0, K) x [0, N)): each thread loads 4 of the 16 x 64, consecutive threads consecutive n (the
// places of b_by_term = false).
template <int TYPE>
__device__ inline void cvz_fetch_dense_b(const typename IO<TYPE>::storage* values, int row_stride, int K, int N,
                                         int k0, int n0, typename IO<TYPE>::compute* v) {
    for (int i = 0; i < 4; ++i) {
        int k, n;
        cvz_tile_slot<false>(i, k, n);
        k += k0;
        v[i] = k < K && n0 + n < N ? IO<TYPE>::load(values, (i64)k * row_stride + n0 + n)
                                   : (typename IO<TYPE>::compute)0;
    }
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
    for (i64 chunk = 0; chunk < n_chunks; ++chunk) total = cvz_add(total, partial[chunk * per_chunk + i]);
    io::store(out, i, total);
}
