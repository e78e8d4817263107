"""Types of the Cython kernel module ``convviz.ops._input_grad`` (see ``_input_grad.pyx``)."""

from ._kernel_types import GroupedKernel
from ._kernel_types import last_scratch_bytes as last_scratch_bytes

# (out_backprop, filter) -> input gradient [N, H, W, C_in]; option: the fast paths to try
input_grad: GroupedKernel

def record_scratch_bytes(used: int) -> None:
    """Note ``used`` as the calling thread's most recent scratch bytes (the plan's total over its phases)."""
