"""conv2d_backprop_filter (TensorFlow ``Conv2DBackpropFilter``): what is special about it.

tests/test_every_op.py already runs its record against the float64 reference
(every dtype, layout, padding, strides, dilations), across thread counts and
SIMD variants, with NaN and Inf; here: known values, wide channel counts that
take every tile shape, the tiles per instruction set (a kernel row's taps merged,
1x1 to 7x7, output gradients staged block by block), the adjoint identity with
conv2d, determinism on a problem big enough for many tiles, its own errors, and
TensorFlow / PyTorch when installed.
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

    explicit = convviz.geometry.explicit_paddings(pads, data_format) if padding == "EXPLICIT" else []
    return dict(strides=four(strides), padding=padding, explicit_paddings=explicit, data_format=data_format,
                dilations=four(dilations))


def test_known_values():
    # dW[kh, kw] = sum over the 2x2 outputs of x[oh + kh, ow + kw] * dy[oh, ow].
    x = np.arange(9.0).reshape(1, 3, 3, 1)
    dy = np.array([[1.0, 0.0], [0.0, -1.0]]).reshape(1, 2, 2, 1)
    dw = convviz.conv2d_backprop_filter(x, [2, 2, 1, 1], dy, [1, 1], "VALID")
    np.testing.assert_array_equal(dw[:, :, 0, 0], [[-4.0, -4.0], [-4.0, -4.0]])
    # Two groups: each output channel's weights see only their group's input channel.
    x = np.stack([np.ones((3, 3)), 2 * np.ones((3, 3))], axis=-1)[None]
    dw = convviz.conv2d_backprop_filter(x, [1, 1, 1, 2], np.ones((1, 3, 3, 2)), [1, 1], "VALID")
    np.testing.assert_array_equal(dw[0, 0, 0], [9.0, 18.0])


WIDE = [
    # (N, H, W, C_in, C_out, groups, KH, KW): partial tiles of input channels, one- and
    # two-vector blocks of output channels, groups, a pointwise and a 7-wide kernel.
    (2, 9, 13, 16, 48, 1, 3, 3),
    (1, 6, 17, 30, 40, 2, 3, 2),
    (1, 11, 11, 3, 64, 1, 7, 7),
    (3, 5, 5, 64, 24, 4, 1, 1),
    # Few input channels: tiles of 4 vectors of output channels (then 3, 2 or 1 at the end).
    (1, 9, 9, 2, 112, 1, 3, 3),
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
        if 0 in g.output_shape:
            continue
        x = rng.standard_normal(g.input_shape).astype(DTYPES[dtype])
        dy = rng.standard_normal(g.output_shape).astype(DTYPES[dtype])
        sizes = list(g.filter_shape)
        kwargs = _window(data_format, strides, dilations, padding, (2, 0, 1, 3))
        exact = reference.conv2d_backprop_filter(x, sizes, dy, **kwargs)
        bound = reference.conv2d_backprop_filter(np.abs(x.astype(np.float64)), sizes,
                                                 np.abs(dy.astype(np.float64)), **kwargs)
        for isa in ISAS:
            with cpu.use_isa(isa):
                got = convviz.conv2d_backprop_filter(x, sizes, dy, **kwargs)
            assert got.dtype == DTYPES[dtype] and got.shape == tuple(sizes)
            assert_close_to_reference(got, exact, bound, dtype)


DENSE_FILTER_SHAPES = [  # (K, stride, dilation, width, Cin, Cout, groups)
    (7, 2, 1, 21, 3, 64, 1), (7, 1, 1, 9, 3, 16, 1), (5, 1, 1, 11, 2, 40, 1), (4, 3, 1, 12, 1, 17, 1),
    (3, 1, 1, 37, 3, 8, 1), (7, 2, 1, 30, 8, 32, 1), (5, 1, 2, 13, 3, 16, 1), (3, 1, 1, 14, 6, 12, 2),
    (1, 1, 1, 19, 40, 24, 1), (5, 2, 1, 9, 16, 48, 1),
    # 128 or more output channels: dy staged channel block by channel block
    # (a last block of 1 vector, groups, a merged stem with 4-vector blocks)
    (3, 1, 1, 9, 16, 136, 1), (3, 2, 1, 11, 32, 256, 2), (7, 2, 1, 21, 3, 160, 1), (1, 1, 1, 7, 24, 200, 1),
    # 1x1 with blocked dy: tiles ordered by channel block, each unit staging its own blocks (groups too)
    (1, 1, 1, 9, 32, 256, 2),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", DENSE_FILTER_SHAPES, ids=lambda s: "k{}s{}d{}w{}ci{}co{}g{}".format(*s))
def test_dense_filter_gradient_kernels(isa, shape, rng):
    """Every tile shape of the dense filter gradient, with kernels up to 7x7
    (whose per-row tables the scratch must hold), and a kernel row's taps merged
    into one run for a few input channels (Cin <= MR/4, no groups or dilation):
    the interior through the tiles, the border columns pair by pair, so a NaN
    in the output gradient reaches exactly the taps the reference puts it in."""
    k, s, d, w, cin, cout, groups = shape
    kwargs = dict(strides=[1, s, s, 1], padding="SAME", dilations=[1, d, d, 1])
    g = convviz.ConvGeometry.build(batch=2, input_hw=(6, w), in_channels=cin, out_channels=cout,
                                   kernel_hw=(k, k), strides=(s, s), dilations=(d, d), padding="SAME",
                                   groups=groups)
    x = rng.standard_normal(g.input_shape).astype(np.float32)
    dy = rng.standard_normal(g.output_shape).astype(np.float32)
    sizes = list(g.filter_shape)
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    exact = convviz.reference.conv2d_backprop_filter(x64, sizes, dy64, **kwargs)
    bound = convviz.reference.conv2d_backprop_filter(np.abs(x64), sizes, np.abs(dy64), **kwargs)
    nan_dy = dy.copy()
    nan_dy[1, -1, 0, :] = np.nan  # a border column: some taps of a merged row read the padding there
    nan_exact = convviz.reference.conv2d_backprop_filter(x64, sizes, nan_dy.astype(np.float64), **kwargs)
    with cpu.use_isa(isa):
        got = [convviz.conv2d_backprop_filter(x, sizes, dy, n_threads=n, **kwargs) for n in (1, 2, 3)]
        got_nan = convviz.conv2d_backprop_filter(x, sizes, nan_dy, **kwargs)
    assert_close_to_reference(got[0], exact, bound, "float32")
    for other in got[1:]:
        np.testing.assert_array_equal(got[0].view(np.uint32), other.view(np.uint32))
    np.testing.assert_array_equal(np.isnan(got_nan), np.isnan(nan_exact))


def check_routed_1x1_gradient(isa, g, dtype, route, own_setting, nan_at, rng, monkeypatch):
    """A 1x1 filter gradient that ``filter_grad.prepare`` routes as ``route``, and that
    runs that way (the first array the kernel gets: x transposed on the forward
    kernel, dy when swapped): the same bits as the filter gradient's own kernel
    (with ``own_setting``, a module attribute set to 0, it takes that) for 1-3
    threads, the reference's values, and a NaN at ``nan_at`` (``"x"`` or ``"dy"``,
    its first element) where the reference puts it."""
    from convviz.ops import _op, filter_grad

    assert filter_grad.prepare(_op.Call(g, np.dtype(dtype), 1), fast=False) == route
    kernel_name = "_forward_kernel" if route == filter_grad.ON_FORWARD else "_kernel"
    first_arrays = []

    def spy(first, *args):
        first_arrays.append(first.shape)
        return real(first, *args)

    real = getattr(filter_grad, kernel_name)
    monkeypatch.setattr(filter_grad, kernel_name, spy)
    x = rng.standard_normal(g.input_shape).astype(dtype)
    dy = rng.standard_normal(g.output_shape).astype(dtype)
    kwargs = dict(strides=list(g.strides_hw), padding="VALID", data_format=g.data_format)
    sizes = list(g.filter_shape)
    nan_x, nan_dy = x.copy(), dy.copy()
    (nan_x if nan_at == "x" else nan_dy).flat[0] = np.nan
    with cpu.use_isa(isa):
        _op._PLANS.clear()
        got = [convviz.conv2d_backprop_filter(x, sizes, dy, n_threads=n, **kwargs) for n in (1, 2, 3)]
        got_nan = convviz.conv2d_backprop_filter(nan_x, sizes, nan_dy, **kwargs)
        pixels, (cin, cout) = g.batch * g.output_hw[0] * g.output_hw[1], (g.in_channels, g.out_channels)
        expected = (1, 1, cin, pixels) if route == filter_grad.ON_FORWARD else (g.batch, *g.output_hw, cout)
        assert first_arrays == [expected] * 4
        monkeypatch.undo()
        monkeypatch.setattr(filter_grad, own_setting, 0)
        _op._PLANS.clear()
        own = convviz.conv2d_backprop_filter(x, sizes, dy, **kwargs)
        monkeypatch.undo()
        _op._PLANS.clear()
    for result in got:
        np.testing.assert_array_equal(result, own)
    check_reference(got[0], x, dy, got_nan, nan_x, nan_dy, sizes, kwargs, dtype)


def check_reference(got, x, dy, got_odd, odd_x, odd_dy, sizes, kwargs, dtype):
    """``got`` (the gradient of x and dy) against the float64 reference, and NaN,
    +Inf and -Inf of ``got_odd`` (of odd_x and odd_dy) where the reference puts them."""
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    exact = reference.conv2d_backprop_filter(x64, sizes, dy64, **kwargs)
    bound = reference.conv2d_backprop_filter(np.abs(x64), sizes, np.abs(dy64), **kwargs)
    assert_close_to_reference(got, exact, bound, dtype)
    odd_exact = reference.conv2d_backprop_filter(odd_x.astype(np.float64), sizes, odd_dy.astype(np.float64), **kwargs)
    for where in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(where(got_odd), where(odd_exact))


def one_by_one(batch, h, w, cin, cout, stride, data_format):
    """The geometry of a 1x1 layer without padding."""
    return convviz.ConvGeometry.build(batch=batch, input_hw=(h, w), in_channels=cin, out_channels=cout,
                                      kernel_hw=(1, 1), strides=(stride, stride), dilations=(1, 1), padding="VALID",
                                      data_format=data_format)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_short_1x1_gradient_on_the_forward_kernel(isa, data_format, dtype, rng, monkeypatch):
    """A 1x1 filter gradient over few pixels with more output channels than input
    channels runs on the forward kernel (x transposed, dy as its filter), at
    stride 1 and 2, with channel remainders."""
    from convviz.ops import filter_grad

    for batch, size, stride, cin, cout in ((1, 7, 1, 64, 344), (1, 13, 2, 96, 288), (2, 4, 1, 130, 264)):
        check_routed_1x1_gradient(isa, one_by_one(batch, size, size, cin, cout, stride, data_format), dtype,
                                  filter_grad.ON_FORWARD, "FORWARD_MAX_PIXELS", "x", rng, monkeypatch)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_few_output_channels_swapped(isa, data_format, rng, monkeypatch):
    """A 1x1 filter gradient with a few output channels runs with x and dy swapped
    (the result written transposed)."""
    from convviz.ops import filter_grad

    for batch, h, w, cin, cout in ((1, 20, 20, 64, 2), (2, 9, 11, 40, 8), (1, 5, 7, 16, 1)):
        check_routed_1x1_gradient(isa, one_by_one(batch, h, w, cin, cout, 1, data_format), "float32",
                                  filter_grad.SWAPPED, "SWAPPED_MAX_OUT_CHANNELS", "dy", rng, monkeypatch)


ROWS_IN_PARTS = [
    # (N, H, W, C_in, C_out, K, stride, padding, data_format): filters of few tiles
    # over long sums -- a 1x1 layer of 3 tiles, a stem whose kernel rows' taps are
    # merged (SAME borders) -- a 1x1 layer whose tiles would each read all of dy,
    # and one of 148 tiles (265 KiB of sums a part) that would each read all of x.
    (1, 112, 112, 32, 16, 1, 1, "VALID", "NHWC"),
    (1, 160, 160, 3, 16, 3, 2, "SAME", "NCHW"),
    (2, 56, 56, 64, 64, 1, 1, "VALID", "NHWC"),
    (2, 28, 28, 512, 128, 1, 1, "VALID", "NCHW"),
]
# The generic kernel's one-lane tiles are many: only the 2x56x56 layer is in parts there.
ROWS_IN_PARTS_GENERIC = ROWS_IN_PARTS[2]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("case", ROWS_IN_PARTS, ids=lambda c: "x".join(map(str, c[:7])) + c[7] + c[8])
def test_rows_summed_in_parts(isa, dtype, case, rng):
    """Where the filter has few tiles and the sum is long, the output rows are
    summed in parts (their number fixed by the problem size) and the parts added
    in order: the same bits for any thread count, the reference's values, and a
    NaN and an Inf in late rows land where the float64 reference puts them."""
    from convviz.ops import _filter_grad

    n, h, w, cin, cout, k, stride, padding, data_format = case
    if isa == "generic" and case != ROWS_IN_PARTS_GENERIC:
        pytest.skip("the generic kernel's one-lane tiles are many: this filter is not in parts there")
    if dtype == "float64" and case == ROWS_IN_PARTS[3]:
        pytest.skip("in float64 the 148 tiles' sums are twice the bytes: too many a part for its work")
    g = convviz.ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=cin, out_channels=cout, kernel_hw=(k, k),
                                   strides=(stride, stride), dilations=(1, 1), padding=padding,
                                   data_format=data_format)
    x = rng.standard_normal(g.input_shape).astype(dtype)
    dy = rng.standard_normal(g.output_shape).astype(dtype)
    kwargs = _window(data_format, (stride, stride), (1, 1), padding)
    sizes = list(g.filter_shape)
    odd_x, odd_dy = x.copy(), dy.copy()
    odd_x.flat[-cin * 3] = np.nan  # a pixel of the last rows (the last part)
    odd_dy.flat[odd_dy.size // 2] = np.inf
    with cpu.use_isa(isa):
        got = [convviz.conv2d_backprop_filter(x, sizes, dy, n_threads=t, **kwargs) for t in (1, 2, 3, 5)]
        parts = _filter_grad.last_row_parts()
        got_odd = convviz.conv2d_backprop_filter(odd_x, sizes, odd_dy, **kwargs)
    assert parts > 1
    for other in got[1:]:
        assert other.tobytes() == got[0].tobytes()
    check_reference(got[0], x, dy, got_odd, odd_x, odd_dy, sizes, kwargs, dtype)


def test_bitwise_the_same_for_any_thread_count_on_many_tiles(rng):
    x = rng.standard_normal((4, 20, 20, 40)).astype(np.float32)
    dy = rng.standard_normal((4, 20, 20, 72)).astype(np.float32)
    results = [convviz.conv2d_backprop_filter(x, [3, 3, 40, 72], dy, [1, 1], "SAME", n_threads=t)
               for t in (1, 2, 3, 7)]
    assert all(r.tobytes() == results[0].tobytes() for r in results[1:])


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("padding", ["SAME", "VALID", "EXPLICIT"])
def test_adjoint_of_conv2d(data_format, padding, rng):
    """<conv2d(x, W), dy> == <W, conv2d_backprop_filter(x, dy)>: linear in W, and the kernel is its transpose."""
    for strides, dilations, groups in [((1, 1), (1, 1), 1), ((2, 3), (1, 2), 2), ((3, 1), (2, 2), 3)]:
        g = convviz.ConvGeometry.build(batch=2, input_hw=(11, 10), in_channels=6, out_channels=6,
                                       kernel_hw=(3, 2), strides=strides, dilations=dilations, padding=padding,
                                       explicit_paddings=(1, 2, 0, 1), groups=groups, data_format=data_format)
        x = rng.standard_normal(g.input_shape)
        filt = rng.standard_normal(g.filter_shape)
        dy = rng.standard_normal(g.output_shape)
        kwargs = _window(data_format, strides, dilations, padding, (1, 2, 0, 1))
        forward = np.vdot(convviz.conv2d(x, filt, **kwargs), dy)
        backward = np.vdot(filt, convviz.conv2d_backprop_filter(x, list(g.filter_shape), dy, **kwargs))
        assert forward == pytest.approx(backward, rel=1e-12, abs=1e-12)


def test_its_own_errors():
    x = np.ones((1, 5, 5, 6), np.float32)
    dy = np.ones((1, 5, 5, 4), np.float32)
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv2d_backprop_filter: filter_sizes must have 4"):
        convviz.conv2d_backprop_filter(x, [3, 3, 6], dy, [1, 1], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv2d_backprop_filter: input depth \(6, from "
                                                           r"input\) must be a positive multiple"):
        convviz.conv2d_backprop_filter(x, [3, 3, 4, 4], dy, [1, 1], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv2d_backprop_filter: out_backprop must have "
                                                           r"shape \(1, 5, 5, 8\)"):
        convviz.conv2d_backprop_filter(x, [3, 3, 6, 8], dy, [1, 1], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match=r"^conv2d_backprop_filter: filter_sizes"):
        convviz.conv2d_backprop_filter(x, [3, 0, 6, 4], dy, [1, 1], "SAME")
    with pytest.raises(TypeError, match=r"^conv2d_backprop_filter: .*int32"):
        convviz.conv2d_backprop_filter(x.astype(np.int32), [3, 3, 6, 4], dy.astype(np.int32), [1, 1], "SAME")
    # No output cell: the gradient is an empty sum.
    dw = convviz.conv2d_backprop_filter(np.ones((0, 5, 5, 6)), [3, 3, 6, 4], np.ones((0, 5, 5, 4)), [1, 1], "SAME")
    assert dw.shape == (3, 3, 6, 4) and not dw.any()


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
    n, h, w, cin, cout, groups, kh, kw, sh, sw, dh, dw, padding, pads = case
    g = convviz.ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=cin, out_channels=cout,
                                   kernel_hw=(kh, kw), strides=(sh, sw), dilations=(dh, dw), padding=padding,
                                   explicit_paddings=pads or (0, 0, 0, 0), groups=groups)
    return g, rng.standard_normal(g.input_shape).astype(dtype), rng.standard_normal(g.output_shape).astype(dtype)


@pytest.mark.parametrize("case", PEER_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_agrees_with_tensorflow(case, dtype, rng):
    tf = pytest.importorskip("tensorflow")
    *_, sh, sw, dh, dw, padding, pads = case
    g, x, dy = _peer_arrays(case, dtype, rng)
    kwargs = _window("NHWC", (sh, sw), (dh, dw), padding, pads or (0, 0, 0, 0))
    try:
        expected = tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=list(g.filter_shape), out_backprop=dy,
                                                   **kwargs).numpy()
    except Exception as error:  # TensorFlow's CPU kernel refuses some dilated/grouped float64 cases
        pytest.skip(f"TensorFlow refuses this case: {type(error).__name__}")
    got = convviz.compat.tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=list(g.filter_shape),
                                                         out_backprop=dy, **kwargs)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * np.abs(expected).max())


@pytest.mark.parametrize("case", PEER_CASES)
def test_agrees_with_pytorch(case, rng):
    torch = pytest.importorskip("torch")
    n, h, w, cin, cout, groups, kh, kw, sh, sw, dh, dw, padding, pads = case
    g, x, dy = _peer_arrays(case, np.float64, rng)
    # PyTorch pads symmetrically: pad explicitly to TensorFlow's split, then take VALID's gradient.
    padded = np.pad(x, ((0, 0), (g.rows.pad_before, g.rows.pad_after), (g.cols.pad_before, g.cols.pad_after),
                        (0, 0)))
    xt = torch.from_numpy(padded.transpose(0, 3, 1, 2).copy())
    expected = torch.nn.grad.conv2d_weight(
        xt, (cout, cin // groups, kh, kw), torch.from_numpy(dy.transpose(0, 3, 1, 2).copy()),
        stride=(sh, sw), dilation=(dh, dw), groups=groups).numpy().transpose(2, 3, 1, 0)
    got = convviz.conv2d_backprop_filter(x, list(g.filter_shape), dy,
                                         **_window("NHWC", (sh, sw), (dh, dw), padding, pads or (0, 0, 0, 0)))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
