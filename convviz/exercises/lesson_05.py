"""Exercises of notebook 05, padding and lost rows: TensorFlow's SAME split and the rows VALID never reads."""

from __future__ import annotations

from ..geometry import AxisGeometry, same_padding
from . import Exercise, register

# 1. TensorFlow's SAME padding (top, bottom) for an 8-row input, 3x3 kernel, stride 2.
_pads = same_padding(8, 3, 2, 1)


register(Exercise(
    "l05-same-pads", _pads,
    f"SAME adds (out - 1) * stride + kernel - input = {sum(_pads)} row; the odd row goes to the bottom: {_pads}.",
    mistakes=[(_pads[::-1], "TensorFlow puts the odd extra row at the bottom (and the odd column on the right), "
                            "not the top."),
              ((1, 1), "that is PyTorch's symmetric padding=1; SAME only adds what the last window needs: "
                       f"(ceil(8 / 2) - 1) * 2 + 3 - 8 = {sum(_pads)} row, which goes to the bottom.")],
    otherwise=f"SAME needs (4 - 1) * 2 + 3 - 8 = {sum(_pads)} row in total, split {_pads}: the odd one at the "
              "bottom.",
    form="give a pair (top, bottom), for example (1, 1)."))

# 2. Input sizes 4..12 whose SAME padding is asymmetric (3x3 kernel, stride 2).
_asymmetric = {n for n in range(4, 13) if same_padding(n, 3, 2, 1)[1] > same_padding(n, 3, 2, 1)[0]}


register(Exercise(
    "l05-asymmetric-sizes", _asymmetric,
    f"even sizes need one padding row in total, and it goes to the bottom: {sorted(_asymmetric)}.",
    mistakes=[(set(range(4, 13)) - _asymmetric,
               "the other way round: an odd size needs 2 padding rows (one each side), an even size needs 1, "
               "which can only go to one side: the bottom.")],
    otherwise=f"the total padding is 1 for even sizes and 2 for odd ones; only an odd total is split unevenly: "
              f"{sorted(_asymmetric)}.",
    form="give a set of sizes, for example {5, 7}."))

# 3. Rows with no gradient, VALID, 10 rows, kernel 3, stride 5.
_axis = AxisGeometry.from_padding(10, 3, 5, 1, "VALID")
_lost = {int(r) for r in _axis.zero_gradient_indices()}


register(Exercise(
    "l05-lost-rows-stride5", _lost,
    f"windows of 3 rows every 5 rows read 0-2 and 5-7: rows {sorted(_lost)} get no gradient.",
    mistakes=[({8, 9}, "rows 8 and 9 are lost at the end, but with a stride (5) larger than the kernel (3) the rows "
                       "between two windows are never read either: 3 and 4."),
              ({3, 4}, "rows 3 and 4 lie between the windows; the last window ends at row 7, so rows 8 and 9 are "
                       "lost too.")],
    otherwise=f"the windows cover rows 0-2 and 5-7 ((10 - 3) // 5 + 1 = {_axis.output_size} windows): "
              f"rows {sorted(_lost)} are read by none.",
    form="give a set of row indices, for example {8, 9}."))
