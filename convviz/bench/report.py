"""The benchmark's tables: the cases with their roofline, the shortfall against the target,
the loaded/quiet ratios, and the sweep's summary per op."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict
from typing import Any

from .cases import Result
from .roofline import Roofline, best_peer_roofline, case_roofline, peak_gflops


# -- reporting ---------------------------------------------------------------------
def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


def peaks_line(peaks: dict[str, Any], cpu: str | None = None) -> str:
    """One line of the machine's measured limits (as the benchmark prints them)."""
    fma, bandwidth = peaks["fma_gflops"], peaks["bandwidth_gbs"]
    streaming = (f", copy with streaming stores {bandwidth['copy_streaming']:.1f}"
                 if "copy_streaming" in bandwidth else "")
    cache = f"; last-level cache {_bytes(peaks['llc_bytes'])}" if peaks.get("llc_bytes") else ""
    return (f"machine: {cpu + ', ' if cpu else ''}ISA {peaks['isa']}: FMA peak {fma['float32']:.1f} GFLOP/s "
            f"float32, {fma['float64']:.1f} float64"
            + (f", {fma['bfloat16_dot']:.1f} bfloat16 dot product" if "bfloat16_dot" in fma else "")
            + (f", {fma['float16']:.1f} float16" if "float16" in fma else "")
            + (f", {fma['amx_bf16']:.1f} bfloat16 on AMX tiles" if "amx_bf16" in fma else "")
            + f" ({peaks['isa']}, {peaks['threads']} threads); bandwidth "
            f"read {bandwidth['read']:.1f}, write {bandwidth['write']:.1f}, copy {bandwidth['copy']:.1f}"
            f"{streaming} GB/s (2 arrays of {_bytes(peaks['array_bytes'])}{cache}; measured in "
            f"{peaks['seconds']:.1f} s)")


def roofline_legend(peaks: dict[str, Any]) -> str:
    """What the table's roofline columns mean, with this machine's numbers."""
    bandwidth = peaks["roof_bandwidth_gbs"]
    fma = peaks["fma_gflops"]
    cache = (f" \\* the case's tensors fit in the {_bytes(peaks['llc_bytes'])} last-level cache, where repeated "
             f"calls find them: it can beat the memory bandwidth." if peaks.get("llc_bytes") else "")
    return (
        "Roofline columns: *traffic* is the compulsory memory traffic of a call (every tensor argument read once, the "
        "result written once) and *GB/s* that traffic over convviz's time. *% FMA* is GFLOP/s against the "
        f"measured FMA peak ({fma['float32']:.1f} GFLOP/s float32, {fma['float64']:.1f} float64 for the "
        "float64 cases"
        + (f", {fma['bfloat16_dot']:.1f} for the bfloat16 dot product of precision=\"fast\""
           if "bfloat16_dot" in fma and peaks.get("bf16_dot_runs", True) else "")
        + (f", {fma['float16']:.1f} for the float16 FMA of precision=\"fast\" float16"
           if "float16" in fma else "")
        + (f", {fma['amx_bf16']:.1f} for bfloat16 forward passes and gradients on AMX tiles"
           if "amx_bf16" in fma and peaks.get("amx_runs", True) else "")
        + f"; {peaks['isa']}, {peaks['threads']} threads). *% BW* is GB/s against the copy "
        f"bandwidth, {bandwidth:.1f} GB/s: a kernel reads its inputs and writes its result, as a copy does "
        "(counted the same way, bytes read + written), and the faster of the two measured copies (ordinary "
        "or streaming stores; the kernels stream results of 8 MiB and more) is the most it can reach. "
        "*bound* is the roof the case's arithmetic intensity (flops per compulsory byte) puts it under: "
        f"memory below the ridge point (peak / bandwidth = {peak_gflops(peaks, 'float32') / bandwidth:.1f} "
        "flop/byte in float32), compute above. *% roof* is GFLOP/s against that roof, min(peak, "
        f"intensity x bandwidth); *best peer % roof* the same for the fastest peer's time: a peer close to "
        f"the roof leaves little to beat it by.{cache}")


def table(results: list[Result], peers: tuple[str, ...] = ("tensorflow", "torch"),
          peaks: dict[str, Any] | None = None) -> str:
    """A Markdown table of the results; with the machine's ``peaks``, roofline columns too
    (see :func:`roofline_legend`)."""
    head = ["case (N,H,W,Cin,Cout\\|M,K,s,d)", "convviz ms", "GFLOP/s"]
    if peaks:
        head += ["traffic", "GB/s", "% FMA", "% BW", "bound", "% roof"]
    head += [f"{p} ms" for p in peers] + ["speedup vs best peer"]
    if peaks:
        head.append("best peer % roof")
    head += ["1-thread ms", "2T/1T", "extra memory (output)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        t = r.times.get("convviz")
        peer_times = [r.times.get(p) for p in peers]
        known = [x for x in peer_times if x]
        speedup = f"{min(known) / t:.2f}x" if known and t else "-"
        cells = [r.case.label, _ms(t), f"{r.case.flops / t / 1e9:.1f}" if t else "-"]
        if peaks:
            roof = case_roofline(r, peaks)
            cached = "\\*" if peaks.get("llc_bytes") and r.case.bytes <= peaks["llc_bytes"] else ""
            cells.append(_bytes(r.case.bytes))
            cells += ([f"{roof.gbs:.1f}", f"{roof.of_peak * 100:.0f}", f"{roof.of_bandwidth * 100:.0f}{cached}",
                       roof.bound, f"{roof.of_roof * 100:.0f}"] if roof else ["-"] * 5)
        for p, x in zip(peers, peer_times):
            cells.append(_ms(x) if x else (r.notes.get(p, "-")[:40]))
        scaling = f"{r.convviz_1thread / t:.2f}" if r.convviz_1thread and t else "-"
        cells.append(speedup)
        if peaks:
            peer_roof = best_peer_roofline(r, peaks, peers)
            cells.append(f"{peer_roof.of_roof * 100:.0f}" if peer_roof else "-")
        cells += [_ms(r.convviz_1thread), scaling,
                  f"{_bytes(r.extra_bytes)} ({_bytes(r.output_bytes)})"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: The lead over the fastest peer the shortfall table measures against (issue 16 asks it of
#: every float32 case).
TARGET_SPEEDUP = 1.05


def shortfall_table(results: list[Result], peers: tuple[str, ...] = ("tensorflow", "torch"),
                    peaks: dict[str, Any] | None = None, target: float = TARGET_SPEEDUP) -> str:
    """A Markdown table of the cases under ``target`` times the fastest peer, and what
    ``target`` would take: the fraction of the roof convviz would have to reach,
    ``target`` times the one the peer reaches (its *best peer % roof*).  Where that
    is near or past 100%, the peer already runs at the machine's limit; where it is
    well below, the kernel has room.  Empty without ``peaks`` or without such cases.

    Examples
    --------
    >>> from convviz.bench import CASES, Result
    >>> case = next(c for c in CASES if c.name == "fwd_resnet")
    >>> peaks = {"fma_gflops": {"float32": 400.0, "float64": 200.0}, "roof_bandwidth_gbs": 40.0}
    >>> flops_at = lambda fraction: case.flops / (fraction * 400e9)  # seconds at that fraction of the peak
    >>> result = Result(case, times={"convviz": flops_at(0.80), "torch": flops_at(0.84)})
    >>> print(shortfall_table([result], ("torch",), peaks).splitlines()[2])
    | fwd_resnet 8,56,56,64,64,3,1,1 | 0.952x | compute | 80 | 84 | 88 |
    """
    if not peaks:
        return ""
    rows = []
    for r in results:
        t = r.times.get("convviz")
        known = [x for x in (r.times.get(p) for p in peers) if x]
        roof, peer_roof = case_roofline(r, peaks), best_peer_roofline(r, peaks, peers)
        if not (t and known and roof and peer_roof) or min(known) / t >= target:
            continue
        # Three decimals, rounded down: rounded to nearest, a case at 1.0499x would read 1.050x,
        # as if it met the target it misses.
        speedup = math.floor(min(known) / t * 1000 + 1e-9) / 1000
        rows.append(f"| {r.case.label} | {speedup:.3f}x | {roof.bound} | {roof.of_roof * 100:.0f} | "
                    f"{peer_roof.of_roof * 100:.0f} | {peer_roof.of_roof * target * 100:.0f} |")
    if not rows:
        return ""
    head = ["case", "speedup vs best peer", "bound", "convviz % roof", "best peer % roof",
            f"% roof {target:.2f}x needs"]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows])


#: What a loaded call may cost against a quiet one (issue 35: TensorFlow's figure on 2 cores).
LOAD_TARGET = 2.0


def machine_load_line(ratios: dict[str, float], load: int) -> str:
    """One line: what the machine itself gives one-thread reference work under the load.

    >>> machine_load_line({"a 32 MiB copy (DRAM)": 3.05, "a Python loop": 1.46}, 2)
    'The machine itself, with 2 busy processes beside one thread: a 32 MiB copy (DRAM) 3.05x the quiet time, a Python loop 1.46x.'
    """
    parts = [f"{name} {ratio:.2f}x" for name, ratio in ratios.items()]
    if parts:
        parts[0] += " the quiet time"
    return f"The machine itself, with {load} busy processes beside one thread: {', '.join(parts)}."


def load_table(results: list[Result], peers: tuple[str, ...] = ("tensorflow", "torch"),
               load: int = 0) -> str:
    """A Markdown table of each case's loaded / quiet ratio of the mean time per call,
    for convviz and each peer, and a closing line with convviz's median and worst
    ratio.  Empty when no case was timed under load.

    Examples
    --------
    >>> from convviz.bench import CASES, Result
    >>> case = next(c for c in CASES if c.name == "fwd_tiny")
    >>> r = Result(case, times={"convviz": 1e-4, "torch": 2e-4}, quiet_mean={"convviz": 1e-4, "torch": 2e-4},
    ...            loaded={"convviz": 1.5e-4, "torch": 5e-4})
    >>> print(load_table([r], ("torch",), load=2))  # doctest: +NORMALIZE_WHITESPACE
    | case | convviz quiet ms (mean) | convviz loaded ms (mean) | convviz loaded/quiet | torch loaded/quiet |
    |---|---|---|---|---|
    | fwd_tiny 1,8,8,3,8,3,1,1 | 0.100 | 0.150 | 1.50 | 2.50 |
    <BLANKLINE>
    With 2 busy processes beside it, convviz's loaded/quiet ratio: median 1.50, worst 1.50 (fwd_tiny 1,8,8,3,8,3,1,1); target 2.0 or less.
    """
    timed = [r for r in results if r.loaded]
    if not timed:
        return ""
    head = ["case", "convviz quiet ms (mean)", "convviz loaded ms (mean)", "convviz loaded/quiet",
            *(f"{p} loaded/quiet" for p in peers)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ratios: list[tuple[float, str]] = []
    for r in timed:
        cells = [r.case.label, _ms(r.quiet_mean.get("convviz")), _ms(r.loaded.get("convviz"))]
        for name in ("convviz", *peers):
            quiet, loaded = r.quiet_mean.get(name), r.loaded.get(name)
            cells.append(f"{loaded / quiet:.2f}" if quiet and loaded else "-")
            if name == "convviz" and quiet and loaded:
                ratios.append((loaded / quiet, r.case.label))
        lines.append("| " + " | ".join(cells) + " |")
    if ratios:
        worst = max(ratios)
        lines += ["", f"With {load} busy processes beside it, convviz's loaded/quiet ratio: median "
                      f"{statistics.median(x for x, _ in ratios):.2f}, worst {worst[0]:.2f} ({worst[1]}); "
                      f"target {LOAD_TARGET:.1f} or less."]
    return "\n".join(lines)


def sweep_summary(results: list[Result], peers: tuple[str, ...] = ("tensorflow", "torch"),
                  peaks: dict[str, Any] | None = None) -> str:
    """Per op: how many cases, the min / median / max speedup over the fastest peer,
    how many are under 1.0x, and how many of those have both convviz and the peer
    at 90% or more of the roof (a tie at the machine's limit).

    Examples
    --------
    >>> from convviz.bench import Result, sweep_cases
    >>> fwd = [c for c in sweep_cases(["resnet18"], batches=(1,)) if c.op == "conv2d"][:3]
    >>> rs = [Result(c, times={"convviz": t, "torch": 1.0}) for c, t in zip(fwd, (0.5, 1.0, 2.0))]
    >>> print(sweep_summary(rs, ("torch",)))
    | op | cases | min | median | max | under 1.0x | of those, both at 90% of the roof or more |
    |---|---|---|---|---|---|---|
    | conv2d | 3 | 0.50x | 1.00x | 2.00x | 1 | - |
    """
    head = ["op", "cases", "min", "median", "max", "under 1.0x", "of those, both at 90% of the roof or more"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for op in dict.fromkeys(r.case.op for r in results):
        speedups, under, tied = [], 0, 0
        for r in (r for r in results if r.case.op == op):
            t = r.times.get("convviz")
            known = [x for x in (r.times.get(p) for p in peers) if x]
            if not (t and known):
                continue
            speedups.append(min(known) / t)
            if speedups[-1] < 1.0:
                under += 1
                roof, peer_roof = (case_roofline(r, peaks), best_peer_roofline(r, peaks, peers)) if peaks \
                    else (None, None)
                tied += bool(roof and peer_roof and roof.of_roof >= 0.9 and peer_roof.of_roof >= 0.9)
        if speedups:
            lines.append(f"| {op} | {len(speedups)} | {min(speedups):.2f}x | {statistics.median(speedups):.2f}x | "
                         f"{max(speedups):.2f}x | {under} | {tied if peaks else '-'} |")
    return "\n".join(lines)


def _asdict_or_none(roof: Roofline | None) -> dict[str, Any] | None:
    return None if roof is None else asdict(roof)
