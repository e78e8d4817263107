"""The TensorFlow- and MindSpore-shaped namespaces: signatures, conversions, errors."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import convviz
from convviz.compat import tf
from convviz.compat.mindspore import ops as msops

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
