"""Each case against the machine's roof: the FMA peak of its dtype and op, or the bandwidth
its compulsory traffic meets (:func:`roofline`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .cases import Result


# The ops whose bfloat16 calls run on AMX tiles where they run (their roof is the tiles' peak).
AMX_OPS = frozenset({"conv2d", "conv2d_backprop_input", "conv2d_backprop_filter"})


def peak_gflops(peaks: dict[str, Any], dtype: str, precision: str = "accurate", op: str | None = None) -> float:
    """The FMA peak that bounds a case of ``dtype``: float64's for float64, else
    float32's (the kernels compute float16 and bfloat16 in float32) -- but the
    AMX tiles' for bfloat16 cases of the dense ops (``AMX_OPS``) where they run,
    and, with precision="fast", the bfloat16 dot product's for bfloat16 where
    it ran and the float16 FMA's for float16 where it was measured.

    Examples
    --------
    >>> peaks = {"fma_gflops": {"float32": 350.0, "float64": 175.0, "bfloat16_dot": 172.0}, "bf16_dot_runs": False}
    >>> peak_gflops(peaks, "bfloat16", "fast")  # the dot product is slower here: float32 ran
    350.0
    >>> peaks = {"fma_gflops": {"float32": 350.0, "float64": 175.0, "amx_bf16": 5500.0}, "amx_runs": True}
    >>> peak_gflops(peaks, "bfloat16", op="conv2d"), peak_gflops(peaks, "bfloat16", op="depthwise_conv2d_native")
    (5500.0, 350.0)
    """
    fma = peaks["fma_gflops"]
    if dtype == "bfloat16" and op in AMX_OPS and "amx_bf16" in fma and peaks.get("amx_runs", True):
        return float(fma["amx_bf16"])
    if dtype == "bfloat16" and precision == "fast" and "bfloat16_dot" in fma and peaks.get("bf16_dot_runs", True):
        return float(fma["bfloat16_dot"])
    if dtype == "float16" and precision == "fast" and "float16" in fma:
        return float(fma["float16"])
    return float(fma["float64"] if dtype == "float64" else fma["float32"])


@dataclass(frozen=True)
class Roofline:
    """Where a case sits under the roofline (rates in GFLOP/s and GB/s, fractions of 1)."""

    gflops: float  # achieved: flops / time
    gbs: float  # compulsory bytes / time
    intensity: float  # flops per compulsory byte
    ridge: float  # peak / bandwidth: the intensity at which the two roofs meet
    bound: str  # "memory" (intensity below the ridge) or "compute"
    of_peak: float  # gflops / FMA peak
    of_bandwidth: float  # gbs / bandwidth
    of_roof: float  # gflops / min(peak, intensity * bandwidth): how close to the roof that bounds it


def roofline(flops: float, nbytes: float, seconds: float, peak: float, bandwidth: float) -> Roofline:
    """Set a case (``flops`` and compulsory ``nbytes`` done in ``seconds``) against
    the machine's FMA ``peak`` (GFLOP/s) and ``bandwidth`` (GB/s).

    The case is memory-bound when its arithmetic intensity (flops per byte) is
    below the ridge point peak / bandwidth, compute-bound at or above it; its
    roof is min(peak, intensity * bandwidth).

    Examples
    --------
    >>> r = roofline(flops=2e9, nbytes=1e8, seconds=0.1, peak=100.0, bandwidth=10.0)
    >>> r.intensity, r.ridge, r.bound, round(r.gflops), round(r.of_peak, 2), round(r.of_roof, 2)
    (20.0, 10.0, 'compute', 20, 0.2, 0.2)
    >>> r = roofline(flops=1e8, nbytes=1e8, seconds=0.02, peak=100.0, bandwidth=10.0)
    >>> r.bound, round(r.gbs), round(r.of_bandwidth, 2), round(r.of_roof, 2)
    ('memory', 5, 0.5, 0.5)
    """
    gflops, gbs = flops / seconds / 1e9, nbytes / seconds / 1e9
    intensity, ridge = flops / nbytes, peak / bandwidth
    return Roofline(gflops=gflops, gbs=gbs, intensity=intensity, ridge=ridge,
                    bound="memory" if intensity < ridge else "compute", of_peak=gflops / peak,
                    of_bandwidth=gbs / bandwidth, of_roof=gflops / min(peak, intensity * bandwidth))


def case_roofline(result: Result, peaks: dict[str, Any] | None) -> Roofline | None:
    """The roofline of a result's convviz time (None without peaks or a time)."""
    return _roofline_of(result, peaks, result.times.get("convviz"))


def _roofline_of(result: Result, peaks: dict[str, Any] | None, seconds: float | None) -> Roofline | None:
    """The roofline of ``seconds`` for a result's case (None without peaks or a time)."""
    if not peaks or not seconds:
        return None
    return roofline(result.case.flops, result.case.bytes, seconds,
                    peak_gflops(peaks, result.case.dtype, result.case.precision, result.case.op),
                    peaks["roof_bandwidth_gbs"])


def best_peer_roofline(result: Result, peaks: dict[str, Any] | None,
                       peers: tuple[str, ...] = ("tensorflow", "torch")) -> Roofline | None:
    """The roofline of the fastest peer's time for a result, against the same roof as
    convviz's (None without peaks or a peer time).  Where the peer already runs
    close to the roof, no kernel can beat it by much: the table shows how close.

    Examples
    --------
    >>> from convviz.bench import CASES, Result
    >>> case = next(c for c in CASES if c.name == "fwd_resnet")
    >>> result = Result(case, times={"convviz": 0.006, "torch": 0.005, "tensorflow": 0.007})
    >>> peaks = {"fma_gflops": {"float32": 400.0, "float64": 200.0}, "roof_bandwidth_gbs": 40.0}
    >>> round(best_peer_roofline(result, peaks).of_peak, 2)  # torch's 5 ms
    0.92
    """
    known = [t for t in (result.times.get(p) for p in peers) if t]
    return _roofline_of(result, peaks, min(known) if known else None)
