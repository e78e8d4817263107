"""Types of the Cython module ``convviz._openmp_info`` (see ``_openmp_info.pyx``)."""

from typing import Final, Literal

_IsaName = Literal["generic", "avx2", "avx512"]

# Indexed by the kernels' ISA codes.
ISA_NAMES: Final[tuple[Literal["generic"], Literal["avx2"], Literal["avx512"]]]

def openmp_enabled() -> bool:
    """True when the kernels were compiled with OpenMP."""

def max_threads() -> int:
    """Threads a parallel region uses by default (honours OMP_NUM_THREADS)."""

def num_procs() -> int:
    """Processors OpenMP sees (1 in a serial build)."""

def best_isa() -> _IsaName:
    """Name of the best kernel variant this CPU runs."""

def bf16_dot_available() -> bool:
    """True when the CPU has AVX512_BF16 and runs AVX-512 code (precision="fast")."""

def f16_fma_available() -> bool:
    """True when the CPU has AVX512_FP16, runs AVX-512 code and this build holds that code (precision="fast")."""

def available_isas() -> tuple[_IsaName, ...]:
    """Kernel variants compiled in and supported by this CPU, best first."""

def threads_used(n_threads: int) -> int:
    """Run an empty parallel loop on ``n_threads`` threads; return how many took part."""
