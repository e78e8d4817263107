# OpenMP shim, in the manner of scikit-learn's _openmp_helpers.pxd: the kernels
# cimport these names whether or not the build found OpenMP, and the serial
# build gets stand-ins that say "one thread" (C++: every kernel module is).
cdef extern from *:
    """
    #ifdef _OPENMP
        #include <omp.h>
        #define CONVVIZ_OPENMP_ENABLED 1
    #else
        #define CONVVIZ_OPENMP_ENABLED 0
        [[maybe_unused]] static inline int omp_get_max_threads(void) { return 1; }
        [[maybe_unused]] static inline int omp_get_thread_num(void) { return 0; }
        [[maybe_unused]] static inline int omp_get_num_procs(void) { return 1; }
    #endif
    """
    bint CONVVIZ_OPENMP_ENABLED
    int omp_get_max_threads() nogil
    int omp_get_thread_num() nogil
    int omp_get_num_procs() nogil
