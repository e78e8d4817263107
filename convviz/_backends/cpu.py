"""CPU backend: hands validated calls to the Cython/OpenMP kernels in ``_ext/``.

Everything arriving here has been validated (``convviz._validate``): shapes agree
with the geometry, dtypes are supported, sizes are sane.  This module hands the
arrays to the kernels as logical-NHWC views (no copies), with the geometry's
numbers, the SIMD variant to run and the thread count.  The kernels read and
write every supported dtype themselves: half types are computed in float32 and
rounded once, so no full-size temporary is made.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np

from .. import _depthwise_filter_grad, _input_grad, _openmp_info
from .._validate import BFLOAT16, FilterGradCall, InputGradCall
from ..geometry import AxisGeometry, ConvGeometry

# Partial sums of the filter gradient: about ROWS_PER_BLOCK rows of out_backprop
# per block (fewer blocks re-read fewer input rows at block edges), at most
# MAX_REDUCTION_BLOCKS blocks and REDUCTION_BUDGET_BYTES for all of them.  All
# constants, never the thread count, so the summation order (and so every bit
# of the result) does not depend on threads.
ROWS_PER_BLOCK = 16
MAX_REDUCTION_BLOCKS = 64
REDUCTION_BUDGET_BYTES = 8 * 2**20


# dtype -> the kernels' type code (see _ext/cvz_common.hpp).
TYPE_CODES = {np.dtype(np.float16): 0, BFLOAT16: 1, np.dtype(np.float32): 2, np.dtype(np.float64): 3}

# Below this many flops a call runs on one thread: a parallel region costs more
# than it saves.  The split never changes a result, only who computes it.
MIN_PARALLEL_WORK = 2.0e6

def _isa_from_environment() -> str:
    requested = os.environ.get("CONVVIZ_ISA", "").strip().lower()
    if requested and requested in _openmp_info.available_isas():
        return requested
    return _openmp_info.best_isa()


_ISA = _isa_from_environment()


def current_isa() -> str:
    """The SIMD variant the kernels run: 'avx512', 'avx2' or 'generic'."""
    return _ISA


@contextmanager
def use_isa(name: str):
    """Run the kernels with another compiled-in SIMD variant (for tests and benchmarks)."""
    global _ISA
    if name not in _openmp_info.available_isas():
        raise ValueError(f"ISA {name!r} is not available here; choose from {_openmp_info.available_isas()}")
    previous, _ISA = _ISA, name
    try:
        yield
    finally:
        _ISA = previous


def _isa_code() -> int:
    return _openmp_info.ISA_NAMES.index(_ISA)


def _kernel_view(array: np.ndarray) -> np.ndarray:
    """The array itself when its strides are whole elements (always, unless built oddly)."""
    itemsize = array.itemsize
    if any(stride % itemsize for stride in array.strides):
        return np.ascontiguousarray(array)
    return array


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
    return max(1, min(rows // ROWS_PER_BLOCK, MAX_REDUCTION_BLOCKS, by_budget))


def conv2d_backprop_input(call: InputGradCall) -> np.ndarray:
    """Run the input-gradient kernel for a validated call."""
    g = call.geometry
    if call.out_backprop.size == 0 or np.prod(g.input_shape) == 0:
        return np.zeros(g.input_shape, dtype=call.dtype)  # nothing reaches the input
    result = np.empty(g.input_shape, dtype=call.dtype)
    if call.dtype == np.int32:
        # Wrapping int32 arithmetic as uint32 (same bits, modular arithmetic).
        _input_grad.input_grad_int32(
            _as_nhwc(call.out_backprop.view(np.uint32), g),
            np.ascontiguousarray(call.filter.view(np.uint32).transpose(0, 1, 3, 2)),
            _as_nhwc(result.view(np.uint32), g),
            _tap_ranges(g.cols),
            g.rows.stride, g.cols.stride, g.rows.dilation, g.cols.dilation,
            g.rows.pad_before, g.cols.pad_before, g.groups, call.n_threads,
        )
        return result
    dy = _as_nhwc(_kernel_view(call.out_backprop), g)
    filt = _kernel_view(call.filter)
    _input_grad.input_grad(
        dy, TYPE_CODES[call.dtype], filt, TYPE_CODES[call.dtype], _as_nhwc(result, g), TYPE_CODES[call.dtype],
        g.rows.stride, g.cols.stride, g.rows.dilation, g.cols.dilation,
        g.rows.pad_before, g.cols.pad_before, g.groups,
        call.n_threads, _isa_code(), call.dtype == np.float64, MIN_PARALLEL_WORK,
    )
    return result


def depthwise_conv2d_native_backprop_filter(call: FilterGradCall) -> np.ndarray:
    """Run the depthwise filter-gradient kernel for a validated call."""
    g = call.geometry
    if call.out_backprop.size == 0 or call.input.size == 0:
        return np.zeros(g.filter_shape, dtype=call.dtype)  # an empty sum
    result = np.empty(g.filter_shape, dtype=call.dtype)
    f64 = call.dtype == np.float64
    code = TYPE_CODES[call.dtype]
    _depthwise_filter_grad.depthwise_filter_grad(
        _as_nhwc(_kernel_view(call.input), g), code,
        _as_nhwc(_kernel_view(call.out_backprop), g), code,
        result, code,
        _tap_ranges(g.cols),
        g.rows.stride, g.cols.stride, g.rows.dilation, g.cols.dilation,
        g.rows.pad_before, g.cols.pad_before,
        reduction_blocks(g, 8 if f64 else 4),
        call.n_threads, _isa_code(), f64, MIN_PARALLEL_WORK,
    )
    return result
