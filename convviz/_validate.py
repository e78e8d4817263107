"""User arguments -> (arrays the kernels can trust, a ConvGeometry).

Every check happens here, before any allocation or kernel call.  Wrong values
and shapes raise :class:`InvalidArgumentError` (a ``ValueError``), wrong types
and dtypes raise ``TypeError``; each message names the argument and gives the
expected and the actual value.
"""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from ._dtypes import BFLOAT16, FLOAT_AND_INT32_DTYPES, FLOAT_DTYPES, HALF_DTYPES
from ._dtypes import dtype_name as _dtype_name
from ._dtypes import dtype_names as _names
from ._threads import MAX_THREADS, default_threads
from .errors import InvalidArgumentError
from .geometry import DATA_FORMATS, PADDINGS, ConvGeometry

# InvalidArgumentError lives in convviz.errors, the dtypes in convviz._dtypes: both re-exported
# here for the callers that import them from the validator.
__all__ = ["BFLOAT16", "FLOAT_AND_INT32_DTYPES", "FLOAT_DTYPES", "HALF_DTYPES", "InvalidArgumentError"]

# Sizes, strides, dilations and paddings are int32 in TensorFlow's kernels;
# larger values are never meaningful and would only invite overflow.
MAX_DIMENSION = 2**31 - 1


# -- scalars and integer lists ----------------------------------------------------
def as_int(value: Any, name: str, op: str) -> int:
    """Return ``value`` as a Python int; bools, floats and strings are TypeErrors."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be an int, got bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{op}: {name} must be an int, got {type(value).__name__} {value!r}"
        ) from None


def as_int_list(value: Any, name: str, op: str) -> tuple[int, ...]:
    """Return a 1-D list/tuple/array of ints as a tuple of Python ints."""
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise InvalidArgumentError(
                f"{op}: {name} must be 1-D, got an array of shape {value.shape}"
            )
        if value.dtype.kind not in "iu":
            raise TypeError(f"{op}: {name} must hold integers, got dtype {value.dtype}")
        return tuple(int(v) for v in value.tolist())
    if hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "__array__"):
        return as_int_list(np.asarray(value), name, op)  # e.g. a tf.Tensor or torch.Tensor
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(
            f"{op}: {name} must be a list or tuple of ints, got {type(value).__name__} {value!r}"
        )
    if any(isinstance(v, (list, tuple)) or getattr(v, "ndim", 0) for v in value):
        # A nested list is a shape mistake (e.g. [[1, 5], [5, 2]]), not a type one.
        raise InvalidArgumentError(f"{op}: {name} must be a flat list of ints, got a nested list {value!r}")
    return tuple(as_int(v, f"{name}[{i}]", op) for i, v in enumerate(value))


def int_pair(value: Any, name: str, op: str, low: int, what: str = "") -> tuple[int, int]:
    """An int, or a sequence of 2 ints (PyTorch's ``_pair``), as ``(height, width)``,
    each at least ``low``; ``what`` names the two values in the message (" [height, width]").

    >>> int_pair(3, "kernel_size", "Conv2D", low=1), int_pair([1, 2], "stride", "conv_transpose2d", low=1)
    ((3, 3), (1, 2))
    """
    if isinstance(value, (list, tuple, np.ndarray)):
        values = as_int_list(value, name, op)
        if len(values) != 2:
            raise InvalidArgumentError(f"{op}: {name} must be an int or 2 ints{what}, got {len(values)}: "
                                       f"{list(values)}")
    else:
        values = (as_int(value, name, op),) * 2
    check_range(values, name, op, low=low)
    return values[0], values[1]


def check_range(values: tuple[int, ...], name: str, op: str, low: int) -> None:
    for i, v in enumerate(values):
        if v < low or v > MAX_DIMENSION:
            raise InvalidArgumentError(
                f"{op}: {name}[{i}] must be between {low} and {MAX_DIMENSION}, got {v} "
                f"(in {name}={list(values)})"
            )


def as_string(value: Any, name: str, op: str, allowed: tuple[str, ...]) -> str:
    """Return ``value`` (str or bytes) if it is one of ``allowed`` (exact case)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        raise TypeError(
            f"{op}: {name} must be a string, one of {allowed}, got {type(value).__name__} {value!r}"
        )
    if value not in allowed:
        hint = f" (did you mean {value.upper()!r}?)" if value.upper() in allowed else ""
        raise InvalidArgumentError(f"{op}: {name} must be one of {allowed}, got {value!r}{hint}")
    return value


def resolve_n_threads(n_threads: Any, op: str) -> int:
    """None -> the default read now (convviz._threads.default_threads); else a positive int."""
    if n_threads is None:
        return default_threads()
    n = as_int(n_threads, "n_threads", op)
    if n < 1 or n > MAX_THREADS:
        raise InvalidArgumentError(
            f"{op}: n_threads must be None or between 1 and {MAX_THREADS}, got {n}")
    return n


# -- tensors ---------------------------------------------------------------------
def as_tensor(
    value: Any, name: str, op: str, *, like: np.ndarray | None = None,
    default_float: Any = np.float64,
) -> np.ndarray:
    """Turn ``value`` into an ndarray with a native-byte-order dtype.

    Arrays (anything with a dtype) keep their dtype.  Python lists and scalars
    take the dtype of ``like`` when given (as TensorFlow converts a list to the
    other operand's dtype), otherwise ``default_float`` for floats and int32 for
    ints.  Strings, bools, objects and complex values are TypeErrors.
    """
    if type(value).__module__.split(".")[0] == "cupy":
        return value  # a GPU array: checked like any other, never copied to the host
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as err:
        raise InvalidArgumentError(f"{op}: {name} is not a rectangular array: {err}") from None
    if not hasattr(value, "dtype"):
        kind = array.dtype.kind
        if kind in "fiu" and like is not None and like.dtype.kind in "fiu":
            if kind == "f" and like.dtype.kind in "iu":
                raise TypeError(
                    f"{op}: {name} holds floats but must have the same dtype as the other "
                    f"tensor ({_dtype_name(like.dtype)})"
                )
            array = array.astype(like.dtype)
        elif kind == "f":
            array = array.astype(default_float)
        elif kind in "iu":
            if array.size and (array.min() < -(2**31) or array.max() > 2**31 - 1):
                raise InvalidArgumentError(f"{op}: {name} holds ints that do not fit int32")
            array = array.astype(np.int32)
    if array.dtype.kind in "fiu" and not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return array


def check_dtype(array: np.ndarray, name: str, op: str, allowed: tuple[np.dtype, ...]) -> np.dtype:
    if array.dtype not in allowed:
        raise TypeError(
            f"{op}: {name} must have one of the dtypes {_names(allowed)}, got {_dtype_name(array.dtype)}"
        )
    return array.dtype


def check_same_dtype(array: np.ndarray, name: str, reference: np.ndarray, ref_name: str, op: str) -> None:
    if array.dtype != reference.dtype:
        raise TypeError(
            f"{op}: {name} must have the same dtype as {ref_name} "
            f"({_dtype_name(reference.dtype)}), got {_dtype_name(array.dtype)}"
        )


def tensor_pair(
    first: Any, first_name: str, second: Any, op: str,
    allowed: tuple[np.dtype, ...], default_float: Any, second_name: str = "out_backprop",
) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """Convert an op's two tensors; they must share one of the ``allowed`` dtypes.

    A Python list takes the dtype of the other operand when that one is an
    array, as TensorFlow converts it (converted from the list itself: never
    through ``default_float`` first, which would round float64 values to float32).
    """
    first_is_array = hasattr(first, "dtype")
    given_first = first
    first = as_tensor(first, first_name, op, default_float=default_float)
    second = as_tensor(second, second_name, op, like=first if first_is_array else None,
                       default_float=default_float)
    if not first_is_array and second.dtype != first.dtype:
        first = as_tensor(given_first, first_name, op, like=second)
    dtype = check_dtype(first, first_name, op, allowed)
    check_same_dtype(second, second_name, first, first_name, op)
    return first, second, dtype


def check_rank4(array: np.ndarray, name: str, op: str, layout: str) -> None:
    if array.ndim != 4:
        raise InvalidArgumentError(
            f"{op}: {name} must be 4-D {layout}, got {array.ndim}-D with shape {array.shape}"
        )


def physical_memory_bytes() -> int:
    """Bytes of RAM on this machine (a generous 1 TiB where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**40


def device_memory_bytes() -> int:
    """Bytes of memory on the current CUDA device (used for GPU results)."""
    import cupy

    return int(cupy.cuda.Device().mem_info[1])


def check_allocation(shape: tuple[int, ...], itemsize: int, what: str, op: str, on_gpu: bool = False) -> None:
    """Refuse a result that could not fit in this machine's (or GPU's) memory."""
    nbytes = prod(shape) * itemsize
    limit = device_memory_bytes() if on_gpu else physical_memory_bytes()
    if nbytes > limit:
        where = "the GPU's memory" if on_gpu else "this machine's memory"
        raise InvalidArgumentError(
            f"{op}: {what} of shape {tuple(shape)} would need {nbytes / 2**30:.3g} GiB, "
            f"more than {where} ({limit / 2**30:.3g} GiB)"
        )


def check_scratch(nbytes: int, what: str, op: str, window_note: str) -> None:
    """Refuse a call whose kernel scratch (per thread, times the threads there may be) would not
    fit in half of this machine's memory -- an absurd window, such as a dilation far wider than
    the input with SAME padding -- with a clear error instead of a MemoryError."""
    limit = physical_memory_bytes() // 2
    total = nbytes * max(1, os.cpu_count() or 1)
    if total > limit:
        raise InvalidArgumentError(
            f"{op}: {what} would need {total / 2**30:.3g} GiB, more than half of this machine's memory "
            f"({limit / 2**30:.3g} GiB): {window_note}"
        )


# -- window parameters (shared by both ops) -----------------------------------------
@dataclass(frozen=True)
class Window:
    """Validated spatial parameters in (height, width) order."""

    strides: tuple[int, int]
    dilations: tuple[int, int]
    padding: str
    pads: tuple[int, int, int, int]  # top, bottom, left, right (EXPLICIT only)
    data_format: str

    @property
    def hw_axes(self) -> tuple[int, int]:
        return (1, 2) if self.data_format == "NHWC" else (2, 3)

    @property
    def channel_axis(self) -> int:
        return 3 if self.data_format == "NHWC" else 1


def validate_window(
    strides: Any, padding: Any, explicit_paddings: Any, data_format: Any, dilations: Any, op: str,
) -> Window:
    data_format = as_string(data_format, "data_format", op, DATA_FORMATS)
    padding = as_string(padding, "padding", op, PADDINGS)
    h_axis, w_axis = (1, 2) if data_format == "NHWC" else (2, 3)
    c_axis = 3 if data_format == "NHWC" else 1

    def four(value: Any, name: str) -> tuple[int, int]:
        values = as_int_list(value, name, op)
        if len(values) == 2:  # the spatial form [height, width], as tf.nn takes it
            check_range(values, name, op, low=1)
            return values[0], values[1]
        if len(values) != 4:
            raise InvalidArgumentError(
                f"{op}: {name} must have 4 values in {data_format} order or 2 values "
                f"[height, width], got {len(values)}: {list(values)}"
            )
        if values[0] != 1 or values[c_axis] != 1:
            raise InvalidArgumentError(
                f"{op}: {name} in the batch and depth dimensions must be 1 "
                f"({data_format} positions 0 and {c_axis}), got {list(values)}"
            )
        check_range(values, name, op, low=1)
        return values[h_axis], values[w_axis]

    stride_hw = four(strides, "strides")
    dilation_hw = four(dilations, "dilations")

    pads = () if explicit_paddings is None else as_int_list(explicit_paddings, "explicit_paddings", op)
    if padding != "EXPLICIT":
        if pads:
            raise InvalidArgumentError(
                f"{op}: explicit_paddings must be empty unless padding is 'EXPLICIT' "
                f"(padding={padding!r}), got {list(pads)}"
            )
        pads4 = (0, 0, 0, 0)
    else:
        if len(pads) != 8:
            raise InvalidArgumentError(
                f"{op}: explicit_paddings must have 8 values (a before/after pair per "
                f"dimension in {data_format} order) when padding is 'EXPLICIT', got {len(pads)}: {list(pads)}"
            )
        check_range(pads, "explicit_paddings", op, low=0)
        if pads[0] or pads[1] or pads[2 * c_axis] or pads[2 * c_axis + 1]:
            raise InvalidArgumentError(
                f"{op}: explicit_paddings for the batch and depth dimensions must be 0, got {list(pads)}"
            )
        pads4 = (pads[2 * h_axis], pads[2 * h_axis + 1], pads[2 * w_axis], pads[2 * w_axis + 1])
    return Window(stride_hw, dilation_hw, padding, pads4, data_format)


def spatial(shape: tuple[int, ...], window: Window) -> tuple[int, int, int, int]:
    """(N, H, W, C) of a 4-D shape in the window's data format."""
    h, w = window.hw_axes
    return shape[0], shape[h], shape[w], shape[window.channel_axis]


def groups_of(in_channels: int, filter_shape: tuple[int, ...], op: str, source: str) -> int:
    """The group count of a grouped conv2d: input depth / filter in-depth, checked.

    ``source`` says where the input depth came from ("input", "input_sizes").
    """
    if min(filter_shape) < 1:
        raise InvalidArgumentError(
            f"{op}: filter must not be empty (every dimension at least 1), got shape {tuple(filter_shape)}"
        )
    filter_depth, out_channels = filter_shape[2], filter_shape[3]
    if in_channels < 1 or in_channels % filter_depth:
        raise InvalidArgumentError(
            f"{op}: input depth ({in_channels}, from {source}) must be a positive multiple "
            f"of the filter's in-depth (filter.shape[2] = {filter_depth})"
        )
    groups = in_channels // filter_depth
    if out_channels % groups:
        raise InvalidArgumentError(
            f"{op}: filter out-depth (filter.shape[3] = {out_channels}) must be a multiple of "
            f"the number of groups ({groups} = input depth {in_channels} / filter in-depth {filter_depth})"
        )
    return groups


def check_output_shape(geometry: ConvGeometry, array: np.ndarray, what: str, op: str,
                       name: str = "out_backprop") -> None:
    """``array`` (``out_backprop`` of a gradient op) must have the forward output's shape."""
    if tuple(array.shape) != geometry.output_shape:
        raise InvalidArgumentError(
            f"{op}: {name} must have shape {geometry.output_shape} "
            f"(computed from {what}, strides, dilations and padding), got {tuple(array.shape)}"
        )
