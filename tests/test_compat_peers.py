"""The compat namespaces against the real frameworks: same signatures, same numbers.

Each test skips when its framework is absent (the default environment); run them
where TensorFlow and PyTorch are installed:
``PYTHONPATH=. python -m pytest tests/test_compat_peers.py``.  TensorFlow's CPU
kernels refuse some configurations (NCHW, some dilated or grouped ones): those
cases are counted, and each test asserts that enough others were compared.
"""

from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest

import convviz
from convviz.compat import tf as cvtf
from convviz.compat import torch as cvtorch
from convviz.compat.mindspore import ops as cvms

F32 = np.float32


def _parameters(function):
    """(name, default) pairs, with list and tuple defaults alike (TensorFlow's lists are our tuples)."""
    return [(name, list(p.default) if isinstance(p.default, (list, tuple)) else p.default)
            for name, p in inspect.signature(function).parameters.items()]


def _tf():
    return pytest.importorskip("tensorflow")


def _torch():
    return pytest.importorskip("torch")


def _tf_refusals(tf):
    """What TensorFlow raises for a configuration its CPU kernels do not implement."""
    return (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError, tf.errors.NotFoundError)


# -- signatures ----------------------------------------------------------------------
TF_NAMES = [
    ("conv2d", "nn.conv2d"),
    ("conv2d_backprop_input", "compat.v1.nn.conv2d_backprop_input"),
    ("conv2d_backprop_filter", "compat.v1.nn.conv2d_backprop_filter"),
    ("conv2d_transpose", "nn.conv2d_transpose"),
    ("depthwise_conv2d", "nn.depthwise_conv2d"),
    ("depthwise_conv2d_backprop_input", "nn.depthwise_conv2d_backprop_input"),
    ("depthwise_conv2d_backprop_filter", "nn.depthwise_conv2d_backprop_filter"),
    ("depthwise_conv2d_native_backprop_input", "compat.v1.nn.depthwise_conv2d_native_backprop_input"),
    ("depthwise_conv2d_native_backprop_filter", "compat.v1.nn.depthwise_conv2d_native_backprop_filter"),
]


@pytest.mark.parametrize("ours, theirs", TF_NAMES, ids=[name for name, _ in TF_NAMES])
def test_tf_nn_signatures_are_tensorflows(ours, theirs):
    tf = _tf()
    real = tf
    for part in theirs.split("."):
        real = getattr(real, part)
    assert _parameters(getattr(cvtf.nn, ours)) == _parameters(real)


def test_torch_signatures_are_pytorchs():
    torch = _torch()
    import torch.nn.grad

    for name in ("conv2d_input", "conv2d_weight"):
        assert _parameters(getattr(cvtorch, name)) == _parameters(getattr(torch.nn.grad, name))
    # F.conv_transpose2d is a builtin: its signature is the first line of its docstring.
    line = torch.nn.functional.conv_transpose2d.__doc__.strip().splitlines()[0]
    arguments = ast.parse(f"def f{line[line.index('('):line.index(' ->')]}: pass").body[0].args
    defaults = [inspect.Parameter.empty] * (len(arguments.args) - len(arguments.defaults)) + [
        ast.literal_eval(d) for d in arguments.defaults]
    assert _parameters(cvtorch.conv_transpose2d) == [(a.arg, d) for a, d in zip(arguments.args, defaults)]


# -- TensorFlow: numbers -------------------------------------------------------------------
def _padding(rng, data_format):
    """SAME, VALID or 4 (before, after) pairs in ``data_format`` order, at random."""
    choice = rng.integers(3)
    if choice < 2:
        return ("SAME", "VALID")[choice]
    top, bottom, left, right = (int(v) for v in rng.integers(0, 3, 4))
    spatial = [[top, bottom], [left, right]]
    return [[0, 0], [0, 0], *spatial] if data_format == "NCHW" else [[0, 0], *spatial, [0, 0]]


def _window(rng, data_format):
    """Random strides and dilations in one of TensorFlow 2's forms, and a padding."""
    sh, sw = (int(v) for v in rng.integers(1, 4, 2))
    dh, dw = (int(v) for v in rng.integers(1, 3, 2))
    form = rng.integers(3)
    strides = [sh, sw] if form == 0 else ([1, 1, sh, sw] if data_format == "NCHW" else [1, sh, sw, 1])
    dilations = dh if dh == dw and form == 1 else [dh, dw]
    return strides, _padding(rng, data_format), dilations


def test_tf_nn_conv2d_agrees(rng):
    tf = _tf()
    compared = refused = 0
    for _ in range(60):
        data_format = ("NHWC", "NCHW")[rng.integers(2)]
        groups = int(rng.integers(1, 3))
        cin, cout = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        strides, padding, dilations = _window(rng, data_format)
        h, w = (int(v) for v in rng.integers(6, 11, 2))
        shape = (2, cin, h, w) if data_format == "NCHW" else (2, h, w, cin)
        x = rng.standard_normal(shape).astype(F32)
        filt = rng.standard_normal((kh, kw, cin // groups, cout)).astype(F32)
        try:
            expected = tf.nn.conv2d(x, filt, strides, padding, data_format, dilations).numpy()
        except _tf_refusals(tf):
            refused += 1
            continue
        got = cvtf.nn.conv2d(x, filt, strides, padding, data_format, dilations)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        compared += 1
    assert compared >= 20, (compared, refused)
    # Batch dimensions beyond the first.
    x = rng.standard_normal((2, 3, 6, 5, 2)).astype(F32)
    filt = rng.standard_normal((3, 2, 2, 4)).astype(F32)
    np.testing.assert_allclose(cvtf.nn.conv2d(x, filt, 2, "SAME"), tf.nn.conv2d(x, filt, 2, "SAME").numpy(),
                               rtol=1e-4, atol=1e-4)


def test_tf_nn_conv2d_backprop_filter_and_transpose_agree(rng):
    tf = _tf()
    compared = refused = 0
    for _ in range(40):
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        strides, padding, dilations = _window(rng, "NHWC")
        strides4 = [1, *strides, 1] if len(strides) == 2 else strides
        dilations4 = [1, *dilations, 1] if isinstance(dilations, list) else [1, dilations, dilations, 1]
        h, w = (int(v) for v in rng.integers(6, 11, 2))
        x = rng.standard_normal((2, h, w, 3)).astype(F32)
        filt = rng.standard_normal((kh, kw, 3, 4)).astype(F32)
        try:
            y = tf.nn.conv2d(x, filt, strides4, padding, dilations=dilations4)
            dy = rng.standard_normal(y.shape).astype(F32)
            expected_dw = tf.compat.v1.nn.conv2d_backprop_filter(x, filt.shape, dy, strides4, padding,
                                                                 dilations=dilations4).numpy()
            expected_dx = tf.nn.conv2d_transpose(dy, filt, x.shape, strides, padding, dilations=dilations).numpy()
        except _tf_refusals(tf):
            refused += 1
            continue
        np.testing.assert_allclose(cvtf.nn.conv2d_backprop_filter(x, list(filt.shape), dy, strides4, padding,
                                                                  dilations=dilations4),
                                   expected_dw, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(cvtf.nn.conv2d_transpose(dy, filt, list(x.shape), strides, padding,
                                                            dilations=dilations),
                                   expected_dx, rtol=1e-4, atol=1e-4)
        compared += 1
    assert compared >= 15, (compared, refused)


def test_tf_nn_depthwise_conv2d_and_its_gradients_agree(rng):
    tf = _tf()
    compared = refused = 0
    for _ in range(40):
        channels, multiplier = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        padding = _padding(rng, "NHWC")
        s = int(rng.integers(1, 3))
        rate = [1, 1] if s > 1 else [int(v) for v in rng.integers(1, 3, 2)]  # TF: no rate above 1 with a stride
        strides4 = [1, s, s, 1]
        h, w = (int(v) for v in rng.integers(6, 11, 2))
        x = tf.constant(rng.standard_normal((2, h, w, channels)).astype(F32))
        filt = tf.constant(rng.standard_normal((kh, kw, channels, multiplier)).astype(F32))
        try:
            with tf.GradientTape(persistent=True) as tape:
                tape.watch([x, filt])
                y = tf.nn.depthwise_conv2d(x, filt, strides4, padding, dilations=rate)
            dy = tf.constant(rng.standard_normal(y.shape).astype(F32))
            # Autodiff's gradients are exact also where the CPU's backprop kernels ignore the dilation.
            dx, dw = tape.gradient(y, [x, filt], output_gradients=dy)
        except _tf_refusals(tf):
            refused += 1
            continue
        np.testing.assert_allclose(cvtf.nn.depthwise_conv2d(x.numpy(), filt.numpy(), strides4, padding,
                                                            dilations=rate),
                                   y.numpy(), rtol=1e-4, atol=1e-4)
        four = [1, *rate, 1]
        np.testing.assert_allclose(cvtf.nn.depthwise_conv2d_backprop_input(
            list(x.shape), filt.numpy(), dy.numpy(), strides4, padding, dilations=four), dx.numpy(),
            rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(cvtf.nn.depthwise_conv2d_backprop_filter(
            x.numpy(), list(filt.shape), dy.numpy(), strides4, padding, dilations=four), dw.numpy(),
            rtol=1e-4, atol=1e-3)
        if rate == [1, 1]:  # the direct call, where TensorFlow's kernel is right
            np.testing.assert_allclose(cvtf.nn.depthwise_conv2d_backprop_input(
                list(x.shape), filt.numpy(), dy.numpy(), strides4, padding),
                tf.nn.depthwise_conv2d_backprop_input(x.shape, filt, dy, strides4, padding).numpy(),
                rtol=1e-4, atol=1e-4)
        compared += 1
    assert compared >= 25, (compared, refused)


def test_tf_and_convviz_refuse_the_same_padding_arguments():
    tf = _tf()
    x, filt = np.ones((1, 4, 4, 1), F32), np.ones((2, 2, 1, 1), F32)
    for padding in ("EXPLICIT", [[0, 0], [1, 1], [1, 1]], [[0, 0], [1, 1, 1], [1, 1], [0, 0]]):
        with pytest.raises(ValueError):
            tf.nn.conv2d(x, filt, 1, padding)
        with pytest.raises(ValueError, match="^conv2d: padding"):
            cvtf.nn.conv2d(x, filt, 1, padding)
    with pytest.raises(ValueError, match="should be of length 1, 2 or 4"):
        tf.nn.conv2d(x, filt, [1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="should be an int or of length 1, 2 or 4"):
        cvtf.nn.conv2d(x, filt, [1, 1, 1], "SAME")


# -- PyTorch: numbers ----------------------------------------------------------------
def _torch_case(rng):
    groups = int(rng.integers(1, 4))
    cin, cout = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
    kernel = tuple(int(v) for v in rng.integers(1, 4, 2))
    window = dict(stride=tuple(int(v) for v in rng.integers(1, 4, 2)),
                  padding=tuple(int(v) for v in rng.integers(0, 3, 2)),
                  dilation=tuple(int(v) for v in rng.integers(1, 3, 2)), groups=groups)
    if rng.integers(2):  # PyTorch's int form
        window.update(stride=window["stride"][0], padding=window["padding"][0], dilation=window["dilation"][0])
    x_shape = (int(rng.integers(1, 3)), cin, *(int(v) for v in rng.integers(1, 10, 2)))
    return x_shape, (cout, cin // groups, *kernel), window


def test_torch_nn_grad_agrees(rng):
    torch = _torch()
    import torch.nn.grad

    compared = 0
    for _ in range(150):
        x_shape, w_shape, window = _torch_case(rng)
        x = torch.tensor(rng.standard_normal(x_shape), requires_grad=True)
        weight = torch.tensor(rng.standard_normal(w_shape), requires_grad=True)
        try:
            y = torch.nn.functional.conv2d(x, weight, **window)
        except RuntimeError:  # the window is larger than the padded input
            continue
        dy = torch.tensor(rng.standard_normal(tuple(y.shape)))
        np.testing.assert_allclose(cvtorch.conv2d_input(x.shape, weight, dy, **window),
                                   torch.nn.grad.conv2d_input(x.shape, weight, dy, **window).detach().numpy(),
                                   rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(cvtorch.conv2d_weight(x, weight.shape, dy, **window),
                                   torch.nn.grad.conv2d_weight(x, weight.shape, dy, **window).detach().numpy(),
                                   rtol=1e-10, atol=1e-10)
        compared += 1
    assert compared >= 60


def test_torch_conv_transpose2d_and_tensor_inputs_agree(rng):
    torch = _torch()
    x = torch.tensor(rng.standard_normal((2, 4, 5, 6)), requires_grad=True)
    weight = torch.tensor(rng.standard_normal((4, 3, 3, 2)))
    bias = torch.tensor(rng.standard_normal(6))
    expected = torch.nn.functional.conv_transpose2d(x, weight, bias, 2, 1, 1, 2, 1).detach().numpy()
    np.testing.assert_allclose(cvtorch.conv_transpose2d(x, weight, bias, 2, 1, 1, 2, 1), expected,
                               rtol=1e-12, atol=1e-12)
    # bfloat16 tensors arrive as ml_dtypes' bfloat16, with the same bits.
    xb = torch.ones((1, 1, 3, 3), dtype=torch.bfloat16)
    dw = cvtorch.conv2d_weight(xb, (1, 1, 2, 2), torch.ones((1, 1, 2, 2), dtype=torch.bfloat16))
    assert dw.dtype == convviz._validate.BFLOAT16 and dw.astype(np.float32).ravel().tolist() == [4.0] * 4
    with pytest.raises(RuntimeError):  # PyTorch takes no padding strings here either
        torch.nn.grad.conv2d_input((1, 1, 3, 3), torch.ones(1, 1, 2, 2), torch.ones(1, 1, 3, 3), padding="same")
    with pytest.raises(TypeError, match="^conv2d_input: padding"):
        cvtorch.conv2d_input((1, 1, 3, 3), torch.ones(1, 1, 2, 2), torch.ones(1, 1, 3, 3), padding="same")


# -- MindSpore -------------------------------------------------------------------------
def test_mindspore_conv2d_and_conv2d_transpose_agree(rng):
    ms = pytest.importorskip("mindspore")
    x = rng.standard_normal((2, 4, 7, 7)).astype(F32)
    weight = rng.standard_normal((6, 2, 3, 3)).astype(F32)
    kwargs = dict(out_channel=6, kernel_size=3, pad_mode="pad", pad=(1, 0, 2, 1), stride=2, group=2)
    expected = ms.ops.Conv2D(**kwargs)(ms.Tensor(x), ms.Tensor(weight)).asnumpy()
    np.testing.assert_allclose(cvms.Conv2D(**kwargs)(x, weight), expected, rtol=1e-5, atol=1e-5)
    dout = rng.standard_normal((2, 6, 3, 3)).astype(F32)
    kwargs = dict(out_channel=6, kernel_size=3, pad_mode="same", stride=2)
    expected = ms.ops.Conv2DTranspose(**kwargs)(ms.Tensor(dout), ms.Tensor(weight[:, :1].copy()),
                                                (2, 1, 6, 6)).asnumpy()
    np.testing.assert_allclose(cvms.Conv2DTranspose(**kwargs)(dout, weight[:, :1], (2, 1, 6, 6)), expected,
                               rtol=1e-5, atol=1e-5)
