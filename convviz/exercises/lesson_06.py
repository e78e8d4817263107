"""Exercises of notebook 06, dilation and gridding: the dilated span, lost rows, stacks of dilated layers.

:func:`stack_reach` is what the notebook draws: which input cells a stack of dilated
3x3 layers (stride 1) reaches from one output cell, computed by running the gradient
back through the stack with :func:`convviz.conv2d_backprop_input`.
"""

from __future__ import annotations

from math import gcd

import numpy as np

from .. import ops
from ..geometry import AxisGeometry, effective_kernel_size
from . import Exercise, register

__all__ = ["interior_lost_rows", "stack_reach"]


def stack_reach(dilations, kernel: int = 3) -> np.ndarray:
    """Paths from one output cell back to each input cell through a stack of dilated layers.

    Layer ``i`` is a ``kernel x kernel`` all-ones convolution, stride 1, VALID, with
    dilation ``dilations[i]`` (the first layer is the one next to the input). Zero
    means the output cell never sees that input cell: a hole in its receptive field.

    Examples
    --------
    >>> stack_reach([1, 1]).shape
    (5, 5)
    >>> int((stack_reach([2, 2]) == 0).sum())   # 9x9, only the 5x5 even cells reached
    56
    """
    dy = np.ones((1, 1, 1, 1))
    for d in reversed(list(dilations)):
        size = dy.shape[1] + (kernel - 1) * d
        dy = ops.conv2d_backprop_input([1, size, size, 1], np.ones((kernel, kernel, 1, 1)), dy, [1, 1, 1, 1],
                                       "VALID", dilations=[1, d, d, 1])
    return dy[0, :, :, 0]


def interior_lost_rows(stride: int, dilation: int, kernel: int = 3, size: int = 24) -> np.ndarray:
    """Rows in the middle half of a ``size``-row SAME input that no window reads (the edges left out)."""
    counts = AxisGeometry.from_padding(size, kernel, stride, dilation, "SAME").coverage()
    middle = slice(size // 4, size - size // 4)
    return np.flatnonzero(counts[middle] == 0) + size // 4


# 1. The span of a 3-tap kernel with dilation 3.
_span = effective_kernel_size(3, 3)


register(Exercise(
    "l06-dilated-span", _span, f"taps at 0, 3, 6: (3 - 1) * 3 + 1 = {_span} cells.",
    mistakes=[(9, "3 x 3 counts 3 cells per tap; the taps are 3 apart, so from the first to the last: "
                  "(3 - 1) * 3 + 1 = 7."),
              (6, "(3 - 1) * 3 = 6 is the distance from the first tap to the last; the span counts both ends: 7.")],
    otherwise=f"the taps sit at 0, 3 and 6: the span is (k - 1) * d + 1 = {_span}."))

# 2. (stride, dilation) pairs, 1..4 each, whose interior rows lose gradient (3-tap kernel).
_pairs = {(s, d) for s in range(1, 5) for d in range(1, 5) if len(interior_lost_rows(s, d))}


def _explain_pairs(answer) -> str:
    try:
        got = {(int(s), int(d)) for s, d in answer}
    except (TypeError, ValueError):
        return "give a set of (stride, dilation) pairs, for example {(2, 2)}."
    gcd_only = {(s, d) for s in range(1, 5) for d in range(1, 5) if gcd(s, d) > 1}
    if got == gcd_only:
        return ("gcd(stride, dilation) > 1 is one way to lose rows; the other is a stride larger than the "
                "kernel's 3 taps can fill: stride 4 loses rows with every dilation (3 taps cannot hit 4 residues).")
    missing = sorted(_pairs - got)
    extra = sorted(got - _pairs)
    return (f"the taps read rows o * s + {{0, d, 2d}}: a row is lost when those 3 offsets miss a residue modulo s. "
            + (f"You missed {missing}. " if missing else "") + (f"These read every row: {extra}." if extra else ""))


register(Exercise("l06-lossy-pairs", _pairs,
                  "a row is lost when the 3 tap offsets 0, d, 2d miss a residue modulo the stride: when "
                  "gcd(s, d) > 1, or when s > 3 (3 taps cannot hit 4 residues).", _explain_pairs))

# 3. Stacks of three dilated 3x3 layers that leave no hole.
STACKS = [(2, 2, 2), (1, 2, 3), (1, 2, 4), (2, 4, 8), (1, 4, 7), (1, 3, 9)]
_covering = {stack for stack in STACKS if (stack_reach(stack) > 0).all()}


def _explain_stacks(answer) -> str:
    try:
        got = {tuple(int(d) for d in stack) for stack in answer}
    except (TypeError, ValueError):
        return "give a set of tuples of dilations, for example {(1, 1, 1)}."
    if (1, 4, 7) in got:
        return ("(1, 4, 7) has no common factor, yet 1 then 4 reaches offsets 0-2, 4-6, 8-10: the gap at 3 stays "
                "open, and 7 cannot fill it. The gap between offsets must stay <= the kernel (Wang et al., HDC).")
    if got & {(2, 2, 2), (2, 4, 8)}:
        return "with every dilation even, only even offsets are reached: a grid of holes (Yu & Koltun's gridding)."
    return (f"a stack covers everything when each layer's dilation fits into the gaps the layers before leave: "
            f"{sorted(_covering)}.")


register(Exercise("l06-covering-stacks", _covering,
                  "a shared factor leaves a grid of holes, and so does a dilation that jumps further than the "
                  f"layers before can fill; {sorted(_covering)} reach every cell.", _explain_stacks))
