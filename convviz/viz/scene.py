"""A small convolution to draw: its parameters, its numbers, and their gradients.

Every figure, animation and widget in convviz starts from a :class:`Setup`.  Its
geometry comes from :mod:`convviz.geometry` and its gradients from the same
kernels as :func:`convviz.conv2d_backprop_input` and
:func:`convviz.depthwise_conv2d_native_backprop_filter`, so a picture shows
exactly what the library computes.  The numbers are deterministic examples, or
the caller's own arrays (``x``, ``W``, ``dy``).
"""

from __future__ import annotations

import warnings
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np
import numpy.typing as npt

from .. import ops
from .._dtypes import dtype_name as _dtype_name
from .._validate import InvalidArgumentError
from ..geometry import DATA_FORMATS, PADDINGS, ConvGeometry

__all__ = ["Setup"]

# Small, non-zero integers: sums stay exact in float64 and numbers stay readable.
_FILTER_VALUES = np.array([-2.0, -1.0, 1.0, 2.0, 3.0])
_GRADIENT_VALUES = np.array([-2.0, -1.0, 1.0, 2.0, 3.0])

# Sizes that default to None: "from the arrays, else this".
_SIZE_DEFAULTS: dict[str, Any] = {"input_hw": (8, 8), "kernel_hw": (3, 3), "in_channels": 1, "out_channels": 1,
                                  "batch": 1}
_ARRAYS = ("x", "W", "dy")

# The default of a size inferred in __post_init__.  It is None, typed Any so that the field can carry the
# type the size has once the Setup exists; the constructor's signature (under TYPE_CHECKING) takes the None.
_INFERRED: Any = None


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


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def _is_real_dtype(dtype: np.dtype) -> bool:
    """bool, int, uint and float (float16 included), or an ml_dtypes number type such as bfloat16."""
    if dtype.kind in "biuf":
        return True
    if dtype.kind != "V":
        return False
    for info in (ml_dtypes.finfo, ml_dtypes.iinfo):
        try:
            info(dtype)
            return True
        except (TypeError, ValueError):
            pass
    return False


def _user_array(value: Any, name: str, data_format: str) -> np.ndarray:
    """A user's x, W or dy as a float64, read-only copy: real numbers, 2-D or 4-D, non-empty, finite."""
    layout = "4-D HWIO [KH, KW, in_channels, out_channels]" if name == "W" else (
        f"4-D {data_format} [{', '.join(data_format)}]")
    plane = "[KH, KW]" if name == "W" else "[OH, OW]" if name == "dy" else "[H, W]"
    try:
        array = np.asarray(value)
    except Exception as err:  # ragged lists, GPU tensors, tensors that need grad: not an array of numbers here
        raise TypeError(f"{name} must be an array of real numbers (2-D {plane} or {layout}), got "
                        f"{type(value).__name__} that NumPy cannot turn into one: {err}") from None
    if not _is_real_dtype(array.dtype):
        raise TypeError(f"{name} must hold real numbers (bool, int, float, float16 or bfloat16), "
                        f"got dtype {_dtype_name(array.dtype)}")
    if array.ndim not in (2, 4):
        raise InvalidArgumentError(f"{name} must have shape 2-D {plane} or {layout}, "
                                   f"got {array.ndim}-D shape {array.shape}")
    if 0 in array.shape:
        raise InvalidArgumentError(f"{name} must not be empty (every dimension at least 1), got shape {array.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        array = np.array(array, dtype=np.float64)  # a copy: the caller's array is never shared or changed
    bad = ~np.isfinite(array)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidArgumentError(f"{name} must be finite (the figures cannot colour NaN or Inf), got "
                                   f"{int(bad.sum())} non-finite value(s), the first {array[first]} at {first}")
    array += 0.0  # -0.0 -> 0.0: equal values, equal bytes (and hash)
    array.setflags(write=False)
    return array


def _spatial(array: np.ndarray, data_format: str) -> tuple[int, tuple[int, int], int]:
    """(batch, (rows, cols), channels) of a user's x or dy; a 2-D plane is batch 1, 1 channel."""
    if array.ndim == 2:
        return 1, (array.shape[0], array.shape[1]), 1
    if data_format == "NHWC":
        n, h, w, c = array.shape
    else:
        n, c, h, w = array.shape
    return n, (h, w), c


def _to_layout(array: np.ndarray, source: str, target: str) -> np.ndarray:
    """A 4-D x or dy moved from one data_format to the other (a 2-D plane stays as it is)."""
    if array.ndim != 4 or source == target:
        return array
    return array.transpose(0, 3, 1, 2) if target == "NCHW" else array.transpose(0, 2, 3, 1)


def _as4(array: np.ndarray, kind: str, data_format: str) -> np.ndarray:
    """A user's array in the kernels' 4-D form: x and dy in ``data_format``, W in HWIO."""
    if array.ndim == 4:
        return array
    if kind == "W":
        return array[:, :, None, None]
    return array[None, :, :, None] if data_format == "NHWC" else array[None, None]


def _check_shape(name: str, array: np.ndarray, expected: tuple[int, ...], spatial_axes: tuple[int, int],
                 words: str, plane_words: str, context: str, plane_rule: str) -> None:
    """Refuse an array whose shape is not ``expected`` (4-D); a 2-D plane is fine where the other dims are 1."""
    if array.ndim == 4:
        if array.shape != expected:
            raise InvalidArgumentError(f"{name} must have shape {expected} ({words}) {context}, got {array.shape}")
        return
    plane = tuple(expected[a] for a in spatial_axes)
    if any(d != 1 for a, d in enumerate(expected) if a not in spatial_axes):
        raise InvalidArgumentError(f"{name} must have shape {expected} ({words}) {context}, got {array.shape} "
                                   f"(a 2-D plane is accepted only {plane_rule})")
    if array.shape != plane:
        raise InvalidArgumentError(f"{name} must have shape {plane} ({plane_words}) {context}, got {array.shape}")


@dataclass(frozen=True)
class Setup:
    """A convolution small enough to draw, with deterministic example numbers or your own arrays.

    Parameters
    ----------
    input_hw : int or (int, int), optional
        Input height and width; by default from ``x``, else 8x8 (with ``dy`` and
        no ``x`` it must be given: several input sizes give the same output size).
    kernel_hw : int or (int, int), optional
        Kernel height and width (taps, before dilation); by default from ``W``, else 3x3.
    strides, dilations : int or (int, int)
        Per-axis stride and dilation.
    padding : {"VALID", "SAME", "EXPLICIT"}
        TensorFlow padding; with "EXPLICIT", ``pads`` gives (top, bottom, left, right).
    pads : (int, int, int, int)
        Explicit padding, used only with ``padding="EXPLICIT"``.
    in_channels, out_channels : int, optional
        Channels of the convolution (``out_channels`` is ignored by depthwise views,
        which use ``in_channels * multiplier``).  By default from the arrays
        (``in_channels`` from ``x``, else ``W``; ``out_channels`` from ``W``, else
        ``dy``), else 1.
    multiplier : int
        Depthwise channel multiplier.
    batch : int, optional
        Batch size; by default from ``x``, else ``dy``, else 1.
    data_format : {"NHWC", "NCHW"}
        Layout of the arrays handed to the kernels and of ``x`` and ``dy`` (the
        pictures do not change).
    seed : int
        Seed of the example numbers.
    values : {"integers", "normal"}
        Small non-zero integers (readable, exact sums) or standard normal values,
        for the arrays not given.
    x : array_like, optional, keyword only
        Your input: a 2-D ``[H, W]`` plane (one channel, batch 1) or 4-D in
        ``data_format`` (NHWC ``[N, H, W, C]``, NCHW ``[N, C, H, W]``).
    W : array_like, optional, keyword only
        Your filter: a 2-D ``[KH, KW]`` plane (one input and one output channel)
        or 4-D HWIO ``[KH, KW, in_channels, out_channels]``.
    dy : array_like, optional, keyword only
        Your output gradient dL/dy: a 2-D ``[OH, OW]`` plane (one channel, batch 1)
        or 4-D in ``data_format``, with ``out_channels`` channels (or
        ``in_channels * multiplier`` for the depthwise views).

    Raises
    ------
    TypeError
        An argument of the wrong type: an array that does not hold real numbers
        (strings, objects, complex), a size that is not an int.
    ValueError
        A size or parameter out of range, an array that is not 2-D or 4-D, is
        empty, holds NaN or Inf, or whose shape does not fit the others (the
        message names the argument, the expected and the actual shape).

    Notes
    -----
    Arrays may hold bool, int or float values (float16 and bfloat16 included);
    they are kept as float64 read-only copies, so changing yours afterwards
    changes nothing here.  :meth:`replace` keeps them (moving 4-D ``x`` and ``dy``
    to a new ``data_format``) and checks them again; sizes that were not given
    are inferred again.  Two setups are equal (and hash alike) when their
    parameters and the values of their arrays are, whether an array was given
    as a 2-D plane or 4-D.

    Examples
    --------
    >>> from convviz.viz import Setup
    >>> s = Setup(input_hw=5, kernel_hw=3, strides=2, padding="SAME")
    >>> s.geometry.output_hw, s.geometry.pads
    ((3, 3), (1, 1, 1, 1))
    >>> s.input_gradient().shape
    (1, 5, 5, 1)

    Your own numbers; the sizes come from the arrays:

    >>> import numpy as np
    >>> mine = Setup(x=np.arange(16.).reshape(4, 4), W=[[1, 0], [0, -1]], dy=np.ones((2, 2)), strides=2)
    >>> mine.input_hw, mine.kernel_hw, mine.geometry.output_hw
    ((4, 4), (2, 2), (2, 2))
    >>> mine.describe()
    'input 4x4, kernel 2x2, stride 2, VALID, your x, W, dy'
    >>> mine.plane(mine.input_gradient())
    array([[ 1.,  0.,  1.,  0.],
           [ 0., -1.,  0., -1.],
           [ 1.,  0.,  1.,  0.],
           [ 0., -1.,  0., -1.]])
    >>> from convviz import InvalidArgumentError
    >>> try:
    ...     mine.replace(strides=1)
    ... except InvalidArgumentError as err:
    ...     print(err)
    dy must have shape (3, 3) (out rows, out cols) for input 4x4, kernel 2x2, stride 1, VALID, got (2, 2)
    """

    input_hw: tuple[int, int] = _INFERRED
    kernel_hw: tuple[int, int] = _INFERRED
    strides: tuple[int, int] = (1, 1)
    dilations: tuple[int, int] = (1, 1)
    padding: str = "VALID"
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    in_channels: int = _INFERRED
    out_channels: int = _INFERRED
    multiplier: int = 1
    batch: int = _INFERRED
    data_format: str = "NHWC"
    seed: int = 0
    values: str = "integers"
    _: KW_ONLY
    # The arrays compare through _key (their values), not as ndarrays (which neither == to a bool nor hash).
    x: np.ndarray | None = field(default=None, compare=False)
    W: np.ndarray | None = field(default=None, compare=False)
    dy: np.ndarray | None = field(default=None, compare=False)
    _key: tuple[Any, ...] = field(default=(), init=False, repr=False)
    _inferred: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)
    _sources: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)  # size -> array

    if TYPE_CHECKING:
        # What the constructor takes (an int for a square pair, None for a size to infer, any array_like);
        # __post_init__ turns it into the fields' types.  At run time this is the dataclass's own __init__.
        def __init__(self, input_hw: int | tuple[int, int] | None = None,
                     kernel_hw: int | tuple[int, int] | None = None, strides: int | tuple[int, int] = (1, 1),
                     dilations: int | tuple[int, int] = (1, 1), padding: str = "VALID",
                     pads: tuple[int, int, int, int] = (0, 0, 0, 0), in_channels: int | None = None,
                     out_channels: int | None = None, multiplier: int = 1, batch: int | None = None,
                     data_format: str = "NHWC", seed: int = 0, values: str = "integers", *,
                     x: npt.ArrayLike | None = None, W: npt.ArrayLike | None = None,
                     dy: npt.ArrayLike | None = None) -> None: ...

    def __post_init__(self) -> None:
        given = {name: getattr(self, name) for name in _SIZE_DEFAULTS if getattr(self, name) is not None}
        for name in ("strides", "dilations") + tuple(n for n in ("input_hw", "kernel_hw") if n in given):
            object.__setattr__(self, name, _pair(getattr(self, name), name))
        for name in ("in_channels", "out_channels", "batch"):
            if name in given:
                object.__setattr__(self, name, _int(given[name], name))
        object.__setattr__(self, "multiplier", _int(self.multiplier, "multiplier"))
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
        for name in _ARRAYS:  # type, rank, emptiness, finiteness: each array on its own, before any size
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _user_array(getattr(self, name), name, self.data_format))
        self._infer_sizes(given)
        checks: list[tuple[str, tuple[int, ...], int]] = [
            ("input_hw", self.input_hw, 1), ("kernel_hw", self.kernel_hw, 1), ("strides", self.strides, 1),
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
        self._check_arrays()
        key = tuple(None if getattr(self, name) is None else (self._array4(name).shape, self._array4(name).tobytes())
                    for name in _ARRAYS)
        object.__setattr__(self, "_key", key)

    def _infer_sizes(self, given: dict[str, Any]) -> None:
        """Fill the sizes left None: from the arrays, else the defaults; remember which were not given."""
        x = None if self.x is None else _spatial(self.x, self.data_format)
        dy = None if self.dy is None else _spatial(self.dy, self.data_format)
        w = None if self.W is None else (self.W.shape if self.W.ndim == 4 else (*self.W.shape, 1, 1))
        sources: dict[str, str] = {}
        # (source, value) in order of preference
        candidates: dict[str, list[tuple[str, int | tuple[int, ...] | None]]] = {
            "batch": [("x", x and x[0]), ("dy", dy and dy[0])],
            "input_hw": [("x", x and x[1])],
            "kernel_hw": [("W", w and tuple(w[:2]))],
            "in_channels": [("x", x and x[2]), ("W", w and w[2])],
            "out_channels": [("W", w and w[3]), ("dy", dy and dy[2])],
        }
        for name, options in candidates.items():
            if name in given:
                continue
            source, value = next(((s, v) for s, v in options if v is not None), (None, _SIZE_DEFAULTS[name]))
            if name == "input_hw" and source is None and self.dy is not None:
                raise InvalidArgumentError(
                    f"input_hw is needed with dy of shape {self.dy.shape} and no x: several input sizes give "
                    f"the same output size, so dy does not fix it")
            object.__setattr__(self, name, value)
            if source is not None:
                sources[name] = source
        object.__setattr__(self, "_inferred", frozenset(_SIZE_DEFAULTS) - frozenset(given))
        object.__setattr__(self, "_sources", sources)

    def _size_words(self, array: str, *names: str) -> str:
        """ "for input 6x6, in_channels 2 (from W)": the sizes ``array`` must fit, and which other array set them."""
        words = []
        for name in names:
            value = getattr(self, name)
            text = f"input {value[0]}x{value[1]}" if name == "input_hw" else (
                f"kernel {value[0]}x{value[1]}" if name == "kernel_hw" else f"{name} {value}")
            source = self._sources.get(name, array)
            words.append(text + (f" (from {source})" if source != array else ""))
        return "for " + ", ".join(words)

    def _xy_words(self, channels: str) -> tuple[str, tuple[int, int]]:
        if self.data_format == "NHWC":
            return f"NHWC: batch, {{rows}}, {{cols}}, {channels}", (1, 2)
        return f"NCHW: batch, {channels}, {{rows}}, {{cols}}", (2, 3)

    def _check_arrays(self) -> None:
        """Each given array must fit the sizes (given or inferred) and the geometry."""
        if self.x is not None:
            words, axes = self._xy_words("in channels")
            _check_shape("x", self.x, self._layout_shape(self.batch, self.input_hw, self.in_channels), axes,
                         words.format(rows="rows", cols="cols"), "rows, cols",
                         self._size_words("x", "input_hw", "batch", "in_channels"),
                         "with batch 1 and in_channels 1; give x as 4-D " + self.data_format)
        if self.W is not None:
            _check_shape("W", self.W, (*self.kernel_hw, self.in_channels, self.out_channels), (0, 1),
                         "HWIO: kernel rows, kernel cols, in channels, out channels", "kernel rows, kernel cols",
                         self._size_words("W", "kernel_hw", "in_channels", "out_channels"),
                         "with in_channels 1 and out_channels 1; give W as 4-D HWIO")
        if self.dy is not None:
            try:
                self._check_dy(self.dy, depthwise=False)
            except InvalidArgumentError as ordinary:
                if self.in_channels * self.multiplier == self.out_channels:
                    raise
                try:  # fits the depthwise views only: refused when an ordinary view asks for it
                    self._check_dy(self.dy, depthwise=True)
                except InvalidArgumentError:
                    n, hw, _ = _spatial(self.dy, self.data_format)
                    if (n, hw) != (self.batch, self.geometry.output_hw):
                        raise ordinary from None
                    expected = self._layout_shape(self.batch, self.geometry.output_hw,
                                                  self.in_channels * self.multiplier)
                    raise InvalidArgumentError(f"{ordinary}; the depthwise views would need {expected} "
                                               f"(in_channels x multiplier channels)") from None

    def _check_dy(self, dy: np.ndarray, depthwise: bool) -> None:
        """Refuse the setup's ``dy`` when its shape does not fit the ordinary (or the depthwise) views."""
        g = self.depthwise_geometry if depthwise else self.geometry
        words, axes = self._xy_words("in_channels x multiplier" if depthwise else "out channels")
        context = f"for {'the depthwise views of ' if depthwise else ''}{self._geometry_words()}"
        for name in ("batch", "in_channels" if depthwise else "out_channels"):
            if getattr(self, name) != 1 and self._sources.get(name, "dy") != "dy":  # set by another array
                context += f", {name} {getattr(self, name)} (from {self._sources[name]})"
        if (_spatial(dy, self.data_format)[1] != g.output_hw and "kernel_hw" in self._inferred
                and "kernel_hw" not in self._sources):  # the output size is off, and the kernel a guess
            context += " (kernel_hw not given: 3x3 by default)"
        _check_shape("dy", dy, self._layout_shape(self.batch, g.output_hw, g.out_channels), axes,
                     words.format(rows="out rows", cols="out cols"), "out rows, out cols", context,
                     "with batch 1 and 1 channel; give dy as 4-D " + self.data_format)

    def _layout_shape(self, n: int, hw: tuple[int, int], c: int) -> tuple[int, int, int, int]:
        return (n, *hw, c) if self.data_format == "NHWC" else (n, c, *hw)

    def _array4(self, name: str) -> np.ndarray:
        return _as4(getattr(self, name), name, self.data_format)

    def replace(self, **changes: Any) -> Setup:
        """A copy with some parameters changed, checked again as a new Setup would be.

        Your arrays are kept (4-D ``x`` and ``dy`` moved to a new ``data_format``);
        sizes that were not given are inferred again, from the arrays or the defaults.

        Examples
        --------
        >>> import numpy as np
        >>> s = Setup(x=np.ones((6, 6)), dy=np.ones((4, 4)), padding="VALID")
        >>> from convviz import InvalidArgumentError
        >>> try:
        ...     s.replace(padding="SAME", kernel_hw=5)
        ... except InvalidArgumentError as err:
        ...     print(err)
        dy must have shape (6, 6) (out rows, out cols) for input 6x6, kernel 5x5, stride 1, SAME (pads t2 b2 l2 r2), got (4, 4)
        """
        for name in self._inferred:
            changes.setdefault(name, None)
        target = changes.get("data_format", self.data_format)
        if target != self.data_format and target in DATA_FORMATS:
            for name in ("x", "dy"):
                if name not in changes and getattr(self, name) is not None:
                    changes[name] = _to_layout(getattr(self, name), self.data_format, target)
        return replace(self, **changes)

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Pickle (and copy) as the arguments: rebuilt, the arrays are read-only copies again."""
        arguments = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        arguments.update({name: None for name in self._inferred})
        return _rebuild, (arguments,)

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

    def _geometry_words(self) -> str:
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

    def describe(self) -> str:
        """One line stating the parameters, for titles (and which arrays are yours)."""
        mine = [name for name in _ARRAYS if getattr(self, name) is not None]
        return self._geometry_words() + (f", your {', '.join(mine)}" if mine else "")

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
        """The convolution filter, HWIO ``[KH, KW, in_channels, out_channels]`` (yours, or drawn)."""
        if self.W is not None:
            return np.array(self._array4("W"))  # a writable copy: the setup's own stays as it is
        return self._draw(self.geometry.filter_shape, _FILTER_VALUES, 1)

    def out_backprop(self, depthwise: bool = False) -> np.ndarray:
        """The output gradient dL/dy, in ``data_format`` order (yours, or drawn).

        The depthwise views ask for ``in_channels * multiplier`` channels: your
        ``dy`` must have that many for them (a ``ValueError`` names it otherwise).
        """
        g = self.depthwise_geometry if depthwise else self.geometry
        if self.dy is not None:
            self._check_dy(self.dy, depthwise)
            return np.array(self._array4("dy"))
        n, h, w, c = g.batch, *g.output_hw, g.out_channels
        return self._layout(self._draw((n, h, w, c), _GRADIENT_VALUES, 2 + depthwise))

    def input(self) -> np.ndarray:
        """The convolution's input x (for the depthwise filter gradient), in ``data_format`` order (yours, or drawn)."""
        if self.x is not None:
            return np.array(self._array4("x"))
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

    def output(self) -> np.ndarray:
        """y = conv2d(x, W) from the convviz kernel (``data_format`` order).

        Examples
        --------
        >>> Setup(input_hw=5, kernel_hw=3, strides=2, padding="SAME").output().shape
        (1, 3, 3, 1)
        """
        return ops.conv2d(self.input(), self.filter(), **self._op_kwargs())

    def conv2d_filter_gradient(self, out_backprop: np.ndarray | None = None) -> np.ndarray:
        """dL/dW of the (dense) convolution, HWIO ``[KH, KW, C_in / groups, C_out]``, from the
        convviz kernel: for each tap, the correlation of the input with dL/dy.

        Examples
        --------
        >>> Setup(input_hw=6, kernel_hw=3, in_channels=2, out_channels=4).conv2d_filter_gradient().shape
        (3, 3, 2, 4)
        """
        dy = self.out_backprop() if out_backprop is None else out_backprop
        return ops.conv2d_backprop_filter(self.input(), list(self.geometry.filter_shape), dy, **self._op_kwargs())

    def depthwise_filter_gradient(self) -> np.ndarray:
        """dL/dW of the depthwise convolution ``[KH, KW, C, M]``, from the convviz kernel.

        Examples
        --------
        >>> Setup(input_hw=6, kernel_hw=3, in_channels=2, multiplier=3).depthwise_filter_gradient().shape
        (3, 3, 2, 3)
        """
        sizes = [*self.kernel_hw, self.in_channels, self.multiplier]
        return ops.depthwise_conv2d_native_backprop_filter(
            self.input(), sizes, self.out_backprop(depthwise=True), **self._op_kwargs())

    def filter_gradient(self) -> np.ndarray:
        """Deprecated: :meth:`depthwise_filter_gradient` (the name a dense filter gradient would share)."""
        warn_renamed("Setup.filter_gradient", "Setup.depthwise_filter_gradient")
        return self.depthwise_filter_gradient()

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

    def depthwise_filter_gradient_plane(self, channel: int = 0, multiplier: int = 0) -> np.ndarray:
        """The ``[KH, KW]`` depthwise filter gradient of ``channel`` and its ``multiplier``-th output."""
        self.check_depthwise_channel(channel, multiplier)
        return self.depthwise_filter_gradient()[:, :, channel, multiplier]

    def filter_gradient_plane(self, channel: int = 0, multiplier: int = 0) -> np.ndarray:
        """Deprecated: :meth:`depthwise_filter_gradient_plane`."""
        warn_renamed("Setup.filter_gradient_plane", "Setup.depthwise_filter_gradient_plane")
        return self.depthwise_filter_gradient_plane(channel, multiplier)


def _rebuild(arguments: dict[str, Any]) -> Setup:
    return Setup(**arguments)


def warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is a deprecated alias of ``new`` (``stacklevel`` 3: the caller of the alias)."""
    warnings.warn(f"{old} is deprecated, use {new}: it computes the depthwise filter gradient, and the old "
                  f"name would clash with a dense filter gradient", DeprecationWarning, stacklevel=stacklevel)


def check_index(name: str, value: Any, size: int, where: str) -> int:
    """Refuse an index outside ``[0, size)`` (NumPy would wrap a negative one silently)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not 0 <= value < size:
        raise IndexError(f"{name} must be in [0, {size}) {where}, got {value}")
    return int(value)
