"""depthwise_conv2d_native and depthwise_conv2d_native_backprop_input (TensorFlow
``DepthwiseConv2dNative`` / ``DepthwiseConv2dNativeBackpropInput``): what is special.

tests/test_every_op.py already runs both records against their float64
references (every dtype, layout, padding, strides, dilations), across thread
counts and SIMD variants, with NaN and Inf; here: known values, channel counts
and multipliers that take the in-place and the staged paths and every tile,
the adjoint identities of the three depthwise ops, their own errors, and
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
WINDOWS = [("SAME", (1, 1), (1, 1)), ("VALID", (2, 1), (1, 2)), ("EXPLICIT", (1, 3), (2, 1)), ("SAME", (2, 2), (1, 1))]
PADS = (2, 0, 1, 3)


def _window(data_format, strides, dilations, padding):
    def four(pair):
        return [1, *pair, 1] if data_format == "NHWC" else [1, 1, *pair]

    explicit = convviz.geometry.explicit_paddings(PADS, data_format) if padding == "EXPLICIT" else []
    return dict(strides=four(strides), padding=padding, explicit_paddings=explicit, data_format=data_format,
                dilations=four(dilations))


def _geometry(n, h, w, c, m, k, data_format, padding, strides, dilations):
    return convviz.ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=c, out_channels=c * m,
                                      kernel_hw=(k, k), strides=strides, dilations=dilations, padding=padding,
                                      explicit_paddings=PADS, depthwise=True, data_format=data_format)


def test_known_values():
    x = np.arange(16.0).reshape(1, 4, 4, 1)
    y = convviz.depthwise_conv2d_native(x, np.ones((3, 3, 1, 2)), [1, 1], "SAME")
    assert y[0, 0, 0].tolist() == [10.0, 10.0]  # 0 + 1 + 4 + 5: the corner window, padding adds nothing
    assert y[0, 1, 1, 0] == 45.0  # 0+1+2+4+5+6+8+9+10
    dx = convviz.depthwise_conv2d_native_backprop_input([1, 3, 3, 1], np.ones((2, 2, 1, 3)),
                                                         np.ones((1, 2, 2, 3)), [1, 1], "VALID")
    # Each input cell: (number of windows reading it) x 3 multipliers.
    np.testing.assert_array_equal(dx[0, :, :, 0], [[3, 6, 3], [6, 12, 6], [3, 6, 3]])


# (N, H, W, C, M, K): channels a multiple of every vector width (read in place when
# M = 1 in float32/64 NHWC), channels that are not (in place too, the remainder
# through masks), multipliers 1-3, 5x5 and 1x1.
SHAPES = [(2, 9, 21, 32, 1, 3), (1, 7, 13, 5, 3, 3), (1, 11, 10, 48, 2, 5), (2, 6, 19, 17, 1, 1)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_both_ops_on_every_simd_variant(shape, data_format, dtype, rng):
    n, h, w, c, m, k = shape
    for padding, strides, dilations in WINDOWS:
        g = _geometry(n, h, w, c, m, k, data_format, padding, strides, dilations)
        if 0 in g.output_shape:
            continue
        x = rng.standard_normal(g.input_shape).astype(DTYPES[dtype])
        filt = rng.standard_normal(g.filter_shape).astype(DTYPES[dtype])
        dy = rng.standard_normal(g.output_shape).astype(DTYPES[dtype])
        kwargs = _window(data_format, strides, dilations, padding)
        wide = [a.astype(np.float64) for a in (x, filt, dy)]
        y_exact = reference.depthwise_conv2d_native(wide[0], wide[1], **kwargs)
        y_bound = reference.depthwise_conv2d_native(np.abs(wide[0]), np.abs(wide[1]), **kwargs)
        sizes = list(g.input_shape)
        dx_exact = reference.depthwise_conv2d_native_backprop_input(sizes, wide[1], wide[2], **kwargs)
        dx_bound = reference.depthwise_conv2d_native_backprop_input(sizes, np.abs(wide[1]), np.abs(wide[2]), **kwargs)
        for isa in ISAS:
            with cpu.use_isa(isa):
                y = convviz.depthwise_conv2d_native(x, filt, **kwargs)
                dx = convviz.depthwise_conv2d_native_backprop_input(sizes, filt, dy, **kwargs)
            assert y.dtype == dx.dtype == DTYPES[dtype]
            assert_close_to_reference(y, y_exact, y_bound, dtype)
            assert_close_to_reference(dx, dx_exact, dx_bound, dtype)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_adjoint_identities_of_the_three_depthwise_ops(data_format, rng):
    """<y(x, W), dy> == <x, dx(W, dy)> == <W, dW(x, dy)>: each gradient is the forward's transpose."""
    for padding, strides, dilations in WINDOWS:
        for m in (1, 2):
            g = _geometry(2, 11, 10, 6, m, 3, data_format, padding, strides, dilations)
            x, filt, dy = (rng.standard_normal(s) for s in (g.input_shape, g.filter_shape, g.output_shape))
            kwargs = _window(data_format, strides, dilations, padding)
            forward = np.vdot(convviz.depthwise_conv2d_native(x, filt, **kwargs), dy)
            by_input = np.vdot(x, convviz.depthwise_conv2d_native_backprop_input(list(g.input_shape), filt, dy,
                                                                                 **kwargs))
            by_filter = np.vdot(filt, convviz.depthwise_conv2d_native_backprop_filter(x, list(g.filter_shape), dy,
                                                                                      **kwargs))
            assert forward == pytest.approx(by_input, rel=1e-12, abs=1e-12)
            assert forward == pytest.approx(by_filter, rel=1e-12, abs=1e-12)


def test_bitwise_the_same_for_any_thread_count(rng):
    x = rng.standard_normal((3, 20, 20, 40)).astype(np.float32)
    filt = rng.standard_normal((3, 3, 40, 2)).astype(np.float32)
    dy = rng.standard_normal((3, 20, 20, 80)).astype(np.float32)
    ys = [convviz.depthwise_conv2d_native(x, filt, [1, 1], "SAME", n_threads=t) for t in (1, 2, 3, 7)]
    dxs = [convviz.depthwise_conv2d_native_backprop_input(list(x.shape), filt, dy, [1, 1], "SAME", n_threads=t)
           for t in (1, 2, 3, 7)]
    assert all(a.tobytes() == ys[0].tobytes() for a in ys) and all(a.tobytes() == dxs[0].tobytes() for a in dxs)


@pytest.mark.parametrize("k, stride, channels", [(3, 1, 16), (5, 1, 16), (3, 2, 16), (5, 2, 16), (3, 2, 48),
                                                 (3, 1, 20), (5, 2, 44)])
def test_stencil_rows_of_every_width(k, stride, channels, rng):
    """Widths 1-40 on every SIMD variant: the stencil tiles cover each row, clipped
    where they reach into the padding (on one side, both, or neither), a row
    shorter than half a tile in one tile of its length, and the
    last one moved back over the tile before it; at stride 2 the tiles take two
    channel vectors at a time (48 channels: 2 + 1 vectors with AVX-512, 2 + 2 + 2
    with AVX2); 20 and 44 channels end in a partial vector, read and written in
    place through masks (the sanitized build checks nothing past them is touched;
    at stride 2 the input gradient's phase tiles and border pixels).
    A filter tap set to Inf reaches exactly the cells whose sum
    reads it through a real input cell."""
    for w in range(1, 41):
        for padding in ("SAME", "VALID"):
            g = _geometry(1, 4, w, channels, 1, k, "NHWC", padding, (stride, stride), (1, 1))
            if 0 in g.output_shape:
                continue
            x = rng.standard_normal(g.input_shape).astype(np.float32)
            filt = rng.standard_normal(g.filter_shape).astype(np.float32)
            dy = rng.standard_normal(g.output_shape).astype(np.float32)
            kwargs = _window("NHWC", (stride, stride), (1, 1), padding)
            wide = [a.astype(np.float64) for a in (x, filt, dy)]
            sizes = list(g.input_shape)
            y_exact = reference.depthwise_conv2d_native(wide[0], wide[1], **kwargs)
            y_bound = reference.depthwise_conv2d_native(np.abs(wide[0]), np.abs(wide[1]), **kwargs)
            dx_exact = reference.depthwise_conv2d_native_backprop_input(sizes, wide[1], wide[2], **kwargs)
            dx_bound = reference.depthwise_conv2d_native_backprop_input(sizes, np.abs(wide[1]), np.abs(wide[2]),
                                                                        **kwargs)
            inf_filt = filt.copy()
            inf_filt[0, k - 1, 3, 0] = np.inf  # top right tap, channel 3
            y_inf = reference.depthwise_conv2d_native(wide[0], inf_filt.astype(np.float64), **kwargs)
            dx_inf = reference.depthwise_conv2d_native_backprop_input(sizes, inf_filt.astype(np.float64), wide[2],
                                                                      **kwargs)
            for isa in ISAS:
                with cpu.use_isa(isa):
                    y = convviz.depthwise_conv2d_native(x, filt, **kwargs)
                    dx = convviz.depthwise_conv2d_native_backprop_input(sizes, filt, dy, **kwargs)
                    y2 = convviz.depthwise_conv2d_native(x, inf_filt, **kwargs)
                    dx2 = convviz.depthwise_conv2d_native_backprop_input(sizes, inf_filt, dy, **kwargs)
                assert_close_to_reference(y, y_exact, y_bound, "float32")
                assert_close_to_reference(dx, dx_exact, dx_bound, "float32")
                np.testing.assert_array_equal(np.isfinite(y2), np.isfinite(y_inf), err_msg=f"{isa} w={w} {padding}")
                np.testing.assert_array_equal(np.isfinite(dx2), np.isfinite(dx_inf), err_msg=f"{isa} w={w} {padding}")


def test_their_own_errors():
    x = np.ones((1, 5, 5, 4), np.float32)
    with pytest.raises(convviz.InvalidArgumentError, match=r"^depthwise_conv2d_native: filter.shape\[2\] must equal "
                                                           r"the input depth \(4\), got 2"):
        convviz.depthwise_conv2d_native(x, np.ones((3, 3, 2, 1), np.float32), [1, 1], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match=r"^depthwise_conv2d_native: filter.shape must not be "
                                                           r"empty"):
        convviz.depthwise_conv2d_native(x, np.ones((3, 3, 4, 0), np.float32), [1, 1], "SAME")
    with pytest.raises(TypeError, match=r"^depthwise_conv2d_native: .*int32"):
        convviz.depthwise_conv2d_native(x.astype(np.int32), np.ones((3, 3, 4, 1), np.int32), [1, 1], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match=r"^depthwise_conv2d_native_backprop_input: input_sizes "
                                                           r"must have 4 values"):
        convviz.depthwise_conv2d_native_backprop_input([5, 5], np.ones((3, 3, 4, 1), np.float32),
                                                       np.ones((1, 5, 5, 4), np.float32), [1, 1], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match=r"^depthwise_conv2d_native_backprop_input: out_backprop "
                                                           r"must have shape \(1, 5, 5, 8\)"):
        convviz.depthwise_conv2d_native_backprop_input([1, 5, 5, 4], np.ones((3, 3, 4, 2), np.float32),
                                                       np.ones((1, 5, 5, 4), np.float32), [1, 1], "SAME")


# -- peers, when installed -----------------------------------------------------
PEER_CASES = [(2, 7, 8, 3, 1, 3, "SAME", (1, 1), (1, 1)), (2, 9, 8, 16, 2, 3, "SAME", (2, 2), (1, 1)),
              (1, 12, 11, 4, 1, 3, "VALID", (1, 1), (2, 2)), (1, 8, 7, 32, 1, 5, "VALID", (1, 1), (1, 1)),
              (1, 10, 10, 8, 3, 3, "SAME", (1, 1), (2, 2))]


@pytest.mark.parametrize("case", PEER_CASES)
def test_agree_with_tensorflow(case, rng):
    tf = pytest.importorskip("tensorflow")
    n, h, w, c, m, k, padding, strides, dilations = case
    g = _geometry(n, h, w, c, m, k, "NHWC", padding, strides, dilations)
    x, filt, dy = (rng.standard_normal(s).astype(np.float32) for s in (g.input_shape, g.filter_shape,
                                                                        g.output_shape))
    kwargs = _window("NHWC", strides, dilations, padding)
    try:
        y = tf.raw_ops.DepthwiseConv2dNative(input=x, filter=filt, **kwargs).numpy()
    except Exception as error:  # TensorFlow's CPU kernel refuses some dilated cases
        pytest.skip(f"TensorFlow refuses this case: {type(error).__name__}")
    np.testing.assert_allclose(convviz.compat.tf.raw_ops.DepthwiseConv2dNative(input=x, filter=filt, **kwargs), y,
                               rtol=1e-4, atol=1e-4 * np.abs(y).max())
    if dilations == (1, 1):  # with dilations TensorFlow's CPU kernel returns the dilation-1 result (NOTES.md)
        dx = tf.raw_ops.DepthwiseConv2dNativeBackpropInput(input_sizes=list(g.input_shape), filter=filt,
                                                           out_backprop=dy, **kwargs).numpy()
        got = convviz.depthwise_conv2d_native_backprop_input(list(g.input_shape), filt, dy, **kwargs)
        np.testing.assert_allclose(got, dx, rtol=1e-4, atol=1e-4 * np.abs(dx).max())


@pytest.mark.parametrize("case", PEER_CASES)
def test_agree_with_pytorch(case, rng):
    torch = pytest.importorskip("torch")
    n, h, w, c, m, k, padding, strides, dilations = case
    g = _geometry(n, h, w, c, m, k, "NCHW", padding, strides, dilations)
    x, filt, dy = (rng.standard_normal(s) for s in (g.input_shape, g.filter_shape, g.output_shape))
    pads = (g.cols.pad_before, g.cols.pad_after, g.rows.pad_before, g.rows.pad_after)
    weight = torch.from_numpy(filt.transpose(2, 3, 0, 1).reshape(c * m, 1, k, k).copy())
    xt = torch.from_numpy(x).requires_grad_()
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(xt, pads), weight, stride=strides, dilation=dilations,
                                   groups=c)
    y.backward(torch.from_numpy(dy))
    kwargs = _window("NCHW", strides, dilations, padding)
    np.testing.assert_allclose(convviz.depthwise_conv2d_native(x, filt, **kwargs), y.detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(convviz.depthwise_conv2d_native_backprop_input(list(x.shape), filt, dy, **kwargs),
                               xt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_results_beyond_the_caches_take_streaming_stores(rng):
    """Results of 8 MiB or more are stored past the caches (the kernels' `streamable`
    path, aligned vectors): the same values and the same bits for any thread count,
    with stride 1 and (the input gradient's stride-phase tiles) stride 2."""
    x = rng.standard_normal((1, 130, 256, 64)).astype(np.float32)  # 8.1 MiB in, and out with stride 1
    filt = rng.standard_normal((3, 3, 64, 1)).astype(np.float32)
    y = [convviz.depthwise_conv2d_native(x, filt, [1, 1], "SAME", n_threads=t) for t in (1, 2, 3)]
    dx = [convviz.depthwise_conv2d_native_backprop_input(list(x.shape), filt, x, [1, 1], "SAME", n_threads=t)
          for t in (1, 2, 3)]
    assert y[0].ctypes.data % 64 == 0 and y[0].nbytes >= 8 << 20  # what the streaming path needs
    wide = [a.astype(np.float64) for a in (x, filt)]
    y_exact = reference.depthwise_conv2d_native(wide[0], wide[1], [1, 1, 1, 1], "SAME")
    dx_exact = reference.depthwise_conv2d_native_backprop_input(list(x.shape), wide[1], wide[0], [1, 1, 1, 1], "SAME")
    y_bound = reference.depthwise_conv2d_native(np.abs(wide[0]), np.abs(wide[1]), [1, 1, 1, 1], "SAME")
    dx_bound = reference.depthwise_conv2d_native_backprop_input(list(x.shape), np.abs(wide[1]), np.abs(wide[0]),
                                                                [1, 1, 1, 1], "SAME")
    assert_close_to_reference(y[0], y_exact, y_bound, "float32")
    assert_close_to_reference(dx[0], dx_exact, dx_bound, "float32")
    assert all(a.tobytes() == y[0].tobytes() for a in y) and all(a.tobytes() == dx[0].tobytes() for a in dx)
    # Stride 2: the input gradient's stride-phase tiles stream too.
    dy = rng.standard_normal((1, 65, 128, 64)).astype(np.float32)
    dx2 = [convviz.depthwise_conv2d_native_backprop_input(list(x.shape), filt, dy, [2, 2], "SAME", n_threads=t)
           for t in (1, 2, 3)]
    wide_dy = dy.astype(np.float64)
    dx2_exact = reference.depthwise_conv2d_native_backprop_input(list(x.shape), wide[1], wide_dy, [1, 2, 2, 1], "SAME")
    dx2_bound = reference.depthwise_conv2d_native_backprop_input(list(x.shape), np.abs(wide[1]), np.abs(wide_dy),
                                                                 [1, 2, 2, 1], "SAME")
    assert_close_to_reference(dx2[0], dx2_exact, dx2_bound, "float32")
    assert all(a.tobytes() == dx2[0].tobytes() for a in dx2)


@pytest.mark.parametrize("dilation", [1, 3, 40])
def test_staged_rows_in_a_ring_or_one_slot_per_kernel_row(dilation, rng):
    """Staged rows (float16 here) live in a ring of (K-1)*d+1 slots, one per row of the
    span an output row reads, or, when that span is too big to keep (dilation 40:
    81 rows of 16 KiB), in one slot per kernel row; both give the reference's values,
    with stride 1 and 2 and a multiplier, for any thread count."""
    x = rng.standard_normal((2, 90, 64, 64)).astype(np.float16)
    for strides, m in (((1, 1), 1), ((2, 2), 1), ((1, 2), 2)):
        filt = rng.standard_normal((3, 3, 64, m)).astype(np.float16)
        kwargs = dict(strides=[1, *strides, 1], padding="SAME", dilations=[1, dilation, dilation, 1])
        y = [convviz.depthwise_conv2d_native(x, filt, n_threads=t, **kwargs) for t in (1, 2, 3)]
        dx = [convviz.depthwise_conv2d_native_backprop_input(list(x.shape), filt, y[0], n_threads=t, **kwargs)
              for t in (1, 2, 3)]
        wide = [a.astype(np.float64) for a in (x, filt, y[0])]
        assert_close_to_reference(y[0], reference.depthwise_conv2d_native(wide[0], wide[1], **kwargs),
                                  reference.depthwise_conv2d_native(np.abs(wide[0]), np.abs(wide[1]), **kwargs),
                                  "float16")
        assert_close_to_reference(
            dx[0], reference.depthwise_conv2d_native_backprop_input(list(x.shape), wide[1], wide[2], **kwargs),
            reference.depthwise_conv2d_native_backprop_input(list(x.shape), np.abs(wide[1]), np.abs(wide[2]),
                                                             **kwargs), "float16")
        assert all(a.tobytes() == y[0].tobytes() for a in y) and all(a.tobytes() == dx[0].tobytes() for a in dx)
