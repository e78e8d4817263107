"""Exercises of notebook 11, the explorer worksheet: answers read off the explorer by pointing at cells.

Each answer is computed from :mod:`convviz.geometry`, the arithmetic the explorer draws.
"""

from __future__ import annotations

from ..geometry import ConvGeometry
from . import Exercise, register


def _geometry(n: int, stride: int, padding: str, dilation: int = 1, depthwise: bool = False) -> ConvGeometry:
    return ConvGeometry.build(batch=1, input_hw=(n, n), in_channels=1, out_channels=1, kernel_hw=(3, 3),
                              strides=(stride, stride), dilations=(dilation, dilation), padding=padding,
                              depthwise=depthwise)


def _rows(answer) -> set[int] | None:
    try:
        return {int(r) for r in answer}
    except (TypeError, ValueError):
        return None


# Task 1: explorer.html?input=8&stride=2&padding=SAME -- hover dL/dx[2, 2].
_same = _geometry(8, 2, "SAME")
_lit = int(_same.coverage()[2, 2])


def _explain_lit(answer) -> str:
    if answer == 9:
        return "9 is one window's taps; count the dL/dy cells whose window contains (2, 2): windows 2 apart overlap."
    if answer == 1:
        return "(2, 2) sits where neighbouring windows overlap, in both rows and columns: 2 x 2 dL/dy cells."
    if answer == 2:
        return "2 windows contain row 2 and 2 contain column 2: they combine into 2 x 2 dL/dy cells."
    return f"rows 0 and 1 of dL/dy reach row 2, and columns 0 and 1 reach column 2: {_lit} cells."


register(Exercise("l11-lit-cells", _lit,
                  f"dL/dx[2, 2] is in the windows of dL/dy rows 0 and 1 and columns 0 and 1: {_lit} cells "
                  "(the 4s of the checkerboard).", _explain_lit))

# Task 2: the same preset -- where is the padding?
_pads = _same.pads


def _explain_pads(answer) -> str:
    try:
        got = tuple(int(p) for p in answer)
    except (TypeError, ValueError):
        return "give 4 numbers (top, bottom, left, right), for example (1, 1, 1, 1)."
    if got == (1, 0, 1, 0):
        return "TensorFlow puts the odd padding row at the bottom and the odd column on the right."
    if got == (1, 1, 1, 1):
        return "that is symmetric padding; SAME needs only 1 row and 1 column here, at the bottom and right."
    return f"SAME needs (4 - 1) * 2 + 3 - 8 = 1 row and 1 column, after the input: {_pads}."


register(Exercise("l11-padding-sides", _pads,
                  f"one padding row at the bottom and one column on the right: {_pads}.", _explain_pads))

# Task 3: explorer.html?input=8&stride=3&padding=VALID -- which rows are marked "no gradient"?
_valid = _geometry(8, 3, "VALID")
_lost = {int(r) for r in _valid.zero_gradient_rows()}


def _explain_lost(answer) -> str:
    got = _rows(answer)
    if got is None:
        return "give a set of row indices, for example {7}."
    if got == {7}:
        return "the two windows cover rows 0-5, so row 6 is not read either: (8 - 3) % 3 = 2 rows left over."
    if got == {8, 9} or got == {7, 8}:
        return "rows are numbered from 0; the 8 rows are 0-7."
    return f"windows start at rows 0 and 3 and end at row 5: rows {sorted(_lost)} get no gradient."


register(Exercise("l11-no-gradient-rows", _lost,
                  f"(8 - 3) // 3 + 1 = 2 windows cover rows 0-5: rows {sorted(_lost)} are marked no gradient.",
                  _explain_lost))

# Task 4: explorer.html?op=depthwise_filter_grad&input=9&stride=2&dilation=2&padding=SAME&multiplier=2
# -- hover tap dL/dW[0, 0]: how many real x cells light up?
_dw = _geometry(9, 2, "SAME", dilation=2, depthwise=True)
_tap_cells = len(_dw.rows.output_range(0)) * len(_dw.cols.output_range(0))
_all_cells = _dw.output_hw[0] * _dw.output_hw[1]


def _explain_tap(answer) -> str:
    if answer == _all_cells:
        return (f"{_all_cells} counts every output cell, but for tap (0, 0) the first row and column of windows "
                "read padding (dashed): those products are not input cells.")
    if answer == 9:
        return "9 is the taps of one window; a tap is read once per output cell, in a lattice 2 apart."
    return f"tap (0, 0) reads rows 2o - 2 for o = 0..4: 4 of them are real, so 4 x 4 = {_tap_cells} cells."


register(Exercise("l11-tap-lattice", _tap_cells,
                  f"tap (0, 0) reads a lattice 2 apart, starting in the padding: 4 x 4 = {_tap_cells} real cells.",
                  _explain_tap))
