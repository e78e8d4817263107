"""bfloat16 on AMX tiles (``_ext/conv2d_amx.cpp``).

Where the CPU has AMX-BF16 (and Linux grants the tile state), bfloat16 forward
passes and input gradients with at least 16 channels per group on both sides
run on the tiles at the default precision.  They keep its contract: exact
products, float32 sums, one rounding -- so the result is within one rounding
of the exact sum plus float32's summation error; bitwise the same for any
thread count; and where AMX's flushing of subnormals could change a sum (a
subnormal or tiny input, a non-finite or subnormal weight) the call runs on
the AVX-512 kernel instead, bit for bit as with the tiles switched off.

The tests that need the tiles skip without them.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import convviz
from convviz import reference
from convviz._backends import cpu
from convviz.geometry import ConvGeometry
from convviz.ops import _forward
from convviz.ops._op import window_arguments

BF16 = ml_dtypes.bfloat16
needs_amx = pytest.mark.skipif(not cpu.amx_in_use(), reason="no AMX-BF16 tiles here (or AVX-512 is off)")

# Within one rounding to bfloat16 of the exact sum, plus float32's summation
# error against the sum of the terms' magnitudes (as precision="fast").
REL_ROUNDING, REL_SUM = 2.0**-8, 2.0**-16

# (batch, H, W, Cin, Cout, k, stride, dilation, groups, format, padding):
# reduction chunks with a tail (33, 40 channels), output-channel tiles with a
# tail (17, 40), rows of one and two 16-pixel tiles and a part-empty last one,
# strides, dilations, groups, NCHW (strided staging), explicit padding.
GEOMETRIES = [
    (2, 9, 11, 16, 32, 3, 1, 1, 1, "NHWC", "SAME"),
    (1, 13, 37, 33, 17, 3, 2, 1, 1, "NHWC", "SAME"),
    (1, 12, 40, 40, 40, 3, 1, 2, 1, "NCHW", "VALID"),
    (2, 8, 9, 64, 96, 1, 2, 1, 2, "NHWC", "SAME"),
    (1, 7, 7, 48, 64, 5, 1, 1, 1, "NHWC", "EXPLICIT"),
    (1, 10, 34, 32, 48, 3, 1, 1, 1, "NCHW", "SAME"),
]


def _geometry(row):
    n, h, w, cin, cout, k, s, d, groups, fmt, padding = row
    pads = (1, 2, 0, 1) if padding == "EXPLICIT" else (0, 0, 0, 0)
    return ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=cin, out_channels=cout, kernel_hw=(k, k),
                              strides=(s, s), dilations=(d, d), padding=padding, explicit_paddings=pads,
                              groups=groups, data_format=fmt), padding


def _forward_call(row, rng, x_scale=1.0):
    g, padding = _geometry(row)
    x = (x_scale * rng.standard_normal(g.input_shape)).astype(BF16)
    w = rng.standard_normal(g.filter_shape).astype(BF16)
    return [x, w, *window_arguments(g, padding)]


def _input_grad_call(row, rng):
    g, padding = _geometry(row)
    w = rng.standard_normal(g.filter_shape).astype(BF16)
    dy = rng.standard_normal(g.output_shape).astype(BF16)
    return [list(g.input_shape), w, dy, *window_arguments(g, padding)]


def _within_bound(result, exact, magnitude):
    return np.all(np.abs(result.astype(np.float64) - exact) <= REL_ROUNDING * np.abs(exact) + REL_SUM * magnitude)


def _without_amx(monkeypatch, fn, *args, **kwargs):
    with monkeypatch.context() as m:
        m.setattr(cpu, "AMX_ALLOWED", False)
        return fn(*args, **kwargs)


@needs_amx
@pytest.mark.parametrize("row", GEOMETRIES, ids=[f"g{i}" for i in range(len(GEOMETRIES))])
def test_forward_on_tiles_is_within_the_accurate_bound(row, rng):
    args = _forward_call(row, rng)
    y = convviz.conv2d(*args)
    assert _forward.last_ran_on_amx()
    x, w = (a.astype(np.float64) for a in args[:2])
    exact = reference.conv2d(x, w, *args[2:])
    magnitude = reference.conv2d(np.abs(x), np.abs(w), *args[2:])
    assert y.dtype == BF16 and y.shape == exact.shape
    assert _within_bound(y, exact, magnitude)


@needs_amx
@pytest.mark.parametrize("row", GEOMETRIES, ids=[f"g{i}" for i in range(len(GEOMETRIES))])
@pytest.mark.parametrize("precision", ["accurate", "fast"])
def test_input_gradient_on_tiles_is_within_the_accurate_bound(row, precision, rng):
    args = _input_grad_call(row, rng)
    dx = convviz.conv2d_backprop_input(*args, precision=precision)
    assert _forward.last_ran_on_amx()
    w, dy = (a.astype(np.float64) for a in args[1:3])
    exact = reference.conv2d_backprop_input(args[0], w, dy, *args[3:])
    magnitude = reference.conv2d_backprop_input(args[0], np.abs(w), np.abs(dy), *args[3:])
    assert dx.dtype == BF16 and dx.shape == exact.shape
    assert _within_bound(dx, exact, magnitude)


@needs_amx
@pytest.mark.parametrize("row", GEOMETRIES[:4], ids=[f"g{i}" for i in range(4)])
def test_tiles_give_the_same_bits_for_any_thread_count(row, rng):
    args = _forward_call(row, rng)
    args[0][0, 1, 1, 0] = np.nan  # NaN and infinities land as in the reference, whatever the split
    args[0][-1, -1, 0, -1] = np.inf
    first = convviz.conv2d(*args, n_threads=1)
    for threads in (2, 3):
        assert np.array_equal(convviz.conv2d(*args, n_threads=threads).view(np.uint16), first.view(np.uint16))
    grad_args = _input_grad_call(row, rng)
    first = convviz.conv2d_backprop_input(*grad_args, n_threads=1)
    for threads in (2, 3):
        again = convviz.conv2d_backprop_input(*grad_args, n_threads=threads)
        assert np.array_equal(again.view(np.uint16), first.view(np.uint16))


@needs_amx
def test_nonfinite_inputs_land_where_the_reference_puts_them(rng):
    args = _forward_call(GEOMETRIES[0], rng)
    args[0][0, 4, 5, 3] = np.inf
    args[0][1, 0, 0, 7] = np.nan
    y = convviz.conv2d(*args)
    assert _forward.last_ran_on_amx()
    exact = reference.conv2d(args[0].astype(np.float64), args[1].astype(np.float64), *args[2:])
    assert np.array_equal(np.isnan(y.astype(np.float64)), np.isnan(exact))
    assert np.array_equal(np.isinf(y.astype(np.float64)), np.isinf(exact))


@needs_amx
@pytest.mark.parametrize("case", ["subnormal input", "tiny products", "infinite weight", "subnormal weight"])
def test_where_flushing_could_change_a_sum_the_avx512_kernel_runs(case, monkeypatch, rng):
    args = _forward_call(GEOMETRIES[1], rng)
    x, w = args[0], args[1]
    if case == "subnormal input":
        x[0, 2, 3, 4] = BF16(2.0**-130)
    elif case == "tiny products":
        # Normal numbers whose products' float32 sums could fall among the
        # subnormals: 2^-60 x 2^-60 is below 2^-126 (AMX would flush it).
        x *= BF16(2.0**-60)
        w *= BF16(2.0**-60)
    elif case == "infinite weight":
        w[1, 1, 2, 3] = np.inf
    else:
        w[0, 0, 0, 0] = BF16(2.0**-131)
    on = convviz.conv2d(*args)
    assert not _forward.last_ran_on_amx()
    off = _without_amx(monkeypatch, convviz.conv2d, *args)
    assert np.array_equal(on.view(np.uint16), off.view(np.uint16))


@needs_amx
def test_small_normal_values_still_run_on_the_tiles(rng):
    # 2^-30 x 2^-30 products: every float32 partial sum stays a normal number.
    args = _forward_call(GEOMETRIES[0], rng, x_scale=2.0**-30)
    args[1] *= BF16(2.0**-30)
    y = convviz.conv2d(*args)
    assert _forward.last_ran_on_amx()
    x, w = (a.astype(np.float64) for a in args[:2])
    exact = reference.conv2d(x, w, *args[2:])
    assert _within_bound(y, exact, reference.conv2d(np.abs(x), np.abs(w), *args[2:]))


def test_switched_off_or_under_avx2_nothing_runs_on_tiles(monkeypatch, rng):
    args = _forward_call(GEOMETRIES[0], rng)
    monkeypatch.setattr(cpu, "AMX_ALLOWED", False)
    convviz.conv2d(*args)
    assert not _forward.last_ran_on_amx()
    monkeypatch.setattr(cpu, "AMX_ALLOWED", True)
    if "avx2" in cpu._openmp_info.available_isas():
        with cpu.use_isa("avx2"):
            convviz.conv2d(*args)
        assert not _forward.last_ran_on_amx()


def test_the_reason_is_stated_where_tiles_do_not_run():
    assert cpu.amx_usable() == (cpu.amx_unusable_reason() == "")
    info = convviz.show_versions(as_dict=True)["amx"]
    assert ("convviz runs bfloat16" in info) == cpu.amx_in_use()
