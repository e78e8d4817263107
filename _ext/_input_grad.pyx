"""Kernel for the gradient of conv2d with respect to its input.

Trusts its arguments: ``convviz._backends.cpu`` validates everything and builds
the geometry first.  Arrays arrive in logical NHWC order as (possibly strided)
views, so one kernel serves both data formats and non-contiguous inputs.

Work is split over input rows ``(n, ih)``: each row is written by exactly one
thread and each element sums its terms in one fixed order (taps ``kh``, ``kw``,
then output channels), so results are bitwise identical for any thread count.
The ``unsigned int`` instantiation carries int32 data: two's-complement
multiply-add modulo 2**32 is exactly TensorFlow's wrapping int32 arithmetic,
without signed-overflow undefined behaviour.
"""

from cython.parallel cimport prange

ctypedef fused numeric:
    float
    double
    unsigned int


cdef inline void _input_grad_row(
    const numeric[:, :, :, :] out_backprop,
    const numeric[:, :, :, ::1] filter_t,
    numeric[:, :, :, :] in_backprop,
    const Py_ssize_t[:, ::1] row_ranges,
    const Py_ssize_t[:, ::1] col_ranges,
    Py_ssize_t n, Py_ssize_t ih,
    Py_ssize_t stride_h, Py_ssize_t stride_w,
    Py_ssize_t dil_h, Py_ssize_t dil_w,
    Py_ssize_t pad_top, Py_ssize_t pad_left,
    Py_ssize_t groups,
) noexcept nogil:
    cdef Py_ssize_t width = in_backprop.shape[2]
    cdef Py_ssize_t in_channels = in_backprop.shape[3]
    cdef Py_ssize_t out_channels = out_backprop.shape[3]
    cdef Py_ssize_t kernel_h = filter_t.shape[0]
    cdef Py_ssize_t kernel_w = filter_t.shape[1]
    cdef Py_ssize_t in_per_group = filter_t.shape[3]
    cdef Py_ssize_t out_per_group = out_channels // groups
    cdef Py_ssize_t iw, ci, kh, kw, t, oh, ow, iw_offset, g, co, co_abs, ci_base
    cdef numeric value

    for iw in range(width):
        for ci in range(in_channels):
            in_backprop[n, ih, iw, ci] = 0

    for kh in range(kernel_h):
        # Output row oh reads input row oh*stride - pad + kh*dilation; invert it.
        t = ih + pad_top - kh * dil_h
        if t < 0 or t % stride_h != 0:
            continue
        oh = t // stride_h
        if oh < row_ranges[kh, 0] or oh >= row_ranges[kh, 1]:
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


def input_grad(
    const numeric[:, :, :, :] out_backprop,
    const numeric[:, :, :, ::1] filter_t,
    numeric[:, :, :, :] in_backprop,
    const Py_ssize_t[:, ::1] row_ranges,
    const Py_ssize_t[:, ::1] col_ranges,
    Py_ssize_t stride_h, Py_ssize_t stride_w,
    Py_ssize_t dil_h, Py_ssize_t dil_w,
    Py_ssize_t pad_top, Py_ssize_t pad_left,
    Py_ssize_t groups,
    int n_threads,
):
    """Overwrite ``in_backprop`` [N, H, W, C_in] with the input gradient.

    ``out_backprop`` is [N, OH, OW, C_out]; ``filter_t`` is the filter transposed
    to [KH, KW, C_out, C_in / groups] so the innermost loop runs over contiguous
    input channels.  ``row_ranges[kh]`` / ``col_ranges[kw]`` are the half-open
    output ranges whose input index through that tap is a real (non-padding)
    cell, from ``convviz.geometry.AxisGeometry.output_range``.
    """
    cdef Py_ssize_t height = in_backprop.shape[1]
    cdef Py_ssize_t rows = in_backprop.shape[0] * height
    cdef Py_ssize_t row
    with nogil:
        for row in prange(rows, num_threads=n_threads, schedule="static"):
            _input_grad_row(
                out_backprop, filter_t, in_backprop, row_ranges, col_ranges,
                row // height, row % height,
                stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, groups,
            )
