"""The public ops: validate, pick a backend, run the kernel, cast back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import _validate
from .._backends import cpu, cuda

__all__ = ["conv2d_backprop_input", "depthwise_conv2d_native_backprop_filter"]

IntList = Sequence[int]


def conv2d_backprop_input(
    input_sizes: IntList | np.ndarray,
    filter: Any,
    out_backprop: Any,
    strides: IntList,
    padding: str,
    explicit_paddings: IntList = (),
    data_format: str = "NHWC",
    dilations: IntList = (1, 1, 1, 1),
    *,
    n_threads: int | None = None,
    device: str | None = None,
) -> Any:
    """Gradient of conv2d with respect to its input (TensorFlow ``Conv2DBackpropInput``).

    Computes ``dL/dx`` for ``y = conv2d(x, filter)`` given ``out_backprop = dL/dy``:
    every output-gradient cell is scattered back, through each filter tap, to the
    input cell that tap read.  Semantics are TensorFlow's, exactly, for every
    padding, layout, stride, dilation, group count and dtype; where TensorFlow's
    CPU kernel refuses a case (float64 dilation, grouped float64, NCHW) or gets it
    wrong, this returns the exact gradient.

    Parameters
    ----------
    input_sizes : sequence of int
        Shape of the convolution's input: 4 values in ``data_format`` order, or 2
        values ``[height, width]`` (batch then comes from ``out_backprop``, depth
        from ``filter.shape[2]``).
    filter : array_like
        ``[filter_height, filter_width, in_channels / groups, out_channels]``
        (HWIO).  dtype float16, bfloat16 (``ml_dtypes.bfloat16``), float32,
        float64 or int32.  The input depth may be any multiple of
        ``filter.shape[2]``: that is a grouped convolution.
    out_backprop : array_like
        Gradient with respect to the convolution's output, 4-D in
        ``data_format`` order; same dtype as ``filter``.  Its shape must equal the
        forward output shape the other arguments imply.
    strides : sequence of 4 ints
        Window step per dimension in ``data_format`` order; the batch and depth
        entries must be 1.
    padding : {"SAME", "VALID", "EXPLICIT"}
        SAME puts the odd extra padding row/column at the bottom/right.
    explicit_paddings : sequence of 8 ints, optional
        With ``padding="EXPLICIT"``: a (before, after) pair per dimension in
        ``data_format`` order, non-negative, zero for batch and depth.  Must be
        empty otherwise.
    data_format : {"NHWC", "NCHW"}, optional
        Layout of ``input_sizes``, ``out_backprop`` and the result.
    dilations : sequence of 4 ints, optional
        Gap between filter taps per dimension; batch and depth entries must be 1.
    n_threads : int, optional
        Threads to use.  None (default) means OpenMP's default: every core, or
        ``OMP_NUM_THREADS``.  The result is bitwise the same for any value.
    device : {None, "cpu", "gpu"}, optional
        Where to compute.  None (default): on the GPU when the arrays are CuPy
        arrays (the result is then a CuPy array on their device), else on the
        CPU.  "gpu" moves NumPy inputs to the current CUDA device.  Mixing NumPy
        and CuPy arrays is a TypeError; "gpu" without CuPy or without a CUDA
        device raises :class:`convviz.DeviceError`.

    Returns
    -------
    numpy.ndarray
        The input gradient, shape ``input_sizes`` (in ``data_format`` order),
        dtype of ``filter``.  Half types are accumulated in float32 and rounded
        once; int32 wraps modulo 2**32 as TensorFlow's does.

    Raises
    ------
    InvalidArgumentError
        (a ``ValueError``) for wrong values or shapes: the message names the
        argument with the expected and actual values.
    TypeError
        For unsupported or mismatched dtypes and non-integer parameters.

    See Also
    --------
    depthwise_conv2d_native_backprop_filter
    convviz.geometry.ConvGeometry : the arithmetic behind the shapes.
    convviz.reference.conv2d_backprop_input : the float64 NumPy reference.

    Notes
    -----
    Output cell ``o`` and tap ``k`` read input cell
    ``i = o * stride - pad_before + k * dilation``, so

    ``dx[n, i, j, c] = sum dy[n, oh, ow, co] * filter[kh, kw, c', co]``

    over every ``(oh, kh)`` with ``oh * stride_h - pad_top + kh * dilation_h == i``
    (likewise for columns) and every ``co`` in ``c``'s group.  Input rows that no
    window reads (when ``(in + pads - eff) % stride != 0``) get exactly zero.

    Examples
    --------
    A 3x3 all-ones filter, stride 2, VALID: each output-gradient cell adds 1 to
    the nine input cells under its window, so the overlaps show as 2s and 4s.

    >>> import numpy as np
    >>> import convviz
    >>> dx = convviz.conv2d_backprop_input(
    ...     [1, 5, 5, 1], np.ones((3, 3, 1, 1), np.float32),
    ...     np.ones((1, 2, 2, 1), np.float32), strides=[1, 2, 2, 1], padding="VALID")
    >>> dx[0, :, :, 0]
    array([[1., 1., 2., 1., 1.],
           [1., 1., 2., 1., 1.],
           [2., 2., 4., 2., 2.],
           [1., 1., 2., 1., 1.],
           [1., 1., 2., 1., 1.]], dtype=float32)

    The same in NCHW, with 2-value ``input_sizes``:

    >>> convviz.conv2d_backprop_input(
    ...     [5, 5], np.ones((3, 3, 1, 1)), np.ones((1, 1, 2, 2)),
    ...     strides=[1, 1, 2, 2], padding="VALID", data_format="NCHW").shape
    (1, 1, 5, 5)
    """
    return run_conv2d_backprop_input(
        input_sizes, filter, out_backprop, strides, padding, explicit_paddings,
        data_format, dilations, n_threads, device=device,
    )


def depthwise_conv2d_native_backprop_filter(
    input: Any,
    filter_sizes: IntList | np.ndarray,
    out_backprop: Any,
    strides: IntList,
    padding: str,
    explicit_paddings: IntList = (),
    data_format: str = "NHWC",
    dilations: IntList = (1, 1, 1, 1),
    *,
    n_threads: int | None = None,
    device: str | None = None,
) -> Any:
    """Gradient of depthwise conv2d with respect to its filter (``DepthwiseConv2dNativeBackpropFilter``).

    For ``y = depthwise_conv2d(input, filter)`` with filter
    ``[KH, KW, C, multiplier]`` (output channel ``c * multiplier + m``), returns
    ``dL/dfilter`` given ``out_backprop = dL/dy``: for each tap, the sum over every
    output cell of the input cell that tap read times the output gradient.
    Unlike TensorFlow's CPU kernel this honours ``dilations`` (TensorFlow ignores
    them there and returns wrong values with SAME padding) and accepts unequal
    row and column strides.

    Parameters
    ----------
    input : array_like
        The convolution's input, 4-D in ``data_format`` order; float16,
        bfloat16, float32 or float64.
    filter_sizes : sequence of 4 ints
        ``[filter_height, filter_width, in_channels, channel_multiplier]``, all
        at least 1; ``in_channels`` must equal the input depth.
    out_backprop : array_like
        Gradient with respect to the output, 4-D in ``data_format`` order with
        ``in_channels * channel_multiplier`` channels; same dtype as ``input``.
    strides : sequence of 4 ints
        Window step per dimension in ``data_format`` order; batch and depth 1.
    padding : {"SAME", "VALID", "EXPLICIT"}
        SAME puts the odd extra padding row/column at the bottom/right.
    explicit_paddings : sequence of 8 ints, optional
        With ``padding="EXPLICIT"``: (before, after) per dimension in
        ``data_format`` order; must be empty otherwise.
    data_format : {"NHWC", "NCHW"}, optional
        Layout of ``input`` and ``out_backprop``.
    dilations : sequence of 4 ints, optional
        Gap between filter taps per dimension; batch and depth entries must be 1.
    n_threads : int, optional
        Threads to use; None means OpenMP's default.  The result is bitwise the
        same for any value: partial sums are merged in a fixed order.
    device : {None, "cpu", "gpu"}, optional
        Where to compute.  None (default): on the GPU when the arrays are CuPy
        arrays (the result is then a CuPy array on their device), else on the
        CPU.  "gpu" moves NumPy inputs to the current CUDA device.  Mixing NumPy
        and CuPy arrays is a TypeError; "gpu" without CuPy or without a CUDA
        device raises :class:`convviz.DeviceError`.

    Returns
    -------
    numpy.ndarray
        The filter gradient, shape ``filter_sizes``, dtype of ``input``.  Half
        types are accumulated in float32 and rounded once.

    Raises
    ------
    InvalidArgumentError
        (a ``ValueError``) for wrong values or shapes.
    TypeError
        For unsupported or mismatched dtypes and non-integer parameters.

    See Also
    --------
    conv2d_backprop_input
    convviz.reference.depthwise_conv2d_native_backprop_filter

    Notes
    -----
    ``dW[kh, kw, c, m] = sum over n, oh, ow of
    input[n, oh*sh - pad_top + kh*dh, ow*sw - pad_left + kw*dw, c] * dy[n, oh, ow, c*M + m]``,
    where taps that land in the padding contribute nothing.

    Examples
    --------
    With an all-ones input and out_backprop, each tap's gradient counts the
    output cells whose window puts that tap on a real (non-padding) pixel:

    >>> import numpy as np
    >>> import convviz
    >>> dw = convviz.depthwise_conv2d_native_backprop_filter(
    ...     np.ones((1, 4, 4, 1)), [3, 3, 1, 1], np.ones((1, 4, 4, 1)),
    ...     strides=[1, 1, 1, 1], padding="SAME")
    >>> dw[:, :, 0, 0]
    array([[ 9., 12.,  9.],
           [12., 16., 12.],
           [ 9., 12.,  9.]])
    """
    return run_depthwise_conv2d_native_backprop_filter(
        input, filter_sizes, out_backprop, strides, padding, explicit_paddings,
        data_format, dilations, n_threads, device=device,
    )


# -- entry points shared with the compat namespaces ------------------------------
# A call whose arguments match an earlier valid call exactly -- same array
# shapes and dtypes, same parameters given as plain ints and strings -- would be
# validated to the same geometry, so its plan is reused and validation skipped.
# Anything else (lists, floats, bools, other array types) takes the full path.
_PLANS: dict[tuple, Any] = {}
_MAX_PLANS = 512
_NO_PADS: tuple = ()


def _int_tuple(value: Any) -> tuple | None:
    if type(value) is tuple or type(value) is list:
        for v in value:
            if type(v) is not int:
                return None
        return tuple(value)
    return None


def _plan_key(op: str, sizes: Any, a: Any, b: Any, strides: Any, padding: Any,
              explicit_paddings: Any, data_format: Any, dilations: Any, n_threads: Any) -> tuple | None:
    if type(a) is not np.ndarray or type(b) is not np.ndarray:
        return None
    if type(padding) is not str or type(data_format) is not str:
        return None
    if not (n_threads is None or (type(n_threads) is int and 1 <= n_threads <= _validate.MAX_THREADS)):
        return None
    sizes_t, strides_t, dilations_t = _int_tuple(sizes), _int_tuple(strides), _int_tuple(dilations)
    pads_t = _NO_PADS if explicit_paddings is None else _int_tuple(explicit_paddings)
    if sizes_t is None or strides_t is None or dilations_t is None or pads_t is None:
        return None
    return (op, sizes_t, a.shape, a.dtype, b.shape, b.dtype, strides_t, padding, pads_t, data_format, dilations_t)


def _remember(key: tuple | None, plan: Any) -> None:
    if key is not None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan


def select_device(op: str, device: Any, *tensors: Any) -> str:
    """"cpu" or "gpu" for these tensors and the ``device`` argument (see the ops' docs)."""
    if device is not None and device not in ("cpu", "gpu", "cuda"):
        raise _validate.InvalidArgumentError(f"{op}: device must be None, 'cpu' or 'gpu', got {device!r}")
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


class _OpKind(NamedTuple):
    """What differs between the two ops on their way from arguments to kernel."""

    key: str  # plan-cache tag
    validate: Callable[..., Any]  # takes (sizes, array, out_backprop, ...) in this order
    plan_cpu: Callable[[Any], Any]
    gpu_function: str  # looked up in the cuda module at call time
    array_field: str  # the validated call's field holding ``array``


def _validate_filter_grad(sizes: Any, array: Any, *rest: Any, **kwargs: Any) -> Any:
    return _validate.validate_depthwise_backprop_filter(array, sizes, *rest, **kwargs)


_INPUT_GRAD = _OpKind("bpi", _validate.validate_conv2d_backprop_input, cpu.plan_conv2d_backprop_input,
                      "conv2d_backprop_input", "filter")
_FILTER_GRAD = _OpKind("dwf", _validate_filter_grad, cpu.plan_depthwise_conv2d_native_backprop_filter,
                       "depthwise_conv2d_native_backprop_filter", "input")


def _run(kind: _OpKind, sizes: Any, array: Any, out_backprop: Any, strides: Any, padding: Any,
         explicit_paddings: Any, data_format: Any, dilations: Any, n_threads: Any,
         op: str, default_float: Any, device: Any) -> Any:
    """Validate and run either op: ``array`` is the filter (input gradient) or the input (filter gradient)."""
    window = (strides, padding, explicit_paddings, data_format, dilations, n_threads)
    if device is not None or not (type(array) is np.ndarray and type(out_backprop) is np.ndarray):
        if select_device(op, device, array, out_backprop) == "gpu":
            call = kind.validate(sizes, array, out_backprop, *window, op=op, default_float=default_float,
                                 on_gpu=True)
            return getattr(cuda, kind.gpu_function)(call)
    key = _plan_key(kind.key, sizes, array, out_backprop, *window)
    plan = _PLANS.get(key) if key is not None else None
    if plan is not None:
        threads = _validate.DEFAULT_THREADS if n_threads is None else n_threads
        return plan.run(array, out_backprop, threads)
    call = kind.validate(sizes, array, out_backprop, *window, op=op, default_float=default_float)
    plan = kind.plan_cpu(call)
    checked = getattr(call, kind.array_field)
    if checked is array and call.out_backprop is out_backprop:  # nothing was converted
        _remember(key, plan)
    return plan.run(checked, call.out_backprop, call.n_threads)


def run_conv2d_backprop_input(
    input_sizes: Any, filter: Any, out_backprop: Any, strides: Any, padding: Any,
    explicit_paddings: Any, data_format: Any, dilations: Any, n_threads: Any,
    *, op: str = "conv2d_backprop_input", default_float: Any = np.float64, device: Any = None,
) -> Any:
    """Validate and run; ``op`` names the caller in error messages and
    ``default_float`` is the dtype Python float lists become (TensorFlow and
    MindSpore use float32)."""
    return _run(_INPUT_GRAD, input_sizes, filter, out_backprop, strides, padding, explicit_paddings,
                data_format, dilations, n_threads, op, default_float, device)


def run_depthwise_conv2d_native_backprop_filter(
    input: Any, filter_sizes: Any, out_backprop: Any, strides: Any, padding: Any,
    explicit_paddings: Any, data_format: Any, dilations: Any, n_threads: Any,
    *, op: str = "depthwise_conv2d_native_backprop_filter", default_float: Any = np.float64,
    device: Any = None,
) -> Any:
    """Validate and run (see :func:`run_conv2d_backprop_input`)."""
    return _run(_FILTER_GRAD, filter_sizes, input, out_backprop, strides, padding, explicit_paddings,
                data_format, dilations, n_threads, op, default_float, device)
