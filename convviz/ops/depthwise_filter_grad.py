"""The depthwise filter gradient (TensorFlow ``DepthwiseConv2dNativeBackpropFilter``), as one unit.

Here is what is the op's own: the public function and its documentation, its
kernel call (the Cython kernel ``_depthwise_filter_grad``, C++ in
``_ext/depthwise_filter_grad*``) and its reduction's blocks, the GPU launcher,
the :class:`~convviz.ops._op.Op` record, and the float64 reference
(``convviz.reference.depthwise_conv2d_native_backprop_filter``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _validate as v
from .._backends import cpu, cuda
from ..geometry import ConvGeometry
from . import _depthwise_filter_grad as kernel
from ._op import Call, Op

__all__ = ["depthwise_conv2d_native_backprop_filter"]


# Partial sums: about ROWS_PER_BLOCK rows of out_backprop per block (fewer
# blocks re-read fewer input rows at block edges), at least MIN_REDUCTION_BLOCKS
# where there are that many rows (blocks are the units the threads share: 3
# blocks on 2 threads left one idle a third of the time; 8 share evenly on 1, 2,
# 4 or 8), at most MAX_REDUCTION_BLOCKS blocks and REDUCTION_BUDGET_BYTES for all
# of them.  All constants, never the thread count, so the summation order (and
# every bit of the result) does not depend on threads.
ROWS_PER_BLOCK = 16
MIN_REDUCTION_BLOCKS = 8
MAX_REDUCTION_BLOCKS = 64
REDUCTION_BUDGET_BYTES = 8 * 2**20
# The GPU's pixel chunk: fixed, so the sum's grouping never depends on the
# device; small, so that even a single image gives every SM blocks to run.
GPU_CHUNK_PIXELS = 256
# Taps per thread of the GPU kernel (DWF_TAPS of depthwise_filter_grad.cu).
PHASE_TAPS = 9


def reduction_blocks(geometry: ConvGeometry, itemsize: int) -> int:
    """How many blocks the reduction uses (independent of threads)."""
    rows = geometry.batch * geometry.rows.output_size
    filter_size = int(np.prod(geometry.filter_shape))
    by_budget = max(1, REDUCTION_BUDGET_BYTES // max(1, filter_size * itemsize))
    return max(1, min(max(rows // ROWS_PER_BLOCK, min(rows, MIN_REDUCTION_BLOCKS)), MAX_REDUCTION_BLOCKS, by_budget))


def prepare(call: Call, fast: bool) -> int:
    """The reduction's block count (``plan.extra``)."""
    return reduction_blocks(call.geometry, 8 if call.dtype == np.float64 else 4)


# Bound once: compute is on the path of every call (module lookups cost ~0.1 us there).
_kernel = kernel.depthwise_filter_grad


def compute(plan: cpu.ConvPlan, x: np.ndarray, dy: np.ndarray, dw: np.ndarray, n_threads: int) -> None:
    """The kernel call."""
    code = plan.code
    _kernel(x, code, dy, code, dw, code, plan.col_ranges, *plan.window, plan.extra, n_threads, cpu.ISA_CODE,
            plan.f64, cpu.MIN_PARALLEL_WORK)


cuda.declare_kernels(__file__, "depthwise_filter_grad_phases", "depthwise_filter_grad_phases_narrow",
                     "merge_chunk_partials")


class GpuPlan:
    """The two CUDA passes (fixed pixel chunks, then their sum in chunk order) for one call's
    signature: parameters uploaded once, ``run(input, out_backprop)`` launches."""

    def __init__(self, call: Call) -> None:
        self.cp = cp = cuda.require_device("depthwise_conv2d_native_backprop_filter")
        g = self.geometry = call.geometry
        self.dtype, self.nchw = call.dtype, g.data_format == "NCHW"
        self.empty = call.out_backprop.size == 0 or call.input.size == 0
        if self.empty:
            return
        self.code = code = cuda.TYPE_CODES[call.dtype]
        x, dy = self.views(call.input, call.out_backprop)
        self.taps = g.kernel_hw[0] * g.kernel_hw[1]
        self.cm = g.in_channels * g.multiplier
        pixels = g.batch * g.output_hw[0] * g.output_hw[1]
        self.chunks = (pixels + GPU_CHUNK_PIXELS - 1) // GPU_CHUNK_PIXELS
        params = [g.batch, *g.input_hw, g.in_channels, g.multiplier, *g.output_hw, *g.kernel_hw, 0, 0, 0,
                  *g.strides_hw, *g.dilations_hw, g.rows.pad_before, g.cols.pad_before,
                  *cuda.element_strides(x), *cuda.element_strides(dy), GPU_CHUNK_PIXELS]
        # The int kernel also walks pixel indices up to a chunk past the last pixel.
        narrow = cuda.offsets_fit(x, dy, count=max(self.chunks * self.taps * self.cm + self.taps * self.cm,
                                                   pixels + GPU_CHUNK_PIXELS))
        # A block of 256 threads: 32 channels by 8 pixel phases (NHWC, lanes along the channels),
        # or 8 channels by 32 phases (NCHW, lanes along a channel's contiguous pixels).
        q_width, phases = (8, 32) if self.nchw else (32, 8)
        params += [q_width, phases, int(self.nchw)]
        self.threads = q_width * phases
        pairs = -(-self.taps // PHASE_TAPS) * -(-self.cm // q_width)
        self.grid = (self.chunks, min(pairs, cuda.MAX_GRID_Y))
        self.params = cuda.int64_array(cp, params)
        self.partial_pass = cuda.kernel(f"depthwise_filter_grad_phases{'_narrow' if narrow else ''}<{code}>")

    def views(self, x: Any, dy: Any) -> tuple[Any, Any]:
        cp = self.cp
        return (cuda.nhwc(cuda.device_array(cp, x, self.dtype), self.nchw),
                cuda.nhwc(cuda.device_array(cp, dy, self.dtype), self.nchw))

    def run(self, x: Any, dy: Any) -> Any:
        cp = self.cp
        if self.empty:
            return cp.zeros(self.geometry.filter_shape, dtype=self.dtype)
        x, dy = self.views(x, dy)
        out, store = cuda.result_array(cp, self.geometry.filter_shape, self.dtype)
        partial = cp.empty((self.chunks, self.taps, self.cm), dtype=cp.float64 if self.code == 3 else cp.float32)
        self.partial_pass(self.grid, (self.threads,), (x, dy, partial, self.params))
        cuda.merge_chunks(cp, partial, store, self.code)
        return out


def reference_sum(g: ConvGeometry, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """``dw[kh, kw, c, m] += sum_n x[n, ih, iw, c] * dy[n, oh, ow, c, m]`` in float64, over every tap
    that reads a real input cell: the loop of ``convviz.reference.depthwise_conv2d_native_backprop_filter``."""
    dy = dy.reshape(dy.shape[:3] + (g.in_channels, g.multiplier))
    dw = np.zeros(g.filter_shape)
    for oh, ow, kh, kw, ih, iw in g.taps():
        dw[kh, kw] += np.einsum("nc,ncm->cm", x[:, ih, iw, :], dy[:, oh, ow])
    return dw


def plan_on_gpu(call: Call) -> GpuPlan:
    """The GPU plan of this call's signature."""
    return GpuPlan(call)


OP = Op.of_module(
    globals(), name="depthwise_conv2d_native_backprop_filter", tf_name="DepthwiseConv2dNativeBackpropFilter",
    explorer_aliases=("depthwise_filter_grad", "filter_grad"),
    args=("input", "filter_sizes", "out_backprop"), dtypes=v.FLOAT_DTYPES, depthwise=True,
    tf_notes="""\
Unlike TensorFlow's CPU kernel, dilations are honoured and row and column
strides may differ.
""",
    tf_examples="""\
Examples
--------
With dilation 2 the 3x3 kernel spans 5x5; on an all-ones 5x5 input each
tap's gradient counts the output cells for which it lands on a real pixel:

>>> import numpy as np
>>> from convviz.compat.tf import raw_ops
>>> raw_ops.DepthwiseConv2dNativeBackpropFilter(
...     input=np.ones((1, 5, 5, 2), np.float32), filter_sizes=[3, 3, 2, 1],
...     out_backprop=np.ones((1, 5, 5, 2), np.float32), strides=[1, 1, 1, 1],
...     padding="SAME", dilations=[1, 2, 2, 1])[:, :, 0, 0]
array([[ 9., 15.,  9.],
       [15., 25., 15.],
       [ 9., 15.,  9.]], dtype=float32)
""",
)


@OP.document
def depthwise_conv2d_native_backprop_filter(
        input: Any, filter_sizes: Sequence[int] | np.ndarray, out_backprop: Any, strides: Sequence[int], padding: str,
        explicit_paddings: Sequence[int] = (), data_format: str = "NHWC", dilations: Sequence[int] = (1, 1, 1, 1), *,
        n_threads: int | None = None, device: str | None = None) -> Any:
    """Gradient of depthwise conv2d with respect to its filter (``DepthwiseConv2dNativeBackpropFilter``).

    For ``y = depthwise_conv2d(input, filter)`` with filter
    ``[KH, KW, C, multiplier]`` (output channel ``c * multiplier + m``), returns
    ``dL/dfilter`` given ``out_backprop = dL/dy``: for each tap, the sum over every
    output cell of the input cell that tap read times the output gradient.
    Unlike TensorFlow's CPU kernel this honours ``dilations`` (TensorFlow ignores
    them there and returns wrong values with SAME padding) and accepts unequal
    row and column strides.

    %(parameters_returns_raises)s

    See Also
    --------
    conv2d_backprop_input
    convviz.reference.depthwise_conv2d_native_backprop_filter

    Notes
    -----
    ``dW[kh, kw, c, m] = sum over n, oh, ow of
    input[n, oh*sh - pad_top + kh*dh, ow*sw - pad_left + kw*dw, c] * dy[n, oh, ow, c*M + m]``,
    where taps that land in the padding contribute nothing.  Partial sums over
    blocks of the reduction are merged in a fixed order, whatever ``n_threads``.

    %(nonfinite)s

    Examples
    --------
    With an all-ones input and out_backprop, each tap's gradient counts the
    output cells whose window puts that tap on a real (non-padding) pixel:

    >>> import numpy as np
    >>> import convviz
    >>> dw = convviz.depthwise_conv2d_native_backprop_filter(
    ...     np.ones((1, 4, 4, 1)), [3, 3, 1, 1], np.ones((1, 4, 4, 1)),
    ...     strides=[1, 1], padding="SAME")
    >>> dw[:, :, 0, 0]
    array([[ 9., 12.,  9.],
           [12., 16., 12.],
           [ 9., 12.,  9.]])
    """
    return OP.run(input, filter_sizes, out_backprop, strides, padding, explicit_paddings,
                  data_format, dilations, n_threads, device=device)
