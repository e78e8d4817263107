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

#: The op records the explorer shows, by their explorer id (``Op.explorer``).
RECORDS = {op.explorer: op for op in ops.OPS if op.explorer is not None}
#: The explorer's ops in its menu's order (``core.OPS``): the ids of :data:`RECORDS`.
OPS = ("input_grad", "depthwise_filter_grad", "forward")
#: The panel of each tensor role: as given, and as the op's result.
PANELS = {"input": ("x", "dx"), "filter": ("w", "dw"), "output": ("dy", "y")}
#: Old op names still accepted (calls, notebooks and links made before the rename), each with its name now.
OP_ALIASES = {"filter_grad": "depthwise_filter_grad"}
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
    "op": ("input_grad", OPS),
    "multiplier": (1, 1, 4),
    "seed": (0, 0, 99999),
    "values": ("integers", VALUE_MODES),
    "theme": ("auto", THEMES),
}
SALTS = {"x": 1, "w": 2, "dy": 3}
_INTEGER_POOL = np.array([-2.0, -1.0, 1.0, 2.0, 3.0])
_MASK = 0xFFFFFFFF


def defaults() -> dict[str, Any]:
    """Every parameter at its default.

    Examples
    --------
    >>> defaults()["op"], defaults()["input_h"]
    ('input_grad', 6)
    """
    return {name: spec[0] for name, spec in PARAMS.items()}


def check_param(name: str, value: Any) -> Any:
    """Return ``value`` if it is valid for parameter ``name``, else raise naming both.

    Examples
    --------
    >>> check_param("stride_h", 2)
    2
    >>> check_param("op", "depthwise_filter_grad")
    'depthwise_filter_grad'
    >>> check_param("padding", "same")
    Traceback (most recent call last):
    ...
    ValueError: padding must be one of ('SAME', 'VALID', 'EXPLICIT'), got 'same'
    """
    if name not in PARAMS:
        raise TypeError(f"unknown explorer parameter {name!r}; expected one of {tuple(PARAMS)}")
    if name == "op" and isinstance(value, str) and value in OP_ALIASES:
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
                  f"and the old name would clash with a dense filter gradient", DeprecationWarning,
                  stacklevel=level)


def setting_key(params: dict[str, Any]) -> str:
    """The key naming a setting's numbers (``core.settingKey``): every parameter but the theme."""
    return ";".join(f"{name}={params[name]}" for name in PARAMS if name != "theme")


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


def example_tensor(seed: int, salt: int, rows: int, cols: int, channels: int, mode: str) -> np.ndarray:
    """Example numbers ``[channels, rows, cols]`` (``core.exampleTensor``).

    Examples
    --------
    >>> example_tensor(0, 2, 2, 3, 1, "integers").shape
    (1, 2, 3)
    """
    h = hash32(seed, salt, np.arange(rows * cols * channels))
    if mode == "decimals":
        k = (h % np.uint64(18)).astype(np.int64)
        values = np.where(k < 9, k - 9, k - 8) / 10
    else:
        values = _INTEGER_POOL[(h % np.uint64(5)).astype(np.int64)]
    return values.reshape(channels, rows, cols)


@dataclass(frozen=True)
class Computed:
    """One setting's numbers: geometry, the op's input planes and its output ``[channels, rows, cols]``."""

    geometry: ConvGeometry
    inputs: dict[str, np.ndarray]
    output_panel: str
    output: np.ndarray
    source: str


def build_geometry(params: dict[str, Any]) -> ConvGeometry:
    """The :class:`~convviz.geometry.ConvGeometry` of a setting (one channel, or the multiplier's)."""
    p = params
    depthwise = RECORDS[p["op"]].depthwise
    multiplier = p["multiplier"] if depthwise else 1
    return ConvGeometry.build(
        batch=1, input_hw=(p["input_h"], p["input_w"]), in_channels=1, out_channels=multiplier,
        kernel_hw=(p["kernel_h"], p["kernel_w"]), strides=(p["stride_h"], p["stride_w"]),
        dilations=(p["dilation_h"], p["dilation_w"]), padding=p["padding"],
        explicit_paddings=(p["pad_top"], p["pad_bottom"], p["pad_left"], p["pad_right"]),
        depthwise=depthwise)


def input_shapes(params: dict[str, Any], g: ConvGeometry) -> dict[str, tuple[int, int, int]]:
    """``{panel: (rows, cols, channels)}`` of the op's inputs (``core.inputShapes``): its
    record's tensors, each in its role's panel; the output's channels are the multiplier's."""
    shapes = {"input": (*g.input_hw, 1), "filter": (*g.kernel_hw, 1), "output": (*g.output_hw, g.multiplier)}
    record = RECORDS[params["op"]]
    return {PANELS[ROLES[name]][0]: shapes[ROLES[name]] for name in record.tensors}


def _as_tensor(plane: np.ndarray, role: str) -> np.ndarray:
    """A ``[channels, rows, cols]`` panel as the op's 4-D tensor: one image (NHWC) or a
    filter [KH, KW, 1, channels]."""
    return plane.transpose(1, 2, 0)[None] if role != "filter" else plane.transpose(1, 2, 0)[:, :, None, :]


def compute(params: dict[str, Any], given: dict[str, np.ndarray] | None = None) -> Computed | None:
    """The setting's numbers from the convviz kernels (``None`` when no window fits).

    ``given`` maps panel names to ``[channels, rows, cols]`` arrays used in place of
    the example numbers where their shape fits (as the page does).

    Examples
    --------
    >>> c = compute(defaults())
    >>> c.output_panel, c.output.shape
    ('dx', (1, 6, 6))
    """
    g = build_geometry(params)
    if 0 in g.output_hw:
        return None
    given = given or {}
    inputs = {}
    for name, (r, c, ch) in input_shapes(params, g).items():
        array = given.get(name)
        if array is not None and array.shape == (ch, r, c):
            inputs[name] = np.asarray(array, dtype=np.float64)
        else:
            inputs[name] = example_tensor(params["seed"], SALTS[name], r, c, ch, params["values"])
    p = params
    strides, dilations = [1, p["stride_h"], p["stride_w"], 1], [1, p["dilation_h"], p["dilation_w"], 1]
    explicit = ([0, 0, p["pad_top"], p["pad_bottom"], p["pad_left"], p["pad_right"], 0, 0]
                if p["padding"] == "EXPLICIT" else [])
    record = RECORDS[p["op"]]
    shapes = {"input": [1, *g.input_hw, 1], "filter": [*g.kernel_hw, 1, g.multiplier]}
    args = [shapes[ROLES[name]] if name.endswith("_sizes") else _as_tensor(inputs[PANELS[ROLES[name]][0]], ROLES[name])
            for name in record.args]
    result = record.run(*args, strides, p["padding"], explicit, "NHWC", dilations, None)
    plane = result[:, :, 0, :] if record.result_role == "filter" else result[0]  # [rows, cols, channels]
    return Computed(g, inputs, PANELS[record.result_role][1], plane.transpose(2, 0, 1),
                    f"convviz.{record.name} (float64)")


def to_wire(array: np.ndarray, caption: str = "") -> dict[str, Any]:
    """A ``[channels, rows, cols]`` array as the explorer's JSON tensor."""
    ch, r, c = array.shape
    out = {"rows": int(r), "cols": int(c), "channels": int(ch),
           "data": [float(v) for v in np.asarray(array, dtype=np.float64).ravel()]}
    if caption:
        out["caption"] = caption
    return out
