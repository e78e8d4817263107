"""Turn :func:`convviz.explore`'s arguments into a setting and the user's planes.

Shared by the widget and the standalone page, so both accept and refuse the same
arguments with the same messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..geometry import DATA_FORMATS
from ._setting import PARAMS, TRANSPOSED, build_geometry, check_param, defaults

_PAIRS = {"input": ("input_h", "input_w"), "kernel": ("kernel_h", "kernel_w"),
          "stride": ("stride_h", "stride_w"), "dilation": ("dilation_h", "dilation_w"),
          "output_padding": ("output_padding_h", "output_padding_w")}


@dataclass
class Resolved:
    """A full setting, the user's planes ``[channels, rows, cols]`` with captions, and locked controls."""

    params: dict[str, Any]
    given: dict[str, np.ndarray] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)
    locked: list[str] = field(default_factory=list)


def _pair(name: str, value: Any) -> tuple[Any, Any]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return value, value
    if isinstance(value, str):
        parts = value.lower().replace("\u00d7", "x").split("x")
        if len(parts) in (1, 2) and all(p.strip().isdigit() for p in parts):
            numbers = [int(p) for p in parts]
            return (numbers[0], numbers[-1])
        raise TypeError(f"{name} must be an int, a pair (rows, cols) or 'HxW', got {value!r}")
    try:
        first, second = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an int, a pair (rows, cols) or 'HxW', got {value!r}") from None
    return first, second


def _channels(channel: Any) -> tuple[int, int]:
    pair = _pair("channel", channel)
    for v in pair:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise TypeError(f"channel must be a non-negative int or a pair (in_channel, out_channel), got {channel!r}")
    return int(pair[0]), int(pair[1])


def _plane(name: str, array: Any, data_format: str, channels: tuple[int, int]) -> tuple[np.ndarray, str]:
    """One 2-D plane of a user array, with a caption stating where it came from."""
    try:
        a = np.asarray(array)
    except Exception as err:  # pragma: no cover - numpy's own message is clear
        raise TypeError(f"{name} must be an array of numbers: {err}") from None
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_) or np.iscomplexobj(a):
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    layout = "HWIO" if name == "W" else data_format
    if a.ndim == 2:
        plane, caption = a, f"your {name}, {a.shape[0]}\u00d7{a.shape[1]}"
    elif a.ndim == 4:
        if name == "W":
            c_in, c_out = channels
            picks = {"in_channel": (c_in, a.shape[2]), "out_channel": (c_out, a.shape[3])}
            for what, (k, size) in picks.items():
                if k >= size:
                    raise ValueError(f"channel: W has {size} {what}s (shape {a.shape}, HWIO), got {what} {k}")
            plane = a[:, :, c_in, c_out]
            caption = f"your W[:, :, {c_in}, {c_out}] of a {a.shape} HWIO array"
        else:
            k = channels[0] if name == "x" else channels[1]
            size = a.shape[3] if data_format == "NHWC" else a.shape[1]
            if k >= size:
                raise ValueError(f"channel: {name} has {size} channels (shape {a.shape}, {data_format}), got {k}")
            plane = a[0, :, :, k] if data_format == "NHWC" else a[0, k]
            caption = f"your {name}, batch 0, channel {k} of a {a.shape} {data_format} array"
    else:
        raise ValueError(f"{name} must be 2-D (rows, cols) or 4-D ({layout}), got shape {a.shape}")
    plane = np.asarray(plane, dtype=np.float64)
    if plane.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {a.shape}")
    if not np.all(np.isfinite(plane)):
        raise ValueError(f"{name} must hold finite numbers (no NaN or inf)")
    return plane[None], caption


def resolve(x: Any = None, W: Any = None, dy: Any = None, *, op: str | None = None, input: Any = None,
            kernel: Any = None, stride: Any = None, dilation: Any = None, padding: str | None = None,
            pads: Any = None, output_padding: Any = None, in_channels: int | None = None,
            out_channels: int | None = None, groups: int | None = None, multiplier: int | None = None,
            batch: int | None = None, seed: int | None = None, symbols: str | None = None,
            practice: str | None = None,
            values: str | None = None, theme: str | None = None, data_format: str = "NHWC",
            channel: Any = 0) -> Resolved:
    """Check every argument of :func:`convviz.explore` and build the setting it asks for.

    Raises ``TypeError``/``ValueError`` naming the argument, with the expected and the
    actual value.

    Examples
    --------
    >>> import numpy as np
    >>> r = resolve(W=np.ones((2, 2)), dy=np.ones((3, 3)), input=4, stride=1, padding="VALID")
    >>> r.params["op"], r.params["kernel_h"], r.locked
    ('conv2d_backprop_input', 2, ['kernel_h', 'kernel_w', 'multiplier'])
    >>> resolve(W=np.ones((2, 2)), dy=np.ones((2, 2)), input=4, stride=1, padding="VALID")
    Traceback (most recent call last):
    ...
    ValueError: dy must have shape (3, 3) (the output of input 4x4, kernel 2x2, stride 1x1, dilation 1x1, VALID), got (2, 2)
    """
    if data_format not in DATA_FORMATS:
        raise ValueError(f"data_format must be one of {DATA_FORMATS}, got {data_format!r}")
    params = defaults()
    if padding is not None and not isinstance(padding, str):  # PyTorch's padding (conv_transpose2d): N or (H, W)
        h, w = _pair("padding", padding)
        params.update(padding="EXPLICIT", pad_top=check_param("pad_top", h), pad_bottom=check_param("pad_bottom", h),
                      pad_left=check_param("pad_left", w), pad_right=check_param("pad_right", w))
        padding = None
    for key, value in (("padding", padding), ("in_channels", in_channels), ("out_channels", out_channels),
                       ("groups", groups), ("multiplier", multiplier), ("batch", batch), ("seed", seed),
                       ("values", values), ("symbols", symbols), ("practice", practice), ("theme", theme)):
        if value is not None:
            params[key] = check_param(key, value)
    for key, value in (("input", input), ("kernel", kernel), ("stride", stride), ("dilation", dilation),
                       ("output_padding", output_padding)):
        if value is not None:
            for name, v in zip(_PAIRS[key], _pair(key, value)):
                params[name] = check_param(name, v)
    if pads is not None:
        try:
            top, bottom, left, right = pads
        except (TypeError, ValueError):
            raise TypeError(f"pads must be 4 ints (top, bottom, left, right), got {pads!r}") from None
        for name, v in zip(("pad_top", "pad_bottom", "pad_left", "pad_right"), (top, bottom, left, right)):
            params[name] = check_param(name, v)
        if padding is None:
            params["padding"] = "EXPLICIT"
    channels = _channels(channel)
    resolved = Resolved(params)
    for name, array in (("x", x), ("W", W), ("dy", dy)):
        if array is None:
            continue
        plane, caption = _plane(name, array, data_format, channels)
        key = name.lower()
        resolved.given[key], resolved.captions[key] = plane, caption
        if key in ("x", "w"):
            size_names = ("input_h", "input_w") if key == "x" else ("kernel_h", "kernel_w")
            for size_name, size in zip(size_names, plane.shape[1:]):
                spec = PARAMS[size_name]
                if not spec[1] <= size <= spec[2]:
                    raise ValueError(f"{name} is too large for the explorer: {size_name} must be between "
                                     f"{spec[1]} and {spec[2]}, got shape {plane.shape[1:]}")
                params[size_name] = int(size)
            resolved.locked.extend(size_names)
    given = resolved.given
    if op is None:
        op = ("conv2d" if "x" in given and "w" in given and "dy" not in given
              else "depthwise_conv2d_native_backprop_filter" if "x" in given and "dy" in given
              else params["op"])
    params["op"] = check_param("op", op)
    if params["op"] == TRANSPOSED:
        if given:
            raise ValueError("explore(op='conv_transpose2d') shows example numbers only: pass no x, W or dy")
        return resolved
    if "dy" in given:  # the user's dy is one channel
        resolved.locked.append("multiplier")
        params["multiplier"] = 1
    g = build_geometry(params)
    if "dy" in given and given["dy"].shape[1:] != g.output_hw:
        p = params
        raise ValueError(
            f"dy must have shape {g.output_hw} (the output of input {p['input_h']}x{p['input_w']}, kernel "
            f"{p['kernel_h']}x{p['kernel_w']}, stride {p['stride_h']}x{p['stride_w']}, dilation "
            f"{p['dilation_h']}x{p['dilation_w']}, {p['padding']}), got {given['dy'].shape[1:]}")
    if 0 in g.output_hw:
        (eh, ew), pr, pc = g.effective_kernel_hw, g.rows.padded_size, g.cols.padded_size
        raise ValueError(f"kernel: no window fits: the {eh}x{ew} effective kernel is larger than the "
                         f"{pr}x{pc} padded input")
    return resolved
