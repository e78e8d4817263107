# distutils: language = c++
# C++ (in _ext/): depthwise_forward.cpp
"""Kernel for the depthwise conv2d forward pass.

Trusts its arguments: ``convviz.ops.depthwise_forward`` validates everything and
builds the geometry first.  Arrays arrive in logical NHWC order as (possibly
strided) views, so one kernel serves both data formats and non-contiguous inputs.

``depthwise_forward`` (float16, bfloat16, float32, float64) runs the SIMD kernel
of ``_ext/depthwise_forward.cpp``: work is split over output rows ``(n, oh)``;
each row is written by exactly one thread, and each element sums its taps in
one fixed order, so results are bitwise identical for any thread count.  Half
types are read into float32 and rounded once at the end.

Scratch memory (see _ext/kernel_module.pxi): packed filter, per-thread buffers.
"""

include "kernel_module.pxi"

from _cvz cimport conv_args, conv_flops, idx, run_packed, threads_for
from depthwise_forward cimport (DepthwiseForwardArgs, depthwise_forward_prepare, depthwise_forward_pack,
                                depthwise_forward_row)


def depthwise_forward(cnp.ndarray input, int x_type, cnp.ndarray filter, int w_type, cnp.ndarray output,
                      int y_type, Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dil_h, Py_ssize_t dil_w,
                      Py_ssize_t pad_top, Py_ssize_t pad_left, int n_threads, int isa, bint f64,
                      double min_parallel_work) -> int:
    """Overwrite ``output`` [N, OH, OW, C * M] with depthwise_conv2d(input, filter); return the scratch bytes used.

    ``input`` is [N, H, W, C] and ``filter`` [KH, KW, C, M], any strides (in
    elements).  Type codes: 0 float16, 1 bfloat16, 2 float32, 3 float64;
    ``f64`` selects float64 arithmetic.  ``isa`` picks the SIMD variant.
    """
    cdef DepthwiseForwardArgs a
    conv_args(&a, &a.x, input, x_type, &a.w, filter, w_type, &a.y, output, y_type, 1, filter.shape[2],
              stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
    depthwise_forward_prepare(&a, isa, f64)

    cdef size_t elem = 8 if f64 else 4
    cdef idx rows = a.N * a.OH
    cdef double work = conv_flops(&a)
    cdef int threads = threads_for(work, min_parallel_work, n_threads, rows)
    return run_packed(&a.packed, <size_t>(a.KH * a.KW * a.cm_pad) * elem, depthwise_forward_pack, depthwise_forward_row,
                      &a, isa, f64, rows, threads, <size_t>a.scratch_elems * elem)
