"""The conv2d filter gradient (TensorFlow ``Conv2DBackpropFilter``), as one unit.

Here is what is the op's own: the public function and its documentation, its
kernel call (the Cython kernel ``_filter_grad``, C++ in
``_ext/conv2d_filter_grad.cpp``), the GPU launcher (``filter_grad.cu``), the
float64 reference (``convviz.reference.conv2d_backprop_filter``) and the
:class:`~convviz.ops._op.Op` record that ties them together.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _validate as v
from .._backends import cpu, cuda
from ..geometry import ConvGeometry
from . import _filter_grad as kernel
from . import _forward as forward_kernel
from ._op import Call, Op

__all__ = ["conv2d_backprop_filter"]


# Bound once: compute is on the path of every call (module lookups cost ~0.1 us there).
_kernel = kernel.filter_grad
_kernel_amx = kernel.filter_grad_amx
_forward_kernel = forward_kernel.forward
_record_scratch = kernel.record_scratch_bytes

# The most output pixels a 1x1 filter gradient runs on the forward kernel with, and
# the fewest multiply-adds (below, the transposed copy and a second kernel call cost
# more than they save: 8x8 64 -> 64 took 1.5x the time).
FORWARD_MAX_PIXELS = 64
FORWARD_MIN_TERMS = 1 << 20


# The most output channels (float32) of a 1x1 filter gradient run with x and dy swapped.
SWAPPED_MAX_OUT_CHANNELS = 8

# How a call's signature runs (``plan.extra``): the filter gradient's kernel (None),
# the forward kernel (:func:`_short_sum_on_forward`), or its own kernel with x and dy
# swapped (:func:`_few_outputs_swapped`).
ON_FORWARD, SWAPPED = "forward", "swapped"


def prepare(call: Call, fast: bool) -> str | None:
    """How this call's signature runs (ON_FORWARD, SWAPPED or None: see
    :func:`_short_sum_on_forward` and :func:`_few_outputs_swapped`)."""
    if _short_sum_on_forward(call):
        return ON_FORWARD
    return SWAPPED if _few_outputs_swapped(call) else None


def _few_outputs_swapped(call: Call) -> bool:
    """Whether a 1x1 filter gradient with few output channels (at most
    SWAPPED_MAX_OUT_CHANNELS, float32, at least 16 input channels; stride 1, no
    padding, one group) runs with x and dy swapped: ``dw[ci, co] = sum over pixels
    of x[p, ci] * dy[p, co]`` is the transpose of the gradient that takes dy as its
    input and x as its output gradient, and the kernel writes it through dw's
    strides, transposed.  Its tiles then run over x's channels in whole vectors,
    where 2 output channels filled 2 of a vector's 16 lanes (a U-Net's 64 -> 2
    head).  The same terms in the same order: the same bits.  In one process,
    alternating, 2 threads: 256x256 64 -> 2 0.43x the time, 128x128 32 -> 1 0.33x,
    56x56 64 -> 8 0.41x, 64x64 128 -> 3 0.69x; AVX2 0.45-0.81x; 16 output channels
    (a whole vector) 1.15x, float64 0.90-1.23x: not swapped."""
    g = call.geometry
    return (g.kernel_hw == (1, 1) and g.strides_hw == (1, 1) and g.groups == 1 and not any(g.pads)
            and call.dtype == np.float32 and g.out_channels <= SWAPPED_MAX_OUT_CHANNELS
            and g.in_channels >= 16)


def _short_sum_on_forward(call: Call) -> bool:
    """Whether this call's signature runs on the forward kernel: a 1x1 filter, one
    group, no padding, float32 or float64, at most FORWARD_MAX_PIXELS output
    pixels (a network's last layers at batch 1: 7x7), more output channels than
    input channels and at least FORWARD_MIN_TERMS terms.  Then ``dw[ci, co] = sum over
    pixels p of x[p, ci] * dy[p, co]`` is a forward pass over a one-row image of
    C_in pixels with the pixels as its channels (x transposed) and dy as the 1x1
    filter: the forward kernel's 6 x 4 tiles sum the short reduction where the
    filter gradient's tiles (a few input channels by 2 vectors, the sum over 49
    pixels) spent most of their time loading and storing.  The same terms in the
    same order: the same bits.  In one process, alternating, 8 rounds, 2 threads:
    7x7 160 -> 960 0.59x the time, 192 -> 1152 0.71x, 320 -> 1280 0.68x, 14x14
    1024 -> 2048 at stride 2 0.78x, float64 160 -> 960 0.61x.  With fewer output
    channels than input channels the forward kernel's filter (dy) is smaller than
    its one-row image (x transposed) and it runs that row on one thread (7x7 960 ->
    160 1.6x the time); at 14x14 (196 pixels) it was slower (1.06-1.21x), at 28x28
    2.6x."""
    g = call.geometry
    pixels = g.batch * g.output_hw[0] * g.output_hw[1]
    return (g.kernel_hw == (1, 1) and g.groups == 1 and not any(g.pads)
            and call.dtype in (np.float32, np.float64) and 0 < pixels <= FORWARD_MAX_PIXELS
            and g.out_channels > g.in_channels and pixels * g.in_channels * g.out_channels >= FORWARD_MIN_TERMS)


def _run_on_forward_kernel(plan: cpu.ConvPlan, x: np.ndarray, dy: np.ndarray, dw: np.ndarray, n_threads: int) -> None:
    """dw of a short 1x1 filter gradient as one forward pass (see :func:`_short_sum_on_forward`)."""
    stride_h, stride_w = plan.window[:2]
    out_h, out_w, c_in, c_out = dy.shape[1], dy.shape[2], x.shape[3], dy.shape[3]
    pixels = x.shape[0] * out_h * out_w
    # x's pixels that the output reads (every stride-th), transposed: [C_in][pixels].
    rows = np.ascontiguousarray(x[:, ::stride_h, ::stride_w][:, :out_h, :out_w].reshape(pixels, c_in).T)
    taps = np.ascontiguousarray(dy).reshape(1, 1, pixels, c_out)
    code = plan.code  # dw [1, 1, C_in, C_out] is the forward pass's output [1, 1, C_in pixels, C_out]
    _record_scratch(_forward_kernel(rows.reshape(1, 1, c_in, pixels), code, taps, code, dw, code,
                                    1, 1, 1, 1, 0, 0, 1, n_threads, cpu.ISA_CODE, plan.f64, cpu.MIN_PARALLEL_WORK))


#: The longest row of pixels :func:`pixel_rows` makes (the AMX kernel stages a chunk of rows).
AMX_MAX_ROW_PIXELS = 512


def _fill(p: int) -> float:
    """A row of p pixels' share of the 32-pixel steps the tiles take it in."""
    return p / (-(-p // 32) * 32)


@functools.lru_cache(maxsize=256)
def _row_length(pixels: int, columns: int) -> int | None:
    """The row length for :func:`pixel_rows` (a search over the divisors: cached, a loop of
    calls pays it once), or ``None`` where rows of ``columns`` fill the steps as well."""
    best = max((p for p in range(1, min(pixels, AMX_MAX_ROW_PIXELS) + 1) if pixels % p == 0),
               key=lambda p: (_fill(p), p))
    return best if _fill(best) > _fill(columns) + 0.01 else None


def pixel_rows(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A 1x1, stride-1, unpadded filter gradient's x and dy (logical NHWC) as views of
    ``(1, rows, P, C)``: ``dw[ci, co]`` sums ``x[p, ci] * dy[p, co]`` over all pixels p, in
    whatever rows they come, and the AMX tiles take a row's pixels 32 at a time, padding the
    last 32 -- a 7-column row filled 7 of 32 (22% of the tiles' work useful).  P divides the
    pixels, at most AMX_MAX_ROW_PIXELS, filling its 32-pixel steps best (then the longest);
    ``None`` where the rows already fill them as well, or x's pixels are not one stride apart.

    >>> x = np.zeros((8, 7, 7, 16)); dy = np.zeros((8, 7, 7, 32))
    >>> [a.shape for a in pixel_rows(x, dy)]  # 392 pixels: one row, 392 of 416 useful
    [(1, 1, 392, 16), (1, 1, 392, 32)]
    """
    n, h, w, c = x.shape
    pixels = n * h * w
    if dy.shape[:3] != x.shape[:3] or pixels == 0:
        return None
    best = _row_length(pixels, w)
    if best is None:
        return None
    for a in (x, dy):
        step = a.strides[2]
        if a.strides[1] != w * step or a.strides[0] != h * w * step:  # pixels not one stride apart
            return None
    # (then a reshape is a view: no copy)
    return x.reshape(1, pixels // best, best, x.shape[3]), dy.reshape(1, pixels // best, best, dy.shape[3])


def compute(plan: cpu.ConvPlan, x: np.ndarray, dy: np.ndarray, dw: np.ndarray, n_threads: int) -> None:
    """The kernel call: bfloat16 on AMX tiles where they run and the call suits them
    (a 1x1 filter's pixels in rows that fill the tiles, :func:`pixel_rows`); a short 1x1
    sum on the forward kernel, a 1x1 gradient with few output channels with x and dy
    swapped (:func:`prepare`)."""
    if plan.extra == ON_FORWARD:
        return _run_on_forward_kernel(plan, x, dy, dw, n_threads)
    if plan.extra == SWAPPED:  # (dw transposed: the kernel writes through any strides)
        x, dy, dw = dy, x, dw.transpose(0, 1, 3, 2)
    code = plan.code
    if code == cpu.BFLOAT16_CODE and cpu.amx_in_use():
        amx_x, amx_dy = x, dy
        if dw.shape[:2] == (1, 1) and plan.window[:2] == (1, 1) and not any(plan.window[4:]):
            amx_x, amx_dy = pixel_rows(x, dy) or (x, dy)
        if _kernel_amx(amx_x, amx_dy, dw, code, *plan.ints, n_threads, cpu.MIN_PARALLEL_WORK) >= 0:
            return  # (else -1: nothing written)
    _kernel(x, code, dy, code, dw, code, plan.col_ranges, *plan.ints, n_threads, cpu.ISA_CODE, plan.f64,
            cpu.MIN_PARALLEL_WORK)


cuda.declare_kernels(__file__, "conv2d_filter_grad", "conv2d_filter_grad_narrow", "conv2d_filter_grad_tiled",
                     "merge_chunk_partials")


def split_reduction(rows: int, columns: int, groups: int, pixels: int) -> tuple[int, int]:
    """``(chunks, pixels per chunk)`` of the tiled filter gradient's split sum over pixels.

    Enough chunks that the product's tiles times the chunks make about
    ``cuda.SPLIT_TARGET_BLOCKS`` blocks, none shorter than ``cuda.MIN_CHUNK_PIXELS`` pixels (a
    multiple of the 16-term step), and no more than a grid holds.  A function of the shape
    alone: the same grouping of the sum, so the same bits, on every device.

    >>> split_reduction(rows=576, columns=64, groups=1, pixels=8 * 56 * 56)
    (98, 256)
    """
    tiles = cuda.tiles(rows, cuda.TILE_M) * cuda.tiles(columns, cuda.TILE_N) * groups
    wanted = max(1, cuda.SPLIT_TARGET_BLOCKS // tiles)
    per_chunk = max(cuda.MIN_CHUNK_PIXELS, cuda.tiles(cuda.tiles(pixels, wanted), 16) * 16)
    per_chunk = max(per_chunk, cuda.tiles(pixels, cuda.MAX_GRID_Z // groups))
    return cuda.tiles(pixels, per_chunk), per_chunk


def plan_on_gpu(call: Call) -> cuda.DensePlan:
    """The CUDA launches (tiled partial sums over pixel chunks, then their sum in chunk
    order; or one thread per filter-gradient element) for this call's signature."""
    g = call.geometry

    def tiled(cp, x, dy, dw, params, code):
        cin_g, cout_g = g.in_channels // g.groups, g.out_channels // g.groups
        if not cuda.tiled_fits(x, dy, dw, columns=cout_g, groups=g.groups):
            return None
        rows = g.kernel_hw[0] * g.kernel_hw[1] * cin_g
        chunks, per_chunk = split_reduction(rows, cout_g, g.groups, g.batch * g.output_hw[0] * g.output_hw[1])
        grid = (cuda.tiles(rows, cuda.TILE_M), cuda.tiles(cout_g, cuda.TILE_N), g.groups)
        return cuda.chunked_launch(cp, cuda.kernel(f"conv2d_filter_grad_tiled<{code}>"), grid, params, chunks,
                                   per_chunk, rows * g.out_channels, code)

    return cuda.DensePlan("conv2d_backprop_filter", "conv2d_filter_grad", g, call.dtype, g.filter_shape,
                          call.input, call.out_backprop, images=(True, True, False), tiled=tiled)


def reference_sum(g: ConvGeometry, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """``dw[kh, kw, ci, co] += sum_n x[n, ih, iw, ci] * dy[n, oh, ow, co]`` in float64, over every tap
    that reads a real input cell: the loop of ``convviz.reference.conv2d_backprop_filter``."""
    dw = np.zeros(g.filter_shape)
    for oh, ow, kh, kw, ih, iw in g.taps():
        for ins, outs in g.group_slices():
            dw[kh, kw, :, outs] += x[:, ih, iw, ins].T @ dy[:, oh, ow, outs]
    return dw


OP = Op.of_module(
    globals(), name="conv2d_backprop_filter", tf_name="Conv2DBackpropFilter",
    args=("input", "filter_sizes", "out_backprop"), dtypes=v.FLOAT_DTYPES, depthwise=False,
    tf_attrs=("use_cudnn_on_gpu",),
)


@OP.document
def conv2d_backprop_filter(
        input: Any, filter_sizes: Sequence[int] | np.ndarray, out_backprop: Any, strides: Sequence[int], padding: str,
        explicit_paddings: Sequence[int] = (), data_format: str = "NHWC", dilations: Sequence[int] = (1, 1, 1, 1), *,
        n_threads: int | None = None, device: str | None = None) -> Any:
    """Gradient of conv2d with respect to its filter (TensorFlow ``Conv2DBackpropFilter``).

    Computes ``dL/dW`` for ``y = conv2d(input, W)`` given ``out_backprop = dL/dy``:
    for each tap, the correlation of the input with the output gradient -- every
    output cell adds the input cell that tap read, times its gradient.
    Semantics are TensorFlow's for every padding, layout, stride, dilation, group
    count and dtype.

    %(parameters_returns_raises)s

    See Also
    --------
    conv2d : the forward pass.
    conv2d_backprop_input : the gradient with respect to the input.
    convviz.reference.conv2d_backprop_filter : the float64 NumPy reference.

    Notes
    -----
    ``dW[kh, kw, ci, co] = sum over n, oh, ow of
    input[n, oh*sh - pad_top + kh*dh, ow*sw - pad_left + kw*dw, g*C_g + ci] * dy[n, oh, ow, co]``
    with ``g = co // (out_channels / groups)`` and ``C_g = filter_sizes[2]``;
    taps that land in the padding contribute nothing.  Each part of the filter
    sums its terms in one fixed order, whatever ``n_threads``.

    %(nonfinite)s

    Examples
    --------
    With an all-ones input and output gradient, each weight's gradient counts
    the output cells whose window puts that tap on a real (non-padding) pixel:

    >>> import numpy as np
    >>> import convviz
    >>> dw = convviz.conv2d_backprop_filter(np.ones((1, 4, 4, 1)), [3, 3, 1, 1], np.ones((1, 4, 4, 1)),
    ...                                     strides=[1, 1], padding="SAME")
    >>> dw[:, :, 0, 0]
    array([[ 9., 12.,  9.],
           [12., 16., 12.],
           [ 9., 12.,  9.]])
    """
    return OP.run(input, filter_sizes, out_backprop, strides, padding, explicit_paddings, data_format, dilations,
                  n_threads, device=device)
