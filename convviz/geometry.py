"""The arithmetic of a 2-D convolution, in one place.

Validation builds a :class:`ConvGeometry`, the kernels consume its numbers and the
figures draw them: output sizes, per-side padding, the effective (dilated)
kernel, which input cell each (output cell, tap) pair touches, the input rows
and columns that receive no gradient, and the coverage (overlap count) map.
Nothing else in convviz computes an output size or a padding split.

Conventions (TensorFlow's):

* effective kernel ``eff = (kernel - 1) * dilation + 1``;
* VALID: no padding; EXPLICIT: the given ``(before, after)`` pair;
* SAME: ``out = ceil(in / stride)``, ``need = max(0, (out - 1) * stride + eff - in)``,
  ``before = need // 2`` and the odd extra row/column goes *after*
  (bottom/right);
* VALID and EXPLICIT: ``out = (in + before + after - eff) // stride + 1``, or 0
  when the padded input is smaller than the effective kernel (no window fits);
* output ``o`` and tap ``k`` read input ``i = o * stride - before + k * dilation``;
  ``i`` outside ``[0, in)`` is padding.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, overload

import numpy as np

Padding = Literal["SAME", "VALID", "EXPLICIT"]
DataFormat = Literal["NHWC", "NCHW"]

PADDINGS: tuple[str, ...] = ("SAME", "VALID", "EXPLICIT")
DATA_FORMATS: tuple[str, ...] = ("NHWC", "NCHW")


def explicit_paddings(pads: tuple[int, int, int, int] | list[int], data_format: str = "NHWC") -> list[int]:
    """TensorFlow's 8-value ``explicit_paddings`` for per-side ``(top, bottom, left, right)``.

    A (before, after) pair per dimension in ``data_format`` order, zero for
    batch and depth: the one place that list is built.

    Examples
    --------
    >>> explicit_paddings((1, 2, 0, 3))
    [0, 0, 1, 2, 0, 3, 0, 0]
    >>> explicit_paddings((1, 2, 0, 3), "NCHW")
    [0, 0, 0, 0, 1, 2, 0, 3]
    """
    top, bottom, left, right = (int(p) for p in pads)
    if data_format == "NCHW":
        return [0, 0, 0, 0, top, bottom, left, right]
    return [0, 0, top, bottom, left, right, 0, 0]


def effective_kernel_size(kernel_size: int, dilation: int) -> int:
    """Return the extent of a dilated kernel: ``(kernel_size - 1) * dilation + 1``.

    Examples
    --------
    >>> effective_kernel_size(3, 2)
    5
    """
    return (kernel_size - 1) * dilation + 1


def same_padding(input_size: int, kernel_size: int, stride: int, dilation: int) -> tuple[int, int]:
    """Return TensorFlow's SAME padding ``(before, after)`` for one axis.

    The total is what the last window needs to fit; the odd extra cell goes
    after (bottom or right).

    Examples
    --------
    >>> same_padding(8, 3, 2, 1)   # out = 4, need = 3 * 2 + 3 - 8 = 1
    (0, 1)
    >>> same_padding(7, 3, 1, 2)   # eff = 5, need = 4
    (2, 2)
    """
    out = -(-input_size // stride)
    need = max(0, (out - 1) * stride + effective_kernel_size(kernel_size, dilation) - input_size)
    return need // 2, need - need // 2


def to_nhwc(array: np.ndarray, data_format: str) -> np.ndarray:
    """``array`` as an NHWC view (a transpose for NCHW).

    Examples
    --------
    >>> import numpy as np
    >>> to_nhwc(np.zeros((1, 3, 5, 7)), "NCHW").shape
    (1, 5, 7, 3)
    """
    return array if data_format == "NHWC" else array.transpose(0, 2, 3, 1)


def from_nhwc(array: np.ndarray, data_format: str) -> np.ndarray:
    """An NHWC ``array`` as a view in ``data_format`` order: the inverse of :func:`to_nhwc`.

    Examples
    --------
    >>> import numpy as np
    >>> nchw = np.arange(6).reshape(1, 2, 1, 3)  # 2 channels of 1 x 3 pixels
    >>> nhwc = to_nhwc(nchw, "NCHW")
    >>> nhwc[0, 0]  # 3 pixels of 2 channels
    array([[0, 3],
           [1, 4],
           [2, 5]])
    >>> np.array_equal(from_nhwc(nhwc, "NCHW"), nchw)
    True
    """
    return array if data_format == "NHWC" else array.transpose(0, 3, 1, 2)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class AxisGeometry:
    """The arithmetic of a convolution along one spatial axis.

    Parameters
    ----------
    input_size : int
        Length of the input along this axis.
    kernel_size : int
        Number of taps of the (undilated) kernel.
    stride : int
        Step between consecutive windows.
    dilation : int
        Step between consecutive taps.
    pad_before, pad_after : int
        Zero padding added before (top/left) and after (bottom/right).

    Examples
    --------
    >>> axis = AxisGeometry.from_padding(8, 3, stride=2, dilation=1, padding="SAME")
    >>> axis.output_size, axis.pad_before, axis.pad_after
    (4, 0, 1)
    >>> axis.input_index(out_index=1, tap=2)
    4
    """

    input_size: int
    kernel_size: int
    stride: int
    dilation: int
    pad_before: int
    pad_after: int

    @classmethod
    def from_padding(
        cls,
        input_size: int,
        kernel_size: int,
        stride: int,
        dilation: int,
        padding: str,
        explicit: tuple[int, int] = (0, 0),
    ) -> AxisGeometry:
        """Build the axis geometry for a padding mode ("SAME", "VALID", "EXPLICIT").

        ``explicit`` is the ``(before, after)`` pair used when padding is
        "EXPLICIT" and ignored otherwise.
        """
        if padding == "SAME":
            before, after = same_padding(input_size, kernel_size, stride, dilation)
        elif padding == "VALID":
            before, after = 0, 0
        elif padding == "EXPLICIT":
            before, after = explicit
        else:
            raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
        return cls(input_size, kernel_size, stride, dilation, before, after)

    @property
    def effective_kernel_size(self) -> int:
        """Extent of the dilated kernel, ``(kernel_size - 1) * dilation + 1``."""
        return effective_kernel_size(self.kernel_size, self.dilation)

    @property
    def padded_size(self) -> int:
        """Input length with both paddings added."""
        return self.input_size + self.pad_before + self.pad_after

    @property
    def output_size(self) -> int:
        """Number of windows, that is the output length of the forward convolution."""
        span = self.padded_size - self.effective_kernel_size
        if span < 0:
            return 0  # no window fits: the forward output (and out_backprop) is empty
        return span // self.stride + 1

    @property
    def unread_after(self) -> int:
        """Cells at the end of the padded input that no window reads.

        Positive when ``(padded - eff) % stride != 0``; the real input cells among
        them get exactly zero gradient.
        """
        if self.output_size == 0:
            return self.padded_size
        last_read = (self.output_size - 1) * self.stride + self.effective_kernel_size
        return self.padded_size - last_read

    def input_index(self, out_index: int, tap: int) -> int:
        """Input cell read by output cell ``out_index`` through tap ``tap``.

        The result may lie outside ``[0, input_size)``: that cell is padding.
        """
        return out_index * self.stride - self.pad_before + tap * self.dilation

    def output_range(self, tap: int) -> range:
        """Output cells whose window reads a real input cell through ``tap``.

        For every ``o`` in the returned range, ``input_index(o, tap)`` lies in
        ``[0, input_size)``; for every other ``o`` it is padding.  The kernels
        iterate exactly these ranges.

        Examples
        --------
        >>> AxisGeometry.from_padding(5, 3, 1, 1, "SAME").output_range(0)
        range(1, 5)
        """
        offset = tap * self.dilation - self.pad_before  # input index of output 0
        first = max(0, _ceil_div(-offset, self.stride))
        last = min(self.output_size - 1, (self.input_size - 1 - offset) // self.stride)
        return range(first, max(first, last + 1))

    def index_table(self) -> np.ndarray:
        """Array ``[output_size, kernel_size]`` of input indices (may be out of range)."""
        out = np.arange(self.output_size)[:, None]
        taps = np.arange(self.kernel_size)[None, :]
        return out * self.stride - self.pad_before + taps * self.dilation

    def coverage(self) -> np.ndarray:
        """How many (output cell, tap) pairs read each input cell (int64, ``[input_size]``)."""
        counts = np.zeros(self.input_size, dtype=np.int64)
        for tap in range(self.kernel_size):
            outs = self.output_range(tap)
            if len(outs):
                idx = np.asarray(outs) * self.stride - self.pad_before + tap * self.dilation
                counts[idx] += 1  # one tap hits each input index at most once
        return counts

    def zero_gradient_indices(self) -> np.ndarray:
        """Input cells that no window reads, so their gradient is exactly zero."""
        return np.flatnonzero(self.coverage() == 0)

    def input_phases(self) -> tuple[InputPhase, ...]:
        """The input gradient along this axis as one stride-1 convolution per stride phase.

        Input cells ``r, r + stride, r + 2 * stride, ...`` (phase ``r``) are read
        by the same taps, those with ``(r + pad_before - tap * dilation) %
        stride == 0``; with the taps last first, each phase's gradient is a
        forward convolution of the output gradient (stride 1) whose filter is
        those taps.  Every (input cell, tap, output cell) triple of the phase's
        convolution is one of this axis's, and the other way round: the kernels
        add exactly the terms of the direct sum.

        Examples
        --------
        >>> axis = AxisGeometry.from_padding(8, 3, stride=2, dilation=1, padding="SAME")
        >>> for p in axis.input_phases():  # cells 0, 2, 4, 6 take taps 2 and 0; cells 1, 3, 5, 7 tap 1
        ...     print(p.first, p.count, [0, 1, 2][p.taps], p.dilation, p.pad_before)
        0 4 [2, 0] 1 1
        1 4 [1] 1 0
        """
        phases = []
        for first in range(min(self.stride, self.input_size)):
            count = len(range(first, self.input_size, self.stride))
            # The taps that reach this phase's cells, and of those the ones through
            # which some cell reads a real output cell (a dilation far past the
            # input leaves one tap or none: the convolution stays as small as its terms).
            taps = [k for k in range(self.kernel_size)
                    if (first + self.pad_before - k * self.dilation) % self.stride == 0
                    and self.output_range(k)]  # every cell a tap reads lies in one phase
            if not taps:
                phases.append(InputPhase(first, count, None, 1, 0, 0))
                continue
            step = taps[1] - taps[0] if len(taps) > 1 else 1
            # Output cell of the phase's cell i through its tap j (taps last first):
            # i + (first + pad_before - taps[0] * dilation) / stride - (J - 1 - j) * dilation'.
            dilation = step * self.dilation // self.stride if len(taps) > 1 else 1
            offset = (first + self.pad_before - taps[0] * self.dilation) // self.stride
            pad_before = (len(taps) - 1) * dilation - offset
            last = taps[-1]
            order = slice(last, taps[0] - 1 if taps[0] > 0 else None, -step)
            # A negative padding is output cells that no cell of the phase reads: skip them.
            crop = max(0, -pad_before)
            phases.append(InputPhase(first, count, order, dilation, crop, max(0, pad_before)))
        return tuple(phases)


@dataclass(frozen=True)
class InputPhase:
    """The input cells ``first, first + stride, ...`` (``count`` of them) of one
    stride phase of an axis, and the stride-1 forward convolution of the output
    gradient that gives their gradient (:meth:`AxisGeometry.input_phases`).

    ``taps`` slices the kernel's taps in the order that convolution uses them
    (last first; ``None``: no tap reaches these cells, their gradient is zero),
    ``dilation`` is its dilation, and it reads the output gradient from cell
    ``crop`` on, with ``pad_before`` zero cells before it.
    """

    first: int
    count: int
    taps: slice | None
    dilation: int
    crop: int
    pad_before: int


class _BothAxes:
    """A read-only attribute of :class:`ConvGeometry`: the ``(rows, cols)`` pair of
    one :class:`AxisGeometry` attribute (``input_hw`` from ``input_size``, ...)."""

    def __init__(self, axis_attribute: str, doc: str) -> None:
        self.axis_attribute = axis_attribute
        self.__doc__ = doc

    @overload
    def __get__(self, geometry: None, owner: type) -> _BothAxes: ...

    @overload
    def __get__(self, geometry: ConvGeometry, owner: type) -> tuple[int, int]: ...

    def __get__(self, geometry: ConvGeometry | None, owner: type) -> _BothAxes | tuple[int, int]:
        if geometry is None:  # on the class (help(), the docs)
            return self
        return getattr(geometry.rows, self.axis_attribute), getattr(geometry.cols, self.axis_attribute)


@dataclass(frozen=True)
class ConvGeometry:
    """Everything about a 2-D convolution's shape arithmetic.

    Covers grouped convolution (``groups`` groups of ``in_channels // groups``
    inputs and ``out_channels // groups`` outputs) and depthwise convolution
    (``depthwise=True``: ``groups == in_channels``, ``out_channels == in_channels *
    multiplier``, filter ``[KH, KW, C, multiplier]``, output channel ``c * multiplier + m``).

    Build one with :meth:`build`; validation in :mod:`convviz.ops` does.

    Examples
    --------
    >>> g = ConvGeometry.build(batch=1, input_hw=(5, 5), in_channels=2, out_channels=4,
    ...                        kernel_hw=(3, 3), strides=(2, 2), dilations=(1, 1),
    ...                        padding="VALID")
    >>> g.output_hw, g.output_shape
    ((2, 2), (1, 2, 2, 4))
    >>> g.filter_shape
    (3, 3, 2, 4)
    """

    batch: int
    rows: AxisGeometry
    cols: AxisGeometry
    in_channels: int
    out_channels: int
    groups: int = 1
    depthwise: bool = False
    data_format: str = "NHWC"

    @classmethod
    def build(
        cls,
        *,
        batch: int,
        input_hw: tuple[int, int],
        in_channels: int,
        out_channels: int,
        kernel_hw: tuple[int, int],
        strides: tuple[int, int],
        dilations: tuple[int, int],
        padding: str,
        explicit_paddings: tuple[int, int, int, int] = (0, 0, 0, 0),
        groups: int = 1,
        depthwise: bool = False,
        data_format: str = "NHWC",
    ) -> ConvGeometry:
        """Build a geometry from sizes and parameters (already validated).

        ``explicit_paddings`` is ``(top, bottom, left, right)``, used only when
        ``padding == "EXPLICIT"``.
        """
        top, bottom, left, right = explicit_paddings
        rows = AxisGeometry.from_padding(
            input_hw[0], kernel_hw[0], strides[0], dilations[0], padding, (top, bottom)
        )
        cols = AxisGeometry.from_padding(
            input_hw[1], kernel_hw[1], strides[1], dilations[1], padding, (left, right)
        )
        if depthwise:
            groups = in_channels
        return cls(batch, rows, cols, in_channels, out_channels, groups, depthwise, data_format)

    # -- sizes -------------------------------------------------------------
    input_hw = _BothAxes("input_size", "Input ``(height, width)``.")
    output_hw = _BothAxes("output_size", "Output ``(height, width)``: the number of windows down and across.")
    kernel_hw = _BothAxes("kernel_size", "Taps of the (undilated) kernel ``(down, across)``.")
    strides_hw = _BothAxes("stride", "Strides ``(down, across)``.")
    dilations_hw = _BothAxes("dilation", "Dilations ``(down, across)``.")
    effective_kernel_hw = _BothAxes("effective_kernel_size", "Extent of the dilated kernel ``(down, across)``.")

    @property
    def pads(self) -> tuple[int, int, int, int]:
        """Per-side padding ``(top, bottom, left, right)``."""
        return self.rows.pad_before, self.rows.pad_after, self.cols.pad_before, self.cols.pad_after

    @property
    def multiplier(self) -> int:
        """Depthwise channel multiplier (``out_channels // in_channels``)."""
        return self.out_channels // self.in_channels if self.in_channels else 0

    def _layout(self, n: int, h: int, w: int, c: int) -> tuple[int, int, int, int]:
        return (n, h, w, c) if self.data_format == "NHWC" else (n, c, h, w)

    @property
    def input_shape(self) -> tuple[int, int, int, int]:
        """Shape of the convolution's input in ``data_format`` order."""
        return self._layout(self.batch, *self.input_hw, self.in_channels)

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        """Shape of the forward output (and of ``out_backprop``) in ``data_format`` order."""
        return self._layout(self.batch, *self.output_hw, self.out_channels)

    @property
    def filter_shape(self) -> tuple[int, int, int, int]:
        """``[KH, KW, C_in / groups, C_out]`` or, depthwise, ``[KH, KW, C, multiplier]``."""
        kh, kw = self.kernel_hw
        if self.depthwise:
            return kh, kw, self.in_channels, self.multiplier
        return kh, kw, self.in_channels // self.groups, self.out_channels

    @property
    def flops(self) -> float:
        """The multiply-adds of the convolution (and of each of its gradients) times two:
        ``2 * N * OH * OW * C_out * KH * KW * C_in / groups`` (depthwise: ``groups = C_in``).

        >>> ConvGeometry.build(batch=1, input_hw=(4, 4), in_channels=2, out_channels=3, kernel_hw=(3, 3),
        ...                    strides=(1, 1), dilations=(1, 1), padding="VALID").flops
        432.0
        """
        oh, ow = self.output_hw
        kh, kw = self.kernel_hw
        return 2.0 * self.batch * oh * ow * self.out_channels * kh * kw * (self.in_channels // max(self.groups, 1))

    def taps(self) -> Iterator[tuple[int, int, int, int, int, int]]:
        """Yield ``(oh, ow, kh, kw, ih, iw)`` for every tap that reads a real input cell
        (the terms of every sum, for the float64 references and the pictures).

        Examples
        --------
        A 3-wide input, a 2-wide kernel, VALID: each of the 2x2 output cells reads
        4 real cells.

        >>> g = ConvGeometry.build(batch=1, input_hw=(3, 3), in_channels=1, out_channels=1,
        ...                        kernel_hw=(2, 2), strides=(1, 1), dilations=(1, 1), padding="VALID")
        >>> len(list(g.taps())), next(g.taps())
        (16, (0, 0, 0, 0, 0, 0))
        """
        rows, cols = self.rows, self.cols
        for oh in range(rows.output_size):
            for kh in range(rows.kernel_size):
                ih = rows.input_index(oh, kh)
                if not 0 <= ih < rows.input_size:
                    continue
                for ow in range(cols.output_size):
                    for kw in range(cols.kernel_size):
                        iw = cols.input_index(ow, kw)
                        if 0 <= iw < cols.input_size:
                            yield oh, ow, kh, kw, ih, iw

    def group_slices(self) -> Iterator[tuple[slice, slice]]:
        """Yield the (input-channel slice, output-channel slice) of each group.

        Examples
        --------
        >>> g = ConvGeometry.build(batch=1, input_hw=(3, 3), in_channels=4, out_channels=6,
        ...                        kernel_hw=(1, 1), strides=(1, 1), dilations=(1, 1), padding="VALID",
        ...                        groups=2)
        >>> list(g.group_slices())
        [(slice(0, 2, None), slice(0, 3, None)), (slice(2, 4, None), slice(3, 6, None))]
        """
        cin_g, cout_g = self.in_channels // self.groups, self.out_channels // self.groups
        for group in range(self.groups):
            yield slice(group * cin_g, (group + 1) * cin_g), slice(group * cout_g, (group + 1) * cout_g)

    # -- what the pictures show --------------------------------------------
    def coverage(self) -> np.ndarray:
        """``[H, W]`` count of (output cell, tap) pairs that read each input cell.

        Equal to ``conv2d_backprop_input`` of an all-ones ``out_backprop`` with an
        all-ones single-channel filter.
        """
        return np.multiply.outer(self.rows.coverage(), self.cols.coverage())

    def zero_gradient_rows(self) -> np.ndarray:
        """Input rows that no window reads (their gradient is exactly zero)."""
        return self.rows.zero_gradient_indices()

    def zero_gradient_cols(self) -> np.ndarray:
        """Input columns that no window reads (their gradient is exactly zero)."""
        return self.cols.zero_gradient_indices()

    def input_cell(self, out_cell: tuple[int, int], tap: tuple[int, int]) -> tuple[int, int]:
        """Input ``(row, col)`` read by output ``out_cell`` through ``tap`` (may be padding)."""
        return (
            self.rows.input_index(out_cell[0], tap[0]),
            self.cols.input_index(out_cell[1], tap[1]),
        )

    def is_padding(self, cell: tuple[int, int]) -> bool:
        """True when ``cell`` lies in the padding, outside the real input."""
        return not (0 <= cell[0] < self.rows.input_size and 0 <= cell[1] < self.cols.input_size)
