"""conv2d (TensorFlow ``Conv2D``): what is special about the forward pass.

tests/test_every_op.py already runs its record against the float64 reference
(every dtype, layout, padding, strides, dilations), across thread counts and
SIMD variants, with NaN and Inf; here: known values, wide channel counts that
take every register-tile path, the channel blocks per instruction set (packed
whole or unit by unit, split sums), the adjoint identity with the input
gradient, int32 wrapping, its own errors, and TensorFlow / PyTorch when installed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import DTYPES, assert_close_to_reference

import convviz
from convviz import _openmp_info, reference
from convviz._backends import cpu

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ISAS = _openmp_info.available_isas()


def _window(data_format, strides, dilations, padding, pads=(0, 0, 0, 0)):
    def four(pair):
        return [1, *pair, 1] if data_format == "NHWC" else [1, 1, *pair]

    explicit = []
    if padding == "EXPLICIT":
        explicit = convviz.geometry.explicit_paddings(pads, data_format)
    return dict(strides=four(strides), padding=padding, explicit_paddings=explicit, data_format=data_format,
                dilations=four(dilations))


def test_known_values():
    x = np.arange(16.0).reshape(1, 4, 4, 1)
    w = np.array([[1.0, 0.0], [0.0, -1.0]]).reshape(2, 2, 1, 1)  # x[i, j] - x[i+1, j+1]
    y = convviz.conv2d(x, w, [1, 1], "VALID")
    np.testing.assert_array_equal(y[0, :, :, 0], np.full((3, 3), -5.0))
    # Stride 2, SAME on 4 columns: 2 outputs need 1 padding column, which TensorFlow puts
    # on the right: windows [0, 1, 2] and [2, 3, pad].
    y = convviz.conv2d(x, np.ones((1, 3, 1, 1)), [1, 2], "SAME")
    np.testing.assert_array_equal(y[0, :, :, 0], [[3.0, 5.0], [15.0, 13.0], [27.0, 21.0], [39.0, 29.0]])
    # Dilation 2 reads every other column: 0 + 2 on the first row.
    y = convviz.conv2d(x, np.ones((1, 2, 1, 1)), [1, 1], "VALID", dilations=[1, 2])
    np.testing.assert_array_equal(y[0, 0, :, 0], [2.0, 4.0])


def test_groups_convolve_their_own_channels():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 6, 6))
    w = rng.standard_normal((3, 3, 2, 9))  # 3 groups of 2 input and 3 output channels
    y = convviz.conv2d(x, w, [1, 1], "SAME")
    for g in range(3):
        alone = convviz.conv2d(x[..., 2 * g:2 * g + 2], w[..., 3 * g:3 * g + 3], [1, 1], "SAME")
        np.testing.assert_allclose(y[..., 3 * g:3 * g + 3], alone, rtol=1e-13, atol=1e-13)


# Wide channel counts: two-vector and one-vector tiles, tiles stored straight into the
# output (NHWC, channels a multiple of the vector) and through the row buffer.
WIDE = [
    # (N, H, W, C_in, C_out, groups, KH, KW)
    (1, 9, 31, 16, 48, 1, 3, 3),
    (2, 6, 17, 24, 40, 2, 3, 2),
    (1, 5, 40, 7, 9, 1, 5, 5),
    (1, 8, 8, 64, 64, 4, 1, 1),
    # A filter bigger than the input: the kernel walks channel blocks over every row.
    (2, 3, 4, 16, 48, 2, 3, 3),
    (1, 5, 5, 40, 72, 1, 3, 3),
    # A short call whose filter weighs half its input or more: channel blocks too.
    (1, 10, 10, 40, 56, 1, 1, 1),
]


@pytest.mark.parametrize("case", WIDE)
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_wide_channels_on_every_simd_variant(case, data_format, dtype, rng):
    n, h, w, cin, cout, groups, kh, kw = case
    for padding, strides, dilations in [("SAME", (1, 1), (1, 1)), ("VALID", (2, 1), (1, 2)),
                                        ("EXPLICIT", (1, 3), (2, 1))]:
        g = convviz.ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=cin, out_channels=cout,
                                       kernel_hw=(kh, kw), strides=strides, dilations=dilations, padding=padding,
                                       explicit_paddings=(2, 0, 1, 3), groups=groups, data_format=data_format)
        x = rng.standard_normal(g.input_shape).astype(DTYPES[dtype])
        filt = rng.standard_normal(g.filter_shape).astype(DTYPES[dtype])
        kwargs = _window(data_format, strides, dilations, padding, (2, 0, 1, 3))
        exact = reference.conv2d(x, filt, **kwargs)
        bound = reference.conv2d(np.abs(x.astype(np.float64)), np.abs(filt.astype(np.float64)), **kwargs)
        for isa in ISAS:
            with cpu.use_isa(isa):
                got = convviz.conv2d(x, filt, **kwargs)
            assert got.dtype == DTYPES[dtype]
            assert_close_to_reference(got, exact, bound, dtype)


# A filter far bigger than the input, with a channel block's filter too big for the
# core's cache: the kernel splits each sum into parts that resume from the stored
# partial sums (NHWC, stored straight into the output).  NCHW goes through the row
# buffer, unsplit: the two must agree to the bit.  The parts pass the rows chunk by
# chunk (256 KiB of input rows a chunk): 2 x 10 rows of 20 KiB in chunks of 12 rows
# (float32; float64 6, strided 6 and 3).
SPLIT = [
    # (N, H, W, C_in, C_out, groups)
    (2, 4, 5, 256, 48, 1),
    (1, 3, 4, 512, 64, 2),
    (2, 10, 10, 512, 40, 1),
]


@pytest.mark.parametrize("case", SPLIT)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_split_sums_give_the_bits_of_whole_ones(case, dtype, rng):
    n, h, w, cin, cout, groups = case
    x = rng.standard_normal((n, h, w, cin)).astype(dtype)
    filt = rng.standard_normal((3, 3, cin // groups, cout)).astype(dtype)
    # SAME; stride and dilation (taps kept apart); top rows that read only padding.
    for padding, strides, dilations in [("SAME", (1, 1), (1, 1)), ("VALID", (2, 1), (1, 2)),
                                        ("EXPLICIT", (1, 2), (1, 1))]:
        kwargs = _window("NHWC", strides, dilations, padding, (4, 0, 1, 3))
        nchw = _window("NCHW", strides, dilations, padding, (4, 0, 1, 3))
        exact = reference.conv2d(x, filt, **kwargs)
        bound = reference.conv2d(np.abs(x.astype(np.float64)), np.abs(filt.astype(np.float64)), **kwargs)
        for isa in ISAS:
            with cpu.use_isa(isa):
                whole = convviz.conv2d(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), filt, **nchw)
                # One thread: a unit per channel block over every row (more threads cut the
                # rows into runs of fewer than a chunk).
                for n_threads in (1, 2):
                    split = convviz.conv2d(x, filt, **kwargs, n_threads=n_threads)
                    assert_close_to_reference(split, exact, bound, dtype)
                    assert split.tobytes() == np.ascontiguousarray(whole.transpose(0, 2, 3, 1)).tobytes(), (
                        isa, padding, n_threads)


@pytest.mark.parametrize("shape", [(2, 7, 6, 4, 6, 2), (1, 4, 5, 24, 40, 1)], ids=["by-rows", "by-channel-blocks"])
def test_nan_in_the_filter_reaches_only_its_cells_in_both_work_splits(shape, rng):
    n, h, w, cin, cout, groups = shape
    x = rng.standard_normal((n, h, w, cin)).astype(np.float32)
    filt = rng.standard_normal((3, 3, cin // groups, cout)).astype(np.float32)
    filt[0, 2, 1, 3] = np.nan
    for isa in ISAS:
        with cpu.use_isa(isa):
            got = convviz.conv2d(x, filt, [1, 1], "SAME", dilations=[2, 1])
        with np.errstate(invalid="ignore"):
            exact = reference.conv2d(x, filt, [1, 1], "SAME", dilations=[2, 1])
        np.testing.assert_array_equal(np.isnan(got), np.isnan(exact))
        assert np.isnan(exact).any() and not np.isnan(exact).all()


def test_strided_views_give_the_same_bits(rng):
    x = rng.standard_normal((2, 9, 12, 10)).astype(np.float32)
    filt = rng.standard_normal((3, 3, 5, 8)).astype(np.float32)
    view = x[:, ::2, 1::1, :]  # non-contiguous rows
    got = convviz.conv2d(view, filt, [1, 1], "SAME")
    assert got.tobytes() == convviz.conv2d(np.ascontiguousarray(view), filt, [1, 1], "SAME").tobytes()


FORWARD_SHAPES = [  # (K, stride, batch, height/width, Cin, Cout, groups)
    # channel-block units (the filter outweighs the input), blocks packed by the
    # units themselves: 4-vector blocks on AVX-512 (rows of 7 or fewer columns)
    # with a last block of 3 or 1 vectors, split sums (a block's filter past
    # 128 KiB), groups, a stride
    (3, 1, 1, 6, 40, 296, 1), (3, 1, 1, 7, 64, 304, 1), (3, 2, 1, 9, 48, 520, 2), (3, 1, 1, 5, 256, 1088, 4),
    # output-row units: short rows (4-vector blocks), wide rows, a filter packed
    # block by block (256 or more channels)
    (1, 1, 8, 7, 16, 100, 1), (3, 1, 2, 20, 32, 40, 1), (3, 2, 4, 16, 64, 272, 1),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", FORWARD_SHAPES, ids=lambda s: "k{}s{}n{}hw{}ci{}co{}g{}".format(*s))
def test_forward_kernels(isa, shape, rng):
    """The forward pass's channel blocks of every width, packed whole or by the
    units that use them, with split sums; the same bits for any thread count; a
    NaN in one block's corner tap reaches exactly the pixels whose window holds
    it (that block alone takes the exact border path)."""
    k, s, n, hw, cin, cout, groups = shape
    kwargs = dict(strides=[1, s, s, 1], padding="SAME")
    g = convviz.ConvGeometry.build(batch=n, input_hw=(hw, hw), in_channels=cin, out_channels=cout,
                                   kernel_hw=(k, k), strides=(s, s), dilations=(1, 1), padding="SAME",
                                   groups=groups)
    x = rng.standard_normal(g.input_shape).astype(np.float32)
    filt = rng.standard_normal(g.filter_shape).astype(np.float32)
    x64, filt64 = x.astype(np.float64), filt.astype(np.float64)
    exact = convviz.reference.conv2d(x64, filt64, **kwargs)
    bound = convviz.reference.conv2d(np.abs(x64), np.abs(filt64), **kwargs)
    nan_filt = filt.copy()
    nan_filt[0, 0, 1, min(70, cout - 1)] = np.nan  # the top-left tap: reads the padding in row and column 0
    nan_exact = convviz.reference.conv2d(x64, nan_filt.astype(np.float64), **kwargs)
    with cpu.use_isa(isa):
        got = [convviz.conv2d(x, filt, n_threads=t, **kwargs) for t in (1, 2, 3)]
        got64 = convviz.conv2d(x64, filt64, **kwargs)
        got16 = convviz.conv2d(x.astype(np.float16), filt.astype(np.float16), **kwargs)
        got_nan = convviz.conv2d(x, nan_filt, n_threads=2, **kwargs)
    assert_close_to_reference(got[0], exact, bound, "float32")
    assert_close_to_reference(got64, exact, bound, "float64")
    exact16 = convviz.reference.conv2d(x.astype(np.float16).astype(np.float64),
                                       filt.astype(np.float16).astype(np.float64), **kwargs)
    assert_close_to_reference(got16, exact16, bound, "float16")
    for other in got[1:]:
        np.testing.assert_array_equal(got[0].view(np.uint32), other.view(np.uint32))
    np.testing.assert_array_equal(np.isnan(got_nan), np.isnan(nan_exact))
    finite = ~np.isnan(nan_exact)
    assert_close_to_reference(got_nan[finite], nan_exact[finite], bound[finite], "float32")


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("padding", ["SAME", "VALID", "EXPLICIT"])
def test_adjoint_of_the_input_gradient(data_format, padding, rng):
    """<conv2d(x, W), dy> == <x, conv2d_backprop_input(W, dy)>: the two kernels are each other's transpose."""
    for strides, dilations, groups in [((1, 1), (1, 1), 1), ((2, 3), (1, 2), 2), ((3, 1), (2, 2), 3)]:
        g = convviz.ConvGeometry.build(batch=2, input_hw=(11, 10), in_channels=6, out_channels=6,
                                       kernel_hw=(3, 2), strides=strides, dilations=dilations, padding=padding,
                                       explicit_paddings=(1, 2, 0, 1), groups=groups, data_format=data_format)
        x = rng.standard_normal(g.input_shape)
        filt = rng.standard_normal(g.filter_shape)
        dy = rng.standard_normal(g.output_shape)
        kwargs = _window(data_format, strides, dilations, padding, (1, 2, 0, 1))
        forward = np.vdot(convviz.conv2d(x, filt, **kwargs), dy)
        backward = np.vdot(x, convviz.conv2d_backprop_input(list(g.input_shape), filt, dy, **kwargs))
        assert forward == pytest.approx(backward, rel=1e-12, abs=1e-12)


def test_int32_wraps_like_tensorflow():
    x = np.full((1, 2, 2, 1), 2**30, dtype=np.int32)
    w = np.full((2, 2, 1, 1), 2, dtype=np.int32)
    # 4 terms of 2**31 = 2**33, which is 0 modulo 2**32.
    assert convviz.conv2d(x, w, [1, 1], "VALID")[0, 0, 0, 0] == 0
    x = np.arange(-8, 8, dtype=np.int32).reshape(1, 4, 4, 1)
    w = np.array([[3, -1], [2, 5]], dtype=np.int32).reshape(2, 2, 1, 1)
    expected = reference.conv2d(x.astype(np.float64), w.astype(np.float64), [1, 1], "SAME")
    for layout in ("NHWC", "NCHW"):
        xl = x if layout == "NHWC" else x.transpose(0, 3, 1, 2)
        got = convviz.conv2d(xl, w, [1, 1], "SAME", data_format=layout)
        got = got if layout == "NHWC" else got.transpose(0, 2, 3, 1)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, expected)


def test_its_own_errors():
    x = np.ones((1, 5, 5, 6), np.float32)
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv2d: input depth \(6, from input\) must be a "
                                                           r"positive multiple of the filter's in-depth"):
        convviz.conv2d(x, np.ones((3, 3, 4, 2), np.float32), [1, 1], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv2d: filter out-depth \(filter.shape\[3\] = 4\) "
                                                           r"must be a multiple of the number of groups \(3"):
        convviz.conv2d(x, np.ones((3, 3, 2, 4), np.float32), [1, 1], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv2d: filter must not be empty"):
        convviz.conv2d(x, np.ones((3, 0, 6, 4), np.float32), [1, 1], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv2d: filter must be 4-D"):
        convviz.conv2d(x, np.ones((3, 3, 6), np.float32), [1, 1], "SAME")
    with pytest.raises(TypeError, match=r"^conv2d: filter must have the same dtype as input"):
        convviz.conv2d(x, np.ones((3, 3, 6, 4), np.float64), [1, 1], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match=r"^Conv2D: strides must have 4 values"):
        convviz.compat.tf.raw_ops.Conv2D(input=x, filter=np.ones((3, 3, 6, 4), np.float32), strides=[1, 1],
                                         padding="SAME")
    # A kernel larger than the padded input: VALID has no output rows, SAME still has.
    assert convviz.conv2d(np.ones((1, 2, 2, 1)), np.ones((3, 3, 1, 1)), [1, 1], "VALID").shape == (1, 0, 0, 1)
    assert convviz.conv2d(np.ones((1, 2, 2, 1)), np.ones((3, 3, 1, 1)), [1, 1], "SAME")[0, :, :, 0].tolist() == \
        [[4.0, 4.0], [4.0, 4.0]]


# -- peers, when installed -----------------------------------------------------
PEER_CASES = [
    # (N, H, W, C_in, C_out, groups, KH, KW, sh, sw, dh, dw, padding, explicit (t, b, l, r))
    (2, 7, 8, 3, 4, 1, 3, 3, 1, 1, 1, 1, "SAME", None),
    (2, 9, 8, 6, 4, 2, 3, 2, 2, 2, 1, 1, "SAME", None),
    (1, 12, 11, 4, 6, 1, 3, 3, 1, 1, 2, 2, "SAME", None),
    (1, 9, 9, 2, 5, 1, 3, 3, 2, 1, 1, 1, "VALID", None),
    (1, 8, 7, 4, 8, 4, 3, 3, 1, 2, 1, 1, "EXPLICIT", (2, 0, 1, 3)),
    (2, 14, 14, 32, 32, 1, 3, 3, 2, 2, 1, 1, "SAME", None),
]


def _peer_arrays(case, dtype, rng):
    n, h, w, cin, cout, groups, kh, kw = case[:8]
    x = rng.standard_normal((n, h, w, cin)).astype(dtype)
    filt = rng.standard_normal((kh, kw, cin // groups, cout)).astype(dtype)
    return x, filt


@pytest.mark.parametrize("case", PEER_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_agrees_with_tensorflow(case, dtype, rng):
    tf = pytest.importorskip("tensorflow")
    *_, sh, sw, dh, dw, padding, pads = case
    x, filt = _peer_arrays(case, dtype, rng)
    kwargs = _window("NHWC", (sh, sw), (dh, dw), padding, pads or (0, 0, 0, 0))
    try:
        expected = tf.raw_ops.Conv2D(input=x, filter=filt, **kwargs).numpy()
    except Exception as error:  # TensorFlow's CPU kernel refuses some dilated/grouped float64 cases
        pytest.skip(f"TensorFlow refuses this case: {type(error).__name__}")
    got = convviz.compat.tf.raw_ops.Conv2D(input=x, filter=filt, **kwargs)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * np.abs(expected).max())


@pytest.mark.parametrize("case", [c for c in PEER_CASES if c[12] != "SAME" or (c[8], c[9]) == (1, 1)])
def test_agrees_with_pytorch(case, rng):
    torch = pytest.importorskip("torch")
    n, h, w, cin, cout, groups, kh, kw, sh, sw, dh, dw, padding, pads = case
    x, filt = _peer_arrays(case, np.float64, rng)
    g = convviz.ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=cin, out_channels=cout,
                                   kernel_hw=(kh, kw), strides=(sh, sw), dilations=(dh, dw), padding=padding,
                                   explicit_paddings=pads or (0, 0, 0, 0), groups=groups)
    # PyTorch pads symmetrically: pad explicitly to TensorFlow's split, then run VALID.
    padded = np.pad(x, ((0, 0), (g.rows.pad_before, g.rows.pad_after), (g.cols.pad_before, g.cols.pad_after),
                        (0, 0)))
    expected = torch.nn.functional.conv2d(
        torch.from_numpy(padded.transpose(0, 3, 1, 2).copy()), torch.from_numpy(filt.transpose(3, 2, 0, 1).copy()),
        stride=(sh, sw), dilation=(dh, dw), groups=groups).numpy().transpose(0, 2, 3, 1)
    got = convviz.conv2d(x, filt, **_window("NHWC", (sh, sw), (dh, dw), padding, pads or (0, 0, 0, 0)))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
