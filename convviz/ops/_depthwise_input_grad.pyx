# distutils: language = c++
# C++ (in _ext/): depthwise_input_grad.cpp
"""Kernel for the gradient of depthwise conv2d with respect to its input.

Trusts its arguments: ``convviz.ops.depthwise_input_grad`` validates everything and
builds the geometry first.  Arrays arrive in logical NHWC order as (possibly
strided) views, so one kernel serves both data formats and non-contiguous inputs.

``depthwise_input_grad`` (float16, bfloat16, float32, float64) runs the SIMD
kernel of ``_ext/depthwise_input_grad.cpp``: work is split over input rows
``(n, ih)``; each row is written by exactly one thread, and each element sums
its terms in one fixed order, so results are bitwise identical for any thread
count.  Half types are read into float32 and rounded once at the end.

The kernel function returns the bytes of scratch memory it allocated (packed
filter, per-thread buffers); ``last_scratch_bytes()`` gives the calling
thread's most recent value (the benchmark counts it as memory beyond the output).
"""

cimport numpy as cnp

from _cvz cimport (ConvDims, conv_dims, element_strides, free_aligned, idx, record_scratch, recorded_scratch,
                   run_units, scratch_alloc, threads_for)

cnp.import_array()

# The interface part of the op's one C++ file (its argument struct and entry points).
cdef extern from * namespace "cvz" nogil:
    """
    #define CVZ_INTERFACE_ONLY
    #include "depthwise_input_grad.cpp"
    #undef CVZ_INTERFACE_ONLY
    """
    cdef cppclass DepthwiseInputGradArgs(ConvDims):
        const void* dy
        int dy_type
        idx dy_s[4]
        const void* w
        int w_type
        idx w_s[4]
        void* dx
        int dx_type
        idx dx_s[4]
        idx V, c_pad, scratch_elems, packed_elems
        int dy_direct, dx_direct
        void* packed

    void depthwise_input_grad_prepare(DepthwiseInputGradArgs* a, int isa, int f64)
    void depthwise_input_grad_pack(DepthwiseInputGradArgs* a, int isa, int f64)
    void depthwise_input_grad_row(const void* args, int isa, int f64, idx row, void* scratch)


def last_scratch_bytes():
    """Scratch bytes of the calling thread's most recent kernel call in this module (0 before any)."""
    return recorded_scratch()


def depthwise_input_grad(cnp.ndarray out_backprop, int dy_type, cnp.ndarray filter, int w_type,
                         cnp.ndarray in_backprop, int dx_type, Py_ssize_t stride_h, Py_ssize_t stride_w,
                         Py_ssize_t dil_h, Py_ssize_t dil_w, Py_ssize_t pad_top, Py_ssize_t pad_left,
                         int n_threads, int isa, bint f64, double min_parallel_work):
    """Overwrite ``in_backprop`` [N, H, W, C] with the depthwise input gradient; return the scratch bytes used.

    ``out_backprop`` is [N, OH, OW, C * M] and ``filter`` [KH, KW, C, M], any
    strides (in elements).  Type codes: 0 float16, 1 bfloat16, 2 float32,
    3 float64; ``f64`` selects float64 arithmetic.  ``isa`` picks the SIMD variant.
    """
    cdef DepthwiseInputGradArgs a
    conv_dims(&a, in_backprop, out_backprop, filter.shape[0], filter.shape[1], 1, filter.shape[2],
              stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
    a.dy = cnp.PyArray_DATA(out_backprop)
    a.dy_type = dy_type
    element_strides(out_backprop, a.dy_s)
    a.w = cnp.PyArray_DATA(filter)
    a.w_type = w_type
    element_strides(filter, a.w_s)
    a.dx = cnp.PyArray_DATA(in_backprop)
    a.dx_type = dx_type
    element_strides(in_backprop, a.dx_s)
    a.packed = NULL
    depthwise_input_grad_prepare(&a, isa, f64)

    cdef size_t elem = 8 if f64 else 4
    cdef idx rows = a.N * a.H
    cdef double work = 2.0 * a.N * a.OH * a.OW * a.Cout * a.KH * a.KW
    cdef int threads = threads_for(work, min_parallel_work, n_threads, rows)
    cdef size_t packed_bytes = <size_t>a.packed_elems * elem
    cdef Py_ssize_t used = packed_bytes
    try:
        a.packed = scratch_alloc(packed_bytes)
        with nogil:
            depthwise_input_grad_pack(&a, isa, f64)
        used += run_units(depthwise_input_grad_row, &a, isa, f64, rows, threads, <size_t>a.scratch_elems * elem)
    finally:
        free_aligned(a.packed)
    record_scratch(used)
    return used
