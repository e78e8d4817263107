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


_ISA_CODES = {name: code for code, name in enumerate(_openmp_info.ISA_NAMES)}


def _kernel_view(array: np.ndarray) -> np.ndarray:
    """The array itself when its strides are whole elements (always, unless built oddly)."""
    itemsize = array.itemsize
    for stride in array.strides:
        if stride % itemsize:
            return np.ascontiguousarray(array)
    return array


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


class InputGradPlan:
    """Everything the input-gradient kernel needs that depends only on the geometry and dtype.

    Built once per distinct call signature (see ``convviz.ops``); ``run`` then
    only allocates the result and calls the kernel.
    """

    __slots__ = ("shape", "dtype", "empty", "nchw", "code", "f64", "int32", "col_ranges", "ints")

    def __init__(self, geometry: ConvGeometry, dtype: np.dtype, out_backprop_empty: bool) -> None:
        g = geometry
        self.shape = g.input_shape
        self.dtype = dtype
        self.empty = out_backprop_empty or 0 in g.input_shape
        self.nchw = g.data_format == "NCHW"
        self.int32 = dtype == np.int32
        self.code = TYPE_CODES.get(dtype, -1)
        self.f64 = dtype == np.float64
        self.col_ranges = _tap_ranges(g.cols)
        self.ints = (g.rows.stride, g.cols.stride, g.rows.dilation, g.cols.dilation,
                     g.rows.pad_before, g.cols.pad_before, g.groups)

    def run(self, filt: np.ndarray, out_backprop: np.ndarray, n_threads: int) -> np.ndarray:
        if self.empty:
            return np.zeros(self.shape, dtype=self.dtype)  # nothing reaches the input
        result = np.empty(self.shape, dtype=self.dtype)
        nchw = self.nchw
        if self.int32:
            # Wrapping int32 arithmetic as uint32 (same bits, modular arithmetic).
            dy = out_backprop.view(np.uint32)
            out = result.view(np.uint32)
            _input_grad.input_grad_int32(
                dy.transpose(0, 2, 3, 1) if nchw else dy,
                np.ascontiguousarray(filt.view(np.uint32).transpose(0, 1, 3, 2)),
                out.transpose(0, 2, 3, 1) if nchw else out,
                self.col_ranges, *self.ints, n_threads)
            return result
        dy = _kernel_view(out_backprop)
        code = self.code
        _input_grad.input_grad(
            dy.transpose(0, 2, 3, 1) if nchw else dy, code, _kernel_view(filt), code,
            result.transpose(0, 2, 3, 1) if nchw else result, code,
            *self.ints, n_threads, _ISA_CODES[_ISA], self.f64, MIN_PARALLEL_WORK)
        return result


class FilterGradPlan:
    """Everything the depthwise filter-gradient kernel needs, per geometry and dtype."""

    __slots__ = ("shape", "dtype", "empty", "nchw", "code", "f64", "col_ranges", "ints", "n_blocks")

    def __init__(self, geometry: ConvGeometry, dtype: np.dtype, empty: bool) -> None:
        g = geometry
        self.shape = g.filter_shape
        self.dtype = dtype
        self.empty = empty
        self.nchw = g.data_format == "NCHW"
        self.code = TYPE_CODES[dtype]
        self.f64 = dtype == np.float64
        self.col_ranges = _tap_ranges(g.cols)
        self.ints = (g.rows.stride, g.cols.stride, g.rows.dilation, g.cols.dilation,
                     g.rows.pad_before, g.cols.pad_before)
        self.n_blocks = reduction_blocks(g, 8 if self.f64 else 4)

    def run(self, x: np.ndarray, out_backprop: np.ndarray, n_threads: int) -> np.ndarray:
        if self.empty:
            return np.zeros(self.shape, dtype=self.dtype)  # an empty sum
        result = np.empty(self.shape, dtype=self.dtype)
        x, dy = _kernel_view(x), _kernel_view(out_backprop)
        if self.nchw:
            x, dy = x.transpose(0, 2, 3, 1), dy.transpose(0, 2, 3, 1)
        code = self.code
        _depthwise_filter_grad.depthwise_filter_grad(
            x, code, dy, code, result, code, self.col_ranges, *self.ints, self.n_blocks,
            n_threads, _ISA_CODES[_ISA], self.f64, MIN_PARALLEL_WORK)
        return result


def plan_conv2d_backprop_input(call: InputGradCall) -> InputGradPlan:
    return InputGradPlan(call.geometry, call.dtype, call.out_backprop.size == 0)


def plan_depthwise_conv2d_native_backprop_filter(call: FilterGradCall) -> FilterGradPlan:
    return FilterGradPlan(call.geometry, call.dtype, call.out_backprop.size == 0 or call.input.size == 0)


def conv2d_backprop_input(call: InputGradCall) -> np.ndarray:
    """Run the input-gradient kernel for a validated call."""
    return plan_conv2d_backprop_input(call).run(call.filter, call.out_backprop, call.n_threads)


def depthwise_conv2d_native_backprop_filter(call: FilterGradCall) -> np.ndarray:
    """Run the depthwise filter-gradient kernel for a validated call."""
    return plan_depthwise_conv2d_native_backprop_filter(call).run(call.input, call.out_backprop, call.n_threads)
