"""Types of the Cython kernel module ``convviz.ops._forward`` (see ``_forward.pyx``)."""

from ._kernel_types import FloatArray, GroupedKernel, WordKernel
from ._kernel_types import last_scratch_bytes as last_scratch_bytes

# (input, filter) -> output [N, OH, OW, C_out]; option: bfloat16 on AMX tiles where the call suits them
forward: GroupedKernel
forward_int32: WordKernel

def forward_amx(calls: list[tuple[FloatArray, FloatArray, FloatArray, tuple[int, int, int, int, int, int, int]]],
                y_type: int, n_threads: int, min_parallel_work: float) -> int:
    """Several bfloat16 forward calls on AMX tiles as one; the scratch bytes used, or -1 (nothing written)."""

def amx_usable() -> bool:
    """Whether bfloat16 can run on AMX tiles here (CPU, build, Linux's grant of the tile state)."""

def amx_unusable_reason() -> str:
    """Why bfloat16 does not run on AMX tiles here ("" when it can)."""

def last_ran_on_amx() -> bool:
    """Whether the calling process's most recent ``forward`` ran on AMX tiles."""
