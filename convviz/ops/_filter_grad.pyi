"""Types of the Cython kernel module ``convviz.ops._filter_grad`` (see ``_filter_grad.pyx``)."""

from ._kernel_types import FloatArray, TapsKernel
from ._kernel_types import last_scratch_bytes as last_scratch_bytes

# (input, out_backprop) -> filter gradient [KH, KW, C_in / groups, C_out]; count: the groups
filter_grad: TapsKernel

def filter_grad_amx(
    input: FloatArray,
    out_backprop: FloatArray,
    filter_grad: FloatArray,
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
