"""conv2d_backprop_input (TensorFlow ``Conv2DBackpropInput``): what is special about it.

tests/test_every_op.py already runs its record against the float64 reference
(every dtype, layout, padding, strides, dilations), across thread counts and
SIMD variants, with NaN and Inf; here: the kernels per instruction set on tiles
of every width (on its own kernel and on the forward kernel), dy rows read in
place or staged, random geometries against the reference, precision="fast", its
own errors (with the malformed inputs that once crashed TensorFlow), and
TensorFlow / PyTorch / MindSpore when installed.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest
from helpers import (CROSSCHECK_CASES, DTYPES, DY, F32, FILTER, assert_close_to_reference, bpi, check_error,
                     four_values, random_array, reference_pair_bpi, tf_output_shape, torch_pads, window_geometry,
                     windows)
from hypothesis import given
from hypothesis import strategies as st

import convviz
from convviz import InvalidArgumentError, _openmp_info, reference
from convviz._backends import cpu
from convviz.geometry import ConvGeometry
from convviz.ops._op import window_arguments

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ISAS = _openmp_info.available_isas()


# -- the kernels, per instruction set ------------------------------------------
INPUT_SHAPES = [  # (K, stride, dilation, width, C_in, C_out, groups)
    (3, 1, 1, 56, 64, 32, 1), (3, 2, 1, 57, 32, 48, 1), (3, 1, 2, 37, 16, 16, 1), (7, 1, 1, 29, 16, 8, 1),
    (3, 1, 1, 13, 3, 8, 1), (3, 2, 1, 30, 48, 16, 2), (1, 1, 1, 50, 40, 24, 1), (4, 3, 2, 31, 24, 12, 3),
    (3, 1, 1, 5, 16, 16, 1), (2, 2, 1, 9, 33, 7, 1),
    # narrow channels: AVX-512's fused tiles (3/5/7 taps a row, window steps 1 and 2, groups, edges)
    (5, 2, 1, 43, 16, 16, 1), (7, 1, 2, 45, 8, 16, 1), (3, 1, 1, 33, 32, 32, 2), (5, 1, 2, 11, 16, 8, 1),
    (7, 2, 1, 60, 16, 4, 1),
    # AVX-512's blocked dy rows: a partial last block of output channels, a 1-vector
    # remainder after 2-vector blocks, 5 taps a row
    (3, 1, 1, 40, 48, 20, 1), (5, 1, 1, 24, 16, 36, 1),
    # two vectors of input channels, 3 taps a row: AVX-512's blocked fused tiles at step 2, plain tiles at step 1
    (3, 1, 2, 53, 64, 24, 1), (3, 1, 1, 19, 32, 40, 1), (3, 1, 1, 70, 96, 16, 2),
    # on the forward kernel: a filter that outweighs dy (channel blocks), a 1x1 filter at
    # stride 2 (three of four phases reached by no tap), a grouped stride-2 phase split
    (3, 1, 1, 7, 160, 200, 1), (1, 2, 1, 28, 32, 64, 1), (3, 2, 1, 12, 64, 96, 4),
]


def test_input_gradient_shapes_cover_both_kernels():
    """The input gradient runs on the forward kernel where the filter outweighs dy,
    dy's rows are narrow or the filter is 1x1 (stride 1), else on its own: the shapes above
    exercise both."""
    from convviz.ops.input_grad import _on_forward_kernel

    chosen = {_on_forward_kernel(convviz.ConvGeometry.build(
        batch=2, input_hw=(5, w), in_channels=cin, out_channels=cout, kernel_hw=(k, k), strides=(s, s),
        dilations=(d, d), padding="SAME", groups=groups)) for k, s, d, w, cin, cout, groups in INPUT_SHAPES}
    assert chosen == {True, False}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", INPUT_SHAPES, ids=lambda s: "k{}s{}d{}w{}ci{}co{}g{}".format(*s))
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_input_gradient_kernels(isa, shape, dtype, rng):
    k, s, d, w, cin, cout, groups = shape
    kwargs = dict(strides=[1, s, s, 1], padding="SAME", dilations=[1, d, d, 1])
    g = convviz.ConvGeometry.build(batch=2, input_hw=(5, w), in_channels=cin, out_channels=cout,
                                   kernel_hw=(k, k), strides=(s, s), dilations=(d, d), padding="SAME",
                                   groups=groups)
    filt = random_array(rng, g.filter_shape, dtype)
    dy = random_array(rng, g.output_shape, dtype)
    exact, bound = reference_pair_bpi(list(g.input_shape), filt, dy, **kwargs)
    with cpu.use_isa(isa):
        got = convviz.conv2d_backprop_input(list(g.input_shape), filt, dy, **kwargs)
        nchw = convviz.conv2d_backprop_input(
            [2, cin, 5, w], filt, dy.transpose(0, 3, 1, 2), four_values("NCHW", s, s), "SAME",
            data_format="NCHW", dilations=four_values("NCHW", d, d))
    assert_close_to_reference(got, exact, bound, dtype)
    assert_close_to_reference(nchw.transpose(0, 2, 3, 1), exact, bound, dtype)


@pytest.mark.parametrize("isa", ISAS)
def test_input_gradient_reads_wide_dy_rows_in_place(isa, rng):
    """dy rows whose staged copies would pass 4 MB a thread are read in place
    (edge tiles copy their window with zero padding); smaller ones are staged.
    Both give the reference; with an Inf tap, edge tiles go exact."""
    kwargs = dict(strides=[1, 1, 1, 1], padding="SAME")
    for width, cout in ((260, 2048), (19, 64)):  # in place (3 x ~280 x 2048 x 4 B), staged
        filt = rng.standard_normal((3, 3, 8, cout)).astype(np.float32)
        dy = rng.standard_normal((1, 2, width, cout)).astype(np.float32)
        sizes = [1, 2, width, 8]
        exact, bound = reference_pair_bpi(sizes, filt, dy, **kwargs)
        inf_filt = filt.copy()
        inf_filt[0, 0, 2, 5] = np.inf
        inf_exact = convviz.reference.conv2d_backprop_input(sizes, inf_filt.astype(np.float64),
                                                            dy.astype(np.float64), **kwargs)
        with cpu.use_isa(isa):
            got = convviz.conv2d_backprop_input(sizes, filt, dy, **kwargs)
            got_inf = convviz.conv2d_backprop_input(sizes, inf_filt, dy, **kwargs)
        assert_close_to_reference(got, exact, bound, "float32")
        np.testing.assert_array_equal(np.isfinite(got_inf), np.isfinite(inf_exact))


# -- random geometries, dtypes and layouts against the float64 reference --------
@given(window=windows(), batch=st.integers(0, 2), h=st.integers(1, 9), w=st.integers(1, 9),
       kh=st.integers(1, 4), kw=st.integers(1, 4), groups=st.integers(1, 3),
       cin_g=st.integers(1, 3), cout_g=st.integers(1, 3),
       dtype=st.sampled_from(list(DTYPES)), two_sizes=st.booleans(),
       seed=st.integers(0, 2**32 - 1), isa=st.sampled_from(ISAS))
def test_input_gradient_matches_reference(window, batch, h, w, kh, kw, groups, cin_g, cout_g,
                                          dtype, two_sizes, seed, isa):
    kwargs, raw = window
    if two_sizes:
        groups = 1  # with [H, W] sizes the depth comes from the filter: no groups
    rng = np.random.default_rng(seed)
    cin, cout = groups * cin_g, groups * cout_g
    g = window_geometry(raw, batch, (h, w), cin, cout, (kh, kw), groups=groups)
    filt = random_array(rng, (kh, kw, cin_g, cout), dtype)
    dy = random_array(rng, g.output_shape, dtype)
    sizes = [h, w] if two_sizes else list(g.input_shape)
    with cpu.use_isa(isa):
        got = convviz.conv2d_backprop_input(sizes, filt, dy, **kwargs)
    exact, bound = reference_pair_bpi(sizes, filt, dy, **kwargs)
    assert got.shape == g.input_shape
    assert_close_to_reference(got, exact, bound, dtype)


# -- precision="fast": half-type input gradients on the CPU's own half-type instructions --
# Where the AVX-512 kernels run, ``conv2d_backprop_input`` (and
# ``conv_transpose2d``) with ``precision="fast"`` take:
#
# - bfloat16, where the CPU has AVX512_BF16 and ``vdpbf16ps`` outruns the float32
#   FMA: float32 sums of bfloat16 pairs, subnormals flushed to zero;
# - float16 with at least 32 input channels per group, where the CPU has
#   AVX512_FP16: chains of up to 32 products summed in float16 (``vfmadd231ph``),
#   on operands scaled by powers of two, the chains summed in float32.
#
# Everywhere else "fast" is the accurate path, bit for bit.  These tests hold on
# every machine; the ones that need an instruction skip without it.
BF16 = ml_dtypes.bfloat16
F16 = np.dtype(np.float16)
needs_dot = pytest.mark.skipif(not (cpu.BF16_DOT and cpu.current_isa() == "avx512"),
                               reason="the CPU has no AVX512_BF16 (or AVX-512 is off)")
needs_f16 = pytest.mark.skipif(not cpu.f16_fma_in_use(), reason="the CPU has no AVX512_FP16 (or AVX-512 is off)")


@pytest.fixture
def _dot_product_even_where_slower(monkeypatch):
    """Run the bfloat16 dot-product path wherever the CPU has the instruction, also
    where convviz would not pick it (it measures it slower than the float32 FMA),
    and not AMX tiles, which take bfloat16 over where they run (tests/test_amx.py).
    Every precision="fast" test uses it."""
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


@pytest.mark.usefixtures("_dot_product_even_where_slower")
@pytest.mark.parametrize("dtype, row, dy_scale", BOUND_CASES, ids=_ids(BOUND_CASES))
def test_fast_is_within_the_documented_bound_of_the_exact_gradient(dtype, row, dy_scale, rng):
    args = _call(row, rng, dy_scale, dtype)
    fast = convviz.conv2d_backprop_input(*args, precision="fast")
    accurate = convviz.conv2d_backprop_input(*args)
    assert fast.dtype == dtype and fast.shape == accurate.shape
    exact, bound = _bound(args)
    assert np.all(np.abs(fast.astype(np.float64) - exact) <= bound)
    assert np.all(np.abs(accurate.astype(np.float64) - exact) <= bound)


@pytest.mark.usefixtures("_dot_product_even_where_slower")
@pytest.mark.parametrize("dtype, row", THREAD_CASES, ids=_ids(THREAD_CASES))
def test_fast_is_bitwise_the_same_for_any_thread_count(dtype, row, rng):
    args = _call(row, rng, dtype=dtype)
    results = [convviz.conv2d_backprop_input(*args, n_threads=t, precision="fast") for t in (1, 2, 3, 5)]
    for other in results[1:]:
        assert np.array_equal(results[0].view(np.uint16), other.view(np.uint16))


@pytest.mark.usefixtures("_dot_product_even_where_slower")
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


@pytest.mark.usefixtures("_dot_product_even_where_slower")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_leaves_other_dtypes_bitwise_accurate(dtype, rng):
    args = _call(GEOMETRIES[2], rng)
    args[1], args[2] = args[1].astype(dtype), args[2].astype(dtype)
    assert np.array_equal(convviz.conv2d_backprop_input(*args, precision="fast"),
                          convviz.conv2d_backprop_input(*args))


@pytest.mark.usefixtures("_dot_product_even_where_slower")
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


@pytest.mark.usefixtures("_dot_product_even_where_slower")
@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bfloat16", "float16"])
def test_nonfinite_out_backprop_propagates_as_in_the_reference(dtype, rng):
    args = _call(GEOMETRIES[1] if dtype == BF16 else F16_GEOMETRIES[0], rng, dtype=dtype)
    args[2][0, 1, 2, 3] = np.nan
    args[2][1, 0, 0, 0] = np.inf
    fast = convviz.conv2d_backprop_input(*args, precision="fast").astype(np.float64)
    exact = reference.conv2d_backprop_input(*args)
    assert np.array_equal(np.isnan(fast), np.isnan(exact))
    assert np.array_equal(np.isinf(fast), np.isinf(exact))


@pytest.mark.usefixtures("_dot_product_even_where_slower")
@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bfloat16", "float16"])
def test_non_contiguous_inputs(dtype, rng):
    args = _call(GEOMETRIES[0] if dtype == BF16 else F16_GEOMETRIES[0], rng, dtype=dtype)
    big_dy = np.zeros(args[2].shape[:3] + (2 * args[2].shape[3],), dtype=dtype)
    big_dy[..., ::2] = args[2]
    strided = [args[0], np.asfortranarray(args[1]), big_dy[..., ::2], *args[3:]]
    assert np.array_equal(convviz.conv2d_backprop_input(*strided, precision="fast"),
                          convviz.conv2d_backprop_input(*args, precision="fast"))


@pytest.mark.usefixtures("_dot_product_even_where_slower")
@pytest.mark.parametrize("bad", ["high", "FAST", 1, None.__class__])
def test_an_unknown_precision_is_named(bad, rng):
    args = _call(GEOMETRIES[0], rng)
    with pytest.raises(InvalidArgumentError, match=r"precision must be 'accurate' or 'fast', got"):
        convviz.conv2d_backprop_input(*args, precision=bad)


# -- its own errors (the window arguments' errors, shared with the depthwise filter
# gradient, are in tests/test_errors.py) -------------------------------------------
BPI_ERRORS = [
    # dtypes
    (dict(filter=FILTER.astype(np.complex64), out_backprop=DY.astype(np.complex64)), TypeError,
     ["filter", "dtypes", "complex64"]),
    (dict(filter=FILTER.astype(np.int64), out_backprop=DY.astype(np.int64)), TypeError, ["filter", "int64"]),
    (dict(filter=FILTER.astype(np.uint8), out_backprop=DY.astype(np.uint8)), TypeError, ["filter", "uint8"]),
    (dict(filter=FILTER.astype(bool), out_backprop=DY.astype(bool)), TypeError, ["filter", "bool"]),
    (dict(out_backprop=DY.astype(np.float64)), TypeError,
     ["out_backprop", "same dtype as filter", "float32", "float64"]),
    (dict(out_backprop=DY.astype(ml_dtypes.bfloat16)), TypeError, ["out_backprop", "bfloat16"]),
    (dict(filter="abc"), TypeError, ["filter", "<U3"]),
    (dict(filter=None), TypeError, ["filter", "object"]),
    (dict(filter=[[1.0, 2.0], [3.0]]), InvalidArgumentError, ["filter", "rectangular"]),
    (dict(out_backprop=[[1.0, 2.0], [3.0]]), InvalidArgumentError, ["out_backprop", "rectangular"]),
    # shapes
    (dict(filter=np.float32(1.0)), InvalidArgumentError, ["filter", "4-D", "0-D"]),
    (dict(filter=np.ones((3, 3, 2), F32)), InvalidArgumentError, ["filter", "4-D", "(3, 3, 2)"]),
    (dict(out_backprop=np.ones((4, 4, 4), F32)), InvalidArgumentError, ["out_backprop", "4-D", "3-D"]),
    (dict(out_backprop=np.ones((1, 3, 3, 4), F32)), InvalidArgumentError,
     ["out_backprop", "(1, 4, 4, 4)", "(1, 3, 3, 4)"]),
    (dict(out_backprop=np.ones((1, 4, 4, 5), F32)), InvalidArgumentError, ["out_backprop", "(1, 4, 4, 5)"]),
    (dict(out_backprop=np.ones((2, 4, 4, 4), F32)), InvalidArgumentError, ["out_backprop", "(2, 4, 4, 4)"]),
    (dict(filter=np.ones((0, 3, 2, 4), F32)), InvalidArgumentError, ["filter", "empty", "(0, 3, 2, 4)"]),
    (dict(filter=np.ones((3, 3, 0, 4), F32)), InvalidArgumentError, ["filter", "empty"]),
    (dict(filter=np.ones((3, 3, 2, 0), F32)), InvalidArgumentError, ["filter", "empty"]),
    (dict(filter=np.ones((3, 3, 3, 4), F32)), InvalidArgumentError,
     ["input depth (2", "multiple", "filter.shape[2] = 3"]),
    (dict(input_sizes=[1, 4, 4, 0]), InvalidArgumentError, ["input depth (0"]),
    (dict(input_sizes=[1, 4, 4, 6], filter=np.ones((3, 3, 2, 4), F32)), InvalidArgumentError,
     ["out-depth", "filter.shape[3] = 4", "groups (3"]),
    # input_sizes
    (dict(input_sizes=[1, 4, 4]), InvalidArgumentError, ["input_sizes", "4 values", "2 values", "got 3"]),
    (dict(input_sizes=[]), InvalidArgumentError, ["input_sizes", "got 0"]),
    (dict(input_sizes=[1, 4, 4, 2, 1]), InvalidArgumentError, ["input_sizes", "got 5"]),
    (dict(input_sizes=[1, -4, 4, 2]), InvalidArgumentError, ["input_sizes[1]", "-4"]),
    (dict(input_sizes=[1, 4.0, 4, 2]), TypeError, ["input_sizes[1]", "float"]),
    (dict(input_sizes=np.array([1.0, 4, 4, 2])), TypeError, ["input_sizes", "integers"]),
    (dict(input_sizes=np.array([[1, 4], [4, 2]])), InvalidArgumentError, ["input_sizes", "1-D", "(2, 2)"]),
    (dict(input_sizes=4), TypeError, ["input_sizes", "list"]),
    (dict(input_sizes=None), TypeError, ["input_sizes", "NoneType"]),
    (dict(input_sizes=[1, 2**31, 4, 2]), InvalidArgumentError, ["input_sizes[1]", "2147483647"]),
]


@pytest.mark.parametrize("changes, exc, fragments", BPI_ERRORS, ids=lambda v: repr(v)[:50])
def test_input_gradient_errors(changes, exc, fragments):
    check_error(bpi, changes, exc, fragments)


# regressions for inputs that crashed TensorFlow
def test_cve_2021_29525_division_by_zero_is_an_error():
    """Zero-sized filter depth once divided by zero inside TensorFlow."""
    with pytest.raises(InvalidArgumentError, match="filter must not be empty"):
        convviz.conv2d_backprop_input([0, 0, 0, 0], np.ones((0, 0, 0, 0), F32),
                                      np.ones((0, 0, 0, 0), F32), [1, 1, 1, 1], "VALID")
    with pytest.raises(InvalidArgumentError, match="filter must not be empty"):
        convviz.conv2d_backprop_input([1, 4, 4, 0], np.ones((3, 3, 0, 4), F32), DY, [1, 1, 1, 1], "SAME")


def test_cve_2022_35999_empty_out_backprop():
    """Empty out_backprop crashed TensorFlow's CPU and GPU kernels."""
    with pytest.raises(InvalidArgumentError, match=r"out_backprop must have shape \(3, 1, 1, 1\)"):
        convviz.conv2d_backprop_input([3, 1, 1, 1], np.ones((1, 1, 1, 1), F32),
                                      np.ones((3, 1, 0, 1), F32), [1, 1, 1, 1], "SAME")
    # When the empty shape is the right one, the gradient is zeros.
    dx = convviz.conv2d_backprop_input([3, 1, 0, 1], np.ones((1, 1, 1, 1), F32),
                                       np.ones((3, 1, 0, 1), F32), [1, 1, 1, 1], "SAME")
    assert dx.shape == (3, 1, 0, 1)


def test_cve_2021_41209_empty_filter():
    for shape in [(0, 3, 2, 4), (3, 0, 2, 4), (0, 0, 0, 0)]:
        with pytest.raises(InvalidArgumentError, match="filter must not be empty"):
            convviz.conv2d_backprop_input([1, 4, 4, 2], np.ones(shape, F32), DY, [1, 1, 1, 1], "SAME")


def test_absurd_input_sizes_are_refused_before_allocating():
    """A result that cannot fit in memory is refused with its size, not attempted."""
    # A zero-stride view has the right shape without occupying any memory.
    huge_dy = np.broadcast_to(F32(1), (1, 10**7, 10**7, 4))
    with pytest.raises(InvalidArgumentError, match=r"input gradient of shape \(1, 10000000, 10000000, 2\)"
                                                   r" would need .* GiB"):
        convviz.conv2d_backprop_input([1, 10**7, 10**7, 2], FILTER, huge_dy, [1, 1, 1, 1], "SAME")
    # Without such an out_backprop the shape check already refuses the call.
    with pytest.raises(InvalidArgumentError, match="out_backprop must have shape"):
        convviz.conv2d_backprop_input([1, 10**7, 10**7, 2], FILTER, DY, [1, 1, 1, 1], "SAME")
    # An empty batch needs no memory at all: that is a valid, empty result.
    empty = convviz.conv2d_backprop_input([0, 10**7, 10**7, 2], FILTER,
                                          np.ones((0, 10**7, 10**7, 4), F32), [1, 1, 1, 1], "SAME")
    assert empty.shape == (0, 10**7, 10**7, 2)


def test_scalar_filter_is_an_error():
    with pytest.raises(InvalidArgumentError, match="filter must be 4-D"):
        bpi(filter=2.0)


def test_three_element_input_sizes_is_an_error():
    with pytest.raises(InvalidArgumentError, match="input_sizes must have 4 values"):
        bpi(input_sizes=[4, 4, 2])


# -- peers, when installed -----------------------------------------------------
@pytest.mark.parametrize("case", CROSSCHECK_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_input_gradient_agrees_with_tensorflow(case, dtype, rng):
    tf = pytest.importorskip("tensorflow")
    n, h, w, cin, cout, kh, kw, sh, sw, padding, pads = case
    filt = rng.standard_normal((kh, kw, cin, cout)).astype(dtype)
    dy = rng.standard_normal(tf_output_shape(n, h, w, cout, kh, kw, sh, sw, padding, pads)).astype(dtype)
    explicit = [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0] if pads else []
    kwargs = dict(strides=[1, sh, sw, 1], padding=padding, explicit_paddings=explicit)
    expected = tf.raw_ops.Conv2DBackpropInput(input_sizes=[n, h, w, cin], filter=filt, out_backprop=dy,
                                              **kwargs).numpy()
    got = convviz.conv2d_backprop_input([n, h, w, cin], filt, dy, **kwargs)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * np.abs(expected).max())


@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("case", CROSSCHECK_CASES)
def test_input_gradient_agrees_with_torch_autograd(case, groups, dilation, rng):
    torch = pytest.importorskip("torch")
    n, h, w, cin_g, cout_g, kh, kw, sh, sw, padding, pads = case
    cin, cout = cin_g * groups, cout_g * groups
    g = convviz.ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=cin, out_channels=cout,
                                   kernel_hw=(kh, kw), strides=(sh, sw), dilations=(dilation, dilation),
                                   padding=padding, explicit_paddings=pads or (0, 0, 0, 0), groups=groups,
                                   data_format="NCHW")
    if 0 in g.output_hw:
        pytest.skip("empty output")
    filt = rng.standard_normal((kh, kw, cin_g, cout))
    dy = rng.standard_normal(g.output_shape)
    x = torch.zeros((n, cin, h, w), dtype=torch.float64, requires_grad=True)
    weight = torch.from_numpy(filt.transpose(3, 2, 0, 1).copy())
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(x, torch_pads(g)), weight, stride=(sh, sw),
                                   dilation=dilation, groups=groups)
    y.backward(torch.from_numpy(dy))
    explicit = [0, 0, 0, 0, *pads] if pads else []
    got = convviz.conv2d_backprop_input([n, cin, h, w], filt, dy, [1, 1, sh, sw], padding, explicit,
                                        data_format="NCHW", dilations=[1, 1, dilation, dilation])
    np.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-11, atol=1e-11)


def test_mindspore_conv2d_backprop_input_agrees(rng):
    ms = pytest.importorskip("mindspore")
    from convviz.compat.mindspore import ops as cvops

    dout = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    weight = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    ms_op = ms.ops.Conv2DBackpropInput(out_channel=4, kernel_size=3, pad_mode="same", stride=2)
    expected = ms_op(ms.Tensor(dout), ms.Tensor(weight), (2, 2, 6, 6)).asnumpy()
    got = cvops.Conv2DBackpropInput(out_channel=4, kernel_size=3, pad_mode="same", stride=2)(
        dout, weight, (2, 2, 6, 6))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
