"""The depthwise conv2d forward pass (TensorFlow ``DepthwiseConv2dNative``), as one unit.

Here is what is the op's own: the public function and its documentation, its
kernel call (the Cython kernel ``_depthwise_forward``, C++ in
``_ext/depthwise_forward.cpp``), the GPU launcher (the dense forward's
CUDA kernel with one input channel per group), the float64 reference
(``convviz.reference.depthwise_conv2d_native``) and the
:class:`~convviz.ops._op.Op` record that ties them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import _validate as v
from .._backends import cpu, cuda
from ..geometry import ConvGeometry
from . import _depthwise_forward as kernel
from ._docs import fill_doc
from ._op import Call, Op

__all__ = ["depthwise_conv2d_native"]


# Bound once: compute is on the path of every call (module lookups cost ~0.1 us there).
_kernel = kernel.depthwise_forward


def compute(plan: cpu.ConvPlan, x: np.ndarray, filt: np.ndarray, y: np.ndarray, n_threads: int) -> None:
    """The kernel call."""
    code = plan.code
    _kernel(x, code, filt, code, y, code, *plan.window, n_threads, cpu.ISA_CODE, plan.f64, cpu.MIN_PARALLEL_WORK)


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


def reference_sum(g: ConvGeometry, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The output of :func:`depthwise_conv2d_native` in float64 with loops
    (``convviz.reference.depthwise_conv2d_native`` validates the op's arguments and gives them here in
    float64, activations in NHWC), summing ``y[n, oh, ow, c, m] += x[n, ih, iw, c] * w[kh, kw, c, m]``
    over every tap that reads a real input cell.

    Examples
    --------
    >>> import numpy as np
    >>> from convviz import reference
    >>> reference.depthwise_conv2d_native(np.ones((1, 3, 3, 2)), np.ones((2, 2, 2, 1)),
    ...                                   [1, 1, 1, 1], "VALID").shape
    (1, 2, 2, 2)
    """
    y = np.zeros((g.batch, *g.output_hw, g.in_channels, g.multiplier))
    for oh, ow, kh, kw, ih, iw in g.taps():
        y[:, oh, ow] += x[:, ih, iw, :, None] * w[kh, kw]
    return y.reshape(g.batch, *g.output_hw, g.out_channels)


OP = Op.of_module(
    globals(), name="depthwise_conv2d_native", tf_name="DepthwiseConv2dNative",
    args=("input", "filter"), dtypes=v.FLOAT_DTYPES, depthwise=True,
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
