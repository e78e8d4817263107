# distutils: language = c++
# C++ (in _ext/): conv2d_input_grad.cpp
"""Kernels for the gradient of conv2d with respect to its input.

Trust their arguments: ``convviz._backends.cpu`` validates everything and builds
the geometry first.  Arrays arrive in logical NHWC order as (possibly strided)
views, so one kernel serves both data formats and non-contiguous inputs.

``input_grad`` (float16, bfloat16, float32, float64) runs the SIMD kernel of
``_ext/conv2d_input_grad.cpp``: work is split over input rows ``(n, ih)``; each row is
written by exactly one thread, and each element sums its terms in one fixed
order (taps, then output channels), so results are bitwise identical for any
thread count.  Half types are read into float32 and rounded once at the end.

``input_grad_int32`` computes int32 data as ``unsigned int``: two's-complement
multiply-add modulo 2**32 is exactly TensorFlow's wrapping int32 arithmetic,
without signed-overflow undefined behaviour.

Each kernel function returns the bytes of scratch memory it allocated (packed
filter, per-thread buffers); ``last_scratch_bytes()`` gives the calling
thread's most recent value (the benchmark counts it as memory beyond the output).
"""

cimport numpy as cnp
from cython.parallel cimport prange, threadid

from _cvz cimport (array_data, conv_dims, free_aligned, idx, record_scratch, recorded_scratch, run_units,
                   scratch_alloc, threads_for)
from conv2d_input_grad cimport (Conv2dInputGradArgs, conv2d_input_grad_prepare, conv2d_input_grad_pack,
                                conv2d_input_grad_row)

cnp.import_array()


def last_scratch_bytes():
    """Scratch bytes of the calling thread's most recent kernel call in this module (0 before any)."""
    return recorded_scratch()


def record_scratch_bytes(Py_ssize_t used):
    """Note ``used`` as the calling thread's most recent scratch bytes: the plan's
    total when it ran the input gradient on the forward kernel (one call per phase)."""
    record_scratch(used)


def input_grad(cnp.ndarray out_backprop, int dy_type, cnp.ndarray filter, int w_type,
               cnp.ndarray in_backprop, int dx_type,
               Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dil_h, Py_ssize_t dil_w,
               Py_ssize_t pad_top, Py_ssize_t pad_left, Py_ssize_t groups,
               int n_threads, int isa, bint f64, double min_parallel_work, int dot=0):
    """Overwrite ``in_backprop`` [N, H, W, C_in] with the input gradient; return the scratch bytes used.

    ``out_backprop`` is [N, OH, OW, C_out] and ``filter`` HWIO [KH, KW, C_in /
    groups, C_out], any strides (in elements).  The ``*_type`` codes are
    0 float16, 1 bfloat16, 2 float32, 3 float64; ``f64`` selects float64
    arithmetic (otherwise float32).  ``isa`` picks the SIMD variant.  ``dot``
    (precision="fast") names the fast paths this CPU runs, as bits: 1 the
    bfloat16 dot product (AVX512_BF16), 2 the float16 FMA (AVX512_FP16), only
    with ``isa`` AVX-512; the one that applies to the data (bfloat16 or float16,
    a finite filter; float16 with at least 32 input channels per group) runs.
    When ``dot`` names fast paths and none applies, nothing is written and the
    result is -1: the caller computes the gradient the default way (on the
    forward pass's kernel, see ``convviz.ops.input_grad.Plan``).
    """
    cdef Conv2dInputGradArgs a
    conv_dims(&a, in_backprop, out_backprop, filter.shape[0], filter.shape[1], filter.shape[2], groups,
              stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
    a.dy, a.dy_type = array_data(out_backprop, a.dy_s), dy_type
    a.dx, a.dx_type = array_data(in_backprop, a.dx_s), dx_type
    a.w, a.w_type = array_data(filter, a.w_s), w_type
    a.packed = NULL
    a.dot = dot
    a.w_exp = 0
    conv2d_input_grad_prepare(&a, isa, f64)
    if dot and not a.dot:
        return -1

    cdef size_t elem = 8 if f64 else 4
    cdef size_t scratch_bytes = <size_t>a.scratch_elems * elem
    cdef idx rows = a.N * a.H
    cdef double work = 2.0 * a.N * a.OH * a.OW * a.Cout * a.KH * a.KW * a.cin_g
    cdef int threads = threads_for(work, min_parallel_work, n_threads, rows)
    cdef size_t packed_bytes = <size_t>a.packed_bytes
    cdef Py_ssize_t used = packed_bytes
    try:
        a.packed = scratch_alloc(packed_bytes)
        with nogil:
            conv2d_input_grad_pack(&a, isa, f64)
        used += run_units(conv2d_input_grad_row, &a, isa, f64, rows, threads, scratch_bytes)
    finally:
        free_aligned(a.packed)
    record_scratch(used)
    return used


# ---------------------------------------------------------------- int32
cdef inline void _int_row(
    const unsigned int[:, :, :, :] out_backprop,
    const unsigned int[:, :, :, ::1] filter_t,
    unsigned int[:, :, :, :] in_backprop,
    const Py_ssize_t[:, ::1] col_ranges,
    Py_ssize_t n, Py_ssize_t ih,
    Py_ssize_t stride_h, Py_ssize_t stride_w,
    Py_ssize_t dil_h, Py_ssize_t dil_w,
    Py_ssize_t pad_top, Py_ssize_t pad_left,
    Py_ssize_t groups,
) noexcept nogil:
    cdef Py_ssize_t width = in_backprop.shape[2]
    cdef Py_ssize_t in_channels = in_backprop.shape[3]
    cdef Py_ssize_t out_h = out_backprop.shape[1]
    cdef Py_ssize_t out_channels = out_backprop.shape[3]
    cdef Py_ssize_t kernel_h = filter_t.shape[0]
    cdef Py_ssize_t kernel_w = filter_t.shape[1]
    cdef Py_ssize_t in_per_group = filter_t.shape[3]
    cdef Py_ssize_t out_per_group = out_channels // groups
    cdef Py_ssize_t iw, ci, kh, kw, t, oh, ow, iw_offset, g, co, co_abs, ci_base
    cdef unsigned int value

    for iw in range(width):
        for ci in range(in_channels):
            in_backprop[n, ih, iw, ci] = 0
    for kh in range(kernel_h):
        # Output row oh reads input row oh*stride - pad + kh*dilation; invert it.
        t = ih + pad_top - kh * dil_h
        if t < 0 or t % stride_h != 0:
            continue
        oh = t // stride_h
        if oh >= out_h:
            continue
        for kw in range(kernel_w):
            iw_offset = kw * dil_w - pad_left
            # col_ranges[kw] holds exactly the outputs whose input column is real.
            for ow in range(col_ranges[kw, 0], col_ranges[kw, 1]):
                iw = ow * stride_w + iw_offset
                for g in range(groups):
                    ci_base = g * in_per_group
                    for co in range(out_per_group):
                        co_abs = g * out_per_group + co
                        value = out_backprop[n, oh, ow, co_abs]
                        for ci in range(in_per_group):
                            in_backprop[n, ih, iw, ci_base + ci] += value * filter_t[kh, kw, co_abs, ci]


def input_grad_int32(
    const unsigned int[:, :, :, :] out_backprop,
    const unsigned int[:, :, :, ::1] filter_t,
    unsigned int[:, :, :, :] in_backprop,
    const Py_ssize_t[:, ::1] col_ranges,
    Py_ssize_t stride_h, Py_ssize_t stride_w,
    Py_ssize_t dil_h, Py_ssize_t dil_w,
    Py_ssize_t pad_top, Py_ssize_t pad_left,
    Py_ssize_t groups,
    int n_threads,
    double min_parallel_work=0.0,
):
    """Overwrite ``in_backprop`` (int32 data viewed as uint32) with the input gradient; return 0.

    ``filter_t`` is the filter transposed to [KH, KW, C_out, C_in / groups];
    ``col_ranges[kw]`` is the half-open range of output columns whose input
    column through tap ``kw`` is real (``AxisGeometry.output_range``).  Below
    ``min_parallel_work`` multiply-adds (times 2) the call runs on one thread.
    It allocates no scratch: the return value (and ``last_scratch_bytes()``) is 0.
    """
    cdef Py_ssize_t height = in_backprop.shape[1]
    cdef Py_ssize_t rows = in_backprop.shape[0] * height
    cdef double work = (2.0 * in_backprop.shape[0] * out_backprop.shape[1] * out_backprop.shape[2]
                        * out_backprop.shape[3] * filter_t.shape[0] * filter_t.shape[1] * filter_t.shape[3])
    cdef int threads = threads_for(work, min_parallel_work, n_threads, rows)
    cdef Py_ssize_t row
    with nogil:
        if threads == 1:
            for row in range(rows):
                _int_row(out_backprop, filter_t, in_backprop, col_ranges, row // height, row % height,
                         stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, groups)
        else:
            for row in prange(rows, num_threads=threads, schedule="static"):
                _int_row(out_backprop, filter_t, in_backprop, col_ranges, row // height, row % height,
                         stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, groups)
    record_scratch(0)
    return 0
