"""Argument conventions shared by the TensorFlow-shaped functions."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import ops
from ...errors import InvalidArgumentError
from .._window import spatial_values

# TensorFlow converts Python float lists to float32.
TF_DEFAULT_FLOAT = np.float32


def check_bool(value: Any, name: str, op: str) -> None:
    """A bool attribute; None is its default, as TensorFlow's generated ops take it."""
    if value is not None and not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be a bool, got {type(value).__name__} {value!r}")


def check_name(name: Any, op: str) -> None:
    if name is not None and not isinstance(name, str):
        raise TypeError(f"{op}: name must be a string or None, got {type(name).__name__}")


def check_four(value: Any, name: str, op: str) -> None:
    """tf.raw_ops take strides and dilations as 4 values only (convviz's own ops also take 2)."""
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) != 4:
        raise InvalidArgumentError(
            f"{op}: {name} must have 4 values (tf.raw_ops takes no 2-value form), got {len(value)}: {list(value)}"
        )


def split_padding(padding: Any, op: str) -> tuple[Any, list[int]]:
    """tf.nn style padding: a string, or (before, after) pairs per dimension.

    Returns ``(padding, explicit_paddings)`` for the raw op.  As in TensorFlow's
    ``convert_padding``, the string "EXPLICIT" is refused: explicit padding is
    given as the pairs themselves.
    """
    if isinstance(padding, (list, tuple)):
        if len(padding) != 4 or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in padding):
            raise InvalidArgumentError(
                f"{op}: padding given as a list must be 4 (before, after) pairs, one per "
                f"dimension in data_format order, got {padding!r}"
            )
        return "EXPLICIT", [v for pair in padding for v in pair]
    if isinstance(padding, str) and padding == "EXPLICIT":
        raise InvalidArgumentError(
            f"{op}: padding 'EXPLICIT' is not a valid value here; give explicit padding as a list of "
            "4 (before, after) pairs, e.g. [[0, 0], [1, 1], [2, 2], [0, 0]] for NHWC"
        )
    return padding, []


def channels_first(data_format: Any) -> bool:
    """Whether ``data_format`` puts depth before height and width (TensorFlow's test)."""
    return isinstance(data_format, str) and data_format.startswith("NC")


def spatial_to_four(hw: list[int] | tuple[int, ...], data_format: Any) -> list[int]:
    """``[height, width]`` -> 4 values in ``data_format`` order, 1 for batch and depth."""
    return [1, 1, *hw] if channels_first(data_format) else [1, *hw, 1]


def tf_sequence(value: Any, name: str, data_format: Any, op: str) -> list[int]:
    """The strides or dilations of the ``tf.nn`` v2 functions (TensorFlow's ``_get_sequence``).

    None is all ones; an int or 1 value is used for height and width; 2 values
    are ``[height, width]``; 4 values pass as they are (checked by the op).
    The result has 4 values in ``data_format`` order.

    Examples
    --------
    >>> from convviz.compat.tf._common import tf_sequence
    >>> tf_sequence(2, "strides", "NHWC", "conv2d"), tf_sequence([2, 3], "strides", "NCHW", "conv2d")
    ([1, 2, 2, 1], [1, 1, 2, 3])
    """
    if value is None:
        return [1, 1, 1, 1]
    values = spatial_values(value, name, op, four=True)
    return list(values) if len(values) == 4 else spatial_to_four(values, data_format)


def run_nn(record: str, op: str, args: tuple, strides: Any, padding: Any, data_format: Any, dilations: Any,
           name: Any) -> Any:
    """Run the op record ``record`` the way the ``tf.nn`` functions do.

    ``name`` is checked (and unused), padding may be (before, after) pairs,
    ``data_format`` and ``dilations`` None are their defaults (as TensorFlow's
    generated ops take them), Python float lists become float32, and errors
    name ``op``.
    """
    check_name(name, op)
    data_format = "NHWC" if data_format is None else data_format
    dilations = [1, 1, 1, 1] if dilations is None else dilations
    padding, explicit = split_padding(padding, op)
    return ops.BY_NAME[record].run(*args, strides, padding, explicit, data_format, dilations, None,
                                   op=op, default_float=TF_DEFAULT_FLOAT)
