// The machine's limits, as the benchmark's roofline needs them: the FMA peak of
// each kernel variant and the memory bandwidth.  One file in three parts, as an
// op's (see cvz_per_isa.hpp):
//   1. the interface: all the Cython module convviz._machine includes (it
//      defines CVZ_INTERFACE_ONLY first);
//   2. the entry points, dispatching on tables [isa][f64] of the body's
//      instantiations, and the ISA-independent pieces (memory, first touch);
//   3. the body, compiled once per ISA: cvz_per_isa.hpp includes this file
//      again with CVZ_PER_ISA_PASS defined.
// Every parallel region runs on the threads asked for; without OpenMP, on one.
#ifndef CVZ_MACHINE_INTERFACE  // 1. the interface
#define CVZ_MACHINE_INTERFACE

#include "cvz_common.hpp"

namespace cvz {

// The memory kernels of machine_memory_pass.
enum MemoryKernel : int { MEM_READ = 0, MEM_WRITE = 1, MEM_COPY = 2, MEM_COPY_STREAM = 3 };

// Run `rounds` rounds of independent FMA chains (register-only, no memory
// traffic) of variant `isa` in float (f64 = 0) or double, on n_threads threads.
// Returns the seconds the parallel region took; *threads is set to the threads
// that ran, *flops to the floating-point operations done (2 per FMA lane),
// *sink to a value that depends on every chain (so none is optimised away).
double machine_fma(int isa, int f64, int n_threads, long long rounds, int* threads, double* flops, double* sink);

// The same with chains of bfloat16 dot products (AVX512_BF16 vdpbf16ps: 16 lanes,
// two products and two additions each), the instruction of precision="fast".
// Only on a CPU that has it (the caller checks: convviz._openmp_info.bf16_dot_available).
double machine_bf16_dot(int n_threads, long long rounds, int* threads, double* flops, double* sink);

// The same with chains of float16 FMAs (AVX512_FP16 vfmadd231ph: 32 lanes), the
// instruction of precision="fast" for float16.  Only where the CPU has it (the
// caller checks: convviz._openmp_info.f16_fma_available).
double machine_f16_fma(int n_threads, long long rounds, int* threads, double* flops, double* sink);

// The same with AMX-BF16 tiles: chains of tdpbf16ps into four accumulator
// tiles from operand tiles loaded once (16 x 16 x 32 products, two flops each,
// per instruction), the instruction bfloat16 runs on where the CPU has it.
// Only where it runs (the caller checks: amx_unusable_reason() is "").
double machine_amx_bf16(int n_threads, long long rounds, int* threads, double* flops, double* sink);

// Page-aligned memory, left untouched (the first touch decides where it lives);
// nullptr when there is none.  Free with machine_free.
void* machine_alloc(idx bytes);
void machine_free(void* p);

// Write a[0, n) and b[0, n) (floats) on n_threads threads, each thread the part
// the memory kernels give it: their pages then live near the thread that uses
// them.  Returns the threads that ran.
int machine_first_touch(float* a, float* b, idx n, int n_threads);

// One pass of memory kernel `kind` (MemoryKernel) of variant `isa` over n floats
// on n_threads threads, each its own contiguous part of 1024-element blocks
// (n a multiple of 1024; a and b aligned to 64 bytes): read sums a, write fills
// b, copy copies a to b with ordinary stores, copy-stream with streaming stores.
// Returns the seconds it took; *sink gets a value that depends on what was read.
double machine_memory_pass(int isa, int kind, const float* a, float* b, idx n, int n_threads, double* sink);

}  // namespace cvz

#endif  // CVZ_MACHINE_INTERFACE

#if defined(CVZ_INTERFACE_ONLY)
// The Cython module's include: the interface above is all it needs.
#elif !defined(CVZ_PER_ISA_PASS)  // 2. the entry points

#define CVZ_OP_BODY "cvz_machine.cpp"  // this file again, once per ISA
#include "cvz_per_isa.hpp"
#include "cvz_amx.hpp"

#include <chrono>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace cvz {

namespace {
typedef void (*FmaFn)(long long, double*, double*);
typedef void (*MemoryFn)(int, const float*, float*, idx, idx, double*);
const FmaFn fma_table[ISA_COUNT][2] = CVZ_ISA_TABLE(machine_fma_chains);
const MemoryFn memory_table[ISA_COUNT][2] = CVZ_ISA_TABLE(machine_memory_part);

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Thread t's part of n floats: whole 1024-element blocks, split evenly.
void part_of(idx n, int threads, int t, idx* begin, idx* end) {
    const idx blocks = n / 1024;
    *begin = blocks * t / threads * 1024;
    *end = blocks * (t + 1) / threads * 1024;
}

// The calling thread's number in its parallel region, and the region's size.
int thread_number() {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
int team_size() {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}
}  // namespace

namespace {
// Run fn(rounds) on n_threads threads; the seconds it took (see machine_fma).
double run_chains(FmaFn fn, int n_threads, long long rounds, int* threads, double* flops, double* sink) {
    int used = 1;
    double done = 0, total = 0;
    (void)n_threads;  // no OpenMP: one thread
    const auto start = std::chrono::steady_clock::now();
#ifdef _OPENMP
#pragma omp parallel num_threads(n_threads) reduction(+ : done, total)
#endif
    {
        if (thread_number() == 0) used = team_size();
        double my_flops = 0, my_sink = 0;
        fn(rounds, &my_flops, &my_sink);
        done += my_flops;
        total += my_sink;
    }
    const double seconds = seconds_since(start);
    *threads = used;
    *flops = done;
    *sink = total;
    return seconds;
}

#if CVZ_X86 && defined(__GNUC__)
// 16 chains of vdpbf16ps: acc += 1 * c + 1 * c per lane, c small (bfloat16 pairs).
__attribute__((target("avx512f,avx512bf16"))) void bf16_dot_chains(long long rounds, double* flops, double* sink) {
    __m512 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(1.0f + (float)i * 1e-3f);
    __m512i one = _mm512_set1_epi32(0x3f803f80), small = _mm512_set1_epi32(0x33d633d6);
    for (long long r = 0; r < rounds; ++r) {
        CVZ_UNROLL(16)
        for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)one, (__m512bh)small);
        __asm__("" : "+v"(one), "+v"(small));  // not loop invariants to the compiler
    }
    __m512 total = acc[0];
    for (int i = 1; i < 16; ++i) total = _mm512_add_ps(total, acc[i]);
    float lanes[16];  // (not _mm512_reduce_add_ps: GCC 12 warns in it, PR 105593)
    _mm512_storeu_ps(lanes, total);
    double sum = 0;
    for (int i = 0; i < 16; ++i) sum += lanes[i];
    *flops = 4.0 * 16 * 16 * (double)rounds;
    *sink = sum;
}
#endif

#if CVZ_AMX_COMPILED
CVZ_AMX_PUSH
// tdpbf16ps into tiles 0-3 from tiles 4-7 (zero operands: the instruction's
// time does not depend on its values, and the sums stay finite).
void amx_bf16_chains(long long rounds, double* flops, double* sink) {
    alignas(64) unsigned char scratch[AMX_CONFIG_BYTES + 1024];
    std::memset(scratch, 0, sizeof(scratch));
    amx_configure_tiles(scratch);
    std::uint16_t* zeros = (std::uint16_t*)(scratch + AMX_CONFIG_BYTES);
    _tile_zero(0);  // (tile numbers are immediates)
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, zeros, 64);
    _tile_loadd(5, zeros, 64);
    _tile_loadd(6, zeros, 64);
    _tile_loadd(7, zeros, 64);
    for (long long r = 0; r < rounds; ++r) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    float* out = (float*)zeros;
    _tile_stored(0, out, 64);
    double sum = 0;
    for (int i = 0; i < 256; ++i) sum += out[i];
    _tile_release();
    *flops = 4.0 * 16 * 16 * 32 * 2 * (double)rounds;
    *sink = sum;
}
CVZ_AMX_POP
#endif

#if CVZ_F16_FMA_COMPILED
// 16 chains of vfmadd231ph: acc = acc * one + small per lane (float16).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512fp16"))) void f16_fma_chains(long long rounds, double* flops,
                                                                                      double* sink) {
    __m512h acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ph((_Float16)(0.5f + (float)i * 1e-2f));
    __m512h one = _mm512_set1_ph((_Float16)1.0f), small = _mm512_set1_ph((_Float16)1e-4f);
    for (long long r = 0; r < rounds; ++r) {
        CVZ_UNROLL(16)
        for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ph(acc[i], one, small);
        __asm__("" : "+v"(one), "+v"(small));  // not loop invariants to the compiler
    }
    __m512h total = acc[0];
    for (int i = 1; i < 16; ++i) total = _mm512_add_ph(total, acc[i]);
    alignas(64) std::uint16_t lanes[32];
    _mm512_store_si512((void*)lanes, _mm512_castph_si512(total));
    double sum = 0;
    for (int i = 0; i < 32; ++i) sum += (double)f16_to_f32(lanes[i]);
    *flops = 2.0 * 32 * 16 * (double)rounds;
    *sink = sum;
}
#endif
}  // namespace

double machine_fma(int isa, int f64, int n_threads, long long rounds, int* threads, double* flops, double* sink) {
    return run_chains(isa_pick(fma_table, isa, f64), n_threads, rounds, threads, flops, sink);
}

double machine_f16_fma(int n_threads, long long rounds, int* threads, double* flops, double* sink) {
#if CVZ_F16_FMA_COMPILED
    return run_chains(&f16_fma_chains, n_threads, rounds, threads, flops, sink);
#else
    (void)n_threads; (void)rounds;
    *threads = 1; *flops = 0; *sink = 0;
    return 0;
#endif
}

double machine_amx_bf16(int n_threads, long long rounds, int* threads, double* flops, double* sink) {
#if CVZ_AMX_COMPILED
    if (amx_unusable_reason()[0] == '\0') return run_chains(&amx_bf16_chains, n_threads, rounds, threads, flops, sink);
#endif
    (void)n_threads; (void)rounds;
    *threads = 1; *flops = 0; *sink = 0;
    return 0;
}

double machine_bf16_dot(int n_threads, long long rounds, int* threads, double* flops, double* sink) {
#if CVZ_X86 && defined(__GNUC__)
    return run_chains(&bf16_dot_chains, n_threads, rounds, threads, flops, sink);
#else
    (void)n_threads; (void)rounds;
    *threads = 1; *flops = 0; *sink = 0;
    return 0;
#endif
}

void* machine_alloc(idx bytes) {
    // Large arrays on 2 MiB boundaries, and on Linux in transparent huge pages
    // where the system gives them on request: NumPy asks for them for its large
    // arrays (the kernels' tensors), so the bandwidth is measured with the same
    // pages (4 KiB pages would add TLB misses the kernels do not have).
    const idx align = bytes >= (idx(4) << 20) ? (idx(2) << 20) : 4096;
    if (bytes <= 0) bytes = 4096;
    bytes = (bytes + align - 1) & ~(align - 1);
#if defined(_MSC_VER)
    return _aligned_malloc((std::size_t)bytes, (std::size_t)align);
#else
    void* p = nullptr;
    if (posix_memalign(&p, (std::size_t)align, (std::size_t)bytes) != 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align > 4096) madvise(p, (std::size_t)bytes, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
    return p;
#endif
}

void machine_free(void* p) { free_aligned(p); }

int machine_first_touch(float* a, float* b, idx n, int n_threads) {
    int used = 1;
    (void)n_threads;
#ifdef _OPENMP
#pragma omp parallel num_threads(n_threads)
#endif
    {
        const int t = thread_number(), threads = team_size();
        if (t == 0) used = threads;
        idx begin, end;
        part_of(n, threads, t, &begin, &end);
        for (idx i = begin; i < end; ++i) {
            a[i] = 1.0f;
            b[i] = 0.0f;
        }
    }
    return used;
}

double machine_memory_pass(int isa, int kind, const float* a, float* b, idx n, int n_threads, double* sink) {
    const MemoryFn fn = isa_pick(memory_table, isa, 0);
    double total = 0;
    (void)n_threads;
    const auto start = std::chrono::steady_clock::now();
#ifdef _OPENMP
#pragma omp parallel num_threads(n_threads) reduction(+ : total)
#endif
    {
        idx begin, end;
        part_of(n, team_size(), thread_number(), &begin, &end);
        double mine = 0;
        fn(kind, a, b, begin, end, &mine);
        total += mine;
    }
    const double seconds = seconds_since(start);
    *sink = total;
    return seconds;
}

}  // namespace cvz

#else  // CVZ_PER_ISA_PASS: the body, compiled once per ISA by cvz_per_isa.hpp

// Independent accumulator chains per thread: enough to cover the FMA latency
// times the FMA units (4 cycles x 2 units = 8 vectors in flight on current x86
// cores), within the vector registers (16 with AVX2, 32 with AVX-512; the
// generic code is vectorised by the compiler as it sees fit).
constexpr int FMA_CHAINS = per_isa(THIS_ISA, 12, 12, 16);
// Vector accumulators of the read kernel (its adds must not wait on each other).
constexpr int READ_CHAINS = 8;

// One thread's FMA chains: acc = acc * m + c, `rounds` times each.  With m just
// under 1 every chain tends to c / (1 - m) = 1: no overflow, no subnormals.
template <class T>
static void machine_fma_chains(long long rounds, double* flops, double* sink) {
    typedef Simd<T> S;
    // Read through volatile: constants the compiler cannot fold the chains with.
    volatile T scale = T(0.9999999), offset = T(1e-7);
    const typename S::vec m = S::set1(scale), c = S::set1(offset);
    typename S::vec acc[FMA_CHAINS];
    CVZ_UNROLL(16)
    for (int i = 0; i < FMA_CHAINS; ++i) acc[i] = S::set1(T(1) + T(i) * offset);
    for (long long r = 0; r < rounds; ++r) {
        CVZ_UNROLL(16)
        for (int i = 0; i < FMA_CHAINS; ++i) acc[i] = S::fma(acc[i], m, c);
    }
    T lanes[S::V];
    double total = 0;
    for (int i = 0; i < FMA_CHAINS; ++i) {
        S::store(lanes, acc[i]);
        for (int l = 0; l < S::V; ++l) total += (double)lanes[l];
    }
    *flops = 2.0 * S::V * FMA_CHAINS * (double)rounds;
    *sink = total;
}

// A compiler barrier between 1024-element blocks: the compiler may turn a
// block's loop into memset / memcpy (the generic code), but never the whole
// part into one call (the C library streams large copies, which the plain
// copy kernel must not).
static inline void machine_block_barrier() {
#if defined(__GNUC__)
    __asm__ __volatile__("" ::: "memory");
#endif
}

// One thread's part [begin, end) of a memory kernel (MemoryKernel) on floats
// (the table's double instantiation is never used: bytes are bytes).
template <class T>
static void machine_memory_part(int kind, const float* a, float* b, idx begin, idx end, double* sink) {
    typedef Simd<float> S;
    constexpr idx V = S::V;
    constexpr idx BLOCK = 1024;
    static_assert(BLOCK % (V * READ_CHAINS) == 0, "a block holds whole rounds of the read kernel");
    (void)sizeof(T);
    if (kind == MEM_READ) {
        typename S::vec acc[READ_CHAINS];
        for (int j = 0; j < READ_CHAINS; ++j) acc[j] = S::zero();
        const typename S::vec one = S::set1(1.0f);
        for (idx i = begin; i < end; i += V * READ_CHAINS) {
            CVZ_UNROLL(8)
            for (int j = 0; j < READ_CHAINS; ++j) acc[j] = S::fma(S::load(a + i + j * V), one, acc[j]);
        }
        float lanes[V];
        double total = 0;
        for (int j = 0; j < READ_CHAINS; ++j) {
            S::store(lanes, acc[j]);
            for (idx l = 0; l < V; ++l) total += (double)lanes[l];
        }
        *sink = total;
    } else if (kind == MEM_WRITE) {
        const typename S::vec value = S::set1(2.0f);
        for (idx block = begin; block < end; block += BLOCK) {
            for (idx i = block; i < block + BLOCK; i += V) S::store(b + i, value);
            machine_block_barrier();
        }
        *sink = (double)b[begin < end ? begin : 0];
    } else if (kind == MEM_COPY) {
        for (idx block = begin; block < end; block += BLOCK) {
            for (idx i = block; i < block + BLOCK; i += V) S::store(b + i, S::load(a + i));
            machine_block_barrier();
        }
        *sink = (double)b[begin < end ? begin : 0];
    } else {  // MEM_COPY_STREAM: the same with stores that bypass the caches
        for (idx i = begin; i < end; i += V) S::stream(b + i, S::load(a + i));
        S::fence();
        *sink = (double)b[begin < end ? begin : 0];
    }
}

#endif
