"""bfloat16 on AMX tiles (``_ext/conv2d_amx.cpp``, ``_ext/conv2d_amx_filter_grad.cpp``).

Where the CPU has AMX-BF16 (and Linux grants the tile state), bfloat16 forward
passes, input gradients and filter gradients with at least 16 channels per
group on both sides run on the tiles at the default precision.  They keep its contract: exact
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
from convviz.ops import _filter_grad, _forward, filter_grad
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
    # 24 input channels a group: tiles that read 24 values a row, not a chunk of 32.
    (1, 6, 9, 48, 32, 3, 1, 1, 2, "NHWC", "SAME"),
    # Pointwise on 96 and 64 channels: the tiles read the input (the forward
    # pass) and the output gradient (the input gradient) where they are.
    (2, 5, 7, 96, 64, 1, 1, 1, 1, "NHWC", "SAME"),
    # Pointwise on 40 and 17 channels, read in place too: a pixel's last chunk
    # reads on into the next pixel (24 values; 1 of an odd count's pair), which
    # meets zero weights; rows of 32 pixels, where per-row and flat blocks tie.
    (2, 4, 32, 40, 24, 1, 1, 1, 1, "NHWC", "SAME"),
    (1, 5, 6, 17, 20, 1, 1, 1, 1, "NHWC", "VALID"),
    # Pointwise at stride 2, odd sizes: every other pixel of every other row read in place.
    (2, 9, 11, 40, 24, 1, 2, 1, 1, "NHWC", "SAME"),
]
POINTWISE_IN_PLACE = GEOMETRIES[-4:]


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


# Fewer than 16 input channels: a kernel row's taps merge into one reduction
# of KW x C_in values (a stem's 3 channels x 7 columns).
STEMS = [
    (1, 30, 31, 3, 16, 3, 1, 1, 1, "NHWC", "SAME"),
    (1, 19, 21, 3, 24, 7, 2, 1, 1, "NHWC", "SAME"),
    (2, 17, 23, 5, 40, 3, 1, 1, 1, "NCHW", "VALID"),
]


@needs_amx
@pytest.mark.parametrize("row", STEMS, ids=[f"s{i}" for i in range(len(STEMS))])
def test_a_stems_merged_taps_on_tiles_are_within_the_accurate_bound(row, rng):
    args = _forward_call(row, rng)
    y = convviz.conv2d(*args)
    assert _forward.last_ran_on_amx()
    x, w = (a.astype(np.float64) for a in args[:2])
    exact = reference.conv2d(x, w, *args[2:])
    assert _within_bound(y, exact, reference.conv2d(np.abs(x), np.abs(w), *args[2:]))
    first = convviz.conv2d(*args, n_threads=1)
    assert np.array_equal(convviz.conv2d(*args, n_threads=3).view(np.uint16), first.view(np.uint16))


@needs_amx
def test_a_stem_with_a_nonfinite_input_runs_on_avx512(monkeypatch, rng):
    # Merged taps read on into the next pixels, which meet zero weights: 0 x inf.
    args = _forward_call(STEMS[0], rng)
    args[0][0, 3, 4, 1] = np.inf
    on = convviz.conv2d(*args)
    assert not _forward.last_ran_on_amx()
    off = _without_amx(monkeypatch, convviz.conv2d, *args)
    assert np.array_equal(on.view(np.uint16), off.view(np.uint16))


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


def _filter_grad_call(row, rng, x_scale=1.0):
    g, padding = _geometry(row)
    x = (x_scale * rng.standard_normal(g.input_shape)).astype(BF16)
    dy = rng.standard_normal(g.output_shape).astype(BF16)
    return [x, list(g.filter_shape), dy, *window_arguments(g, padding)]


def _filter_grad_bound(args):
    x, dy = args[0].astype(np.float64), args[2].astype(np.float64)
    exact = reference.conv2d_backprop_filter(x, args[1], dy, *args[3:])
    magnitude = reference.conv2d_backprop_filter(np.abs(x), args[1], np.abs(dy), *args[3:])
    return exact, magnitude


def _assert_same_bits_for_1_and_3_threads(filter_grad_args, dw):
    for threads in (1, 3):
        again = convviz.conv2d_backprop_filter(*filter_grad_args, n_threads=threads)
        assert np.array_equal(again.view(np.uint16), dw.view(np.uint16)), threads


# The filter gradient's: a 1x1 filter with few useful channels after the
# tiles' padding runs on AVX-512 (below), so the grouped 1x1 row is replaced
# by a wide 1x1 one and a grouped 3x3 one.
FILTER_GEOMETRIES = GEOMETRIES[:3] + GEOMETRIES[4:6] + [
    (2, 8, 64, 64, 96, 1, 2, 1, 1, "NHWC", "SAME"),
    (1, 9, 20, 64, 64, 3, 1, 1, 2, "NHWC", "SAME"),
]


@needs_amx
@pytest.mark.parametrize("row", FILTER_GEOMETRIES, ids=[f"g{i}" for i in range(len(FILTER_GEOMETRIES))])
def test_filter_gradient_on_tiles_is_within_the_accurate_bound(row, rng):
    args = _filter_grad_call(row, rng)
    dw = convviz.conv2d_backprop_filter(*args)
    assert _filter_grad.last_ran_on_amx()
    exact, magnitude = _filter_grad_bound(args)
    assert dw.dtype == BF16 and dw.shape == exact.shape
    assert _within_bound(dw, exact, magnitude)


@needs_amx
def test_a_narrow_pointwise_filter_gradient_stays_on_avx512(rng):
    # 32 and 48 channels a group, 5 output columns of a 32-column tile: staging costs more than the tiles save.
    args = _filter_grad_call(GEOMETRIES[3], rng)
    convviz.conv2d_backprop_filter(*args)
    assert not _filter_grad.last_ran_on_amx()


@needs_amx
def test_filter_gradient_sums_many_chunks_of_rows_in_order(rng):
    # 2 x 64 rows of 100 pixels: several chunks of rows whose partial sums are added.
    # 9 blocks: on 1 thread the chunks run one after another (a running sum per block),
    # on 2 and 3 all at once (partial sums, added by the reduce units): the same bits.
    args = _filter_grad_call((2, 64, 100, 16, 16, 3, 1, 1, 1, "NHWC", "SAME"), rng)
    dw = convviz.conv2d_backprop_filter(*args, n_threads=1)
    assert _filter_grad.last_ran_on_amx()
    assert _filter_grad.last_amx_plan()["sequential"] and _filter_grad.last_amx_plan()["chunks"] > 1
    assert _within_bound(dw, *_filter_grad_bound(args))
    for threads in (2, 3):
        again = convviz.conv2d_backprop_filter(*args, n_threads=threads)
        assert not _filter_grad.last_amx_plan()["sequential"]
        assert np.array_equal(again.view(np.uint16), dw.view(np.uint16))


@needs_amx
@pytest.mark.parametrize("shape", [(8, 7, 7, 160, 96), (2, 14, 14, 64, 48), (3, 5, 9, 64, 64)])
def test_a_pointwise_filter_gradients_pixels_run_in_rows_that_fill_the_tiles(shape, rng):
    # 7-, 14- and 9-column rows filled 7, 14 and 9 of the tiles' 32-pixel steps: the pixels
    # go in rows that divide them (392 in one row, 392 of 416 useful); the bound and the bits
    # for any thread count hold, NCHW alike.
    n, h, w, cin, cout = shape
    x = rng.standard_normal((n, h, w, cin)).astype(BF16)
    dy = rng.standard_normal((n, h, w, cout)).astype(BF16)
    args = [x, [1, 1, cin, cout], dy, [1, 1, 1, 1], "SAME"]
    assert filter_grad.pixel_rows(x, dy) is not None
    dw = convviz.conv2d_backprop_filter(*args)
    assert _filter_grad.last_ran_on_amx()
    assert _within_bound(dw, *_filter_grad_bound(args))
    _assert_same_bits_for_1_and_3_threads(args, dw)
    nchw = convviz.conv2d_backprop_filter(x.transpose(0, 3, 1, 2), [1, 1, cin, cout], dy.transpose(0, 3, 1, 2),
                                          [1, 1, 1, 1], "SAME", data_format="NCHW")
    assert _within_bound(nchw, *_filter_grad_bound(args))


# Rows shorter than a 32-pixel step: an image's rows go flat, one run of steps
# (7x7 SAME: 63 pixels in 2 steps, not 7).  Strides 2 and 3 (four and nine
# input phases), dilation, groups, asymmetric explicit pads, batch, NCHW, 1x1.
FLAT_GEOMETRIES = [
    (3, 7, 7, 64, 64, 3, 1, 1, 1, "NHWC", "SAME"),
    (2, 14, 13, 32, 48, 3, 2, 1, 1, "NHWC", "SAME"),
    (1, 15, 11, 40, 32, 5, 1, 2, 1, "NCHW", "EXPLICIT"),
    (2, 12, 10, 64, 64, 3, 1, 1, 2, "NHWC", "VALID"),
    (1, 16, 17, 32, 32, 3, 3, 1, 1, "NHWC", "SAME"),
    (2, 9, 20, 48, 80, 2, 2, 1, 1, "NCHW", "VALID"),
    # 1x1 at stride 2: one of the four phases read, the others never staged.
    (2, 14, 14, 64, 96, 1, 2, 1, 1, "NHWC", "SAME"),
]


@needs_amx
@pytest.mark.parametrize("row", FLAT_GEOMETRIES, ids=[f"g{i}" for i in range(len(FLAT_GEOMETRIES))])
def test_short_rows_go_flat_within_the_bound_and_the_same_bits_for_any_thread_count(row, rng):
    args = _filter_grad_call(row, rng)
    dw = convviz.conv2d_backprop_filter(*args)
    assert _filter_grad.last_ran_on_amx() and _filter_grad.last_amx_plan()["layout"] == "flat"
    assert _within_bound(dw, *_filter_grad_bound(args))
    _assert_same_bits_for_1_and_3_threads(args, dw)


@needs_amx
def test_long_rows_stay_in_rows_of_their_own(rng):
    # 32 columns fill a step a row (6 steps); flat, 6 rows of 34 would take 7.
    args = _filter_grad_call((1, 6, 32, 32, 32, 3, 1, 1, 1, "NHWC", "SAME"), rng)
    convviz.conv2d_backprop_filter(*args)
    assert _filter_grad.last_amx_plan()["layout"] == "rows"


@needs_amx
@pytest.mark.parametrize("value", [np.inf, np.nan])
def test_a_nonfinite_input_with_short_rows_is_staged_again_by_rows(value, rng):
    # Flat, the columns past OW multiply real inputs by zero gradients: an infinity
    # there would make NaNs the reference has not; by rows they read zeros.
    args = _filter_grad_call(FLAT_GEOMETRIES[0], rng)
    args[0][1, 3, 6, 5] = value
    dw = convviz.conv2d_backprop_filter(*args)
    assert _filter_grad.last_ran_on_amx() and _filter_grad.last_amx_plan()["layout"] == "rows"
    exact, _ = _filter_grad_bound(args)
    assert np.array_equal(np.isnan(dw.astype(np.float64)), np.isnan(exact))
    assert np.array_equal(np.isinf(dw.astype(np.float64)), np.isinf(exact))


CARRIED = [("rows", (1, 80, 64, 96, 96, 3, 1, 1, 1, "NHWC", "SAME")),
           ("rows", (3, 30, 64, 96, 96, 3, 2, 1, 1, "NHWC", "SAME")),
           ("flat", (16, 14, 14, 96, 96, 3, 1, 1, 1, "NCHW", "SAME"))]


@needs_amx
@pytest.mark.parametrize("layout, row", CARRIED, ids=["rows", "rows across images", "flat"])
@pytest.mark.parametrize("nonfinite", [False, True], ids=["finite", "inf in the last chunk"])
def test_many_blocks_carry_their_sums_from_chunk_to_chunk(layout, row, nonfinite, rng):
    # 81 blocks of 32 x 32 and 2-3 chunks of steps: the chunks run one after another,
    # each staged just before its blocks (its input rows or images, across an image's
    # end too), each block's float32 sums carried, the last chunk rounding them once.
    # An infinity that only the last chunk stages: by rows its tiles read the columns
    # past OW as zeros; flat, the whole call is staged again by rows.
    args = _filter_grad_call(row, rng)
    if nonfinite:
        args[0][-1, -2, 3, 5] = np.inf
        layout = "rows"
    dw = convviz.conv2d_backprop_filter(*args)
    if nonfinite:
        exact, _ = _filter_grad_bound(args)
        assert np.array_equal(np.isnan(dw.astype(np.float64)), np.isnan(exact))
        assert np.array_equal(np.isinf(dw.astype(np.float64)), np.isinf(exact))
    plan = _filter_grad.last_amx_plan()
    assert plan["sequential"] and plan["chunks"] > 1 and plan["layout"] == layout
    if not nonfinite:
        assert _within_bound(dw, *_filter_grad_bound(args))
    _assert_same_bits_for_1_and_3_threads(args, dw)


@needs_amx
@pytest.mark.parametrize("where", ["inside", "last column"])
def test_filter_gradient_sums_nonfinite_inputs_where_the_reference_does(where, rng):
    # A row of 19 output columns ends inside its 32-column tile: the
    # columns past it must not meet the infinity (0 x inf would be NaN).
    args = _filter_grad_call(GEOMETRIES[1], rng)
    if where == "inside":
        args[0][0, 5, 6, 7] = np.inf
    else:
        args[0][0, 4, -1, 3] = np.nan
    dw = convviz.conv2d_backprop_filter(*args)
    assert _filter_grad.last_ran_on_amx()
    exact, _ = _filter_grad_bound(args)
    assert np.array_equal(np.isnan(dw.astype(np.float64)), np.isnan(exact))
    assert np.array_equal(np.isinf(dw.astype(np.float64)), np.isinf(exact))


@needs_amx
@pytest.mark.parametrize("case", ["subnormal input", "tiny products", "infinite output gradient"])
def test_filter_gradient_where_flushing_could_change_a_sum_runs_on_avx512(case, monkeypatch, rng):
    args = _filter_grad_call(GEOMETRIES[0], rng)
    x, dy = args[0], args[2]
    if case == "subnormal input":
        x[1, 2, 3, 4] = BF16(2.0**-130)
    elif case == "tiny products":
        x *= BF16(2.0**-60)
        dy *= BF16(2.0**-60)
    else:
        dy[0, 0, 0, 5] = np.inf  # it meets the padding's zeros: the AVX-512 kernel skips those terms
    on = convviz.conv2d_backprop_filter(*args)
    assert not _filter_grad.last_ran_on_amx()
    off = _without_amx(monkeypatch, convviz.conv2d_backprop_filter, *args)
    assert np.array_equal(on.view(np.uint16), off.view(np.uint16))


@needs_amx
@pytest.mark.parametrize("row", GEOMETRIES[:3] + FILTER_GEOMETRIES[-1:], ids=[f"g{i}" for i in range(4)])
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
    filter_args = _filter_grad_call(row, rng)
    filter_args[0][0, 1, 1, 0] = np.nan
    first = convviz.conv2d_backprop_filter(*filter_args, n_threads=1)
    for threads in (2, 3):
        again = convviz.conv2d_backprop_filter(*filter_args, n_threads=threads)
        assert np.array_equal(again.view(np.uint16), first.view(np.uint16))


@needs_amx
@pytest.mark.parametrize("row", [GEOMETRIES[0], POINTWISE_IN_PLACE[0]], ids=["staged", "in place"])
def test_nonfinite_inputs_land_where_the_reference_puts_them(row, rng):
    args = _forward_call(row, rng)
    args[0][0, 4, 5, 3] = np.inf
    args[0][1, 0, 0, 7] = np.nan
    args[0][-1, -1, -1, -1] = np.nan  # the last pixel: read through the copy of the image's tail
    y = convviz.conv2d(*args)
    assert _forward.last_ran_on_amx()
    exact = reference.conv2d(args[0].astype(np.float64), args[1].astype(np.float64), *args[2:])
    assert np.array_equal(np.isnan(y.astype(np.float64)), np.isnan(exact))
    assert np.array_equal(np.isinf(y.astype(np.float64)), np.isinf(exact))


@needs_amx
@pytest.mark.parametrize("row", POINTWISE_IN_PLACE, ids=["whole chunks", "over-read", "odd", "stride 2"])
def test_a_pointwise_forward_reads_its_input_where_it_is(row, monkeypatch, rng):
    args = _forward_call(row, rng)
    on = convviz.conv2d(*args)
    assert _forward.last_ran_on_amx()
    used = _forward.last_scratch_bytes()
    convviz.conv2d(np.concatenate([args[0], args[0]]), *args[1:])  # no staged copy of the input: no more scratch
    assert _forward.last_ran_on_amx() and _forward.last_scratch_bytes() - used < args[0].nbytes // 4
    off = _without_amx(monkeypatch, convviz.conv2d, *args)
    exact = reference.conv2d(args[0].astype(np.float64), args[1].astype(np.float64), *args[2:])
    assert _within_bound(on, exact, reference.conv2d(np.abs(args[0].astype(np.float64)),
                                                      np.abs(args[1].astype(np.float64)), *args[2:]))
    assert np.abs(on.astype(np.float64) - off.astype(np.float64)).max() <= np.abs(exact).max() * 2.0**-7


@needs_amx
@pytest.mark.parametrize("stride", [1, 2])
def test_a_pointwise_filter_too_big_for_the_cache_still_has_its_input_checked(stride, monkeypatch, rng):
    # 640 -> 1024 channels (1.25 MiB packed): each channel block over runs of rows, the
    # first block's units scanning what they read; a subnormal in the last image's last
    # pixel sends the call to AVX-512.
    x = rng.standard_normal((2, 4, 6, 640)).astype(BF16)
    w = (0.1 * rng.standard_normal((1, 1, 640, 1024))).astype(BF16)
    args = [x, w, [1, stride, stride, 1], "VALID"]
    convviz.conv2d(*args)
    assert _forward.last_ran_on_amx()
    x[-1, -2 if stride == 2 else -1, -2 if stride == 2 else -1, 600] = BF16(2.0**-130)
    on = convviz.conv2d(*args)
    assert not _forward.last_ran_on_amx()
    off = _without_amx(monkeypatch, convviz.conv2d, *args)
    assert np.array_equal(on.view(np.uint16), off.view(np.uint16))


@needs_amx
@pytest.mark.parametrize("pads", [(0, 1, 0, 1), (0, 1, 0, 0), (0, 0, 0, 1)])
def test_a_pointwise_forward_with_bottom_or_right_pads_is_the_reference(pads, monkeypatch, rng):
    # Stride 2 and an explicit bottom or right pad: the last output row or column
    # reads padding, not the next input row (nor nothing at all).
    x = rng.standard_normal((2, 8, 8, 32)).astype(BF16)
    w = rng.standard_normal((1, 1, 32, 32)).astype(BF16)
    args = [x, w, [1, 2, 2, 1], "EXPLICIT"]
    kwargs = {"explicit_paddings": [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0]}
    on = convviz.conv2d(*args, **kwargs)
    exact = reference.conv2d(x.astype(np.float64), w.astype(np.float64), *args[2:], **kwargs)
    magnitude = reference.conv2d(np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)), *args[2:], **kwargs)
    assert on.shape == exact.shape and _within_bound(on, exact, magnitude)
    off = _without_amx(monkeypatch, convviz.conv2d, *args, **kwargs)
    assert np.array_equal(on.view(np.uint16), off.view(np.uint16))  # (zeros and one-term sums: exact either way)


# (row, where): "read past only" -- at stride 2 the second pixel of a row is read by no
# output pixel, only by the first one's last chunk reading on (at stride 1 every pixel is read).
READ_ON_CASES = [(row, where) for row in POINTWISE_IN_PLACE[1:]
                 for where in ("first pixel", "last pixel", "read past only") if where != "read past only" or row[6] > 1]


@needs_amx
@pytest.mark.parametrize("row, where", READ_ON_CASES, ids=[f"{where}-s{row[6]}-c{row[3]}" for row, where in READ_ON_CASES])
def test_a_pointwise_forward_that_reads_on_into_a_nonfinite_input_runs_on_avx512(row, where, monkeypatch, rng):
    # The value past a pixel's channels meets a zero weight: 0 x inf would be NaN.
    args = _forward_call(row, rng)
    args[0][{"first pixel": (0, 0, 0, 0), "last pixel": (-1, -1, -1, -1), "read past only": (0, 0, 1, 0)}[where]] = np.inf
    on = convviz.conv2d(*args)
    assert not _forward.last_ran_on_amx()
    off = _without_amx(monkeypatch, convviz.conv2d, *args)
    assert np.array_equal(on.view(np.uint16), off.view(np.uint16))


@needs_amx
@pytest.mark.parametrize("row", [GEOMETRIES[1], POINTWISE_IN_PLACE[1]], ids=["staged", "in place"])
@pytest.mark.parametrize("case", ["subnormal input", "tiny products", "infinite weight", "subnormal weight"])
def test_where_flushing_could_change_a_sum_the_avx512_kernel_runs(row, case, monkeypatch, rng):
    # In place, the input is checked as the tiles read it: the AVX-512 kernel
    # then overwrites every result the tiles wrote.
    args = _forward_call(row, rng)
    x, w = args[0], args[1]
    if case == "subnormal input":
        x[-1, -1, 3, 4] = BF16(2.0**-130)
    elif case == "tiny products":
        # Normal numbers whose products' float32 sums could fall among the
        # subnormals: 2^-60 x 2^-60 is below 2^-126 (AMX would flush it).
        x *= BF16(2.0**-60)
        w *= BF16(2.0**-60)
    elif case == "infinite weight":
        w[-1, -1, 2, 3] = np.inf
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
