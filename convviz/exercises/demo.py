"""The example exercise of :mod:`convviz.exercises`' docstring (output size with SAME)."""

from __future__ import annotations

from ..geometry import ConvGeometry
from . import Exercise, register

_g = ConvGeometry.build(batch=1, input_hw=(7, 7), in_channels=1, out_channels=1, kernel_hw=(3, 3),
                        strides=(2, 2), dilations=(1, 1), padding="SAME")


def _explain(answer) -> str:
    if answer == 3:
        return "3 is VALID's count (floor((7 - 3) / 2) + 1 = 3); SAME keeps ceil(7 / 2) = 4."
    return f"{answer!r}: SAME keeps ceil(input / stride) = ceil(7 / 2) = {_g.output_hw[0]} positions."


register(Exercise("demo-output-size", _g.output_hw[0],
                  "SAME keeps ceil(7 / 2) = 4 output positions.", _explain))
