"""depthwise_conv2d_native_backprop_filter (TensorFlow ``DepthwiseConv2dNativeBackpropFilter``):
what is special about it.

tests/test_every_op.py already runs its record against the float64 reference
(every dtype, layout, padding, strides, dilations), across thread counts and
SIMD variants, with NaN and Inf, and tests/test_depthwise_conv2d_native.py
checks the adjoint identities of the three depthwise ops; here: the
register-blocked rows per instruction set (3x3 and 5x5, strides and dilations
1-2, wide rows with full tiles), random geometries against the reference, its
own errors (with the malformed inputs that once troubled TensorFlow), and
TensorFlow / PyTorch when installed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import (CROSSCHECK_CASES, DY, F32, X, assert_close_to_reference, check_error, dwf, four_values,
                     random_array, reference_pair_dwf, tf_output_shape, torch_pads, window_geometry, windows)
from hypothesis import given
from hypothesis import strategies as st

import convviz
from convviz import InvalidArgumentError, _openmp_info
from convviz._backends import cpu

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ISAS = _openmp_info.available_isas()


# -- the kernels, per instruction set ------------------------------------------
FILTER_SHAPES = [  # (K, stride, dilation, width, channels, multiplier)
    (3, 1, 1, 37, 32, 1), (3, 2, 1, 41, 16, 1), (3, 1, 2, 29, 48, 1), (3, 2, 2, 33, 16, 1),
    (5, 1, 1, 27, 32, 1), (5, 2, 1, 31, 16, 1), (3, 1, 1, 30, 5, 1), (3, 1, 1, 26, 16, 2),
    (7, 1, 1, 20, 16, 1), (1, 1, 1, 19, 16, 1), (4, 3, 1, 23, 24, 1),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", FILTER_SHAPES, ids=lambda s: "k{}s{}d{}w{}c{}m{}".format(*s))
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_filter_gradient_kernels(isa, shape, padding, rng):
    k, s, d, w, c, m = shape
    kwargs = dict(strides=[1, s, s, 1], padding=padding, dilations=[1, d, d, 1])
    x = random_array(rng, (2, 9, w, c), "float32")
    g = convviz.ConvGeometry.build(batch=2, input_hw=(9, w), in_channels=c, out_channels=c * m,
                                   kernel_hw=(k, k), strides=(s, s), dilations=(d, d), padding=padding,
                                   depthwise=True)
    dy = random_array(rng, g.output_shape, "float32")
    exact, bound = reference_pair_dwf(x, [k, k, c, m], dy, **kwargs)
    with cpu.use_isa(isa):
        got = convviz.depthwise_conv2d_native_backprop_filter(x, [k, k, c, m], dy, **kwargs)
        got64 = convviz.depthwise_conv2d_native_backprop_filter(x.astype(np.float64), [k, k, c, m],
                                                                dy.astype(np.float64), **kwargs)
        nchw = convviz.depthwise_conv2d_native_backprop_filter(
            x.transpose(0, 3, 1, 2), [k, k, c, m], dy.transpose(0, 3, 1, 2),
            four_values("NCHW", s, s), padding, data_format="NCHW", dilations=four_values("NCHW", d, d))
        x16, dy16 = x.astype(np.float16), dy.astype(np.float16)
        nchw16 = convviz.depthwise_conv2d_native_backprop_filter(
            x16.transpose(0, 3, 1, 2), [k, k, c, m], dy16.transpose(0, 3, 1, 2),
            four_values("NCHW", s, s), padding, data_format="NCHW", dilations=four_values("NCHW", d, d))
    exact16, bound16 = reference_pair_dwf(x16, [k, k, c, m], dy16, **kwargs)
    assert_close_to_reference(nchw16, exact16, bound16, "float16")
    assert_close_to_reference(got, exact, bound, "float32")
    assert_close_to_reference(got64, exact, bound, "float64")
    assert_close_to_reference(nchw, exact, bound, "float32")


# -- random geometries, dtypes and layouts against the float64 reference --------
@given(window=windows(), batch=st.integers(0, 2), h=st.integers(1, 9), w=st.integers(1, 24),
       kh=st.integers(1, 5), kw=st.integers(1, 5), channels=st.integers(1, 20),
       multiplier=st.integers(1, 3), dtype=st.sampled_from(["float16", "bfloat16", "float32", "float64"]),
       seed=st.integers(0, 2**32 - 1), isa=st.sampled_from(ISAS))
def test_depthwise_filter_gradient_matches_reference(window, batch, h, w, kh, kw, channels,
                                                     multiplier, dtype, seed, isa):
    kwargs, raw = window
    rng = np.random.default_rng(seed)
    g = window_geometry(raw, batch, (h, w), channels, channels * multiplier, (kh, kw), depthwise=True)
    x = random_array(rng, g.input_shape, dtype)
    dy = random_array(rng, g.output_shape, dtype)
    sizes = [kh, kw, channels, multiplier]
    with cpu.use_isa(isa):
        got = convviz.depthwise_conv2d_native_backprop_filter(x, sizes, dy, **kwargs)
    exact, bound = reference_pair_dwf(x, sizes, dy, **kwargs)
    assert_close_to_reference(got, exact, bound, dtype)


# -- its own errors (the window arguments' errors, shared with the input gradient,
# are in tests/test_errors.py) ------------------------------------------------------
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
    check_error(dwf, changes, exc, fragments)


# regressions for inputs that troubled TensorFlow
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


def test_empty_out_backprop_in_filter_gradient_gives_zeros_not_garbage():
    """TensorFlow returned uninitialised memory here (PR #126484)."""
    for _ in range(20):
        dw = convviz.depthwise_conv2d_native_backprop_filter(
            np.ones((0, 4, 4, 2), F32), [3, 3, 2, 2], np.ones((0, 4, 4, 4), F32), [1, 1, 1, 1], "SAME")
        assert dw.shape == (3, 3, 2, 2) and dw.dtype == F32 and not dw.any()
    dw = convviz.depthwise_conv2d_native_backprop_filter(
        np.ones((1, 2, 2, 2), F32), [3, 3, 2, 2], np.ones((1, 0, 0, 4), F32), [1, 1, 1, 1], "VALID")
    assert dw.shape == (3, 3, 2, 2) and not dw.any()


# -- peers, when installed -----------------------------------------------------
@pytest.mark.parametrize("case", [c for c in CROSSCHECK_CASES if c[7] == c[8]])
def test_filter_gradient_agrees_with_tensorflow(case, rng):
    tf = pytest.importorskip("tensorflow")
    n, h, w, channels, multiplier, kh, kw, s, _, padding, pads = case
    x = rng.standard_normal((n, h, w, channels)).astype(np.float32)
    dy = rng.standard_normal(tf_output_shape(n, h, w, channels * multiplier, kh, kw, s, s, padding, pads))
    dy = dy.astype(np.float32)
    explicit = [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0] if pads else []
    kwargs = dict(strides=[1, s, s, 1], padding=padding, explicit_paddings=explicit)
    expected = tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
        input=x, filter_sizes=[kh, kw, channels, multiplier], out_backprop=dy, **kwargs).numpy()
    got = convviz.depthwise_conv2d_native_backprop_filter(x, [kh, kw, channels, multiplier], dy, **kwargs)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("case", CROSSCHECK_CASES)
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
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(xt, torch_pads(g)), weight, stride=(sh, sw),
                                   dilation=dilation, groups=channels)
    y.backward(torch.from_numpy(dy.transpose(0, 3, 1, 2).copy()))
    expected = weight.grad.numpy().reshape(channels, multiplier, kh, kw).transpose(2, 3, 0, 1)
    explicit = [0, 0, *pads, 0, 0] if pads else []
    got = convviz.depthwise_conv2d_native_backprop_filter(
        x, [kh, kw, channels, multiplier], dy, [1, sh, sw, 1], padding, explicit,
        dilations=[1, dilation, dilation, 1])
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-11)
