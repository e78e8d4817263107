"""Property tests across ops: on random windows, NCHW gives NHWC's results transposed,
bit for bit, for the input and the depthwise filter gradient.

Each op's own property test (random geometry, dtypes and layouts against the
float64 reference) is in its file: tests/test_conv2d_backprop_input.py and
tests/test_depthwise_conv2d_native_backprop_filter.py.
"""

from __future__ import annotations

import numpy as np
from helpers import window_geometry, windows
from hypothesis import assume, given
from hypothesis import strategies as st

import convviz


@given(window=windows(), h=st.integers(2, 8), w=st.integers(2, 8), kh=st.integers(1, 3),
       kw=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_layouts_agree(window, h, w, kh, kw, seed):
    """NCHW is NHWC transposed, bit for bit, for both ops."""
    kwargs, raw = window
    rng = np.random.default_rng(seed)
    nhwc = dict(kwargs)
    if raw["data_format"] == "NCHW":
        return  # draw the NHWC variant only; the NCHW one is derived below
    g = window_geometry(raw, 2, (h, w), 3, 4, (kh, kw))
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

    dgeom = window_geometry(raw, 2, (h, w), 3, 6, (kh, kw), depthwise=True)
    x = rng.standard_normal(dgeom.input_shape).astype(np.float32)
    dy = rng.standard_normal(dgeom.output_shape).astype(np.float32)
    a = convviz.depthwise_conv2d_native_backprop_filter(x, [kh, kw, 3, 2], dy, **nhwc)
    b = convviz.depthwise_conv2d_native_backprop_filter(
        x.transpose(0, 3, 1, 2), [kh, kw, 3, 2], dy.transpose(0, 3, 1, 2), **nchw)
    np.testing.assert_array_equal(a, b)
