// The machine's float32 FMA peak, as BENCHMARKS.md quotes it: 12 independent
// accumulator chains of AVX-512 FMAs per OpenMP thread, no memory traffic.
//   g++ -O3 -mavx512f -fopenmp benchmarks/fma_peak.cpp -o /tmp/fma_peak
//   OMP_NUM_THREADS=1 /tmp/fma_peak; OMP_NUM_THREADS=2 /tmp/fma_peak
// (The benchmark measuring this itself, for every ISA, is issue 16's roofline.)
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <omp.h>
int main() {
    const long iters = 200000000;
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        float sink = 0;
#pragma omp parallel reduction(+ : sink)
        {
            __m512 a[12];
            for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(1.0f + i * 1e-7f);
            const __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
            for (long k = 0; k < iters / 12; ++k) {
#pragma GCC unroll 12
                for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
            }
            __m512 s = a[0];
            for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
            sink += _mm512_reduce_add_ps(s);
        }
        double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        double gflops = 2.0 * 16 * (iters / 12 * 12) * omp_get_max_threads() / sec / 1e9;
        if (gflops > best) best = gflops;
        if (sink == 12345) std::printf("!");
    }
    std::printf("threads %d: %.1f GFLOP/s float32 FMA peak\n", omp_get_max_threads(), best);
}
