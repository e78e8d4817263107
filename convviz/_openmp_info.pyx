# distutils: language = c++
# C++ (in _ext/): cvz_isa.cpp
"""Build and machine facts about the compiled kernels: OpenMP, threads, SIMD."""

from _openmp cimport CONVVIZ_OPENMP_ENABLED, omp_get_max_threads, omp_get_num_procs
from _cvz cimport cpu_has_bf16_dot, cpu_has_f16_fma, isa_best, isa_compiled
from cython.parallel cimport prange, threadid

# Indexed by the kernels' ISA codes (cvz::Isa in _ext/cvz_isa.hpp).
ISA_NAMES = ("generic", "avx2", "avx512")


def openmp_enabled():
    """True when the kernels were compiled with OpenMP."""
    return bool(CONVVIZ_OPENMP_ENABLED)


def max_threads():
    """Threads a parallel region uses by default (honours OMP_NUM_THREADS)."""
    return omp_get_max_threads()


def num_procs():
    """Processors OpenMP sees (1 in a serial build)."""
    return omp_get_num_procs()


def best_isa():
    """Name of the best kernel variant this CPU runs: 'avx512', 'avx2' or 'generic'."""
    return ISA_NAMES[isa_best()]


def bf16_dot_available():
    """True when the CPU has the bfloat16 dot-product instruction (AVX512_BF16) and runs
    AVX-512 code: what ``precision="fast"`` uses for bfloat16 input gradients."""
    return bool(cpu_has_bf16_dot())


def f16_fma_available():
    """True when the CPU has the float16 FMA (AVX512_FP16), runs AVX-512 code and this
    build holds that code: what ``precision="fast"`` uses for float16 input gradients."""
    return bool(cpu_has_f16_fma())


def available_isas():
    """Kernel variants compiled in and supported by this CPU, best first."""
    best = isa_best()
    return tuple(ISA_NAMES[i] for i in range(best, -1, -1) if isa_compiled(i))


def threads_used(int n_threads):
    """Run an empty parallel loop on ``n_threads`` threads; return how many took part.

    Used by the tests to show that ``prange`` really runs in parallel.
    """
    cdef int i, count = 0
    cdef int[64] seen
    for i in range(64):
        seen[i] = 0
    with nogil:
        for i in prange(64, num_threads=n_threads, schedule="static", chunksize=1):
            seen[threadid() % 64] = 1
    for i in range(64):
        count += seen[i]
    return count
