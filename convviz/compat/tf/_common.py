"""Argument conventions shared by the TensorFlow-shaped functions."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InvalidArgumentError

# TensorFlow converts Python float lists to float32.
TF_DEFAULT_FLOAT = np.float32


def check_bool(value: Any, name: str, op: str) -> None:
    if not isinstance(value, (bool, np.bool_)):
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
    """tf.compat.v1 style padding: a string, or (before, after) pairs per dimension.

    Returns ``(padding, explicit_paddings)`` for the raw op.
    """
    if isinstance(padding, (list, tuple)):
        if len(padding) != 4 or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in padding):
            raise InvalidArgumentError(
                f"{op}: padding given as a list must be 4 (before, after) pairs, one per "
                f"dimension in data_format order, got {padding!r}"
            )
        return "EXPLICIT", [v for pair in padding for v in pair]
    return padding, []
