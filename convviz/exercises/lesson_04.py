"""Exercises of notebook 04, the input gradient as a scatter: padding taps, coverage, checkerboards."""

from __future__ import annotations

from ..geometry import AxisGeometry, ConvGeometry
from . import Exercise, register

# 1. Taps of output cell (0, 0) that land on real input (7x7, 3x3, stride 2, SAME).
_g = ConvGeometry.build(batch=1, input_hw=(7, 7), in_channels=1, out_channels=1, kernel_hw=(3, 3),
                        strides=(2, 2), dilations=(1, 1), padding="SAME")
_real = sum(not _g.is_padding(_g.input_cell((0, 0), (kh, kw))) for kh in range(3) for kw in range(3))


register(Exercise(
    "l04-corner-taps", _real,
    f"the window starts at (-1, -1); its 2x2 lower-right corner is real input: {_real} taps.",
    mistakes=[(9, f"SAME pads {_g.pads[0]} row on top and {_g.pads[2]} column on the left: the taps of the top "
                  f"row and left column land in the padding; {_real} land on real cells."),
              (6, "both the top row of taps and the left column of taps fall in the padding, not only one of them.")],
    otherwise=f"the 3x3 window of output (0, 0) starts at input (-1, -1): a 2x2 corner of it is real, {_real} taps."))

# 2. The most-reached input cell for kernel 3, stride 2 (the checkerboard's maximum).
_cov = ConvGeometry.build(batch=1, input_hw=(10, 10), in_channels=1, out_channels=1, kernel_hw=(3, 3),
                          strides=(2, 2), dilations=(1, 1), padding="SAME").coverage()
_max = int(_cov.max())


register(Exercise(
    "l04-max-coverage", _max,
    f"windows 2 apart with 3 taps share one row and one column: {_max} pairs reach those cells.",
    mistakes=[(9, "9 counts every tap of one window; a cell is reached by at most 2 windows per axis: 2 x 2 = 4."),
              (2, "2 windows reach the cell along each axis, and the counts multiply: 2 x 2 = 4.")],
    otherwise=f"neighbouring windows share one row and one column: at most 2 x 2 = {_max} (output cell, tap) "
              "pairs."))

# 3. Kernel sizes 1..9 with stride 3 whose interior coverage is even (no checkerboard).
def _even(k: int, stride: int = 3, n: int = 30) -> bool:
    counts = AxisGeometry.from_padding(n, k, stride, 1, "SAME").coverage()[10:20]
    return counts.min() == counts.max() > 0


_even_sizes = {k for k in range(1, 10) if _even(k)}


def _explain_even(answer) -> str:
    try:
        got = {int(k) for k in answer}
    except TypeError:
        return "give a set of kernel sizes, for example {1, 2}."
    if 1 in got:
        return "kernel 1 with stride 3 reads every third row only: the rows between get nothing (uneven)."
    if got < _even_sizes:
        return f"you missed some: every multiple of the stride works, {sorted(_even_sizes)}."
    return (f"coverage is even exactly when the kernel is a multiple of the stride, {sorted(_even_sizes)}; "
            "otherwise k % s rows get one window more than the others.")


register(Exercise("l04-even-kernels", _even_sizes,
                  f"kernel sizes that are multiples of the stride ({sorted(_even_sizes)}) reach every interior "
                  "cell k / s times.", _explain_even))
