# distutils: language = c++
# C++ (in _ext/): conv2d_input_grad.cpp conv2d_input_grad_fast.cpp
"""Kernels for the gradient of conv2d with respect to its input.

Trust their arguments: ``convviz._backends.cpu`` validates everything and builds
the geometry first.  Arrays arrive in logical NHWC order as (possibly strided)
views, so one kernel serves both data formats and non-contiguous inputs.

``input_grad`` (float16, bfloat16, float32, float64) runs the SIMD kernel of
``_ext/conv2d_input_grad.cpp``: work is split over input rows ``(n, ih)``; each row is
written by exactly one thread, and each element sums its terms in one fixed
order (taps, then output channels), so results are bitwise identical for any
thread count.  Half types are read into float32 and rounded once at the end.

(int32 runs on the forward pass's ``forward_int32``, once per stride phase: see
``convviz.ops.input_grad``.)

Scratch memory (see _ext/kernel_module.pxi): packed filter, per-thread buffers.
"""

include "kernel_module.pxi"

from _cvz cimport conv_args, conv_flops, idx, run_packed, threads_for
from conv2d_input_grad cimport (Conv2dInputGradArgs, conv2d_input_grad_prepare, conv2d_input_grad_pack,
                                conv2d_input_grad_row)


def input_grad(cnp.ndarray out_backprop, int dy_type, cnp.ndarray filter, int w_type,
               cnp.ndarray in_backprop, int dx_type,
               Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dil_h, Py_ssize_t dil_w,
               Py_ssize_t pad_top, Py_ssize_t pad_left, Py_ssize_t groups,
               int n_threads, int isa, bint f64, double min_parallel_work, int dot=0) -> int:
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
    conv_args(&a, &a.dx, in_backprop, dx_type, &a.w, filter, w_type, &a.dy, out_backprop, dy_type,
              filter.shape[2], groups, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
    a.dot = dot
    a.w_exp = 0
    conv2d_input_grad_prepare(&a, isa, f64)
    if dot and not a.dot:
        return -1

    cdef size_t elem = 8 if f64 else 4
    cdef size_t scratch_bytes = <size_t>a.scratch_elems * elem
    cdef idx rows = a.N * a.H
    cdef double work = conv_flops(&a)
    cdef int threads = threads_for(work, min_parallel_work, n_threads, rows)
    return run_packed(&a.packed, <size_t>a.packed_bytes, conv2d_input_grad_pack, conv2d_input_grad_row,
                      &a, isa, f64, rows, threads, scratch_bytes)
