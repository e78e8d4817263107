"""convviz.layers (Conv2D, DepthwiseConv2D) and convviz.gradcheck.

The layers must compute exactly what the ops compute (forward = the op plus a
bias per channel, backward = the two gradient ops and a sum for the bias), in
both layouts, grouped and with channel multipliers; gradcheck must pass on
them and fail -- by returning False or raising, naming tensor and index -- on
layers that are deliberately wrong; errors name the layer and the argument; and
a few steps of SGD with them lower a loss.  PyTorch's autograd cross-checks the
gradients when it is installed.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import convviz
from convviz import reference
from convviz.errors import InvalidArgumentError
from convviz.geometry import explicit_paddings as tf_explicit_paddings
from convviz.layers import Conv2D, ConvLayer, DepthwiseConv2D, GradcheckError, Gradients, gradcheck

PADS = (1, 2, 2, 0)  # top, bottom, left, right
# (padding, strides, dilations)
WINDOWS = [("SAME", (1, 1), (1, 1)), ("VALID", (2, 1), (1, 2)), ("EXPLICIT", (1, 2), (2, 1)), ("SAME", (2, 2), (1, 1))]
# (kind, in_channels, out_channels or multiplier, groups)
KINDS = [("conv", 3, 4, 1), ("conv", 4, 6, 2), ("depthwise", 3, 1, 1), ("depthwise", 3, 2, 1)]
KIND_IDS = ["conv", "conv-groups2", "depthwise", "depthwise-m2"]


def make_layer(kind, c_in, n, groups, padding, strides, dilations, data_format, *, dtype=np.float64, bias=True,
               seed=0, cls=None):
    """A layer with random weights and bias (nonzero, so a misplaced bias shows)."""
    options = dict(strides=strides, padding=padding, dilations=dilations, data_format=data_format,
                   explicit_paddings=PADS if padding == "EXPLICIT" else ())
    rng = np.random.default_rng(seed)
    if kind == "conv":
        filt = rng.standard_normal((3, 2, c_in // groups, n)).astype(dtype)
        b = rng.standard_normal(n).astype(dtype) if bias else None
        return (cls or Conv2D)(filt, b, groups=groups, **options)
    filt = rng.standard_normal((3, 2, c_in, n)).astype(dtype)
    b = rng.standard_normal(c_in * n).astype(dtype) if bias else None
    return (cls or DepthwiseConv2D)(filt, b, **options)


def input_for(layer, rng, batch=2, hw=(7, 6), dtype=None):
    h, w = hw
    c = layer.in_channels
    shape = (batch, h, w, c) if layer.data_format == "NHWC" else (batch, c, h, w)
    return rng.standard_normal(shape).astype(dtype or layer.dtype)


def op_window(layer):
    """The ops' window arguments in TensorFlow's 4-value form, built independently of the layer."""
    def four(pair):
        return [1, *pair, 1] if layer.data_format == "NHWC" else [1, 1, *pair]

    pads = tf_explicit_paddings(PADS, layer.data_format) if layer.padding == "EXPLICIT" else []
    return dict(strides=four(layer.strides), padding=layer.padding, explicit_paddings=pads,
                data_format=layer.data_format, dilations=four(layer.dilations))


def channel_view(bias, data_format):
    return bias.reshape((1, 1, 1, -1) if data_format == "NHWC" else (1, -1, 1, 1))


def ops_of(layer):
    if isinstance(layer, DepthwiseConv2D):
        return (convviz.depthwise_conv2d_native, convviz.depthwise_conv2d_native_backprop_input,
                convviz.depthwise_conv2d_native_backprop_filter)
    return convviz.conv2d, convviz.conv2d_backprop_input, convviz.conv2d_backprop_filter


# -- forward and backward are the ops -------------------------------------------------
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w[0]}-s{w[1]}-d{w[2]}")
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_forward_and_backward_are_the_ops(kind, window, data_format, dtype):
    rng = np.random.default_rng(1)
    layer = make_layer(*kind, *window, data_format, dtype=dtype)
    x = input_for(layer, rng)
    forward, input_grad, filter_grad = ops_of(layer)
    w = op_window(layer)

    y = layer.forward(x)
    expected = forward(x, layer.filter, **w) + channel_view(layer.bias, data_format)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y, expected)
    assert layer.output_shape(x.shape) == y.shape
    np.testing.assert_array_equal(layer(x), y)  # __call__ is forward
    np.testing.assert_array_equal(layer.forward(x), y)

    dy = rng.standard_normal(y.shape).astype(dtype)
    grads = layer.backward(dy)
    assert isinstance(grads, Gradients)
    np.testing.assert_array_equal(grads.input, input_grad(x.shape, layer.filter, dy, **w))
    np.testing.assert_array_equal(grads.filter, filter_grad(x, layer.filter.shape, dy, **w))
    axes = (0, 1, 2) if data_format == "NHWC" else (0, 2, 3)
    scale = np.abs(dy).sum(axis=axes, dtype=np.float64).max()  # float32 sums may cancel: an absolute bound
    np.testing.assert_allclose(grads.bias, dy.sum(axis=axes, dtype=np.float64), rtol=0,
                               atol=(1e-6 if dtype == np.float32 else 1e-14) * scale)
    assert grads.input.dtype == grads.filter.dtype == grads.bias.dtype == np.dtype(dtype)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_bias_lands_on_its_output_channel(kind, data_format):
    """Against the float64 reference's loops, with integer values (exact): y[.., k] = conv[.., k] + bias[k]."""
    layer = make_layer(*kind, "SAME", (1, 1), (1, 1), data_format)
    layer.filter = np.round(layer.filter * 3)
    layer.bias = np.arange(1.0, layer.out_channels + 1) * 100
    x = np.round(input_for(layer, np.random.default_rng(2)) * 3)
    ref = reference.conv2d if isinstance(layer, Conv2D) else reference.depthwise_conv2d_native
    conv = ref(x, layer.filter, **op_window(layer))
    y = layer.forward(x)
    axis = 3 if data_format == "NHWC" else 1
    for k in range(layer.out_channels):
        np.testing.assert_array_equal(np.take(y, k, axis=axis), np.take(conv, k, axis=axis) + 100 * (k + 1))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("kind", KINDS[1::2], ids=KIND_IDS[1::2])
def test_half_types_are_the_ops(kind, dtype):
    layer = make_layer(*kind, "SAME", (2, 1), (1, 1), "NHWC", dtype=dtype)
    x = input_for(layer, np.random.default_rng(3))
    forward, input_grad, filter_grad = ops_of(layer)
    y = layer.forward(x)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y, forward(x, layer.filter, [2, 1], "SAME") + channel_view(layer.bias, "NHWC"))
    dy = np.ones_like(y)
    grads = layer.backward(dy)
    np.testing.assert_array_equal(grads.input, input_grad(x.shape, layer.filter, dy, [2, 1], "SAME"))
    np.testing.assert_array_equal(grads.filter, filter_grad(x, layer.filter.shape, dy, [2, 1], "SAME"))
    assert grads.bias.dtype == np.dtype(dtype)


def test_no_bias():
    layer = Conv2D(np.ones((3, 3, 2, 2)))
    x = np.ones((1, 4, 4, 2))
    np.testing.assert_array_equal(layer.forward(x), convviz.conv2d(x, layer.filter, [1, 1], "SAME"))
    grads = layer.backward(np.ones((1, 4, 4, 2)))
    assert grads.bias is None
    assert list(layer.parameters()) == list(grads.parameters()) == ["filter"]
    dx, dfilter, dbias = grads  # unpacks
    assert dbias is None and dx.shape == x.shape and dfilter.shape == layer.filter.shape


def test_backward_repeats_and_follows_the_current_filter():
    layer = Conv2D.create(1, 2, 3, rng=0, dtype=np.float64)
    x = np.random.default_rng(0).standard_normal((1, 5, 5, 1))
    y = layer.forward(x)
    first = layer.backward(np.ones_like(y))
    np.testing.assert_array_equal(layer.backward(np.ones_like(y)).input, first.input)
    layer.filter = 2 * layer.filter
    np.testing.assert_array_equal(layer.backward(np.ones_like(y)).input, 2 * first.input)


# -- construction -------------------------------------------------------------------------------
def test_window_forms_are_equivalent():
    filt = np.ones((3, 3, 1, 1))
    a = Conv2D(filt, strides=2, dilations=1, padding="EXPLICIT", explicit_paddings=(1, 0, 2, 1))
    b = Conv2D(filt, strides=[2, 2], dilations=[1, 1], padding="EXPLICIT",
               explicit_paddings=[0, 0, 1, 0, 2, 1, 0, 0])
    c = Conv2D(filt, strides=(1, 2, 2, 1), dilations=(1, 1, 1, 1), padding="EXPLICIT",
               explicit_paddings=np.array([0, 0, 1, 0, 2, 1, 0, 0]))
    for layer in (a, b, c):
        assert (layer.strides, layer.dilations, layer.explicit_paddings) == ((2, 2), (1, 1), (1, 0, 2, 1))
    nchw = Conv2D(filt, strides=(1, 1, 3, 2), data_format="NCHW", padding="EXPLICIT",
                  explicit_paddings=(0, 0, 0, 0, 1, 0, 2, 1))
    assert nchw.strides == (3, 2) and nchw.explicit_paddings == (1, 0, 2, 1)
    assert Conv2D(filt).explicit_paddings == ()


def test_parameters_are_copied_in_and_updated_in_place():
    filt, bias = np.ones((1, 1, 1, 2)), np.zeros(2)
    layer = Conv2D(filt, bias)
    filt[...] = 5.0  # the caller's array: not the layer's
    assert (layer.filter == 1.0).all()
    params = layer.parameters()
    assert params["filter"] is layer.filter and params["bias"] is layer.bias
    params["filter"] -= 0.5
    assert (layer.filter == 0.5).all()
    new = np.full((1, 1, 1, 2), 3.0)
    layer.filter = new
    new[...] = 0.0
    assert (layer.filter == 3.0).all()  # the setter copies too
    layer.bias = None
    assert list(layer.parameters()) == ["filter"]
    layer.bias = [1.0, 2.0]  # a list takes the layer's dtype
    assert layer.bias.dtype == np.float64


def test_create_conv2d():
    layer = Conv2D.create(4, 6, (3, 2), groups=2, rng=7, strides=2, data_format="NCHW", name="c1")
    assert layer.filter.shape == (3, 2, 2, 6) and layer.filter.dtype == np.float32
    assert (layer.in_channels, layer.out_channels, layer.groups, layer.kernel_size) == (4, 6, 2, (3, 2))
    assert (layer.bias == 0).all() and layer.bias.dtype == np.float32
    assert layer.strides == (2, 2) and layer.data_format == "NCHW" and layer.name == "c1"
    np.testing.assert_array_equal(layer.filter, Conv2D.create(4, 6, (3, 2), groups=2, rng=7).filter)
    assert not np.array_equal(layer.filter, Conv2D.create(4, 6, (3, 2), groups=2, rng=8).filter)
    generator = np.random.default_rng(7)
    np.testing.assert_array_equal(Conv2D.create(4, 6, (3, 2), groups=2, rng=generator).filter, layer.filter)
    assert Conv2D.create(1, 1, 1, use_bias=False).bias is None
    assert Conv2D.create(1, 1, 1, dtype=ml_dtypes.bfloat16).dtype == np.dtype(ml_dtypes.bfloat16)


def test_create_depthwise():
    layer = DepthwiseConv2D.create(3, 5, multiplier=2, rng=1, dtype=np.float64, padding="VALID")
    assert layer.filter.shape == (5, 5, 3, 2) and layer.dtype == np.float64
    assert (layer.in_channels, layer.multiplier, layer.out_channels) == (3, 2, 6)
    assert layer.bias.shape == (6,) and layer.padding == "VALID"


@pytest.mark.parametrize("make, fan_in", [
    (lambda: Conv2D.create(64, 64, 3, rng=0), 3 * 3 * 64),
    (lambda: Conv2D.create(64, 64, 3, groups=4, rng=0), 3 * 3 * 16),
    (lambda: DepthwiseConv2D.create(256, 5, multiplier=4, rng=0), 5 * 5),
])
def test_he_normal_scale(make, fan_in):
    filt = make().filter.astype(np.float64)
    assert abs(filt.mean()) < 0.05 * np.sqrt(2 / fan_in)
    assert filt.std() == pytest.approx(np.sqrt(2 / fan_in), rel=0.03)


def test_repr():
    assert repr(Conv2D(np.ones((3, 3, 2, 4), np.float32), np.zeros(4, np.float32))) == (
        "Conv2D(filter=float32[3, 3, 2, 4], bias=float32[4], strides=(1, 1), padding='SAME', data_format='NHWC')")
    layer = Conv2D(np.ones((3, 3, 2, 4)), groups=2, strides=(2, 1), padding="EXPLICIT",
                   explicit_paddings=(1, 0, 2, 1), dilations=2, data_format="NCHW", name="conv1")
    assert repr(layer) == (
        "Conv2D(filter=float64[3, 3, 2, 4], bias=None, groups=2, strides=(2, 1), padding='EXPLICIT', "
        "explicit_paddings=(1, 0, 2, 1), dilations=(2, 2), data_format='NCHW', name='conv1')")
    assert repr(DepthwiseConv2D.create(3, 3, multiplier=2, rng=0, dtype=np.float16)) == (
        "DepthwiseConv2D(filter=float16[3, 3, 3, 2], bias=float16[6], multiplier=2, strides=(1, 1), "
        "padding='SAME', data_format='NHWC')")
    assert repr(Gradients(np.zeros((1, 2, 2, 3)), np.zeros((1, 1, 3, 1), np.float32), None)) == (
        "Gradients(input=float64[1, 2, 2, 3], filter=float32[1, 1, 3, 1], bias=None)")


def test_astype_copies_and_keeps_the_class():
    class Mine(DepthwiseConv2D):
        pass

    layer = Mine(np.ones((2, 2, 3, 1), np.float32), np.zeros(3, np.float32), strides=2, name="d")
    layer.forward(np.ones((1, 4, 4, 3), np.float32))
    wide = layer.astype(np.float64)
    assert type(wide) is Mine and wide.dtype == np.float64 and wide.bias.dtype == np.float64
    assert (wide.strides, wide.name) == ((2, 2), "d")
    wide.filter[...] = 7.0
    assert (layer.filter == 1.0).all()
    with pytest.raises(InvalidArgumentError, match="call forward"):
        wide.backward(np.ones((1, 2, 2, 3)))
    layer.backward(np.ones((1, 2, 2, 3), np.float32))  # the original keeps its cache
    with pytest.raises(TypeError, match="dtype must be one of"):
        layer.astype(np.int32)


# -- errors -----------------------------------------------------------------------------------------
def _fresh():
    return Conv2D.create(2, 4, 3, rng=0, name="conv1")


def _with(layer, **attributes):
    for name, value in attributes.items():
        setattr(layer, name, value)
    return layer


def _after_forward():
    layer = _fresh()
    layer.forward(np.ones((1, 5, 5, 2), np.float32))
    return layer


ERRORS = [
    # (what, exception, words the message must hold)
    (lambda: _fresh().backward(np.ones((1, 5, 5, 4), np.float32)), InvalidArgumentError,
     ["Conv2D.backward [conv1]", "dy", "forward(x) first"]),
    (lambda: _after_forward().backward(np.ones((1, 5, 5, 3), np.float32)), InvalidArgumentError,
     ["Conv2D.backward [conv1]", "dy must have shape (1, 5, 5, 4)", "got (1, 5, 5, 3)"]),
    (lambda: _after_forward().backward(np.ones((1, 5, 5, 4))), TypeError,
     ["Conv2D.backward [conv1]", "dy must have the layer's dtype float32", "got float64"]),
    (lambda: _after_forward().backward(np.ones((5, 5, 4), np.float32)), InvalidArgumentError,
     ["Conv2D.backward [conv1]", "dy must be 4-D"]),
    (lambda: _fresh().forward(np.ones((1, 5, 5, 2))), TypeError,
     ["Conv2D.forward [conv1]", "x must have the layer's dtype float32", "float64", "astype"]),
    (lambda: _fresh().forward(np.ones((1, 5, 5, 3), np.float32)), InvalidArgumentError,
     ["Conv2D.forward [conv1]", "x must have 2 channels (axis 3 in NHWC)", "(1, 5, 5, 3)"]),
    (lambda: _fresh().forward(np.ones((1, 2, 5, 5), np.float32)), InvalidArgumentError,
     ["x must have 2 channels", "is it NCHW?"]),
    (lambda: _fresh().forward(np.ones((5, 5, 2), np.float32)), InvalidArgumentError, ["x must be 4-D NHWC"]),
    (lambda: Conv2D(np.ones((5, 5, 1, 1)), padding="VALID").forward(np.ones((1, 3, 3, 1))), InvalidArgumentError,
     ["Conv2D.forward", "smaller than the window", "empty"]),
    (lambda: DepthwiseConv2D(np.ones((3, 3, 4, 2))).forward(np.ones((1, 5, 5, 3))), InvalidArgumentError,
     ["DepthwiseConv2D.forward", "x must have 4 channels"]),
    (lambda: Conv2D(np.ones((3, 3, 1))), InvalidArgumentError, ["Conv2D", "filter must be 4-D"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 1), np.int32)), TypeError, ["Conv2D", "filter", "int32"]),
    (lambda: Conv2D(np.ones((3, 0, 1, 1))), InvalidArgumentError, ["filter must not be empty"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 3)), groups=2), InvalidArgumentError, ["multiple of groups (2)"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 3)), groups=0), InvalidArgumentError, ["groups"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 3)), bias=np.ones(2)), InvalidArgumentError,
     ["bias must have shape (3,)", "got (2,)"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 3)), bias=np.ones(3, np.float32)), TypeError, ["bias", "float32"]),
    (lambda: DepthwiseConv2D(np.ones((3, 3, 2, 2)), bias=np.ones(2)), InvalidArgumentError,
     ["DepthwiseConv2D", "bias must have shape (4,)"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 1)), strides=0), InvalidArgumentError, ["strides"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 1)), strides=[1, 2, 1]), InvalidArgumentError, ["strides", "got 3"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 1)), strides=1.5), TypeError, ["strides", "int"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 1)), padding="same"), InvalidArgumentError, ["did you mean 'SAME'"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 1)), padding="EXPLICIT"), InvalidArgumentError,
     ["explicit_paddings must have 4 values (top, bottom, left, right) or TensorFlow's 8"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 1)), explicit_paddings=(1, 1, 1, 1)), InvalidArgumentError,
     ["explicit_paddings must be empty unless padding is 'EXPLICIT'"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 1)), data_format="NWHC"), InvalidArgumentError, ["data_format"]),
    (lambda: _with(_fresh(), n_threads=1.5).forward(np.ones((1, 5, 5, 2), np.float32)), TypeError,
     ["Conv2D.forward [conv1]: conv2d: n_threads must be an int"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 1)), n_threads=0), InvalidArgumentError, ["n_threads"]),
    (lambda: Conv2D(np.ones((3, 3, 1, 1)), name=3), TypeError, ["name must be a string"]),
    (lambda: Conv2D.create(3, 4, 3, groups=2), InvalidArgumentError, ["Conv2D.create", "multiples of groups"]),
    (lambda: Conv2D.create(0, 4, 3), InvalidArgumentError, ["Conv2D.create", "in_channels"]),
    (lambda: Conv2D.create(1, 4, (3, 3, 3)), InvalidArgumentError, ["kernel_size must be an int or 2 ints"]),
    (lambda: Conv2D.create(1, 4, 3, dtype=np.int32), TypeError, ["dtype must be one of"]),
    (lambda: DepthwiseConv2D.create(3, 3, multiplier=0), InvalidArgumentError, ["DepthwiseConv2D.create",
                                                                                "multiplier"]),
    (lambda: setattr(_fresh(), "filter", np.ones((3, 3, 1, 4), np.float32)), InvalidArgumentError,
     ["Conv2D.filter [conv1]", "filter must have shape (3, 3, 2, 4)", "got (3, 3, 1, 4)"]),
    (lambda: setattr(_fresh(), "filter", np.ones((3, 3, 1, 4))), TypeError,
     ["Conv2D.filter [conv1]", "same dtype as the layer's filter (float32)"]),
    (lambda: setattr(_fresh(), "bias", np.ones(3, np.float32)), InvalidArgumentError, ["bias must have shape (4,)"]),
    (lambda: _fresh().output_shape((1, 5, 5)), InvalidArgumentError, ["output_shape", "input_shape must be 4-D"]),
    (lambda: gradcheck(np.ones(3), np.ones((1, 3, 3, 1))), TypeError, ["gradcheck: layer must be"]),
    (lambda: gradcheck(_fresh(), np.ones((1, 5, 5, 2)), eps=0), InvalidArgumentError, ["gradcheck: eps"]),
    (lambda: gradcheck(_fresh(), np.ones((1, 5, 5, 2)), atol=-1), InvalidArgumentError, ["gradcheck: atol"]),
    (lambda: gradcheck(_fresh(), np.ones((1, 5, 5, 2)), rtol="0.1"), TypeError, ["gradcheck: rtol"]),
    (lambda: gradcheck(_fresh(), np.ones((1, 5, 5, 2)), max_entries=0), InvalidArgumentError, ["max_entries"]),
    (lambda: gradcheck(_fresh(), np.ones((1, 5, 5, 2)), dy=np.ones((1, 5, 5, 3)), raise_exception=False),
     InvalidArgumentError, ["gradcheck: dy must have the output's shape (1, 5, 5, 4)"]),
    (lambda: gradcheck(_fresh(), np.ones((1, 5, 5, 3)), raise_exception=False), InvalidArgumentError,
     ["Conv2D.forward [conv1]", "x must have 2 channels"]),
]


@pytest.mark.parametrize("call, error, words", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_errors_name_the_layer_and_the_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    if error is InvalidArgumentError:
        assert isinstance(info.value, ValueError)


# -- gradcheck passes on correct layers ---------------------------------------------------------------------
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w[0]}-s{w[1]}-d{w[2]}")
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_gradcheck_passes(kind, window, data_format):
    layer = make_layer(*kind, *window, data_format, dtype=np.float32)
    x = input_for(layer, np.random.default_rng(4), batch=2, hw=(6, 5))
    assert gradcheck(layer, x) is True
    assert gradcheck(layer, x, raise_exception=False) is True


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
def test_gradcheck_checks_in_float64_whatever_the_dtype(dtype):
    layer = make_layer("depthwise", 2, 2, 1, "SAME", (2, 2), (2, 1), "NCHW", dtype=dtype, bias=False)
    assert gradcheck(layer, input_for(layer, np.random.default_rng(5), hw=(5, 5))) is True


def test_gradcheck_leaves_the_layer_alone():
    layer = Conv2D.create(2, 3, 3, rng=0, name="mine")
    filt, bias = layer.filter, layer.filter.copy()
    x = np.random.default_rng(0).standard_normal((1, 5, 5, 2)).astype(np.float32)
    assert gradcheck(layer, x)
    assert layer.filter is filt and np.array_equal(layer.filter, bias) and layer.dtype == np.float32
    with pytest.raises(InvalidArgumentError, match="call forward"):
        layer.backward(np.ones((1, 5, 5, 3), np.float32))  # still nothing cached
    y = layer.forward(x)
    assert gradcheck(layer, x)
    np.testing.assert_array_equal(layer.backward(np.ones_like(y)).input,
                                  convviz.conv2d_backprop_input(x.shape, filt, np.ones_like(y), [1, 1], "SAME"))


def test_gradcheck_samples_large_tensors():
    layer = Conv2D.create(8, 4, 3, rng=0, dtype=np.float64)
    x = np.random.default_rng(0).standard_normal((4, 16, 16, 8))  # 8192 entries > max_entries
    calls = []

    class Counting(Conv2D):
        def forward(self, x):
            calls.append(1)
            return super().forward(x)

    counting = Counting(layer.filter, layer.bias)
    counting(x[:1])  # __call__ goes through a subclass's forward
    assert len(calls) == 1
    calls.clear()
    assert gradcheck(counting, x, max_entries=100)
    # 1 forward for dy, then 2 per checked entry: 100 of x, 100 of the 288 filter entries, all 4 of the bias.
    assert len(calls) == 1 + 2 * (100 + 100 + 4)


# -- gradcheck fails on broken layers -------------------------------------------------------------------------
class FilterOnePercentOff(Conv2D):
    def backward(self, dy):
        grads = super().backward(dy)
        return grads._replace(filter=grads.filter * 1.01)


class InputEntryDropped(DepthwiseConv2D):
    """Forgets one input cell's gradient, as a bug at a border might."""

    INDEX = (1, 0, 4, 2)

    def backward(self, dy):
        grads = super().backward(dy)
        grads.input[self.INDEX] = 0
        return grads


class BiasFromFirstImage(Conv2D):
    """Sums dy for the bias over rows and columns but not over the batch."""

    def backward(self, dy):
        grads = super().backward(dy)
        return grads._replace(bias=dy[0].sum(axis=(0, 1)))


class ForwardForgetsBias(DepthwiseConv2D):
    def forward(self, x):
        bias, self._bias = self._bias, None
        try:
            return super().forward(x)
        finally:
            self._bias = bias


class UndilatedFilterGradient(DepthwiseConv2D):
    """The filter gradient as TensorFlow's CPU kernel computes it: dilations ignored."""

    def backward(self, dy):
        grads = super().backward(dy)
        x = self._cache.x
        wrong = convviz.depthwise_conv2d_native_backprop_filter(x, self.filter.shape, dy, self.strides, self.padding)
        return grads._replace(filter=wrong)


class NoBiasGradient(Conv2D):
    def backward(self, dy):
        return super().backward(dy)._replace(bias=None)


class TransposedFilterGradient(Conv2D):
    def backward(self, dy):
        grads = super().backward(dy)
        return grads._replace(filter=grads.filter.transpose(1, 0, 2, 3))


BROKEN = [
    # (class, kind, window, data format, the tensor gradcheck must blame)
    (FilterOnePercentOff, ("conv", 4, 6, 2), ("SAME", (2, 1), (1, 2)), "NCHW", "filter"),
    (InputEntryDropped, ("depthwise", 3, 2, 1), ("VALID", (1, 1), (1, 1)), "NHWC", "input"),
    (BiasFromFirstImage, ("conv", 3, 4, 1), ("SAME", (1, 1), (1, 1)), "NHWC", "bias"),
    (ForwardForgetsBias, ("depthwise", 3, 1, 1), ("SAME", (1, 1), (1, 1)), "NCHW", "bias"),
    (UndilatedFilterGradient, ("depthwise", 3, 2, 1), ("SAME", (1, 1), (2, 2)), "NHWC", "filter"),
    (NoBiasGradient, ("conv", 3, 4, 1), ("VALID", (1, 1), (1, 1)), "NHWC", "bias"),
    (TransposedFilterGradient, ("conv", 3, 4, 1), ("SAME", (1, 1), (1, 1)), "NHWC", "filter"),
]


@pytest.mark.parametrize("cls, kind, window, data_format, blamed", BROKEN, ids=[b[0].__name__ for b in BROKEN])
def test_gradcheck_fails_on_a_broken_layer(cls, kind, window, data_format, blamed):
    if cls is TransposedFilterGradient:  # a square kernel, so that the transposed gradient has the right shape
        layer = cls(np.random.default_rng(0).standard_normal((3, 3, 3, 4)), np.ones(4), *window[1:2],
                    padding=window[0])
    else:
        layer = make_layer(*kind, *window, data_format, cls=cls)
    x = input_for(layer, np.random.default_rng(6), batch=2, hw=(6, 5))
    assert gradcheck(layer, x, raise_exception=False) is False
    with pytest.raises(GradcheckError) as info:
        gradcheck(layer, x)
    err = info.value
    assert isinstance(err, RuntimeError)
    assert err.tensor == blamed
    message = str(err)
    if cls is NoBiasGradient:
        assert message == ("gradcheck: NoBiasGradient has a bias but its backward returned None for the bias "
                           "gradient")
        return
    assert message.startswith(f"gradcheck: the {blamed} gradient of {cls.__name__} disagrees with finite "
                              f"differences at index {err.index}: ")
    assert f"index {err.index}" in message
    assert f"analytic (backward) {err.analytic:.6g}" in message and f"numeric {err.numeric:.6g}" in message
    assert abs(err.analytic - err.numeric) > 1e-5 + 1e-3 * abs(err.numeric)
    if cls is InputEntryDropped:
        assert err.index == InputEntryDropped.INDEX and err.analytic == 0.0
        assert "1 of the 180 checked entries disagree (all 180 entries checked)" in message
    if cls is FilterOnePercentOff:
        assert err.analytic == pytest.approx(1.01 * err.numeric, rel=1e-6)


def test_gradcheck_failure_is_seeded_and_sampled():
    base = Conv2D.create(8, 4, 3, rng=0, dtype=np.float64)
    layer = FilterOnePercentOff(base.filter, base.bias)
    x = np.random.default_rng(0).standard_normal((2, 12, 12, 8))
    errors = []
    for _ in range(2):
        with pytest.raises(GradcheckError) as info:
            gradcheck(layer, x, max_entries=50, seed=3)
        errors.append(info.value)
    assert errors[0].index == errors[1].index and str(errors[0]) == str(errors[1])
    assert "of the 50 checked entries disagree (50 of its 288 entries checked (a seeded sample))" in str(errors[0])


def test_gradcheck_tolerance_decides():
    """A 1% error passes with rtol=2e-2, fails with the default 1e-3."""
    base = Conv2D.create(2, 2, 3, rng=0)
    layer = FilterOnePercentOff(base.filter, base.bias)
    x = np.random.default_rng(1).standard_normal((1, 5, 5, 2))
    assert gradcheck(layer, x, rtol=2e-2, raise_exception=False) is True
    assert gradcheck(layer, x, raise_exception=False) is False


def test_gradcheck_with_a_given_dy():
    layer = Conv2D.create(1, 2, 3, rng=0)
    x = np.random.default_rng(1).standard_normal((1, 4, 4, 1))
    assert gradcheck(layer, x, dy=np.ones((1, 4, 4, 2)))
    broken = FilterOnePercentOff(layer.filter, layer.bias)
    assert gradcheck(broken, x, dy=np.ones((1, 4, 4, 2)), raise_exception=False) is False


# -- training -------------------------------------------------------------------------------------------------
def _sgd(layers, grads, lr):
    for layer, g in zip(layers, grads):
        for name, p in layer.parameters().items():
            p -= lr * g.parameters()[name]


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_three_sgd_steps_lower_a_regression_loss(data_format):
    """Fit a layer to a teacher layer's outputs: the loss falls at every step."""
    rng = np.random.default_rng(0)
    teacher = Conv2D.create(2, 3, 3, rng=1, data_format=data_format)
    teacher.bias = np.array([0.5, -0.5, 1.0], np.float32)
    student = Conv2D.create(2, 3, 3, rng=2, data_format=data_format)
    shape = (8, 6, 6, 2) if data_format == "NHWC" else (8, 2, 6, 6)
    x = rng.standard_normal(shape).astype(np.float32)
    target = teacher.forward(x)
    losses = []
    for _ in range(4):
        y = student.forward(x)
        losses.append(0.5 * float(((y - target) ** 2).mean()))
        grads = student.backward((y - target) / y.size)
        _sgd([student], [grads], lr=0.5)
    assert losses[1] < losses[0] and losses[2] < losses[1] and losses[3] < losses[2], losses
    assert losses[3] < 0.9 * losses[0], losses


def test_three_sgd_steps_lower_a_tiny_cnn_loss():
    """A tiny CNN (depthwise -> ReLU -> 1x1 conv -> global mean -> softmax) on 8x8 bars: the loss falls."""
    rng = np.random.default_rng(0)
    images = rng.normal(0, 0.1, (32, 8, 8, 1)).astype(np.float32)
    labels = np.arange(32) % 2
    for i, label in enumerate(labels):  # class 0: a horizontal bar, class 1: a vertical one
        where = rng.integers(1, 7)
        if label:
            images[i, :, where] += 1
        else:
            images[i, where, :] += 1
    depthwise = DepthwiseConv2D.create(1, 3, multiplier=4, rng=1)
    mix = Conv2D.create(4, 2, 1, rng=2)

    def loss_and_grads():
        h = depthwise.forward(images)
        a = np.maximum(h, 0)
        logits = mix.forward(a).mean(axis=(1, 2))  # (32, 2)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        loss = -float(np.log(p[np.arange(32), labels]).mean())
        dlogits = p.copy()
        dlogits[np.arange(32), labels] -= 1
        dlogits /= 32
        dz = np.broadcast_to(dlogits[:, None, None, :] / 64, (32, 8, 8, 2)).astype(np.float32)
        mix_grads = mix.backward(dz)
        depth_grads = depthwise.backward(mix_grads.input * (h > 0))  # the chain rule, through ReLU
        return loss, [depthwise, mix], [depth_grads, mix_grads]

    losses = []
    for _ in range(4):
        loss, layers, grads = loss_and_grads()
        losses.append(loss)
        _sgd(layers, grads, lr=1.0)
    assert losses[1] < losses[0] and losses[2] < losses[1] and losses[3] < losses[2], losses


# -- PyTorch's autograd --------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["conv", "conv-groups", "depthwise"])
def test_gradients_match_pytorch_autograd(case):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    stride, padding, dilation = (2, 1), (1, 2), (1, 2)
    explicit = (padding[0], padding[0], padding[1], padding[1])
    if case == "depthwise":
        c, m = 3, 2
        layer = DepthwiseConv2D(rng.standard_normal((3, 2, c, m)), rng.standard_normal(c * m), strides=stride,
                                padding="EXPLICIT", explicit_paddings=explicit, dilations=dilation,
                                data_format="NCHW")
        weight = layer.filter.transpose(2, 3, 0, 1).reshape(c * m, 1, 3, 2)  # (C*M, 1, kH, kW)
        groups = c
    else:
        groups = 2 if case == "conv-groups" else 1
        layer = Conv2D(rng.standard_normal((3, 2, 4 // groups, 6)), rng.standard_normal(6), strides=stride,
                       padding="EXPLICIT", explicit_paddings=explicit, dilations=dilation, data_format="NCHW",
                       groups=groups)
        weight = layer.filter.transpose(3, 2, 0, 1)  # (C_out, C_in / groups, kH, kW)
    x = rng.standard_normal((2, layer.in_channels, 7, 8))
    y = layer.forward(x)
    dy = rng.standard_normal(y.shape)
    grads = layer.backward(dy)

    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(np.ascontiguousarray(weight), requires_grad=True)
    tb = torch.tensor(layer.bias, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, tb, stride=stride, padding=padding, dilation=dilation, groups=groups)
    ty.backward(torch.tensor(dy))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads.input, tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    if case == "depthwise":
        torch_filter = tw.grad.numpy().reshape(c, m, 3, 2).transpose(2, 3, 0, 1)
    else:
        torch_filter = tw.grad.numpy().transpose(2, 3, 1, 0)
    np.testing.assert_allclose(grads.filter, torch_filter, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads.bias, tb.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_public_names():
    assert convviz.gradcheck is gradcheck and convviz.layers.Conv2D is Conv2D
    assert {"gradcheck", "layers"} <= set(convviz.__all__)
    assert set(convviz.ops.__all__) <= set(convviz.__all__)
    assert issubclass(Conv2D, ConvLayer) and issubclass(DepthwiseConv2D, ConvLayer)
