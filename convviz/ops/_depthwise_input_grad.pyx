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

Scratch memory (see _ext/kernel_module.pxi): packed filter, per-thread buffers.
"""

include "kernel_module.pxi"

from _cvz cimport conv_args, conv_flops, idx, run_packed, threads_for
from depthwise_input_grad cimport (DepthwiseInputGradArgs, depthwise_input_grad_prepare, depthwise_input_grad_pack,
                                   depthwise_input_grad_row)


def depthwise_input_grad(cnp.ndarray out_backprop, int dy_type, cnp.ndarray filter, int w_type,
                         cnp.ndarray in_backprop, int dx_type, Py_ssize_t stride_h, Py_ssize_t stride_w,
                         Py_ssize_t dil_h, Py_ssize_t dil_w, Py_ssize_t pad_top, Py_ssize_t pad_left,
                         int n_threads, int isa, bint f64, double min_parallel_work) -> int:
    """Overwrite ``in_backprop`` [N, H, W, C] with the depthwise input gradient; return the scratch bytes used.

    ``out_backprop`` is [N, OH, OW, C * M] and ``filter`` [KH, KW, C, M], any
    strides (in elements).  Type codes: 0 float16, 1 bfloat16, 2 float32,
    3 float64; ``f64`` selects float64 arithmetic.  ``isa`` picks the SIMD variant.
    """
    cdef DepthwiseInputGradArgs a
    conv_args(&a, &a.dx, in_backprop, dx_type, &a.w, filter, w_type, &a.dy, out_backprop, dy_type, 1,
              filter.shape[2], stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
    depthwise_input_grad_prepare(&a, isa, f64)

    cdef size_t elem = 8 if f64 else 4
    cdef idx rows = a.N * a.H
    cdef double work = conv_flops(&a)
    cdef int threads = threads_for(work, min_parallel_work, n_threads, rows)
    return run_packed(&a.packed, <size_t>a.packed_elems * elem, depthwise_input_grad_pack, depthwise_input_grad_row,
                      &a, isa, f64, rows, threads, <size_t>a.scratch_elems * elem)
