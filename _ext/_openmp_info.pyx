"""Build-time facts about the compiled kernels: is OpenMP in, how many threads."""

from _openmp cimport CONVVIZ_OPENMP_ENABLED, omp_get_max_threads, omp_get_num_procs
from cython.parallel cimport prange, threadid


def openmp_enabled():
    """True when the kernels were compiled with OpenMP."""
    return bool(CONVVIZ_OPENMP_ENABLED)


def max_threads():
    """Threads a parallel region uses by default (honours OMP_NUM_THREADS)."""
    return omp_get_max_threads()


def num_procs():
    """Processors OpenMP sees (1 in a serial build)."""
    return omp_get_num_procs()


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
