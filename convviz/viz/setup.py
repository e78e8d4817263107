"""A small convolution to draw: its parameters, its numbers, and their gradients.

Every figure, animation and widget in convviz starts from a :class:`Setup`.  Its
geometry comes from :mod:`convviz.geometry` and its gradients from the same
kernels as :func:`convviz.conv2d_backprop_input` and
:func:`convviz.depthwise_conv2d_native_backprop_filter`, so a picture shows
exactly what the library computes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from .. import ops
from .._validate import InvalidArgumentError
from ..geometry import DATA_FORMATS, PADDINGS, ConvGeometry

__all__ = ["Setup"]

# Small, non-zero integers: sums stay exact in float64 and numbers stay readable.
_FILTER_VALUES = np.array([-2.0, -1.0, 1.0, 2.0, 3.0])
_GRADIENT_VALUES = np.array([-2.0, -1.0, 1.0, 2.0, 3.0])


def _pair(value: Any, name: str) -> tuple[int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value), int(value)
    try:
        first, second = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an int or a pair of ints, got {value!r}") from None
    for v in (first, second):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an int or a pair of ints, got {value!r}")
    return int(first), int(second)


@dataclass(frozen=True)
class Setup:
    """A convolution small enough to draw, with deterministic example numbers.

    Parameters
    ----------
    input_hw : int or (int, int)
        Input height and width.
    kernel_hw : int or (int, int)
        Kernel height and width (taps, before dilation).
    strides, dilations : int or (int, int)
        Per-axis stride and dilation.
    padding : {"VALID", "SAME", "EXPLICIT"}
        TensorFlow padding; with "EXPLICIT", ``pads`` gives (top, bottom, left, right).
    pads : (int, int, int, int)
        Explicit padding, used only with ``padding="EXPLICIT"``.
    in_channels, out_channels : int
        Channels of the convolution (``out_channels`` is ignored by depthwise views,
        which use ``in_channels * multiplier``).
    multiplier : int
        Depthwise channel multiplier.
    batch : int
        Batch size.
    data_format : {"NHWC", "NCHW"}
        Layout of the arrays handed to the kernels (the pictures do not change).
    seed : int
        Seed of the example numbers.
    values : {"integers", "normal"}
        Small non-zero integers (readable, exact sums) or standard normal values.

    Examples
    --------
    >>> from convviz.viz import Setup
    >>> s = Setup(input_hw=5, kernel_hw=3, strides=2, padding="SAME")
    >>> s.geometry.output_hw, s.geometry.pads
    ((3, 3), (1, 1, 1, 1))
    >>> s.input_gradient().shape
    (1, 5, 5, 1)
    """

    input_hw: tuple[int, int] = (8, 8)
    kernel_hw: tuple[int, int] = (3, 3)
    strides: tuple[int, int] = (1, 1)
    dilations: tuple[int, int] = (1, 1)
    padding: str = "VALID"
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    in_channels: int = 1
    out_channels: int = 1
    multiplier: int = 1
    batch: int = 1
    data_format: str = "NHWC"
    seed: int = 0
    values: str = "integers"

    def __post_init__(self) -> None:
        for name in ("input_hw", "kernel_hw", "strides", "dilations"):
            object.__setattr__(self, name, _pair(getattr(self, name), name))
        pads = tuple(self.pads)
        if len(pads) != 4 or any(isinstance(p, bool) or not isinstance(p, (int, np.integer)) for p in pads):
            raise TypeError(f"pads must be 4 ints (top, bottom, left, right), got {self.pads!r}")
        object.__setattr__(self, "pads", tuple(int(p) for p in pads))
        if self.padding not in PADDINGS:
            raise InvalidArgumentError(f"padding must be one of {PADDINGS}, got {self.padding!r}")
        if self.data_format not in DATA_FORMATS:
            raise InvalidArgumentError(f"data_format must be one of {DATA_FORMATS}, got {self.data_format!r}")
        if self.values not in ("integers", "normal"):
            raise InvalidArgumentError(f"values must be 'integers' or 'normal', got {self.values!r}")
        checks = [("input_hw", self.input_hw, 1), ("kernel_hw", self.kernel_hw, 1), ("strides", self.strides, 1),
                  ("dilations", self.dilations, 1), ("pads", self.pads, 0)]
        for name, values, low in checks:
            if min(values) < low:
                raise InvalidArgumentError(f"{name} must be at least {low}, got {values}")
        for name in ("in_channels", "out_channels", "multiplier", "batch"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"{name} must be at least 1, got {getattr(self, name)}")
        g = self.geometry
        if 0 in g.output_hw:
            raise InvalidArgumentError(
                f"no window fits: the {g.effective_kernel_hw[0]}x{g.effective_kernel_hw[1]} effective kernel "
                f"is larger than the {g.rows.padded_size}x{g.cols.padded_size} padded input, so the output "
                f"(and its gradient) is empty")

    def replace(self, **changes: Any) -> Setup:
        """A copy with some parameters changed."""
        return replace(self, **changes)

    # -- geometry ---------------------------------------------------------------
    def _build(self, depthwise: bool) -> ConvGeometry:
        return ConvGeometry.build(
            batch=self.batch, input_hw=self.input_hw, in_channels=self.in_channels,
            out_channels=self.in_channels * self.multiplier if depthwise else self.out_channels,
            kernel_hw=self.kernel_hw, strides=self.strides, dilations=self.dilations, padding=self.padding,
            explicit_paddings=self.pads, depthwise=depthwise, data_format=self.data_format)

    @cached_property
    def geometry(self) -> ConvGeometry:
        """The (ordinary) convolution's geometry."""
        return self._build(depthwise=False)

    @cached_property
    def depthwise_geometry(self) -> ConvGeometry:
        """The depthwise convolution's geometry (``in_channels * multiplier`` outputs)."""
        return self._build(depthwise=True)

    def describe(self) -> str:
        """One line stating the parameters, for titles."""
        g = self.geometry
        kh, kw = self.kernel_hw
        parts = [f"input {self.input_hw[0]}x{self.input_hw[1]}", f"kernel {kh}x{kw}"]
        parts.append(f"stride {self._axes(self.strides)}")
        if self.dilations != (1, 1):
            parts.append(f"dilation {self._axes(self.dilations)}")
        top, bottom, left, right = g.pads
        pad = self.padding if not any(g.pads) else f"{self.padding} (pads t{top} b{bottom} l{left} r{right})"
        parts.append(pad)
        return ", ".join(parts)

    @staticmethod
    def _axes(pair: tuple[int, int]) -> str:
        return str(pair[0]) if pair[0] == pair[1] else f"{pair[0]}x{pair[1]}"

    # -- numbers ----------------------------------------------------------------
    def _draw(self, shape: tuple[int, ...], pool: np.ndarray, salt: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, salt])
        if self.values == "integers":
            return rng.choice(pool, size=shape)
        return rng.standard_normal(shape)

    def _layout(self, nhwc: np.ndarray) -> np.ndarray:
        return nhwc if self.data_format == "NHWC" else np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))

    def filter(self) -> np.ndarray:
        """The convolution filter, HWIO ``[KH, KW, in_channels, out_channels]``."""
        return self._draw(self.geometry.filter_shape, _FILTER_VALUES, 1)

    def out_backprop(self, depthwise: bool = False) -> np.ndarray:
        """The output gradient dL/dy, in ``data_format`` order."""
        g = self.depthwise_geometry if depthwise else self.geometry
        n, h, w, c = g.batch, *g.output_hw, g.out_channels
        return self._layout(self._draw((n, h, w, c), _GRADIENT_VALUES, 2 + depthwise))

    def input(self) -> np.ndarray:
        """The convolution's input x (for the filter gradient), in ``data_format`` order."""
        n, (h, w), c = self.batch, self.input_hw, self.in_channels
        return self._layout(self._draw((n, h, w, c), _FILTER_VALUES, 4))

    def _strides4(self, pair: tuple[int, int]) -> list[int]:
        return [1, *pair, 1] if self.data_format == "NHWC" else [1, 1, *pair]

    def _op_kwargs(self) -> dict[str, Any]:
        top, bottom, left, right = self.pads
        explicit: list[int] = []
        if self.padding == "EXPLICIT":
            explicit = ([0, 0, top, bottom, left, right, 0, 0] if self.data_format == "NHWC"
                        else [0, 0, 0, 0, top, bottom, left, right])
        return dict(strides=self._strides4(self.strides), padding=self.padding, explicit_paddings=explicit,
                    data_format=self.data_format, dilations=self._strides4(self.dilations))

    def input_gradient(self, out_backprop: np.ndarray | None = None) -> np.ndarray:
        """dL/dx from the convviz kernel (``data_format`` order), for the setup's or a given dL/dy."""
        dy = self.out_backprop() if out_backprop is None else out_backprop
        return ops.conv2d_backprop_input(list(self.geometry.input_shape), self.filter(), dy, **self._op_kwargs())

    def filter_gradient(self) -> np.ndarray:
        """dL/dW of the depthwise convolution ``[KH, KW, C, M]``, from the convviz kernel."""
        sizes = [*self.kernel_hw, self.in_channels, self.multiplier]
        return ops.depthwise_conv2d_native_backprop_filter(
            self.input(), sizes, self.out_backprop(depthwise=True), **self._op_kwargs())

    # -- 2-D slices, whatever the layout -------------------------------------------
    def plane(self, array: np.ndarray, batch: int = 0, channel: int = 0, name: str = "channel") -> np.ndarray:
        """The ``[H, W]`` plane of a 4-D array in this setup's ``data_format``.

        ``name`` is the caller's argument for ``channel``, for the error message.

        Examples
        --------
        >>> s = Setup(input_hw=4, in_channels=2)
        >>> s.plane(s.input(), channel=1).shape
        (4, 4)
        >>> s.plane(s.input(), channel=2)
        Traceback (most recent call last):
        ...
        IndexError: channel must be in [0, 2) for this array of shape (1, 4, 4, 2) (NHWC), got 2
        """
        channels = array.shape[3] if self.data_format == "NHWC" else array.shape[1]
        where = f"for this array of shape {array.shape} ({self.data_format})"
        check_index("batch", batch, array.shape[0], where)
        check_index(name, channel, channels, where)
        return array[batch, :, :, channel] if self.data_format == "NHWC" else array[batch, channel]

    def kernel_plane(self, in_channel: int = 0, out_channel: int = 0) -> np.ndarray:
        """The ``[KH, KW]`` filter taps from ``in_channel`` to ``out_channel``."""
        w = self.filter()
        check_index("in_channel", in_channel, w.shape[2], f"for this filter of shape {w.shape} (HWIO)")
        check_index("out_channel", out_channel, w.shape[3], f"for this filter of shape {w.shape} (HWIO)")
        return w[:, :, in_channel, out_channel]

    def check_depthwise_channel(self, channel: int, multiplier: int) -> None:
        """Refuse a depthwise (channel, multiplier) pair this setup does not have."""
        check_index("channel", channel, self.in_channels, f"for this setup ({self.in_channels} input channels)")
        check_index("multiplier", multiplier, self.multiplier, f"for this setup (channel multiplier {self.multiplier})")

    def filter_gradient_plane(self, channel: int = 0, multiplier: int = 0) -> np.ndarray:
        """The ``[KH, KW]`` depthwise filter gradient of ``channel`` and its ``multiplier``-th output."""
        self.check_depthwise_channel(channel, multiplier)
        return self.filter_gradient()[:, :, channel, multiplier]


def check_index(name: str, value: Any, size: int, where: str) -> int:
    """Refuse an index outside ``[0, size)`` (NumPy would wrap a negative one silently)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not 0 <= value < size:
        raise IndexError(f"{name} must be in [0, {size}) {where}, got {value}")
    return int(value)
