"""``mindspore.ops.Conv2D``, ``Conv2DBackpropInput`` and ``Conv2DTranspose``, computed by convviz.

Construction validates the attributes exactly where MindSpore documents it
(TypeError for wrong types, ValueError for wrong values); the call translates
MindSpore's weight layout ``(C_out, C_in / group, K1, K2)`` (NCHW) or
``(C_out, K1, K2, C_in / group)`` (NHWC) to TensorFlow's HWIO (a view) and runs
:func:`convviz.conv2d` or :func:`convviz.conv2d_backprop_input`.  Unlike
MindSpore's CPU kernels, every dtype convviz supports and both layouts work,
and ``dout`` is checked against ``input_size``.  Errors name the primitive
("For 'Conv2D', ..."), as MindSpore's do.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ... import ops as _ops
from ...ops._docs import fill_doc
from ..._validate import as_tensor
from ...errors import InvalidArgumentError
from ...geometry import explicit_paddings

__all__ = ["Conv2D", "Conv2DBackpropInput", "Conv2DTranspose"]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _positive_int(prim: str, value: Any, name: str) -> int:
    if not _is_int(value):
        raise TypeError(f"For '{prim}', '{name}' must be an int, but got {type(value).__name__} {value!r}.")
    if value <= 0:
        raise ValueError(f"For '{prim}', '{name}' must be a positive int, but got {value}.")
    return int(value)


def _pair_or_four(prim: str, value: Any, name: str, allow_four: bool) -> tuple[int, int]:
    """MindSpore's int / 2-tuple / 4-tuple (N, C, H, W) convention -> (h, w)."""
    if isinstance(value, bool) or not (_is_int(value) or isinstance(value, tuple)):
        raise TypeError(
            f"For '{prim}', '{name}' must be an int or a tuple, but got {type(value).__name__} {value!r}."
        )
    message = (
        f"For '{prim}', '{name}' must be a positive int or a tuple of two "
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
                f"For '{prim}', a 4-tuple '{name}' is (N, C, H, W) and its N and C entries "
                f"must be 1, but got {value!r}."
            )
        items = value[2:]
    else:
        raise ValueError(message)
    if not all(_is_int(v) and v > 0 for v in items):
        raise ValueError(message)
    return int(items[0]), int(items[1])


def _four_pads(prim: str, value: Any, name: str) -> tuple[int, int, int, int]:
    if isinstance(value, bool) or not (_is_int(value) or isinstance(value, (tuple, list))):
        raise TypeError(f"For '{prim}', '{name}' must be an int or a tuple, but got {type(value).__name__} {value!r}.")
    if _is_int(value):
        value = (value,) * 4
    if len(value) != 4:
        raise ValueError(f"For '{prim}', '{name}' must have 4 values (top, bottom, left, right), but got {value!r}.")
    for item in value:
        if not _is_int(item):
            raise TypeError(f"For '{prim}', each item of '{name}' must be an int, but got {item!r}.")
    return tuple(int(v) for v in value)  # type: ignore[return-value]


# What the primitives document alike: the attributes they share, and the checks of
# their constructor (``_Conv2DPrimitive.__init__``).
_DOCS = {
    "stride_dilation_group": """\
stride, dilation : int, tuple of 2 or tuple of 4 ints, optional
    A 4-tuple is ``(1, 1, H, W)``.
group : int, optional
    Number of groups: ``C_in = weight.shape[1] * group`` (NCHW).""",
    "raises": """\
Raises
------
TypeError
    If ``kernel_size``, ``stride``, ``pad`` or ``dilation`` is neither an int
    nor a tuple, or ``out_channel``, ``mode`` or ``group`` is not an int.
ValueError
    If ``kernel_size``, ``stride`` or ``dilation`` is less than 1, ``mode`` is
    not 1, ``pad_mode`` is not one of the three, ``pad`` is a tuple of length
    other than 4, ``pad`` is non-zero while ``pad_mode`` is not "pad",
    ``data_format`` is neither "NCHW" nor "NHWC", or ``out_channel`` is not a
    multiple of ``group``.""",
}


class _Conv2DPrimitive:
    """What MindSpore's 2-D convolution primitives share: their attributes, checked
    as MindSpore checks them, and the translation of the weight and the window."""

    #: The primitive's name, as MindSpore's errors give it.
    name = ""

    def _set_attributes(self, out_channel: Any, kernel_size: Any, pad_mode: Any, pad: Any, pad_list: Any,
                        mode: Any, stride: Any, dilation: Any, group: Any, data_format: Any) -> None:
        prim = self.name
        self.out_channel = _positive_int(prim, out_channel, "out_channel")
        self.kernel_size = _pair_or_four(prim, kernel_size, "kernel_size", allow_four=False)
        if not isinstance(data_format, str):
            raise TypeError(f"For '{prim}', 'data_format' must be a str, but got {type(data_format).__name__}.")
        if data_format not in ("NCHW", "NHWC"):
            raise ValueError(f"For '{prim}', 'data_format' must be 'NCHW' or 'NHWC', but got {data_format!r}.")
        self.data_format = data_format
        self.stride = _pair_or_four(prim, stride, "stride", allow_four=True)
        self.dilation = _pair_or_four(prim, dilation, "dilation", allow_four=True)
        if isinstance(pad, list):
            raise TypeError(f"For '{prim}', 'pad' must be an int or a tuple, but got list {pad!r}.")
        self.pad = _four_pads(prim, pad, "pad")
        if not isinstance(pad_mode, str):
            raise TypeError(f"For '{prim}', 'pad_mode' must be a str, but got {type(pad_mode).__name__}.")
        if pad_mode not in ("valid", "same", "pad"):
            hint = f" (did you mean {pad_mode.lower()!r}?)" if pad_mode.lower() in ("valid", "same", "pad") else ""
            raise ValueError(
                f"For '{prim}', 'pad_mode' must be one of 'valid', 'same', 'pad', but got {pad_mode!r}{hint}."
            )
        self.pad_mode = pad_mode
        if self.pad_mode != "pad" and self.pad != (0, 0, 0, 0):
            raise ValueError(
                f"For '{prim}', 'pad' must be zero when 'pad_mode' is not \"pad\", "
                f"but got 'pad' {self.pad} and 'pad_mode' {pad_mode!r}."
            )
        if self.pad_mode == "pad" and min(self.pad) < 0:
            raise ValueError(f"For '{prim}', every item of 'pad' must be non-negative, but got {self.pad}.")
        if not _is_int(mode):
            raise TypeError(f"For '{prim}', 'mode' must be an int, but got {type(mode).__name__}.")
        if mode != 1:
            raise ValueError(f"For '{prim}', 'mode' must be 1 (cross-correlation), but got {mode}.")
        self.mode = 1
        self.group = _positive_int(prim, group, "group")
        self.pad_list: tuple[int, int, int, int] | None = None
        if pad_list is not None:
            pads = _four_pads(prim, pad_list, "pad_list")
            if min(pads) < 0:
                raise ValueError(f"For '{prim}', every item of 'pad_list' must be non-negative, but got {pads}.")
            self.pad_list = pads
        if self.out_channel % self.group:
            raise ValueError(
                f"For '{prim}', 'out_channel' ({self.out_channel}) must be divisible by 'group' ({self.group})."
            )

    #: The attributes ``repr`` shows, in the constructor's order.
    _SHOWN: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{a}={getattr(self, a)!r}' for a in self._SHOWN)})"

    def _padding(self) -> tuple[str, list[int]]:
        pads = self.pad_list if self.pad_list is not None else (self.pad if self.pad_mode == "pad" else None)
        if pads is None:
            return self.pad_mode.upper(), []
        return "EXPLICIT", explicit_paddings(pads, self.data_format)

    def _four(self, pair: tuple[int, int]) -> list[int]:
        return [1, 1, *pair] if self.data_format == "NCHW" else [1, *pair, 1]

    def _channels(self, shape: Any) -> Any:
        return shape[1] if self.data_format == "NCHW" else shape[3]

    def _tensors(self, first: Any, first_name: str, weight: Any) -> tuple[np.ndarray, np.ndarray]:
        """The data tensor and the weight as arrays (a Python list takes the other's dtype)."""
        first_is_array = hasattr(first, "dtype")
        first = as_tensor(first, first_name, self.name, default_float=np.float32)
        weight = as_tensor(weight, "weight", self.name, like=first if first_is_array else None,
                           default_float=np.float32)
        return first, weight

    def _filter_hwio(self, weight: np.ndarray) -> np.ndarray:
        """MindSpore's weight, checked against the attributes, as an HWIO view."""
        if weight.ndim != 4:
            raise InvalidArgumentError(f"For '{self.name}', 'weight' must be 4-D, but got shape {weight.shape}.")
        if self.data_format == "NCHW":
            c_out, _, k1, k2 = weight.shape
            filter_hwio = weight.transpose(2, 3, 1, 0)
        else:
            c_out, k1, k2, _ = weight.shape
            filter_hwio = weight.transpose(1, 2, 3, 0)
        if c_out != self.out_channel:
            raise InvalidArgumentError(
                f"For '{self.name}', weight.shape[0] must equal 'out_channel' ({self.out_channel}), "
                f"but got {c_out} (weight shape {weight.shape})."
            )
        if (k1, k2) != self.kernel_size:
            raise InvalidArgumentError(
                f"For '{self.name}', the weight's kernel dimensions must equal 'kernel_size' "
                f"{self.kernel_size}, but got {(k1, k2)} (weight shape {weight.shape})."
            )
        return filter_hwio

    def _check_in_channels(self, channels: Any, filter_hwio: np.ndarray, source: str) -> None:
        in_per_group = filter_hwio.shape[2]
        if _is_int(channels) and channels != in_per_group * self.group:
            raise InvalidArgumentError(
                f"For '{self.name}', the input channels in {source} ({channels}) must equal "
                f"the weight's C_in / group ({in_per_group}) times 'group' ({self.group})."
            )

    def _run(self, record: str, args: tuple) -> Any:
        padding, explicit = self._padding()
        return _ops.BY_NAME[record].run(
            *args, self._four(self.stride), padding, explicit, self.data_format, self._four(self.dilation), None,
            op=self.name, default_float=np.float32)


@partial(fill_doc, entries=_DOCS)
class Conv2D(_Conv2DPrimitive):
    """2-D convolution (a cross-correlation), MindSpore's primitive interface.

    Parameters
    ----------
    out_channel : int
        Output channels, ``C_out``.
    kernel_size : int or tuple of 2 ints
        ``(K1, K2)``; an int is used for both.
    mode : int, optional
        Must be 1 (cross-correlation), the only mode MindSpore accepts.
    pad_mode : {"valid", "same", "pad"}, optional
        "same" splits padding as TensorFlow does (the odd extra row/column at
        the bottom/right); "pad" uses ``pad``.  Lower case, as MindSpore checks it.
    pad : int or tuple of 4 ints, optional
        ``(top, bottom, left, right)``; must be 0 unless ``pad_mode == "pad"``.
    %(stride_dilation_group)s
    data_format : {"NCHW", "NHWC"}, optional
        Layout of ``x`` and the result.

    %(raises)s

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.compat.mindspore import ops
    >>> conv = ops.Conv2D(out_channel=32, kernel_size=3)
    >>> conv(np.ones([10, 32, 32, 32], np.float32), np.ones([32, 32, 3, 3], np.float32)).shape
    (10, 32, 30, 30)

    A 2x2 filter of ones with "same" padding (the extra row and column at the
    bottom/right):

    >>> x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    >>> ops.Conv2D(1, 2, pad_mode="same")(x, np.ones((1, 1, 2, 2), np.float32))[0, 0]
    array([[ 8., 12.,  7.],
           [20., 24., 13.],
           [13., 15.,  8.]], dtype=float32)
    """

    name = "Conv2D"
    _SHOWN = ("out_channel", "kernel_size", "mode", "pad_mode", "pad", "stride", "dilation", "group",
              "data_format")

    def __init__(
        self,
        out_channel: int,
        kernel_size: int | tuple[int, int],
        mode: int = 1,
        pad_mode: str = "valid",
        pad: int | tuple[int, int, int, int] = 0,
        stride: int | tuple[int, ...] = 1,
        dilation: int | tuple[int, ...] = 1,
        group: int = 1,
        data_format: str = "NCHW",
    ) -> None:
        self._set_attributes(out_channel, kernel_size, pad_mode, pad, None, mode, stride, dilation, group,
                             data_format)

    def __call__(self, x: Any, weight: Any) -> np.ndarray:
        """Return the convolution of ``x`` with ``weight``, dtype of ``x``.

        Parameters
        ----------
        x : array_like
            ``(N, C_in, H_in, W_in)`` (NCHW) or ``(N, H_in, W_in, C_in)`` (NHWC).
        weight : array_like
            ``(C_out, C_in / group, K1, K2)`` (NCHW) or ``(C_out, K1, K2, C_in / group)`` (NHWC).
        """
        x, weight = self._tensors(x, "x", weight)
        filter_hwio = self._filter_hwio(weight)
        if x.ndim != 4:
            raise InvalidArgumentError(f"For '{self.name}', 'x' must be 4-D ({self.data_format}), "
                                       f"but got shape {x.shape}.")
        self._check_in_channels(self._channels(x.shape), filter_hwio, "'x'")
        if self.pad_mode != "same":  # MindSpore refuses a window larger than the padded input
            top, bottom, left, right = self.pad
            h, w = x.shape[2:] if self.data_format == "NCHW" else x.shape[1:3]
            padded = (h + top + bottom, w + left + right)
            kernel = tuple((k - 1) * d + 1 for k, d in zip(self.kernel_size, self.dilation))
            if padded[0] < kernel[0] or padded[1] < kernel[1]:
                raise InvalidArgumentError(
                    f"For '{self.name}', the input's height and width after padding {padded} must be at least "
                    f"the (dilated) kernel's {kernel}.")
        return self._run("conv2d", (x, filter_hwio))


@partial(fill_doc, entries=_DOCS)
class Conv2DBackpropInput(_Conv2DPrimitive):
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
    %(stride_dilation_group)s
    data_format : {"NCHW", "NHWC"}, optional
        Layout of ``dout``, ``input_size`` and the result.

    %(raises)s

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

    name = "Conv2DBackpropInput"
    _SHOWN = ("out_channel", "kernel_size", "pad_mode", "pad", "pad_list", "mode", "stride", "dilation", "group",
              "data_format")

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
        self._set_attributes(out_channel, kernel_size, pad_mode, pad, pad_list, mode, stride, dilation, group,
                             data_format)

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
        dout, weight = self._tensors(dout, "dout", weight)
        filter_hwio = self._filter_hwio(weight)
        sizes = input_size.tolist() if isinstance(input_size, np.ndarray) else input_size
        if isinstance(sizes, (list, tuple)) and len(sizes) == 4:
            self._check_in_channels(self._channels(sizes), filter_hwio, "'input_size'")
        elif isinstance(sizes, (list, tuple)):
            raise InvalidArgumentError(
                f"For '{self.name}', 'input_size' must have 4 values in {self.data_format} order, but got {sizes!r}."
            )
        return self._run("conv2d_backprop_input", (input_size, filter_hwio, dout))


class Conv2DTranspose(Conv2DBackpropInput):
    """2-D transposed convolution: MindSpore's name for :class:`Conv2DBackpropInput`.

    The same constructor, call and checks; errors name ``Conv2DTranspose``.

    Examples
    --------
    Each ``dout`` cell scattered through a 3x3 filter of ones with stride 2:

    >>> import numpy as np
    >>> from convviz.compat.mindspore import ops
    >>> op = ops.Conv2DTranspose(out_channel=1, kernel_size=3, stride=2)
    >>> op(np.ones((1, 1, 2, 2), np.float32), np.ones((1, 1, 3, 3), np.float32), (1, 1, 5, 5))[0, 0]
    array([[1., 1., 2., 1., 1.],
           [1., 1., 2., 1., 1.],
           [2., 2., 4., 2., 2.],
           [1., 1., 2., 1., 1.],
           [1., 1., 2., 1., 1.]], dtype=float32)
    """

    name = "Conv2DTranspose"
