"""Property tests: random geometry, dtypes and layouts against the float64 reference."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st
from helpers import DTYPES, assert_close_to_reference, random_array, reference_pair_bpi, reference_pair_dwf

import convviz
from convviz import _openmp_info
from convviz._backends import cpu
from convviz.geometry import ConvGeometry

ISAS = st.sampled_from(_openmp_info.available_isas())


@st.composite
def windows(draw):
    """Random spatial parameters; returns kwargs (for the op) and raw numbers."""
    data_format = draw(st.sampled_from(["NHWC", "NCHW"]))
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4)) if padding == "EXPLICIT" else (0, 0, 0, 0)

    def four(h, w):
        return [1, h, w, 1] if data_format == "NHWC" else [1, 1, h, w]

    if padding == "EXPLICIT":
        top, bottom, left, right = pads
        explicit = ([0, 0, top, bottom, left, right, 0, 0] if data_format == "NHWC"
                    else [0, 0, 0, 0, top, bottom, left, right])
    else:
        explicit = []
    kwargs = dict(strides=four(sh, sw), padding=padding, explicit_paddings=explicit,
                  data_format=data_format, dilations=four(dh, dw))
    return kwargs, dict(strides=(sh, sw), dilations=(dh, dw), padding=padding, pads=pads,
                        data_format=data_format)


def _geometry(raw, batch, hw, cin, cout, khw, groups=1, depthwise=False) -> ConvGeometry:
    return ConvGeometry.build(batch=batch, input_hw=hw, in_channels=cin, out_channels=cout,
                              kernel_hw=khw, strides=raw["strides"], dilations=raw["dilations"],
                              padding=raw["padding"], explicit_paddings=raw["pads"],
                              groups=groups, depthwise=depthwise, data_format=raw["data_format"])


@given(window=windows(), batch=st.integers(0, 2), h=st.integers(1, 9), w=st.integers(1, 9),
       kh=st.integers(1, 4), kw=st.integers(1, 4), groups=st.integers(1, 3),
       cin_g=st.integers(1, 3), cout_g=st.integers(1, 3),
       dtype=st.sampled_from(list(DTYPES)), two_sizes=st.booleans(),
       seed=st.integers(0, 2**32 - 1), isa=ISAS)
def test_input_gradient_matches_reference(window, batch, h, w, kh, kw, groups, cin_g, cout_g,
                                          dtype, two_sizes, seed, isa):
    kwargs, raw = window
    if two_sizes:
        groups = 1  # with [H, W] sizes the depth comes from the filter: no groups
    rng = np.random.default_rng(seed)
    cin, cout = groups * cin_g, groups * cout_g
    g = _geometry(raw, batch, (h, w), cin, cout, (kh, kw), groups=groups)
    filt = random_array(rng, (kh, kw, cin_g, cout), dtype)
    dy = random_array(rng, g.output_shape, dtype)
    sizes = [h, w] if two_sizes else list(g.input_shape)
    with cpu.use_isa(isa):
        got = convviz.conv2d_backprop_input(sizes, filt, dy, **kwargs)
    exact, bound = reference_pair_bpi(sizes, filt, dy, **kwargs)
    assert got.shape == g.input_shape
    assert_close_to_reference(got, exact, bound, dtype)


@given(window=windows(), batch=st.integers(0, 2), h=st.integers(1, 9), w=st.integers(1, 24),
       kh=st.integers(1, 5), kw=st.integers(1, 5), channels=st.integers(1, 20),
       multiplier=st.integers(1, 3), dtype=st.sampled_from(["float16", "bfloat16", "float32", "float64"]),
       seed=st.integers(0, 2**32 - 1), isa=ISAS)
def test_depthwise_filter_gradient_matches_reference(window, batch, h, w, kh, kw, channels,
                                                     multiplier, dtype, seed, isa):
    kwargs, raw = window
    rng = np.random.default_rng(seed)
    g = _geometry(raw, batch, (h, w), channels, channels * multiplier, (kh, kw), depthwise=True)
    x = random_array(rng, g.input_shape, dtype)
    dy = random_array(rng, g.output_shape, dtype)
    sizes = [kh, kw, channels, multiplier]
    with cpu.use_isa(isa):
        got = convviz.depthwise_conv2d_native_backprop_filter(x, sizes, dy, **kwargs)
    exact, bound = reference_pair_dwf(x, sizes, dy, **kwargs)
    assert_close_to_reference(got, exact, bound, dtype)


@given(window=windows(), h=st.integers(2, 8), w=st.integers(2, 8), kh=st.integers(1, 3),
       kw=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_layouts_agree(window, h, w, kh, kw, seed):
    """NCHW is NHWC transposed, bit for bit, for both ops."""
    kwargs, raw = window
    rng = np.random.default_rng(seed)
    nhwc = dict(kwargs)
    if raw["data_format"] == "NCHW":
        return  # draw the NHWC variant only; the NCHW one is derived below
    g = _geometry(raw, 2, (h, w), 3, 4, (kh, kw))
    assume(g.output_hw[0] > 0 and g.output_hw[1] > 0)
    filt = rng.standard_normal((kh, kw, 3, 4)).astype(np.float32)
    dy = rng.standard_normal(g.output_shape).astype(np.float32)
    nchw = dict(kwargs, data_format="NCHW",
                strides=[1, 1, *raw["strides"]], dilations=[1, 1, *raw["dilations"]])
    if raw["padding"] == "EXPLICIT":
        nchw["explicit_paddings"] = [0, 0, 0, 0, *raw["pads"]]
    a = convviz.conv2d_backprop_input([2, h, w, 3], filt, dy, **nhwc)
    b = convviz.conv2d_backprop_input([2, 3, h, w], filt, dy.transpose(0, 3, 1, 2), **nchw)
    np.testing.assert_array_equal(a, b.transpose(0, 2, 3, 1))

    dgeom = _geometry(raw, 2, (h, w), 3, 6, (kh, kw), depthwise=True)
    x = rng.standard_normal(dgeom.input_shape).astype(np.float32)
    dy = rng.standard_normal(dgeom.output_shape).astype(np.float32)
    a = convviz.depthwise_conv2d_native_backprop_filter(x, [kh, kw, 3, 2], dy, **nhwc)
    b = convviz.depthwise_conv2d_native_backprop_filter(
        x.transpose(0, 3, 1, 2), [kh, kw, 3, 2], dy.transpose(0, 3, 1, 2), **nchw)
    np.testing.assert_array_equal(a, b)
