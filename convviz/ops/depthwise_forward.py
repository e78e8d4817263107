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
from typing import Any

import numpy as np

from .. import _validate as v
from .._backends import cpu, cuda
from ..geometry import ConvGeometry
from . import _depthwise_forward as kernel
from ._op import Call, Op

__all__ = ["depthwise_conv2d_native"]

# The kernel call: image, filter, result, then the window.
compute = cpu.window_compute(kernel.depthwise_forward)

cuda.declare_kernels(__file__, "depthwise_forward_rows", "depthwise_forward_strips")
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
    """``y[n, oh, ow, c, m] += x[n, ih, iw, c] * w[kh, kw, c, m]`` in float64, over every tap
    that reads a real input cell: the loop of ``convviz.reference.depthwise_conv2d_native``."""
    y = np.zeros((g.batch, *g.output_hw, g.in_channels, g.multiplier))
    for oh, ow, kh, kw, ih, iw in g.taps():
        y[:, oh, ow] += x[:, ih, iw, :, None] * w[kh, kw]
    return y.reshape(g.batch, *g.output_hw, g.out_channels)


OP = Op.of_module(
    globals(), name="depthwise_conv2d_native", tf_name="DepthwiseConv2dNative",
    args=("input", "filter"), dtypes=v.FLOAT_DTYPES, depthwise=True,
)


@OP.document
def depthwise_conv2d_native(
        input: Any, filter: Any, strides: Sequence[int], padding: str, explicit_paddings: Sequence[int] = (),
        data_format: str = "NHWC", dilations: Sequence[int] = (1, 1, 1, 1), *, n_threads: int | None = None,
        device: str | None = None) -> Any:
    """Depthwise 2-D convolution, forward (TensorFlow ``DepthwiseConv2dNative``).

    Each input channel ``c`` is convolved on its own with ``M`` filters: output
    channel ``c * M + m`` is the sum, over the taps, of input channel ``c`` under
    the window times ``filter[kh, kw, c, m]``.  Taps that land in the padding add
    nothing.  Semantics are TensorFlow's, with dilations honoured.

    %(parameters_returns_raises)s

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
