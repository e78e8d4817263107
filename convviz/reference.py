"""Float64 NumPy reference implementations: slow, obvious loops.

Every op has one (``convviz.reference.<op name>``): it takes the same arguments
as the fast op, goes through the same validation and geometry, and computes in
float64 with a plain loop over output cells and filter taps.  The tests compare
the kernels against them, and small figures may use them.  An op's reference
lives with its op (``convviz/ops/<op>.py``: the loop, ``reference_sum``; the
record wraps it in the op's validation, ``Op.reference``), and this module is the
facade that names them.

Examples
--------
The references of the ops, by name, and the forward convolutions:

>>> from convviz import reference
>>> reference.conv2d_backprop_input.__module__
'convviz.ops.input_grad'
"""

from __future__ import annotations

import warnings
from typing import Any

from .geometry import ConvGeometry, from_nhwc, to_nhwc
from .ops import BY_NAME

__all__ = sorted(["from_nhwc", "groups", "taps", "to_nhwc", *BY_NAME])

# The loop helpers the references share live on the geometry; these names stay for
# the users who imported them from here.
taps = ConvGeometry.taps
groups = ConvGeometry.group_slices
# Old names, kept as deprecated aliases of the ops' references.
_RENAMED = {"depthwise_conv2d": "depthwise_conv2d_native"}

globals().update({name: op.reference for name, op in BY_NAME.items()})


def __getattr__(name: str) -> Any:
    """The deprecated names: ``convviz.reference.depthwise_conv2d``."""
    if name in _RENAMED:
        warnings.warn(f"convviz.reference.{name} is deprecated, use convviz.reference.{_RENAMED[name]} (the "
                      f"reference of the op of that name)", DeprecationWarning, stacklevel=2)
        return BY_NAME[_RENAMED[name]].reference
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
