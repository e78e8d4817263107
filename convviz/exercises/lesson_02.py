"""Exercises of notebook 02, convolution as a matrix: the shape of C, nonzeros per row, zero columns.

Every expected answer is read from a matrix built the way the notebook builds it:
column ``j`` of ``C`` is :func:`convviz.conv2d` of the unit image that is 1 at input
cell ``j`` (row-major), so ``C @ x.ravel() == conv2d(x).ravel()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import ops
from . import Exercise, register


def conv_matrix(w: Any, input_hw: tuple[int, int], stride: int, padding: str) -> np.ndarray:
    """The matrix ``C`` of a one-channel 2-D convolution: one :func:`convviz.conv2d` of every unit image.

    Row ``r`` is output cell ``r`` and column ``j`` input cell ``j``, both in row-major order.
    """
    w = np.asarray(w, dtype=float)
    h, width = input_hw
    units = np.eye(h * width).reshape(h * width, h, width, 1)  # a batch of unit images
    y = ops.conv2d(units, w[:, :, None, None], strides=[1, stride, stride, 1], padding=padding)
    return y.reshape(h * width, -1).T


_TAPS = np.arange(1.0, 10.0).reshape(3, 3)  # tap (kh, kw) holds 3 * kh + kw + 1: C's entries name their tap


def _pair(answer: Any) -> tuple[int, int] | None:
    try:
        first, second = (int(v) for v in answer)
    except (TypeError, ValueError):
        return None
    return first, second


# -- l02-shape: C for a 5x5 input, 3x3 kernel, stride 2, SAME -----------------------------
_C_SHAPE = conv_matrix(_TAPS, (5, 5), 2, "SAME").shape
_C_VALID_SHAPE = conv_matrix(_TAPS, (5, 5), 2, "VALID").shape


def _explain_shape(answer: Any) -> str:
    pair = _pair(answer)
    if pair is None:
        return f"answer with a pair (rows, columns); the answer is {_C_SHAPE}."
    if pair == _C_SHAPE[::-1]:
        return (f"{pair} is the shape of C transposed: y = C x, so C has one row per output cell "
                f"({_C_SHAPE[0]}) and one column per input cell ({_C_SHAPE[1]}).")
    if pair == _C_VALID_SHAPE:
        return f"{pair} is VALID's C (2x2 outputs); SAME keeps ceil(5 / 2) = 3 rows and columns: 9 outputs."
    if pair == (9, 9):
        return "C has one column per *input* cell: 5 x 5 = 25 columns, not one per kernel tap or output."
    return f"one row per output cell (3 x 3 = 9 with SAME, stride 2), one column per input cell (25): {_C_SHAPE}."


register(Exercise(
    "l02-shape", _C_SHAPE,
    "one row per output cell (SAME, stride 2: 3 x 3 = 9) and one column per input cell (5 x 5 = 25).",
    _explain_shape))

# -- l02-nonzeros: entries in the rows of output (0, 0) and (1, 1), 4x4, 3x3, stride 1, SAME
_PER_ROW = (conv_matrix(_TAPS, (4, 4), 1, "SAME") != 0).sum(axis=1).reshape(4, 4)
_NONZEROS = (int(_PER_ROW[0, 0]), int(_PER_ROW[1, 1]))


def _explain_nonzeros(answer: Any) -> str | list[str]:
    pair = _pair(answer)
    if pair is None:
        return f"answer with a pair (row of output (0, 0), row of output (1, 1)); the answer is {_NONZEROS}."
    notes = []
    if pair[0] != _NONZEROS[0]:
        if pair[0] == 9:
            notes.append("the window of output (0, 0) hangs over the padding on the top and the left: those "
                         "5 taps multiply padding zeros, not input cells, so they leave no entry in C; "
                         "4 entries remain")
        elif pair[0] == 6:
            notes.append("6 is an edge cell's count (one padding row); the corner (0, 0) loses a row and a "
                         "column of taps: 4 entries")
        else:
            notes.append(f"output (0, 0) keeps the 2 x 2 taps that land inside the input: {_NONZEROS[0]}")
    if pair[1] != _NONZEROS[1]:
        notes.append(f"the window of output (1, 1) lies inside the 4x4 input: all {_NONZEROS[1]} taps are entries")
    return notes


register(Exercise(
    "l02-nonzeros", _NONZEROS,
    "a row of C holds one entry per tap that lands on a real input cell: 4 at the corner (five taps "
    "fall in the padding), all 9 inside.",
    _explain_nonzeros))

# -- l02-zero-columns: all-zero columns of C for 4x4, 3x3, stride 2, VALID ---------------
_C_LOST = conv_matrix(_TAPS, (4, 4), 2, "VALID")
_ZERO_COLUMNS = {int(j) for j in np.flatnonzero(~_C_LOST.any(axis=0))}
_ROW_3 = {12, 13, 14, 15}
_COL_3 = {3, 7, 11, 15}


def _explain_zero_columns(answer: Any) -> str:
    try:
        given = {int(j) for j in answer}
    except (TypeError, ValueError):
        return (f"answer with a set of column indices (row-major: j = 4 * row + col); "
                f"the answer is {sorted(_ZERO_COLUMNS)}.")
    if given == _ROW_3:
        return f"row 3 is never read, and neither is column 3: add {sorted(_COL_3 - _ROW_3)}."
    if given == _COL_3:
        return f"column 3 is never read, and neither is row 3: add {sorted(_ROW_3 - _COL_3)}."
    if given == {3, 7, 11, 12, 13, 14}:
        return "cell 15 (row 3, column 3) is in both: add it."
    if given == {15}:
        return ("not only the corner: the single window reads rows 0-2 and columns 0-2, so every cell of row 3 "
                f"or of column 3 is lost: {sorted(_ZERO_COLUMNS)}.")
    return (f"one window fits (output 1x1); it reads rows 0-2 and columns 0-2, so the cells in row 3 or column 3 "
            f"have all-zero columns: {sorted(_ZERO_COLUMNS)}.")


register(Exercise(
    "l02-zero-columns", _ZERO_COLUMNS,
    "the only window reads rows 0-2 and columns 0-2; the 7 cells of row 3 or column 3 are never read: "
    "their columns of C are zero, and so is their gradient.",
    _explain_zero_columns))
