"""The conv2d forward pass (TensorFlow ``Conv2D``), as one unit.

Here is what is the op's own: the public function and its documentation, its
check beyond the common validation, its kernel call (the Cython kernel ``_forward``,
C++ in ``_ext/conv2d_forward.cpp``), the GPU launcher (``forward.cu``), the float64
reference (``convviz.reference.conv2d``) and the :class:`~convviz.ops._op.Op`
record that ties them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _validate as v
from .._backends import cpu, cuda
from ..geometry import ConvGeometry
from . import _forward as kernel
from ._op import Call, Op

__all__ = ["conv2d"]


def check(call: Call, op: str, on_gpu: bool) -> None:
    """The CPU kernel stages each input row it reads, padding included, per kernel row:
    refuse a window so much wider than the input that those rows would not fit."""
    if on_gpu:
        return
    g = call.geometry
    cols, in_channels = g.cols, g.in_channels
    staged = (max(g.output_hw[1] - 1, 0) * cols.stride + cols.effective_kernel_size) * in_channels
    v.check_scratch(staged * g.kernel_hw[0] * (8 if call.dtype == np.float64 else 4),
                    "the kernel's staged input rows", op,
                    f"the window (stride {cols.stride}, dilation {cols.dilation}) is far wider than "
                    f"the input's {g.input_hw[1]} columns")


# Bound once: compute is on the path of every call (module lookups cost ~0.1 us there).
_kernel = kernel.forward
_kernel_int32 = kernel.forward_int32


def compute(plan: cpu.ConvPlan, x: np.ndarray, filt: np.ndarray, y: np.ndarray, n_threads: int) -> None:
    """The kernel call: int32 on its own (wrapping) kernel, bfloat16 on AMX tiles where they run."""
    if plan.int32:
        _kernel_int32(x, filt, y, plan.col_ranges, *plan.ints, n_threads, cpu.MIN_PARALLEL_WORK)
        return
    code = plan.code
    _kernel(x, code, filt, code, y, code, *plan.ints, n_threads, cpu.ISA_CODE, plan.f64, cpu.MIN_PARALLEL_WORK,
            code == cpu.BFLOAT16_CODE and cpu.amx_in_use())


cuda.declare_kernels(__file__, "conv2d_forward", "conv2d_forward_narrow", "conv2d_forward_tiled",
                     "merge_chunk_partials", types=5)


def plan_on_gpu(call: Call) -> cuda.DensePlan:
    """The CUDA launch (tiled, or one thread per output element) for this call's signature."""
    g = call.geometry

    def tiled(cp, x, w, y, params, code):
        cout_g = g.out_channels // g.groups
        if not cuda.tiled_fits(x, w, y, columns=cout_g, groups=g.groups):
            return None
        pixels = g.batch * g.output_hw[0] * g.output_hw[1]
        grid = (cuda.tiles(pixels, cuda.TILE_M), cuda.tiles(cout_g, cuda.TILE_N), g.groups)
        terms = g.kernel_hw[0] * g.kernel_hw[1] * (g.in_channels // g.groups)
        launch = cuda.split_launch(cp, cuda.kernel(f"conv2d_forward_tiled<{code}>"), grid, params, terms,
                                   int(np.prod(g.output_shape)), code)
        return lambda x, w, y: launch(x, cp.ascontiguousarray(w), y)

    return cuda.DensePlan("conv2d", "conv2d_forward", g, call.dtype, g.output_shape,
                          call.input, call.filter, images=(True, False, True), tiled=tiled)


def reference_sum(g: ConvGeometry, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``y[n, oh, ow, co] += sum_ci x[n, ih, iw, ci] * w[kh, kw, ci, co]`` in float64, over every tap
    that reads a real input cell: the loop of ``convviz.reference.conv2d``."""
    y = np.zeros((g.batch, *g.output_hw, g.out_channels))
    for oh, ow, kh, kw, ih, iw in g.taps():
        for ins, outs in g.group_slices():
            y[:, oh, ow, outs] += x[:, ih, iw, ins] @ w[kh, kw, :, outs]
    return y


OP = Op.of_module(
    globals(), name="conv2d", tf_name="Conv2D",
    explorer_aliases=("forward",),
    args=("input", "filter"), dtypes=v.FLOAT_AND_INT32_DTYPES, depthwise=False,
    tf_attrs=("use_cudnn_on_gpu",),
)


@OP.document
def conv2d(
        input: Any, filter: Any, strides: Sequence[int], padding: str, explicit_paddings: Sequence[int] = (),
        data_format: str = "NHWC", dilations: Sequence[int] = (1, 1, 1, 1), *, n_threads: int | None = None,
        device: str | None = None) -> Any:
    """2-D convolution, forward (TensorFlow ``Conv2D``): a cross-correlation, grouped.

    Each output cell is the sum, over the filter's taps and the group's input
    channels, of the input cell a tap lands on times that tap's weight; taps
    that land in the padding add nothing.  Semantics are TensorFlow's for every
    padding, layout, stride, dilation, group count and dtype.  This is the
    forward pass whose gradients are :func:`conv2d_backprop_input` (with
    respect to ``input``) and the filter gradient.

    %(parameters_returns_raises)s

    See Also
    --------
    conv2d_backprop_input : its gradient with respect to ``input``.
    convviz.geometry.ConvGeometry : the arithmetic behind the shapes.
    convviz.reference.conv2d : the float64 NumPy reference.

    Notes
    -----
    ``y[n, oh, ow, co] = sum over kh, kw, ci of
    input[n, oh*sh - pad_top + kh*dh, ow*sw - pad_left + kw*dw, g*C_g + ci] * filter[kh, kw, ci, co]``
    with ``g = co // (out_channels / groups)`` and ``C_g = filter.shape[2]``;
    the output size per axis is ``ceil(in / s)`` (SAME),
    ``(in - (k-1)*d - 1) // s + 1`` (VALID) or the same with the explicit pads.

    %(nonfinite)s

    Examples
    --------
    A 2x2 box filter sums each 2x2 window:

    >>> import numpy as np
    >>> import convviz
    >>> x = np.arange(9.0).reshape(1, 3, 3, 1)
    >>> convviz.conv2d(x, np.ones((2, 2, 1, 1)), strides=[1, 1], padding="VALID")[0, :, :, 0]
    array([[ 8., 12.],
           [20., 24.]])

    SAME keeps the size (a stride of 1); the window then also covers padding:

    >>> convviz.conv2d(x, np.ones((2, 2, 1, 1)), strides=[1, 1], padding="SAME")[0, :, :, 0]
    array([[ 8., 12.,  7.],
           [20., 24., 13.],
           [13., 15.,  8.]])
    """
    return OP.run(input, filter, strides, padding, explicit_paddings, data_format, dilations, n_threads,
                  device=device)
