"""What this VM's slow minutes slow down: probes of the core, the caches and memory,
timed round by round beside convviz (and PyTorch, where installed) on one thread.

The Intel VM of BENCHMARKS.md runs the same call at two speeds that last seconds. Each round
here times, one after the other: the FMA peak (registers only), copy bandwidth of an
L2-sized, an L3-sized and a memory-sized array (streams the prefetchers follow), gathers of
one float per 4 KiB page in random order (latency: an L3-sized and a memory-sized array),
a 32 MiB allocation (page faults), and the layers below. A round is "slow" when its 1x1
convviz call took 1.4x or more of the fastest round's, "fast" within 1.15x; the table gives
the median of each probe in both and their ratio.

    python benchmarks/vm_minutes.py --seconds 240 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Callable

import numpy as np

import convviz
from convviz import _machine

KiB, MiB = 1024, 1024 * 1024


# A round is fast when its probe took at most FAST times the fastest round's, slow at SLOW
# times or more (the rest, in between, count in neither); benchmarks/speed_split.py sorts its
# rounds the same way.
FAST, SLOW = 1.15, 1.4


def split_by_speed(rounds: list[dict[str, float]], probe: str) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """(fast rounds, slow rounds), by each round's time of `probe` against the fastest round's."""
    fastest = min(r[probe] for r in rounds)
    return ([r for r in rounds if r[probe] <= FAST * fastest], [r for r in rounds if r[probe] >= SLOW * fastest])


def _best_ms(call: Callable[[], Any], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def _page_gather(nbytes: int, rng: np.random.Generator) -> tuple[Callable[[], Any], int]:
    """A gather of one float per 4 KiB page of an nbytes array, pages in random order."""
    data = np.ones(nbytes // 4, np.float32)
    pages = rng.permutation(data.size // 1024) * 1024
    return (lambda: data[pages].sum()), pages.size


def probes(rng: np.random.Generator) -> dict[str, Callable[[], float]]:
    """Each probe's measurement: GFLOP/s, GB/s, ns per element or ms (see the module's text)."""
    x1 = rng.standard_normal((8, 14, 14, 1024)).astype(np.float32)
    w1 = rng.standard_normal((1, 1, 1024, 256)).astype(np.float32)
    x3 = rng.standard_normal((8, 56, 56, 64)).astype(np.float32)
    w3 = rng.standard_normal((3, 3, 64, 64)).astype(np.float32)
    gather_l3, pages_l3 = _page_gather(4 * MiB, rng)
    gather_mem, pages_mem = _page_gather(64 * MiB, rng)
    table: dict[str, Callable[[], float]] = {
        "convviz 1x1 8x14x14 1024->256 (ms)": lambda: _best_ms(
            lambda: convviz.conv2d(x1, w1, [1, 1, 1, 1], "SAME", n_threads=1)),
        "convviz 3x3 8x56x56 64->64 (ms)": lambda: _best_ms(
            lambda: convviz.conv2d(x3, w3, [1, 1, 1, 1], "SAME", n_threads=1)),
        "FMA peak (GFLOP/s)": lambda: _machine.fma_peak_gflops(1, seconds=0.01, repeats=1),
        "copy 256 KiB, L2 (GB/s)": lambda: _machine.memory_bandwidth(
            1, array_bytes=256 * KiB, seconds=0.01, min_passes=3)["copy"],
        "copy 4 MiB, L3 (GB/s)": lambda: _machine.memory_bandwidth(
            1, array_bytes=4 * MiB, seconds=0.01, min_passes=3)["copy"],
        "copy 64 MiB, memory (GB/s)": lambda: _machine.memory_bandwidth(
            1, array_bytes=64 * MiB, seconds=0.02, min_passes=2)["copy"],
        "page gather 4 MiB (ns)": lambda: _best_ms(gather_l3) * 1e6 / pages_l3,
        "page gather 64 MiB (ns)": lambda: _best_ms(gather_mem) * 1e6 / pages_mem,
        "allocate 32 MiB (ms)": lambda: _best_ms(lambda: np.ones(8 * MiB, np.float32), 1),
    }
    try:
        import torch
    except ImportError:
        return table
    torch.set_num_threads(1)
    xt = torch.from_numpy(x3).permute(0, 3, 1, 2)  # NHWC memory: channels_last
    wt = torch.from_numpy(w3).permute(3, 2, 0, 1).contiguous()

    def torch_3x3() -> float:
        with torch.no_grad():
            return _best_ms(lambda: torch.nn.functional.conv2d(xt, wt, padding=1))
    table["PyTorch 3x3 8x56x56 64->64 (ms)"] = torch_3x3
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=240.0)
    parser.add_argument("--json", help="write every round here")
    args = parser.parse_args()
    table = probes(np.random.default_rng(0))
    for measure in table.values():  # warm: first calls pack, allocate and start threads
        measure()
    rounds: list[dict[str, float]] = []
    end = time.perf_counter() + args.seconds
    while time.perf_counter() < end:
        rounds.append({name: measure() for name, measure in table.items()})
    classifier = next(iter(table))
    fast, slow = split_by_speed(rounds, classifier)
    print(f"{len(rounds)} rounds: {len(fast)} fast, {len(slow)} slow (by {classifier})")
    print(f"{'probe':40} {'fast':>9} {'slow':>9} {'slow/fast':>9}")
    for name in table:
        if fast and slow:
            f, s = (statistics.median(r[name] for r in group) for group in (fast, slow))
            print(f"{name:40} {f:9.2f} {s:9.2f} {s / f:9.2f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"rounds": rounds, "classifier": classifier}, out)


if __name__ == "__main__":
    main()
