"""Optional cross-checks against TensorFlow, PyTorch and MindSpore when installed.

None of them is needed by the default test run: each test skips cleanly when its
framework is absent.  Install them with ``pip install -e ".[tf,torch]"``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import convviz

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

CASES = [
    # (N, H, W, Cin, Cout, KH, KW, stride_h, stride_w, padding, explicit (t, b, l, r))
    (2, 7, 8, 3, 4, 3, 3, 1, 1, "SAME", None),
    (2, 7, 8, 3, 4, 3, 2, 2, 2, "SAME", None),
    (1, 9, 9, 2, 5, 3, 3, 2, 2, "VALID", None),
    (3, 6, 5, 4, 2, 2, 3, 3, 1, "VALID", None),
    (1, 8, 7, 2, 3, 3, 3, 1, 2, "EXPLICIT", (2, 0, 1, 3)),
    (2, 5, 5, 1, 1, 5, 5, 1, 1, "SAME", None),
]


def _tf_output_shape(n, h, w, cout, kh, kw, sh, sw, padding, pads):
    g = convviz.ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=1, out_channels=cout,
                                   kernel_hw=(kh, kw), strides=(sh, sw), dilations=(1, 1),
                                   padding=padding, explicit_paddings=pads or (0, 0, 0, 0))
    return g.output_shape


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_input_gradient_agrees_with_tensorflow(case, dtype, rng):
    tf = pytest.importorskip("tensorflow")
    n, h, w, cin, cout, kh, kw, sh, sw, padding, pads = case
    filt = rng.standard_normal((kh, kw, cin, cout)).astype(dtype)
    dy = rng.standard_normal(_tf_output_shape(n, h, w, cout, kh, kw, sh, sw, padding, pads)).astype(dtype)
    explicit = [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0] if pads else []
    kwargs = dict(strides=[1, sh, sw, 1], padding=padding, explicit_paddings=explicit)
    expected = tf.raw_ops.Conv2DBackpropInput(input_sizes=[n, h, w, cin], filter=filt, out_backprop=dy,
                                              **kwargs).numpy()
    got = convviz.conv2d_backprop_input([n, h, w, cin], filt, dy, **kwargs)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * np.abs(expected).max())


@pytest.mark.parametrize("case", [c for c in CASES if c[7] == c[8]])
def test_filter_gradient_agrees_with_tensorflow(case, rng):
    tf = pytest.importorskip("tensorflow")
    n, h, w, channels, multiplier, kh, kw, s, _, padding, pads = case
    x = rng.standard_normal((n, h, w, channels)).astype(np.float32)
    dy = rng.standard_normal(_tf_output_shape(n, h, w, channels * multiplier, kh, kw, s, s, padding, pads))
    dy = dy.astype(np.float32)
    explicit = [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0] if pads else []
    kwargs = dict(strides=[1, s, s, 1], padding=padding, explicit_paddings=explicit)
    expected = tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
        input=x, filter_sizes=[kh, kw, channels, multiplier], out_backprop=dy, **kwargs).numpy()
    got = convviz.depthwise_conv2d_native_backprop_filter(x, [kh, kw, channels, multiplier], dy, **kwargs)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def _torch_pads(g):
    top, bottom, left, right = g.pads
    return (left, right, top, bottom)


@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("case", CASES)
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
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(x, _torch_pads(g)), weight, stride=(sh, sw),
                                   dilation=dilation, groups=groups)
    y.backward(torch.from_numpy(dy))
    explicit = [0, 0, 0, 0, *pads] if pads else []
    got = convviz.conv2d_backprop_input([n, cin, h, w], filt, dy, [1, 1, sh, sw], padding, explicit,
                                        data_format="NCHW", dilations=[1, 1, dilation, dilation])
    np.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("case", CASES)
def test_filter_gradient_agrees_with_torch_autograd(case, dilation, rng):
    torch = pytest.importorskip("torch")
    n, h, w, channels, multiplier, kh, kw, sh, sw, padding, pads = case
    g = convviz.ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=channels,
                                   out_channels=channels * multiplier, kernel_hw=(kh, kw), strides=(sh, sw),
                                   dilations=(dilation, dilation), padding=padding,
                                   explicit_paddings=pads or (0, 0, 0, 0), depthwise=True)
    if 0 in g.output_hw:
        pytest.skip("empty output")
    x = rng.standard_normal(g.input_shape)
    dy = rng.standard_normal(g.output_shape)
    weight = torch.zeros((channels * multiplier, 1, kh, kw), dtype=torch.float64, requires_grad=True)
    xt = torch.from_numpy(x.transpose(0, 3, 1, 2).copy())
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(xt, _torch_pads(g)), weight, stride=(sh, sw),
                                   dilation=dilation, groups=channels)
    y.backward(torch.from_numpy(dy.transpose(0, 3, 1, 2).copy()))
    expected = weight.grad.numpy().reshape(channels, multiplier, kh, kw).transpose(2, 3, 0, 1)
    explicit = [0, 0, *pads, 0, 0] if pads else []
    got = convviz.depthwise_conv2d_native_backprop_filter(
        x, [kh, kw, channels, multiplier], dy, [1, sh, sw, 1], padding, explicit,
        dilations=[1, dilation, dilation, 1])
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-11)


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
