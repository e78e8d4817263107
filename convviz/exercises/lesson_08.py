"""Exercises of notebook 08, the depthwise filter gradient: cells per tap, the lattice, the shape of dW."""

from __future__ import annotations

from ..geometry import ConvGeometry
from . import Exercise, register

# 9x9 input, 3x3 kernel, stride 2, VALID.
_g = ConvGeometry.build(batch=1, input_hw=(9, 9), in_channels=1, out_channels=1, kernel_hw=(3, 3),
                        strides=(2, 2), dilations=(1, 1), padding="VALID", depthwise=True)
_cells = _g.output_hw[0] * _g.output_hw[1]


register(Exercise(
    "l08-cells-per-tap", _cells, f"one input cell per output cell: {_g.output_hw[0]} x {_g.output_hw[1]} = {_cells}.",
    mistakes=[(81, f"a tap does not read the whole input: it reads one cell per output cell, {_cells} of them."),
              (9, f"9 is the number of taps in one window; one tap is read once per output cell: "
                  f"{_g.output_hw[0]} x {_g.output_hw[1]} = {_cells}.")],
    otherwise=f"one input cell per output cell: {_g.output_hw[0]} x {_g.output_hw[1]} = {_cells}."))

# The rows tap row 1 reads.
_rows = [int(r) for r in _g.rows.index_table()[:, 1]]


register(Exercise(
    "l08-tap-rows", _rows, f"rows o * stride + kh * dilation for o = 0..{_g.output_hw[0] - 1}: {_rows}.",
    mistakes=[([int(r) for r in _g.rows.index_table()[:, 0]],
               "those are tap row 0's; tap row 1 is shifted down by one (times the dilation, 1 here)."),
              ([0, 1, 2], "those are the rows of one window; a tap takes one row per output row, stride 2 apart.")],
    otherwise=f"output row o reads row o * 2 + 1 through tap row 1: {_rows}.",
    form="give a list of row indices, for example [0, 2, 4]."))

# The shape of dW for 3 channels and multiplier 2.
_mult = ConvGeometry.build(batch=1, input_hw=(8, 8), in_channels=3, out_channels=6, kernel_hw=(3, 3),
                           strides=(1, 1), dilations=(1, 1), padding="SAME", depthwise=True)
_shape = tuple(_mult.filter_shape)


register(Exercise(
    "l08-dw-shape", _shape, f"the gradient has the filter's shape, [KH, KW, C, M] = {_shape}.",
    mistakes=[((3, 3, 3, 6), "that is a dense conv2d filter (every input to every output); depthwise keeps "
                             "[KH, KW, C, M]."),
              ((3, 3, 6, 1), "the 6 output channels are 3 input channels x 2; the filter stores them as "
                             "[KH, KW, C, M].")],
    otherwise=f"the gradient has the filter's shape, [KH, KW, channels, multiplier] = {_shape}.",
    form="give a shape, for example (3, 3, 1, 1)."))
