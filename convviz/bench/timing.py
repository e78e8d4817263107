"""Timing: interleaved rounds of every implementation on the same data, convviz's extra
memory, and busy processes beside the calls (``--load``)."""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Any, Callable, Iterator

import numpy as np

from .cases import Case, Result, _data
from .machine import best_peaks, machine_description, measure_peaks
from .peers import NoPeerCall, _load_peers, convviz_call, tensorflow_call, torch_call
from .report import _ms, peaks_line


#: What the machine itself does under the same load, one thread of NumPy or Python each: a
#: copy far larger than the caches (DRAM), the same bytes copied through a buffer that
#: stays in a core's L2, and a Python loop (no memory at all).  A call that is as
#: memory-bound as the first cannot expect a better loaded/quiet ratio than it gets.
LOAD_PROBE_BYTES = (32 << 20, 256 << 10)


def _probe_calls() -> dict[str, Callable[[], Any]]:
    big_bytes, small_bytes = LOAD_PROBE_BYTES
    big = (np.ones(big_bytes // 4, np.float32), np.empty(big_bytes // 4, np.float32))
    small = (np.ones(small_bytes // 4, np.float32), np.empty(small_bytes // 4, np.float32))

    def in_cache() -> None:
        for _ in range(big_bytes // small_bytes):
            np.copyto(small[1], small[0])

    def python_loop() -> None:
        total = 0
        for i in range(200_000):
            total += i

    return {f"a {big_bytes >> 20} MiB copy (DRAM)": lambda: np.copyto(big[1], big[0]),
            f"the same bytes through a {small_bytes >> 10} KiB buffer (in cache)": in_cache,
            "a Python loop": python_loop}


def machine_under_load(load: int, seconds: float = 1.0) -> dict[str, float]:
    """The loaded / quiet ratio of the mean time of a few one-thread reference calls
    (:data:`LOAD_PROBE_BYTES`) with ``load`` busy processes beside them: what this
    machine gives memory-bound, cache-bound and compute-bound work under that load.

    Examples
    --------
    >>> ratios = machine_under_load(1, seconds=0.05)
    >>> next(iter(ratios)), all(r > 0 for r in ratios.values())
    ('a 32 MiB copy (DRAM)', True)
    """
    calls = _probe_calls()
    quiet = _interleaved_times(calls, seconds, 3, 10_000)
    with busy_processes(load):
        loaded = _interleaved_times(calls, seconds, 3, 10_000)
    return {name: statistics.fmean(loaded[name]) / statistics.fmean(quiet[name]) for name in calls}


# -- timing ------------------------------------------------------------------------
def _interleaved_times(calls: dict[str, Callable[[], Any]], min_seconds: float, min_rounds: int,
                       max_rounds: int) -> dict[str, list[float]]:
    """Seconds of every timed call of each implementation, measured in rotating blocks.

    Each round gives every implementation one untimed call and then a few timed
    ones.  Rotating keeps slow drift of a shared machine fair to all; the untimed
    call absorbs the other framework's worker threads, which keep spinning for a
    while after their own parallel region and would otherwise slow the first
    call that follows them.
    """
    times: dict[str, list[float]] = {name: [] for name in calls}
    per_block: dict[str, int] = {}
    for name, call in calls.items():  # warm-up, and calls per block (~20 ms of work)
        call()
        start = time.perf_counter()
        call()
        per_block[name] = max(1, min(20, int(0.02 / max(time.perf_counter() - start, 1e-6))))
    spent = 0.0
    rounds = 0
    while rounds < max_rounds and (rounds < min_rounds or spent < min_seconds):
        for name, call in calls.items():
            call()  # untimed: lets the previous implementation's threads go quiet
            for _ in range(per_block[name]):
                start = time.perf_counter()
                call()
                elapsed = time.perf_counter() - start
                times[name].append(elapsed)
                spent += elapsed
        rounds += 1
    return times


def _extra_memory(case: Case, data: dict[str, np.ndarray], threads: int) -> tuple[int, int]:
    """(convviz's peak bytes beyond inputs and output, output bytes) for one call."""
    call = convviz_call(case, data, threads)
    call()
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    kernel_scratch = case.record.kernel.last_scratch_bytes()
    return max(0, peak - out.nbytes) + kernel_scratch, out.nbytes


# -- load ----------------------------------------------------------------------------
#: A busy process: Python arithmetic on one core until its deadline, or until its
#: parent is gone, so it never outlives the benchmark that started it.
_BUSY_LOOP = """
import os, sys, time
deadline = time.monotonic() + float(sys.argv[1])
parent = os.getppid()
while time.monotonic() < deadline and os.getppid() == parent:
    for _ in range(20000):
        pass
"""


#: The longest a busy process runs: each case starts its own, so this bounds one case.
LOAD_SECONDS = 120.0


#: At most this many busy processes (``--load``).
MAX_LOAD = 64


#: The least time each case's loaded calls take in all: a stall costs a time slice of
#: the scheduler (milliseconds), so the mean needs many of them to settle.
LOAD_MIN_SECONDS = 1.0


@contextlib.contextmanager
def busy_processes(count: int, seconds: float = LOAD_SECONDS) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Run ``count`` processes that each keep a core busy -- what a browser tab or a
    second notebook kernel does to a laptop -- while the block runs.  They stop at
    the end of the block, and by themselves after ``seconds`` or when this
    process is gone.

    Examples
    --------
    >>> with busy_processes(1, seconds=5) as procs:
    ...     [p.poll() for p in procs]
    [None]
    >>> [p.returncode is not None for p in procs]
    [True]
    """
    if not 0 <= count <= MAX_LOAD:
        raise ValueError(f"busy_processes: count must be 0..{MAX_LOAD}, got {count}")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):  # inside the try: a failed start still stops the ones before it
            procs.append(subprocess.Popen([sys.executable, "-c", _BUSY_LOOP, str(seconds)], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if procs:
            time.sleep(0.1)  # past the interpreter's start, into the loop
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def run(cases: list[Case], threads: int = 2, peers: tuple[str, ...] = ("tensorflow", "torch"),
        min_seconds: float = 0.5, min_rounds: int = 6, max_rounds: int = 200, scaling: bool = True,
        seed: int = 0, progress: Callable[[str], None] | None = None,
        device: str = "cpu", peaks: bool = True, peak_seconds: float = 0.1,
        peak_array_bytes: int | None = None, load: int = 0) -> tuple[list[Result], dict[str, Any]]:
    """Time every case; returns the results and a description of the run.

    With ``load`` > 0 each case is timed twice, quiet and then with ``load`` busy
    processes beside it (:func:`busy_processes`), every implementation alike;
    the loaded times go to ``Result.loaded``.

    On the CPU, the machine's peaks are measured before the cases and again after
    them (``peaks``; see :func:`measure_peaks` for ``peak_seconds`` and
    ``peak_array_bytes``); the higher of each (:func:`best_peaks`) is stored as
    ``info["peaks"]``.  ``device="gpu"`` times convviz on CuPy against
    PyTorch on CUDA (cuDNN); TensorFlow (the CPU build), the CPU peaks and the
    1-thread and memory columns are left out.
    """
    if device == "gpu":
        peers = tuple(p for p in peers if p == "torch")
        scaling = False
        peaks = False
    peer_status = _load_peers(list(peers), threads)
    machine_peaks = measure_peaks(threads, peak_seconds, peak_array_bytes, progress) if peaks else None
    if machine_peaks and progress:
        progress(peaks_line(machine_peaks))
    rng = np.random.default_rng(seed)
    results = []
    for number, case in enumerate(cases, 1):
        step = f"[{number}/{len(cases)}] {case.label}"
        if progress:
            progress(f"{step} ...")
        data = _data(case, rng)
        result = Result(case)
        calls: dict[str, Callable[[], Any]] = {"convviz": convviz_call(case, data, threads, device)}
        if device == "gpu":  # a case the GPU backend refuses is noted; the other cases still run
            try:
                calls["convviz"]()
            except Exception as err:
                result.notes["convviz"] = f"error: {str(err).splitlines()[0][:80]}"
                del calls["convviz"]
        makers = {"tensorflow": tensorflow_call, "torch": lambda c, d: torch_call(c, d, device)}
        for name in peers:
            if peer_status.get(name, "absent").startswith("absent"):
                result.notes[name] = "not installed"
                continue
            try:
                call = makers[name](case, data)
                call()
                calls[name] = call
            except NoPeerCall as err:
                result.notes[name] = str(err)
            except Exception as err:  # the peer refuses this case
                result.notes[name] = f"error: {str(err).splitlines()[0][:80]}"
        if scaling:
            calls["convviz_1thread"] = convviz_call(case, data, 1)
        times = _interleaved_times(calls, min_seconds, min_rounds, max_rounds)
        medians = {name: statistics.median(values) for name, values in times.items()}
        result.convviz_1thread = medians.pop("convviz_1thread", None)
        result.times = {name: medians.get(name) for name in ["convviz", *peers]}
        if load:
            # Means, not medians: under load most calls run at full speed and a few wait a
            # whole time slice for a core; what a loop of calls takes is the mean.
            result.quiet_mean = {name: statistics.fmean(times[name]) for name in result.times if name in times}
            with busy_processes(load):
                loaded = _interleaved_times({k: v for k, v in calls.items() if k != "convviz_1thread"},
                                            max(min_seconds, LOAD_MIN_SECONDS), min_rounds, max_rounds)
            result.loaded = {name: statistics.fmean(loaded[name]) if name in loaded else None
                             for name in ["convviz", *peers]}
        if device == "cpu":
            result.extra_bytes, result.output_bytes = _extra_memory(case, data, threads)
        results.append(result)
        if progress:
            progress(f"{step}: " + ", ".join(
                f"{name} {_ms(t)} ms" if t else f"{name} {result.notes.get(name, '-')}"
                for name, t in result.times.items()) + "".join(
                f"; loaded: {name} {_ms(t)} ms" for name, t in result.loaded.items() if t))
    if machine_peaks and cases:
        machine_peaks = best_peaks(machine_peaks, measure_peaks(threads, peak_seconds, peak_array_bytes, progress))
        if progress:
            progress(peaks_line(machine_peaks) + ", the best of the measurements before and after the cases")
    info = {"machine": machine_description(), "threads": threads, "peers": peer_status, "device": device,
            "load": load}
    if load and device == "cpu" and cases:
        info["machine_under_load"] = machine_under_load(load)
    if machine_peaks:
        info["peaks"] = machine_peaks
    if device == "gpu":
        from .._backends import cuda

        info["gpu"] = cuda.info()
    return results, info
