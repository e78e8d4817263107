"""Every error path: a clear TypeError / InvalidArgumentError naming the argument,
raised before any allocation or kernel call -- never a crash, a hang or garbage.

Includes a regression test for each malformed input that once crashed
TensorFlow (../shared/NOTES.md section 2).
"""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import convviz
from convviz import InvalidArgumentError

F32 = np.float32
FILTER = np.ones((3, 3, 2, 4), F32)
DY = np.ones((1, 4, 4, 4), F32)
X = np.ones((1, 4, 4, 2), F32)
BPI = dict(input_sizes=[1, 4, 4, 2], filter=FILTER, out_backprop=DY, strides=[1, 1, 1, 1], padding="SAME")
DWF = dict(input=X, filter_sizes=[3, 3, 2, 2], out_backprop=DY, strides=[1, 1, 1, 1], padding="SAME")


def bpi(**changes):
    return convviz.conv2d_backprop_input(**{**BPI, **changes})


def dwf(**changes):
    return convviz.depthwise_conv2d_native_backprop_filter(**{**DWF, **changes})


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


def _check(call, changes, exc, fragments):
    if exc is None:  # accepted: None is the same as an empty list
        call(**changes)
        return
    with pytest.raises(exc) as info:
        call(**changes)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    if exc is InvalidArgumentError:
        assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("changes, exc, fragments", COMMON_WINDOW_ERRORS, ids=lambda v: repr(v)[:50])
def test_window_errors_input_gradient(changes, exc, fragments):
    _check(bpi, changes, exc, ["conv2d_backprop_input"] + fragments)


@pytest.mark.parametrize("changes, exc, fragments", COMMON_WINDOW_ERRORS, ids=lambda v: repr(v)[:50])
def test_window_errors_filter_gradient(changes, exc, fragments):
    _check(dwf, changes, exc, ["depthwise_conv2d_native_backprop_filter"] + fragments)


BPI_ERRORS = [
    # dtypes
    (dict(filter=FILTER.astype(np.complex64), out_backprop=DY.astype(np.complex64)), TypeError,
     ["filter", "dtypes", "complex64"]),
    (dict(filter=FILTER.astype(np.int64), out_backprop=DY.astype(np.int64)), TypeError, ["filter", "int64"]),
    (dict(filter=FILTER.astype(np.uint8), out_backprop=DY.astype(np.uint8)), TypeError, ["filter", "uint8"]),
    (dict(filter=FILTER.astype(bool), out_backprop=DY.astype(bool)), TypeError, ["filter", "bool"]),
    (dict(out_backprop=DY.astype(np.float64)), TypeError,
     ["out_backprop", "same dtype as filter", "float32", "float64"]),
    (dict(out_backprop=DY.astype(ml_dtypes.bfloat16)), TypeError, ["out_backprop", "bfloat16"]),
    (dict(filter="abc"), TypeError, ["filter", "<U3"]),
    (dict(filter=None), TypeError, ["filter", "object"]),
    (dict(filter=[[1.0, 2.0], [3.0]]), InvalidArgumentError, ["filter", "rectangular"]),
    (dict(out_backprop=[[1.0, 2.0], [3.0]]), InvalidArgumentError, ["out_backprop", "rectangular"]),
    # shapes
    (dict(filter=np.float32(1.0)), InvalidArgumentError, ["filter", "4-D", "0-D"]),
    (dict(filter=np.ones((3, 3, 2), F32)), InvalidArgumentError, ["filter", "4-D", "(3, 3, 2)"]),
    (dict(out_backprop=np.ones((4, 4, 4), F32)), InvalidArgumentError, ["out_backprop", "4-D", "3-D"]),
    (dict(out_backprop=np.ones((1, 3, 3, 4), F32)), InvalidArgumentError,
     ["out_backprop", "(1, 4, 4, 4)", "(1, 3, 3, 4)"]),
    (dict(out_backprop=np.ones((1, 4, 4, 5), F32)), InvalidArgumentError, ["out_backprop", "(1, 4, 4, 5)"]),
    (dict(out_backprop=np.ones((2, 4, 4, 4), F32)), InvalidArgumentError, ["out_backprop", "(2, 4, 4, 4)"]),
    (dict(filter=np.ones((0, 3, 2, 4), F32)), InvalidArgumentError, ["filter", "empty", "(0, 3, 2, 4)"]),
    (dict(filter=np.ones((3, 3, 0, 4), F32)), InvalidArgumentError, ["filter", "empty"]),
    (dict(filter=np.ones((3, 3, 2, 0), F32)), InvalidArgumentError, ["filter", "empty"]),
    (dict(filter=np.ones((3, 3, 3, 4), F32)), InvalidArgumentError,
     ["input depth (2", "multiple", "filter.shape[2] = 3"]),
    (dict(input_sizes=[1, 4, 4, 0]), InvalidArgumentError, ["input depth (0"]),
    (dict(input_sizes=[1, 4, 4, 6], filter=np.ones((3, 3, 2, 4), F32)), InvalidArgumentError,
     ["out-depth", "filter.shape[3] = 4", "groups (3"]),
    # input_sizes
    (dict(input_sizes=[1, 4, 4]), InvalidArgumentError, ["input_sizes", "4 values", "2 values", "got 3"]),
    (dict(input_sizes=[]), InvalidArgumentError, ["input_sizes", "got 0"]),
    (dict(input_sizes=[1, 4, 4, 2, 1]), InvalidArgumentError, ["input_sizes", "got 5"]),
    (dict(input_sizes=[1, -4, 4, 2]), InvalidArgumentError, ["input_sizes[1]", "-4"]),
    (dict(input_sizes=[1, 4.0, 4, 2]), TypeError, ["input_sizes[1]", "float"]),
    (dict(input_sizes=np.array([1.0, 4, 4, 2])), TypeError, ["input_sizes", "integers"]),
    (dict(input_sizes=np.array([[1, 4], [4, 2]])), InvalidArgumentError, ["input_sizes", "1-D", "(2, 2)"]),
    (dict(input_sizes=4), TypeError, ["input_sizes", "list"]),
    (dict(input_sizes=None), TypeError, ["input_sizes", "NoneType"]),
    (dict(input_sizes=[1, 2**31, 4, 2]), InvalidArgumentError, ["input_sizes[1]", "2147483647"]),
]


@pytest.mark.parametrize("changes, exc, fragments", BPI_ERRORS, ids=lambda v: repr(v)[:50])
def test_input_gradient_errors(changes, exc, fragments):
    _check(bpi, changes, exc, fragments)


DWF_ERRORS = [
    (dict(input=X.astype(np.int32), out_backprop=DY.astype(np.int32)), TypeError,
     ["input", "float16, bfloat16, float32, float64", "int32"]),
    (dict(input=X.astype(np.complex128), out_backprop=DY.astype(np.complex128)), TypeError, ["complex128"]),
    (dict(out_backprop=DY.astype(np.float16)), TypeError, ["out_backprop", "same dtype as input", "float16"]),
    (dict(input="x"), TypeError, ["input"]),
    (dict(input=np.ones((4, 4, 2), F32)), InvalidArgumentError, ["input", "4-D", "3-D"]),
    (dict(out_backprop=np.ones((1, 4, 4), F32)), InvalidArgumentError, ["out_backprop", "4-D"]),
    (dict(filter_sizes=[3, 3, 2]), InvalidArgumentError, ["filter_sizes", "4 values", "got 3"]),
    (dict(filter_sizes=[3, 3, 2, 0]), InvalidArgumentError, ["filter_sizes[3]", "got 0"]),
    (dict(filter_sizes=[0, 3, 2, 2]), InvalidArgumentError, ["filter_sizes[0]", "got 0"]),
    (dict(filter_sizes=[-3, 3, 2, 2]), InvalidArgumentError, ["filter_sizes[0]", "-3"]),
    (dict(filter_sizes=[3, 3, 3, 2]), InvalidArgumentError, ["filter_sizes[2]", "input depth (2)", "got 3"]),
    (dict(filter_sizes=[3, 3, 2, 1]), InvalidArgumentError, ["out_backprop", "(1, 4, 4, 2)", "(1, 4, 4, 4)"]),
    (dict(filter_sizes=[3, 3.0, 2, 2]), TypeError, ["filter_sizes[1]", "float"]),
    (dict(filter_sizes="3322"), TypeError, ["filter_sizes"]),
    (dict(out_backprop=np.ones((1, 2, 2, 4), F32)), InvalidArgumentError,
     ["out_backprop", "(1, 4, 4, 4)", "(1, 2, 2, 4)"]),
]


@pytest.mark.parametrize("changes, exc, fragments", DWF_ERRORS, ids=lambda v: repr(v)[:50])
def test_filter_gradient_errors(changes, exc, fragments):
    _check(dwf, changes, exc, fragments)


# -- regressions for inputs that crashed TensorFlow --------------------------------
def test_cve_2021_29525_division_by_zero_is_an_error():
    """Zero-sized filter depth once divided by zero inside TensorFlow."""
    with pytest.raises(InvalidArgumentError, match="filter must not be empty"):
        convviz.conv2d_backprop_input([0, 0, 0, 0], np.ones((0, 0, 0, 0), F32),
                                      np.ones((0, 0, 0, 0), F32), [1, 1, 1, 1], "VALID")
    with pytest.raises(InvalidArgumentError, match="filter must not be empty"):
        convviz.conv2d_backprop_input([1, 4, 4, 0], np.ones((3, 3, 0, 4), F32), DY, [1, 1, 1, 1], "SAME")


def test_cve_2022_35999_empty_out_backprop():
    """Empty out_backprop crashed TensorFlow's CPU and GPU kernels."""
    with pytest.raises(InvalidArgumentError, match=r"out_backprop must have shape \(3, 1, 1, 1\)"):
        convviz.conv2d_backprop_input([3, 1, 1, 1], np.ones((1, 1, 1, 1), F32),
                                      np.ones((3, 1, 0, 1), F32), [1, 1, 1, 1], "SAME")
    # When the empty shape is the right one, the gradient is zeros.
    dx = convviz.conv2d_backprop_input([3, 1, 0, 1], np.ones((1, 1, 1, 1), F32),
                                       np.ones((3, 1, 0, 1), F32), [1, 1, 1, 1], "SAME")
    assert dx.shape == (3, 1, 0, 1)


def test_cve_2021_41209_empty_filter():
    for shape in [(0, 3, 2, 4), (3, 0, 2, 4), (0, 0, 0, 0)]:
        with pytest.raises(InvalidArgumentError, match="filter must not be empty"):
            convviz.conv2d_backprop_input([1, 4, 4, 2], np.ones(shape, F32), DY, [1, 1, 1, 1], "SAME")


def test_huge_filter_sizes_do_not_overflow():
    """filter_sizes of huge values overflowed TensorFlow's shape arithmetic."""
    big = 2**31 - 1
    with pytest.raises(InvalidArgumentError, match="GiB"):
        convviz.depthwise_conv2d_native_backprop_filter(
            np.ones((0, 4, 4, 2), F32), [big, big, 2, 1], np.ones((0, 4, 4, 2), F32),
            [1, 1, 1, 1], "SAME")
    with pytest.raises(InvalidArgumentError, match=r"filter_sizes\[0\]"):
        convviz.depthwise_conv2d_native_backprop_filter(X, [2**40, 3, 2, 2], DY, [1] * 4, "SAME")
    with pytest.raises(InvalidArgumentError, match=r"filter_sizes\[3\]"):
        convviz.depthwise_conv2d_native_backprop_filter(X, [3, 3, 2, 2**63], DY, [1] * 4, "SAME")


def test_absurd_input_sizes_are_refused_before_allocating():
    """A result that cannot fit in memory is refused with its size, not attempted."""
    # A zero-stride view has the right shape without occupying any memory.
    huge_dy = np.broadcast_to(F32(1), (1, 10**7, 10**7, 4))
    with pytest.raises(InvalidArgumentError, match=r"input gradient of shape \(1, 10000000, 10000000, 2\)"
                                                   r" would need .* GiB"):
        convviz.conv2d_backprop_input([1, 10**7, 10**7, 2], FILTER, huge_dy, [1, 1, 1, 1], "SAME")
    # Without such an out_backprop the shape check already refuses the call.
    with pytest.raises(InvalidArgumentError, match="out_backprop must have shape"):
        convviz.conv2d_backprop_input([1, 10**7, 10**7, 2], FILTER, DY, [1, 1, 1, 1], "SAME")
    # An empty batch needs no memory at all: that is a valid, empty result.
    empty = convviz.conv2d_backprop_input([0, 10**7, 10**7, 2], FILTER,
                                          np.ones((0, 10**7, 10**7, 4), F32), [1, 1, 1, 1], "SAME")
    assert empty.shape == (0, 10**7, 10**7, 2)


def test_empty_strides_do_not_abort():
    """strides=[] aborted the TensorFlow process (tensorflow#59059 and others)."""
    with pytest.raises(InvalidArgumentError, match="strides must have 4 values"):
        bpi(strides=[])
    with pytest.raises(InvalidArgumentError, match="strides must have 4 values"):
        dwf(strides=[])
    with pytest.raises(InvalidArgumentError, match="dilations must have 4 values"):
        bpi(dilations=[])


def test_scalar_filter_is_an_error():
    with pytest.raises(InvalidArgumentError, match="filter must be 4-D"):
        bpi(filter=2.0)


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


def test_three_element_input_sizes_is_an_error():
    with pytest.raises(InvalidArgumentError, match="input_sizes must have 4 values"):
        bpi(input_sizes=[4, 4, 2])


def test_empty_out_backprop_in_filter_gradient_gives_zeros_not_garbage():
    """TensorFlow returned uninitialised memory here (PR #126484)."""
    for _ in range(20):
        dw = convviz.depthwise_conv2d_native_backprop_filter(
            np.ones((0, 4, 4, 2), F32), [3, 3, 2, 2], np.ones((0, 4, 4, 4), F32), [1, 1, 1, 1], "SAME")
        assert dw.shape == (3, 3, 2, 2) and dw.dtype == F32 and not dw.any()
    dw = convviz.depthwise_conv2d_native_backprop_filter(
        np.ones((1, 2, 2, 2), F32), [3, 3, 2, 2], np.ones((1, 0, 0, 4), F32), [1, 1, 1, 1], "VALID")
    assert dw.shape == (3, 3, 2, 2) and not dw.any()


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
