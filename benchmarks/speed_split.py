"""The sweep's cases under 1.0x, timed again with each round sorted by the machine's speed.

This VM runs the same call at two speeds that last seconds (benchmarks/vm_minutes.py), and
convviz slows more than its peers in the slow ones, so a sweep row's speedup depends on the
minute it ran in. Here each round times convviz, TensorFlow and PyTorch once each (as the
sweep does: 2 threads, the same arrays, an untimed call first) and a fixed one-thread convviz
call, the probe; a round is fast or slow by its probe's time against the case's fastest probe
(vm_minutes.split_by_speed: within 1.15x, or 1.4x or more). Each case gets its speedup (the faster peer's median over
convviz's) in all rounds, in the fast ones and in the slow ones.

    python benchmarks/speed_split.py benchmarks/limits-intel-xeon-emr-sweep-stop36.md \
        --every 4 --max-ms 40 --seconds 10 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from typing import Any, Callable

import numpy as np

import convviz
from convviz.bench.cases import Case, _data
from convviz.bench.machine import machine_description
from convviz.bench.peers import _load_peers, convviz_call, tensorflow_call, torch_call
from vm_minutes import split_by_speed  # this folder: run as python benchmarks/speed_split.py

OPS = {"fwd": "conv2d", "bpi": "conv2d_backprop_input", "bpf": "conv2d_backprop_filter"}
ROW = re.compile(r"^\| (fwd|bpi|bpf) (\d+),(\d+),(\d+),(\d+),(\d+),(\d+),(\d+),(\d+) \| ([\d.]+)x \| ([\d.]+) \|")


def limited_cases(path: str, every: int, max_ms: float) -> list[tuple[Case, float]]:
    """Every `every`-th dense case of a limits table (sorted by speedup within each op) whose
    convviz time was at most max_ms, with the sweep's speedup."""
    rows = [m for m in map(ROW.match, open(path, encoding="utf-8")) if m and float(m.group(11)) <= max_ms]
    picked = []
    for index, m in enumerate(rows):
        if index % every == 0:
            sizes = [int(v) for v in m.groups()[1:9]]
            picked.append((Case(m.group(1), OPS[m.group(1)], *sizes), float(m.group(10))))
    return picked


def probe() -> Callable[[], Any]:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 14, 14, 1024)).astype(np.float32)
    w = rng.standard_normal((1, 1, 1024, 256)).astype(np.float32)
    return lambda: convviz.conv2d(x, w, [1, 1, 1, 1], "SAME", n_threads=1)


def rounds(calls: dict[str, Callable[[], Any]], seconds: float) -> list[dict[str, float]]:
    out = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(out) < 10:
        row = {}
        for name, call in calls.items():
            call()  # untimed: the previous implementation's threads go quiet
            start = time.perf_counter()
            call()
            row[name] = time.perf_counter() - start
        out.append(row)
    return out


def speedup(group: list[dict[str, float]], peers: list[str]) -> float | None:
    if not group:
        return None
    fastest_peer = min(statistics.median(r[p] for r in group) for p in peers)
    return fastest_peer / statistics.median(r["convviz"] for r in group)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("limits")
    parser.add_argument("--every", type=int, default=4)
    parser.add_argument("--max-ms", type=float, default=40.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    status = _load_peers(["tensorflow", "torch"], args.threads)
    peers = [p for p in ("tensorflow", "torch") if not status[p].startswith("absent")]
    print(machine_description()["cpu"], "|", status)
    rng = np.random.default_rng(0)
    the_probe = probe()
    makers = {"tensorflow": tensorflow_call, "torch": torch_call}
    results = []
    print(f"{'case':34} {'sweep':>6} {'all':>6} {'fast':>6} {'slow':>6}  fast/slow rounds")
    for case, sweep in limited_cases(args.limits, args.every, args.max_ms):
        data = _data(case, rng)
        calls = {"convviz": convviz_call(case, data, args.threads)}
        for name in peers:
            calls[name] = makers[name](case, data)
        calls["probe"] = the_probe
        for call in calls.values():
            call()
        timed = rounds(calls, args.seconds)
        fast, slow = split_by_speed(timed, "probe")
        row = {"case": case.label, "sweep": sweep, "all": speedup(timed, peers), "fast": speedup(fast, peers),
               "slow": speedup(slow, peers), "rounds": [len(fast), len(slow), len(timed)]}
        results.append(row)
        text = lambda v: f"{v:5.2f}x" if v else "    - "  # noqa: E731
        print(f"{case.label:34} {sweep:5.2f}x {text(row['all'])} {text(row['fast'])} {text(row['slow'])}  "
              f"{len(fast)}/{len(slow)} of {len(timed)}", flush=True)
    fast_values = [r["fast"] for r in results if r["fast"]]
    slow_values = [r["slow"] for r in results if r["slow"]]
    all_values = [r["all"] for r in results]
    for label, values in (("all rounds", all_values), ("fast rounds", fast_values), ("slow rounds", slow_values)):
        if values:
            print(f"{label}: {len(values)} cases, median {statistics.median(values):.2f}x, "
                  f"{sum(v >= 1.0 for v in values)} at 1.0x or more")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"machine": machine_description(), "peers": status, "threads": args.threads,
                       "cases": results}, out, indent=1)


if __name__ == "__main__":
    main()
