"""The machine a run measures: its CPU and ISA flags, and its FMA peak and memory bandwidth
(:mod:`convviz._machine`), the roofline's limits."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any, Callable

import numpy as np

from .._info import cpu_model_and_flags


# The CPU flags machine_description() reports: the SIMD and matrix extensions
# that decide which kernels convviz and the peers' oneDNN can run.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16")


def machine_description() -> dict[str, Any]:
    """What the numbers were measured on: CPU model and ISA, cores, convviz's kernels, versions."""
    import convviz
    from convviz import _openmp_info, _wait_policy
    from convviz._backends import cpu

    model, flags = cpu_model_and_flags()
    return {
        "cpu": model,
        # The CPU features that decide which kernels convviz and the peers (oneDNN) can use.
        "isa": [flag for flag in ISA_FLAGS if flag in flags],
        "cores": os.cpu_count(),
        "convviz": convviz.__version__,
        "kernels": cpu.current_isa(),
        "kernels_compiled": list(_openmp_info.available_isas()),
        "openmp": _openmp_info.openmp_enabled(),
        # How idle threads wait (convviz/_wait_policy.py): it decides the loaded times.
        "omp_wait": _wait_policy.describe(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
    }


# -- the machine's limits (the roofline) -------------------------------------------
def measure_peaks(threads: int, seconds: float = 0.1, array_bytes: int | None = None,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The machine's FMA peaks and memory bandwidth on ``threads`` threads, for the
    SIMD variant the kernels run (:func:`convviz._machine.measure`), with the
    bandwidth roof the table uses (``roof_bandwidth_gbs``, :func:`roof_bandwidth`),
    and whether precision="fast" bfloat16 runs on the dot product here
    (``bf16_dot_runs``: it is measured wherever the CPU has it, and taken only
    where it outruns the float32 FMA) and bfloat16's dense ops on AMX tiles
    (``amx_runs``).

    ``seconds`` is the time of each timed run (the whole takes about fifteen
    times that, plus the first touch of the arrays); ``array_bytes`` the size of
    each of the bandwidth's two arrays (None: far beyond the last-level cache).
    """
    from .. import _machine

    peaks = _machine.measure(threads, seconds=seconds, array_bytes=array_bytes, progress=progress)
    peaks["roof_bandwidth_gbs"] = roof_bandwidth(peaks["bandwidth_gbs"])
    from .._backends import cpu

    peaks["bf16_dot_runs"] = cpu.bf16_dot_in_use()
    peaks["amx_runs"] = cpu.amx_in_use()
    return peaks


def best_peaks(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two measurements of the machine (:func:`measure_peaks`) merged: the higher
    FMA peak of each type and bandwidth of each kind.  A peak is what the machine
    can do, so a measurement that another process slowed down says less than one
    it did not; measuring before and after the cases leaves a noisy spell less
    chance to lower every one.

    Examples
    --------
    >>> a = {"fma_gflops": {"float32": 200.0}, "bandwidth_gbs": {"copy": 50.0}, "seconds": 2.0}
    >>> b = {"fma_gflops": {"float32": 230.0}, "bandwidth_gbs": {"copy": 40.0}, "seconds": 2.5}
    >>> merged = best_peaks(a, b)
    >>> merged["fma_gflops"], merged["bandwidth_gbs"], merged["seconds"]
    ({'float32': 230.0}, {'copy': 50.0}, 4.5)
    """
    merged = dict(first)
    for key in ("fma_gflops", "bandwidth_gbs"):
        merged[key] = {name: max(value, second[key].get(name, value)) for name, value in first[key].items()}
    merged["seconds"] = first["seconds"] + second["seconds"]
    merged["roof_bandwidth_gbs"] = roof_bandwidth(merged["bandwidth_gbs"])
    return merged


def roof_bandwidth(bandwidth: dict[str, float]) -> float:
    """The bandwidth roof of every case: the faster of the two copies, in GB/s.

    A kernel reads its inputs and writes its result, the traffic of a copy, and a
    copy's bandwidth counts the same bytes (read + written) as a case's
    compulsory traffic does.  The kernels write results of 8 MiB and more with
    streaming stores (``STREAM_MIN_BYTES`` in ``_ext/cvz_common.hpp``), smaller
    ones with ordinary stores, so the faster copy is the most a kernel can
    reach.  The read bandwidth is higher still, but no kernel only reads.

    Examples
    --------
    >>> roof_bandwidth({"read": 40.0, "write": 30.0, "copy": 35.0, "copy_streaming": 50.0})
    50.0
    >>> roof_bandwidth({"read": 40.0, "write": 30.0, "copy": 35.0})  # no streaming stores (generic)
    35.0
    """
    return max(bandwidth["copy"], bandwidth.get("copy_streaming", 0.0))
