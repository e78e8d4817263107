# Declarations of the C++ kernels in cvz_kernels.hpp, and the small helpers the
# kernel modules share.
cimport numpy as cnp

cdef extern from "cvz_kernels.hpp" namespace "cvz":
    ctypedef Py_ssize_t idx

    cdef struct InputGradArgs:
        idx N, H, W, Cin, OH, OW, Cout, KH, KW, G, cin_g, cout_g
        idx sh, sw, dh, dw, pt, pl
        const void* dy
        int dy_type
        idx dy_s[4]
        void* dx
        int dx_type
        idx dx_s[4]
        const void* w
        int w_type
        idx w_s[4]
        idx V, cin_g_pad, ow_lo, ow_span, scratch_elems
        int direct
        void* packed

    cdef struct FilterGradArgs:
        idx N, H, W, C, M, OH, OW, KH, KW
        idx sh, sw, dh, dw, pt, pl
        const void* x
        int x_type
        idx x_s[4]
        const void* dy
        int dy_type
        idx dy_s[4]
        void* out
        int out_type
        idx n_blocks
        idx V, cm, cm_pad, scratch_elems
        int direct
        void* partial

cdef extern from "cvz_kernels.hpp" nogil:
    int cvz_isa_best()
    int cvz_isa_compiled(int isa)
    void cvz_input_grad_prepare(InputGradArgs* a, int isa, int f64)
    void cvz_input_grad_pack(const InputGradArgs* a, int isa, int f64)
    void cvz_input_grad_row(const InputGradArgs* a, int isa, int f64, idx row, void* scratch)
    void cvz_filter_grad_prepare(FilterGradArgs* a, int isa, int f64)
    void cvz_filter_grad_block(const FilterGradArgs* a, int isa, int f64, idx block, void* scratch,
                               const idx* ow_first, const idx* ow_last)
    void cvz_filter_grad_merge(const FilterGradArgs* a, int isa, int f64, idx tap_begin, idx tap_end)
    void* cvz_alloc(size_t bytes)
    void cvz_free(void* p)


cdef inline void element_strides(cnp.ndarray array, idx* out) noexcept:
    """The 4 strides of ``array`` in elements (the kernels index elements, NumPy counts bytes)."""
    cdef int d
    cdef idx itemsize = cnp.PyArray_ITEMSIZE(array)
    for d in range(4):
        out[d] = cnp.PyArray_STRIDES(array)[d] // itemsize


cdef inline int threads_for(double work, double min_parallel_work, int n_threads, idx units) noexcept nogil:
    """Threads for a call: one when the work is too small to pay for a parallel
    region, never more than its ``units`` of work (rows or blocks), at least one."""
    cdef int threads = n_threads if work >= min_parallel_work else 1
    if threads > units:
        threads = <int>units
    return threads if threads >= 1 else 1
