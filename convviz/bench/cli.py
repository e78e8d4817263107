"""``convviz bench``: the command line."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from ..errors import DeviceError
from .cases import CASES, SHORT_NAMES, sweep_cases
from .report import (TARGET_SPEEDUP, _asdict_or_none, load_table, machine_load_line, peaks_line, roofline_legend,
                     shortfall_table, sweep_summary, table)
from .roofline import best_peer_roofline, case_roofline
from .timing import LOAD_SECONDS, MAX_LOAD, run


#: The time of each timed run of the peaks' measurement (about 1.5 s in all, 0.5 s with --quick),
#: and the size of each of the bandwidth's two arrays (None: four times the last-level cache, at
#: least 128 MiB).
PEAK_SECONDS = 0.1
QUICK_PEAK_SECONDS = 0.02
PEAK_ARRAY_BYTES: int | None = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="convviz bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for every implementation (default 2)")
    parser.add_argument("--only", default="",
                        help="comma-separated case names to run (e.g. bpi_resnet,dwf_k5; with --sweep: ops, e.g. fwd,dwf)")
    parser.add_argument("--no-peers", action="store_true", help="time convviz alone")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a rough table in seconds)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--sweep", action="store_true",
                        help="instead of the cases, every op on every distinct layer of real networks "
                             "(convviz.networks) at batch 1 and 8: hundreds of cases, long")
    parser.add_argument("--networks", default="", help="with --sweep: comma-separated networks (default all)")
    parser.add_argument("--batches", default="1,8", help="with --sweep: comma-separated batch sizes (default 1,8)")
    parser.add_argument("--load", type=int, default=0, metavar="N",
                        help="time every case again with N busy processes beside it (each stops by itself "
                             f"within {LOAD_SECONDS:.0f} s) and report loaded/quiet per implementation")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                        help="gpu: convviz on CuPy against PyTorch on CUDA (needs CuPy and a GPU)")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    if not 0 <= args.load <= MAX_LOAD:
        parser.error(f"--load must be 0..{MAX_LOAD}, got {args.load}")
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    names = set(SHORT_NAMES.values()) if args.sweep else {c.name for c in CASES}  # a sweep's cases: by op
    unknown = wanted - names
    if unknown:
        parser.error(f"unknown case(s) {sorted(unknown)}; choose from {sorted(names)}")
    if not args.sweep:
        cases = [c for c in CASES if not wanted or c.name in wanted]
    else:
        from ..networks import NETWORKS

        networks = [name.strip() for name in args.networks.split(",") if name.strip()] or None
        unknown = set(networks or ()) - set(NETWORKS)
        if unknown:
            parser.error(f"unknown network(s) {sorted(unknown)}; choose from {sorted(NETWORKS)}")
        try:
            batches = tuple(int(b) for b in args.batches.split(",") if b.strip())
        except ValueError:
            parser.error(f"--batches takes whole numbers, got {args.batches!r}")
        if not batches or min(batches) < 1:
            parser.error(f"--batches takes batch sizes of 1 or more, got {args.batches!r}")
        cases = [c for c in sweep_cases(networks, batches) if not wanted or c.name in wanted]
    peers = () if args.no_peers else ("tensorflow", "torch")
    rounds: dict[str, Any] = dict(min_seconds=0.02, min_rounds=2, max_rounds=10) if args.quick else {}
    if args.device == "gpu":
        from .._backends import cuda

        try:
            cuda.require_device("convviz bench")
        except DeviceError as err:
            parser.error(str(err))
    results, info = run(cases, threads=args.threads, peers=peers, device=args.device,
                        progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
                        peak_seconds=QUICK_PEAK_SECONDS if args.quick else PEAK_SECONDS,
                        peak_array_bytes=PEAK_ARRAY_BYTES, load=args.load, **rounds)
    machine = info["machine"]
    if args.device == "gpu":
        print(f"\nconvviz {machine['convviz']} on {', '.join(info['gpu'].get('gpu', ['?']))} "
              f"(CuPy {info['gpu'].get('cupy')}, CUDA runtime {info['gpu'].get('cuda_runtime')})")
    else:
        print(f"\nconvviz {machine['convviz']} ({machine['kernels']} kernels, OpenMP "
              f"{'on' if machine['openmp'] else 'off'}), {args.threads} threads on {machine['cpu']} "
              f"({machine['cores']} cores; {' '.join(machine['isa']) or 'ISA unknown'})")
        print(peaks_line(info["peaks"], machine["cpu"]))
    for name, version in info["peers"].items():
        print(f"  {name}: {version}")
    print()
    peaks = info.get("peaks")
    columns = peers or ("tensorflow", "torch")  # the peers' columns, "-" where not run
    print(table(results, columns, peaks))
    if args.sweep:
        print("\nThe sweep, per op (speedup over the fastest peer):\n")
        print(sweep_summary(results, columns, peaks))
    if peaks:
        print()
        print(roofline_legend(peaks))
        shortfall = shortfall_table(results, columns, peaks)
        if shortfall:
            print(f"\nUnder {TARGET_SPEEDUP:.2f}x the fastest peer, and the fraction of the roof "
                  f"{TARGET_SPEEDUP:.2f}x would take:\n")
            print(shortfall)
    loaded = load_table(results, columns, args.load)
    if loaded:
        print(f"\nUnder load: each case again with {args.load} busy processes beside it\n")
        print(loaded)
        if info.get("machine_under_load"):
            print("\n" + machine_load_line(info["machine_under_load"], args.load))
    if args.json:
        payload = {"info": info, "results": [
            {**asdict(r.case), "label": r.case.label, "flops": r.case.flops, "bytes": r.case.bytes,
             "times": r.times, "notes": r.notes, "convviz_1thread": r.convviz_1thread,
             "extra_bytes": r.extra_bytes, "output_bytes": r.output_bytes, "loaded": r.loaded,
             "quiet_mean": r.quiet_mean,
             "roofline": _asdict_or_none(case_roofline(r, peaks)),
             "best_peer_roofline": _asdict_or_none(best_peer_roofline(r, peaks, columns))}
            for r in results]}
        with open(args.json, "w") as handle:
            json.dump(payload, handle, indent=1)
    return 0
