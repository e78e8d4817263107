"""Helpers shared by the tests: dtypes, random data, comparison with the reference,
window arguments, the random windows of the property tests, the calls of the error
tests and the cases of the TensorFlow / PyTorch cross-checks."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import strategies as st

import convviz
from convviz import InvalidArgumentError, reference
from convviz.geometry import ConvGeometry

DTYPES = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "int32": np.dtype(np.int32),
}

# Relative to the magnitude bound (the op applied to |inputs|): float32/float64
# accumulation error plus one final rounding for the half types.
RTOL = {"float64": 1e-13, "float32": 1e-5, "float16": 1.5e-3, "bfloat16": 1e-2, "int32": 0.0}


def random_array(rng: np.random.Generator, shape, dtype_name: str) -> np.ndarray:
    """Random values that are exactly representable in ``dtype_name``."""
    if dtype_name == "int32":
        return rng.integers(-4, 5, size=shape).astype(np.int32)
    return rng.standard_normal(shape).astype(DTYPES[dtype_name])


def assert_close_to_reference(got: np.ndarray, exact: np.ndarray, bound: np.ndarray, dtype_name: str) -> None:
    """Check ``got`` against the float64 ``exact`` result, elementwise.

    ``bound`` is the same op applied to the absolute values of the inputs: the
    sum of |terms| per element, which scales any rounding error.
    """
    assert got.dtype == DTYPES[dtype_name], (got.dtype, dtype_name)
    assert got.shape == exact.shape
    if dtype_name == "int32":
        np.testing.assert_array_equal(got, exact.astype(np.int64).astype(np.int32))
        return
    error = np.abs(got.astype(np.float64) - exact)
    # float16 results below its normal range round to multiples of 2**-24.
    allowed = RTOL[dtype_name] * bound + (2.0**-25 if dtype_name == "float16" else 1e-300)
    worst = np.argmax(error - allowed) if error.size else 0
    assert np.all(error <= allowed), (
        f"{dtype_name}: max excess at {np.unravel_index(worst, error.shape)}: "
        f"|got-exact|={error.flat[worst]:.3g} > {allowed.flat[worst]:.3g}"
    )


def reference_pair_bpi(input_sizes, filt, dy, **kwargs):
    """(exact, bound) for conv2d_backprop_input from the float64 reference."""
    f64, d64 = filt.astype(np.float64), dy.astype(np.float64)
    exact = reference.conv2d_backprop_input(input_sizes, f64, d64, **kwargs)
    bound = reference.conv2d_backprop_input(input_sizes, np.abs(f64), np.abs(d64), **kwargs)
    return exact, bound


def reference_pair_dwf(x, filter_sizes, dy, **kwargs):
    """(exact, bound) for depthwise_conv2d_native_backprop_filter."""
    x64, d64 = x.astype(np.float64), dy.astype(np.float64)
    exact = reference.depthwise_conv2d_native_backprop_filter(x64, filter_sizes, d64, **kwargs)
    bound = reference.depthwise_conv2d_native_backprop_filter(np.abs(x64), filter_sizes, np.abs(d64), **kwargs)
    return exact, bound



def four_values(data_format, h, w):
    """A window's (h, w) strides or dilations in TensorFlow's 4-value form for ``data_format``."""
    return [1, h, w, 1] if data_format == "NHWC" else [1, 1, h, w]


# -- property tests ---------------------------------------------------------------
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


def window_geometry(raw, batch, hw, cin, cout, khw, groups=1, depthwise=False) -> ConvGeometry:
    """The geometry of a window drawn by ``windows`` (its raw numbers)."""
    return ConvGeometry.build(batch=batch, input_hw=hw, in_channels=cin, out_channels=cout,
                              kernel_hw=khw, strides=raw["strides"], dilations=raw["dilations"],
                              padding=raw["padding"], explicit_paddings=raw["pads"],
                              groups=groups, depthwise=depthwise, data_format=raw["data_format"])


# -- error tests: a valid call of each gradient op, changed one argument at a time ----
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


def check_error(call, changes, exc, fragments):
    """``call(**changes)`` raises ``exc`` with every fragment in its message (``exc`` None: it is accepted)."""
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


# -- cross-checks against TensorFlow and PyTorch (the input and the depthwise filter gradient) --
CROSSCHECK_CASES = [
    # (N, H, W, Cin, Cout, KH, KW, stride_h, stride_w, padding, explicit (t, b, l, r))
    (2, 7, 8, 3, 4, 3, 3, 1, 1, "SAME", None),
    (2, 7, 8, 3, 4, 3, 2, 2, 2, "SAME", None),
    (1, 9, 9, 2, 5, 3, 3, 2, 2, "VALID", None),
    (3, 6, 5, 4, 2, 2, 3, 3, 1, "VALID", None),
    (1, 8, 7, 2, 3, 3, 3, 1, 2, "EXPLICIT", (2, 0, 1, 3)),
    (2, 5, 5, 1, 1, 5, 5, 1, 1, "SAME", None),
]


def tf_output_shape(n, h, w, cout, kh, kw, sh, sw, padding, pads):
    g = convviz.ConvGeometry.build(batch=n, input_hw=(h, w), in_channels=1, out_channels=cout,
                                   kernel_hw=(kh, kw), strides=(sh, sw), dilations=(1, 1),
                                   padding=padding, explicit_paddings=pads or (0, 0, 0, 0))
    return g.output_shape


def torch_pads(g):
    top, bottom, left, right = g.pads
    return (left, right, top, bottom)


# Browser tests: Debian's Chromium (no browser downloads), started as this machine allows
# (no sandbox as root; no background networking: the network is closed).
CHROMIUM = os.environ.get("CONVVIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
