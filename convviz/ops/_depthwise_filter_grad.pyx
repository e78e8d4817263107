# distutils: language = c++
# C++ (in _ext/): depthwise_filter_grad.cpp
"""Kernel for the gradient of depthwise conv2d with respect to its filter.

Trusts its arguments: ``convviz._backends.cpu`` validates everything and builds
the geometry first.  Arrays arrive in logical NHWC order as (possibly strided)
views, so one kernel serves both data formats and non-contiguous inputs.

The gradient is a sum over every (n, oh, ow).  The rows ``(n, oh)`` are cut into
``n_blocks`` contiguous blocks (a number fixed by the problem size, never by the
thread count); each block sums into its own buffer, and the buffers are then
added in block order.  No thread ever adds into shared memory, and the grouping
of the sum is the same for 1 or 64 threads: results are bitwise identical.
The C++ kernel is ``_ext/depthwise_filter_grad.cpp``.

The kernel function returns the bytes of scratch memory it allocated (partial
sums, per-thread buffers); ``last_scratch_bytes()`` gives the calling thread's
most recent value (the benchmark counts it as memory beyond the output).
"""

cimport numpy as cnp
from cython.parallel cimport prange, threadid

from _cvz cimport (element_strides, free_aligned, idx, record_scratch, recorded_scratch, run_units,
                   scratch_alloc, threads_for)

cnp.import_array()

# The interface part of the op's one C++ file (its argument struct and entry points).
cdef extern from * namespace "cvz" nogil:
    """
    #define CVZ_INTERFACE_ONLY
    #include "depthwise_filter_grad.cpp"
    #undef CVZ_INTERFACE_ONLY
    """
    cdef struct DepthwiseFilterGradArgs:
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
        const idx* ow_first
        const idx* ow_last
        idx V, cm, cm_pad, scratch_elems
        int direct
        void* partial

    void depthwise_filter_grad_prepare(DepthwiseFilterGradArgs* a, int isa, int f64)
    void depthwise_filter_grad_block(const void* args, int isa, int f64, idx block, void* scratch)
    void depthwise_filter_grad_merge(const void* args, int isa, int f64, idx tap, void* scratch)

def last_scratch_bytes():
    """Scratch bytes of the calling thread's most recent kernel call in this module (0 before any)."""
    return recorded_scratch()


def depthwise_filter_grad(cnp.ndarray input, int x_type, cnp.ndarray out_backprop, int dy_type,
                          cnp.ndarray filter_grad, int out_type,
                          const Py_ssize_t[:, ::1] col_ranges,
                          Py_ssize_t stride_h, Py_ssize_t stride_w,
                          Py_ssize_t dil_h, Py_ssize_t dil_w,
                          Py_ssize_t pad_top, Py_ssize_t pad_left,
                          Py_ssize_t n_blocks, int n_threads, int isa, bint f64,
                          double min_parallel_work):
    """Overwrite ``filter_grad`` [KH, KW, C, M] (C-contiguous) with the gradient; return the scratch bytes used.

    ``input`` is [N, H, W, C], ``out_backprop`` [N, OH, OW, C * M], any strides.
    Type codes: 0 float16, 1 bfloat16, 2 float32, 3 float64; ``f64`` selects
    float64 arithmetic.  ``col_ranges[kw]`` is the half-open range of output
    columns whose input column through tap ``kw`` is real (from the geometry).
    """
    cdef DepthwiseFilterGradArgs a
    a.N = input.shape[0]
    a.H = input.shape[1]
    a.W = input.shape[2]
    a.C = input.shape[3]
    a.KH = filter_grad.shape[0]
    a.KW = filter_grad.shape[1]
    a.M = filter_grad.shape[3]
    a.OH = out_backprop.shape[1]
    a.OW = out_backprop.shape[2]
    a.sh, a.sw, a.dh, a.dw, a.pt, a.pl = stride_h, stride_w, dil_h, dil_w, pad_top, pad_left
    a.x = cnp.PyArray_DATA(input)
    a.x_type = x_type
    element_strides(input, a.x_s)
    a.dy = cnp.PyArray_DATA(out_backprop)
    a.dy_type = dy_type
    element_strides(out_backprop, a.dy_s)
    a.out = cnp.PyArray_DATA(filter_grad)
    a.out_type = out_type
    a.n_blocks = n_blocks
    a.partial = NULL
    depthwise_filter_grad_prepare(&a, isa, f64)

    cdef idx kernel_w = a.KW
    cdef idx taps = a.KH * a.KW
    cdef size_t elem = 8 if f64 else 4
    cdef size_t scratch_bytes = <size_t>a.scratch_elems * elem
    cdef double work = 2.0 * a.N * a.OH * a.OW * a.C * a.M * a.KH * a.KW
    cdef int threads = threads_for(work, min_parallel_work, n_threads, n_blocks)
    cdef size_t partial_bytes = <size_t>(n_blocks * taps * a.cm_pad) * elem
    cdef idx* first = NULL
    cdef idx kw
    cdef Py_ssize_t used = partial_bytes
    try:
        a.partial = scratch_alloc(partial_bytes)
        first = <idx*>scratch_alloc(2 * kernel_w * sizeof(idx))
        for kw in range(kernel_w):
            first[kw] = col_ranges[kw, 0]
            first[kernel_w + kw] = col_ranges[kw, 1]
        a.ow_first = first
        a.ow_last = first + kernel_w
        used += run_units(depthwise_filter_grad_block, &a, isa, f64, n_blocks, threads, scratch_bytes)
        run_units(depthwise_filter_grad_merge, &a, isa, f64, taps, threads, 0)
    finally:
        free_aligned(a.partial)
        free_aligned(first)
    record_scratch(used)
    return used
