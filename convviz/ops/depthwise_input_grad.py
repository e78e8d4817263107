"""The depthwise input gradient (TensorFlow ``DepthwiseConv2dNativeBackpropInput``), as one unit.

Here is what is the op's own: the public function and its documentation, its
kernel call (the Cython kernel ``_depthwise_input_grad``, C++ in
``_ext/depthwise_input_grad.cpp``), the GPU launcher (the dense input
gradient's CUDA kernel with one input channel per group), the float64
reference (``convviz.reference.depthwise_conv2d_native_backprop_input``) and the
:class:`~convviz.ops._op.Op` record that ties them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _validate as v
from .._backends import cpu, cuda
from ..geometry import ConvGeometry
from . import _depthwise_input_grad as kernel
from ._op import Call, Op

__all__ = ["depthwise_conv2d_native_backprop_input"]

# The kernel call: image, filter, result, then the window.
compute = cpu.window_compute(kernel.depthwise_input_grad, image_first=False)

cuda.declare_kernels(__file__, "depthwise_input_grad_rows", "depthwise_input_grad_strips")
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


def reference_sum(g: ConvGeometry, w: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """``dx[n, ih, iw, c] += sum_m dy[n, oh, ow, c, m] * w[kh, kw, c, m]`` in float64, over every tap
    that reads a real input cell: the loop of ``convviz.reference.depthwise_conv2d_native_backprop_input``."""
    dy = dy.reshape(dy.shape[:3] + (g.in_channels, g.multiplier))
    dx = np.zeros((g.batch, *g.input_hw, g.in_channels))
    for oh, ow, kh, kw, ih, iw in g.taps():
        dx[:, ih, iw] += np.einsum("ncm,cm->nc", dy[:, oh, ow], w[kh, kw])
    return dx


OP = Op.of_module(
    globals(), name="depthwise_conv2d_native_backprop_input", tf_name="DepthwiseConv2dNativeBackpropInput",
    args=("input_sizes", "filter", "out_backprop"), dtypes=v.FLOAT_DTYPES, depthwise=True,
    tf_notes="""\
Unlike TensorFlow's CPU kernel (which returns the dilation-1 result with SAME
padding), dilations are honoured.
""",
)


@OP.document
def depthwise_conv2d_native_backprop_input(
        input_sizes: Sequence[int] | np.ndarray, filter: Any, out_backprop: Any, strides: Sequence[int], padding: str,
        explicit_paddings: Sequence[int] = (), data_format: str = "NHWC", dilations: Sequence[int] = (1, 1, 1, 1), *,
        n_threads: int | None = None, device: str | None = None) -> Any:
    """Gradient of depthwise conv2d with respect to its input (``DepthwiseConv2dNativeBackpropInput``).

    For ``y = depthwise_conv2d_native(x, filter)`` with filter ``[KH, KW, C, M]``
    (output channel ``c * M + m``), returns ``dL/dx`` given ``out_backprop =
    dL/dy``: each output-gradient cell is scattered back, through each tap, to
    the input cell of its own channel that the tap read.  Unlike TensorFlow's
    CPU kernel this honours ``dilations`` (TensorFlow returns the dilation-1
    result with SAME padding).

    %(parameters_returns_raises)s

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
