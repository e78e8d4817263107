"""Exercises of notebook 01, first contact in 1-D: output length, a worked sum, cells with no gradient.

A 1-D convolution here is a 2-D one of height 1 (shapes ``[1, 1, W, 1]``), so every
expected answer comes from :mod:`convviz.geometry` and the convviz ops, never by hand.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import ops
from ..geometry import AxisGeometry, ConvGeometry
from . import Exercise, register

# The strip and the kernel of the notebook.
X = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0])
W = np.array([1.0, 2.0, -1.0])


def conv1d(x: Any, w: Any, stride: int, padding: str) -> np.ndarray:
    """The 1-D convolution (a correlation) of ``x`` with ``w``, computed by :func:`convviz.conv2d`."""
    x, w = np.asarray(x, dtype=float), np.asarray(w, dtype=float)
    y = ops.conv2d(x.reshape(1, 1, -1, 1), w.reshape(1, -1, 1, 1), strides=[1, 1, stride, 1], padding=padding)
    return y[0, 0, :, 0]


def _as_int(answer: Any) -> int | None:
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return None
    return int(value) if value == int(value) else None


# -- l01-output-size: VALID and SAME lengths for 8 cells, 3 taps, stride 3 ---------------
_N, _K, _S = 8, 3, 3
_VALID = AxisGeometry.from_padding(_N, _K, _S, 1, "VALID").output_size
_SAME = AxisGeometry.from_padding(_N, _K, _S, 1, "SAME").output_size


register(Exercise(
    "l01-output-size", (_VALID, _SAME),
    f"VALID counts the windows that fit, floor((8 - 3) / 3) + 1 = {_VALID}; "
    f"SAME pads so that ceil(8 / 3) = {_SAME} windows fit.",
    form=f"answer with a pair (VALID length, SAME length), e.g. (5, 6); the answer is ({_VALID}, {_SAME}).",
    parts=[([(_N - _K + 1, f"VALID {_N - _K + 1} forgets the stride: with stride 3 the windows start at 0, 3 only, "
                           f"floor((8 - 3) / 3) + 1 = {_VALID}")],
            f"VALID: windows start at 0, 3, ... and must end inside the strip, floor((8 - 3) / 3) + 1 = {_VALID}"),
           ([(_N, f"SAME {_N} forgets the stride: SAME keeps ceil(8 / 3) = {_SAME}, not 8"),
             (_N // _S, f"SAME {_N // _S} rounds down; SAME rounds up, ceil(8 / 3) = {_SAME}, padding the end")],
            f"SAME keeps ceil(input / stride) = ceil(8 / 3) = {_SAME} (the kernel size does not matter)")]))

# -- l01-worked-sum: y[4] of the notebook's strip with SAME, stride 2 ---------------------
_AXIS = AxisGeometry.from_padding(len(X), len(W), 2, 1, "SAME")
_OUT = 4
_Y4 = float(conv1d(X, W, 2, "SAME")[_OUT])
_FLIPPED = float(conv1d(X, W[::-1], 2, "SAME")[_OUT])
_STRIDE_1 = float(conv1d(X, W, 1, "SAME")[_OUT])
_VALID_4 = float(conv1d(np.concatenate([X, [0.0, 0.0]]), W, 2, "VALID")[_OUT])  # the window without pad_before
_READ = [_AXIS.input_index(_OUT, k) for k in range(len(W))]


def _explain_worked_sum(answer: Any) -> str:
    value = _as_int(answer)
    if value == _FLIPPED:
        return (f"{value} is the sum with the kernel flipped (a textbook convolution); conv2d is a correlation: "
                f"tap 0 meets the leftmost cell of the window, y[4] = {_Y4:g}.")
    if value == _STRIDE_1:
        return f"{value} is y[4] with stride 1 (window 3..5); with stride 2 the window of y[4] starts at 4*2 - 1 = 7."
    if value == _VALID_4:
        return (f"{value} reads cells 8..10: SAME pads one cell before the strip too, so y[4] reads cells "
                f"{_READ[0]}..{_READ[-1]}.")
    return (f"y[4] reads cells {_READ} (cell 9 is padding, worth 0): 6*1 + 5*2 + 0*(-1) = {_Y4:g}.")


register(Exercise(
    "l01-worked-sum", _Y4,
    f"y[4] reads cells {_READ[0]}, {_READ[1]} and the padding cell {_READ[2]}: 6*1 + 5*2 + 0*(-1) = {_Y4:g}.",
    _explain_worked_sum))

# -- l01-no-gradient: the cells of a 10-cell strip that 3 taps with stride 4 never read ---
_LOST_AXIS = AxisGeometry.from_padding(10, 3, 4, 1, "VALID")
_LOST = {int(i) for i in _LOST_AXIS.zero_gradient_indices()}
_GAPS = {i for i in _LOST if i < (_LOST_AXIS.output_size - 1) * 4 + 3}


def _explain_no_gradient(answer: Any) -> str:
    try:
        given = {int(i) for i in answer}
    except (TypeError, ValueError):
        return f"answer with a set of cell indices, e.g. {{0, 5}}; the answer is {sorted(_LOST)}."
    outside = sorted(i for i in given if not 0 <= i < _LOST_AXIS.input_size)
    if outside:
        return f"the strip has cells 0..{_LOST_AXIS.input_size - 1}; {outside} are not in it."
    missing, extra = sorted(_LOST - given), sorted(given - _LOST)
    if given == _GAPS:
        return (f"you found the gaps between windows {sorted(_GAPS)}, but not the tail: a third window would "
                f"need cells 8..10, so cells {sorted(_LOST - _GAPS)} are never read either.")
    notes = []
    if missing:
        notes.append(f"cells {missing} also get no gradient (no window reads them)")
    if extra:
        notes.append(f"cells {extra} do get gradient (a window reads them)")
    return "; ".join(notes) + f": the windows read cells 0..2 and 4..6, so the answer is {sorted(_LOST)}."


register(Exercise(
    "l01-no-gradient", _LOST,
    f"{_LOST_AXIS.output_size} windows read cells 0..2 and 4..6; the gap cell 3 and the tail 7..9 "
    f"are never read, so their gradient is exactly zero.",
    _explain_no_gradient))

# -- l01-2d-shape: the output shape of a 7x9 input, 3x3 kernel, strides (2, 3), SAME -----
_G2 = ConvGeometry.build(batch=1, input_hw=(7, 9), in_channels=1, out_channels=1, kernel_hw=(3, 3),
                         strides=(2, 3), dilations=(1, 1), padding="SAME")
_G2_VALID = ConvGeometry.build(batch=1, input_hw=(7, 9), in_channels=1, out_channels=1, kernel_hw=(3, 3),
                               strides=(2, 3), dilations=(1, 1), padding="VALID")


def _explain_2d_shape(answer: Any) -> str:
    try:
        rows, cols = (int(v) for v in answer)
    except (TypeError, ValueError):
        return f"answer with a pair (rows, columns); the answer is {_G2.output_hw}."
    if (rows, cols) == _G2_VALID.output_hw:
        return (f"{_G2_VALID.output_hw} is VALID's shape (the windows that fit without padding); SAME keeps "
                f"ceil(7 / 2) = {_G2.output_hw[0]} rows and ceil(9 / 3) = {_G2.output_hw[1]} columns.")
    if (rows, cols) == (-(-7 // 2), -(-9 // 2)):
        return f"stride 2 on both axes; the columns move by 3: ceil(9 / 3) = {_G2.output_hw[1]} columns."
    if (rows, cols) == (-(-7 // 3), -(-9 // 3)):
        return f"stride 3 on both axes; the rows move by 2: ceil(7 / 2) = {_G2.output_hw[0]} rows."
    if (rows, cols) == (-(-9 // 2), -(-7 // 3)):
        return f"rows and columns swapped: 7 rows with stride 2, 9 columns with stride 3, so {_G2.output_hw}."
    return (f"each axis on its own, as in 1-D: ceil(7 / 2) = {_G2.output_hw[0]} rows, "
            f"ceil(9 / 3) = {_G2.output_hw[1]} columns.")


register(Exercise(
    "l01-2d-shape", _G2.output_hw,
    f"each axis is a 1-D strip of its own: ceil(7 / 2) = {_G2.output_hw[0]} rows, ceil(9 / 3) = "
    f"{_G2.output_hw[1]} columns.",
    _explain_2d_shape))
