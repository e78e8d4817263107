"""Paired timing of two builds of convviz: ``python benchmarks/ab.py OLD NEW --cases a,b``.

OLD and NEW are checkouts with their kernels built in place (for the old one, e.g.
``git worktree add /tmp/old HEAD~1`` and ``python setup.py build_ext --inplace`` there).
Each round starts one process per build, in ABBA order (old first in odd rounds, new
first in even ones: the process that runs second in a pair is not always the same
build), and each process times every case over several placements of its input
arrays (shifted by multiples of 1 KiB inside a larger buffer), since on a shared
VM the same machine code runs up to 30% apart depending on where its arrays land
(benchmarks/HISTORY.md, stop 20).  It prints, per case, each build's per-round times
(the median over placements of each placement's 10th percentile) and the ratio
of the medians over rounds.

Identical builds still differ by a few percent between processes: trust a change
that holds in every round, not one that shows in the median alone.

``--device gpu`` times the builds' CuPy paths instead (each call synchronised; one
placement, since device memory is the allocator's), e.g. two trees that differ in
their CUDA source on a lent GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

_CHILD = r"""
import dataclasses, json, os, statistics, sys, time
import numpy as np
import convviz
from convviz import bench

tree = os.path.realpath(os.getcwd())
if os.path.commonpath([os.path.realpath(convviz.__file__), tree]) != tree:
    raise SystemExit(f"ab.py: imported {convviz.__file__}, not the tree in {tree}")

names, seconds, placements, threads = sys.argv[1].split(","), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
device, data_format, dtype = sys.argv[5], sys.argv[6], sys.argv[7]
out = {}
ops = {short: op for op, short in bench.SHORT_NAMES.items()}
for name in names:
    if ":" in name:  # a layer of its own (a sweep's): short op name, then n,h,w,c_in,c_out_or_mult,k,stride,dilation
        short, sizes = name.split(":")
        case = bench.Case(short, ops[short], *(int(v) for v in sizes.split(";")))
    else:
        case = next((c for c in bench.CASES if c.name == name and c.precision == "accurate"), None)
    if case is None:
        raise SystemExit(f"ab.py: no case {name!r} in convviz.bench.CASES")
    case = dataclasses.replace(case, dtype=dtype, data_format=data_format)  # its sizes, in this dtype and format
    data = bench._data(case, np.random.default_rng(0))
    per_placement = []
    for k in range(placements):
        placed = {}
        for key, value in data.items():
            if isinstance(value, np.ndarray):
                raw = np.empty(value.nbytes + 64 * 1024, np.uint8)
                start = (-raw.ctypes.data) % 4096 + 1024 * k
                placed[key] = raw[start:start + value.nbytes].view(value.dtype).reshape(value.shape)
                placed[key][...] = value
            else:
                placed[key] = value
        call = bench.convviz_call(case, placed, threads, device=device)
        call()
        times, end = [], time.perf_counter() + seconds / placements
        while time.perf_counter() < end or len(times) < 5:
            start_t = time.perf_counter()
            call()
            times.append(time.perf_counter() - start_t)
        per_placement.append(float(np.percentile(times, 10)))
    out[name] = statistics.median(per_placement)
print(json.dumps(out))
"""


def _time_build(tree: str, cases: str, seconds: float, placements: int, threads: int,
                env: dict[str, str], device: str, data_format: str, dtype: str) -> dict[str, float]:
    # From the tree itself: `python -c` puts the working directory ahead of PYTHONPATH, so run from
    # elsewhere the child would import the convviz found there, whatever the tree.
    result = subprocess.run([sys.executable, "-c", _CHILD, cases, str(seconds), str(placements), str(threads), device,
                             data_format, dtype],
                            env={**env, "PYTHONPATH": tree}, cwd=tree, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"ab.py: timing {tree} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="checkout of the old build (kernels built in place)")
    parser.add_argument("new", help="checkout of the new build")
    parser.add_argument("--cases", required=True,
                        help="comma-separated benchmark case names, or layers as op:n;h;w;c_in;c_out_or_mult;k;"
                             "stride;dilation (op: fwd, bpi, bpf, dwc, dwi, dwf), e.g. dwc:8;7;7;1152;1;5;1;1")
    parser.add_argument("--rounds", type=int, default=4, help="ABBA rounds (default 4)")
    parser.add_argument("--seconds", type=float, default=1.5, help="timing per case and process (default 1.5)")
    parser.add_argument("--placements", type=int, default=4, help="input placements per case (default 4)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--isa", help="CONVVIZ_ISA for both builds (e.g. avx2)")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu", help="gpu: the CuPy paths")
    parser.add_argument("--format", choices=["NHWC", "NCHW"], default="NHWC",
                        help="the cases' data format")
    parser.add_argument("--dtype", default="float32", help="the cases' dtype (default float32)")
    args = parser.parse_args(argv)
    if args.device == "gpu":
        args.placements = 1
    env = dict(os.environ)
    if args.isa:
        env["CONVVIZ_ISA"] = args.isa
    trees = {"old": os.path.abspath(args.old), "new": os.path.abspath(args.new)}
    rounds: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    started = time.perf_counter()
    for r in range(args.rounds):
        for label in (("old", "new") if r % 2 == 0 else ("new", "old")):
            rounds[label].append(_time_build(trees[label], args.cases, args.seconds, args.placements,
                                             args.threads, env, args.device, args.format, args.dtype))
        print(f"  round {r + 1}/{args.rounds} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    for name in args.cases.split(","):
        old = [t[name] * 1e3 for t in rounds["old"]]
        new = [t[name] * 1e3 for t in rounds["new"]]
        ratio = statistics.median(new) / statistics.median(old)
        wins = sum(n < o for n, o in zip(new, old))
        print(f"{name}: old {' '.join(f'{t:.3f}' for t in old)} ms | new {' '.join(f'{t:.3f}' for t in new)} ms"
              f" | new/old {ratio:.3f} (new faster in {wins}/{len(old)} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
