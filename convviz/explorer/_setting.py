"""The explorer's parameters, example numbers and kernel computation, in Python.

This mirrors ``core.js`` (tested against it): the same parameter table, the same
32-bit hash for the example numbers, the same key naming a setting.  The numbers
an explorer shows in Jupyter come from :func:`compute`, which calls the convviz
kernels; the geometry comes from :mod:`convviz.geometry`.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from types import FrameType
from typing import Any

import numpy as np

from .. import ops
from ..geometry import ConvGeometry
from ..ops._op import ROLES
from ..ops.transpose import transposed_output_size

#: The op records the explorer shows, by public name: every op of :data:`convviz.ops.OPS`.
RECORDS = {op.name: op for op in ops.OPS}
#: The transposed convolution (PyTorch's arguments), the input gradient of the convolution going the other way.
TRANSPOSED = "conv_transpose2d"
#: The explorer's modes in its menu's order (``core.OPS``): every op, by its public function's name.
OPS = (*RECORDS, TRANSPOSED)
ROLE_NAMES = ("input", "filter", "output")


@dataclass(frozen=True)
class Mode:
    """What the explorer needs of an op (``core.OP_RECORDS``): the roles of its two given
    tensors in its arguments' order, the role it returns, depthwise, transposed."""

    given: tuple[str, str]
    result: str
    depthwise: bool
    transposed: bool


#: Each mode's roles, from the op records (``core.OP_RECORDS`` is held equal to it).
MODES = {name: Mode(tuple(ROLES[t] for t in op.tensors), op.result_role, op.depthwise, False)  # type: ignore[arg-type]
         for name, op in RECORDS.items()}
MODES[TRANSPOSED] = Mode(("output", "filter"), "input", False, True)
#: The first explorer's short names, still accepted (calls, notebooks and links), each with its op.
OP_ALIASES = {alias: op.name for op in ops.OPS for alias in op.explorer_aliases}
#: Short names that warn: ``filter_grad`` would clash with the dense filter gradient.
DEPRECATED_ALIASES = ("filter_grad",)
GIVEN_PANELS = {"input": "x", "filter": "w", "output": "dy"}
RESULT_PANELS = {"input": "dx", "filter": "dw", "output": "y"}
TRANSPOSED_PANELS = {"output": "x", "filter": "w", "input": "y"}
PADDINGS = ("SAME", "VALID", "EXPLICIT")
VALUE_MODES = ("integers", "decimals")
THEMES = ("auto", "light", "dark")

#: name -> (default, low, high) for integers, (default, choices) for choices; core.js PARAMS order.
PARAMS: dict[str, tuple] = {
    "input_h": (6, 1, 32), "input_w": (6, 1, 32),
    "kernel_h": (3, 1, 9), "kernel_w": (3, 1, 9),
    "stride_h": (2, 1, 6), "stride_w": (2, 1, 6),
    "dilation_h": (1, 1, 6), "dilation_w": (1, 1, 6),
    "padding": ("SAME", PADDINGS),
    "pad_top": (0, 0, 8), "pad_bottom": (0, 0, 8), "pad_left": (0, 0, 8), "pad_right": (0, 0, 8),
    "output_padding_h": (0, 0, 5), "output_padding_w": (0, 0, 5),
    "op": ("conv2d_backprop_input", OPS),
    "in_channels": (1, 1, 4), "out_channels": (1, 1, 4), "groups": (1, 1, 4), "multiplier": (1, 1, 4),
    "batch": (1, 1, 2),
    "seed": (0, 0, 99999),
    "values": ("integers", VALUE_MODES),
    "symbols": ("off", ("off", "on")),
    "practice": ("off", ("off", "on")),
    "theme": ("auto", THEMES),
}


def panels(op: str) -> dict[str, str]:
    """``{role: panel}`` of an op (``core.opPanels``): given x, w, dy; results dx, dw, y;
    a transposed convolution's input x, weight w and output y.

    Examples
    --------
    >>> panels("conv2d_backprop_input")
    {'input': 'dx', 'filter': 'w', 'output': 'dy'}
    """
    mode = MODES[op]
    if mode.transposed:
        return dict(TRANSPOSED_PANELS)
    return {role: (RESULT_PANELS if role == mode.result else GIVEN_PANELS)[role] for role in ROLE_NAMES}


SALTS = {"x": 1, "w": 2, "dy": 3}
_INTEGER_POOL = np.array([-2.0, -1.0, 1.0, 2.0, 3.0])
_MASK = 0xFFFFFFFF


def defaults() -> dict[str, Any]:
    """Every parameter at its default.

    Examples
    --------
    >>> defaults()["op"], defaults()["input_h"]
    ('conv2d_backprop_input', 6)
    """
    return {name: spec[0] for name, spec in PARAMS.items()}


def check_param(name: str, value: Any) -> Any:
    """Return ``value`` if it is valid for parameter ``name``, else raise naming both.

    Examples
    --------
    >>> check_param("stride_h", 2)
    2
    >>> check_param("op", "depthwise_filter_grad")
    'depthwise_conv2d_native_backprop_filter'
    >>> check_param("padding", "same")
    Traceback (most recent call last):
    ...
    ValueError: padding must be one of ('SAME', 'VALID', 'EXPLICIT'), got 'same'
    """
    if name not in PARAMS:
        raise TypeError(f"unknown explorer parameter {name!r}; expected one of {tuple(PARAMS)}")
    if name == "op" and isinstance(value, str) and value in OP_ALIASES:
        if value in DEPRECATED_ALIASES:
            _warn_old_op(value)
        value = OP_ALIASES[value]
    spec = PARAMS[name]
    if len(spec) == 2:
        if value not in spec[1]:
            raise ValueError(f"{name} must be one of {spec[1]}, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not spec[1] <= value <= spec[2]:
        raise ValueError(f"{name} must be between {spec[1]} and {spec[2]}, got {value}")
    return int(value)


def _warn_old_op(old: str) -> None:
    """DeprecationWarning for an old op name, pointing at the first caller outside the explorer (and the
    widget machinery that validates traits), so that a notebook or script sees it."""
    inside = ("convviz.explorer", "traitlets", "anywidget", "ipywidgets")
    frame: FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith(inside):
        frame, level = frame.f_back, level + 1
    warnings.warn(f"op={old!r} is deprecated, use op={OP_ALIASES[old]!r}: it is the depthwise filter gradient, "
                  f"and the old name would clash with the dense filter gradient", DeprecationWarning,
                  stacklevel=level)


def normalize(params: dict[str, Any]) -> dict[str, Any]:
    """Every parameter (defaults for the missing ones); a transposed convolution's padding is
    PyTorch's, the same on both sides of an axis (``core.normalize``).

    Examples
    --------
    >>> p = normalize({"op": "conv_transpose2d", "pad_top": 1, "pad_bottom": 3})
    >>> p["padding"], p["pad_top"], p["pad_bottom"]
    ('EXPLICIT', 1, 1)
    """
    p = defaults()
    p.update({name: value for name, value in params.items() if name in PARAMS})
    if p["op"] in OP_ALIASES:
        p["op"] = OP_ALIASES[p["op"]]
    if MODES[p["op"]].transposed:
        p.update(padding="EXPLICIT", pad_bottom=p["pad_top"], pad_right=p["pad_left"])
    return p


#: Parameters that change how the numbers are shown, never the numbers (``core.VIEW_ONLY``).
VIEW_ONLY = ("symbols", "practice", "theme")


def setting_key(params: dict[str, Any]) -> str:
    """The key naming a setting's numbers (``core.settingKey``): every parameter but the view-only ones."""
    p = normalize(params)
    return ";".join(f"{name}={p[name]}" for name in PARAMS if name not in VIEW_ONLY)


def hash32(seed: int, salt: int, index: np.ndarray) -> np.ndarray:
    """``core.hash32`` over an array of indices (uint64 holding 32-bit values)."""
    i = np.asarray(index, dtype=np.uint64)
    m = np.uint64(_MASK)

    def imul(a, b):
        return (a * np.uint64(b)) & m

    h = (np.uint64(((seed ^ 0x9E3779B9) * 0x85EBCA6B) & _MASK) ^ np.uint64(((salt + 1) * 0xC2B2AE35) & _MASK)
         ^ imul(i + np.uint64(1), 0x27D4EB2F))
    h ^= h >> np.uint64(16)
    h = imul(h, 0x7FEB352D)
    h ^= h >> np.uint64(15)
    h = imul(h, 0x846CA68B)
    h ^= h >> np.uint64(16)
    return h


def example_tensor(seed: int, salt: int, rows: int, cols: int, channels: int, mode: str,
                   batch: int = 1) -> np.ndarray:
    """Example numbers ``[batch, channels, rows, cols]`` (``core.exampleTensor``).

    Examples
    --------
    >>> example_tensor(0, 2, 2, 3, 1, "integers").shape
    (1, 1, 2, 3)
    """
    h = hash32(seed, salt, np.arange(rows * cols * channels * batch))
    if mode == "decimals":
        k = (h % np.uint64(18)).astype(np.int64)
        values = np.where(k < 9, k - 9, k - 8) / 10
    else:
        values = _INTEGER_POOL[(h % np.uint64(5)).astype(np.int64)]
    return values.reshape(batch, channels, rows, cols)


@dataclass(frozen=True)
class Channels:
    """A setting's channels (``core.channelGeometry``): the convolution's input and output
    channels (a transposed convolution's the other way round), groups, multiplier."""

    batch: int
    conv_in: int
    conv_out: int
    groups: int
    multiplier: int
    depthwise: bool

    @property
    def in_per_group(self) -> int:
        return self.conv_in // self.groups


def channels_of(params: dict[str, Any]) -> Channels:
    """The setting's :class:`Channels`; ``ValueError`` when groups do not divide the channels."""
    p = normalize(params)
    mode = MODES[p["op"]]
    if mode.depthwise:
        c, m = p["in_channels"], p["multiplier"]
        return Channels(p["batch"], c, c * m, c, m, True)
    groups = p["groups"]
    if p["in_channels"] % groups or p["out_channels"] % groups:
        raise ValueError(f"groups must divide in_channels and out_channels: groups {groups}, in_channels "
                         f"{p['in_channels']}, out_channels {p['out_channels']}")
    conv_in, conv_out = ((p["out_channels"], p["in_channels"]) if mode.transposed
                         else (p["in_channels"], p["out_channels"]))
    return Channels(p["batch"], conv_in, conv_out, groups, 1, False)


@dataclass(frozen=True)
class Computed:
    """One setting's numbers: its panels ``[a, b, rows, cols]`` (given and result), the
    result's panel, the same tensors in the op's own layout (as convviz takes and returns
    them), and where the numbers come from."""

    inputs: dict[str, np.ndarray]
    output_panel: str
    output: np.ndarray
    arrays: dict[str, np.ndarray]
    source: str


def build_geometry(params: dict[str, Any]) -> ConvGeometry:
    """The :class:`~convviz.geometry.ConvGeometry` of a setting's convolution (not of a transposed one:
    see :func:`transposed_sizes`)."""
    p = normalize(params)
    if MODES[p["op"]].transposed:
        raise ValueError("conv_transpose2d's geometry is that of the convolution it transposes: see transposed_sizes")
    ch = channels_of(p)
    return ConvGeometry.build(
        batch=ch.batch, input_hw=(p["input_h"], p["input_w"]), in_channels=ch.conv_in, out_channels=ch.conv_out,
        kernel_hw=(p["kernel_h"], p["kernel_w"]), strides=(p["stride_h"], p["stride_w"]),
        dilations=(p["dilation_h"], p["dilation_w"]), padding=p["padding"],
        explicit_paddings=(p["pad_top"], p["pad_bottom"], p["pad_left"], p["pad_right"]),
        groups=ch.groups, depthwise=ch.depthwise)


def transposed_sizes(params: dict[str, Any]) -> tuple[int, int]:
    """A transposed convolution's output ``(rows, cols)`` (PyTorch's formula)."""
    p = normalize(params)
    return tuple(transposed_output_size(p[f"input_{a}"], p[f"kernel_{a}"], p[f"stride_{a}"],
                                        p["pad_top" if a == "h" else "pad_left"], p[f"output_padding_{a}"],
                                        p[f"dilation_{a}"]) for a in "hw")  # type: ignore[return-value]


def role_shapes(params: dict[str, Any]) -> dict[str, tuple[int, int, int, int]] | None:
    """``{role: (a, b, rows, cols)}`` of the setting's three tensors as panels (``core.roleShape``),
    ``None`` when no window fits."""
    p = normalize(params)
    ch = channels_of(p)
    kernel = (p["kernel_h"], p["kernel_w"])
    if MODES[p["op"]].transposed:
        small, large = (p["input_h"], p["input_w"]), transposed_sizes(p)
    else:
        g = build_geometry(p)
        if 0 in g.output_hw:
            return None
        small, large = g.output_hw, g.input_hw
    filter_planes = (ch.conv_in, ch.multiplier) if ch.depthwise else (ch.in_per_group, ch.conv_out)
    return {"input": (ch.batch, ch.conv_in, *large), "filter": (*filter_planes, *kernel),
            "output": (ch.batch, ch.conv_out, *small)}


def input_shapes(params: dict[str, Any]) -> dict[str, tuple[int, int, int, int]]:
    """``{panel: (a, b, rows, cols)}`` of the op's given tensors (``core.inputShapes``)."""
    shapes = role_shapes(params) or {}
    op = normalize(params)["op"]
    return {panels(op)[role]: shapes[role] for role in MODES[op].given if shapes}


def to_layout(panel: np.ndarray, role: str, transposed: bool) -> np.ndarray:
    """A panel ``[a, b, rows, cols]`` as the tensor convviz takes for the op (``core.tensorIndex``):
    NHWC or HWIO / ``[kh, kw, c, m]``; NCHW or ``(C_in, C_out / groups, kH, kW)`` when transposed."""
    if transposed:
        return panel.transpose(1, 0, 2, 3) if role == "filter" else panel
    return panel.transpose(2, 3, 0, 1) if role == "filter" else panel.transpose(0, 2, 3, 1)


def from_layout(array: np.ndarray, role: str, transposed: bool) -> np.ndarray:
    """The inverse of :func:`to_layout`."""
    if transposed:
        return array.transpose(1, 0, 2, 3) if role == "filter" else array
    return array.transpose(2, 3, 0, 1) if role == "filter" else array.transpose(0, 3, 1, 2)


def compute(params: dict[str, Any], given: dict[str, np.ndarray] | None = None) -> Computed | None:
    """The setting's numbers from the convviz kernels (``None`` when no window fits).

    ``given`` maps panel names to ``[a, b, rows, cols]`` (or ``[channels, rows, cols]``)
    arrays used in place of the example numbers where their shape fits (as the page does).
    ``ValueError`` when the setting has none (groups that do not divide the channels, a
    transposed convolution's output_padding or padding too large).

    Examples
    --------
    >>> c = compute(defaults())
    >>> c.output_panel, c.output.shape
    ('dx', (1, 1, 6, 6))
    >>> compute(dict(defaults(), op="conv_transpose2d", input_h=2, input_w=2)).arrays["y"].shape
    (1, 1, 5, 5)
    """
    p = normalize(params)
    mode = MODES[p["op"]]
    if mode.transposed:
        for axis in ("h", "w"):
            extra, s, d = p[f"output_padding_{axis}"], p[f"stride_{axis}"], p[f"dilation_{axis}"]
            if extra >= max(s, d):
                raise ValueError(f"output_padding must be smaller than stride or dilation: output_padding_{axis} "
                                 f"{extra} with stride {s} and dilation {d}")
        if min(transposed_sizes(p)) < 1:
            raise ValueError(f"padding crops more than the scatter has: the output would be "
                             f"{transposed_sizes(p)} with padding ({p['pad_top']}, {p['pad_left']})")
    shapes = role_shapes(p)
    if shapes is None:
        return None
    given = given or {}
    names = panels(p["op"])
    inputs, arrays = {}, {}
    for role in mode.given:
        name = names[role]
        array = given.get(name)
        if array is not None and array.ndim == 3:
            array = array[None]
        if array is not None and array.shape == shapes[role]:
            inputs[name] = np.asarray(array, dtype=np.float64)
        else:
            a, b, r, c = shapes[role]
            inputs[name] = example_tensor(p["seed"], SALTS[name], r, c, b, p["values"], batch=a)
        arrays[name] = to_layout(inputs[name], role, mode.transposed)
    result_name = names[mode.result]
    if mode.transposed:
        result = ops.conv_transpose2d(arrays["x"], arrays["w"], stride=(p["stride_h"], p["stride_w"]),
                                      padding=(p["pad_top"], p["pad_left"]),
                                      output_padding=(p["output_padding_h"], p["output_padding_w"]),
                                      groups=p["groups"], dilation=(p["dilation_h"], p["dilation_w"]))
        record_name = TRANSPOSED
    else:
        record = RECORDS[p["op"]]
        strides, dilations = [1, p["stride_h"], p["stride_w"], 1], [1, p["dilation_h"], p["dilation_w"], 1]
        explicit = ([0, 0, p["pad_top"], p["pad_bottom"], p["pad_left"], p["pad_right"], 0, 0]
                    if p["padding"] == "EXPLICIT" else [])
        by_role = {role: arrays[names[role]] for role in mode.given}
        result_shape = list(to_layout(np.empty(shapes[mode.result]), mode.result, False).shape)
        args = [result_shape if name.endswith("_sizes") else by_role[ROLES[name]] for name in record.args]
        result = record.run(*args, strides, p["padding"], explicit, "NHWC", dilations, None)
        record_name = record.name
    arrays[result_name] = np.asarray(result)
    return Computed(inputs, result_name, from_layout(arrays[result_name], mode.result, mode.transposed), arrays,
                    f"convviz.{record_name} (float64)")


def to_wire(array: np.ndarray, caption: str = "") -> dict[str, Any]:
    """A ``[a, b, rows, cols]`` (or ``[channels, rows, cols]``) array as the explorer's JSON tensor."""
    if array.ndim == 3:
        array = array[None]
    n, ch, r, c = array.shape
    out = {"rows": int(r), "cols": int(c), "channels": int(ch), "batch": int(n),
           "data": [float(v) for v in np.asarray(array, dtype=np.float64).ravel()]}
    if caption:
        out["caption"] = caption
    return out
