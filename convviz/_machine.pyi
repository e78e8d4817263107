"""Types of the Cython module ``convviz._machine`` (see ``_machine.pyx``)."""

from typing import Any, Callable, Final, Literal

_IsaName = Literal["generic", "avx2", "avx512"]

MEMORY_KERNELS: Final[tuple[str, ...]]

def amx_bf16_available() -> bool:
    """Whether AMX-BF16 tiles run here (CPU, build, Linux's grant of the tile state)."""

def last_level_cache_bytes() -> int:
    """Size of the CPU's last-level cache in bytes, or 0 when it cannot be read."""

def default_array_bytes() -> int:
    """Bytes of each of the bandwidth measurement's two arrays."""

def fma_peak_gflops(n_threads: int, isa: _IsaName | None = None, dtype: Literal["float32", "float64", "bfloat16_dot", "float16", "amx_bf16"] = "float32",
                    seconds: float = 0.1, repeats: int = 3) -> float:
    """The FMA peak in GFLOP/s of one kernel variant on ``n_threads`` threads."""

def memory_bandwidth(n_threads: int, isa: _IsaName | None = None, array_bytes: int | None = None,
                     seconds: float = 0.1, min_passes: int = 3) -> dict[str, float]:
    """Memory bandwidth in GB/s by kernel: 'read', 'write', 'copy' and (with streaming stores) 'copy_streaming'."""

def measure(n_threads: int, isa: _IsaName | None = None, seconds: float = 0.1, array_bytes: int | None = None,
            progress: Callable[[str], None] | None = None, repeats: int = 5) -> dict[str, Any]:
    """FMA peaks (float32, float64), bandwidths, the ISA and the threads that ran."""
