"""Float64 NumPy reference implementations: slow, obvious loops.

Every op has one (``convviz.reference.<op name>``): it takes the same arguments
as the fast op, goes through the same validation and geometry, and computes in
float64 with a plain loop over output cells and filter taps.  The tests compare
the kernels against them, and small figures may use them.  An op's reference
lives in its own module (``convviz/ops/<op>.py``, the record's ``reference``)
and is found here by name; this module holds the loop helpers they share.

Examples
--------
The references of the ops, by name, and the forward convolutions:

>>> from convviz import reference
>>> reference.conv2d_backprop_input.__module__
'convviz.ops.input_grad'
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from .geometry import ConvGeometry

# What this module defines; the ops' references come on top (see __getattr__).
_OWN = ["from_nhwc", "groups", "taps", "to_nhwc"]
# Old names, kept as deprecated aliases of the ops' references.
_RENAMED = {"depthwise_conv2d": "depthwise_conv2d_native"}


def __getattr__(name: str) -> Any:
    """``convviz.reference.<op name>``: the float64 reference of that op's record."""
    if name.startswith("__") and name != "__all__":  # the import system asks for __path__ and the like
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .ops import BY_NAME  # here, not at the top: the op modules import this one

    if name == "__all__":
        return sorted(set(_OWN) | set(BY_NAME))
    if name in BY_NAME:
        return BY_NAME[name].reference
    if name in _RENAMED:
        warnings.warn(f"convviz.reference.{name} is deprecated, use convviz.reference.{_RENAMED[name]} (the "
                      f"reference of the op of that name)", DeprecationWarning, stacklevel=2)
        return BY_NAME[_RENAMED[name]].reference
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__getattr__("__all__")))


def to_nhwc(array: np.ndarray, data_format: str) -> np.ndarray:
    """``array`` as an NHWC view (a transpose for NCHW).

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.reference import to_nhwc
    >>> to_nhwc(np.zeros((1, 3, 5, 7)), "NCHW").shape
    (1, 5, 7, 3)
    """
    return array if data_format == "NHWC" else array.transpose(0, 2, 3, 1)


def from_nhwc(array: np.ndarray, data_format: str) -> np.ndarray:
    """An NHWC ``array`` as a view in ``data_format`` order.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.reference import from_nhwc
    >>> from_nhwc(np.zeros((1, 5, 7, 3)), "NCHW").shape
    (1, 3, 5, 7)
    """
    return array if data_format == "NHWC" else array.transpose(0, 3, 1, 2)


def taps(geometry: ConvGeometry) -> Iterator[tuple[int, int, int, int, int, int]]:
    """Yield ``(oh, ow, kh, kw, ih, iw)`` for every tap that reads a real input cell.

    Examples
    --------
    A 3-wide input, a 2-wide kernel, VALID: each of the 2x2 output cells reads
    4 real cells.

    >>> from convviz.geometry import ConvGeometry
    >>> from convviz.reference import taps
    >>> g = ConvGeometry.build(batch=1, input_hw=(3, 3), in_channels=1, out_channels=1,
    ...                        kernel_hw=(2, 2), strides=(1, 1), dilations=(1, 1), padding="VALID")
    >>> len(list(taps(g))), next(taps(g))
    (16, (0, 0, 0, 0, 0, 0))
    """
    for oh in range(geometry.rows.output_size):
        for kh in range(geometry.rows.kernel_size):
            ih = geometry.rows.input_index(oh, kh)
            if not 0 <= ih < geometry.rows.input_size:
                continue
            for ow in range(geometry.cols.output_size):
                for kw in range(geometry.cols.kernel_size):
                    iw = geometry.cols.input_index(ow, kw)
                    if 0 <= iw < geometry.cols.input_size:
                        yield oh, ow, kh, kw, ih, iw


def groups(g: ConvGeometry) -> Iterator[tuple[slice, slice]]:
    """Yield the (input-channel slice, output-channel slice) of each group.

    Examples
    --------
    >>> from convviz.geometry import ConvGeometry
    >>> from convviz.reference import groups
    >>> g = ConvGeometry.build(batch=1, input_hw=(3, 3), in_channels=4, out_channels=6,
    ...                        kernel_hw=(1, 1), strides=(1, 1), dilations=(1, 1), padding="VALID",
    ...                        groups=2)
    >>> list(groups(g))
    [(slice(0, 2, None), slice(0, 3, None)), (slice(2, 4, None), slice(3, 6, None))]
    """
    cin_g, cout_g = g.in_channels // g.groups, g.out_channels // g.groups
    for group in range(g.groups):
        yield (slice(group * cin_g, (group + 1) * cin_g),
               slice(group * cout_g, (group + 1) * cout_g))
