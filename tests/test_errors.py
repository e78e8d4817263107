"""Error paths that the input gradient and the depthwise filter gradient share: a
clear TypeError / InvalidArgumentError naming the argument and the op, raised
before any allocation or kernel call -- never a crash, a hang or garbage.

Here: the window arguments' errors (once for each op) and, over both ops, the
regression tests for malformed inputs that once crashed TensorFlow
(../shared/NOTES.md section 2).  Each op's own errors and regressions are in its
file: tests/test_conv2d_backprop_input.py and
tests/test_depthwise_conv2d_native_backprop_filter.py.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from helpers import bpi, check_error, dwf

import convviz
from convviz import InvalidArgumentError


def test_valid_baselines_run():
    assert bpi().shape == (1, 4, 4, 2)
    assert dwf().shape == (3, 3, 2, 2)


# (changes, exception, fragments the message must contain)
COMMON_WINDOW_ERRORS = [
    (dict(strides=[1, 1, 1]), InvalidArgumentError, ["strides", "4 values", "3"]),
    (dict(strides=[]), InvalidArgumentError, ["strides", "4 values", "0"]),
    (dict(strides=[1, 0, 1, 1]), InvalidArgumentError, ["strides[1]", "between 1", "got 0"]),
    (dict(strides=[1, -2, 1, 1]), InvalidArgumentError, ["strides[1]", "-2"]),
    (dict(strides=[2, 1, 1, 1]), InvalidArgumentError, ["strides", "batch and depth", "[2, 1, 1, 1]"]),
    (dict(strides=[1, 1, 1, 2]), InvalidArgumentError, ["strides", "batch and depth"]),
    (dict(strides=[1, 2**31, 1, 1]), InvalidArgumentError, ["strides[1]", str(2**31)]),
    (dict(strides=[1, 1.0, 1, 1]), TypeError, ["strides[1]", "int", "float"]),
    (dict(strides=[1, True, 1, 1]), TypeError, ["strides[1]", "bool"]),
    (dict(strides=1), TypeError, ["strides", "list"]),
    (dict(strides="1111"), TypeError, ["strides", "str"]),
    (dict(strides=np.ones((2, 2), int)), InvalidArgumentError, ["strides", "1-D"]),
    (dict(strides=np.ones(4)), TypeError, ["strides", "integers", "float64"]),
    (dict(dilations=[1, 0, 1, 1]), InvalidArgumentError, ["dilations[1]", "got 0"]),
    (dict(dilations=[1, 1, 1, 2]), InvalidArgumentError, ["dilations", "batch and depth"]),
    (dict(dilations=[1, 1]), None, []),  # the 2-value spatial form, as tf.nn takes it
    (dict(dilations=[1, 1, 1]), InvalidArgumentError, ["dilations", "4 values", "2 values", "3"]),
    (dict(dilations=[1, 0]), InvalidArgumentError, ["dilations[1]", "got 0"]),
    (dict(padding="same"), InvalidArgumentError, ["padding", "'same'", "did you mean 'SAME'"]),
    (dict(padding="FULL"), InvalidArgumentError, ["padding", "'FULL'", "EXPLICIT"]),
    (dict(padding=None), TypeError, ["padding", "string", "NoneType"]),
    (dict(padding=1), TypeError, ["padding", "int"]),
    (dict(data_format="NCWH"), InvalidArgumentError, ["data_format", "NCWH", "NHWC"]),
    (dict(data_format=4), TypeError, ["data_format", "string"]),
    (dict(explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0]), InvalidArgumentError,
     ["explicit_paddings", "must be empty", "'SAME'"]),
    (dict(padding="EXPLICIT"), InvalidArgumentError, ["explicit_paddings", "8 values", "got 0"]),
    (dict(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1, 1, 1]), InvalidArgumentError,
     ["explicit_paddings", "8 values", "got 6"]),
    (dict(padding="EXPLICIT", explicit_paddings=[0, 0, -1, 1, 1, 1, 0, 0]), InvalidArgumentError,
     ["explicit_paddings[2]", "-1"]),
    (dict(padding="EXPLICIT", explicit_paddings=[1, 0, 1, 1, 1, 1, 0, 0]), InvalidArgumentError,
     ["explicit_paddings", "batch and depth", "must be 0"]),
    (dict(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 1]), InvalidArgumentError,
     ["explicit_paddings", "batch and depth"]),
    (dict(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1, 1, 1.5, 0, 0]), TypeError,
     ["explicit_paddings[5]", "float"]),
    (dict(n_threads=0), InvalidArgumentError, ["n_threads", "between 1 and 1024", "got 0"]),
    (dict(n_threads=10**6), InvalidArgumentError, ["n_threads", "1024", "1000000"]),
    (dict(n_threads=-1), InvalidArgumentError, ["n_threads", "-1"]),
    (dict(n_threads=2.0), TypeError, ["n_threads", "int", "float"]),
    (dict(explicit_paddings=None), None, []),
    (dict(n_threads="2"), TypeError, ["n_threads", "str"]),
]


@pytest.mark.parametrize("changes, exc, fragments", COMMON_WINDOW_ERRORS, ids=lambda v: repr(v)[:50])
def test_window_errors_input_gradient(changes, exc, fragments):
    check_error(bpi, changes, exc, ["conv2d_backprop_input"] + fragments)


@pytest.mark.parametrize("changes, exc, fragments", COMMON_WINDOW_ERRORS, ids=lambda v: repr(v)[:50])
def test_window_errors_filter_gradient(changes, exc, fragments):
    check_error(dwf, changes, exc, ["depthwise_conv2d_native_backprop_filter"] + fragments)


# -- regressions for inputs that crashed TensorFlow --------------------------------
def test_empty_strides_do_not_abort():
    """strides=[] aborted the TensorFlow process (tensorflow#59059 and others)."""
    with pytest.raises(InvalidArgumentError, match="strides must have 4 values"):
        bpi(strides=[])
    with pytest.raises(InvalidArgumentError, match="strides must have 4 values"):
        dwf(strides=[])
    with pytest.raises(InvalidArgumentError, match="dilations must have 4 values"):
        bpi(dilations=[])


def test_two_value_strides_and_dilations_mean_height_and_width():
    """strides=[sh, sw] and dilations=[dh, dw] are the spatial forms of [1, sh, sw, 1] (NHWC) and [1, 1, sh, sw] (NCHW)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 2, 2, 3))
    dy = rng.standard_normal((1, 3, 2, 3))
    long = convviz.conv2d_backprop_input([1, 7, 6, 2], w, dy, [1, 3, 4, 1], "SAME", dilations=[1, 2, 1, 1])
    short = convviz.conv2d_backprop_input([1, 7, 6, 2], w, dy, [3, 4], "SAME", dilations=[2, 1])
    np.testing.assert_array_equal(long, short)
    nchw = convviz.conv2d_backprop_input([1, 2, 7, 6], w, dy.transpose(0, 3, 1, 2), [3, 4], "SAME",
                                         data_format="NCHW", dilations=[2, 1])
    np.testing.assert_array_equal(nchw, long.transpose(0, 3, 1, 2))
    x = rng.standard_normal((1, 7, 6, 2))
    dyd = rng.standard_normal((1, 3, 2, 2))
    np.testing.assert_array_equal(
        convviz.depthwise_conv2d_native_backprop_filter(x, [3, 2, 2, 1], dyd, [1, 3, 4, 1], "SAME"),
        convviz.depthwise_conv2d_native_backprop_filter(x, [3, 2, 2, 1], dyd, [3, 4], "SAME"))


@pytest.mark.parametrize("sizes", [[[1, 5], [5, 2]], [[1, 5, 5, 2]], [1, [5], 5, 2], [np.array([1, 5]), 5]])
def test_nested_input_sizes_is_a_shape_error_naming_input_sizes(sizes):
    with pytest.raises(InvalidArgumentError, match="input_sizes must be a flat list of ints"):
        bpi(input_sizes=sizes)
    with pytest.raises(InvalidArgumentError, match="filter_sizes must be a flat list of ints"):
        dwf(filter_sizes=sizes)


def test_malformed_inputs_never_crash_the_interpreter():
    """Run a batch of malformed calls in a child process: it must exit normally."""
    code = r"""
import numpy as np, convviz
bad = [
    lambda: convviz.conv2d_backprop_input([], np.ones((1,1,1,1), np.float32), np.ones((1,1,1,1), np.float32), [], "SAME"),
    lambda: convviz.conv2d_backprop_input([1,1,1,1], np.ones(()), np.ones(()), [1,1,1,1], "VALID"),
    lambda: convviz.conv2d_backprop_input([2**31-1]*4, np.ones((1,1,1,1)), np.ones((1,1,1,1)), [1]*4, "VALID"),
    lambda: convviz.depthwise_conv2d_native_backprop_filter(np.ones((1,1,1,1)), [2**31-1]*4, np.ones((1,1,1,1)), [1]*4, "VALID"),
    lambda: convviz.depthwise_conv2d_native_backprop_filter(np.ones((1,1,1,1)), [], np.ones((1,1,1,1)), [1]*4, "VALID"),
    lambda: convviz.conv2d_backprop_input([1,3,3,1], np.ones((3,3,1,1)), np.ones((1,1,1,1)), [1,2**31-1,2**31-1,1], "VALID", dilations=[1,2**31-1,2**31-1,1]),
]
for call in bad:
    try:
        call()
    except (ValueError, TypeError):
        pass
    else:
        raise SystemExit("a malformed call returned")
print("survived")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "survived" in result.stdout
