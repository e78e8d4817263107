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


# Task 1: explorer.html?input=8&stride=2&padding=SAME -- hover dL/dx[2, 2].
_same = _geometry(8, 2, "SAME")
_lit = int(_same.coverage()[2, 2])


register(Exercise(
    "l11-lit-cells", _lit,
    f"dL/dx[2, 2] is in the windows of dL/dy rows 0 and 1 and columns 0 and 1: {_lit} cells "
    "(the 4s of the checkerboard).",
    mistakes=[(9, "9 is one window's taps; count the dL/dy cells whose window contains (2, 2): windows 2 apart "
                  "overlap."),
              (1, "(2, 2) sits where neighbouring windows overlap, in both rows and columns: 2 x 2 dL/dy cells."),
              (2, "2 windows contain row 2 and 2 contain column 2: they combine into 2 x 2 dL/dy cells.")],
    otherwise=f"rows 0 and 1 of dL/dy reach row 2, and columns 0 and 1 reach column 2: {_lit} cells."))

# Task 2: the same preset -- where is the padding?
_pads = _same.pads


register(Exercise(
    "l11-padding-sides", _pads, f"one padding row at the bottom and one column on the right: {_pads}.",
    mistakes=[((1, 0, 1, 0), "TensorFlow puts the odd padding row at the bottom and the odd column on the right."),
              ((1, 1, 1, 1), "that is symmetric padding; SAME needs only 1 row and 1 column here, at the bottom "
                             "and right.")],
    otherwise=f"SAME needs (4 - 1) * 2 + 3 - 8 = 1 row and 1 column, after the input: {_pads}.",
    form="give 4 numbers (top, bottom, left, right), for example (1, 1, 1, 1)."))

# Task 3: explorer.html?input=8&stride=3&padding=VALID -- which rows are marked "no gradient"?
_valid = _geometry(8, 3, "VALID")
_lost = {int(r) for r in _valid.zero_gradient_rows()}
_NUMBERED_FROM_0 = "rows are numbered from 0; the 8 rows are 0-7."


register(Exercise(
    "l11-no-gradient-rows", _lost,
    f"(8 - 3) // 3 + 1 = 2 windows cover rows 0-5: rows {sorted(_lost)} are marked no gradient.",
    mistakes=[({7}, "the two windows cover rows 0-5, so row 6 is not read either: (8 - 3) % 3 = 2 rows left over."),
              ({8, 9}, _NUMBERED_FROM_0), ({7, 8}, _NUMBERED_FROM_0)],
    otherwise=f"windows start at rows 0 and 3 and end at row 5: rows {sorted(_lost)} get no gradient.",
    form="give a set of row indices, for example {7}."))

# Task 4: explorer.html?op=depthwise_filter_grad&input=9&stride=2&dilation=2&padding=SAME&multiplier=2
# -- hover tap dL/dW[0, 0]: how many real x cells light up?
_dw = _geometry(9, 2, "SAME", dilation=2, depthwise=True)
_tap_cells = len(_dw.rows.output_range(0)) * len(_dw.cols.output_range(0))
_all_cells = _dw.output_hw[0] * _dw.output_hw[1]


register(Exercise(
    "l11-tap-lattice", _tap_cells,
    f"tap (0, 0) reads a lattice 2 apart, starting in the padding: 4 x 4 = {_tap_cells} real cells.",
    mistakes=[(_all_cells, f"{_all_cells} counts every output cell, but for tap (0, 0) the first row and column of "
                           "windows read padding (dashed): those products are not input cells."),
              (9, "9 is the taps of one window; a tap is read once per output cell, in a lattice 2 apart.")],
    otherwise=f"tap (0, 0) reads rows 2o - 2 for o = 0..4: 4 of them are real, so 4 x 4 = {_tap_cells} cells."))
