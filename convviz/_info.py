"""What this convviz build is and can do: version, OpenMP, threads, optional packages."""

from __future__ import annotations

import importlib
import os
import platform
import sys
from typing import Any

from . import _openmp_info, _wait_policy
from ._version import __version__


def openmp_enabled() -> bool:
    """Whether the kernels were compiled with OpenMP.

    A build without OpenMP still works, serially.

    Examples
    --------
    >>> import convviz
    >>> isinstance(convviz.openmp_enabled(), bool)
    True
    """
    return _openmp_info.openmp_enabled()


def _current_isa() -> str:
    from ._backends import cpu

    return cpu.current_isa()


def _fast_bf16() -> str:
    from ._backends import cpu

    if cpu.bf16_dot_in_use():
        return "AVX512_BF16 dot product (vdpbf16ps)"
    if cpu.BF16_DOT and cpu.current_isa() != "avx512":
        return f"no: the CPU has AVX512_BF16, but the {cpu.current_isa()} kernels run"
    if cpu.BF16_DOT:
        return "no: the CPU has AVX512_BF16, but vdpbf16ps is slower here than the float32 FMA"
    return "no: the CPU lacks AVX512_BF16; \"fast\" computes as the default"


def _fast_f16() -> str:
    from ._backends import cpu

    if cpu.f16_fma_in_use():
        return "AVX512_FP16 FMA (vfmadd231ph), 32 or more input channels per group"
    if cpu.F16_FMA:
        return f"no: the CPU has AVX512_FP16, but the {cpu.current_isa()} kernels run"
    return "no: the CPU (or this build) lacks AVX512_FP16; \"fast\" computes as the default"


def cpu_model_and_flags() -> tuple[str, set[str]]:
    """The CPU's model name and feature flags (Linux's /proc/cpuinfo; elsewhere no flags).

    Examples
    --------
    >>> from convviz._info import cpu_model_and_flags
    >>> model, flags = cpu_model_and_flags()
    >>> isinstance(model, str) and isinstance(flags, set)
    True
    """
    model: str | None = None
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                key, _, value = (part.strip() for part in line.partition(":"))
                if key == "model name" and model is None:
                    model = value
                elif key == "flags":
                    flags = set(value.split())
                    break  # the first core's lines are enough
    except OSError:
        pass
    return model or platform.processor() or "unknown", flags


def _amx() -> str:
    """The CPU's AMX tiles, as Linux reports them, and whether convviz uses them."""
    from ._backends import cpu

    tiles = sorted(flag[4:].upper() for flag in cpu_model_and_flags()[1] if flag.startswith("amx_") and flag != "amx_tile")
    has = f"the CPU has AMX ({', '.join(tiles)})" if tiles else "the CPU (or Linux's report of it) has no AMX tiles"
    if cpu.amx_in_use():
        return (f"yes: {has}; convviz runs bfloat16 forward passes, input gradients and dense filter "
                "gradients on AMX-BF16 (exact products, float32 sums; float16 and the depthwise ops on AVX-512)")
    if not cpu.AMX_ALLOWED:
        return f"no: {has}; switched off (CONVVIZ_AMX=0)"
    if cpu.amx_usable():
        return f"no: {has}; the {cpu.current_isa()} kernels run (AMX needs the AVX-512 ones)"
    return f"no: {cpu.amx_unusable_reason()}" + (f" ({has})" if tiles else "")


def _package_version(name: str) -> str | None:
    try:
        module = importlib.import_module(name)
    except Exception:  # absent, or present but broken: both mean "not usable"
        return None
    return getattr(module, "__version__", "unknown")


def _cupy_info() -> dict[str, Any]:
    from ._backends import cuda

    return cuda.info()


def show_versions(as_dict: bool = False) -> dict[str, Any] | None:
    """Print (or return) what this convviz build is and what it can use.

    Parameters
    ----------
    as_dict : bool, optional
        Return the facts as a dict instead of printing them.

    Returns
    -------
    dict or None
        With ``as_dict=True``: ``convviz``, ``location`` (the folder it is
        imported from), ``python``, ``platform``, ``numpy``,
        ``ml_dtypes``, ``openmp`` (compiled in or not), ``max_threads`` (what
        ``n_threads=None`` uses), ``omp_wait`` (how idle kernel threads wait, and
        who set it: :mod:`convviz._wait_policy`), ``omp_num_threads`` (the environment variable),
        ``cpu_count``, ``simd`` (the kernel variant in use), ``fast_bf16`` and
        ``fast_f16`` (what ``precision="fast"`` runs for bfloat16 and float16
        on this CPU: the instruction, or "no: " and why), ``amx`` (the CPU's
        AMX tiles and whether the kernels use them) and ``cupy`` (its
        version, or None when absent; with it ``cuda_runtime``, ``cuda_devices``
        and the ``gpu`` names).

    Examples
    --------
    >>> import convviz
    >>> info = convviz.show_versions(as_dict=True)
    >>> sorted(info)[:4]
    ['amx', 'convviz', 'cpu_count', 'cupy']
    >>> info["max_threads"] >= 1
    True
    """
    info: dict[str, Any] = {
        "convviz": __version__,
        # Which install is imported: a wheel's site-packages or a clone (editable).
        "location": os.path.dirname(os.path.abspath(__file__)),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": _package_version("numpy"),
        "ml_dtypes": _package_version("ml_dtypes"),
        "openmp": _openmp_info.openmp_enabled(),
        "simd": _current_isa(),
        "fast_bf16": _fast_bf16(),
        "fast_f16": _fast_f16(),
        "amx": _amx(),
        "max_threads": _openmp_info.max_threads(),
        "omp_wait": _wait_policy.describe(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "cpu_count": os.cpu_count(),
    }
    info.update(_cupy_info())
    if as_dict:
        return info
    width = max(len(key) for key in info)
    for key, value in info.items():
        if key == "openmp":
            value = "yes (parallel kernels)" if value else "no (serial kernels)"
        print(f"{key:>{width}}: {value}")
    return None
