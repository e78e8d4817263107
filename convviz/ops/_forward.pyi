"""Types of the Cython kernel module ``convviz.ops._forward`` (see ``_forward.pyx``)."""

from typing import Any

import numpy as np
import numpy.typing as npt

# float16, ml_dtypes.bfloat16, float32 or float64 (the *_type code says which),
# in logical NHWC order with any element strides (NCHW arrives transposed).
_FloatArray = npt.NDArray[Any]

def last_scratch_bytes() -> int:
    """Scratch bytes of the calling thread's most recent kernel call in this module (0 before any)."""

def forward(
    input: _FloatArray,
    x_type: int,
    filter: _FloatArray,
    w_type: int,
    output: _FloatArray,
    y_type: int,
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
    amx: bool = False,
) -> int:
    """Overwrite ``output`` [N, OH, OW, C_out] with conv2d(input, filter); return the scratch bytes used.

    Type codes: 0 float16, 1 bfloat16, 2 float32, 3 float64; ``isa``: an index
    of ``convviz._openmp_info.ISA_NAMES``; ``f64``: compute in float64;
    ``amx``: bfloat16 on AMX tiles where the call suits them.
    """

def forward_amx(calls: list[tuple[_FloatArray, _FloatArray, _FloatArray, tuple[int, int, int, int, int, int, int]]],
                y_type: int, n_threads: int, min_parallel_work: float) -> int:
    """Several bfloat16 forward calls on AMX tiles as one; the scratch bytes used, or -1 (nothing written)."""

def amx_usable() -> bool:
    """Whether bfloat16 can run on AMX tiles here (CPU, build, Linux's grant of the tile state)."""

def amx_unusable_reason() -> str:
    """Why bfloat16 does not run on AMX tiles here ("" when it can)."""

def last_ran_on_amx() -> bool:
    """Whether the calling process's most recent ``forward`` ran on AMX tiles."""

def forward_int32(
    input: npt.NDArray[np.uint32],
    filter: npt.NDArray[np.uint32],
    output: npt.NDArray[np.uint32],
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
    """Overwrite ``output`` (int32 viewed as uint32) with conv2d(input, filter); return 0 (no scratch)."""
