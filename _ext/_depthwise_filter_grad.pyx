"""Kernel for the gradient of depthwise conv2d with respect to its filter.

Trusts its arguments: ``convviz._backends.cpu`` validates everything and builds
the geometry first.  Arrays arrive in logical NHWC order as (possibly strided)
views, so one kernel serves both data formats and non-contiguous inputs.

The gradient is a sum over every (n, oh, ow).  The rows ``(n, oh)`` are cut into
``n_blocks`` contiguous blocks (a number fixed by the problem size, never by the
thread count); each block sums into its own buffer, and the buffers are then
added in block order.  No thread ever adds into shared memory, and the grouping
of the sum is the same for 1 or 64 threads: results are bitwise identical.
"""

from cython.parallel cimport prange
from libc.stdlib cimport malloc, free
from libc.string cimport memset

ctypedef fused real:
    float
    double


cdef inline void _accumulate_block(
    const real[:, :, :, :] input,
    const real[:, :, :, :] out_backprop,
    real* acc,
    const Py_ssize_t[:, ::1] row_ranges,
    const Py_ssize_t[:, ::1] col_ranges,
    Py_ssize_t row_begin, Py_ssize_t row_end,
    Py_ssize_t kernel_h, Py_ssize_t kernel_w, Py_ssize_t multiplier,
    Py_ssize_t stride_h, Py_ssize_t stride_w,
    Py_ssize_t dil_h, Py_ssize_t dil_w,
    Py_ssize_t pad_top, Py_ssize_t pad_left,
) noexcept nogil:
    cdef Py_ssize_t out_h = out_backprop.shape[1]
    cdef Py_ssize_t channels = input.shape[3]
    cdef Py_ssize_t row, n, oh, ih, kh, kw, ow, iw, iw_offset, c, m
    cdef real x
    cdef real* tap_acc
    memset(acc, 0, kernel_h * kernel_w * channels * multiplier * sizeof(real))
    for row in range(row_begin, row_end):
        n = row // out_h
        oh = row % out_h
        for kh in range(kernel_h):
            if oh < row_ranges[kh, 0] or oh >= row_ranges[kh, 1]:
                continue  # this tap reads padding for this output row
            ih = oh * stride_h - pad_top + kh * dil_h
            for kw in range(kernel_w):
                tap_acc = acc + (kh * kernel_w + kw) * channels * multiplier
                iw_offset = kw * dil_w - pad_left
                for ow in range(col_ranges[kw, 0], col_ranges[kw, 1]):
                    iw = ow * stride_w + iw_offset
                    for c in range(channels):
                        x = input[n, ih, iw, c]
                        for m in range(multiplier):
                            tap_acc[c * multiplier + m] += x * out_backprop[n, oh, ow, c * multiplier + m]


cdef inline real _sum_blocks(const real* partial, Py_ssize_t index,
                             Py_ssize_t size, Py_ssize_t n_blocks) noexcept nogil:
    cdef real total = 0
    cdef Py_ssize_t b
    for b in range(n_blocks):  # fixed order: block 0, 1, 2, ...
        total = total + partial[b * size + index]
    return total


def depthwise_filter_grad(
    const real[:, :, :, :] input,
    const real[:, :, :, :] out_backprop,
    real[:, :, :, ::1] filter_grad,
    const Py_ssize_t[:, ::1] row_ranges,
    const Py_ssize_t[:, ::1] col_ranges,
    Py_ssize_t stride_h, Py_ssize_t stride_w,
    Py_ssize_t dil_h, Py_ssize_t dil_w,
    Py_ssize_t pad_top, Py_ssize_t pad_left,
    Py_ssize_t n_blocks,
    int n_threads,
):
    """Overwrite ``filter_grad`` [KH, KW, C, M] with the depthwise filter gradient.

    ``input`` is [N, H, W, C], ``out_backprop`` [N, OH, OW, C * M].
    ``row_ranges[kh]`` / ``col_ranges[kw]`` are the half-open output ranges whose
    input index through that tap is a real cell (from the geometry module).
    """
    cdef Py_ssize_t kernel_h = filter_grad.shape[0]
    cdef Py_ssize_t kernel_w = filter_grad.shape[1]
    cdef Py_ssize_t multiplier = filter_grad.shape[3]
    cdef Py_ssize_t size = kernel_h * kernel_w * filter_grad.shape[2] * multiplier
    cdef Py_ssize_t rows = out_backprop.shape[0] * out_backprop.shape[1]
    cdef Py_ssize_t b, f
    cdef real* flat = &filter_grad[0, 0, 0, 0]
    cdef real* partial = <real*> malloc(n_blocks * size * sizeof(real))
    if partial == NULL:
        raise MemoryError(f"cannot allocate {n_blocks} x {size} partial sums")
    try:
        with nogil:
            for b in prange(n_blocks, num_threads=n_threads, schedule="dynamic"):
                _accumulate_block(
                    input, out_backprop, partial + b * size, row_ranges, col_ranges,
                    b * rows // n_blocks, (b + 1) * rows // n_blocks,
                    kernel_h, kernel_w, multiplier,
                    stride_h, stride_w, dil_h, dil_w, pad_top, pad_left,
                )
            for f in prange(size, num_threads=n_threads, schedule="static"):
                flat[f] = _sum_blocks(partial, f, size, n_blocks)
    finally:
        free(partial)
