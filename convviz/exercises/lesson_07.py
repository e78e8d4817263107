"""Exercises of notebook 07, one layer forward and backward: gradient shapes, one filter tap, its terms.

Expected answers come from :func:`convviz.conv2d_backprop_input`,
:func:`convviz.conv2d_backprop_filter` and :mod:`convviz.geometry`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import ops
from ..geometry import ConvGeometry
from . import Exercise, register

# -- l07-shapes: x [2, 6, 6, 3], filter [3, 3, 3, 4], stride 2, SAME ---------------------
_X_SHAPE, _W_SHAPE, _STRIDES = (2, 6, 6, 3), (3, 3, 3, 4), [1, 2, 2, 1]
_Y_SHAPE = ops.conv2d(np.zeros(_X_SHAPE), np.zeros(_W_SHAPE), _STRIDES, "SAME").shape
_DX_SHAPE = ops.conv2d_backprop_input(list(_X_SHAPE), np.zeros(_W_SHAPE), np.zeros(_Y_SHAPE), _STRIDES, "SAME").shape
_DW_SHAPE = ops.conv2d_backprop_filter(np.zeros(_X_SHAPE), list(_W_SHAPE), np.zeros(_Y_SHAPE), _STRIDES, "SAME").shape


def _explain_shapes(answer: Any) -> str | list[str]:
    try:
        dx, dw = (tuple(int(v) for v in part) for part in answer)
    except (TypeError, ValueError):
        return f"answer with two shapes (dL/dx shape, dL/dW shape); the answer is ({_DX_SHAPE}, {_DW_SHAPE})."
    notes = []
    if dx != _DX_SHAPE:
        if dx == _Y_SHAPE:
            notes.append(f"{dx} is the shape of y (and of dL/dy); dL/dx is a gradient with respect to x, so it has "
                         f"x's shape {_DX_SHAPE}")
        else:
            notes.append(f"dL/dx has the shape of x, {_DX_SHAPE}: one number per input cell")
    if dw != _DW_SHAPE:
        if dw == (3, 3, 4, 3):
            notes.append(f"{dw} swaps the channels: the filter is HWIO [kh, kw, in, out] = {_DW_SHAPE}, "
                         "and so is its gradient")
        elif len(dw) == 5 or dw[0] == _X_SHAPE[0]:
            notes.append(f"the filter is shared by the whole batch: dL/dW sums over the images and has the filter's "
                         f"shape {_DW_SHAPE}, with no batch axis")
        else:
            notes.append(f"dL/dW has the filter's shape, {_DW_SHAPE}: one number per weight")
    return notes


register(Exercise(
    "l07-shapes", (_DX_SHAPE, _DW_SHAPE),
    f"a gradient has the shape of what it is taken with respect to: dL/dx {_DX_SHAPE} like x, "
    f"dL/dW {_DW_SHAPE} like the filter (summed over the batch); only y and dL/dy are {_Y_SHAPE}.",
    _explain_shapes))

# -- l07-one-tap: dW[0, 1] for a 3x3 input, 2x2 kernel, stride 1, VALID ------------------
TINY_X = np.arange(1.0, 10.0).reshape(3, 3)
TINY_DY = np.array([[1.0, 2.0], [0.0, -1.0]])


def _tiny_dw(dy: np.ndarray) -> np.ndarray:
    return ops.conv2d_backprop_filter(TINY_X[None, :, :, None], [2, 2, 1, 1], dy[None, :, :, None],
                                      [1, 1, 1, 1], "VALID")[:, :, 0, 0]


_TINY_DW = _tiny_dw(TINY_DY)
_TAP = (0, 1)
_FLIPPED = _tiny_dw(TINY_DY[::-1, ::-1])


def _explain_one_tap(answer: Any) -> str:
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return f"answer with a number; the answer is {_TINY_DW[_TAP]:g}."
    if value == _FLIPPED[_TAP]:
        return (f"{value:g} pairs x with dL/dy rotated by 180 degrees; the filter gradient is a correlation: "
                f"dy[oh, ow] meets x[oh + 0, ow + 1], so 2·1 + 3·2 + 5·0 + 6·(−1) = {_TINY_DW[_TAP]:g}.")
    others = [(kh, kw) for kh in range(2) for kw in range(2) if (kh, kw) != _TAP and _TINY_DW[kh, kw] == value]
    if others:
        kh, kw = others[0]
        return (f"{value:g} is dW[{kh}, {kw}]: tap (0, 1) is row 0, column 1, so it reads x[oh, ow + 1] = the "
                f"2x2 block starting at x[0, 1]: 2·1 + 3·2 + 5·0 + 6·(−1) = {_TINY_DW[_TAP]:g}.")
    return (f"dW[0, 1] = sum over oh, ow of x[oh, ow + 1] · dy[oh, ow] = 2·1 + 3·2 + 5·0 + 6·(−1) = "
            f"{_TINY_DW[_TAP]:g}.")


register(Exercise(
    "l07-one-tap", float(_TINY_DW[_TAP]),
    f"tap (0, 1) met x[oh, ow + 1] in every window: 2·1 + 3·2 + 5·0 + 6·(−1) = {_TINY_DW[_TAP]:g}.",
    _explain_one_tap))

# -- l07-terms: the real products in dW[2, 2, ci, co] of the l07-shapes layer -------------
_G = ConvGeometry.build(batch=_X_SHAPE[0], input_hw=_X_SHAPE[1:3], in_channels=3, out_channels=4, kernel_hw=(3, 3),
                        strides=(2, 2), dilations=(1, 1), padding="SAME")
_RANGE_ROWS, _RANGE_COLS = _G.rows.output_range(2), _G.cols.output_range(2)
_TERMS = _G.batch * len(_RANGE_ROWS) * len(_RANGE_COLS)
_ALL = _G.batch * _G.output_hw[0] * _G.output_hw[1]


def _explain_terms(answer: Any) -> str:
    try:
        value = int(answer)
    except (TypeError, ValueError):
        return f"answer with a number; the answer is {_TERMS}."
    if value == _ALL:
        return (f"{_ALL} counts every (n, oh, ow); SAME pads one row at the bottom and one column at the right "
                f"here, and tap (2, 2) of the last output row and column lands there: {_TERMS} products remain.")
    if value == _TERMS // _G.batch:
        return f"{value} is one image's count; the filter is shared by both images of the batch: {_TERMS}."
    if value == _ALL // _G.batch:
        return f"{value} forgets both the batch (2 images) and the padding: {_TERMS}."
    return (f"tap (2, 2) reads rows oh·2 + 2 and columns ow·2 + 2: rows 2, 4 (6 is padding) and the same "
            f"columns, in 2 images: 2 · 2 · 2 = {_TERMS}.")


register(Exercise(
    "l07-terms", _TERMS,
    f"tap (2, 2) reads rows 2 and 4 (row 6 is the SAME padding) and columns 2 and 4, in both images: "
    f"2 · 2 · 2 = {_TERMS} products of x and dL/dy.",
    _explain_terms))
