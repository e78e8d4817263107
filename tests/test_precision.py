"""precision="fast": bfloat16 input gradients on the CPU's bfloat16 dot-product instruction.

Where the CPU has AVX512_BF16 and the AVX-512 kernels run, bfloat16
``conv2d_backprop_input`` (and ``conv_transpose2d``) with ``precision="fast"``
take ``vdpbf16ps`` tiles: float32 sums of bfloat16 pairs, subnormals flushed to
zero.  Everywhere else "fast" is the accurate path, bit for bit.  These tests
hold on every machine; the ones that need the instruction skip without it.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import convviz
from convviz import reference
from convviz._backends import cpu
from convviz.errors import InvalidArgumentError
from convviz.geometry import ConvGeometry
from convviz.ops._op import window_arguments

BF16 = ml_dtypes.bfloat16
needs_dot = pytest.mark.skipif(not cpu.bf16_dot_in_use(), reason="the CPU has no AVX512_BF16 (or AVX-512 is off)")

# The documented bound (BENCHMARKS.md, "precision='fast'"): within one bfloat16
# rounding of the exact sum plus a float32 summation term.
REL_ROUNDING = 2.0**-8
REL_SUM = 2.0**-16

# (batch, H, W, Cin, Cout, k, stride, dilation, groups, format, padding): odd and
# even output-channel counts (pairs with a zero partner), strides and
# dilations (phases, edge tiles), groups, NCHW, narrow and wide channel blocks.
GEOMETRIES = [
    (2, 9, 11, 5, 7, 3, 1, 1, 1, "NHWC", "SAME"),
    (2, 9, 11, 16, 32, 3, 2, 1, 1, "NHWC", "SAME"),
    (1, 13, 12, 33, 17, 3, 1, 2, 1, "NHWC", "SAME"),
    (2, 8, 8, 48, 64, 5, 2, 1, 1, "NHWC", "VALID"),
    (2, 10, 9, 8, 12, 3, 1, 1, 2, "NHWC", "SAME"),
    (1, 7, 7, 4, 6, 3, 3, 2, 1, "NCHW", "SAME"),
    (1, 7, 7, 40, 3, 1, 1, 1, 1, "NHWC", "VALID"),
    (3, 6, 30, 64, 1, 2, 1, 3, 1, "NHWC", "SAME"),
    (1, 5, 5, 6, 9, 4, 2, 1, 3, "NCHW", "EXPLICIT"),
]


def _call(geometry_row, rng, dy_scale=1.0):
    n, h, w, cin, cout, k, s, d, groups, fmt, padding = geometry_row
    pads = (1, 2, 0, 1) if padding == "EXPLICIT" else (0, 0, 0, 0)
    g = ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=cin, out_channels=cout, kernel_hw=(k, k),
                           strides=(s, s), dilations=(d, d), padding=padding, explicit_paddings=pads,
                           groups=groups, data_format=fmt)
    filt = rng.standard_normal(g.filter_shape).astype(BF16)
    dy = (dy_scale * rng.standard_normal(g.output_shape)).astype(BF16)
    return [list(g.input_shape), filt, dy, *window_arguments(g, padding)]


def _bound(args):
    exact = reference.conv2d_backprop_input(*args)
    magnitude = reference.conv2d_backprop_input(args[0], np.abs(args[1].astype(np.float64)),
                                                np.abs(args[2].astype(np.float64)), *args[3:])
    return exact, REL_ROUNDING * np.abs(exact) + REL_SUM * magnitude


@pytest.mark.parametrize("row", GEOMETRIES, ids=[f"g{i}" for i in range(len(GEOMETRIES))])
def test_fast_is_within_the_documented_bound_of_the_exact_gradient(row, rng):
    args = _call(row, rng)
    fast = convviz.conv2d_backprop_input(*args, precision="fast")
    accurate = convviz.conv2d_backprop_input(*args)
    assert fast.dtype == BF16 and fast.shape == accurate.shape
    exact, bound = _bound(args)
    assert np.all(np.abs(fast.astype(np.float64) - exact) <= bound)
    assert np.all(np.abs(accurate.astype(np.float64) - exact) <= bound)


@pytest.mark.parametrize("row", GEOMETRIES[:4], ids=[f"g{i}" for i in range(4)])
def test_fast_is_bitwise_the_same_for_any_thread_count(row, rng):
    args = _call(row, rng)
    results = [convviz.conv2d_backprop_input(*args, n_threads=t, precision="fast") for t in (1, 2, 3, 5)]
    for other in results[1:]:
        assert np.array_equal(results[0].view(np.uint16), other.view(np.uint16))


@needs_dot
def test_fast_runs_the_dot_product_instruction_which_flushes_subnormals():
    # 1e-39 is a subnormal (in bfloat16 as in float32): the accurate path keeps
    # it, vdpbf16ps reads it as zero.  This is how a user can tell the paths apart.
    dy = np.full((1, 4, 4, 2), 1e-39, dtype=BF16)
    filt = np.ones((1, 1, 3, 2), dtype=BF16)
    args = ([1, 4, 4, 3], filt, dy, [1, 1, 1, 1], "VALID")
    accurate = convviz.conv2d_backprop_input(*args)
    fast = convviz.conv2d_backprop_input(*args, precision="fast")
    assert np.all(accurate.astype(np.float32) > 0)
    assert np.all(fast.astype(np.float32) == 0)
    # Plans are cached per precision: asking again gives each its own answer.
    assert np.array_equal(convviz.conv2d_backprop_input(*args), accurate)
    assert np.array_equal(convviz.conv2d_backprop_input(*args, precision="fast"), fast)
    # The transposed convolution is the same scatter, with the same switch.
    x = np.full((1, 2, 4, 4), 1e-39, dtype=BF16)
    weight = np.ones((2, 3, 1, 1), dtype=BF16)
    assert np.all(convviz.conv_transpose2d(x, weight).astype(np.float32) > 0)
    assert np.all(convviz.conv_transpose2d(x, weight, precision="fast").astype(np.float32) == 0)


def test_fast_is_the_accurate_path_under_avx2_kernels():
    dy = np.full((1, 4, 4, 2), 1e-39, dtype=BF16)
    args = ([1, 4, 4, 3], np.ones((1, 1, 3, 2), dtype=BF16), dy, [1, 1, 1, 1], "VALID")
    if "avx2" not in convviz._openmp_info.available_isas():
        pytest.skip("no AVX2 kernels on this machine")
    with cpu.use_isa("avx2"):
        assert not cpu.bf16_dot_in_use()
        fast = convviz.conv2d_backprop_input(*args, precision="fast")
    assert np.array_equal(fast, convviz.conv2d_backprop_input(*args))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_fast_leaves_other_dtypes_bitwise_accurate(dtype, rng):
    args = _call(GEOMETRIES[2], rng)
    args[1], args[2] = args[1].astype(dtype), args[2].astype(dtype)
    assert np.array_equal(convviz.conv2d_backprop_input(*args, precision="fast"),
                          convviz.conv2d_backprop_input(*args))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_nonfinite_filter_takes_the_accurate_path(bad, rng):
    args = _call(GEOMETRIES[1], rng)
    args[1][1, 2, 3, 4] = bad
    fast = convviz.conv2d_backprop_input(*args, precision="fast")
    accurate = convviz.conv2d_backprop_input(*args)
    assert np.array_equal(fast.view(np.uint16), accurate.view(np.uint16))
    # NaN reaches exactly the cells the float64 reference puts it in.
    assert np.array_equal(np.isnan(fast.astype(np.float32)), np.isnan(reference.conv2d_backprop_input(*args)))


def test_nonfinite_out_backprop_propagates_as_in_the_reference(rng):
    args = _call(GEOMETRIES[1], rng)
    args[2][0, 1, 2, 3] = np.nan
    args[2][1, 0, 0, 0] = np.inf
    fast = convviz.conv2d_backprop_input(*args, precision="fast").astype(np.float64)
    exact = reference.conv2d_backprop_input(*args)
    assert np.array_equal(np.isnan(fast), np.isnan(exact))
    assert np.array_equal(np.isinf(fast), np.isinf(exact))


def test_non_contiguous_inputs(rng):
    args = _call(GEOMETRIES[0], rng)
    big_dy = np.zeros(args[2].shape[:3] + (2 * args[2].shape[3],), dtype=BF16)
    big_dy[..., ::2] = args[2]
    strided = [args[0], np.asfortranarray(args[1]), big_dy[..., ::2], *args[3:]]
    assert np.array_equal(convviz.conv2d_backprop_input(*strided, precision="fast"),
                          convviz.conv2d_backprop_input(*args, precision="fast"))


@pytest.mark.parametrize("bad", ["high", "FAST", 1, None.__class__])
def test_an_unknown_precision_is_named(bad, rng):
    args = _call(GEOMETRIES[0], rng)
    with pytest.raises(InvalidArgumentError, match=r"precision must be 'accurate' or 'fast', got"):
        convviz.conv2d_backprop_input(*args, precision=bad)
