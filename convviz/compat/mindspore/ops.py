"""``mindspore.ops.Conv2DBackpropInput``, computed by convviz.

Construction validates the attributes exactly where MindSpore documents it
(TypeError for wrong types, ValueError for wrong values); the call translates
MindSpore's weight layout ``(C_out, C_in / group, K1, K2)`` (NCHW) or
``(C_out, K1, K2, C_in / group)`` (NHWC) to TensorFlow's HWIO and runs
:func:`convviz.conv2d_backprop_input`.  Unlike MindSpore's CPU kernel, every
dtype convviz supports and both layouts work, and ``dout`` is checked against
``input_size``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import ops as _ops
from ..._validate import as_tensor
from ...errors import InvalidArgumentError
from ...geometry import explicit_paddings

__all__ = ["Conv2DBackpropInput"]

_NAME = "Conv2DBackpropInput"


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _positive_int(value: Any, name: str) -> int:
    if not _is_int(value):
        raise TypeError(f"For '{_NAME}', '{name}' must be an int, but got {type(value).__name__} {value!r}.")
    if value <= 0:
        raise ValueError(f"For '{_NAME}', '{name}' must be a positive int, but got {value}.")
    return int(value)


def _pair_or_four(value: Any, name: str, allow_four: bool) -> tuple[int, int]:
    """MindSpore's int / 2-tuple / 4-tuple (N, C, H, W) convention -> (h, w)."""
    if isinstance(value, bool) or not (_is_int(value) or isinstance(value, tuple)):
        raise TypeError(
            f"For '{_NAME}', '{name}' must be an int or a tuple, but got {type(value).__name__} {value!r}."
        )
    message = (
        f"For '{_NAME}', '{name}' must be a positive int or a tuple of two "
        f"{'or four ' if allow_four else ''}positive ints, but got {value!r}."
    )
    if _is_int(value):
        items: tuple[Any, ...] = (value, value)
    elif len(value) == 2:
        items = value
    elif len(value) == 4 and allow_four:
        if not all(_is_int(v) and v > 0 for v in value):
            raise ValueError(message)
        if value[0] != 1 or value[1] != 1:
            raise ValueError(
                f"For '{_NAME}', a 4-tuple '{name}' is (N, C, H, W) and its N and C entries "
                f"must be 1, but got {value!r}."
            )
        items = value[2:]
    else:
        raise ValueError(message)
    if not all(_is_int(v) and v > 0 for v in items):
        raise ValueError(message)
    return int(items[0]), int(items[1])


def _four_pads(value: Any, name: str) -> tuple[int, int, int, int]:
    if isinstance(value, bool) or not (_is_int(value) or isinstance(value, (tuple, list))):
        raise TypeError(f"For '{_NAME}', '{name}' must be an int or a tuple, but got {type(value).__name__} {value!r}.")
    if _is_int(value):
        value = (value,) * 4
    if len(value) != 4:
        raise ValueError(f"For '{_NAME}', '{name}' must have 4 values (top, bottom, left, right), but got {value!r}.")
    for item in value:
        if not _is_int(item):
            raise TypeError(f"For '{_NAME}', each item of '{name}' must be an int, but got {item!r}.")
    return tuple(int(v) for v in value)  # type: ignore[return-value]


class Conv2DBackpropInput:
    """Gradient of conv2d with respect to its input, MindSpore's primitive interface.

    Parameters
    ----------
    out_channel : int
        Output channels of the forward convolution, ``C_out``.
    kernel_size : int or tuple of 2 ints
        ``(K1, K2)``; an int is used for both.
    pad_mode : {"valid", "same", "pad"}, optional
        "same" splits padding as TensorFlow does (the odd extra row/column at
        the bottom/right); "pad" uses ``pad``.  Lower case, as MindSpore checks it.
    pad : int or tuple of 4 ints, optional
        ``(top, bottom, left, right)``; must be 0 unless ``pad_mode == "pad"``.
    pad_list : tuple of 4 ints, optional
        Explicit ``(top, bottom, left, right)`` padding that overrides the one
        ``pad_mode`` implies (as MindSpore's Conv2D gradient passes it).
    mode : int, optional
        Must be 1 (cross-correlation), the only mode MindSpore accepts.
    stride, dilation : int, tuple of 2 or tuple of 4 ints, optional
        A 4-tuple is ``(1, 1, H, W)``.
    group : int, optional
        Number of groups: ``C_in = weight.shape[1] * group`` (NCHW).
    data_format : {"NCHW", "NHWC"}, optional
        Layout of ``dout``, ``input_size`` and the result.

    Raises
    ------
    TypeError
        If ``kernel_size``, ``stride``, ``pad`` or ``dilation`` is neither an int
        nor a tuple, or ``out_channel`` or ``group`` is not an int.
    ValueError
        If ``kernel_size``, ``stride`` or ``dilation`` is less than 1, ``pad_mode``
        is not one of the three, ``pad`` is a tuple of length other than 4, ``pad``
        is non-zero while ``pad_mode`` is not "pad", or ``data_format`` is neither
        "NCHW" nor "NHWC".

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.compat.mindspore import ops
    >>> op = ops.Conv2DBackpropInput(out_channel=2, kernel_size=(2, 2), pad_mode="same", stride=2)
    >>> dx = op(np.ones((1, 2, 2, 2), np.float32), np.ones((2, 1, 2, 2), np.float32), (1, 1, 4, 4))
    >>> dx[0, 0]
    array([[2., 2., 2., 2.],
           [2., 2., 2., 2.],
           [2., 2., 2., 2.],
           [2., 2., 2., 2.]], dtype=float32)
    """

    def __init__(
        self,
        out_channel: int,
        kernel_size: int | tuple[int, int],
        pad_mode: str = "valid",
        pad: int | tuple[int, int, int, int] = 0,
        pad_list: tuple[int, int, int, int] | None = None,
        mode: int = 1,
        stride: int | tuple[int, ...] = 1,
        dilation: int | tuple[int, ...] = 1,
        group: int = 1,
        data_format: str = "NCHW",
    ) -> None:
        self.out_channel = _positive_int(out_channel, "out_channel")
        self.kernel_size = _pair_or_four(kernel_size, "kernel_size", allow_four=False)
        if not isinstance(data_format, str):
            raise TypeError(f"For '{_NAME}', 'data_format' must be a str, but got {type(data_format).__name__}.")
        if data_format not in ("NCHW", "NHWC"):
            raise ValueError(f"For '{_NAME}', 'data_format' must be 'NCHW' or 'NHWC', but got {data_format!r}.")
        self.data_format = data_format
        self.stride = _pair_or_four(stride, "stride", allow_four=True)
        self.dilation = _pair_or_four(dilation, "dilation", allow_four=True)
        if isinstance(pad, list):
            raise TypeError(f"For '{_NAME}', 'pad' must be an int or a tuple, but got list {pad!r}.")
        self.pad = _four_pads(pad, "pad")
        if not isinstance(pad_mode, str):
            raise TypeError(f"For '{_NAME}', 'pad_mode' must be a str, but got {type(pad_mode).__name__}.")
        if pad_mode not in ("valid", "same", "pad"):
            hint = f" (did you mean {pad_mode.lower()!r}?)" if pad_mode.lower() in ("valid", "same", "pad") else ""
            raise ValueError(
                f"For '{_NAME}', 'pad_mode' must be one of 'valid', 'same', 'pad', but got {pad_mode!r}{hint}."
            )
        self.pad_mode = pad_mode
        if self.pad_mode != "pad" and self.pad != (0, 0, 0, 0):
            raise ValueError(
                f"For '{_NAME}', 'pad' must be zero when 'pad_mode' is not \"pad\", "
                f"but got 'pad' {self.pad} and 'pad_mode' {pad_mode!r}."
            )
        if self.pad_mode == "pad" and min(self.pad) < 0:
            raise ValueError(f"For '{_NAME}', every item of 'pad' must be non-negative, but got {self.pad}.")
        if not _is_int(mode):
            raise TypeError(f"For '{_NAME}', 'mode' must be an int, but got {type(mode).__name__}.")
        if mode != 1:
            raise ValueError(f"For '{_NAME}', 'mode' must be 1 (cross-correlation), but got {mode}.")
        self.mode = 1
        self.group = _positive_int(group, "group")
        self.pad_list: tuple[int, int, int, int] | None = None
        if pad_list is not None:
            pads = _four_pads(pad_list, "pad_list")
            if min(pads) < 0:
                raise ValueError(f"For '{_NAME}', every item of 'pad_list' must be non-negative, but got {pads}.")
            self.pad_list = pads
        if self.out_channel % self.group:
            raise ValueError(
                f"For '{_NAME}', 'out_channel' ({self.out_channel}) must be divisible by 'group' ({self.group})."
            )

    def __repr__(self) -> str:
        return (
            f"Conv2DBackpropInput(out_channel={self.out_channel}, kernel_size={self.kernel_size}, "
            f"pad_mode={self.pad_mode!r}, pad={self.pad}, pad_list={self.pad_list}, mode={self.mode}, "
            f"stride={self.stride}, dilation={self.dilation}, group={self.group}, "
            f"data_format={self.data_format!r})"
        )

    def _padding(self) -> tuple[str, list[int]]:
        pads = self.pad_list if self.pad_list is not None else (self.pad if self.pad_mode == "pad" else None)
        if pads is None:
            return self.pad_mode.upper(), []
        return "EXPLICIT", explicit_paddings(pads, self.data_format)

    def _four(self, pair: tuple[int, int]) -> list[int]:
        return [1, 1, *pair] if self.data_format == "NCHW" else [1, *pair, 1]

    def __call__(self, dout: Any, weight: Any, input_size: Any) -> np.ndarray:
        """Return the input gradient, shape ``input_size``, dtype of ``dout``.

        Parameters
        ----------
        dout : array_like
            Gradient with respect to the output, ``(N, C_out, H_out, W_out)``
            (NCHW) or ``(N, H_out, W_out, C_out)`` (NHWC).
        weight : array_like
            ``(C_out, C_in / group, K1, K2)`` (NCHW) or ``(C_out, K1, K2, C_in / group)`` (NHWC).
        input_size : tuple of 4 ints
            Shape of the forward input, in ``data_format`` order.
        """
        dout_is_array = hasattr(dout, "dtype")
        dout = as_tensor(dout, "dout", _NAME, default_float=np.float32)
        weight = as_tensor(weight, "weight", _NAME, like=dout if dout_is_array else None,
                           default_float=np.float32)
        if weight.ndim != 4:
            raise InvalidArgumentError(f"For '{_NAME}', 'weight' must be 4-D, but got shape {weight.shape}.")
        if self.data_format == "NCHW":
            c_out, _, k1, k2 = weight.shape
            filter_hwio = weight.transpose(2, 3, 1, 0)
        else:
            c_out, k1, k2, _ = weight.shape
            filter_hwio = weight.transpose(1, 2, 3, 0)
        if c_out != self.out_channel:
            raise InvalidArgumentError(
                f"For '{_NAME}', weight.shape[0] must equal 'out_channel' ({self.out_channel}), "
                f"but got {c_out} (weight shape {weight.shape})."
            )
        if (k1, k2) != self.kernel_size:
            raise InvalidArgumentError(
                f"For '{_NAME}', the weight's kernel dimensions must equal 'kernel_size' "
                f"{self.kernel_size}, but got {(k1, k2)} (weight shape {weight.shape})."
            )
        sizes = input_size.tolist() if isinstance(input_size, np.ndarray) else input_size
        if isinstance(sizes, (list, tuple)) and len(sizes) == 4:
            channels = sizes[1] if self.data_format == "NCHW" else sizes[3]
            in_per_group = filter_hwio.shape[2]
            if _is_int(channels) and channels != in_per_group * self.group:
                raise InvalidArgumentError(
                    f"For '{_NAME}', the input channels in 'input_size' ({channels}) must equal "
                    f"the weight's C_in / group ({in_per_group}) times 'group' ({self.group})."
                )
        elif isinstance(sizes, (list, tuple)):
            raise InvalidArgumentError(
                f"For '{_NAME}', 'input_size' must have 4 values in {self.data_format} order, but got {sizes!r}."
            )
        padding, explicit = self._padding()
        return _ops.run_conv2d_backprop_input(
            input_size, filter_hwio, dout, self._four(self.stride), padding, explicit,
            self.data_format, self._four(self.dilation), None, op=_NAME, default_float=np.float32,
        )
