"""The call shapes the compiled kernel modules share, for their stubs (``_<op>.pyi``).

Every float kernel takes its op's two tensors and its result, each with its type
code (0 float16, 1 bfloat16, 2 float32, 3 float64), in logical NHWC order with any
element strides (an NCHW call arrives transposed; filters are HWIO or, depthwise,
``[KH, KW, C, M]``); then the window (``stride_h, stride_w, dil_h, dil_w, pad_top,
pad_left``); then the thread count, ``isa`` (an index of
``convviz._openmp_info.ISA_NAMES``), ``f64`` (compute in float64) and the least work
worth a parallel region.  It overwrites the result and returns the scratch bytes it
used (-1 where a kernel that only suits some calls wrote nothing).  The stubs say
which shape each entry point has; the ``.pyx`` beside each says what it computes.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

# float16, ml_dtypes.bfloat16, float32 or float64 (the type code says which).
FloatArray = npt.NDArray[Any]
# int32 viewed as uint32 (wrapping arithmetic).
WordArray = npt.NDArray[np.uint32]
# [KW, 2]: per filter column, the half-open range of output columns whose input column is real.
ColumnRanges = npt.NDArray[np.intp]


class WindowKernel(Protocol):
    """``kernel(a, a_type, b, b_type, result, result_type, *window, n_threads, isa, f64,
    min_parallel_work)``: the depthwise forward pass and input gradient."""

    def __call__(self, a: FloatArray, a_type: int, b: FloatArray, b_type: int, result: FloatArray,
                 result_type: int, stride_h: int, stride_w: int, dil_h: int, dil_w: int, pad_top: int,
                 pad_left: int, n_threads: int, isa: int, f64: bool, min_parallel_work: float, /) -> int: ...


class GroupedKernel(Protocol):
    """``kernel(..., *window, groups, n_threads, isa, f64, min_parallel_work, option=0)``: the
    dense forward pass (``option``: bfloat16 on AMX tiles where the call suits them) and
    input gradient (``option``: the fast paths to try, 1 bfloat16 dot product, 2 float16
    FMA; -1 when none applies)."""

    def __call__(self, a: FloatArray, a_type: int, b: FloatArray, b_type: int, result: FloatArray,
                 result_type: int, stride_h: int, stride_w: int, dil_h: int, dil_w: int, pad_top: int,
                 pad_left: int, groups: int, n_threads: int, isa: int, f64: bool, min_parallel_work: float,
                 option: int = 0, /) -> int: ...


class TapsKernel(Protocol):
    """``kernel(a, a_type, b, b_type, result, result_type, col_ranges, *window, count,
    n_threads, isa, f64, min_parallel_work)``: the filter gradients (``count``: the groups
    of the dense one, the reduction's blocks of the depthwise one)."""

    def __call__(self, a: FloatArray, a_type: int, b: FloatArray, b_type: int, result: FloatArray,
                 result_type: int, col_ranges: ColumnRanges, stride_h: int, stride_w: int, dil_h: int,
                 dil_w: int, pad_top: int, pad_left: int, count: int, n_threads: int, isa: int, f64: bool,
                 min_parallel_work: float, /) -> int: ...


class WordKernel(Protocol):
    """``kernel(a, b, result, col_ranges, *window, groups, n_threads, min_parallel_work=0.0)``:
    int32 (as uint32, wrapping) forward pass and input gradient; returns 0 (no scratch)."""

    def __call__(self, a: WordArray, b: WordArray, result: WordArray, col_ranges: ColumnRanges, stride_h: int,
                 stride_w: int, dil_h: int, dil_w: int, pad_top: int, pad_left: int, groups: int, n_threads: int,
                 min_parallel_work: float = 0.0, /) -> int: ...


def last_scratch_bytes() -> int:
    """Scratch bytes of the calling thread's most recent kernel call in this module (0 before any)."""
    raise NotImplementedError("the compiled kernel modules define it")  # pragma: no cover
