"""Exercises of notebook 09, transposed convolution in practice: sizes, TensorFlow's output_shape, checkerboards.

Expected answers come from :func:`convviz.conv_transpose2d` (its output shape, and its
overlap counts: the transposed convolution of ones with a kernel of ones) and from
:mod:`convviz.geometry`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import ops
from ..geometry import AxisGeometry
from . import Exercise, register


def overlap(kernel: int, stride: int, size: int = 8) -> np.ndarray:
    """How many (input cell, tap) pairs land on each output cell of a transposed convolution.

    ``conv_transpose2d`` of a ``size`` x ``size`` image of ones with a ``kernel`` x ``kernel``
    kernel of ones and ``stride`` (an int array).
    """
    ones = np.ones((1, 1, size, size))
    return ops.conv_transpose2d(ones, np.ones((1, 1, kernel, kernel)), stride=stride)[0, 0].astype(np.int64)


def uneven(kernel: int, stride: int) -> bool:
    """True when the interior overlap counts differ from cell to cell (a checkerboard, or holes)."""
    interior = overlap(kernel, stride)[kernel:-kernel, kernel:-kernel]
    return bool(interior.min() != interior.max())


# -- l09-output-size: H = 4, kernel 5, stride 3, padding 1, output_padding 1 ---------------
_H, _K, _S, _P, _OP = 4, 5, 3, 1, 1
_SIZE = ops.conv_transpose2d(np.zeros((1, 1, _H, _H)), np.zeros((1, 1, _K, _K)), stride=_S, padding=_P,
                             output_padding=_OP).shape[-1]
_FULL = (_H - 1) * _S + _K  # the full scatter, before cropping or adding


def _explain_output_size(answer: Any) -> str:
    try:
        value = int(answer)
    except (TypeError, ValueError):
        return f"answer with a number; the answer is {_SIZE}."
    if value == _SIZE - _OP:
        return (f"{value} forgets output_padding: it adds {_OP} row at the bottom, "
                f"(4 − 1)·3 − 2·1 + (5 − 1) + 1 + 1 = {_SIZE}.")
    if value == _FULL:
        return (f"{value} is the full scatter, (4 − 1)·3 + 5; then padding = 1 crops one row at each end and "
                f"output_padding = 1 adds one at the bottom: {_SIZE}.")
    if value == _FULL + _OP:
        return (f"{value} forgets the padding: padding = 1 crops one row from each end of the full scatter "
                f"({_FULL} rows), so {_FULL} − 2 + 1 = {_SIZE}.")
    if value == _H * _S:
        return (f"{value} = input × stride is the rule of thumb for 'SAME'-like settings only; here "
                f"(4 − 1)·3 − 2·1 + (5 − 1) + 1 + 1 = {_SIZE}.")
    return (f"(H − 1)·stride − 2·padding + dilation·(k − 1) + output_padding + 1 "
            f"= 9 − 2 + 4 + 1 + 1 = {_SIZE}.")


register(Exercise(
    "l09-output-size", _SIZE,
    f"the full scatter has (4 − 1)·3 + 5 = {_FULL} rows; padding = 1 crops one at each end (−2) and "
    f"output_padding = 1 adds one at the bottom: {_SIZE}.",
    _explain_output_size))

# -- l09-tf-sizes: the output_shape sizes TensorFlow accepts for input 4, stride 2, SAME ---
_TF_SIZES = {n for n in range(1, 20) if AxisGeometry.from_padding(n, 3, 2, 1, "SAME").output_size == 4}


def _explain_tf_sizes(answer: Any) -> str:
    try:
        given = {int(v) for v in answer}
    except (TypeError, ValueError):
        return f"answer with a set of sizes, e.g. {{5, 6}}; the answer is {sorted(_TF_SIZES)}."
    if given == {8}:
        return "8 = 4 · 2 works, but so does 7: SAME keeps ceil(7 / 2) = 4 outputs too."
    if given == {7}:
        return "7 works, and so does 8: SAME keeps ceil(8 / 2) = 4 outputs too."
    if given == {7, 8, 9}:
        return "9 does not: SAME on 9 rows keeps ceil(9 / 2) = 5 outputs, not 4."
    return (f"output_shape must be a size whose SAME convolution (stride 2) has 4 outputs: ceil(n / 2) = 4 "
            f"for n in {sorted(_TF_SIZES)}.")


register(Exercise(
    "l09-tf-sizes", _TF_SIZES,
    "SAME with stride 2 maps both 7 and 8 rows to ceil(n / 2) = 4, so the transpose of a 4-row input may "
    "have either size: output_shape says which (PyTorch's output_padding does the same).",
    _explain_tf_sizes))

# -- l09-checkerboard: which (kernel, stride) pairs overlap unevenly -----------------------
PAIRS = [(3, 2), (4, 2), (5, 2), (3, 3), (4, 3), (6, 3), (2, 3)]
_UNEVEN = {pair for pair in PAIRS if uneven(*pair)}


def _explain_checkerboard(answer: Any) -> str:
    try:
        given = {(int(k), int(s)) for k, s in answer}
    except (TypeError, ValueError):
        return f"answer with a set of (kernel, stride) pairs, e.g. {{(3, 2)}}; the answer is {sorted(_UNEVEN)}."
    notes = []
    for k, s in sorted(_UNEVEN - given):
        if k < s:
            notes.append(f"({k}, {s}) is uneven too: a kernel shorter than the stride leaves cells that no tap "
                         f"reaches (overlap 0 between 1s)")
        else:
            notes.append(f"({k}, {s}): {k} is not a multiple of {s}, so cells get {k // s} or {k // s + 1} taps "
                         f"per axis")
    for k, s in sorted(given - _UNEVEN):
        notes.append(f"({k}, {s}) is even: {k} is a multiple of {s}, every interior cell gets {k // s} taps per axis")
    return "; ".join(notes) + f". The uneven pairs are {sorted(_UNEVEN)}: kernel % stride != 0."


register(Exercise(
    "l09-checkerboard", _UNEVEN,
    "the overlap is uneven exactly when the kernel is not a multiple of the stride (kernel % stride != 0): "
    "then neighbouring output cells get different numbers of taps.",
    _explain_checkerboard))
