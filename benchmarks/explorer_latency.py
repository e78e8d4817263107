"""How long one explorer update takes (drawing the figure, before display), at 16x16 input.

Run: ``python benchmarks/explorer_latency.py``.  Each control is moved back and
forth a few times; the median and worst update per view are printed.
"""

import statistics
import sys

import matplotlib

matplotlib.use("Agg")

from convviz.widgets import OPS, Explorer  # noqa: E402

MOVES = [("stride_h", 1), ("stride_h", 2), ("kernel_w", 5), ("kernel_w", 3), ("dilation_w", 2),
         ("dilation_w", 1), ("row", 1), ("col", 2), ("padding", "VALID"), ("padding", "SAME")]


def measure(op: str, view: str | None) -> list[float]:
    ex = Explorer(input_size=16, kernel_size=3, strides=2, padding="SAME")
    ex.controls["op"].value = op
    if view:
        ex.controls["view"].value = view
    times = []
    for _ in range(3):
        for name, value in MOVES:
            ex.controls[name].value = value
            times.append(ex.last_update_seconds * 1e3)
    return times


def main() -> int:
    print("explorer update at 16x16 input (ms; figure drawn, before display)")
    for op, view in [(OPS[0], "scatter + coverage"), (OPS[0], "scatter vs gather"), (OPS[0], "geometry card"),
                     (OPS[1], None)]:
        times = measure(op, view)
        label = f"{op} / {view}" if view else op
        print(f"  {label:45s} median {statistics.median(times):6.1f}  max {max(times):6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
