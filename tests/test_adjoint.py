"""The gradients are adjoints of the forward convolutions.

For any x, W and dy:
  <conv2d(x, W), dy>           == <x, conv2d_backprop_input(dy, W)>
  <depthwise_conv2d(x, W), dy> == <W, depthwise_conv2d_native_backprop_filter(x, dy)>
with the small float64 forward references in convviz.reference.  This checks the
kernels against the *forward* op, independently of the backward reference.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import four_values
from hypothesis import given
from hypothesis import strategies as st

import convviz
from convviz import reference


@st.composite
def conv_cases(draw):
    data_format = draw(st.sampled_from(["NHWC", "NCHW"]))
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
    pads = [draw(st.integers(0, 2)) for _ in range(4)]
    explicit = []
    if padding == "EXPLICIT":
        explicit = ([0, 0, *pads, 0, 0] if data_format == "NHWC" else [0, 0, 0, 0, *pads])
    return dict(
        data_format=data_format, padding=padding, explicit_paddings=explicit,
        strides=four_values(data_format, draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        dilations=four_values(data_format, draw(st.integers(1, 2)), draw(st.integers(1, 2))),
    ), dict(h=draw(st.integers(3, 9)), w=draw(st.integers(3, 9)), kh=draw(st.integers(1, 3)),
            kw=draw(st.integers(1, 3)), groups=draw(st.integers(1, 2)), seed=draw(st.integers(0, 10**6)))


def _input_shape(data_format, n, h, w, c):
    return (n, h, w, c) if data_format == "NHWC" else (n, c, h, w)


@given(conv_cases())
def test_input_gradient_is_adjoint_of_conv2d(case):
    kwargs, p = case
    rng = np.random.default_rng(p["seed"])
    cin, cout = 2 * p["groups"], 3 * p["groups"]
    x = rng.standard_normal(_input_shape(kwargs["data_format"], 2, p["h"], p["w"], cin))
    w = rng.standard_normal((p["kh"], p["kw"], 2, cout))
    y = reference.conv2d(x, w, **kwargs)
    dy = rng.standard_normal(y.shape)
    dx = convviz.conv2d_backprop_input(list(x.shape), w, dy, **kwargs)
    lhs, rhs = np.vdot(y, dy), np.vdot(x, dx)
    assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-10)


@given(conv_cases(), st.integers(1, 3))
def test_filter_gradient_is_adjoint_of_depthwise_conv2d(case, multiplier):
    kwargs, p = case
    rng = np.random.default_rng(p["seed"])
    channels = 3
    x = rng.standard_normal(_input_shape(kwargs["data_format"], 2, p["h"], p["w"], channels))
    w = rng.standard_normal((p["kh"], p["kw"], channels, multiplier))
    y = reference.depthwise_conv2d_native(x, w, **kwargs)
    dy = rng.standard_normal(y.shape)
    dw = convviz.depthwise_conv2d_native_backprop_filter(x, list(w.shape), dy, **kwargs)
    assert np.vdot(y, dy) == pytest.approx(np.vdot(w, dw), rel=1e-10, abs=1e-10)


def test_input_gradient_matches_finite_differences():
    """d<conv2d(x, W), dy>/dx by central differences equals the input gradient."""
    rng = np.random.default_rng(7)
    kwargs = dict(strides=[1, 2, 2, 1], padding="SAME", dilations=[1, 1, 2, 1])
    x = rng.standard_normal((1, 6, 7, 2))
    w = rng.standard_normal((3, 2, 2, 3))
    dy = rng.standard_normal(reference.conv2d(x, w, **kwargs).shape)
    dx = convviz.conv2d_backprop_input(list(x.shape), w, dy, **kwargs)
    numeric = np.zeros_like(x)
    eps = 1e-6
    for index in np.ndindex(x.shape):
        bump = np.zeros_like(x)
        bump[index] = eps
        numeric[index] = (np.vdot(reference.conv2d(x + bump, w, **kwargs), dy)
                          - np.vdot(reference.conv2d(x - bump, w, **kwargs), dy)) / (2 * eps)
    np.testing.assert_allclose(dx, numeric, rtol=1e-6, atol=1e-8)
