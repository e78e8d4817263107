"""Every sweep case under the fastest peer, with what limits it and the figures.

Reads the JSON of ``convviz bench --sweep ... --json FILE`` and prints, per op, a
Markdown table of the cases under ``--below`` (1.0x) the fastest peer: the call's
time, convviz's and the fastest peer's fraction of the roof, how much faster two
threads run it than one, and the kind of limit it belongs to.  The kinds are the
ones BENCHMARKS.md explains, with their measurements; a case takes the first kind
whose rule it meets:

- ``tie at the roof``: convviz and the peer both at 90% of the roof or more.
- ``short call``: under 0.25 ms -- the parallel region's start and end and the
  calling thread's packing of the filter are a large part of the call.
- ``2-3 channels``: a stem or head (at most 3 input or output channels per group)
  whose pixels fill a few lanes of a 16-lane vector.
- ``memory-bound``: under the ridge point (the roof is the bandwidth): the tiles'
  broadcast streams per pixel (dense 1x1) or the bandwidth of the minute
  (depthwise).
- ``1x1 tile loop``: a compute-bound dense 1x1 layer -- the register tile's loop.
- ``KxK tile loop``: a compute-bound dense layer with a larger window -- the
  14 x 2 register tile's loop (what is left needs the core's counters).
- ``depthwise rows``: a compute-bound depthwise call.

Usage::

    python benchmarks/limits.py SWEEP.json [LATER.json ...] [--below 1.0]

A case in a later file replaces the same case (its label) of an earlier one: a
whole sweep, then a re-run of one op on newer code.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from typing import Any

SHORT_CALL_S = 0.25e-3
TIE_OF_ROOF = 0.90
PEERS = ("tensorflow", "torch")


def kind(row: dict[str, Any]) -> str:
    """The kind of limit of one JSON result row (see the module docstring).

    Examples
    --------
    >>> row = {"op": "conv2d", "k": 3, "c_in": 64, "c_out_or_mult": 64, "times": {"convviz": 1e-3},
    ...        "roofline": {"of_roof": 0.6, "bound": "compute"}, "best_peer_roofline": {"of_roof": 0.7}}
    >>> kind(row)
    'KxK tile loop'
    """
    roof, peer = row["roofline"], row["best_peer_roofline"]
    depthwise = row["op"].startswith("depthwise")
    if roof["of_roof"] >= TIE_OF_ROOF and peer["of_roof"] >= TIE_OF_ROOF:
        return "tie at the roof"
    if row["times"]["convviz"] < SHORT_CALL_S:
        return "short call"
    if not depthwise and min(row["c_in"], row["c_out_or_mult"]) <= 3:
        return "2-3 channels"
    if roof["bound"] == "memory":
        return "memory-bound"
    if depthwise:
        return "depthwise rows"
    return "1x1 tile loop" if row["k"] == 1 else "KxK tile loop"


def speedup(row: dict[str, Any]) -> float | None:
    """The fastest peer's time over convviz's, or None where no peer ran."""
    times = row["times"]
    known = [times[p] for p in PEERS if times.get(p)]
    return min(known) / times["convviz"] if known and times.get("convviz") else None


def tables(results: list[dict[str, Any]], below: float = 1.0) -> str:
    """Per op, the cases under ``below`` and a count per kind."""
    by_op: dict[str, list[tuple[float, dict[str, Any]]]] = defaultdict(list)
    for row in results:
        s = speedup(row)
        if s is not None and s < below and row.get("roofline") and row.get("best_peer_roofline"):
            by_op[row["op"]].append((s, row))
    out = []
    for op, rows in by_op.items():
        kinds: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
        lines = [f"### {op}: {len(rows)} cases under {below:.2f}x", "",
                 "| case | speedup | convviz ms | bound | convviz % roof | peer % roof | 2T/1T | limit |",
                 "|---|---|---|---|---|---|---|---|"]
        for s, row in sorted(rows, key=lambda item: item[0]):
            t, one = row["times"]["convviz"], row.get("convviz_1thread")
            scaling = f"{one / t:.2f}" if one else "-"
            k = kind(row)
            kinds[k].append((s, row["roofline"]["of_roof"], row["best_peer_roofline"]["of_roof"]))
            lines.append(f"| {row['label']} | {s:.2f}x | {t * 1e3:.3f} | {row['roofline']['bound']} | "
                         f"{row['roofline']['of_roof'] * 100:.0f} | {row['best_peer_roofline']['of_roof'] * 100:.0f} | "
                         f"{scaling} | {k} |")
        lines.append("")
        lines.append("By kind (cases, median speedup, median % of the roof: convviz / the fastest peer): " + "; ".join(
            f"{k} {len(v)}, {statistics.median(x[0] for x in v):.2f}x, "
            f"{statistics.median(x[1] for x in v) * 100:.0f}% / {statistics.median(x[2] for x in v) * 100:.0f}%"
            for k, v in sorted(kinds.items(), key=lambda kv: -len(kv[1]))))
        out.append("\n".join(lines))
    return "\n\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json_files", nargs="+", metavar="JSON")
    parser.add_argument("--below", type=float, default=1.0, help="list the cases under this speedup (default 1.0)")
    args = parser.parse_args()
    by_label: dict[str, dict[str, Any]] = {}
    for name in args.json_files:
        with open(name) as f:
            for row in json.load(f)["results"]:
                by_label[row["label"]] = row
    print(tables(list(by_label.values()), args.below))


if __name__ == "__main__":
    main()
