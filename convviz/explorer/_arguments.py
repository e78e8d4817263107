"""Turn :func:`convviz.explore`'s arguments into a setting and the user's planes.

Shared by the widget and the standalone page, so both accept and refuse the same
arguments with the same messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..geometry import DATA_FORMATS
from ._setting import (MODES, PARAMS, TRANSPOSED, build_geometry, check_param, defaults, from_layout, panels,
                       role_shapes, to_layout)

_PAIRS = {"input": ("input_h", "input_w"), "kernel": ("kernel_h", "kernel_w"),
          "stride": ("stride_h", "stride_w"), "dilation": ("dilation_h", "dilation_w"),
          "output_padding": ("output_padding_h", "output_padding_w")}


@dataclass
class Resolved:
    """A full setting, the user's tensors as panels (``[channels, rows, cols]`` planes or whole
    ``[a, b, rows, cols]`` tensors) with captions, and locked controls."""

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


def _numbers(name: str, array: Any) -> np.ndarray:
    """A user array of real numbers (``TypeError`` naming it otherwise)."""
    try:
        a = np.asarray(array)
    except Exception as err:  # pragma: no cover - numpy's own message is clear
        raise TypeError(f"{name} must be an array of numbers: {err}") from None
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_) or np.iscomplexobj(a):
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    return a


def _finite(name: str, values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must hold finite numbers (no NaN or inf)")
    return values


def _plane(name: str, array: Any, data_format: str, channels: tuple[int, int]) -> tuple[np.ndarray, str]:
    """One 2-D plane of a user array, with a caption stating where it came from."""
    a = _numbers(name, array)
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
    return _finite(name, plane, a.shape)[None], caption


# A whole tensor's panel role, and the op's layout names for its captions and errors.
_ROLES = {"x": "input", "W": "filter", "dy": "output"}
_TRANSPOSED_ROLES = {"x": "output", "W": "filter"}


def _roles(op: str) -> dict[str, str]:
    """The role of each array ``explore`` takes for ``op``."""
    return _TRANSPOSED_ROLES if op == TRANSPOSED else _ROLES


def _nchw_activation(name: str, op: str, data_format: str) -> bool:
    """Whether the user's ``name`` is an NCHW activation the op's NHWC layout is not (a
    transposed convolution's tensors are PyTorch's NCHW already)."""
    return op != TRANSPOSED and name != "W" and data_format == "NCHW"


def _layout_name(name: str, op: str, data_format: str) -> str:
    if op == TRANSPOSED:
        return "(C_in, C_out/groups, kH, kW)" if name == "W" else "NCHW"
    if name == "W":
        return "[kh, kw, c, m]" if MODES[op].depthwise else "HWIO"
    return data_format


def _whole_tensors(arrays: dict[str, np.ndarray], op: str, data_format: str, params: dict[str, Any],
                   explicit: set[str]) -> tuple[dict[str, np.ndarray], dict[str, int]] | None:
    """Every user array whole, as panels ``[a, b, rows, cols]``, and the channel counts they fix;
    ``None`` when one does not fit the explorer (more than 4 channels, 2 images): then one
    plane of each is shown.  A transposed convolution's arrays are PyTorch's (NCHW input,
    ``(C_in, C_out / groups, kH, kW)`` weight), 2-D ones a single plane."""
    transposed = op == TRANSPOSED
    depthwise = MODES[op].depthwise
    roles = _roles(op)
    panels_of: dict[str, np.ndarray] = {}
    for name, a in arrays.items():
        if name not in roles:
            raise ValueError(f"{name}: conv_transpose2d takes x (its input) and W (its weight), got {name}")
        if a.ndim == 2 and transposed:
            a = a[None, None]
        elif a.ndim != 4:
            return None
        if _nchw_activation(name, op, data_format):
            a = a.transpose(0, 2, 3, 1)
        panels_of[name] = from_layout(a, roles[name], transposed)
    counts: dict[str, int] = {}
    x, w, dy = panels_of.get("x"), panels_of.get("W"), panels_of.get("dy")
    groups = params["groups"]
    if transposed:
        if x is not None:
            counts.update(batch=x.shape[0], in_channels=x.shape[1])
        if w is not None:
            counts.update(in_channels=w.shape[1], out_channels=w.shape[0] * groups)
    elif depthwise:
        if x is not None:
            counts.update(batch=x.shape[0], in_channels=x.shape[1])
        if w is not None:
            counts.update(in_channels=w.shape[0], multiplier=w.shape[1])
        if dy is not None:
            counts["batch"] = dy.shape[0]
            c = counts.get("in_channels", params["in_channels"])
            if "multiplier" not in counts and dy.shape[1] % c == 0:
                counts["multiplier"] = dy.shape[1] // c
    else:
        if x is not None:
            counts.update(batch=x.shape[0], in_channels=x.shape[1])
        if w is not None:
            if x is not None and x.shape[1] % w.shape[0] == 0:
                groups = counts["groups"] = x.shape[1] // w.shape[0]
            counts.update(in_channels=counts.get("in_channels", w.shape[0] * groups), out_channels=w.shape[1])
        if dy is not None:
            counts.update(batch=dy.shape[0], out_channels=dy.shape[1])
    if w is not None and not depthwise:
        counts["groups"] = groups  # the weight's shape holds the groups: fixed with it
    for key, value in counts.items():
        low, high = PARAMS[key][1:]
        if not low <= value <= high:
            return None
    for key, value in counts.items():
        if key in explicit and params[key] != value:
            raise ValueError(f"{key}: your arrays have {value}, got {key}={params[key]}")
    return panels_of, counts


def _check_whole_shapes(panels_of: dict[str, np.ndarray], arrays: dict[str, np.ndarray], op: str,
                        data_format: str, params: dict[str, Any]) -> None:
    """Each whole tensor has the shape its role takes in the setting (``ValueError`` naming it)."""
    shapes = role_shapes(params)
    roles = _roles(op)
    for name, panel in panels_of.items():
        expected = shapes[roles[name]] if shapes else None
        if expected is not None and panel.shape != expected:
            # the panel's shape in the user's layout: _whole_tensors' steps undone
            want = to_layout(np.broadcast_to(0.0, expected), roles[name], op == TRANSPOSED)
            if _nchw_activation(name, op, data_format):
                want = want.transpose(0, 3, 1, 2)
            raise ValueError(f"{name} must have shape {want.shape} ({_layout_name(name, op, data_format)}) in "
                             f"this setting (channels, groups, sizes and padding), got {arrays[name].shape}")


def _check_fits(params: dict[str, Any]) -> None:
    """``ValueError`` when no window of the setting's kernel fits its padded input."""
    g = build_geometry(params)
    if 0 in g.output_hw:
        (eh, ew), pr, pc = g.effective_kernel_hw, g.rows.padded_size, g.cols.padded_size
        raise ValueError(f"kernel: no window fits: the {eh}x{ew} effective kernel is larger than the "
                         f"{pr}x{pc} padded input")


def resolve(x: Any = None, W: Any = None, dy: Any = None, *, op: str | None = None, input: Any = None,
            kernel: Any = None, stride: Any = None, dilation: Any = None, padding: str | None = None,
            pads: Any = None, output_padding: Any = None, in_channels: int | None = None,
            out_channels: int | None = None, groups: int | None = None, multiplier: int | None = None,
            batch: int | None = None, seed: int | None = None, symbols: str | None = None,
            practice: str | None = None,
            values: str | None = None, theme: str | None = None, data_format: str = "NHWC",
            channel: Any = None) -> Resolved:
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
    explicit = {key for key, value in (("in_channels", in_channels), ("out_channels", out_channels),
                                       ("groups", groups), ("multiplier", multiplier), ("batch", batch))
                if value is not None}
    channels = None if channel is None else _channels(channel)
    resolved = Resolved(params)
    arrays = {name: _numbers(name, array) for name, array in (("x", x), ("W", W), ("dy", dy)) if array is not None}
    if op is None:
        op = ("conv2d" if "x" in arrays and "W" in arrays and "dy" not in arrays
              else "depthwise_conv2d_native_backprop_filter" if "x" in arrays and "dy" in arrays
              else params["op"])
    params["op"] = op = check_param("op", op)
    whole = _whole_tensors(arrays, op, data_format, params, explicit) if arrays and channels is None else None
    if whole is None and op == TRANSPOSED and arrays:
        raise ValueError("conv_transpose2d: x and W must be whole tensors the explorer can show (at most 4 "
                         "channels, 2 images; PyTorch's layouts), with no channel argument; got shapes "
                         f"{ {name: a.shape for name, a in arrays.items()} }")
    if whole is not None:
        panels_of, counts = whole
        params.update(counts)
        resolved.locked.extend(counts)
        roles = _roles(op)
        panel_names = panels(op)
        for name, panel in panels_of.items():
            a = arrays[name]
            key = panel_names[roles[name]]
            resolved.given[key] = _finite(name, panel, a.shape)
            resolved.captions[key] = (f"your {name}, {a.shape[0]}\u00d7{a.shape[1]}" if a.ndim == 2 else
                                      f"your {name}, a {a.shape} {_layout_name(name, op, data_format)} array")
    else:
        for name, a in arrays.items():
            plane, caption = _plane(name, a, data_format, channels or (0, 0))
            key = name.lower()
            resolved.given[key], resolved.captions[key] = plane, caption
    for key, panel in resolved.given.items():
        if key in ("x", "w"):
            size_names = ("input_h", "input_w") if key == "x" else ("kernel_h", "kernel_w")
            name = "x" if key == "x" else "W"
            for size_name, size in zip(size_names, panel.shape[-2:]):
                spec = PARAMS[size_name]
                if not spec[1] <= size <= spec[2]:
                    raise ValueError(f"{name} is too large for the explorer: {size_name} must be between "
                                     f"{spec[1]} and {spec[2]}, got shape {panel.shape[-2:]}")
                params[size_name] = int(size)
            resolved.locked.extend(size_names)
    given = resolved.given
    if whole is not None:
        if op != TRANSPOSED:
            _check_fits(params)
        _check_whole_shapes(whole[0], arrays, op, data_format, params)
        return resolved
    if params["op"] == TRANSPOSED:
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
    _check_fits(params)
    return resolved
