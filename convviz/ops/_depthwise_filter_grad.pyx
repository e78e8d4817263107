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

Scratch memory (see _ext/kernel_module.pxi): partial sums, per-thread buffers.
"""

include "kernel_module.pxi"

from cython.parallel cimport prange, threadid

from _cvz cimport (free_aligned, idx, record_scratch, run_units, scratch_alloc, tensor, threads_for)
from depthwise_filter_grad cimport (DepthwiseFilterGradArgs, depthwise_filter_grad_prepare,
                                    depthwise_filter_grad_block, depthwise_filter_grad_merge)


def depthwise_filter_grad(cnp.ndarray input, int x_type, cnp.ndarray out_backprop, int dy_type,
                          cnp.ndarray filter_grad, int out_type,
                          const Py_ssize_t[:, ::1] col_ranges,
                          Py_ssize_t stride_h, Py_ssize_t stride_w,
                          Py_ssize_t dil_h, Py_ssize_t dil_w,
                          Py_ssize_t pad_top, Py_ssize_t pad_left,
                          Py_ssize_t n_blocks, int n_threads, int isa, bint f64,
                          double min_parallel_work) -> int:
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
    tensor(&a.x, input, x_type)
    tensor(&a.dy, out_backprop, dy_type)
    tensor(&a.out, filter_grad, out_type)  # (C-contiguous: its strides go unused)
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
