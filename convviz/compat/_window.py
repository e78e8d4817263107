"""Window-argument conventions the compat namespaces share."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import as_int_list
from ..errors import InvalidArgumentError


def spatial_values(value: Any, name: str, op: str, four: bool = False) -> tuple[int, ...]:
    """An int, or 1 or 2 ints, as ``(height, width)`` -- how TensorFlow 2's ``tf.nn``
    and PyTorch take a stride, dilation or padding; with ``four``, 4 ints pass as
    they are (TensorFlow's full form, checked by the op).

    Examples
    --------
    >>> from convviz.compat._window import spatial_values
    >>> spatial_values(2, "stride", "op"), spatial_values([3], "stride", "op"), spatial_values((1, 2), "stride", "op")
    ((2, 2), (3, 3), (1, 2))
    """
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value), int(value)
    if not isinstance(value, (list, tuple)) and not hasattr(value, "__array__"):
        raise TypeError(f"{op}: {name} must be an int or a list of ints, got {type(value).__name__} {value!r}")
    values = as_int_list(value, name, op)
    if len(values) == 1:
        return values * 2
    if len(values) == 2 or (four and len(values) == 4):
        return values
    raise InvalidArgumentError(f"{op}: {name} should be an int or of length {'1, 2 or 4' if four else '1 or 2'}, "
                               f"got {len(values)}: {list(values)}")
