"""Exercises of notebook 10, from TensorFlow, MindSpore and PyTorch: layouts, padding, ambiguous sizes."""

from __future__ import annotations

import numpy as np

from ..geometry import AxisGeometry, same_padding
from . import Exercise, register

# 1. MindSpore's weight shape for a TensorFlow filter [3, 3, 4, 8] (HWIO).
_tf_filter = (3, 3, 4, 8)
_ms_weight = tuple(np.empty(_tf_filter).transpose(3, 2, 0, 1).shape)


register(Exercise(
    "l10-ms-weight-shape", _ms_weight, f"MindSpore's weight is (C_out, C_in / group, K1, K2) = {_ms_weight}.",
    mistakes=[(_tf_filter, "that is TensorFlow's HWIO layout; MindSpore (and PyTorch) put channels first: "
                           "(C_out, C_in, KH, KW)."),
              ((4, 8, 3, 3), "output channels come first: (C_out, C_in / group, KH, KW).")],
    otherwise=f"(C_out, C_in / group, K1, K2) = {_ms_weight}: filt.transpose(3, 2, 0, 1).",
    form="give a shape, for example (1, 2, 3, 3)."))

# 2. tf.compat.v1 padding pairs equal to SAME for a 10x10 input, 3x3 kernel, stride 2 (NHWC).
_top, _bottom = same_padding(10, 3, 2, 1)
_pairs = [[0, 0], [_top, _bottom], [_top, _bottom], [0, 0]]


register(Exercise(
    "l10-same-as-pairs", _pairs, f"(5 - 1) * 2 + 3 - 10 = 1 padding row, at the bottom: {_pairs}.",
    mistakes=[([[0, 0], [1, 1], [1, 1], [0, 0]],
               "symmetric (1, 1) gives the same output size but shifts every window up and left by one: "
               f"SAME needs only {_top + _bottom} row, at the bottom (and right)."),
              ([[0, 0], [_bottom, _top], [_bottom, _top], [0, 0]],
               "TensorFlow puts the odd padding row at the bottom and the odd column on the right: (0, 1).")],
    otherwise=f"SAME pads (before, after) = {(_top, _bottom)} per spatial axis and nothing on batch and channels: "
              f"{_pairs}.",
    form="give 4 (before, after) pairs, for example [[0, 0], [1, 1], [1, 1], [0, 0]]."))

# 3. PyTorch: which input sizes 1..20 give 5 output rows with kernel 3, stride 2, padding 1?
_sizes = {n for n in range(1, 21) if AxisGeometry.from_padding(n, 3, 2, 1, "EXPLICIT", (1, 1)).output_size == 5}


register(Exercise(
    "l10-ambiguous-sizes", _sizes,
    f"input sizes {sorted(_sizes)} both give 5 outputs: input_size (or output_padding) chooses.",
    mistakes=[({10}, "10 works, but so does 9: floor((n + 2 - 3) / 2) + 1 = 5 for both, which is why conv2d_input "
                     "needs input_size and conv_transpose2d needs output_padding to choose.")],
    otherwise=f"floor((n + 2 - 3) / 2) + 1 = 5 for n in {sorted(_sizes)}: the gradient op cannot tell them apart.",
    form="give a set of sizes, for example {10}."))
