"""CPU backend: hands validated calls to the Cython/OpenMP kernels in ``_ext/``.

Everything arriving here has been validated (``convviz._validate``): shapes agree
with the geometry, dtypes are supported, sizes are sane.  This module only
chooses the compute dtype, lays the arrays out for the kernels and casts back.
"""

from __future__ import annotations

import numpy as np

from .. import _depthwise_filter_grad, _input_grad
from .._validate import HALF_DTYPES, FilterGradCall, InputGradCall
from ..geometry import AxisGeometry, ConvGeometry

# Partial sums of the filter gradient: at most this many blocks, and at most this
# many bytes for all of them.  Both are constants, never the thread count, so the
# summation order (and so every bit of the result) does not depend on threads.
MAX_REDUCTION_BLOCKS = 64
REDUCTION_BUDGET_BYTES = 8 * 2**20


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """Half types are computed in float32; int32 as uint32 (wrapping arithmetic)."""
    if dtype in HALF_DTYPES:
        return np.dtype(np.float32)
    if dtype == np.int32:
        return np.dtype(np.uint32)
    return dtype


def _to_compute(array: np.ndarray, compute: np.dtype) -> np.ndarray:
    if array.dtype == compute:
        return array
    if array.dtype == np.int32 and compute == np.uint32:
        return array.view(np.uint32)  # same bits, modular arithmetic
    return array.astype(compute)


def _as_nhwc(array: np.ndarray, geometry: ConvGeometry) -> np.ndarray:
    """A view in logical NHWC order (no copy): the kernels take any strides."""
    return array if geometry.data_format == "NHWC" else array.transpose(0, 2, 3, 1)


def _tap_ranges(axis: AxisGeometry) -> np.ndarray:
    """[kernel_size, 2] half-open output ranges whose input cell is real, per tap."""
    table = np.empty((axis.kernel_size, 2), dtype=np.intp)
    for tap in range(axis.kernel_size):
        outputs = axis.output_range(tap)
        table[tap] = outputs.start, outputs.stop
    return table


def reduction_blocks(geometry: ConvGeometry, itemsize: int) -> int:
    """How many blocks the filter-gradient reduction uses (independent of threads)."""
    rows = geometry.batch * geometry.rows.output_size
    filter_size = int(np.prod(geometry.filter_shape))
    by_budget = max(1, REDUCTION_BUDGET_BYTES // max(1, filter_size * itemsize))
    return max(1, min(rows, MAX_REDUCTION_BLOCKS, by_budget))


def conv2d_backprop_input(call: InputGradCall) -> np.ndarray:
    """Run the input-gradient kernel for a validated call."""
    g = call.geometry
    compute = _compute_dtype(call.dtype)
    if call.out_backprop.size == 0 or np.prod(g.input_shape) == 0:
        return np.zeros(g.input_shape, dtype=call.dtype)  # nothing reaches the input
    result = np.empty(g.input_shape, dtype=compute)
    filter_t = np.ascontiguousarray(_to_compute(call.filter, compute).transpose(0, 1, 3, 2))
    _input_grad.input_grad(
        _as_nhwc(_to_compute(call.out_backprop, compute), g),
        filter_t,
        _as_nhwc(result, g),
        _tap_ranges(g.rows),
        _tap_ranges(g.cols),
        g.rows.stride, g.cols.stride,
        g.rows.dilation, g.cols.dilation,
        g.rows.pad_before, g.cols.pad_before,
        g.groups,
        call.n_threads,
    )
    if compute == np.uint32:
        return result.view(np.int32)
    return result.astype(call.dtype, copy=False)


def depthwise_conv2d_native_backprop_filter(call: FilterGradCall) -> np.ndarray:
    """Run the depthwise filter-gradient kernel for a validated call."""
    g = call.geometry
    compute = _compute_dtype(call.dtype)
    if call.out_backprop.size == 0 or call.input.size == 0:
        return np.zeros(g.filter_shape, dtype=call.dtype)  # an empty sum
    result = np.empty(g.filter_shape, dtype=compute)
    _depthwise_filter_grad.depthwise_filter_grad(
        _as_nhwc(_to_compute(call.input, compute), g),
        _as_nhwc(_to_compute(call.out_backprop, compute), g),
        result,
        _tap_ranges(g.rows),
        _tap_ranges(g.cols),
        g.rows.stride, g.cols.stride,
        g.rows.dilation, g.cols.dilation,
        g.rows.pad_before, g.cols.pad_before,
        reduction_blocks(g, compute.itemsize),
        call.n_threads,
    )
    return result.astype(call.dtype, copy=False)
