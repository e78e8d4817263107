"""The depthwise conv2d forward pass (TensorFlow ``DepthwiseConv2dNative``), as one unit.

Here: the public function and its documentation, the validator (arguments ->
a :class:`Call`), the CPU plan around the Cython kernel ``_depthwise_forward``
(C++ in ``_ext/depthwise_forward.cpp``), the GPU launcher (the dense forward's
CUDA kernel with one input channel per group), the float64 reference
(``convviz.reference.depthwise_conv2d_native``) and the
:class:`~convviz.ops._op.Op` record that ties them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import _validate as v
from .._backends import cpu, cuda
from ..errors import InvalidArgumentError
from ..geometry import ConvGeometry
from ..reference import from_nhwc, taps, to_nhwc
from . import _depthwise_forward as kernel
from ._docs import fill_doc
from ._op import Op, random_values, window_arguments

__all__ = ["depthwise_conv2d_native"]

DTYPES = v.FLOAT_DTYPES


@dataclass(frozen=True)
class Call:
    """A validated depthwise_conv2d_native call."""

    geometry: ConvGeometry
    input: np.ndarray
    filter: np.ndarray
    dtype: np.dtype
    n_threads: int


def check_depthwise_filter(shape: tuple[int, ...], channels: int, name: str, op: str) -> None:
    """A depthwise filter [KH, KW, C, M]: no empty dimension, C = the input depth."""
    if min(shape) < 1:
        raise InvalidArgumentError(f"{op}: {name} must not be empty (every dimension at least 1), got {tuple(shape)}")
    if shape[2] != channels:
        raise InvalidArgumentError(f"{op}: {name}[2] must equal the input depth ({channels}), got {shape[2]} "
                                   f"({name} is [filter_height, filter_width, in_channels, channel_multiplier])")


def validate(
    input: Any, filter: Any, strides: Any, padding: Any, explicit_paddings: Any, data_format: Any,
    dilations: Any, n_threads: Any, op: str = "depthwise_conv2d_native", default_float: Any = np.float64,
    on_gpu: bool = False,
) -> Call:
    """Check every argument (see :func:`depthwise_conv2d_native`); build the geometry."""
    input, filter, dtype = v.tensor_pair(input, "input", filter, op, DTYPES, default_float, second_name="filter")
    threads = v.resolve_n_threads(n_threads, op)
    window = v.validate_window(strides, padding, explicit_paddings, data_format, dilations, op)

    v.check_rank4(input, "input", op, window.data_format)
    v.check_rank4(filter, "filter", op, "[filter_height, filter_width, in_channels, channel_multiplier]")
    batch, height, width, channels = v.spatial(input.shape, window)
    check_depthwise_filter(filter.shape, channels, "filter.shape", op)
    kernel_h, kernel_w, _, multiplier = filter.shape
    geometry = ConvGeometry.build(
        batch=batch, input_hw=(height, width), in_channels=channels, out_channels=channels * multiplier,
        kernel_hw=(kernel_h, kernel_w), strides=window.strides, dilations=window.dilations,
        padding=window.padding, explicit_paddings=window.pads, depthwise=True, data_format=window.data_format,
    )
    v.check_allocation(geometry.output_shape, max(dtype.itemsize, 4), "the output", op, on_gpu)
    return Call(geometry, input, filter, dtype, threads)


# Bound once: Plan.run is on the path of every call (module lookups cost ~0.1 us there).
_kernel = kernel.depthwise_forward
kernel_view = cpu.kernel_view


class Plan(cpu.ConvPlan):
    """Everything the CPU kernel needs that depends only on the geometry and dtype."""

    __slots__ = ()

    def __init__(self, call: Call) -> None:
        g = call.geometry
        super().__init__(g, call.dtype, g.output_shape, 0 in g.output_shape)

    def run(self, x: np.ndarray, filt: np.ndarray, n_threads: int) -> np.ndarray:
        result = cpu.empty_result(self.shape, self.dtype)
        if self.empty:
            return result
        xv = kernel_view(x)
        code = self.code
        _kernel(xv.transpose(0, 2, 3, 1) if self.nchw else xv, code, kernel_view(filt), code,
                result.transpose(0, 2, 3, 1) if self.nchw else result, code,
                *self.window, n_threads, cpu.ISA_CODE, self.f64, cpu.MIN_PARALLEL_WORK)
        return result


cuda.declare_kernels(Path(__file__).with_name("depthwise_forward.cu"),
                     *(f"depthwise_forward_rows<{t}>" for t in range(4)),
                     *(f"depthwise_forward_strips<{t}>" for t in range(4)))
# Output pixels per thread of the two kernels (DEPTHWISE_FORWARD_ROW and _STRIP_ROW in
# depthwise_forward.cu), and the widest window the strips take (DEPTHWISE_STRIP_KW).
GPU_ROW, GPU_STRIP_ROW, GPU_STRIP_KW = 4, 8, 7


def plan_on_gpu(call: Call) -> cuda.DensePlan:
    """The CUDA launch for this call's signature: a row of output pixels per thread (through a
    register strip of inputs at stride and dilation 1), or (arrays past 32-bit offsets) the dense
    forward's kernel with the filter seen as [KH, KW, 1, C * M]."""
    g = call.geometry
    kh, kw, c, m = call.filter.shape

    strips = g.strides_hw == (1, 1) and g.dilations_hw == (1, 1) and kw <= GPU_STRIP_KW
    kernel, row = ("depthwise_forward_strips", GPU_STRIP_ROW) if strips else ("depthwise_forward_rows", GPU_ROW)

    def rows(cp, x, w, y, params, code):
        total = g.batch * g.output_hw[0] * cuda.tiles(g.output_hw[1], row) * c * m
        if not cuda.loop_fits(x, w, y, total=total):
            return None
        return cuda.loop_launch(cp, f"{kernel}<{code}>", params, total)

    return cuda.DensePlan("depthwise_conv2d_native", "conv2d_forward", g, call.dtype, g.output_shape,
                          call.input, call.filter, images=(True, False, True), second_shape=(kh, kw, 1, c * m),
                          tiled=rows)


def flops(g: ConvGeometry) -> float:
    """``2 * N * OH * OW * C * M * KH * KW``."""
    oh, ow = g.output_hw
    kh, kw = g.kernel_hw
    return 2.0 * g.batch * oh * ow * g.out_channels * kh * kw


def example(rng: np.random.Generator, dtype: Any, data_format: str = "NHWC", strides: tuple[int, int] = (1, 1),
            dilations: tuple[int, int] = (1, 1), padding: str = "SAME") -> tuple:
    """A small random valid call: 3 channels, multiplier 2, a 3x2 kernel, a 7x6 input (see ``Op.example``)."""
    geometry = ConvGeometry.build(
        batch=2, input_hw=(7, 6), in_channels=3, out_channels=6, kernel_hw=(3, 2), strides=strides,
        dilations=dilations, padding=padding, explicit_paddings=(1, 0, 2, 1), depthwise=True,
        data_format=data_format)
    return (random_values(rng, geometry.input_shape, dtype), random_values(rng, geometry.filter_shape, dtype),
            *window_arguments(geometry, padding))


def reference(
    input: Any, filter: Any, strides: Any, padding: Any, explicit_paddings: Any = (),
    data_format: Any = "NHWC", dilations: Any = (1, 1, 1, 1),
) -> np.ndarray:
    """Float64 reference for :func:`depthwise_conv2d_native` (``convviz.reference.depthwise_conv2d_native``).

    Examples
    --------
    >>> import numpy as np
    >>> from convviz import reference
    >>> reference.depthwise_conv2d_native(np.ones((1, 3, 3, 2)), np.ones((2, 2, 2, 1)),
    ...                                   [1, 1, 1, 1], "VALID").shape
    (1, 2, 2, 2)
    """
    call = validate(input, filter, strides, padding, explicit_paddings, data_format, dilations, 1,
                    op="reference.depthwise_conv2d_native")
    g = call.geometry
    x = to_nhwc(call.input.astype(np.float64), g.data_format)
    w = call.filter.astype(np.float64)
    y = np.zeros((g.batch, *g.output_hw, g.in_channels, g.multiplier))
    for oh, ow, kh, kw, ih, iw in taps(g):
        # y[n, oh, ow, c, m] += x[n, ih, iw, c] * w[kh, kw, c, m]
        y[:, oh, ow] += x[:, ih, iw, :, None] * w[kh, kw]
    return from_nhwc(y.reshape(g.batch, *g.output_hw, g.out_channels), g.data_format)


OP = Op(
    name="depthwise_conv2d_native",
    tf_name="DepthwiseConv2dNative",
    args=("input", "filter"),
    tensors=("input", "filter"),
    result="output",
    dtypes=DTYPES,
    validate=validate,
    plan=Plan,
    plan_gpu=plan_on_gpu,
    flops=flops,
    kernel=kernel,
    example=example,
    reference=reference,
)


@fill_doc
def depthwise_conv2d_native(
    input: Any,
    filter: Any,
    strides: Sequence[int],
    padding: str,
    explicit_paddings: Sequence[int] = (),
    data_format: str = "NHWC",
    dilations: Sequence[int] = (1, 1, 1, 1),
    *,
    n_threads: int | None = None,
    device: str | None = None,
) -> Any:
    """Depthwise 2-D convolution, forward (TensorFlow ``DepthwiseConv2dNative``).

    Each input channel ``c`` is convolved on its own with ``M`` filters: output
    channel ``c * M + m`` is the sum, over the taps, of input channel ``c`` under
    the window times ``filter[kh, kw, c, m]``.  Taps that land in the padding add
    nothing.  Semantics are TensorFlow's, with dilations honoured.

    Parameters
    ----------
    input : array_like
        4-D in ``data_format`` order; float16, bfloat16 (``ml_dtypes.bfloat16``),
        float32 or float64.
    filter : array_like
        ``[filter_height, filter_width, in_channels, channel_multiplier]``, same
        dtype as ``input``; ``in_channels`` must equal the input depth.
    %(strides)s
    %(padding)s
    %(explicit_paddings)s
    %(data_format)s
    %(dilations)s
    %(n_threads)s
    %(device)s

    Returns
    -------
    numpy.ndarray
        The output, 4-D in ``data_format`` order with ``in_channels *
        channel_multiplier`` channels, dtype of ``input``.  Half types are
        accumulated in float32 and rounded once.

    Raises
    ------
    %(raises)s

    See Also
    --------
    depthwise_conv2d_native_backprop_input : its gradient with respect to ``input``.
    depthwise_conv2d_native_backprop_filter : its gradient with respect to ``filter``.
    convviz.reference.depthwise_conv2d_native : the float64 NumPy reference.

    Notes
    -----
    ``y[n, oh, ow, c*M + m] = sum over kh, kw of
    input[n, oh*sh - pad_top + kh*dh, ow*sw - pad_left + kw*dw, c] * filter[kh, kw, c, m]``.

    %(nonfinite)s

    Examples
    --------
    Two channels, each summed over its own 2x2 windows, the second scaled by 10:

    >>> import numpy as np
    >>> import convviz
    >>> x = np.stack([np.arange(9.0).reshape(3, 3), np.ones((3, 3))], axis=-1)[None]
    >>> w = np.stack([np.ones((2, 2)), 10 * np.ones((2, 2))], axis=-1)[..., None]
    >>> y = convviz.depthwise_conv2d_native(x, w, strides=[1, 1], padding="VALID")
    >>> y[0, :, :, 0], y[0, :, :, 1]
    (array([[ 8., 12.],
           [20., 24.]]), array([[40., 40.],
           [40., 40.]]))
    """
    return OP.run(input, filter, strides, padding, explicit_paddings, data_format, dilations, n_threads,
                  device=device)
