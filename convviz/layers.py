"""Layers for courses: convolutions with ``forward`` and ``backward``, and :func:`gradcheck`.

A layer holds its parameters (``filter``, and ``bias`` unless it has none) and
a convolution window.  ``forward(x)`` returns the output ``y`` and caches
``x``; ``backward(dy)``, given ``dy`` = dL/dy (the gradient of some scalar loss
``L`` with respect to ``y``), returns dL/dx, dL/dfilter and dL/dbias as a
:class:`Gradients`.  Every pass is one convviz op, so a layer computes exactly
what those ops compute:

* :class:`Conv2D` -- forward :func:`convviz.conv2d`, backward
  :func:`convviz.conv2d_backprop_input` and :func:`convviz.conv2d_backprop_filter`;
* :class:`DepthwiseConv2D` -- forward :func:`convviz.depthwise_conv2d_native`,
  backward :func:`convviz.depthwise_conv2d_native_backprop_input` and
  :func:`convviz.depthwise_conv2d_native_backprop_filter`.

The bias is added per output channel (axis 3 in NHWC, axis 1 in NCHW); its
gradient is ``dy`` summed over the batch, rows and columns.  The rest of a
network (activations, pooling, a dense layer, the loss) is a few lines of
NumPy.  :func:`gradcheck` checks a layer's ``backward`` against central
finite differences in float64.

Examples
--------
One step of stochastic gradient descent on ``L = 0.5 * sum((y - target)**2)``:

>>> import numpy as np
>>> import convviz
>>> layer = convviz.layers.Conv2D.create(1, 4, 3, rng=0)   # 1 -> 4 channels, 3x3, He-normal
>>> layer
Conv2D(filter=float32[3, 3, 1, 4], bias=float32[4], strides=(1, 1), padding='SAME', data_format='NHWC')
>>> x = np.random.default_rng(1).standard_normal((2, 8, 8, 1)).astype(np.float32)
>>> target = np.zeros((2, 8, 8, 4), np.float32)
>>> y = layer.forward(x)
>>> grads = layer.backward(y - target)            # dL/dy = y - target
>>> grads
Gradients(input=float32[2, 8, 8, 1], filter=float32[3, 3, 1, 4], bias=float32[4])
>>> for name, p in layer.parameters().items():
...     p -= 0.01 * grads.parameters()[name]       # in place: the layer's own arrays
>>> loss = lambda: 0.5 * float(((layer.forward(x) - target) ** 2).sum())
>>> before = 0.5 * float(((y - target) ** 2).sum())
>>> loss() < before
True
>>> convviz.gradcheck(layer, x)
True
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypedDict

import numpy as np
from numpy.typing import DTypeLike

from . import _validate as v
from .errors import InvalidArgumentError
from .geometry import ConvGeometry, explicit_paddings as _explicit_paddings
from .ops import (
    conv2d,
    conv2d_backprop_filter,
    conv2d_backprop_input,
    depthwise_conv2d_native,
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
)

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

__all__ = ["Conv2D", "ConvLayer", "DepthwiseConv2D", "GradcheckError", "Gradients", "gradcheck"]

#: An int for both spatial axes, or a sequence of 2 ``[height, width]`` or 4 (TensorFlow's form).
IntOrSequence = int | Sequence[int]


class LayerOptions(TypedDict, total=False):
    """The constructor's keyword arguments that ``create`` passes on (see :class:`ConvLayer`)."""

    strides: IntOrSequence
    padding: str
    explicit_paddings: Sequence[int]
    data_format: str
    dilations: IntOrSequence
    n_threads: int | None
    name: str | None


def _describe(array: np.ndarray | None) -> str:
    """``float32[3, 3, 1, 4]``: an array's dtype and shape, for reprs."""
    if array is None:
        return "None"
    return f"{v._dtype_name(array.dtype)}[{', '.join(str(n) for n in array.shape)}]"


def _spatial_pair_or_list(value: Any, name: str, where: str) -> Any:
    """An int becomes ``[n, n]``; a sequence is left for ``validate_window`` (2 or 4 values)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return value
    n = v.as_int(value, name, where)
    return [n, n]


def _positive_int(value: Any, name: str, where: str) -> int:
    n = v.as_int(value, name, where)
    v.check_range((n,), name, where, low=1)
    return n


class Gradients(NamedTuple):
    """What :meth:`ConvLayer.backward` returns: dL/dx, dL/dfilter and dL/dbias.

    A named tuple, so ``dx, dfilter, dbias = layer.backward(dy)`` unpacks it.
    Each gradient has the shape and dtype of what it is the gradient of.

    Attributes
    ----------
    input : numpy.ndarray
        dL/dx, shaped like the ``x`` of the last ``forward``.
    filter : numpy.ndarray
        dL/dfilter, shaped like the layer's ``filter``.
    bias : numpy.ndarray or None
        dL/dbias (``dy`` summed over batch, rows and columns), or None when
        the layer has no bias.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.layers import Conv2D
    >>> layer = Conv2D(np.ones((2, 2, 1, 1)), bias=np.zeros(1), padding="VALID")
    >>> dx, dfilter, dbias = layer.backward(np.ones_like(layer.forward(np.ones((1, 3, 3, 1)))))
    >>> dx[0, :, :, 0]          # how many windows read each input cell
    array([[1., 2., 1.],
           [2., 4., 2.],
           [1., 2., 1.]])
    >>> dfilter[:, :, 0, 0], dbias
    (array([[4., 4.],
           [4., 4.]]), array([4.]))
    """

    input: np.ndarray
    filter: np.ndarray
    bias: np.ndarray | None

    def parameters(self) -> dict[str, np.ndarray]:
        """The parameter gradients, keyed like :meth:`ConvLayer.parameters`.

        Returns
        -------
        dict of str to numpy.ndarray
            ``{"filter": ..., "bias": ...}``; no ``"bias"`` key when the layer
            has no bias.

        Examples
        --------
        >>> import numpy as np
        >>> from convviz.layers import Gradients
        >>> g = Gradients(np.zeros((1, 2, 2, 1)), np.ones((1, 1, 1, 1)), None)
        >>> list(g.parameters())
        ['filter']
        """
        found = {"filter": self.filter}
        if self.bias is not None:
            found["bias"] = self.bias
        return found

    def __repr__(self) -> str:
        return (f"Gradients(input={_describe(self.input)}, filter={_describe(self.filter)}, "
                f"bias={_describe(self.bias)})")


class _Ops(NamedTuple):
    """A layer kind's three ops: forward, input gradient, filter gradient."""

    forward: Callable[..., Any]
    input_grad: Callable[..., Any]
    filter_grad: Callable[..., Any]


class _Cache(NamedTuple):
    """What ``forward`` leaves for ``backward``."""

    x: np.ndarray
    output_shape: tuple[int, ...]


class ConvLayer:
    """What :class:`Conv2D` and :class:`DepthwiseConv2D` share (not used on its own).

    Parameters
    ----------
    filter : array_like
        4-D; its layout depends on the layer kind.  float16, bfloat16
        (``ml_dtypes.bfloat16``), float32 or float64: this is the layer's
        dtype.  The layer keeps its own copy.
    bias : array_like, optional
        1-D, one value per output channel, the dtype of ``filter``; None
        (default) for no bias.  Copied too.
    strides : int or sequence of 2 or 4 ints, optional
        Window step: one int for both axes, ``[height, width]``, or
        TensorFlow's 4 values in ``data_format`` order.  Default 1.
    padding : {"SAME", "VALID", "EXPLICIT"}, optional
        Default "SAME" (with stride 1 the output has the input's size).
    explicit_paddings : sequence of 4 or 8 ints, optional
        With ``padding="EXPLICIT"``: ``(top, bottom, left, right)``, or
        TensorFlow's 8 values (a pair per dimension in ``data_format`` order).
    data_format : {"NHWC", "NCHW"}, optional
        Layout of ``x`` and ``y``; the filter's layout does not change.
    dilations : int or sequence of 2 or 4 ints, optional
        Gap between filter taps, in the forms of ``strides``.  Default 1.
    n_threads : int, optional
        Threads for the ops (None: convviz's default, read at each call).
    name : str, optional
        Shown in the repr and in error messages (useful with several layers).

    Attributes
    ----------
    filter, bias : numpy.ndarray
        The parameters (``bias`` may be None).  Assigning one checks its
        shape and dtype and stores a copy.
    strides, dilations : tuple of int
        ``(height, width)``.
    padding, data_format : str
    explicit_paddings : tuple of int
        ``(top, bottom, left, right)`` with EXPLICIT padding, else ``()``.
    n_threads : int or None
    name : str or None

    Notes
    -----
    ``forward`` keeps a reference to ``x`` (no copy) for ``backward``: do not
    change ``x`` in place between the two.  ``backward`` may be called more
    than once after a ``forward`` (with different ``dy``); it always uses the
    layer's current ``filter``.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.layers import ConvLayer, Conv2D, DepthwiseConv2D
    >>> issubclass(Conv2D, ConvLayer) and issubclass(DepthwiseConv2D, ConvLayer)
    True
    >>> layer = Conv2D(np.ones((3, 3, 2, 4), np.float32), strides=2, padding="VALID")
    >>> layer.strides, layer.padding, layer.in_channels, layer.out_channels, layer.dtype
    ((2, 2), 'VALID', 2, 4, dtype('float32'))
    """

    _OPS: ClassVar[_Ops]

    def __init__(
            self, filter: Any, bias: Any = None, strides: IntOrSequence = 1, padding: str = "SAME",
            explicit_paddings: Sequence[int] = (), data_format: str = "NHWC", dilations: IntOrSequence = 1, *,
            n_threads: int | None = None, name: str | None = None) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"{type(self).__name__}: name must be a string or None, got {type(name).__name__}")
        self.name = name
        where = self._where()
        if padding == "EXPLICIT" and isinstance(explicit_paddings, (list, tuple, np.ndarray)) \
                and len(explicit_paddings) not in (4, 8):
            raise InvalidArgumentError(
                f"{where}: explicit_paddings must have 4 values (top, bottom, left, right) or TensorFlow's 8 "
                f"when padding is 'EXPLICIT', got {len(explicit_paddings)}: {list(explicit_paddings)}")
        if padding == "EXPLICIT" and isinstance(explicit_paddings, (list, tuple, np.ndarray)) \
                and len(explicit_paddings) == 4:
            # (top, bottom, left, right): checked below as TensorFlow's 8 values.
            pads = v.as_int_list(explicit_paddings, "explicit_paddings", where)
            explicit_paddings = _explicit_paddings(list(pads), "NCHW" if data_format == "NCHW" else "NHWC")
        self._window = v.validate_window(
            _spatial_pair_or_list(strides, "strides", where), padding, explicit_paddings, data_format,
            _spatial_pair_or_list(dilations, "dilations", where), where)
        if n_threads is not None:
            v.resolve_n_threads(n_threads, where)
        self.n_threads = n_threads
        filt = v.as_tensor(filter, "filter", where)
        v.check_dtype(filt, "filter", where, v.FLOAT_DTYPES)
        v.check_rank4(filt, "filter", where, self._filter_layout())
        if min(filt.shape) < 1:
            raise InvalidArgumentError(
                f"{where}: filter must not be empty (every dimension at least 1), got shape {filt.shape}")
        self._check_filter_shape(filt.shape, where)
        self._filter: np.ndarray = np.array(filt, order="C")
        self._bias: np.ndarray | None = None
        self._cache: _Cache | None = None
        self._set_bias(bias, where)

    # -- what differs between the layer kinds --------------------------------
    @classmethod
    def _filter_layout(cls) -> str:
        raise NotImplementedError

    def _check_filter_shape(self, shape: tuple[int, ...], where: str) -> None:
        """Raise for a 4-D filter shape this kind of layer cannot use."""

    @property
    def in_channels(self) -> int:
        """Channels ``x`` must have."""
        raise NotImplementedError

    @property
    def out_channels(self) -> int:
        """Channels of ``y`` (and length of ``bias``): ``filter.shape[3]`` for Conv2D,
        ``in_channels * multiplier`` for DepthwiseConv2D."""
        raise NotImplementedError

    def _extra_repr(self) -> list[str]:
        return []

    def _geometry_options(self) -> dict[str, Any]:
        return {}

    # -- parameters and window -------------------------------------------------
    @property
    def filter(self) -> np.ndarray:
        """The filter (the layer's own array: changing it in place changes the layer)."""
        return self._filter

    @filter.setter
    def filter(self, value: Any) -> None:
        where = self._where("filter")
        self._filter = self._checked_like(value, "filter", self._filter.shape, where)

    @property
    def bias(self) -> np.ndarray | None:
        """The bias, one value per output channel, or None."""
        return self._bias

    @bias.setter
    def bias(self, value: Any) -> None:
        self._set_bias(value, self._where("bias"))

    def _set_bias(self, value: Any, where: str) -> None:
        self._bias = None if value is None else self._checked_like(value, "bias", (self.out_channels,), where)

    def _checked_like(self, value: Any, name: str, shape: tuple[int, ...], where: str) -> np.ndarray:
        """A copy of ``value``, which must have ``shape`` and the layer's dtype (lists take it)."""
        array = v.as_tensor(value, name, where, like=self._filter)
        v.check_same_dtype(array, name, self._filter, "the layer's filter", where)
        if array.shape != shape:
            raise InvalidArgumentError(f"{where}: {name} must have shape {shape}, got {array.shape}")
        return np.array(array, order="C")

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the parameters, and of the ``x`` and ``dy`` the layer takes."""
        return self._filter.dtype

    @property
    def kernel_size(self) -> tuple[int, int]:
        """``(filter_height, filter_width)``."""
        return self._filter.shape[0], self._filter.shape[1]

    @property
    def strides(self) -> tuple[int, int]:
        """``(height, width)`` step of the window."""
        return self._window.strides

    @property
    def dilations(self) -> tuple[int, int]:
        """``(height, width)`` gap between filter taps."""
        return self._window.dilations

    @property
    def padding(self) -> str:
        """One of "SAME", "VALID", "EXPLICIT"."""
        return self._window.padding

    @property
    def explicit_paddings(self) -> tuple[int, ...]:
        """``(top, bottom, left, right)`` with EXPLICIT padding, else ``()``."""
        return self._window.pads if self._window.padding == "EXPLICIT" else ()

    @property
    def data_format(self) -> str:
        """The layout of ``x`` and ``y``: "NHWC" or "NCHW"."""
        return self._window.data_format

    def _op_window(self) -> tuple:
        """The ops' five window arguments (plain ints, so the ops' plan cache applies)."""
        w = self._window
        pads = tuple(_explicit_paddings(w.pads, w.data_format)) if w.padding == "EXPLICIT" else ()
        return w.strides, w.padding, pads, w.data_format, w.dilations

    def parameters(self) -> dict[str, np.ndarray]:
        """The parameters by name: ``{"filter": ..., "bias": ...}`` (no ``"bias"`` without one).

        The values are the layer's own arrays, so an in-place update such as
        ``p -= lr * g`` changes the layer.  :meth:`Gradients.parameters` has
        the same keys.

        Returns
        -------
        dict of str to numpy.ndarray

        Examples
        --------
        >>> import numpy as np
        >>> from convviz.layers import Conv2D
        >>> layer = Conv2D(np.ones((1, 1, 1, 2)), bias=np.zeros(2))
        >>> params = layer.parameters()
        >>> sorted(params), params["filter"] is layer.filter
        (['bias', 'filter'], True)
        >>> params["bias"] += 1.0
        >>> layer.bias
        array([1., 1.])
        """
        found = {"filter": self._filter}
        if self._bias is not None:
            found["bias"] = self._bias
        return found

    def astype(self, dtype: DTypeLike) -> Self:
        """A copy of the layer (same class, window and name) with its parameters cast to ``dtype``.

        The copy has nothing cached: call its ``forward`` before its ``backward``.

        Parameters
        ----------
        dtype : dtype
            float16, bfloat16, float32 or float64.

        Returns
        -------
        ConvLayer
            A new layer of the same class; the original is unchanged.

        Examples
        --------
        >>> import numpy as np
        >>> from convviz.layers import DepthwiseConv2D
        >>> layer = DepthwiseConv2D.create(3, 3, rng=0)
        >>> layer.astype(np.float64).dtype, layer.dtype
        (dtype('float64'), dtype('float32'))
        """
        target = np.dtype(dtype)
        if target not in v.FLOAT_DTYPES:
            raise TypeError(f"{self._where('astype')}: dtype must be one of {v._names(v.FLOAT_DTYPES)}, "
                            f"got {v._dtype_name(target)}")
        clone = copy.copy(self)
        clone._filter = self._filter.astype(target, order="C")  # astype copies
        clone._bias = None if self._bias is None else self._bias.astype(target, order="C")
        clone._cache = None
        return clone

    def output_shape(self, input_shape: Sequence[int]) -> tuple[int, int, int, int]:
        """The shape ``forward`` returns for an ``x`` of shape ``input_shape``, computed without running it.

        Handy to size what comes after the layer (a dense layer after a flatten).

        Parameters
        ----------
        input_shape : sequence of 4 ints
            In the layer's ``data_format``.

        Returns
        -------
        tuple of 4 ints

        Examples
        --------
        >>> from convviz.layers import Conv2D
        >>> Conv2D.create(1, 8, 3, strides=2, rng=0).output_shape((32, 8, 8, 1))
        (32, 4, 4, 8)
        """
        where = self._where("output_shape")
        shape = v.as_int_list(list(input_shape), "input_shape", where)
        self._check_input_shape(shape, "input_shape", where)
        n, h, w, c = v.spatial(shape, self._window)
        geometry = ConvGeometry.build(
            batch=n, input_hw=(h, w), in_channels=c, out_channels=self.out_channels, kernel_hw=self.kernel_size,
            strides=self.strides, dilations=self.dilations, padding=self.padding, explicit_paddings=self._window.pads,
            data_format=self.data_format, **self._geometry_options())
        return geometry.output_shape

    @classmethod
    def _initialized(cls, filter_shape: tuple[int, int, int, int], fan_in: int, out_channels: int,
                     use_bias: bool, rng: Any, dtype: DTypeLike, where: str, options: Any) -> Self:
        """``create``'s layer: a He-normal filter (N(0, 2 / fan_in), drawn in float64, cast to ``dtype``)
        and a zero bias unless ``use_bias`` is false; ``options`` go to the constructor."""
        target = np.dtype(dtype)
        if target not in v.FLOAT_DTYPES:
            raise TypeError(f"{where}: dtype must be one of {v._names(v.FLOAT_DTYPES)}, got {v._dtype_name(target)}")
        filt = (np.random.default_rng(rng).standard_normal(filter_shape) * np.sqrt(2.0 / fan_in)).astype(target)
        return cls(filt, np.zeros(out_channels, target) if use_bias else None, **options)

    # -- the two passes --------------------------------------------------------
    def forward(self, x: Any) -> np.ndarray:
        """The layer's output for ``x``; caches ``x`` for :meth:`backward`.

        Parameters
        ----------
        x : array_like
            4-D in ``data_format`` order with ``in_channels`` channels, the
            layer's dtype (a list takes it; an array of another dtype is a
            TypeError: cast one of the two, ``x.astype(layer.dtype)`` or
            ``layer.astype(x.dtype)``).

        Returns
        -------
        numpy.ndarray
            ``y``, 4-D in ``data_format`` order with ``out_channels`` channels
            (see :meth:`output_shape`), the bias added per channel.

        Raises
        ------
        InvalidArgumentError
            (a ``ValueError``) for a wrong shape, or an ``x`` smaller than the
            window (an empty output); the message names the layer.
        TypeError
            For a wrong dtype.

        Examples
        --------
        >>> import numpy as np
        >>> from convviz.layers import Conv2D
        >>> layer = Conv2D(np.ones((2, 2, 1, 1)), bias=np.array([10.0]), padding="VALID")
        >>> layer.forward(np.arange(9.0).reshape(1, 3, 3, 1))[0, :, :, 0]
        array([[18., 22.],
               [30., 34.]])
        """
        where = self._where("forward")
        array = np.asarray(x) if hasattr(x, "dtype") else v.as_tensor(x, "x", where, like=self._filter)
        self._check_tensor(array, "x", where)
        self._check_input_shape(array.shape, "x", where)
        y = self._run(where, self._OPS.forward, array, self._filter)
        h, w = self._window.hw_axes
        if 0 in (y.shape[h], y.shape[w]) and 0 not in (array.shape[h], array.shape[w]):
            raise InvalidArgumentError(
                f"{where}: x of shape {array.shape} is smaller than the window (kernel {self.kernel_size}, "
                f"dilations {self.dilations}, padding {self.padding!r}): the output would be empty, {y.shape}")
        if self._bias is not None:
            y += self._bias.reshape(self._channel_shape())
        self._cache = _Cache(array, y.shape)
        return y

    def __call__(self, x: Any) -> np.ndarray:
        """``layer(x)`` is ``layer.forward(x)`` (a subclass's own ``forward`` included)."""
        return self.forward(x)

    def backward(self, dy: Any) -> Gradients:
        """The gradients for ``dy`` = dL/dy, at the ``x`` of the last :meth:`forward`.

        Parameters
        ----------
        dy : array_like
            The loss's gradient with respect to the output: the shape and dtype
            of what ``forward`` returned.

        Returns
        -------
        Gradients
            ``(input, filter, bias)``: dL/dx, dL/dfilter, dL/dbias (None
            without a bias).  The ops compute the first two; dL/dbias is ``dy``
            summed over all but the channel axis (in float32, or float64 for
            a float64 layer, then cast).

        Raises
        ------
        InvalidArgumentError
            Before any ``forward``, or for a ``dy`` of the wrong shape.
        TypeError
            For a ``dy`` of the wrong dtype.

        Examples
        --------
        >>> import numpy as np
        >>> from convviz.layers import Conv2D
        >>> layer = Conv2D(np.ones((2, 2, 1, 1)), padding="VALID")
        >>> y = layer.forward(np.arange(9.0).reshape(1, 3, 3, 1))
        >>> grads = layer.backward(np.ones_like(y))   # L = y.sum()
        >>> grads.filter[:, :, 0, 0]                  # each tap: the sum of the cells it reads
        array([[ 8., 12.],
               [20., 24.]])
        >>> grads.bias is None
        True
        >>> Conv2D(np.ones((2, 2, 1, 1))).backward(y)
        Traceback (most recent call last):
        ...
        convviz.errors.InvalidArgumentError: Conv2D.backward: dy cannot be used yet: call forward(x) first (backward needs the x that forward caches)
        """
        where = self._where("backward")
        if self._cache is None:
            raise InvalidArgumentError(
                f"{where}: dy cannot be used yet: call forward(x) first (backward needs the x that forward caches)")
        x, output_shape = self._cache
        array = np.asarray(dy) if hasattr(dy, "dtype") else v.as_tensor(dy, "dy", where, like=self._filter)
        self._check_tensor(array, "dy", where)
        if array.shape != output_shape:
            raise InvalidArgumentError(
                f"{where}: dy must have shape {output_shape} (the shape of the output of the last forward), "
                f"got {array.shape}")
        dx = self._run(where, self._OPS.input_grad, x.shape, self._filter, array)
        dfilter = self._run(where, self._OPS.filter_grad, x, self._filter.shape, array)
        dbias = None
        if self._bias is not None:
            axes = (0, 1, 2) if self.data_format == "NHWC" else (0, 2, 3)
            accumulate = np.float64 if self.dtype == np.float64 else np.float32
            dbias = array.sum(axis=axes, dtype=accumulate).astype(self.dtype)
        return Gradients(dx, dfilter, dbias)

    # -- helpers -----------------------------------------------------------------
    def _where(self, method: str | None = None) -> str:
        """``Conv2D.backward [conv1]``: the prefix of this layer's error messages."""
        label = type(self).__name__ + (f".{method}" if method else "")
        return label + (f" [{self.name}]" if self.name else "")

    def _channel_shape(self) -> tuple[int, int, int, int]:
        c = self.out_channels
        return (1, 1, 1, c) if self.data_format == "NHWC" else (1, c, 1, 1)

    def _check_tensor(self, array: np.ndarray, name: str, where: str) -> None:
        if array.dtype != self.dtype:
            raise TypeError(
                f"{where}: {name} must have the layer's dtype {v._dtype_name(self.dtype)}, got "
                f"{v._dtype_name(array.dtype)} (cast {name} with .astype, or the layer with layer.astype)")
        v.check_rank4(array, name, where, self.data_format)

    def _check_input_shape(self, shape: tuple[int, ...], name: str, where: str) -> None:
        if len(shape) != 4:
            raise InvalidArgumentError(f"{where}: {name} must be 4-D {self.data_format}, got {len(shape)}-D "
                                       f"shape {tuple(shape)}")
        axis = self._window.channel_axis
        if shape[axis] != self.in_channels:
            other = 1 if axis == 3 else 3
            hint = (f" (is it {'NCHW' if axis == 3 else 'NHWC'}? this layer's data_format is {self.data_format})"
                    if shape[other] == self.in_channels else "")
            plural = "s" if self.in_channels != 1 else ""
            raise InvalidArgumentError(
                f"{where}: {name} must have {self.in_channels} channel{plural} (axis {axis} in "
                f"{self.data_format}), got shape {tuple(shape)}{hint}")

    def _run(self, where: str, op: Callable[..., Any], *tensors: Any) -> np.ndarray:
        """Run one op with the layer's window; its errors are re-raised naming the layer."""
        try:
            return op(*tensors, *self._op_window(), n_threads=self.n_threads)
        except InvalidArgumentError as err:
            raise InvalidArgumentError(f"{where}: {err}") from err
        except TypeError as err:  # e.g. an n_threads assigned after construction
            raise TypeError(f"{where}: {err}") from err

    def __repr__(self) -> str:
        w = self._window
        parts = [f"filter={_describe(self._filter)}", f"bias={_describe(self._bias)}", *self._extra_repr(),
                 f"strides={w.strides}", f"padding={w.padding!r}"]
        if w.padding == "EXPLICIT":
            parts.append(f"explicit_paddings={w.pads}")
        if w.dilations != (1, 1):
            parts.append(f"dilations={w.dilations}")
        parts.append(f"data_format={w.data_format!r}")
        if self.name:
            parts.append(f"name={self.name!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


class Conv2D(ConvLayer):
    """A 2-D convolution layer (cross-correlation, as in TensorFlow and PyTorch), grouped or not.

    ``y = conv2d(x, filter) + bias``; the gradients come from
    :func:`convviz.conv2d_backprop_input` and :func:`convviz.conv2d_backprop_filter`.
    Build one from a filter (below) or from sizes with :meth:`create`.

    Parameters
    ----------
    filter : array_like
        ``[filter_height, filter_width, in_channels / groups, out_channels]``
        (HWIO, TensorFlow's layout; PyTorch's ``(out, in / groups, kH, kW)``
        is ``weight.transpose(2, 3, 1, 0)``).
    bias : array_like, optional
        ``(out_channels,)``, or None (default) for no bias.
    strides, padding, explicit_paddings, data_format, dilations, n_threads, name
        As in :class:`ConvLayer`.
    groups : int, optional
        Grouped convolution: ``x`` has ``groups * filter.shape[2]`` channels,
        output channels ``[g * out/groups, (g+1) * out/groups)`` see only
        input group ``g``.  Default 1.

    Examples
    --------
    A 2x2 box filter sums each window; the bias is added to every cell:

    >>> import numpy as np
    >>> from convviz.layers import Conv2D
    >>> layer = Conv2D(np.ones((2, 2, 1, 1)), bias=np.array([0.5]), padding="VALID")
    >>> layer
    Conv2D(filter=float64[2, 2, 1, 1], bias=float64[1], strides=(1, 1), padding='VALID', data_format='NHWC')
    >>> layer(np.arange(9.0).reshape(1, 3, 3, 1))[0, :, :, 0]
    array([[ 8.5, 12.5],
           [20.5, 24.5]])

    Two groups, NCHW:

    >>> grouped = Conv2D(np.ones((3, 3, 2, 6), np.float32), groups=2, data_format="NCHW", name="conv1")
    >>> grouped
    Conv2D(filter=float32[3, 3, 2, 6], bias=None, groups=2, strides=(1, 1), padding='SAME', data_format='NCHW', name='conv1')
    >>> grouped.forward(np.ones((1, 4, 5, 5), np.float32)).shape
    (1, 6, 5, 5)
    """

    _OPS: ClassVar[_Ops] = _Ops(conv2d, conv2d_backprop_input, conv2d_backprop_filter)

    def __init__(
            self, filter: Any, bias: Any = None, strides: IntOrSequence = 1, padding: str = "SAME",
            explicit_paddings: Sequence[int] = (), data_format: str = "NHWC", dilations: IntOrSequence = 1, *,
            groups: int = 1, n_threads: int | None = None, name: str | None = None) -> None:
        self.groups = _positive_int(groups, "groups", type(self).__name__)
        super().__init__(filter, bias, strides, padding, explicit_paddings, data_format, dilations,
                         n_threads=n_threads, name=name)

    @classmethod
    def create(
            cls, in_channels: int, out_channels: int, kernel_size: IntOrSequence, *, groups: int = 1,
            use_bias: bool = True, rng: int | np.random.Generator | None = None, dtype: DTypeLike = np.float32,
            **options: Unpack[LayerOptions]) -> Conv2D:
        """A new layer with He-normal weights and a zero bias.

        The filter is drawn from N(0, 2 / fan_in) with ``fan_in =
        kernel_height * kernel_width * in_channels / groups`` (He et al.,
        2015: the variance that keeps activations' scale through ReLU
        layers), in float64, then cast to ``dtype``.

        Parameters
        ----------
        in_channels, out_channels : int
            Channels of ``x`` and of ``y``; both multiples of ``groups``.
        kernel_size : int or sequence of 2 ints
            ``k`` for k x k, or ``[height, width]``.
        groups : int, optional
            See :class:`Conv2D`.  Default 1.
        use_bias : bool, optional
            Give the layer a bias (zeros).  Default True.
        rng : int, numpy.random.Generator or None, optional
            A seed (the same seed, the same weights), a generator to draw
            from, or None for fresh randomness (``numpy.random.default_rng``).
        dtype : dtype, optional
            float16, bfloat16, float32 (default) or float64.
        **options
            The constructor's keywords: ``strides``, ``padding``,
            ``explicit_paddings``, ``data_format``, ``dilations``,
            ``n_threads``, ``name``.

        Returns
        -------
        Conv2D

        Examples
        --------
        >>> from convviz.layers import Conv2D
        >>> layer = Conv2D.create(3, 8, 3, rng=0, strides=2)
        >>> layer
        Conv2D(filter=float32[3, 3, 3, 8], bias=float32[8], strides=(2, 2), padding='SAME', data_format='NHWC')
        >>> bool((layer.filter == Conv2D.create(3, 8, 3, rng=0).filter).all())   # same seed, same weights
        True
        """
        where = f"{cls.__name__}.create"
        c_in = _positive_int(in_channels, "in_channels", where)
        c_out = _positive_int(out_channels, "out_channels", where)
        g = _positive_int(groups, "groups", where)
        if c_in % g or c_out % g:
            raise InvalidArgumentError(f"{where}: in_channels ({c_in}) and out_channels ({c_out}) must be "
                                       f"multiples of groups ({g})")
        kh, kw = v.int_pair(kernel_size, "kernel_size", where, low=1, what=" [height, width]")
        return cls._initialized((kh, kw, c_in // g, c_out), kh * kw * (c_in // g), c_out, use_bias, rng, dtype,
                                where, {**options, "groups": g})

    @classmethod
    def _filter_layout(cls) -> str:
        return "[filter_height, filter_width, in_channels / groups, out_channels]"

    def _check_filter_shape(self, shape: tuple[int, ...], where: str) -> None:
        if shape[3] % self.groups:
            raise InvalidArgumentError(f"{where}: filter.shape[3] (out_channels = {shape[3]}) must be a multiple "
                                       f"of groups ({self.groups})")

    @property
    def in_channels(self) -> int:
        """Channels ``x`` must have: ``groups * filter.shape[2]``."""
        return self.groups * self._filter.shape[2]

    @property
    def out_channels(self) -> int:
        """Channels of ``y``: ``filter.shape[3]``."""
        return self._filter.shape[3]

    def _extra_repr(self) -> list[str]:
        return [f"groups={self.groups}"] if self.groups != 1 else []

    def _geometry_options(self) -> dict[str, Any]:
        return {"groups": self.groups}


class DepthwiseConv2D(ConvLayer):
    """A depthwise 2-D convolution layer: each input channel convolved on its own with ``multiplier`` filters.

    Output channel ``c * multiplier + m`` is input channel ``c`` convolved with
    ``filter[:, :, c, m]``, plus ``bias[c * multiplier + m]``.  The passes are
    :func:`convviz.depthwise_conv2d_native` and its two gradients.  Build one
    from a filter (below) or from sizes with :meth:`create`.

    Parameters
    ----------
    filter : array_like
        ``[filter_height, filter_width, in_channels, multiplier]``
        (TensorFlow's layout; PyTorch's ``(C * M, 1, kH, kW)`` with
        ``groups=C`` is ``weight.reshape(C, M, kH, kW).transpose(2, 3, 0, 1)``).
    bias : array_like, optional
        ``(in_channels * multiplier,)``, or None (default) for no bias.
    strides, padding, explicit_paddings, data_format, dilations, n_threads, name
        As in :class:`ConvLayer`.

    Examples
    --------
    Two channels, the second's filter 10 times the first's:

    >>> import numpy as np
    >>> from convviz.layers import DepthwiseConv2D
    >>> w = np.stack([np.ones((2, 2)), 10 * np.ones((2, 2))], axis=-1)[..., None]   # [2, 2, 2, 1]
    >>> layer = DepthwiseConv2D(w, padding="VALID")
    >>> layer
    DepthwiseConv2D(filter=float64[2, 2, 2, 1], bias=None, multiplier=1, strides=(1, 1), padding='VALID', data_format='NHWC')
    >>> y = layer.forward(np.ones((1, 3, 3, 2)))
    >>> y[0, :, :, 0], y[0, :, :, 1]
    (array([[4., 4.],
           [4., 4.]]), array([[40., 40.],
           [40., 40.]]))
    """

    _OPS: ClassVar[_Ops] = _Ops(depthwise_conv2d_native, depthwise_conv2d_native_backprop_input,
                                depthwise_conv2d_native_backprop_filter)

    @classmethod
    def create(
            cls, in_channels: int, kernel_size: IntOrSequence, *, multiplier: int = 1, use_bias: bool = True,
            rng: int | np.random.Generator | None = None, dtype: DTypeLike = np.float32,
            **options: Unpack[LayerOptions]) -> DepthwiseConv2D:
        """A new layer with He-normal weights and a zero bias.

        The filter is drawn from N(0, 2 / fan_in) with ``fan_in =
        kernel_height * kernel_width`` (each output channel reads one input
        channel), in float64, then cast to ``dtype``.

        Parameters
        ----------
        in_channels : int
            Channels of ``x``.
        kernel_size : int or sequence of 2 ints
            ``k`` for k x k, or ``[height, width]``.
        multiplier : int, optional
            Filters per input channel: ``y`` has ``in_channels * multiplier``
            channels.  Default 1.
        use_bias, rng, dtype, **options
            As in :meth:`Conv2D.create`.

        Returns
        -------
        DepthwiseConv2D

        Examples
        --------
        >>> from convviz.layers import DepthwiseConv2D
        >>> layer = DepthwiseConv2D.create(4, 3, multiplier=2, rng=0, dilations=2)
        >>> layer
        DepthwiseConv2D(filter=float32[3, 3, 4, 2], bias=float32[8], multiplier=2, strides=(1, 1), padding='SAME', dilations=(2, 2), data_format='NHWC')
        >>> layer.out_channels
        8
        """
        where = f"{cls.__name__}.create"
        c_in = _positive_int(in_channels, "in_channels", where)
        m = _positive_int(multiplier, "multiplier", where)
        kh, kw = v.int_pair(kernel_size, "kernel_size", where, low=1, what=" [height, width]")
        return cls._initialized((kh, kw, c_in, m), kh * kw, c_in * m, use_bias, rng, dtype, where, options)

    @classmethod
    def _filter_layout(cls) -> str:
        return "[filter_height, filter_width, in_channels, multiplier]"

    @property
    def multiplier(self) -> int:
        """Filters per input channel: ``filter.shape[3]``."""
        return self._filter.shape[3]

    @property
    def in_channels(self) -> int:
        """Channels ``x`` must have: ``filter.shape[2]``."""
        return self._filter.shape[2]

    @property
    def out_channels(self) -> int:
        """Channels of ``y``: ``in_channels * multiplier``."""
        return self._filter.shape[2] * self._filter.shape[3]

    def _extra_repr(self) -> list[str]:
        return [f"multiplier={self.multiplier}"]

    def _geometry_options(self) -> dict[str, Any]:
        return {"depthwise": True}


# -- gradcheck ---------------------------------------------------------------------
class GradcheckError(RuntimeError):
    """:func:`gradcheck` found a gradient that disagrees with finite differences.

    Attributes
    ----------
    tensor : str
        "input", "filter" or "bias".
    index : tuple of int
        Where (the worst disagreement of that tensor).
    analytic, numeric : float
        What ``backward`` gave there, and the central difference.

    Examples
    --------
    >>> from convviz.layers import GradcheckError
    >>> issubclass(GradcheckError, RuntimeError)
    True
    """

    def __init__(self, message: str, tensor: str, index: tuple[int, ...], analytic: float, numeric: float) -> None:
        super().__init__(message)
        self.tensor = tensor
        self.index = index
        self.analytic = analytic
        self.numeric = numeric


def _nonnegative_float(value: Any, name: str, positive: bool = False) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"gradcheck: {name} must be a number, got {type(value).__name__} {value!r}")
    number = float(value)
    if not (number > 0 if positive else number >= 0) or not np.isfinite(number):
        raise InvalidArgumentError(f"gradcheck: {name} must be a finite number {'>' if positive else '>='} 0, "
                                   f"got {value!r}")
    return number


def gradcheck(
    layer: ConvLayer,
    x: Any,
    *,
    dy: Any = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    max_entries: int = 256,
    seed: int = 0,
    raise_exception: bool = True,
) -> bool:
    """Check ``layer.backward`` against central finite differences, in float64.

    The loss is ``L = sum(layer.forward(x) * dy)`` (so ``dy`` is dL/dy);
    for each checked entry ``t[i]`` of the input ``x``, the filter and the
    bias, the numeric derivative ``(L(t[i] + eps) - L(t[i] - eps)) / (2 *
    eps)`` must agree with ``backward``'s value ``a``:
    ``|a - numeric| <= atol + rtol * |numeric|`` (the contract of
    ``torch.autograd.gradcheck``).  Everything runs on a float64 copy of the
    layer (:meth:`ConvLayer.astype`), so ``layer`` -- its parameters, dtype and
    cache -- is untouched.

    Which entries: a tensor with at most ``max_entries`` entries is checked
    entry by entry; a larger one at ``max_entries`` entries drawn without
    replacement (seeded by ``seed``, always including its first and last
    entry).  Each checked entry costs two forward passes.

    Parameters
    ----------
    layer : ConvLayer
        A :class:`Conv2D` or :class:`DepthwiseConv2D` (or a subclass: its own
        ``forward`` and ``backward`` are what is checked).
    x : array_like
        An input the layer accepts (any float dtype; used in float64).
    dy : array_like, optional
        dL/dy, the output's shape; default: standard normal values drawn
        with ``seed``.
    eps : float, optional
        The finite-difference step.  Default 1e-6.
    atol, rtol : float, optional
        Absolute and relative tolerance.  Defaults 1e-5 and 1e-3 (PyTorch's).
    max_entries : int, optional
        Entries checked per tensor at most.  Default 256.
    seed : int, optional
        Seeds ``dy`` and the sample of entries.  Default 0.
    raise_exception : bool, optional
        True (default): raise :class:`GradcheckError` on a disagreement.
        False: return False instead.

    Returns
    -------
    bool
        True when every checked entry agrees (False when one does not and
        ``raise_exception`` is False).

    Raises
    ------
    GradcheckError
        With ``raise_exception``: the message names the tensor, the index of
        its worst disagreement, the analytic and numeric values there, and
        how many checked entries disagree.
    InvalidArgumentError, TypeError
        For invalid arguments (whatever ``raise_exception`` says).

    Examples
    --------
    >>> import numpy as np
    >>> import convviz
    >>> layer = convviz.layers.Conv2D.create(2, 3, 3, strides=2, rng=0)
    >>> x = np.random.default_rng(1).standard_normal((1, 5, 5, 2))
    >>> convviz.gradcheck(layer, x)
    True

    A layer whose filter gradient is 1% off:

    >>> class Broken(convviz.layers.Conv2D):
    ...     def backward(self, dy):
    ...         grads = super().backward(dy)
    ...         return grads._replace(filter=grads.filter * 1.01)
    >>> broken = Broken(layer.filter, layer.bias, strides=2)
    >>> convviz.gradcheck(broken, x, raise_exception=False)
    False
    >>> convviz.gradcheck(broken, x)   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    convviz.layers.GradcheckError: gradcheck: the filter gradient of Broken disagrees with finite differences at index (...): ...
    """
    if not isinstance(layer, ConvLayer):
        raise TypeError(f"gradcheck: layer must be a convviz.layers layer (Conv2D, DepthwiseConv2D), "
                        f"got {type(layer).__name__}")
    eps = _nonnegative_float(eps, "eps", positive=True)
    atol = _nonnegative_float(atol, "atol")
    rtol = _nonnegative_float(rtol, "rtol")
    max_entries = _positive_int(max_entries, "max_entries", "gradcheck")
    rng = np.random.default_rng(v.as_int(seed, "seed", "gradcheck"))

    checked = layer.astype(np.float64)
    x64 = np.array(x, dtype=np.float64)
    y = checked.forward(x64)
    if dy is None:
        dy64 = rng.standard_normal(y.shape)
    else:
        dy64 = np.array(dy, dtype=np.float64)
        if dy64.shape != y.shape:
            raise InvalidArgumentError(f"gradcheck: dy must have the output's shape {y.shape}, got {dy64.shape}")
    analytic = checked.backward(dy64)

    def loss() -> float:
        return float(np.vdot(checked.forward(x64), dy64))

    tensors: list[tuple[str, np.ndarray | None, np.ndarray | None]] = [
        ("input", x64, analytic.input), ("filter", checked.filter, analytic.filter)]
    if checked.bias is not None or analytic.bias is not None:
        tensors.append(("bias", checked.bias, analytic.bias))
    for name, tensor, gradient in tensors:
        problem = _compare(name, tensor, gradient, loss, eps, atol, rtol, max_entries, rng, layer)
        if problem is not None:
            if raise_exception:
                raise problem
            return False
    return True


def _compare(name: str, tensor: np.ndarray | None, gradient: np.ndarray | None, loss: Callable[[], float],
             eps: float, atol: float, rtol: float, max_entries: int, rng: np.random.Generator,
             layer: ConvLayer) -> GradcheckError | None:
    """Central differences of ``loss`` at some entries of ``tensor`` (changed in place and restored)
    against ``gradient``; the error to raise, or None when they agree."""
    subject = f"the {name} gradient of {layer._where()}"
    if tensor is None or gradient is None:
        has = "has a" if tensor is not None else "has no"
        returned = "None" if gradient is None else "an array"
        return GradcheckError(f"gradcheck: {layer._where()} {has} {name} but its backward returned {returned} "
                              f"for the {name} gradient", name, (), float("nan"), float("nan"))
    gradient = np.asarray(gradient, dtype=np.float64)
    if gradient.shape != tensor.shape:
        return GradcheckError(f"gradcheck: {subject} has shape {gradient.shape}, expected {tensor.shape}",
                              name, (), float("nan"), float("nan"))
    size = tensor.size
    if size <= max_entries:
        flat = np.arange(size)
        sampled = f"all {size} entries checked"
    else:
        middle = rng.choice(np.arange(1, size - 1), size=max_entries - 2, replace=False)
        flat = np.sort(np.concatenate([[0, size - 1], middle]))
        sampled = f"{max_entries} of its {size} entries checked (a seeded sample)"
    numeric = np.empty(flat.size)
    for k, i in enumerate(flat):
        where = np.unravel_index(i, tensor.shape)
        original = tensor[where]
        tensor[where] = original + eps
        plus = loss()
        tensor[where] = original - eps
        minus = loss()
        tensor[where] = original
        numeric[k] = (plus - minus) / (2 * eps)
    computed = gradient.reshape(-1)[flat]
    tolerance = atol + rtol * np.abs(numeric)
    excess = np.abs(computed - numeric) - tolerance
    bad = ~(excess <= 0)  # NaN counts as a disagreement
    if not bad.any():
        return None
    worst = int(np.argmax(np.where(np.isnan(excess), np.inf, excess)))
    index = tuple(int(i) for i in np.unravel_index(flat[worst], tensor.shape))
    a, n = float(computed[worst]), float(numeric[worst])
    return GradcheckError(
        f"gradcheck: {subject} disagrees with finite differences at index {index}: "
        f"analytic (backward) {a:.6g}, numeric {n:.6g} (central differences, eps={eps:g}); "
        f"|difference| {abs(a - n):.3g} > atol + rtol * |numeric| = {float(tolerance[worst]):.3g}. "
        f"{int(bad.sum())} of the {flat.size} checked entries disagree ({sampled}).",
        name, index, a, n)
