"""The depthwise input gradient (TensorFlow ``DepthwiseConv2dNativeBackpropInput``), as one unit.

Here: the public function and its documentation, the validator (arguments ->
a :class:`Call`), the CPU plan around the Cython kernel ``_depthwise_input_grad``
(C++ in ``_ext/depthwise_input_grad.cpp``), the GPU launcher (the dense input
gradient's CUDA kernel with one input channel per group), the float64
reference (``convviz.reference.depthwise_conv2d_native_backprop_input``) and the
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
from . import _depthwise_input_grad as kernel
from ._docs import fill_doc
from ._op import Op, random_values, window_arguments
from .depthwise_forward import check_depthwise_filter

__all__ = ["depthwise_conv2d_native_backprop_input"]

DTYPES = v.FLOAT_DTYPES


@dataclass(frozen=True)
class Call:
    """A validated depthwise_conv2d_native_backprop_input call."""

    geometry: ConvGeometry
    filter: np.ndarray
    out_backprop: np.ndarray
    dtype: np.dtype
    n_threads: int


def validate(
    input_sizes: Any, filter: Any, out_backprop: Any, strides: Any, padding: Any, explicit_paddings: Any,
    data_format: Any, dilations: Any, n_threads: Any, op: str = "depthwise_conv2d_native_backprop_input",
    default_float: Any = np.float64, on_gpu: bool = False,
) -> Call:
    """Check every argument (see :func:`depthwise_conv2d_native_backprop_input`); build the geometry."""
    filter, out_backprop, dtype = v.tensor_pair(filter, "filter", out_backprop, op, DTYPES, default_float)
    sizes = v.as_int_list(input_sizes, "input_sizes", op)
    threads = v.resolve_n_threads(n_threads, op)
    window = v.validate_window(strides, padding, explicit_paddings, data_format, dilations, op)

    v.check_rank4(filter, "filter", op, "[filter_height, filter_width, in_channels, channel_multiplier]")
    v.check_rank4(out_backprop, "out_backprop", op, window.data_format)
    if len(sizes) != 4:
        raise InvalidArgumentError(f"{op}: input_sizes must have 4 values ({window.data_format}), got "
                                   f"{len(sizes)}: {list(sizes)}")
    v.check_range(sizes, "input_sizes", op, low=0)
    batch, height, width, channels = v.spatial(sizes, window)
    check_depthwise_filter(filter.shape, channels, "filter.shape", op)
    kernel_h, kernel_w, _, multiplier = filter.shape
    geometry = ConvGeometry.build(
        batch=batch, input_hw=(height, width), in_channels=channels, out_channels=channels * multiplier,
        kernel_hw=(kernel_h, kernel_w), strides=window.strides, dilations=window.dilations,
        padding=window.padding, explicit_paddings=window.pads, depthwise=True, data_format=window.data_format,
    )
    v.check_output_shape(geometry, out_backprop, "input_sizes, filter", op)
    v.check_allocation(geometry.input_shape, max(dtype.itemsize, 4), "the input gradient", op, on_gpu)
    return Call(geometry, filter, out_backprop, dtype, threads)


# Bound once: Plan.run is on the path of every call (module lookups cost ~0.1 us there).
_kernel = kernel.depthwise_input_grad
kernel_view = cpu.kernel_view


class Plan(cpu.ConvPlan):
    """Everything the CPU kernel needs that depends only on the geometry and dtype."""

    __slots__ = ()

    def __init__(self, call: Call) -> None:
        g = call.geometry
        super().__init__(g, call.dtype, g.input_shape, call.out_backprop.size == 0 or 0 in g.input_shape)

    def run(self, filt: np.ndarray, out_backprop: np.ndarray, n_threads: int) -> np.ndarray:
        if self.empty:
            return np.zeros(self.shape, dtype=self.dtype)  # nothing reaches the input
        result = cpu.empty_result(self.shape, self.dtype)
        dy = kernel_view(out_backprop)
        code = self.code
        _kernel(dy.transpose(0, 2, 3, 1) if self.nchw else dy, code, kernel_view(filt), code,
                result.transpose(0, 2, 3, 1) if self.nchw else result, code,
                *self.window, n_threads, cpu.ISA_CODE, self.f64, cpu.MIN_PARALLEL_WORK)
        return result


cuda.declare_kernels(Path(__file__).with_name("depthwise_input_grad.cu"),
                     *(f"depthwise_input_grad_rows<{t}>" for t in range(4)),
                     *(f"depthwise_input_grad_strips<{t}>" for t in range(4)))
# Input pixels per thread of the two kernels (DEPTHWISE_INPUT_ROW and _STRIP_ROW in
# depthwise_input_grad.cu), and the widest window the strips take (DEPTHWISE_INPUT_STRIP_KW).
GPU_ROW, GPU_STRIP_ROW, GPU_STRIP_KW = 4, 8, 7


def plan_on_gpu(call: Call) -> cuda.Reordered:
    """The CUDA launch for this call's signature: a row of input pixels per thread (through a
    register strip of the output gradient at stride and dilation 1, multiplier 1), or (arrays past
    32-bit offsets) the dense input gradient's kernel with the filter seen as [KH, KW, 1, C * M]."""
    g = call.geometry
    kh, kw, c, m = call.filter.shape

    strips = g.strides_hw == (1, 1) and g.dilations_hw == (1, 1) and m == 1 and kw <= GPU_STRIP_KW
    kernel, row = ("depthwise_input_grad_strips", GPU_STRIP_ROW) if strips else ("depthwise_input_grad_rows", GPU_ROW)

    def rows(cp, dy, w, dx, params, code):
        total = g.batch * g.input_hw[0] * cuda.tiles(g.input_hw[1], row) * c
        if not cuda.loop_fits(dy, w, dx, total=total):
            return None
        return cuda.loop_launch(cp, f"{kernel}<{code}>", params, total)

    plan = cuda.DensePlan("depthwise_conv2d_native_backprop_input", "input_grad", g, call.dtype, g.input_shape,
                          call.out_backprop, call.filter, images=(True, False, True),
                          second_shape=(kh, kw, 1, c * m), tiled=rows)
    return cuda.Reordered(plan, (1, 0))  # (filter, out_backprop) -> (out_backprop, filter)


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
    return (list(geometry.input_shape), random_values(rng, geometry.filter_shape, dtype),
            random_values(rng, geometry.output_shape, dtype), *window_arguments(geometry, padding))


def reference(
    input_sizes: Any, filter: Any, out_backprop: Any, strides: Any, padding: Any, explicit_paddings: Any = (),
    data_format: Any = "NHWC", dilations: Any = (1, 1, 1, 1),
) -> np.ndarray:
    """Float64 reference for :func:`depthwise_conv2d_native_backprop_input`
    (``convviz.reference.depthwise_conv2d_native_backprop_input``).

    Examples
    --------
    >>> import numpy as np
    >>> from convviz import reference
    >>> reference.depthwise_conv2d_native_backprop_input(
    ...     [1, 3, 3, 1], np.ones((2, 2, 1, 1)), np.ones((1, 2, 2, 1)), [1, 1, 1, 1], "VALID")[0, :, :, 0]
    array([[1., 2., 1.],
           [2., 4., 2.],
           [1., 2., 1.]])
    """
    call = validate(input_sizes, filter, out_backprop, strides, padding, explicit_paddings, data_format,
                    dilations, 1, op="reference.depthwise_conv2d_native_backprop_input")
    g = call.geometry
    w = call.filter.astype(np.float64)
    dy = to_nhwc(call.out_backprop.astype(np.float64), g.data_format)
    dy = dy.reshape(dy.shape[:3] + (g.in_channels, g.multiplier))
    dx = np.zeros((g.batch, *g.input_hw, g.in_channels))
    for oh, ow, kh, kw, ih, iw in taps(g):
        # dx[n, ih, iw, c] += sum_m dy[n, oh, ow, c, m] * w[kh, kw, c, m]
        dx[:, ih, iw] += np.einsum("ncm,cm->nc", dy[:, oh, ow], w[kh, kw])
    return from_nhwc(dx, g.data_format)


OP = Op(
    name="depthwise_conv2d_native_backprop_input",
    tf_name="DepthwiseConv2dNativeBackpropInput",
    args=("input_sizes", "filter", "out_backprop"),
    tensors=("filter", "out_backprop"),
    result="input gradient",
    dtypes=DTYPES,
    validate=validate,
    plan=Plan,
    plan_gpu=plan_on_gpu,
    flops=flops,
    kernel=kernel,
    example=example,
    reference=reference,
    tf_doc="""\
Notes
-----
Unlike TensorFlow's CPU kernel (which returns the dilation-1 result with SAME
padding), dilations are honoured.
""",
)


@fill_doc
def depthwise_conv2d_native_backprop_input(
    input_sizes: Sequence[int] | np.ndarray,
    filter: Any,
    out_backprop: Any,
    strides: Sequence[int],
    padding: str,
    explicit_paddings: Sequence[int] = (),
    data_format: str = "NHWC",
    dilations: Sequence[int] = (1, 1, 1, 1),
    *,
    n_threads: int | None = None,
    device: str | None = None,
) -> Any:
    """Gradient of depthwise conv2d with respect to its input (``DepthwiseConv2dNativeBackpropInput``).

    For ``y = depthwise_conv2d_native(x, filter)`` with filter ``[KH, KW, C, M]``
    (output channel ``c * M + m``), returns ``dL/dx`` given ``out_backprop =
    dL/dy``: each output-gradient cell is scattered back, through each tap, to
    the input cell of its own channel that the tap read.  Unlike TensorFlow's
    CPU kernel this honours ``dilations`` (TensorFlow returns the dilation-1
    result with SAME padding).

    Parameters
    ----------
    input_sizes : sequence of 4 ints
        Shape of the convolution's input, in ``data_format`` order.
    filter : array_like
        ``[filter_height, filter_width, in_channels, channel_multiplier]``;
        float16, bfloat16 (``ml_dtypes.bfloat16``), float32 or float64.
        ``in_channels`` must equal the input depth.
    out_backprop : array_like
        Gradient with respect to the output, 4-D in ``data_format`` order with
        ``in_channels * channel_multiplier`` channels; same dtype as ``filter``.
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
        The input gradient, shape ``input_sizes``, dtype of ``filter``.  Half
        types are accumulated in float32 and rounded once.

    Raises
    ------
    %(raises)s

    See Also
    --------
    depthwise_conv2d_native : the forward pass.
    conv2d_backprop_input : the dense input gradient.
    convviz.reference.depthwise_conv2d_native_backprop_input : the float64 NumPy reference.

    Notes
    -----
    ``dx[n, ih, iw, c] = sum over m and the (oh, ow, kh, kw) with
    ih = oh*sh - pad_top + kh*dh, iw = ow*sw - pad_left + kw*dw of
    dy[n, oh, ow, c*M + m] * filter[kh, kw, c, m]``.

    %(nonfinite)s

    Examples
    --------
    All-ones gradients: each input cell counts the (output cell, tap) pairs that
    read it, per channel.

    >>> import numpy as np
    >>> import convviz
    >>> dx = convviz.depthwise_conv2d_native_backprop_input(
    ...     [1, 4, 4, 2], np.ones((3, 3, 2, 1)), np.ones((1, 2, 2, 2)), strides=[2, 2], padding="SAME")
    >>> dx[0, :, :, 0]
    array([[1., 1., 2., 1.],
           [1., 1., 2., 1.],
           [2., 2., 4., 2.],
           [1., 1., 2., 1.]])
    """
    return OP.run(input_sizes, filter, out_backprop, strides, padding, explicit_paddings, data_format, dilations,
                  n_threads, device=device)
