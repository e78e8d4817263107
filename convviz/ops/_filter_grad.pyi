"""Types of the Cython kernel module ``convviz.ops._filter_grad`` (see ``_filter_grad.pyx``)."""

from typing import Any

import numpy as np
import numpy.typing as npt

# float16, ml_dtypes.bfloat16, float32 or float64 (the *_type code says which),
# in logical NHWC order with any element strides (NCHW arrives transposed).
_FloatArray = npt.NDArray[Any]

def last_scratch_bytes() -> int:
    """Scratch bytes of the calling thread's most recent kernel call in this module (0 before any)."""

def filter_grad(
    input: _FloatArray,
    x_type: int,
    out_backprop: _FloatArray,
    dy_type: int,
    filter_grad: _FloatArray,
    out_type: int,
    col_ranges: npt.NDArray[np.intp],
    stride_h: int,
    stride_w: int,
    dil_h: int,
    dil_w: int,
    pad_top: int,
    pad_left: int,
    groups: int,
    n_threads: int,
    isa: int,
    f64: bool,
    min_parallel_work: float,
) -> int:
    """Overwrite ``filter_grad`` [KH, KW, C_in / groups, C_out] with the gradient; return the scratch bytes used.

    Type codes: 0 float16, 1 bfloat16, 2 float32, 3 float64; ``isa``: an index
    of ``convviz._openmp_info.ISA_NAMES``; ``f64``: compute in float64.
    """

def filter_grad_amx(
    input: _FloatArray,
    out_backprop: _FloatArray,
    filter_grad: _FloatArray,
    out_type: int,
    stride_h: int,
    stride_w: int,
    dil_h: int,
    dil_w: int,
    pad_top: int,
    pad_left: int,
    groups: int,
    n_threads: int,
    min_parallel_work: float,
) -> int:
    """``filter_grad`` for bfloat16 on AMX tiles; the scratch bytes used, or -1 (nothing written) where it does not apply."""

def last_ran_on_amx() -> bool:
    """Whether the calling process's most recent ``filter_grad`` or ``filter_grad_amx`` call ran on AMX tiles."""
