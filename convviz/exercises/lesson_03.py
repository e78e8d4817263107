"""Exercises of notebook 03, a tour of convviz: output size, lost rows, one depthwise tap."""

from __future__ import annotations

import numpy as np

from .. import ops
from ..geometry import ConvGeometry
from . import Exercise, register


def _geometry(n: int, k: int, stride: int, padding: str) -> ConvGeometry:
    return ConvGeometry.build(batch=1, input_hw=(n, n), in_channels=1, out_channels=1, kernel_hw=(k, k),
                              strides=(stride, stride), dilations=(1, 1), padding=padding)


# 1. The output size with SAME padding (8x8 input, 3x3 kernel, stride 3).
_same = _geometry(8, 3, 3, "SAME")
_valid = _geometry(8, 3, 3, "VALID")


def _explain_size(answer) -> str:
    if answer == _valid.output_hw[0]:
        return (f"{answer} is VALID's count, floor((8 - 3) / 3) + 1; SAME pads so that every input row is "
                f"inside a window: ceil(8 / 3) = {_same.output_hw[0]}.")
    if answer == 8:
        return "SAME keeps the size only with stride 1; with stride 3 it keeps ceil(8 / 3) positions."
    return f"{answer!r}: SAME gives ceil(input / stride) = ceil(8 / 3) = {_same.output_hw[0]} positions."


register(Exercise("l03-same-output-size", _same.output_hw[0],
                  f"SAME keeps ceil(8 / 3) = {_same.output_hw[0]} positions per axis (VALID would keep "
                  f"{_valid.output_hw[0]}).", _explain_size))

# 2. The rows with no gradient (7x7 input, 3x3 kernel, stride 3, VALID).
_lost = _geometry(7, 3, 3, "VALID")
_lost_rows = {int(r) for r in _lost.zero_gradient_rows()}


register(Exercise(
    "l03-lost-rows", _lost_rows,
    f"the two windows cover rows 0-5; row {sorted(_lost_rows)[0]} is read by none, so its gradient is exactly zero.",
    mistakes=[(set(), f"some row is never read: the windows start at rows 0 and 3 and cover rows 0-5; "
                      f"(7 - 3) % 3 = 1 row is left over: {sorted(_lost_rows)}."),
              ({7}, "rows are numbered from 0: the last of 7 rows is row 6.")],
    otherwise=f"windows of 3 rows starting every 3 rows cover rows 0-2 and 3-5; the rows left are "
              f"{sorted(_lost_rows)}.",
    form="give a set of row indices, for example {0, 1} (an empty set if every row is read)."))

# 3. One tap of the depthwise filter gradient: x = arange(25) (5x5), dL/dy all ones (3x3), VALID.
_x = np.arange(25.0).reshape(1, 5, 5, 1)
_dw = ops.depthwise_conv2d_native_backprop_filter(_x, [3, 3, 1, 1], np.ones((1, 3, 3, 1)), [1, 1, 1, 1], "VALID")
_centre = float(_dw[1, 1, 0, 0])


register(Exercise(
    "l03-depthwise-tap", _centre, f"tap (1, 1) reads x[1:4, 1:4] once per output cell, times dL/dy = 1: {_centre:g}.",
    mistakes=[(float(_dw[0, 0, 0, 0]), f"{float(_dw[0, 0, 0, 0]):g} is tap (0, 0), the top-left 3x3 block; tap "
                                       "(1, 1) reads the block one row and column lower."),
              (12.0, "12 is the single input value under the centre; the tap sums over all 9 output cells."),
              (float(_x.sum()), "that sums the whole input; tap (1, 1) reads only the 9 cells rows 1-3, columns 1-3.")],
    otherwise=f"tap (1, 1) reads x[1:4, 1:4] (9 values) times dL/dy = 1: the sum is {_centre:g}."))
