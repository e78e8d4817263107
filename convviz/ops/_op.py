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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .. import _threads
from .._backends import cuda
from .._threads import MAX_THREADS
from ..errors import InvalidArgumentError
from ..geometry import ConvGeometry, explicit_paddings

__all__ = ["Op", "select_device"]

# The TensorFlow window arguments every op takes after its own, in this order.
WINDOW_ARGS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")


class Call(Protocol):
    """What a validator returns: the checked arrays (as attributes named like the op's
    tensor arguments), the geometry, the dtype and the thread count."""

    geometry: ConvGeometry
    dtype: np.dtype
    n_threads: int


class Plan(Protocol):
    """What a CPU plan offers: run the kernel on the op's tensors (in argument order)."""

    def run(self, *arrays_then_threads: Any) -> np.ndarray: ...


@dataclass(eq=False)  # not frozen only so that tests can stand in a fake backend
class Op:
    """One op: everything the pipeline, the backends, the tests and the benchmark need.

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
        dilations``).
    tensors : tuple of str
        Which of ``args`` are arrays (the others are shape lists).
    result : str
        What the op returns, in words ("input gradient", ...).
    dtypes : tuple of numpy.dtype
        The dtypes it accepts.
    validate : callable
        ``validate(*args, *window, n_threads, op=, default_float=, on_gpu=)`` ->
        a call (raises InvalidArgumentError / TypeError before any allocation).
    plan : callable
        ``plan(call)`` -> a CPU plan whose ``run(*tensors, n_threads)`` computes.
    plan_gpu : callable
        ``plan_gpu(call)`` -> a GPU plan whose ``run(*tensors)`` launches the
        CUDA kernels and returns a CuPy array (kept per signature: a repeated
        call with CuPy arrays of the same shapes, dtypes and strides skips
        validation and the parameter upload).
    flops : callable
        ``flops(geometry)``: the multiply-adds times two, for the benchmark.
    kernel : module
        The compiled CPU kernel module (its ``last_scratch_bytes()`` tells the
        benchmark the scratch memory of the calling thread's last call).
    example : callable
        ``example(rng, dtype, data_format, strides=(sh, sw), dilations=(dh, dw),
        padding=...)`` -> a small random valid call (the op's arguments, then
        the window's): what the op-generic tests run every op on.
    reference : callable
        The float64 NumPy reference, same arguments as the op (obvious loops
        after the op's own validator); also ``convviz.reference.<name>``.
    tf_attrs : tuple of str
        TensorFlow attributes of the raw op that do not change the result here
        (``use_cudnn_on_gpu``): accepted as bools after ``padding``, as in TensorFlow.
    tf_doc : str
        Extra numpydoc text for the raw op (Notes, Examples); without an
        Examples section, the raw op gets one that compares it with the op.
    fast_dtypes : tuple of numpy.dtype
        The dtypes with a ``precision="fast"`` CPU kernel (the plan is then
        built as ``plan(call, fast=True)``; it decides whether this CPU has
        the instructions).  Empty: the op has none, and "fast" computes as
        "accurate".
    """

    name: str
    tf_name: str | None
    args: tuple[str, ...]
    tensors: tuple[str, ...]
    result: str
    dtypes: tuple[np.dtype, ...]
    validate: Callable[..., Any]
    plan: Callable[..., Any]
    plan_gpu: Callable[[Any], Any]
    flops: Callable[[ConvGeometry], float]
    kernel: Any
    example: Callable[..., tuple]
    reference: Callable[..., np.ndarray]
    tf_attrs: tuple[str, ...] = ()
    tf_doc: str = ""
    fast_dtypes: tuple[np.dtype, ...] = ()
    tensor_positions: tuple[int, ...] = field(init=False)
    _plan_key: Callable[[tuple], tuple | None] = field(init=False, repr=False)
    _cached_run: Callable[[tuple], Any] = field(init=False, repr=False)
    _gpu_key: Callable[[tuple], tuple | None] = field(init=False, repr=False)
    _gpu_cached_run: Callable[[tuple], Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Precomputed: run() is the hot path of every call.
        self.tensor_positions = tuple(self.args.index(name) for name in self.tensors)
        n_args = len(self.args) + len(WINDOW_ARGS)
        pads = len(self.args) + WINDOW_ARGS.index("explicit_paddings")
        self._plan_key = _key_function(self.name, n_args, self.tensor_positions, pads)
        self._cached_run = _key_function(self.name, n_args, self.tensor_positions, pads, run_cached=True)
        self._gpu_key = _key_function(self.name, n_args, self.tensor_positions, pads, gpu=True)
        self._gpu_cached_run = _key_function(self.name, n_args, self.tensor_positions, pads, run_cached=True,
                                             gpu=True)

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
                plan = self.plan_gpu(call)
                checked = [getattr(call, name) for name in self.tensors]
                if all(c is t and cuda.is_cupy_array(t) for c, t in zip(checked, tensors)):
                    _remember(self._gpu_key(args), plan, _GPU_PLANS)
                return plan.run(*checked)
            if device is not None and not fast:  # device="cpu" with NumPy arrays: as cacheable as device=None
                key = self._plan_key(args)
        call = self.validate(*given, n_threads, op=caller, default_float=default_float)
        plan = self.plan(call, fast=True) if fast and call.dtype in self.fast_dtypes else self.plan(call)
        checked = [getattr(call, name) for name in self.tensors]
        if all(c is t for c, t in zip(checked, tensors)):  # nothing was converted
            _remember(key, plan)
        return plan.run(*checked, call.n_threads)


def _int_tuple(value: Any) -> tuple | None:
    """``value`` as a tuple when it is a list or tuple of plain ints (not bools, not floats)."""
    if type(value) is tuple or type(value) is list:
        for v in value:
            if type(v) is not int:
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
