"""Types of the Cython kernel module ``convviz.ops._input_grad`` (see ``_input_grad.pyx``)."""

from typing import Any

import numpy as np
import numpy.typing as npt

# float16, ml_dtypes.bfloat16, float32 or float64 (the *_type code says which),
# in logical NHWC order with any element strides (NCHW arrives transposed).
_FloatArray = npt.NDArray[Any]

def last_scratch_bytes() -> int:
    """Scratch bytes of the calling thread's most recent kernel call in this module (0 before any)."""

def record_scratch_bytes(used: int) -> None:
    """Note ``used`` as the calling thread's most recent scratch bytes (the plan's total over its phases)."""

def input_grad(
    out_backprop: _FloatArray,
    dy_type: int,
    filter: _FloatArray,
    w_type: int,
    in_backprop: _FloatArray,
    dx_type: int,
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
    dot: int = 0,
) -> int:
    """Overwrite ``in_backprop`` [N, H, W, C_in] with the input gradient; return the scratch bytes used.

    Type codes: 0 float16, 1 bfloat16, 2 float32, 3 float64; ``isa``: an index
    of ``convviz._openmp_info.ISA_NAMES``; ``f64``: compute in float64;
    ``dot``: the fast paths to try (1 bfloat16 dot product, 2 float16 FMA);
    -1 when ``dot`` names some and none applies (nothing written).
    """

def input_grad_int32(
    out_backprop: npt.NDArray[np.uint32],
    filter_t: npt.NDArray[np.uint32],
    in_backprop: npt.NDArray[np.uint32],
    col_ranges: npt.NDArray[np.intp],
    stride_h: int,
    stride_w: int,
    dil_h: int,
    dil_w: int,
    pad_top: int,
    pad_left: int,
    groups: int,
    n_threads: int,
    min_parallel_work: float = 0.0,
) -> int:
    """Overwrite ``in_backprop`` (int32 viewed as uint32) with the input gradient; return 0 (no scratch)."""
