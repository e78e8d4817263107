"""The conv2d input gradient (TensorFlow ``Conv2DBackpropInput``), as one unit.

Here is what is the op's own: the public function and its documentation, its
route and kernel call (the Cython kernel ``_input_grad``, C++ in
``_ext/conv2d_input_grad*``, or the forward kernel per stride phase), the GPU
launcher, the :class:`~convviz.ops._op.Op` record that ties them together, and
the float64 reference (``convviz.reference.conv2d_backprop_input``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _validate as v
from .._backends import cpu, cuda
from ..geometry import ConvGeometry
from . import _forward as forward_kernel
from . import _input_grad as kernel
from ._op import Call, Op

__all__ = ["conv2d_backprop_input"]


# Bound once: compute is on the path of every call (module lookups cost ~0.1 us there).
_kernel = kernel.input_grad
_forward_kernel = forward_kernel.forward
_forward_amx = forward_kernel.forward_amx
_forward_int32 = forward_kernel.forward_int32
_record_scratch = kernel.record_scratch_bytes


# A phase's convolution: input rows and columns, output-gradient rows and columns, filter rows and
# columns, then the forward kernel's window (strides, dilations, top and left padding, groups).
PhaseConvolution = tuple[slice, slice, slice, slice, slice, slice, tuple[int, int, int, int, int, int, int]]


def _phase_convolutions(g: ConvGeometry) -> tuple[list[PhaseConvolution], list[tuple[slice, slice]]]:
    """The input gradient as stride-1 forward convolutions of the output gradient,
    one per pair of row and column stride phases (``AxisGeometry.input_phases``).

    Returns the convolutions, each (input rows, input columns, output-gradient
    rows, output-gradient columns, filter rows, filter columns, the forward
    kernel's window numbers), and the (rows, columns) that no tap reaches (zero).
    """
    convolutions: list[PhaseConvolution] = []
    zeros: list[tuple[slice, slice]] = []
    out_h, out_w = g.output_hw
    for rp in g.rows.input_phases():
        for cp in g.cols.input_phases():
            cells = (slice(rp.first, None, g.rows.stride), slice(cp.first, None, g.cols.stride))
            if rp.taps is None or cp.taps is None or rp.crop >= out_h or cp.crop >= out_w:
                zeros.append(cells)
                continue
            window = (1, 1, rp.dilation, cp.dilation, rp.pad_before, cp.pad_before, g.groups)
            convolutions.append((*cells, slice(rp.crop, None), slice(cp.crop, None), rp.taps, cp.taps, window))
    return convolutions, zeros


# Output-gradient rows up to this many pixels, and filters of more than this many
# bytes (what a core's L2 cache holds with room to spare: 1 MiB on AMD Zen 4, 2 MiB
# on Intel Sapphire Rapids), run on the forward kernel.
NARROW_ROW = 16
CACHED_FILTER_BYTES = 1 << 20


def _on_forward_kernel(g: ConvGeometry, compute_bytes: int = 4) -> bool:
    """Whether the input gradient runs on the forward kernel (see ``Plan``): where
    a stride phase's filter holds more weights per output channel than the output
    gradient holds values (the forward kernel's own rule for channel blocks,
    ``by_block`` in ``_ext/conv2d_forward.cpp``: each block's filter stays in
    cache while every row passes, where the input-row kernel reads the whole
    filter once per input row), where that filter would not stay in a core's
    cache from one input row to the next (more than CACHED_FILTER_BYTES: 256 to
    256 channels 3x3, 2.4 MB, ran 2-3x slower on the input-row kernel), or where
    the output gradient's rows are narrow (up to NARROW_ROW pixels: the
    input-row kernel's tiles of 14 and 24 pixels run part empty), or the filter
    is 1x1 at stride 1 (the forward kernel reads dy's rows in place and, for short
    sums, runs 6 x 4 tiles: in one process, alternating, the same bits, 1x1 layers
    took 0.76x-0.95x the time on AVX-512 -- 28x28 512 -> 256 0.80x, 56x56 24 ->
    144 0.78x, 8x112x112 16 -> 96 0.89x --, 0.89x-1.01x on AVX2, 0.74x-0.99x in
    float64; at stride 2, where three of four input cells get no gradient and dx is
    zeroed first, 8x56x56 64 -> 128 took 1.43x).
    Elsewhere the input-row kernel, tuned for this op, is as fast or faster
    (paired A/B over the sweep's layers, BENCHMARKS.md).  ``compute_bytes``: 8
    for float64, else 4 (half types are computed in float32)."""
    n, (out_h, out_w) = g.batch, g.output_hw
    kernel_h, kernel_w = g.kernel_hw
    filter_bytes = kernel_h * kernel_w * (g.in_channels // g.groups) * g.out_channels * compute_bytes
    return (out_w <= NARROW_ROW or filter_bytes > CACHED_FILTER_BYTES
            or (kernel_h == kernel_w == 1 and g.strides_hw == (1, 1))
            or max_phase_taps(g) * (g.in_channels // g.groups) > n * out_h * out_w)


def _transposed_filter(filt: np.ndarray, groups: int) -> np.ndarray:
    """The HWIO filter with each group's input and output channels swapped
    ([KH, KW, C_out / groups, C_in]): the filter of the forward convolutions
    that make the input gradient.  A view for one group, a copy for several."""
    if groups == 1:
        return filt.transpose(0, 1, 3, 2)
    kh, kw, cin_g, c_out = filt.shape
    by_group = filt.reshape(kh, kw, cin_g, groups, c_out // groups)
    return by_group.transpose(0, 1, 4, 3, 2).reshape(kh, kw, c_out // groups, groups * cin_g)


@dataclass(frozen=True)
class Route:
    """Where a plan's calls run (``plan.extra``, from :func:`prepare`).

    Where the filter outweighs the output gradient, is over 1 MiB, or dy's rows
    are narrow (``_on_forward_kernel``), float types at the default precision
    run on the forward pass's kernel: the gradient of the input cells of one
    stride phase is a stride-1 convolution of the output gradient with that
    phase's taps of the filter, last first, and input and output channels
    swapped (``geometry.AxisGeometry.input_phases``).  That kernel's channel
    blocks keep the filter in cache across rows, which the input-row kernel of
    ``_input_grad`` cannot (the 7x7 layers of 512 channels and more ran 4-10x
    slower on it).  Elsewhere, for ``precision="fast"`` (bfloat16 and float16
    dot products, where they apply) and for int32, the ``_input_grad`` kernels run.
    """

    fast: bool  # precision="fast": the bfloat16 or float16 kernels where the CPU has them
    on_forward: bool
    phases: list[PhaseConvolution]  # (filled where the forward kernel may run)
    zeros: list[tuple[slice, slice]]
    column_ranges: list[np.ndarray]  # int32: each phase's columns per tap, as forward_int32 takes them


def _phase_column_ranges(g: ConvGeometry, phases: list[PhaseConvolution]) -> list[np.ndarray]:
    """Per phase convolution, per tap of its filter, the half-open range of its output
    columns (input-gradient cells) whose column of the output gradient is real."""
    ranges = []
    for _, cols, _, dy_cols, _, taps_w, window in phases:
        width, dy_width = len(range(g.input_hw[1])[cols]), len(range(g.output_hw[1])[dy_cols])
        dilation, pad = window[3], window[5]
        table = np.empty((len(range(g.kernel_hw[1])[taps_w]), 2), dtype=np.intp)
        for tap in range(len(table)):
            first = max(0, pad - tap * dilation)
            table[tap] = first, max(first, min(width, dy_width + pad - tap * dilation))
        ranges.append(table)
    return ranges


def prepare(call: Call, fast: bool) -> Route:
    """The route of this call's signature (see :class:`Route`)."""
    g, dtype = call.geometry, call.dtype
    int32 = dtype == np.int32
    on_forward = not int32 and _on_forward_kernel(g, 8 if dtype == np.float64 else 4)
    # bfloat16 runs on the forward kernel wherever AMX tiles do (cpu.amx_in_use, asked per call), and
    # int32 always: wrapping sums are the same in any order, and the phases need no int32 kernel of their own.
    phases, zeros = _phase_convolutions(g) if on_forward or int32 or dtype == v.BFLOAT16 else ([], [])
    return Route(fast, on_forward, phases, zeros, _phase_column_ranges(g, phases) if int32 else [])


# One phase's forward call: dy's phase, the phase's filter, dx's phase, the forward kernel's window.
PhaseCall = tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int, int, int, int, int, int]]


def _phase_calls(route: Route, plan: cpu.ConvPlan, filt: np.ndarray, dy: np.ndarray,
                 dx: np.ndarray) -> list[PhaseCall]:
    """The forward convolutions that make the input gradient, one per stride phase:
    (dy's phase, the phase's taps of the channel-swapped filter, dx's phase, the forward
    kernel's window); the cells no tap reaches are zeroed first."""
    w = _transposed_filter(filt, plan.ints[-1])
    if route.zeros:  # cells no tap reaches (a 1x1 filter at stride 2: three of four): one fill
        # (Through an unsigned view: zero bits are +0 in every type, and ml_dtypes
        # fills bfloat16 value by value, 40% of a batch-8 1x1 stride-2 gradient.)
        dx.view(np.dtype(f"u{dx.itemsize}")).fill(0)
    return [(dy[:, dy_rows, dy_cols], w[taps_h, taps_w], dx[:, rows, cols], window)
            for rows, cols, dy_rows, dy_cols, taps_h, taps_w, window in route.phases]


def compute(plan: cpu.ConvPlan, filt: np.ndarray, dy: np.ndarray, dx: np.ndarray, n_threads: int) -> None:
    """The kernel call: the input-row kernel, or the forward kernel per stride phase (:class:`Route`)."""
    route: Route = plan.extra
    if plan.int32:  # the forward pass's int32 kernel, once per stride phase
        for (dy_phase, w_phase, dx_phase, window), ranges in zip(_phase_calls(route, plan, filt, dy, dx),
                                                                 route.column_ranges):
            _forward_int32(dy_phase, w_phase, dx_phase, ranges, *window, n_threads, cpu.MIN_PARALLEL_WORK)
        return
    code = plan.code
    # AMX tiles multiply bfloat16 exactly and sum in float32 (the default
    # precision's contract) faster than the dot product of precision="fast".
    amx = code == cpu.BFLOAT16_CODE and cpu.amx_in_use()
    fast = cpu.fast_paths() if route.fast and not amx else 0
    # The bfloat16 / float16 dot-product kernels where they apply (else -1: nothing written).
    if fast and _kernel(dy, code, filt, code, dx, code, *plan.ints, n_threads, cpu.ISA_CODE, plan.f64,
                        cpu.MIN_PARALLEL_WORK, fast) >= 0:
        return
    if not (route.on_forward or amx):  # the input-row kernel
        _kernel(dy, code, filt, code, dx, code, *plan.ints, n_threads, cpu.ISA_CODE, plan.f64,
                cpu.MIN_PARALLEL_WORK, 0)
        return
    calls = _phase_calls(route, plan, filt, dy, dx)
    # On AMX tiles, every phase in one call (two parallel regions in all, not two per phase).
    scratch = _forward_amx(calls, code, n_threads, cpu.MIN_PARALLEL_WORK) if amx and calls else -1
    if scratch < 0:
        scratch = 0
        for dy_phase, w_phase, dx_phase, window in calls:
            scratch += _forward_kernel(dy_phase, code, w_phase, code, dx_phase, code, *window, n_threads,
                                       cpu.ISA_CODE, plan.f64, cpu.MIN_PARALLEL_WORK)
    _record_scratch(scratch)  # what the benchmark reads from this op's kernel module


cuda.declare_kernels(__file__, "input_grad", "input_grad_narrow", "input_grad_tiled", "merge_chunk_partials", types=5)


def max_phase_taps(g: ConvGeometry) -> int:
    """The most taps any stride phase of the input gets terms from (the tiled kernel's phases)."""
    most = 1
    for size, stride, dilation in [(g.kernel_hw[0], g.strides_hw[0], g.dilations_hw[0]),
                                   (g.kernel_hw[1], g.strides_hw[1], g.dilations_hw[1])]:
        most *= max(sum(1 for k in range(size) if (k * dilation - r) % stride == 0) for r in range(stride))
    return most


def plan_on_gpu(call: Call) -> cuda.Reordered:
    """The CUDA launch (tiled, or one thread per input-gradient element) for this call's signature."""
    g = call.geometry

    def tiled(cp, dy, w, dx, params, code):
        cin_g = g.in_channels // g.groups
        (sh, sw), (h, w_) = g.strides_hw, g.input_hw
        if not cuda.tiled_fits(dy, w, dx, columns=cin_g, groups=g.groups, blocks_z=g.groups * sh * sw):
            return None
        # One block row per stride phase: the largest phase has ceil(H / sh) x ceil(W / sw) pixels.
        pixels = g.batch * cuda.tiles(h, sh) * cuda.tiles(w_, sw)
        grid = (cuda.tiles(pixels, cuda.TILE_M), cuda.tiles(cin_g, cuda.TILE_N), g.groups * sh * sw)
        # The largest phase's terms: ceil(KH / sh) x ceil(KW / sw) taps at most (dilation 1).
        terms = max_phase_taps(g) * (g.out_channels // g.groups)
        return cuda.split_launch(cp, cuda.kernel(f"input_grad_tiled<{code}>"), grid, params, terms,
                                 int(np.prod(g.input_shape)), code)

    plan = cuda.DensePlan("conv2d_backprop_input", "input_grad", g, call.dtype, g.input_shape,
                          call.out_backprop, call.filter, images=(True, False, True), tiled=tiled)
    return cuda.Reordered(plan, (1, 0))  # (filter, out_backprop) -> (out_backprop, filter)


def reference_sum(g: ConvGeometry, w: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """``dx[n, ih, iw, ci] += sum_co dy[n, oh, ow, co] * w[kh, kw, ci, co]`` in float64, over every tap
    that reads a real input cell: the loop of ``convviz.reference.conv2d_backprop_input``."""
    dx = np.zeros((g.batch, *g.input_hw, g.in_channels))
    for oh, ow, kh, kw, ih, iw in g.taps():
        for ins, outs in g.group_slices():
            dx[:, ih, iw, ins] += dy[:, oh, ow, outs] @ w[kh, kw, :, outs].T
    return dx


OP = Op.of_module(
    globals(), name="conv2d_backprop_input", tf_name="Conv2DBackpropInput",
    explorer_aliases=("input_grad",),
    args=("input_sizes", "filter", "out_backprop"), dtypes=v.FLOAT_AND_INT32_DTYPES, depthwise=False,
    hw_sizes=True,
    tf_attrs=("use_cudnn_on_gpu",),
    fast_dtypes=(v.BFLOAT16, np.dtype(np.float16)),
    tf_examples="""\
Examples
--------
>>> import numpy as np
>>> from convviz.compat.tf import raw_ops
>>> dx = raw_ops.Conv2DBackpropInput(
...     input_sizes=[1, 3, 3, 1], filter=[[[[1.0]], [[2.0]]]],
...     out_backprop=np.ones((1, 3, 2, 1), np.float32), strides=[1, 1, 1, 1],
...     padding="VALID")
>>> dx[0, :, :, 0], dx.dtype
(array([[1., 3., 2.],
       [1., 3., 2.],
       [1., 3., 2.]], dtype=float32), dtype('float32'))
""",
)


@OP.document
def conv2d_backprop_input(
        input_sizes: Sequence[int] | np.ndarray, filter: Any, out_backprop: Any, strides: Sequence[int], padding: str,
        explicit_paddings: Sequence[int] = (), data_format: str = "NHWC", dilations: Sequence[int] = (1, 1, 1, 1), *,
        n_threads: int | None = None, device: str | None = None, precision: str = "accurate") -> Any:
    """Gradient of conv2d with respect to its input (TensorFlow ``Conv2DBackpropInput``).

    Computes ``dL/dx`` for ``y = conv2d(x, filter)`` given ``out_backprop = dL/dy``:
    every output-gradient cell is scattered back, through each filter tap, to the
    input cell that tap read.  Semantics are TensorFlow's, exactly, for every
    padding, layout, stride, dilation, group count and dtype; where TensorFlow's
    CPU kernel refuses a case (float64 dilation, grouped float64, NCHW) or gets it
    wrong, this returns the exact gradient.

    %(parameters_returns_raises)s

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

    %(nonfinite)s

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

    The same in NCHW, with 2-value ``input_sizes`` and ``strides``:

    >>> convviz.conv2d_backprop_input(
    ...     [5, 5], np.ones((3, 3, 1, 1)), np.ones((1, 1, 2, 2)),
    ...     strides=[2, 2], padding="VALID", data_format="NCHW").shape
    (1, 1, 5, 5)

    bfloat16 with ``precision="fast"``: the CPU's bfloat16 dot-product
    instruction where it has one and it pays (else the same as the
    default).  Results may differ from the default by one bfloat16 unit in
    the last place:

    >>> import ml_dtypes
    >>> rng = np.random.default_rng(0)
    >>> w = rng.standard_normal((3, 3, 16, 32)).astype(ml_dtypes.bfloat16)
    >>> dy = rng.standard_normal((2, 8, 8, 32)).astype(ml_dtypes.bfloat16)
    >>> fast = convviz.conv2d_backprop_input([2, 8, 8, 16], w, dy, [1, 1, 1, 1], "SAME",
    ...                                      precision="fast")
    >>> exact = convviz.reference.conv2d_backprop_input([2, 8, 8, 16], w, dy, [1, 1, 1, 1], "SAME")
    >>> bool(np.all(np.abs(fast - exact) <= 2.0**-8 * np.abs(exact) + 1e-6))
    True

    float16 with ``precision="fast"``: the CPU's float16 FMA where it has one
    (AVX512_FP16), with sums of up to 32 products in float16:

    >>> w16 = rng.standard_normal((3, 3, 32, 32)).astype(np.float16)
    >>> dy16 = rng.standard_normal((2, 8, 8, 32)).astype(np.float16)
    >>> args16 = ([2, 8, 8, 32], w16, dy16, [1, 1, 1, 1], "SAME")
    >>> fast16 = convviz.conv2d_backprop_input(*args16, precision="fast")
    >>> exact16 = convviz.reference.conv2d_backprop_input(*args16)
    >>> terms = convviz.reference.conv2d_backprop_input(args16[0], np.abs(w16), np.abs(dy16), *args16[3:])
    >>> bool(np.all(np.abs(fast16 - exact16) <= 2.0**-11 * np.abs(exact16) + 2.0**-6 * terms))
    True
    """
    return OP.run(input_sizes, filter, out_backprop, strides, padding, explicit_paddings,
                  data_format, dilations, n_threads, device=device, precision=precision)
