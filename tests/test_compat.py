"""The TensorFlow-, MindSpore- and PyTorch-shaped namespaces: signatures, conversions, errors.

The same namespaces against the real TensorFlow and PyTorch: test_compat_peers.py.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import convviz
from convviz.compat import tf
from convviz.compat import torch as ctorch
from convviz.compat.mindspore import ops as msops
from test_gpu_dispatch import FakeCupyArray, fake_gpu  # noqa: F401 -- the stand-in GPU and its fixture

F32 = np.float32


def test_raw_ops_are_keyword_only_with_tensorflows_names():
    for function, names in [
        (tf.raw_ops.Conv2DBackpropInput,
         ["input_sizes", "filter", "out_backprop", "strides", "padding", "use_cudnn_on_gpu",
          "explicit_paddings", "data_format", "dilations", "name"]),
        (tf.raw_ops.DepthwiseConv2dNativeBackpropFilter,
         ["input", "filter_sizes", "out_backprop", "strides", "padding", "explicit_paddings",
          "data_format", "dilations", "name"]),
    ]:
        parameters = inspect.signature(function).parameters
        assert list(parameters) == names
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    with pytest.raises(TypeError):
        tf.raw_ops.Conv2DBackpropInput([1, 2, 2, 1], np.ones((1, 1, 1, 1)), np.ones((1, 2, 2, 1)),
                                       [1] * 4, "VALID")


def test_nn_signatures():
    assert list(inspect.signature(tf.nn.conv2d_backprop_input).parameters)[:9] == [
        "input_sizes", "filter", "out_backprop", "strides", "padding", "use_cudnn_on_gpu",
        "data_format", "dilations", "name"]
    assert list(inspect.signature(tf.nn.depthwise_conv2d_native_backprop_filter).parameters) == [
        "input", "filter_sizes", "out_backprop", "strides", "padding", "data_format", "dilations", "name"]


def test_python_lists_become_float32_as_in_tensorflow():
    dx = tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 2, 2, 1], filter=[[[[1.0]]]],
                                        out_backprop=[[[[1.0], [2.0]], [[3.0], [4.0]]]],
                                        strides=[1, 1, 1, 1], padding="VALID")
    assert dx.dtype == F32 and dx.ravel().tolist() == [1, 2, 3, 4]
    dw = tf.nn.depthwise_conv2d_native_backprop_filter([[[[1.0]]]], [1, 1, 1, 1], [[[[3.0]]]],
                                                       [1, 1, 1, 1], "VALID")
    assert dw.dtype == F32 and dw.ravel().tolist() == [3.0]


def test_use_cudnn_and_name_are_checked_but_inert():
    args = dict(input_sizes=[1, 2, 2, 1], filter=np.ones((1, 1, 1, 1), F32),
                out_backprop=np.ones((1, 2, 2, 1), F32), strides=[1] * 4, padding="VALID")
    a = tf.raw_ops.Conv2DBackpropInput(**args, use_cudnn_on_gpu=False, name="grad")
    np.testing.assert_array_equal(a, np.ones((1, 2, 2, 1), F32))
    with pytest.raises(TypeError, match="use_cudnn_on_gpu must be a bool"):
        tf.raw_ops.Conv2DBackpropInput(**args, use_cudnn_on_gpu="yes")
    with pytest.raises(TypeError, match="name must be a string"):
        tf.raw_ops.Conv2DBackpropInput(**args, name=3)


def test_errors_name_the_tensorflow_op():
    with pytest.raises(convviz.InvalidArgumentError, match="^Conv2DBackpropInput: strides"):
        tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 2, 2, 1], filter=np.ones((1, 1, 1, 1), F32),
                                       out_backprop=np.ones((1, 2, 2, 1), F32), strides=[1, 1], padding="VALID")
    with pytest.raises(convviz.InvalidArgumentError, match="^DepthwiseConv2dNativeBackpropFilter: padding"):
        tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(input=np.ones((1, 2, 2, 1), F32), filter_sizes=[1, 1, 1, 1],
                                                       out_backprop=np.ones((1, 2, 2, 1), F32),
                                                       strides=[1] * 4, padding="valid")


def test_nn_padding_as_pairs_is_explicit_padding(rng):
    filt = rng.standard_normal((3, 3, 2, 3)).astype(F32)
    dy = rng.standard_normal((1, 4, 5, 3)).astype(F32)  # rows 4+2+0-3+1, cols 4+1+2-3+1
    pairs = [[0, 0], [2, 0], [1, 2], [0, 0]]
    got = tf.nn.conv2d_backprop_input([1, 4, 4, 2], filt, dy, [1, 1, 1, 1], pairs)
    expected = convviz.conv2d_backprop_input([1, 4, 4, 2], filt, dy, [1, 1, 1, 1], "EXPLICIT",
                                             [0, 0, 2, 0, 1, 2, 0, 0])
    np.testing.assert_array_equal(got, expected)
    same_with_filters_alias = tf.nn.conv2d_backprop_input([1, 4, 4, 2], filters=filt, out_backprop=dy,
                                                          strides=[1, 1, 1, 1], padding=pairs)
    np.testing.assert_array_equal(same_with_filters_alias, expected)
    with pytest.raises(convviz.InvalidArgumentError, match="4 \\(before, after\\) pairs"):
        tf.nn.conv2d_backprop_input([1, 4, 4, 2], filt, dy, [1, 1, 1, 1], [[2, 0], [1, 2]])
    with pytest.raises(convviz.InvalidArgumentError, match="batch and depth"):
        tf.nn.conv2d_backprop_input([1, 4, 4, 2], filt, dy, [1, 1, 1, 1], [[1, 0], [2, 0], [1, 2], [0, 0]])
    with pytest.raises(TypeError, match="not both"):
        tf.nn.conv2d_backprop_input([1, 4, 4, 2], filt, dy, [1, 1, 1, 1], "SAME", filters=filt)
    with pytest.raises(TypeError, match="missing argument"):
        tf.nn.conv2d_backprop_input([1, 4, 4, 2], out_backprop=dy, strides=[1, 1, 1, 1], padding="SAME")


# -- MindSpore -----------------------------------------------------------------
def test_mindspore_matches_tensorflow_semantics(rng):
    weight = rng.standard_normal((6, 2, 3, 2)).astype(F32)  # (C_out, C_in/group, K1, K2)
    dout = rng.standard_normal((2, 6, 3, 4)).astype(F32)
    op = msops.Conv2DBackpropInput(6, (3, 2), pad_mode="same", stride=(2, 1), dilation=(1, 2), group=2)
    got = op(dout, weight, (2, 4, 5, 4))
    expected = convviz.conv2d_backprop_input([2, 4, 5, 4], weight.transpose(2, 3, 1, 0), dout,
                                             [1, 1, 2, 1], "SAME", data_format="NCHW", dilations=[1, 1, 1, 2])
    np.testing.assert_array_equal(got, expected)
    # NHWC: weight (C_out, K1, K2, C_in/group), 4-tuples are (1, 1, H, W).
    op = msops.Conv2DBackpropInput(6, (3, 2), pad_mode="same", stride=(1, 1, 2, 1), dilation=(1, 1, 1, 2),
                                   group=2, data_format="NHWC")
    nhwc = op(dout.transpose(0, 2, 3, 1), weight.transpose(0, 2, 3, 1), (2, 5, 4, 4))
    np.testing.assert_array_equal(nhwc, expected.transpose(0, 2, 3, 1))


def test_mindspore_pad_and_pad_list(rng):
    weight = rng.standard_normal((2, 1, 2, 2)).astype(F32)
    dout = rng.standard_normal((1, 2, 5, 4)).astype(F32)
    op = msops.Conv2DBackpropInput(2, 2, pad_mode="pad", pad=(1, 0, 0, 1))
    expected = convviz.conv2d_backprop_input([1, 1, 5, 4], weight.transpose(2, 3, 1, 0), dout, [1, 1, 1, 1],
                                             "EXPLICIT", [0, 0, 0, 0, 1, 0, 0, 1], data_format="NCHW")
    np.testing.assert_array_equal(op(dout, weight, (1, 1, 5, 4)), expected)
    by_list = msops.Conv2DBackpropInput(2, 2, pad_list=(1, 0, 0, 1))
    np.testing.assert_array_equal(by_list(dout, weight, (1, 1, 5, 4)), expected)


MS_ERRORS = [
    (dict(out_channel=2.0), TypeError, "out_channel"),
    (dict(out_channel=True), TypeError, "out_channel"),
    (dict(out_channel=0), ValueError, "out_channel"),
    (dict(kernel_size=[3, 3]), TypeError, "kernel_size"),
    (dict(kernel_size=3.0), TypeError, "kernel_size"),
    (dict(kernel_size=0), ValueError, "kernel_size"),
    (dict(kernel_size=(3, 0)), ValueError, "kernel_size"),
    (dict(kernel_size=(1, 1, 3, 3)), ValueError, "kernel_size"),
    (dict(kernel_size=(3,)), ValueError, "kernel_size"),
    (dict(stride="1"), TypeError, "stride"),
    (dict(stride=0), ValueError, "stride"),
    (dict(stride=(1, 2, 3)), ValueError, "stride"),
    (dict(stride=(2, 1, 1, 1)), ValueError, "stride"),
    (dict(dilation=[1, 1]), TypeError, "dilation"),
    (dict(dilation=-1), ValueError, "dilation"),
    (dict(pad="1"), TypeError, "pad"),
    (dict(pad=[1, 1, 1, 1], pad_mode="pad"), TypeError, "pad"),
    (dict(pad=(1, 1), pad_mode="pad"), ValueError, "pad"),
    (dict(pad=1), ValueError, "pad_mode"),
    (dict(pad=(0, 0, 1, 0), pad_mode="same"), ValueError, "pad"),
    (dict(pad=-1, pad_mode="pad"), ValueError, "pad"),
    (dict(pad_mode="full"), ValueError, "pad_mode"),
    (dict(pad_mode="SAME"), ValueError, "did you mean 'same'"),
    (dict(pad_mode=1), TypeError, "pad_mode"),
    (dict(mode=0), ValueError, "mode"),
    (dict(mode=3), ValueError, "mode"),
    (dict(group=1.5), TypeError, "group"),
    (dict(group=0), ValueError, "group"),
    (dict(group=3), ValueError, "divisible"),
    (dict(data_format="NCWH"), ValueError, "data_format"),
    (dict(pad_list=(1, 1, -1, 0)), ValueError, "pad_list"),
    (dict(pad_list=(1, 1)), ValueError, "pad_list"),
]


@pytest.mark.parametrize("changes, exc, word", MS_ERRORS, ids=lambda v: repr(v)[:40])
def test_mindspore_documented_errors(changes, exc, word):
    kwargs = {"out_channel": 4, "kernel_size": 3, **changes}
    with pytest.raises(exc, match=word):
        msops.Conv2DBackpropInput(**kwargs)


def test_mindspore_call_errors(rng):
    op = msops.Conv2DBackpropInput(4, 3, group=2)
    weight = np.ones((4, 1, 3, 3), F32)
    dout = np.ones((1, 4, 2, 2), F32)
    assert op(dout, weight, (1, 2, 4, 4)).shape == (1, 2, 4, 4)
    with pytest.raises(ValueError, match="out_channel"):
        op(dout, np.ones((3, 1, 3, 3), F32), (1, 2, 4, 4))
    with pytest.raises(ValueError, match="kernel_size"):
        op(dout, np.ones((4, 1, 2, 3), F32), (1, 2, 4, 4))
    with pytest.raises(ValueError, match="input channels"):
        op(dout, weight, (1, 3, 4, 4))
    with pytest.raises(ValueError, match="out_backprop must have shape"):
        op(np.ones((1, 4, 3, 3), F32), weight, (1, 2, 4, 4))  # MindSpore does not check this
    with pytest.raises(ValueError, match="input_size"):
        op(dout, weight, (2, 4, 4))
    with pytest.raises(TypeError, match="same dtype"):
        op(dout, weight.astype(np.float64), (1, 2, 4, 4))
    assert "out_channel=4" in repr(op)


# -- signatures of the new names (the real APIs are compared in test_compat_peers.py) --
def _parameters(function):
    """(name, default) pairs, with list and tuple defaults alike (TensorFlow's lists are our tuples)."""
    return [(name, list(p.default) if isinstance(p.default, (list, tuple)) else p.default)
            for name, p in inspect.signature(function).parameters.items()]


EMPTY = inspect.Parameter.empty
TF_SIGNATURES = {
    "conv2d": [("input", EMPTY), ("filters", EMPTY), ("strides", EMPTY), ("padding", EMPTY),
               ("data_format", "NHWC"), ("dilations", None), ("name", None)],
    "conv2d_backprop_filter": [("input", EMPTY), ("filter_sizes", EMPTY), ("out_backprop", EMPTY),
                               ("strides", EMPTY), ("padding", EMPTY), ("use_cudnn_on_gpu", True),
                               ("data_format", "NHWC"), ("dilations", [1, 1, 1, 1]), ("name", None)],
    "conv2d_transpose": [("input", EMPTY), ("filters", EMPTY), ("output_shape", EMPTY), ("strides", EMPTY),
                         ("padding", "SAME"), ("data_format", "NHWC"), ("dilations", None), ("name", None)],
    "depthwise_conv2d": [("input", EMPTY), ("filter", EMPTY), ("strides", EMPTY), ("padding", EMPTY),
                         ("data_format", None), ("dilations", None), ("name", None)],
    "depthwise_conv2d_backprop_input": [("input_sizes", EMPTY), ("filter", EMPTY), ("out_backprop", EMPTY),
                                        ("strides", EMPTY), ("padding", EMPTY), ("data_format", "NHWC"),
                                        ("dilations", [1, 1, 1, 1]), ("name", None)],
    "depthwise_conv2d_backprop_filter": [("input", EMPTY), ("filter_sizes", EMPTY), ("out_backprop", EMPTY),
                                         ("strides", EMPTY), ("padding", EMPTY), ("data_format", "NHWC"),
                                         ("dilations", [1, 1, 1, 1]), ("name", None)],
}
TORCH_SIGNATURES = {
    "conv2d_input": [("input_size", EMPTY), ("weight", EMPTY), ("grad_output", EMPTY), ("stride", 1),
                     ("padding", 0), ("dilation", 1), ("groups", 1)],
    "conv2d_weight": [("input", EMPTY), ("weight_size", EMPTY), ("grad_output", EMPTY), ("stride", 1),
                      ("padding", 0), ("dilation", 1), ("groups", 1)],
    "conv_transpose2d": [("input", EMPTY), ("weight", EMPTY), ("bias", None), ("stride", 1), ("padding", 0),
                         ("output_padding", 0), ("groups", 1), ("dilation", 1)],
}
MS_CONV2D = [("out_channel", EMPTY), ("kernel_size", EMPTY), ("mode", 1), ("pad_mode", "valid"), ("pad", 0),
             ("stride", 1), ("dilation", 1), ("group", 1), ("data_format", "NCHW")]
MS_BACKPROP_INPUT = [("out_channel", EMPTY), ("kernel_size", EMPTY), ("pad_mode", "valid"), ("pad", 0),
                     ("pad_list", None), ("mode", 1), ("stride", 1), ("dilation", 1), ("group", 1),
                     ("data_format", "NCHW")]


@pytest.mark.parametrize("name", sorted(TF_SIGNATURES))
def test_new_tf_nn_signatures(name):
    assert _parameters(getattr(tf.nn, name)) == TF_SIGNATURES[name]
    assert name in tf.nn.__all__


@pytest.mark.parametrize("name", sorted(TORCH_SIGNATURES))
def test_torch_signatures(name):
    assert _parameters(getattr(ctorch, name)) == TORCH_SIGNATURES[name]


def test_mindspore_signatures():
    assert _parameters(msops.Conv2D) == MS_CONV2D
    for cls in (msops.Conv2DBackpropInput, msops.Conv2DTranspose):
        assert _parameters(cls) == MS_BACKPROP_INPUT
        assert list(inspect.signature(cls.__call__).parameters) == ["self", "dout", "weight", "input_size"]
    assert list(inspect.signature(msops.Conv2D.__call__).parameters) == ["self", "x", "weight"]


def test_one_function_under_two_names_as_in_tensorflow():
    assert tf.nn.depthwise_conv2d_backprop_filter is tf.nn.depthwise_conv2d_native_backprop_filter
    assert tf.nn.depthwise_conv2d_backprop_input is tf.nn.depthwise_conv2d_native_backprop_input


# -- tf.nn: conversions ----------------------------------------------------------
def test_nn_conv2d_takes_tensorflow_2s_strides_and_dilations(rng):
    x = rng.standard_normal((2, 9, 8, 4)).astype(F32)
    filt = rng.standard_normal((3, 2, 2, 6)).astype(F32)  # two groups
    expected = convviz.conv2d(x, filt, [1, 2, 2, 1], "SAME", dilations=[1, 2, 2, 1])
    for strides, dilations in [(2, 2), ([2], [2]), ([2, 2], (2, 2)), ([1, 2, 2, 1], [1, 2, 2, 1]),
                               (np.int64(2), np.array([2, 2]))]:
        np.testing.assert_array_equal(tf.nn.conv2d(x, filt, strides, "SAME", dilations=dilations), expected)
    np.testing.assert_array_equal(tf.nn.conv2d(x, filt, 1, "VALID", dilations=None),
                                  convviz.conv2d(x, filt, [1, 1, 1, 1], "VALID"))
    # NCHW: the 2-value and int forms go to height and width, wherever depth is.
    nchw = tf.nn.conv2d(x.transpose(0, 3, 1, 2), filt, [2, 2], "SAME", data_format="NCHW", dilations=2)
    np.testing.assert_array_equal(nchw, expected.transpose(0, 3, 1, 2))
    with pytest.raises(convviz.InvalidArgumentError, match="^conv2d: strides should be an int or of length 1, 2 or 4"):
        tf.nn.conv2d(x, filt, [1, 2, 2], "SAME")
    with pytest.raises(convviz.InvalidArgumentError, match="^conv2d: dilations in the batch and depth"):
        tf.nn.conv2d(x, filt, 1, "SAME", dilations=[2, 2, 2, 2])


def test_nn_conv2d_batch_dimensions_padding_and_lists(rng):
    x = rng.standard_normal((2, 3, 5, 4, 2)).astype(F32)
    filt = rng.standard_normal((2, 3, 2, 3)).astype(F32)
    pairs = [[0, 0], [1, 0], [0, 2], [0, 0]]
    got = tf.nn.conv2d(x, filt, 1, pairs)
    flat = convviz.conv2d(x.reshape(6, 5, 4, 2), filt, [1, 1, 1, 1], "EXPLICIT", [0, 0, 1, 0, 0, 2, 0, 0])
    assert got.shape == (2, 3, *flat.shape[1:])
    np.testing.assert_array_equal(got, flat.reshape(got.shape))
    y = tf.nn.conv2d([[[[1.0], [2.0]], [[3.0], [4.0]]]], [[[[2.0]]]], 1, "VALID")
    assert y.dtype == F32 and y.ravel().tolist() == [2, 4, 6, 8]
    y64 = tf.nn.conv2d(x[0].astype(np.float64), filt.astype(np.float64).tolist(), 1, "VALID")
    assert y64.dtype == np.float64  # a list takes the array's dtype, as TensorFlow converts it
    with pytest.raises(convviz.InvalidArgumentError, match="^conv2d: padding 'EXPLICIT' is not a valid value"):
        tf.nn.conv2d(x[0], filt, 1, "EXPLICIT")
    with pytest.raises(convviz.InvalidArgumentError, match="^conv2d: input must be 4-D"):
        tf.nn.conv2d(x[0, 0], filt, 1, "VALID")
    with pytest.raises(TypeError, match="^conv2d: name must be a string"):
        tf.nn.conv2d(x[0], filt, 1, "VALID", name=1)


def test_nn_conv2d_backprop_filter(rng):
    x = rng.standard_normal((2, 7, 6, 4)).astype(F32)
    dy = rng.standard_normal((2, 4, 3, 6)).astype(F32)
    expected = convviz.conv2d_backprop_filter(x, [3, 2, 2, 6], dy, [1, 2, 2, 1], "SAME")
    np.testing.assert_array_equal(tf.nn.conv2d_backprop_filter(x, [3, 2, 2, 6], dy, [1, 2, 2, 1], "SAME"),
                                  expected)
    pairs = [[0, 0], [0, 0], [1, 1], [0, 2]]  # NCHW
    got = tf.nn.conv2d_backprop_filter(x.transpose(0, 3, 1, 2), [3, 3, 4, 2], dy[:, :, :2, :2].transpose(0, 3, 1, 2),
                                       [1, 1, 2, 3], pairs, data_format="NCHW", use_cudnn_on_gpu=False)
    np.testing.assert_array_equal(got, convviz.conv2d_backprop_filter(
        x, [3, 3, 4, 2], dy[:, :, :2, :2], [1, 2, 3, 1], "EXPLICIT", [0, 0, 1, 1, 0, 2, 0, 0]))
    # None is the default of data_format, dilations and use_cudnn_on_gpu, as in TensorFlow's generated ops.
    np.testing.assert_array_equal(tf.nn.conv2d_backprop_filter(x, [3, 2, 2, 6], dy, [1, 2, 2, 1], "SAME", None,
                                                               None, None), expected)
    with pytest.raises(TypeError, match="^conv2d_backprop_filter: use_cudnn_on_gpu must be a bool"):
        tf.nn.conv2d_backprop_filter(x, [3, 2, 2, 6], dy, [1, 2, 2, 1], "SAME", use_cudnn_on_gpu=1)
    with pytest.raises(convviz.InvalidArgumentError, match="^conv2d_backprop_filter: out_backprop must have"):
        tf.nn.conv2d_backprop_filter(x, [3, 2, 2, 6], dy, [1, 1, 1, 1], "SAME")


def test_nn_conv2d_transpose_is_the_input_gradient(rng):
    y = rng.standard_normal((2, 4, 3, 6)).astype(F32)
    filt = rng.standard_normal((3, 3, 5, 6)).astype(F32)  # [h, w, output_channels, in_channels]
    expected = convviz.conv2d_backprop_input([2, 8, 6, 5], filt, y, [1, 2, 2, 1], "SAME")
    np.testing.assert_array_equal(tf.nn.conv2d_transpose(y, filt, [2, 8, 6, 5], 2), expected)  # SAME default
    got = tf.nn.conv2d_transpose(y, filt, [2, 7, 5, 5], [2, 2], [[0, 0], [1, 1], [1, 1], [0, 0]], dilations=1)
    np.testing.assert_array_equal(got, convviz.conv2d_backprop_input(
        [2, 7, 5, 5], filt, y, [1, 2, 2, 1], "EXPLICIT", [0, 0, 1, 1, 1, 1, 0, 0]))
    nchw = tf.nn.conv2d_transpose(y.transpose(0, 3, 1, 2), filt, [2, 5, 8, 6], 2, data_format="NCHW")
    np.testing.assert_array_equal(nchw, expected.transpose(0, 3, 1, 2))
    with pytest.raises(convviz.InvalidArgumentError, match="^conv2d_transpose: out_backprop must have shape"):
        tf.nn.conv2d_transpose(y, filt, [2, 4, 3, 5], 2)


def test_nn_depthwise_conv2d(rng):
    x = rng.standard_normal((2, 9, 8, 3)).astype(F32)
    filt = rng.standard_normal((3, 2, 3, 2)).astype(F32)
    for data_format in (None, "NHWC"):
        got = tf.nn.depthwise_conv2d(x, filt, [1, 1, 1, 1], "SAME", data_format=data_format, dilations=[2, 3])
        np.testing.assert_array_equal(got, convviz.depthwise_conv2d_native(
            x, filt, [1, 1, 1, 1], "SAME", dilations=[1, 2, 3, 1]))
    # A rate above 1 with a stride above 1: TensorFlow warns and computes something else; this is exact.
    strided = tf.nn.depthwise_conv2d(x.transpose(0, 3, 1, 2), filt, [1, 1, 2, 2], [[0, 0], [0, 0], [1, 1], [0, 0]],
                                     data_format="NCHW", dilations=(2, 2))
    np.testing.assert_array_equal(strided, convviz.depthwise_conv2d_native(
        x, filt, [1, 2, 2, 1], "EXPLICIT", [0, 0, 1, 1, 0, 0, 0, 0], dilations=[1, 2, 2, 1]).transpose(0, 3, 1, 2))
    with pytest.raises(TypeError, match="^depthwise_conv2d: dilations must be a list"):
        tf.nn.depthwise_conv2d(x, filt, [1, 1, 1, 1], "SAME", dilations=2)
    with pytest.raises(convviz.InvalidArgumentError, match="^depthwise_conv2d: dilations is the rate"):
        tf.nn.depthwise_conv2d(x, filt, [1, 1, 1, 1], "SAME", dilations=[1, 2, 2, 1])
    with pytest.raises(convviz.InvalidArgumentError, match="^depthwise_conv2d: padding"):
        tf.nn.depthwise_conv2d(x, filt, [1, 1, 1, 1], "same")


def test_nn_depthwise_gradients(rng):
    filt = rng.standard_normal((3, 3, 2, 3)).astype(F32)
    dy = rng.standard_normal((1, 5, 4, 6)).astype(F32)
    x = rng.standard_normal((1, 5, 4, 2)).astype(F32)
    window = ([1, 1, 1, 1], [[0, 0], [1, 1], [2, 2], [0, 0]])
    dx = tf.nn.depthwise_conv2d_backprop_input([1, 5, 4, 2], filt, dy, *window, dilations=[1, 1, 2, 1])
    np.testing.assert_array_equal(dx, convviz.depthwise_conv2d_native_backprop_input(
        [1, 5, 4, 2], filt, dy, [1, 1, 1, 1], "EXPLICIT", [0, 0, 1, 1, 2, 2, 0, 0], dilations=[1, 1, 2, 1]))
    dw = tf.nn.depthwise_conv2d_backprop_filter(x, [3, 3, 2, 3], dy, *window, dilations=[1, 1, 2, 1])
    np.testing.assert_array_equal(dw, convviz.depthwise_conv2d_native_backprop_filter(
        x, [3, 3, 2, 3], dy, [1, 1, 1, 1], "EXPLICIT", [0, 0, 1, 1, 2, 2, 0, 0], dilations=[1, 1, 2, 1]))
    with pytest.raises(convviz.InvalidArgumentError, match="^depthwise_conv2d_backprop_input: "):
        tf.nn.depthwise_conv2d_backprop_input([1, 5, 4, 3], filt, dy, [1, 1, 1, 1], "SAME")
    with pytest.raises(TypeError, match="^depthwise_conv2d_backprop_input: name must be a string"):
        tf.nn.depthwise_conv2d_backprop_input([1, 5, 4, 2], filt, dy, [1, 1, 1, 1], "SAME", name=b"x")


def test_nn_padding_pairs_are_checked_as_tensorflow_does(rng):
    x, filt = np.ones((1, 4, 4, 1), F32), np.ones((2, 2, 1, 1), F32)
    for pairs in ([[0, 0], [1, 1], [1, 1]], [[0, 0], [1, 1], [1, 1], 0], [[0, 0], [1, 1, 1], [1, 1], [0, 0]]):
        with pytest.raises(convviz.InvalidArgumentError, match="^conv2d: padding given as a list must be 4"):
            tf.nn.conv2d(x, filt, 1, pairs)
    with pytest.raises(convviz.InvalidArgumentError, match="^conv2d: explicit_paddings for the batch and depth"):
        tf.nn.conv2d(x, filt, 1, [[0, 0], [1, 1], [1, 1], [1, 0]])


# -- MindSpore: Conv2D and Conv2DTranspose --------------------------------------------
def test_mindspore_conv2d_is_tensorflows_conv2d(rng):
    x = rng.standard_normal((2, 4, 7, 6)).astype(F32)
    weight = rng.standard_normal((6, 2, 3, 2)).astype(F32)  # (C_out, C_in/group, K1, K2)
    op = msops.Conv2D(6, (3, 2), pad_mode="same", stride=(2, 1), dilation=(1, 2), group=2)
    expected = convviz.conv2d(x, weight.transpose(2, 3, 1, 0), [1, 1, 2, 1], "SAME", data_format="NCHW",
                              dilations=[1, 1, 1, 2])
    np.testing.assert_array_equal(op(x, weight), expected)
    nhwc = msops.Conv2D(6, (3, 2), pad_mode="same", stride=(1, 1, 2, 1), dilation=(1, 1, 1, 2), group=2,
                        data_format="NHWC")
    np.testing.assert_array_equal(nhwc(x.transpose(0, 2, 3, 1), weight.transpose(0, 2, 3, 1)),
                                  expected.transpose(0, 2, 3, 1))
    padded = msops.Conv2D(6, (3, 2), pad_mode="pad", pad=(1, 0, 2, 1), group=2)
    np.testing.assert_array_equal(padded(x, weight), convviz.conv2d(
        x, weight.transpose(2, 3, 1, 0), [1, 1, 1, 1], "EXPLICIT", [0, 0, 0, 0, 1, 0, 2, 1], data_format="NCHW"))
    lists = msops.Conv2D(1, 1)([[[[1.0, 2.0]]]], [[[[3.0]]]])
    assert lists.dtype == F32 and lists.ravel().tolist() == [3.0, 6.0]
    assert repr(op).startswith("Conv2D(out_channel=6, kernel_size=(3, 2), mode=1, pad_mode='same'")


def test_mindspore_conv2d_transpose_is_conv2d_backprop_input(rng):
    weight = rng.standard_normal((4, 2, 3, 3)).astype(F32)
    dout = rng.standard_normal((1, 4, 3, 3)).astype(F32)
    kwargs = dict(out_channel=4, kernel_size=3, pad_mode="pad", pad=1, stride=2, group=2)
    got = msops.Conv2DTranspose(**kwargs)(dout, weight, (1, 4, 6, 6))
    np.testing.assert_array_equal(got, msops.Conv2DBackpropInput(**kwargs)(dout, weight, (1, 4, 6, 6)))
    assert issubclass(msops.Conv2DTranspose, msops.Conv2DBackpropInput)
    assert repr(msops.Conv2DTranspose(**kwargs)).startswith("Conv2DTranspose(out_channel=4")


@pytest.mark.parametrize("cls, changes, exc, word", [
    (cls, *case) for cls in (msops.Conv2D, msops.Conv2DTranspose) for case in MS_ERRORS
    if cls is not msops.Conv2D or "pad_list" not in case[0]], ids=lambda v: getattr(v, "__name__", repr(v)[:40]))
def test_mindspore_documented_errors_of_conv2d_and_conv2d_transpose(cls, changes, exc, word):
    with pytest.raises(exc, match=f"^For '{cls.__name__}', .*{word}"):
        cls(**{"out_channel": 4, "kernel_size": 3, **changes})


def test_mindspore_conv2d_call_errors():
    op = msops.Conv2D(4, 3, group=2)
    x, weight = np.ones((1, 4, 5, 5), F32), np.ones((4, 2, 3, 3), F32)
    assert op(x, weight).shape == (1, 4, 3, 3)
    with pytest.raises(ValueError, match="^For 'Conv2D', weight.shape\\[0\\] must equal 'out_channel'"):
        op(x, np.ones((2, 2, 3, 3), F32))
    with pytest.raises(ValueError, match="^For 'Conv2D', the weight's kernel dimensions"):
        op(x, np.ones((4, 2, 3, 2), F32))
    with pytest.raises(ValueError, match="^For 'Conv2D', the input channels in 'x' \\(6\\)"):
        op(np.ones((1, 6, 5, 5), F32), weight)
    with pytest.raises(ValueError, match="^For 'Conv2D', 'x' must be 4-D"):
        op(np.ones((4, 5, 5), F32), weight)
    with pytest.raises(ValueError, match="^For 'Conv2D', 'weight' must be 4-D"):
        op(x, np.ones((4, 2, 3), F32))
    with pytest.raises(TypeError, match="same dtype"):
        op(x, weight.astype(np.float64))
    with pytest.raises(ValueError, match="^For 'Conv2D', the input's height and width after padding \\(5, 5\\)"):
        msops.Conv2D(4, 7, group=2)(x, np.ones((4, 2, 7, 7), F32))
    with pytest.raises(ValueError, match=r"after padding \(7, 5\) must be at least the \(dilated\) kernel's \(5, 7\)"):
        msops.Conv2D(4, (3, 4), pad_mode="pad", pad=(1, 1, 0, 0), dilation=2, group=2)(x, np.ones((4, 2, 3, 4), F32))
    assert msops.Conv2D(4, 7, pad_mode="same", group=2)(x, np.ones((4, 2, 7, 7), F32)).shape == (1, 4, 5, 5)
    with pytest.raises(ValueError, match="^For 'Conv2DTranspose', weight.shape\\[0\\]"):
        msops.Conv2DTranspose(4, 3)(np.ones((1, 4, 2, 2), F32), np.ones((3, 1, 3, 3), F32), (1, 1, 4, 4))


# -- PyTorch: torch.nn.grad and conv_transpose2d --------------------------------------
TORCH_WINDOW = dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)


def test_torch_conv2d_input_is_the_input_gradient(rng):
    weight = rng.standard_normal((6, 2, 3, 2)).astype(F32)  # (C_out, C_in/groups, kH, kW)
    dy = rng.standard_normal((2, 6, 4, 8)).astype(F32)  # rows (7+2-3)//2+1, cols (6+4-3)//1+1
    got = ctorch.conv2d_input((2, 4, 7, 6), weight, dy, **TORCH_WINDOW)
    expected = convviz.conv2d_backprop_input([2, 4, 7, 6], weight.transpose(2, 3, 1, 0), dy, [1, 1, 2, 1],
                                             "EXPLICIT", [0, 0, 0, 0, 1, 1, 2, 2], data_format="NCHW",
                                             dilations=[1, 1, 1, 2])
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, expected)
    # Ints for pairs, and a 1-value sequence as ATen expands it.
    np.testing.assert_array_equal(ctorch.conv2d_input([2, 4, 7, 6], weight, dy[:, :, :3, :3], 2, [1], 2, 2),
                                  convviz.conv2d_backprop_input(
                                      [2, 4, 7, 6], weight.transpose(2, 3, 1, 0), dy[:, :, :3, :3], [2, 2],
                                      "EXPLICIT", [0, 0, 0, 0, 1, 1, 1, 1], data_format="NCHW", dilations=[2, 2]))


def test_torch_conv2d_weight_is_the_filter_gradient(rng):
    x = rng.standard_normal((2, 4, 7, 6)).astype(F32)
    dy = rng.standard_normal((2, 6, 4, 8)).astype(F32)
    got = ctorch.conv2d_weight(x, (6, 2, 3, 2), dy, **TORCH_WINDOW)
    hwio = convviz.conv2d_backprop_filter(x, [3, 2, 2, 6], dy, [1, 1, 2, 1], "EXPLICIT", [0, 0, 0, 0, 1, 1, 2, 2],
                                          data_format="NCHW", dilations=[1, 1, 1, 2])
    assert got.shape == (6, 2, 3, 2)
    np.testing.assert_array_equal(got, hwio.transpose(3, 2, 0, 1))


def test_torch_weight_goes_to_the_op_as_a_view(monkeypatch, rng):
    weight = rng.standard_normal((4, 2, 3, 3))
    seen = {}
    record = convviz.ops.BY_NAME["conv2d_backprop_input"]
    real = record.run

    def spy(*args, **kwargs):
        seen["filter"] = args[1]
        return real(*args, **kwargs)

    monkeypatch.setattr(record, "run", spy)
    ctorch.conv2d_input((1, 2, 5, 5), weight, np.ones((1, 4, 3, 3)))
    assert seen["filter"].shape == (3, 3, 2, 4) and np.shares_memory(seen["filter"], weight)


def test_torch_lists_and_conv_transpose2d(rng):
    dx = ctorch.conv2d_input([1, 1, 2, 2], [[[[1.0]]]], [[[[1.0, 2.0], [3.0, 4.0]]]])
    assert dx.dtype == F32 and dx.ravel().tolist() == [1, 2, 3, 4]
    x = rng.standard_normal((2, 4, 3, 3)).astype(F32)
    weight = rng.standard_normal((4, 3, 3, 3)).astype(F32)
    bias = rng.standard_normal(6).astype(F32)
    np.testing.assert_array_equal(ctorch.conv_transpose2d(x, weight, bias, 2, 1, 1, 2, 1),
                                  convviz.conv_transpose2d(x, weight, bias, 2, 1, 1, 2, 1))


TORCH_ERRORS = [
    (dict(padding="same"), TypeError, "^conv2d_input: padding must be an int or 2 ints, got str 'same'"),
    (dict(padding="valid"), TypeError, "no 'same' or 'valid' strings"),
    (dict(padding=(1, 1, 1)), ValueError, "^conv2d_input: padding should be an int or of length 1 or 2, got 3"),
    (dict(padding=-1), ValueError, "^conv2d_input: padding\\[0\\] must be between 0"),
    (dict(padding=1.0), TypeError, "^conv2d_input: padding must be an int or a list of ints, got float"),
    (dict(stride=[2.0, 1]), TypeError, "^conv2d_input: stride\\[0\\] must be an int, got float"),
    (dict(stride=0), ValueError, "^conv2d_input: stride\\[0\\] must be between 1"),
    (dict(dilation=(1, 0)), ValueError, "^conv2d_input: dilation\\[1\\] must be between 1"),
    (dict(groups=0), ValueError, "^conv2d_input: groups must be positive"),
    (dict(groups=3), ValueError, "^conv2d_input: the weight's C_out \\(4\\) must be divisible by groups"),
    (dict(groups=2), ValueError, "^conv2d_input: input_size has 2 channels, but the weight"),
    (dict(groups=True), TypeError, "^conv2d_input: groups must be an int"),
]


@pytest.mark.parametrize("changes, exc, pattern", TORCH_ERRORS, ids=lambda v: repr(v)[:30])
def test_torch_errors_name_the_function(changes, exc, pattern):
    with pytest.raises(exc, match=pattern):
        ctorch.conv2d_input((1, 2, 5, 5), np.ones((4, 2, 3, 3)), np.ones((1, 4, 5, 5)), **{"padding": 1, **changes})


def test_torch_shape_errors():
    weight, dy = np.ones((4, 2, 3, 3)), np.ones((1, 4, 3, 3))
    with pytest.raises(ValueError, match="^conv2d_input: input_size must have 4 values"):
        ctorch.conv2d_input((2, 5, 5), weight, dy)
    with pytest.raises(ValueError, match="^conv2d_input: weight must be 4-D"):
        ctorch.conv2d_input((1, 2, 5, 5), np.ones((4, 2, 3)), dy)
    with pytest.raises(ValueError, match="^conv2d_input: out_backprop must have shape \\(1, 4, 3, 3\\)"):
        ctorch.conv2d_input((1, 2, 5, 5), weight, np.ones((1, 4, 4, 3)))
    with pytest.raises(TypeError, match="^conv2d_input: grad_output must have the same dtype as weight"):
        ctorch.conv2d_input((1, 2, 5, 5), weight, dy.astype(F32))
    x = np.ones((1, 2, 5, 5))
    with pytest.raises(ValueError, match="^conv2d_weight: weight_size must have 4 values"):
        ctorch.conv2d_weight(x, (4, 2, 3), dy)
    with pytest.raises(ValueError, match="^conv2d_weight: input must be 4-D"):
        ctorch.conv2d_weight(x[0], (4, 2, 3, 3), dy)
    with pytest.raises(ValueError, match="^conv2d_weight: input has 2 channels"):
        ctorch.conv2d_weight(x, (4, 1, 3, 3), dy)
    with pytest.raises(ValueError, match="^conv_transpose2d: "):
        ctorch.conv_transpose2d(np.ones((1, 2, 3, 3)), np.ones((3, 1, 3, 3)))


def test_compat_namespaces_send_cupy_arrays_to_the_gpu(fake_gpu):
    filt, dy = FakeCupyArray(np.ones((3, 3, 2, 4), F32)), FakeCupyArray(np.ones((1, 4, 4, 4), F32))
    assert tf.nn.conv2d_transpose(dy, filt, [1, 4, 4, 2], 1) == "gpu-result"
    assert tf.nn.conv2d(FakeCupyArray(np.ones((1, 4, 4, 2), F32)), filt, 1, "SAME") == "gpu-result"
    assert fake_gpu[-1][0] == "conv2d"
    weight = FakeCupyArray(np.ones((4, 2, 3, 3), F32))
    assert ctorch.conv2d_input((1, 2, 4, 4), weight, FakeCupyArray(np.ones((1, 4, 2, 2), F32))) == "gpu-result"
    assert fake_gpu[-1][0] == "conv2d_backprop_input"
    assert msops.Conv2D(4, 3)(FakeCupyArray(np.ones((1, 2, 4, 4), F32)), weight) == "gpu-result"
