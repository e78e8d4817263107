"""precision="fast": half-type input gradients on the CPU's own half-type instructions.

Where the AVX-512 kernels run, ``conv2d_backprop_input`` (and
``conv_transpose2d``) with ``precision="fast"`` take:

- bfloat16, where the CPU has AVX512_BF16 and ``vdpbf16ps`` outruns the float32
  FMA: float32 sums of bfloat16 pairs, subnormals flushed to zero;
- float16 with at least 32 input channels per group, where the CPU has
  AVX512_FP16: chains of up to 32 products summed in float16 (``vfmadd231ph``),
  on operands scaled by powers of two, the chains summed in float32.

Everywhere else "fast" is the accurate path, bit for bit.  These tests hold on
every machine; the ones that need an instruction skip without it.
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
F16 = np.dtype(np.float16)
needs_dot = pytest.mark.skipif(not (cpu.BF16_DOT and cpu.current_isa() == "avx512"),
                               reason="the CPU has no AVX512_BF16 (or AVX-512 is off)")
needs_f16 = pytest.mark.skipif(not cpu.f16_fma_in_use(), reason="the CPU has no AVX512_FP16 (or AVX-512 is off)")


@pytest.fixture(autouse=True)
def _dot_product_even_where_slower(monkeypatch):
    """Run the bfloat16 dot-product path wherever the CPU has the instruction, also
    where convviz would not pick it (it measures it slower than the float32 FMA),
    and not AMX tiles, which take bfloat16 over where they run (tests/test_amx.py)."""
    monkeypatch.setattr(cpu, "_bf16_dot_pays", True)
    monkeypatch.setattr(cpu, "AMX_ALLOWED", False)


# The documented bounds (BENCHMARKS.md, "precision='fast'"): within one rounding
# to the result type of the exact sum plus a summation term against the sum of
# the terms' magnitudes -- float32's for bfloat16; for float16, a chain of up to
# 32 float16 FMAs, each rounding once (32 * 2^-11), plus, per term, the
# absolute error of a product that lands among float16's subnormals after the
# scaling (2^-25 of a scale at most 2^-8 * max|dy| * max|w|), and half the
# spacing of float16's subnormals (2^-25) for a result that is one.
BOUNDS = {np.dtype(BF16): (2.0**-8, 2.0**-16), F16: (2.0**-11, 32 * 2.0**-11)}
F16_UNDERFLOW = 2.0**-33
REL_ROUNDING, REL_SUM = BOUNDS[np.dtype(BF16)]

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
# float16's path needs 32 input channels per group: blocks of 64, 32 and 16
# lanes, more output channels than one chain (100 > 32), groups, NCHW, strides.
F16_GEOMETRIES = [
    (2, 9, 11, 40, 33, 3, 1, 1, 1, "NHWC", "SAME"),
    (2, 8, 8, 48, 70, 5, 2, 1, 1, "NHWC", "VALID"),
    (1, 13, 12, 64, 17, 3, 1, 2, 1, "NHWC", "SAME"),
    (1, 6, 7, 112, 100, 3, 1, 1, 1, "NHWC", "SAME"),
    (2, 10, 9, 96, 12, 3, 1, 1, 2, "NHWC", "SAME"),
    (1, 7, 7, 64, 6, 3, 3, 2, 1, "NCHW", "SAME"),
    (3, 6, 30, 32, 1, 2, 1, 3, 1, "NHWC", "SAME"),
    (1, 5, 5, 36, 9, 4, 2, 1, 1, "NCHW", "EXPLICIT"),
]


def _call(geometry_row, rng, dy_scale=1.0, dtype=BF16):
    n, h, w, cin, cout, k, s, d, groups, fmt, padding = geometry_row
    pads = (1, 2, 0, 1) if padding == "EXPLICIT" else (0, 0, 0, 0)
    g = ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=cin, out_channels=cout, kernel_hw=(k, k),
                           strides=(s, s), dilations=(d, d), padding=padding, explicit_paddings=pads,
                           groups=groups, data_format=fmt)
    filt = rng.standard_normal(g.filter_shape).astype(dtype)
    dy = (dy_scale * rng.standard_normal(g.output_shape)).astype(dtype)
    return [list(g.input_shape), filt, dy, *window_arguments(g, padding)]


def _bound(args):
    dtype = np.dtype(args[1].dtype)
    rel_rounding, rel_sum = BOUNDS[dtype]
    w, dy = np.abs(args[1].astype(np.float64)), np.abs(args[2].astype(np.float64))
    exact = reference.conv2d_backprop_input(*args)
    magnitude = reference.conv2d_backprop_input(args[0], w, dy, *args[3:])
    bound = rel_rounding * np.abs(exact) + rel_sum * magnitude
    if dtype == F16:
        bound += F16_UNDERFLOW * w.size * w.max() * dy.max() + 2.0**-25
    return exact, bound


# (dtype, geometry, dy scale).  float16 also at 1e-6, below its normal range
# (6.1e-5): the scaling keeps the chains out of the subnormals; and at 50,
# which puts products near 2^8 unscaled.
BOUND_CASES = ([(BF16, row, 1.0) for row in GEOMETRIES]
               + [(F16, row, scale) for scale in (1.0, 1e-6, 50.0) for row in F16_GEOMETRIES])
THREAD_CASES = [(BF16, row) for row in GEOMETRIES[:4]] + [(F16, row) for row in F16_GEOMETRIES[:4]]


def _ids(cases):
    return [f"{np.dtype(c[0]).name}-g{i}" + (f"-x{c[2]:g}" if len(c) > 2 else "") for i, c in enumerate(cases)]


@pytest.mark.parametrize("dtype, row, dy_scale", BOUND_CASES, ids=_ids(BOUND_CASES))
def test_fast_is_within_the_documented_bound_of_the_exact_gradient(dtype, row, dy_scale, rng):
    args = _call(row, rng, dy_scale, dtype)
    fast = convviz.conv2d_backprop_input(*args, precision="fast")
    accurate = convviz.conv2d_backprop_input(*args)
    assert fast.dtype == dtype and fast.shape == accurate.shape
    exact, bound = _bound(args)
    assert np.all(np.abs(fast.astype(np.float64) - exact) <= bound)
    assert np.all(np.abs(accurate.astype(np.float64) - exact) <= bound)


@pytest.mark.parametrize("dtype, row", THREAD_CASES, ids=_ids(THREAD_CASES))
def test_fast_is_bitwise_the_same_for_any_thread_count(dtype, row, rng):
    args = _call(row, rng, dtype=dtype)
    results = [convviz.conv2d_backprop_input(*args, n_threads=t, precision="fast") for t in (1, 2, 3, 5)]
    for other in results[1:]:
        assert np.array_equal(results[0].view(np.uint16), other.view(np.uint16))


@needs_f16
def test_fast_float16_sums_chains_of_products_in_float16():
    # One input cell sums 2048 + 31 * 1 over 32 output channels: in float32
    # that is 2079 (2080 in float16); summed in float16 each + 1 is lost to
    # rounding (at 2048 the spacing is 2), so the chain stays at 2048.  This
    # is how a user can tell the paths apart.
    dy = np.ones((1, 1, 1, 32), dtype=F16)
    dy[..., 0] = 2048
    args = ([1, 1, 1, 32], np.ones((1, 1, 32, 32), dtype=F16), dy, [1, 1, 1, 1], "VALID")
    assert np.all(convviz.conv2d_backprop_input(*args) == 2080)
    assert np.all(convviz.conv2d_backprop_input(*args, precision="fast") == 2048)
    # Fewer than 32 input channels per group: the accurate path.
    narrow = ([1, 1, 1, 16], np.ones((1, 1, 16, 32), dtype=F16), dy, [1, 1, 1, 1], "VALID")
    assert np.all(convviz.conv2d_backprop_input(*narrow, precision="fast") == 2080)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_leaves_other_dtypes_bitwise_accurate(dtype, rng):
    args = _call(GEOMETRIES[2], rng)
    args[1], args[2] = args[1].astype(dtype), args[2].astype(dtype)
    assert np.array_equal(convviz.conv2d_backprop_input(*args, precision="fast"),
                          convviz.conv2d_backprop_input(*args))


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_nonfinite_filter_takes_the_accurate_path(bad, dtype, rng):
    args = _call(GEOMETRIES[1] if dtype == BF16 else F16_GEOMETRIES[0], rng, dtype=dtype)
    args[1][1, 2, 3, 4] = bad
    fast = convviz.conv2d_backprop_input(*args, precision="fast")
    accurate = convviz.conv2d_backprop_input(*args)
    assert np.array_equal(fast.view(np.uint16), accurate.view(np.uint16))
    # NaN reaches exactly the cells the float64 reference puts it in.
    assert np.array_equal(np.isnan(fast.astype(np.float32)), np.isnan(reference.conv2d_backprop_input(*args)))


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bfloat16", "float16"])
def test_nonfinite_out_backprop_propagates_as_in_the_reference(dtype, rng):
    args = _call(GEOMETRIES[1] if dtype == BF16 else F16_GEOMETRIES[0], rng, dtype=dtype)
    args[2][0, 1, 2, 3] = np.nan
    args[2][1, 0, 0, 0] = np.inf
    fast = convviz.conv2d_backprop_input(*args, precision="fast").astype(np.float64)
    exact = reference.conv2d_backprop_input(*args)
    assert np.array_equal(np.isnan(fast), np.isnan(exact))
    assert np.array_equal(np.isinf(fast), np.isinf(exact))


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bfloat16", "float16"])
def test_non_contiguous_inputs(dtype, rng):
    args = _call(GEOMETRIES[0] if dtype == BF16 else F16_GEOMETRIES[0], rng, dtype=dtype)
    big_dy = np.zeros(args[2].shape[:3] + (2 * args[2].shape[3],), dtype=dtype)
    big_dy[..., ::2] = args[2]
    strided = [args[0], np.asfortranarray(args[1]), big_dy[..., ::2], *args[3:]]
    assert np.array_equal(convviz.conv2d_backprop_input(*strided, precision="fast"),
                          convviz.conv2d_backprop_input(*args, precision="fast"))


@pytest.mark.parametrize("bad", ["high", "FAST", 1, None.__class__])
def test_an_unknown_precision_is_named(bad, rng):
    args = _call(GEOMETRIES[0], rng)
    with pytest.raises(InvalidArgumentError, match=r"precision must be 'accurate' or 'fast', got"):
        convviz.conv2d_backprop_input(*args, precision=bad)
