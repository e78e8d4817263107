"""Exercises of notebook 12, the lab: a tiny CNN on scikit-learn's digits with convviz's ops.

The lab's network (keep in step with ``notebooks/12_lab_digits.md``)::

    x: N x 8 x 8 x 1  ->  conv1 3x3, 8 filters, stride 1, SAME  ->  ReLU
                      ->  conv2 3x3, 16 filters, stride 2, SAME ->  ReLU
                      ->  flatten  ->  dense to 10 classes  ->  softmax cross-entropy

Every expected answer is computed here from that description with convviz
(the layers' ``output_shape``, their parameters, the input-gradient op), never
typed in by hand.  Importing this module is cheap: tiny arrays, no training.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..layers import Conv2D
from ..ops import conv2d_backprop_input
from . import Exercise, register

IMAGE = 8  # load_digits: 8 x 8 pixels, one channel
CLASSES = 10
KERNEL = 3
FILTERS1 = 8
FILTERS2 = 16
BATCH = 32  # the mini-batch of the exercise on shapes

_conv1 = Conv2D.create(1, FILTERS1, KERNEL, rng=0, name="conv1")
_conv2 = Conv2D.create(FILTERS1, FILTERS2, KERNEL, strides=2, rng=0, name="conv2")
_shape1 = _conv1.output_shape((BATCH, IMAGE, IMAGE, 1))
_shape2 = _conv2.output_shape(_shape1)
_features = int(np.prod(_shape2[1:]))
_conv_params = {name: p.size for layer in (_conv1, _conv2) for name, p in
                ((f"{layer.name}.{key}", value) for key, value in layer.parameters().items())}
_dense_params = {"dense.weights": _features * CLASSES, "dense.bias": CLASSES}
_params = {**_conv_params, **_dense_params}
_total = sum(_params.values())


def _as_tuple(answer: Any) -> tuple | None:
    try:
        return tuple(int(n) for n in answer)
    except (TypeError, ValueError):
        return None


# -- 1. the shape after the stride-2 convolution ---------------------------------------------
def _explain_shape(answer: Any) -> str:
    got = _as_tuple(answer)
    n, h, w, c = _shape2
    if got is None or len(got) != 4:
        return f"give the 4 numbers of the NHWC shape, (batch, height, width, channels): {_shape2}."
    if got == (n, IMAGE, IMAGE, c):
        return (f"{got} keeps the 8 x 8 size: stride 2 moves the window two cells at a time, so SAME keeps "
                f"ceil(8 / 2) = {h} positions per axis: {_shape2}.")
    vh = (IMAGE - KERNEL) // 2 + 1
    if got == (n, vh, vh, c):
        return (f"{got} is VALID's count (floor((8 - 3) / 2) + 1 = {vh}); with SAME the output has "
                f"ceil(8 / 2) = {h} positions: {_shape2}.")
    if got[:3] == (n, h, w) and got[3] != c:
        return (f"the height and width are right, but a convolution's output has one channel per filter: "
                f"conv2 has {c} filters (its input's {FILTERS1} channels are summed over): {_shape2}.")
    if got == (n, c, h, w):
        return f"{got} is the NCHW order; the lab keeps TensorFlow's NHWC, channels last: {_shape2}."
    if got[0] != n:
        return f"the batch axis passes through a convolution unchanged: {n} images in, {n} out: {_shape2}."
    return (f"{got}: conv1 (stride 1, SAME) keeps 8 x 8 and makes {FILTERS1} channels; conv2 (stride 2, SAME) "
            f"keeps ceil(8 / 2) = {h} positions per axis and makes {c} channels: {_shape2}.")


register(Exercise(
    "l12-shape-after-stride2", _shape2,
    f"conv1 keeps the 8 x 8 size (stride 1, SAME); conv2 keeps ceil(8 / 2) = {_shape2[1]} positions per axis "
    f"and has one output channel per filter: {_shape2}, so the dense layer reads {_features} numbers per image.",
    _explain_shape))


# -- 2. the number of parameters ---------------------------------------------------------------
def _explain_params(answer: Any) -> str:
    try:
        got = int(answer)
    except (TypeError, ValueError):
        return f"give one whole number; the network has {_total} parameters."
    biases = sum(v for k, v in _params.items() if k.endswith("bias"))
    conv2_without_inputs = KERNEL * KERNEL * FILTERS2
    without_inputs = _total - _params["conv2.filter"] + conv2_without_inputs
    dense_unstrided = IMAGE * IMAGE * FILTERS2 * CLASSES + CLASSES
    unstrided = _total - _params["dense.weights"] - _params["dense.bias"] + dense_unstrided
    if got == _total - biases:
        return f"{got} leaves out the {biases} biases (one per filter and one per class): {_total}."
    if got == without_inputs:
        return (f"{got} counts conv2's filters as 3 x 3 x {FILTERS2}: each of its {FILTERS2} filters is "
                f"3 x 3 x {FILTERS1}, one 3 x 3 slice per input channel, so conv2 has "
                f"{_params['conv2.filter']} weights: {_total} in all.")
    if got == unstrided:
        return (f"{got} sizes the dense layer for an 8 x 8 x {FILTERS2} input: the stride-2 conv leaves "
                f"{_shape2[1]} x {_shape2[2]} x {FILTERS2} = {_features} features, so the dense layer has "
                f"{_features} x {CLASSES} + {CLASSES} parameters: {_total} in all.")
    if got == _total - _params["dense.weights"] - _params["dense.bias"]:
        return f"{got} counts only the convolutions; the dense layer adds {_features} x {CLASSES} + {CLASSES}."
    parts = " + ".join(f"{v} ({k})" for k, v in _params.items())
    return f"{got}: add filter weights, biases and the dense layer: {parts} = {_total}."


register(Exercise(
    "l12-parameter-count", _total,
    "conv1 3 x 3 x 1 x 8 + 8, conv2 3 x 3 x 8 x 16 + 16, dense " f"{_features} x {CLASSES} + {CLASSES}: "
    f"{_total} parameters; the dense layer holds {100 * (_params['dense.weights'] + CLASSES) / _total:.0f}% "
    f"of them; each convolution shares its filters across all {_shape1[1] * _shape1[2]} (then "
    f"{_shape2[1] * _shape2[2]}) positions.",
    _explain_params))


# -- 3. the loss before training ------------------------------------------------------------------
_chance_loss = math.log(CLASSES)


def _explain_loss(answer: Any) -> str:
    try:
        got = float(answer)
    except (TypeError, ValueError):
        return f"give one number; the loss before training is close to ln {CLASSES} = {_chance_loss:.3f}."
    if not math.isfinite(got) or got < 0:
        return "cross-entropy, -ln p(right class), is never negative; it is ln 10 when every class gets 1/10."
    if got == 0:
        return ("0 would mean the untrained network is certain of every right answer; with near-zero logits it "
                f"gives every class 1/10, and -ln(1/10) = {_chance_loss:.3f}.")
    if abs(got - 1 / CLASSES) < 1e-3 or abs(got - 0.9) < 1e-3:
        return (f"{got} is a probability (or an error rate), not the loss: the right class gets 1/10 and the loss "
                f"is -ln(1/10) = {_chance_loss:.3f}.")
    if abs(got - 1.0) < 1e-3:
        return f"1 is log base 10 of 10; cross-entropy uses the natural log: ln 10 = {_chance_loss:.3f}."
    if abs(got - math.log2(CLASSES)) < 1e-2:
        return f"{got:.3f} is log base 2 of 10 (bits); the loss uses the natural log: ln 10 = {_chance_loss:.3f}."
    return (f"{got}: near-zero logits give every class the same probability 1/10 (softmax of equal numbers), "
            f"so the loss is -ln(1/10) = ln 10 = {_chance_loss:.3f}.")


register(Exercise(
    "l12-initial-loss", _chance_loss,
    f"with a small dense layer the logits start near 0, softmax gives every class 1/10, and the loss is "
    f"-ln(1/10) = ln 10 = {_chance_loss:.3f}; a first loss far from it means a bug or a bad initialisation.",
    _explain_loss, rtol=0.02))


# -- 4. the receptive field of one feature after conv2 ---------------------------------------
def _receptive_field(row: int, col: int) -> tuple[np.ndarray, np.ndarray]:
    """The conv1 features and the input pixels one conv2 feature depends on: the input gradient of
    that feature, with all-ones filters (so nothing cancels), traced back through conv2 then conv1."""
    ones1 = np.ones((KERNEL, KERNEL, 1, 1))
    ones2 = np.ones((KERNEL, KERNEL, 1, 1))
    dy2 = np.zeros((1, _shape2[1], _shape2[2], 1))
    dy2[0, row, col, 0] = 1.0
    dh1 = conv2d_backprop_input([1, IMAGE, IMAGE, 1], ones2, dy2, [1, 2, 2, 1], "SAME")
    dx = conv2d_backprop_input([1, IMAGE, IMAGE, 1], ones1, dh1, [1, 1, 1, 1], "SAME")
    return dh1[0, :, :, 0] != 0, dx[0, :, :, 0] != 0


_reads, _field = _receptive_field(1, 1)
_mid = np.flatnonzero(_reads.any(axis=1))
_field_pixels = int(_field.sum())
_rows = np.flatnonzero(_field.any(axis=1))
_cols = np.flatnonzero(_field.any(axis=0))
_field_side = int(_rows.size)


def _explain_field(answer: Any) -> str:
    try:
        got = int(answer)
    except (TypeError, ValueError):
        return f"give a number of pixels; one feature of conv2 sees {_field_pixels}."
    side = _field_side
    if got == KERNEL * KERNEL:
        return (f"9 is one 3 x 3 window, what conv1 alone sees; each of conv2's 3 x 3 taps reads a conv1 "
                f"feature that itself reads 3 x 3 pixels, and the windows overlap: {side} x {side} = "
                f"{_field_pixels}.")
    if got == (KERNEL + 2 * (KERNEL - 1)) ** 2 or got == (2 * KERNEL + 1) ** 2:
        return (f"{got} spreads conv2's taps 2 apart, but the stride moves conv2's window over conv1's map; "
                f"its taps are neighbours there (dilation 1): 3 neighbouring conv1 features, each 3 pixels "
                f"wide, span {side} pixels: {side} x {side} = {_field_pixels}.")
    if got == 2 * KERNEL * 2 * KERNEL or got == KERNEL * KERNEL * KERNEL * KERNEL:
        return (f"{got} counts overlapping pixels several times: conv2's 3 taps per axis read conv1 features "
                f"one pixel apart, so their 3-pixel windows overlap and span {side} distinct pixels per axis: "
                f"{side} x {side} = {_field_pixels}.")
    if got == IMAGE * IMAGE:
        return (f"the whole 8 x 8 image is more than one feature sees: {side} x {side} = {_field_pixels} "
                f"(rows {_rows[0]}-{_rows[-1]}, columns {_cols[0]}-{_cols[-1]}); the dense layer then combines "
                f"all {_shape2[1] * _shape2[2]} positions.")
    return (f"{got}: each axis spans 3 conv1 features one apart (conv2's kernel), each reading 3 pixels "
            f"(conv1's kernel): 3 + (3 - 1) = {side} pixels, so {side} x {side} = {_field_pixels}.")


register(Exercise(
    "l12-receptive-field", _field_pixels,
    f"feature (1, 1) of conv2 reads conv1 features at rows and columns {_mid[0]}-{_mid[-1]}, each of which "
    f"reads 3 x 3 "
    f"pixels: input rows {_rows[0]}-{_rows[-1]} and columns {_cols[0]}-{_cols[-1]}, {_field_side} x "
    f"{_field_side} = {_field_pixels} pixels (1 + 2 + 2 x 1: each layer adds (kernel - 1) x the product of "
    f"the strides before it).",
    _explain_field))
