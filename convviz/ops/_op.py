"""An op as one declarative record, and the one pipeline every op runs through.

A call goes one way: arguments -> the op's validator (a *call*: checked arrays
and a :class:`~convviz.geometry.ConvGeometry`) -> a backend (the CPU *plan*, or
the GPU launcher) -> the result.  The record says what differs between ops; the
pipeline, the compat namespaces, the tests and the benchmark iterate over
:data:`convviz.ops.OPS` instead of naming ops one by one.

A call whose arguments match an earlier valid call exactly -- same array shapes
and dtypes, same parameters given as plain ints and strings -- validates to the
same geometry, so its CPU plan is reused and validation skipped.  Anything else
(lists, floats, bools, other array types) takes the full path.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from .. import _threads
from .. import _validate as v
from .._backends import cpu, cuda
from .._threads import MAX_THREADS
from ..errors import InvalidArgumentError
from ..geometry import ConvGeometry, explicit_paddings, from_nhwc, to_nhwc
from ._docs import DOCS, fill_doc

__all__ = ["Call", "Op", "select_device"]

F = TypeVar("F", bound=Callable[..., Any])

# The TensorFlow window arguments every op takes after its own, in this order.
WINDOW_ARGS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")

# An op's own arguments by their TensorFlow names: which of the convolution's three
# tensors each gives, as an array or (``*_sizes``) as its shape.  The one an op is
# not given is its result (the output, when it is given both input and filter).
ROLES = {"input": "input", "input_sizes": "input", "filter": "filter", "filter_sizes": "filter",
         "out_backprop": "output"}
RESULT_NAMES = {"input": "input gradient", "filter": "filter gradient", "output": "output"}
FILTER_LAYOUTS = {False: "[filter_height, filter_width, in_channels / groups, out_channels]",
                  True: "[filter_height, filter_width, in_channels, channel_multiplier]"}


class Call:
    """A validated call: the geometry, the dtype, the thread count and the checked
    arrays, as attributes named like the op's tensor arguments (``call.filter``)."""

    def __init__(self, geometry: ConvGeometry, dtype: np.dtype, n_threads: int, **arrays: np.ndarray) -> None:
        self.geometry = geometry
        self.dtype = dtype
        self.n_threads = n_threads
        self.__dict__.update(arrays)

    def __getattr__(self, name: str) -> np.ndarray:  # for type checkers: the arrays set above
        raise AttributeError(name)


@dataclass(eq=False)  # not frozen only so that tests can stand in a fake backend
class Op:
    """One op: everything the pipeline, the backends, the tests and the benchmark need.

    What all ops share -- the call object, the validation, the CPU plan, the
    example, the flop count -- is written once here and driven by the record's
    fields; an op module holds only what is its own: its arguments and docs, its
    kernel call, its GPU launcher and its reference.

    Attributes
    ----------
    name : str
        Public name (``convviz.<name>``, ``convviz.reference.<name>``).
    tf_name : str or None
        The TensorFlow raw op with the same semantics, if any:
        ``convviz.compat.tf.raw_ops.<tf_name>`` is made from the record.
    args : tuple of str
        The op's own leading arguments, in TensorFlow's order (then come the
        window arguments ``strides, padding, explicit_paddings, data_format,
        dilations``), named as in :data:`ROLES`: what each gives decides how
        it is validated and which tensor the op returns.
    dtypes : tuple of numpy.dtype
        The dtypes it accepts.
    depthwise : bool
        A depthwise op (filter ``[KH, KW, C, multiplier]``) rather than a dense,
        grouped one (HWIO, ``in_channels / groups`` deep).
    compute : callable
        The op's kernel call, ``compute(plan, first, second, result, n_threads)``
        (see :class:`convviz._backends.cpu.ConvPlan`): the only CPU code an op has.
    plan_gpu : callable
        ``plan_gpu(call)`` -> a GPU plan whose ``run(*tensors)`` launches the
        CUDA kernels and returns a CuPy array (kept per signature: a repeated
        call with CuPy arrays of the same shapes, dtypes and strides skips
        validation and the parameter upload).
    kernel : module
        The compiled CPU kernel module (its ``last_scratch_bytes()`` tells the
        benchmark the scratch memory of the calling thread's last call).
    reference_sum : callable
        ``reference_sum(geometry, first, second)``: the op's sums in float64 with
        obvious loops, on its two tensors in float64 (activations NHWC); the
        result in NHWC.  The record wraps it as ``reference`` (the same
        arguments as the op, validated alike; ``convviz.reference.<name>``).
    prepare : callable or None
        ``prepare(call, fast)`` -> what the op's kernel call needs beyond the
        window, computed once per plan (``plan.extra``); not called for an
        empty call.
    check : callable or None
        ``check(call, op, on_gpu)``: the op's own checks after the common ones.
    hw_sizes : bool
        ``input_sizes`` may also be ``[height, width]`` (TensorFlow's
        ``Conv2DBackpropInput``): batch from ``out_backprop``, depth from the filter.
    tf_attrs : tuple of str
        TensorFlow attributes of the raw op that do not change the result here
        (``use_cudnn_on_gpu``): accepted as bools after ``padding``, as in TensorFlow.
    tf_notes : str
        The raw op's Notes section (its heading is added), if it has one.
    tf_examples : str
        The raw op's Examples section (with its heading); without one, the raw op
        gets an example that compares it with the op.
    explorer_aliases : tuple of str
        Short names the first explorer (``convviz.explorer``) gave the op, still
        accepted there as ``op=``; every op is an explorer mode by its ``name``,
        its panels and their shapes following from the roles of its arguments.
    fast_dtypes : tuple of numpy.dtype
        The dtypes with a ``precision="fast"`` CPU kernel (the plan is then
        built as ``plan(call, fast=True)``; ``prepare`` and ``compute`` decide
        whether this CPU has the instructions).  Empty: the op has none, and
        "fast" computes as "accurate".

    Derived: ``tensors`` (the arguments that are arrays), ``result_role``
    (``"input"``, ``"filter"`` or ``"output"``), ``result`` (in words) and
    ``reference`` (the float64 reference).
    """

    name: str
    tf_name: str | None
    args: tuple[str, ...]
    dtypes: tuple[np.dtype, ...]
    depthwise: bool
    compute: cpu.Compute
    plan_gpu: Callable[[Any], Any]
    kernel: Any
    reference_sum: Callable[[ConvGeometry, np.ndarray, np.ndarray], np.ndarray]
    prepare: Callable[[Call, bool], Any] | None = None
    check: Callable[[Call, str, bool], None] | None = None
    hw_sizes: bool = False
    tf_attrs: tuple[str, ...] = ()
    tf_notes: str = ""
    tf_examples: str = ""
    fast_dtypes: tuple[np.dtype, ...] = ()
    explorer_aliases: tuple[str, ...] = ()
    tensors: tuple[str, ...] = field(init=False)
    result_role: str = field(init=False)
    result: str = field(init=False)
    reference: Callable[..., np.ndarray] = field(init=False)
    tensor_positions: tuple[int, ...] = field(init=False)
    _images: tuple[bool, bool, bool] = field(init=False, repr=False)
    _plan_key: Callable[[tuple], tuple | None] = field(init=False, repr=False)
    _cached_run: Callable[[tuple], Any] = field(init=False, repr=False)
    _gpu_key: Callable[[tuple], tuple | None] = field(init=False, repr=False)
    _gpu_cached_run: Callable[[tuple], Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tensors = tuple(name for name in self.args if not name.endswith("_sizes"))
        sizes = [ROLES[name] for name in self.args if name.endswith("_sizes")]
        self.result_role = sizes[0] if sizes else "output"
        self.result = ("depthwise " if self.depthwise and self.result_role == "filter" else "") + RESULT_NAMES[
            self.result_role]
        first, second = (ROLES[name] != "filter" for name in self.tensors)
        self._images = (first, second, self.result_role != "filter")
        self.reference = _reference_function(self)
        # Precomputed: run() is the hot path of every call.
        self.tensor_positions = tuple(self.args.index(name) for name in self.tensors)
        n_args = len(self.args) + len(WINDOW_ARGS)
        pads = len(self.args) + WINDOW_ARGS.index("explicit_paddings")
        self._plan_key = _key_function(self.name, n_args, self.tensor_positions, pads)
        self._cached_run = _key_function(self.name, n_args, self.tensor_positions, pads, run_cached=True)
        self._gpu_key = _key_function(self.name, n_args, self.tensor_positions, pads, gpu=True)
        self._gpu_cached_run = _key_function(self.name, n_args, self.tensor_positions, pads, run_cached=True,
                                             gpu=True)

    @classmethod
    def of_module(cls, namespace: dict[str, Any], **fields: Any) -> Op:
        """The record of the op module whose globals are ``namespace``: what is the op's
        own is found there by name (``compute``, ``plan_on_gpu``, ``kernel``,
        ``reference_sum``, and ``prepare`` and ``check`` where the op has them); ``fields``
        give the rest (``name``, ``tf_name``, ``args``, ``dtypes``, ``depthwise``, ...)."""
        own = {"compute": "compute", "plan_gpu": "plan_on_gpu", "kernel": "kernel", "reference_sum": "reference_sum",
               "prepare": "prepare", "check": "check"}
        return cls(**{field: namespace[name] for field, name in own.items() if name in namespace}, **fields)

    def validate(self, *args: Any, op: str | None = None, default_float: Any = np.float64,
                 on_gpu: bool = False) -> Call:
        """Check every argument (the op's, the five window arguments, ``n_threads``)
        and build the geometry; raises InvalidArgumentError or TypeError naming the
        argument, before any allocation.  ``op`` names the caller in messages."""
        op = self.name if op is None else op
        named = dict(zip(self.args, args))
        strides, padding, pads, data_format, dilations, n_threads = args[len(self.args):]
        first, second = self.tensors
        # Types first, then values: a dtype error is more fundamental than a shape one.
        a, b, dtype = v.tensor_pair(named[first], first, named[second], op, self.dtypes, default_float,
                                    second_name=second)
        arrays = {first: a, second: b}
        sizes_name = next((name for name in self.args if name not in arrays), None)
        sizes = v.as_int_list(named[sizes_name], sizes_name, op) if sizes_name else None
        threads = v.resolve_n_threads(n_threads, op)
        window = v.validate_window(strides, padding, pads, data_format, dilations, op)
        filter_layout = FILTER_LAYOUTS[self.depthwise]
        for name, array in arrays.items():
            v.check_rank4(array, name, op, filter_layout if ROLES[name] == "filter" else window.data_format)
        shapes = {ROLES[name]: array.shape for name, array in arrays.items()}
        if sizes_name is not None and sizes is not None:
            shapes[ROLES[sizes_name]] = sizes
            self._check_sizes(sizes, sizes_name, window.data_format, op)
        kernel_h, kernel_w, filter_depth, filter_last = shapes["filter"]
        depth_from = next(name for name in self.args if ROLES[name] == "input")
        if len(shapes["input"]) == 4:
            batch, height, width, in_channels = v.spatial(shapes["input"], window)
        else:  # [height, width]: TensorFlow takes the rest from out_backprop and the filter
            (height, width), batch, in_channels = shapes["input"], shapes["output"][0], filter_depth
        if self.depthwise:
            check_depthwise_filter(shapes["filter"], in_channels, "filter_sizes" if sizes_name == "filter_sizes"
                                   else "filter.shape", op)
            out_channels, groups = in_channels * filter_last, 1
        else:
            out_channels, groups = filter_last, v.groups_of(in_channels, shapes["filter"], op, depth_from)
        geometry = ConvGeometry.build(
            batch=batch, input_hw=(height, width), in_channels=in_channels, out_channels=out_channels,
            kernel_hw=(kernel_h, kernel_w), strides=window.strides, dilations=window.dilations,
            padding=window.padding, explicit_paddings=window.pads, groups=groups, depthwise=self.depthwise,
            data_format=window.data_format)
        if "out_backprop" in arrays:
            v.check_output_shape(geometry, arrays["out_backprop"],
                                 ", ".join(name for name in self.args if name != "out_backprop"), op)
        v.check_allocation(getattr(geometry, f"{self.result_role}_shape"), max(dtype.itemsize, 4),
                           f"the {RESULT_NAMES[self.result_role]}", op, on_gpu)
        call = Call(geometry, dtype, threads, **arrays)
        if self.check is not None:
            self.check(call, op, on_gpu)
        return call

    def _check_sizes(self, sizes: tuple[int, ...], name: str, data_format: str, op: str) -> None:
        """``input_sizes`` (4 values, or 2 with ``hw_sizes``; zeros allowed) or ``filter_sizes``
        (4 values, each at least 1)."""
        if ROLES[name] == "input":
            counts, what, low = ((4, 2) if self.hw_sizes else (4,)), f"({data_format})", 0
            if self.hw_sizes:
                what += " or 2 values ([height, width])"
        else:
            counts, what, low = (4,), FILTER_LAYOUTS[self.depthwise], 1
        if len(sizes) not in counts:
            raise InvalidArgumentError(f"{op}: {name} must have 4 values {what}, got {len(sizes)}: {list(sizes)}")
        v.check_range(sizes, name, op, low=low)

    def returns_doc(self) -> str:
        """The numpydoc Returns section of the op's function: its result, shape and dtype."""
        first = self.tensors[0]
        if self.result_role == "output":
            channels = "in_channels * channel_multiplier" if self.depthwise else "out_channels"
            what = f"The output, 4-D in ``data_format`` order with ``{channels}`` channels"
        else:
            sizes = next(name for name in self.args if name.endswith("_sizes"))
            layout = "in ``data_format`` order" if self.result_role == "input" else FILTER_LAYOUTS[self.depthwise]
            what = f"The {self.result}, shape ``{sizes}`` ({layout})"
        int32 = "; int32 wraps modulo 2**32 as TensorFlow's does" if np.dtype(np.int32) in self.dtypes else ""
        text = (f"{what}, dtype of ``{first}``.  Half types are accumulated in float32 and rounded "
                f"once{int32}.")
        return "Returns\n-------\nnumpy.ndarray\n" + textwrap.indent(textwrap.fill(text, 72), "    ")

    def parameters_doc(self) -> str:
        """The numpydoc entries of the op's own arguments, written from their roles."""
        dtypes = [("bfloat16 (``ml_dtypes.bfloat16``)" if dtype == v.BFLOAT16 else dtype.name)
                  for dtype in self.dtypes]
        dtype_text = {self.tensors[0]: f"{', '.join(dtypes[:-1])} or {dtypes[-1]}",
                      self.tensors[1]: f"same dtype as ``{self.tensors[0]}``"}
        channels = "in_channels * channel_multiplier" if self.depthwise else "out_channels"
        depth = ("``in_channels`` must equal the input depth." if self.depthwise else
                 "The input depth may be any multiple of ``{0}[2]``: that is a grouped convolution "
                 "with ``input depth / {0}[2]`` groups, each of ``out_channels / groups`` output channels.")
        layout = FILTER_LAYOUTS[self.depthwise]
        two_values = (", or 2 values ``[height, width]`` (batch then comes from ``out_backprop``, depth from "
                      "``filter.shape[2]``)")
        texts = {
            "input": ("array_like", "The convolution's input, 4-D in ``data_format`` order; {dtype}."),
            "input_sizes": ("sequence of int" if self.hw_sizes else "sequence of 4 ints",
                            "Shape of the convolution's input: 4 values in ``data_format`` order"
                            + (two_values if self.hw_sizes else "") + "."),
            "filter": ("array_like", f"``{layout}``; {{dtype}}.  " + depth.format("filter.shape")),
            "filter_sizes": ("sequence of 4 ints", f"``{layout}``, all at least 1.  " + depth.format("filter_sizes")),
            "out_backprop": ("array_like", "Gradient with respect to the convolution's output, 4-D in "
                             f"``data_format`` order with ``{channels}`` channels; {{dtype}}.  Its shape must "
                             "equal the forward output shape the other arguments imply."),
        }
        entries = []
        for name in self.args:
            kind, text = texts[name]
            text = text.format(dtype=dtype_text.get(name, ""))
            entries.append(f"{name} : {kind}\n" + textwrap.indent(textwrap.fill(text, 72), "    "))
        return "\n".join(entries)

    def document(self, function: F) -> F:
        """Fill ``function``'s docstring placeholders: the shared ones (``convviz.ops._docs``)
        and ``%(parameters_returns_raises)s``, the sections every op's function has: the
        Parameters (the op's own, written from their roles, then the window arguments,
        ``n_threads``, ``device``, and ``precision`` where the op has fast kernels), the
        Returns (the result, from this record) and the Raises."""
        parameters = ["window", "options", *(["precision"] if self.fast_dtypes else [])]
        sections = (f"Parameters\n----------\n{self.parameters_doc()}\n"
                    + "\n".join(DOCS[name] for name in parameters)
                    + f"\n\n{self.returns_doc()}\n\n{DOCS['raises']}")
        return fill_doc(function, {"parameters_returns_raises": sections})

    def plan(self, call: Call, fast: bool = False) -> cpu.ConvPlan:
        """The CPU plan of ``call``'s signature (``fast``: for ``precision="fast"``)."""
        g = call.geometry
        shape = getattr(g, f"{self.result_role}_shape")
        empty = 0 in shape or any(getattr(call, name).size == 0 for name in self.tensors)
        extra = self.prepare(call, fast) if self.prepare is not None and not empty else None
        return cpu.ConvPlan(g, call.dtype, shape, empty, self.compute, self._images, extra)

    def flops(self, geometry: ConvGeometry) -> float:
        """The multiply-adds times two (:attr:`ConvGeometry.flops`), for the benchmark."""
        return geometry.flops

    def example(self, rng: np.random.Generator, dtype: Any, data_format: str = "NHWC",
                strides: tuple[int, int] = (1, 1), dilations: tuple[int, int] = (1, 1),
                padding: str = "SAME") -> tuple:
        """A small random valid call (the op's arguments, then the window's): a 7x6
        input, a 3x2 kernel, explicit pads (1, 0, 2, 1) where asked; 4 channels in 2
        groups to 6 (dense) or 3 channels, multiplier 2 (depthwise).  What the
        op-generic tests run every op on."""
        geometry = ConvGeometry.build(
            batch=2, input_hw=(7, 6), in_channels=3 if self.depthwise else 4, out_channels=6, kernel_hw=(3, 2),
            strides=strides, dilations=dilations, padding=padding, explicit_paddings=(1, 0, 2, 1), groups=2,
            depthwise=self.depthwise, data_format=data_format)
        shapes = [getattr(geometry, f"{ROLES[name]}_shape") for name in self.args]
        return (*(list(shape) if name.endswith("_sizes") else random_values(rng, shape, dtype)
                  for name, shape in zip(self.args, shapes)), *window_arguments(geometry, padding))

    def run(self, *args: Any, op: str | None = None, default_float: Any = np.float64,
            device: Any = None, precision: str | None = None) -> Any:
        """Validate and run: ``args`` are the op's arguments, the five window
        arguments and ``n_threads``, all positional.  ``op`` names the caller in
        error messages (compat namespaces pass TensorFlow's or MindSpore's op
        name); ``default_float`` is the dtype Python float lists become;
        ``precision`` is "accurate" (None) or "fast" (see ``fast_dtypes``)."""
        if precision is not None and precision != "accurate":
            return self._run_fast(args, self.name if op is None else op, default_float, device, precision)
        key = None
        if device is None:
            result = self._cached_run(args)  # the hot path: a repeat of a valid call
            if result is not _MISS:
                return result
            key = self._plan_key(args)
        if key is None and device in (None, "gpu", "cuda"):
            result = self._gpu_cached_run(args)  # a repeat of a valid call on CuPy arrays
            if result is not _MISS:
                return result
        return self._validate_and_run(args, key, self.name if op is None else op, default_float, device)

    def _run_fast(self, args: tuple, caller: str, default_float: Any, device: Any, precision: Any) -> Any:
        """``run`` with ``precision="fast"``: plans cached apart from the accurate ones."""
        if precision != "fast":
            raise InvalidArgumentError(f"{caller}: precision must be 'accurate' or 'fast', got {precision!r}")
        key = self._plan_key(args) if device in (None, "cpu") else None
        if key is None and device in (None, "gpu", "cuda"):
            result = self._gpu_cached_run(args)  # the GPU computes "fast" as "accurate": one plan serves both
            if result is not _MISS:
                return result
        fast_key = None if key is None else ("fast", *key)
        plan = _PLANS.get(fast_key) if fast_key is not None else None
        if plan is not None:
            *_, n_threads = args
            return plan.run(*(args[i] for i in self.tensor_positions),
                            _threads.default_threads() if n_threads is None else n_threads)
        return self._validate_and_run(args, fast_key, caller, default_float, device, fast=True)

    def _validate_and_run(self, args: tuple, key: tuple | None, caller: str, default_float: Any,
                          device: Any, fast: bool = False) -> Any:
        *given, n_threads = args
        tensors = [args[i] for i in self.tensor_positions]
        if device is not None or key is None and any(type(t) is not np.ndarray for t in tensors):
            if select_device(caller, device, *tensors) == "gpu":
                call = self.validate(*given, n_threads, op=caller, default_float=default_float, on_gpu=True)
                gpu_plan = self.plan_gpu(call)
                checked = [getattr(call, name) for name in self.tensors]
                if all(c is t and cuda.is_cupy_array(t) for c, t in zip(checked, tensors)):
                    _remember(self._gpu_key(args), gpu_plan, _GPU_PLANS)
                return gpu_plan.run(*checked)
            if device is not None and not fast:  # device="cpu" with NumPy arrays: as cacheable as device=None
                key = self._plan_key(args)
        call = self.validate(*given, n_threads, op=caller, default_float=default_float)
        plan = self.plan(call, fast=True) if fast and call.dtype in self.fast_dtypes else self.plan(call)
        checked = [getattr(call, name) for name in self.tensors]
        if all(c is t for c, t in zip(checked, tensors)):  # nothing was converted
            _remember(key, plan)
        return plan.run(checked[0], checked[1], call.n_threads)


# The window arguments of a reference, with the ops' defaults (``padding`` has none).
_WINDOW_DEFAULTS = {"explicit_paddings": (), "data_format": "NHWC", "dilations": (1, 1, 1, 1)}


def _reference_function(op: Op) -> Callable[..., np.ndarray]:
    """``convviz.reference.<op name>``: the op's arguments, validated as the op validates
    them, summed in float64 by the op's ``reference_sum``."""
    parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    default=_WINDOW_DEFAULTS.get(name, inspect.Parameter.empty))
                  for name in (*op.args, *WINDOW_ARGS)]
    signature = inspect.Signature(parameters, return_annotation=np.ndarray)
    first_image, second_image, result_image = op._images

    def reference(*args: Any, **kwargs: Any) -> np.ndarray:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        call = op.validate(*bound.args, 1, op=f"reference.{op.name}")
        g = call.geometry
        first, second = (getattr(call, name).astype(np.float64) for name in op.tensors)
        result = op.reference_sum(g, to_nhwc(first, g.data_format) if first_image else first,
                                  to_nhwc(second, g.data_format) if second_image else second)
        return from_nhwc(result, g.data_format) if result_image else result

    reference.__signature__ = signature  # type: ignore[attr-defined]
    reference.__name__ = reference.__qualname__ = op.name
    reference.__module__ = op.reference_sum.__module__
    reference.__doc__ = f"""Float64 reference for :func:`convviz.{op.name}` (``convviz.reference.{op.name}``).

    The same arguments as the op, validated alike; the sums in float64 with plain
    loops over output cells and filter taps (``{op.reference_sum.__module__}.reference_sum``).

    Examples
    --------
    >>> import numpy as np
    >>> import convviz
    >>> from convviz import reference
    >>> from convviz.ops import BY_NAME
    >>> args = BY_NAME["{op.name}"].example(np.random.default_rng(0), np.float64)
    >>> bool(np.allclose(reference.{op.name}(*args), convviz.{op.name}(*args)))
    True
    """
    return reference


def _int_tuple(value: Any) -> tuple | None:
    """``value`` as a tuple when it is a list or tuple of plain ints (not bools, not floats)."""
    if type(value) is tuple or type(value) is list:
        for item in value:
            if type(item) is not int:
                return None
        return tuple(value)
    return None


_MISS = object()  # what a cached run returns when the call has no plan yet


def _key_function(name: str, n_args: int, tensors: tuple[int, ...], pads: int,
                  run_cached: bool = False, gpu: bool = False) -> Callable[[tuple], Any]:
    """The plan-cache key of ``run``'s arguments, or None when any is not plain;
    with ``run_cached``, the cached plan's result instead, or ``_MISS``.

    Arrays count by shape and dtype (with ``gpu``: by type, shape, dtype and
    strides, on the current device -- a GPU plan holds the strides in its
    parameters; those plans live in ``_GPU_PLANS``), strings as they are, int lists as tuples
    (bools and floats are not plain: 1.0 == 1 must not reuse a plan that
    skipped validation), ``explicit_paddings=None`` as ``()``.  The function is
    generated with the op's argument positions unrolled, and the cached run
    does key, lookup and kernel call in one frame: a generic loop and separate
    calls cost 0.3-0.5 us more per call, 5-8% of a small call.
    """
    fail = "_MISS" if run_cached else "None"
    lines = [f"def key(args, nd=np.ndarray, ints=_int_tuple, most={MAX_THREADS}):",
             f"    {', '.join(f'a{i}' for i in range(n_args))}, n = args",
             "    if n is not None and (type(n) is not int or not 1 <= n <= most):",
             f"        return {fail}"]
    parts = [repr(name)]
    if gpu:
        parts.append("cuda.current_device()")
    for i in range(n_args):
        if i in tensors and gpu:  # CuPy arrays only (by module, without importing CuPy), at once
            lines.append(f"    if not type(a{i}).__module__.startswith('cupy'):\n        return {fail}")
            lines.append(f"    try:\n        t{i} = (type(a{i}), a{i}.shape, a{i}.dtype, a{i}.strides)\n"
                         f"    except AttributeError:\n        return {fail}")
            parts.append(f"t{i}")
        elif i in tensors:
            lines.append(f"    if type(a{i}) is not nd:\n        return {fail}")
            parts += [f"a{i}.shape", f"a{i}.dtype"]
        else:
            default = "()" if i == pads else "None"
            lines.append(f"    k{i} = a{i} if type(a{i}) is str else (ints(a{i}) if a{i} is not None else {default})")
            lines.append(f"    if k{i} is None:\n        return {fail}")
            parts.append(f"k{i}")
    if run_cached:
        tensor_args = ", ".join(f"a{i}" for i in tensors)
        threads = "" if gpu else ", threads.default_threads() if n is None else n"
        lines += [f"    plan = {'_GPU_PLANS' if gpu else '_PLANS'}.get(({', '.join(parts)}))",
                  "    if plan is None:\n        return _MISS",
                  f"    return plan.run({tensor_args}{threads})"]
    else:
        lines.append(f"    return ({', '.join(parts)})")
    namespace: dict[str, Any] = {"np": np, "_int_tuple": _int_tuple, "_PLANS": _PLANS, "_MISS": _MISS,
                                 "threads": _threads, "_GPU_PLANS": _GPU_PLANS, "cuda": cuda}
    exec("\n".join(lines), namespace)  # noqa: S102 -- our own template, no user input
    return namespace["key"]


def check_depthwise_filter(shape: tuple[int, ...], channels: int, name: str, op: str) -> None:
    """A depthwise filter [KH, KW, C, M]: no empty dimension, C = the input depth."""
    if min(shape) < 1:
        raise InvalidArgumentError(f"{op}: {name} must not be empty (every dimension at least 1), got {tuple(shape)}")
    if shape[2] != channels:
        raise InvalidArgumentError(f"{op}: {name}[2] must equal the input depth ({channels}), got {shape[2]} "
                                   f"({name} is {FILTER_LAYOUTS[True]})")


def random_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Random values exactly representable in ``dtype`` (small ints for int32), for examples and tests."""
    dtype = np.dtype(dtype)
    if dtype.kind == "i":
        return rng.integers(-4, 5, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def window_arguments(geometry: ConvGeometry, padding: str) -> tuple[list[int], str, list[int], str, list[int]]:
    """The five TensorFlow window arguments (4-value form) that rebuild ``geometry``."""
    nchw = geometry.data_format == "NCHW"

    def four(pair: tuple[int, int]) -> list[int]:
        return [1, 1, *pair] if nchw else [1, *pair, 1]

    pads = explicit_paddings(geometry.pads, geometry.data_format) if padding == "EXPLICIT" else []
    return four(geometry.strides_hw), padding, pads, geometry.data_format, four(geometry.dilations_hw)


# -- the plan cache -----------------------------------------------------------------
_PLANS: dict[tuple, Any] = {}
_GPU_PLANS: dict[tuple, Any] = {}  # apart: their keys hold strides and the device
_MAX_PLANS = 512


def _remember(key: tuple | None, plan: Any, plans: dict[tuple, Any] = _PLANS) -> None:
    if key is not None:
        if len(plans) >= _MAX_PLANS:
            plans.clear()
        plans[key] = plan


def clear_gpu_plans() -> None:
    """Forget every GPU plan (they hold device arrays of one CuPy: tests that swap CuPy call this)."""
    _GPU_PLANS.clear()


# -- where to compute ---------------------------------------------------------------
def select_device(op: str, device: Any, *tensors: Any) -> str:
    """"cpu" or "gpu" for these tensors and the ``device`` argument (see the ops' docs).

    Examples
    --------
    >>> import numpy as np
    >>> from convviz.ops import select_device
    >>> select_device("conv2d_backprop_input", None, np.ones(2))
    'cpu'
    """
    if device is not None and device not in ("cpu", "gpu", "cuda"):
        raise InvalidArgumentError(f"{op}: device must be None, 'cpu' or 'gpu', got {device!r}")
    on_gpu = [cuda.is_cupy_array(t) for t in tensors]
    arrays = [hasattr(t, "shape") and hasattr(t, "dtype") for t in tensors]
    if any(on_gpu) and any(a and not g for a, g in zip(arrays, on_gpu)):
        raise TypeError(f"{op}: some arrays are CuPy (GPU) arrays and some are not; put them all on the same "
                        "device (cupy.asarray / cupy.asnumpy)")
    if device == "cpu" and any(on_gpu):
        raise TypeError(f"{op}: device='cpu' was asked for, but the arrays are CuPy (GPU) arrays; "
                        "use device='gpu' (or None), or cupy.asnumpy them")
    if device in ("gpu", "cuda") or any(on_gpu):
        cuda.require_device(op)
        return "gpu"
    return "cpu"
