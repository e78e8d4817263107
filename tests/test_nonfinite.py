"""NaN and infinity land exactly where the float64 reference puts them.

A term is added only for (output cell, tap) pairs that exist: the zeros of a
dilated kernel and of the padding are never multiplied, so a NaN or +Inf in
one filter tap, one out_backprop cell or one input cell reaches exactly the
cells the definition says (NaN * 0 would otherwise spread it: with dilation 2,
a NaN weight once reached 35 input-gradient cells instead of 25).  Every SIMD
variant, dtype, padding, layout, stride and dilation 1-3; the finite cells
still agree with the reference.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import DTYPES, assert_close_to_reference, reference_pair_bpi, reference_pair_dwf

import convviz
from convviz import _openmp_info
from convviz._backends import cpu

ISAS = _openmp_info.available_isas()
K = 3
BATCH, H, W = 1, 7, 29  # VALID with dilation 3 still has an output row
CIN, COUT = 40, 6  # input gradient: wide and narrow channel blocks on every vector width
CHANNELS = 32  # depthwise: rows read in place (NHWC float32/64) and buffered
EXPLICIT = (1, 2, 2, 0)  # top, bottom, left, right
GEOMETRIES = list(itertools.product(["SAME", "VALID", "EXPLICIT"], ["NHWC", "NCHW"], [1, 2, 3], [1, 2, 3]))


def _window(padding, data_format, stride, dilation):
    """Keyword arguments of the ops for one geometry (TensorFlow's 4-value forms)."""
    four = (lambda a: [1, a, a, 1]) if data_format == "NHWC" else (lambda a: [1, 1, a, a])
    kwargs = dict(strides=four(stride), padding=padding, data_format=data_format, dilations=four(dilation))
    if padding == "EXPLICIT":
        top, bottom, left, right = EXPLICIT
        spatial = [top, bottom, left, right]
        kwargs["explicit_paddings"] = ([0, 0] + spatial + [0, 0]) if data_format == "NHWC" else [0, 0, 0, 0] + spatial
    return kwargs


def _output_hw(padding, stride, dilation):
    g = convviz.ConvGeometry.build(batch=BATCH, input_hw=(H, W), in_channels=1, out_channels=1,
                                   kernel_hw=(K, K), strides=(stride, stride), dilations=(dilation, dilation),
                                   padding=padding, explicit_paddings=EXPLICIT)
    return g.output_hw


def _values(rng, shape, dtype):
    """Magnitudes in [0.5, 1] with random signs: no zero, so Inf * value is never NaN by accident."""
    values = rng.uniform(0.5, 1.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return values.astype(DTYPES[dtype])


def _to_layout(nhwc, data_format):
    return nhwc if data_format == "NHWC" else np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))


def _cell(shape, i):
    """A cell that moves over corners, edges and the inside as i runs (NHWC shape)."""
    n, h, w, c = shape
    rows = [0, h - 1, h // 2]
    cols = [0, w - 1, w // 2, 1 % w, max(w - 2, 0)]
    return (i % n, rows[i % len(rows)], cols[(i // len(rows)) % len(cols)], (7 * i) % c)


def _check(got, exact, bound, dtype, what):
    got = np.asarray(got)
    assert got.dtype == DTYPES[dtype]
    wide = got.astype(np.float64)
    for name, test in (("NaN", np.isnan), ("+Inf", np.isposinf), ("-Inf", np.isneginf)):
        mismatch = test(wide) != test(exact)
        assert not mismatch.any(), (
            f"{what}: {name} at {int(test(wide).sum())} cells, reference {int(test(exact).sum())}; "
            f"first difference at {tuple(int(i) for i in np.argwhere(mismatch)[0])}")
    finite = np.isfinite(exact)
    assert finite.any(), what
    assert_close_to_reference(got[finite], exact[finite], bound[finite], dtype)


@pytest.mark.parametrize("value", [np.nan, np.inf], ids=["nan", "inf"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("where", ["filter", "out_backprop"])
def test_input_gradient(where, dtype, value):
    rng = np.random.default_rng(1)
    for i, (padding, data_format, stride, dilation) in enumerate(GEOMETRIES):
        oh, ow = _output_hw(padding, stride, dilation)
        filt = _values(rng, (K, K, CIN, COUT), dtype)
        dy = _values(rng, (BATCH, oh, ow, COUT), dtype)
        if where == "filter":
            filt[(i % K, (i // K) % K, (5 * i) % CIN, i % COUT)] = value
        else:
            dy[_cell(dy.shape, i)] = value
        dy = _to_layout(dy, data_format)
        sizes = [BATCH, H, W, CIN] if data_format == "NHWC" else [BATCH, CIN, H, W]
        kwargs = _window(padding, data_format, stride, dilation)
        with np.errstate(all="ignore"):
            exact, bound = reference_pair_bpi(sizes, filt, dy, **kwargs)
        for isa in ISAS:
            with cpu.use_isa(isa):
                got = convviz.conv2d_backprop_input(sizes, filt, dy, **kwargs)
            _check(got, exact, bound, dtype, f"{isa} {padding} {data_format} stride {stride} dilation {dilation}")


@pytest.mark.parametrize("value", [np.nan, np.inf], ids=["nan", "inf"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("where", ["input", "out_backprop"])
def test_depthwise_filter_gradient(where, dtype, value):
    rng = np.random.default_rng(2)
    for i, (padding, data_format, stride, dilation) in enumerate(GEOMETRIES):
        oh, ow = _output_hw(padding, stride, dilation)
        x = _values(rng, (BATCH, H, W, CHANNELS), dtype)
        dy = _values(rng, (BATCH, oh, ow, CHANNELS), dtype)
        target = x if where == "input" else dy
        target[_cell(target.shape, i)] = value
        x, dy = _to_layout(x, data_format), _to_layout(dy, data_format)
        kwargs = _window(padding, data_format, stride, dilation)
        with np.errstate(all="ignore"):
            exact, bound = reference_pair_dwf(x, [K, K, CHANNELS, 1], dy, **kwargs)
        for isa in ISAS:
            with cpu.use_isa(isa):
                got = convviz.depthwise_conv2d_native_backprop_filter(x, [K, K, CHANNELS, 1], dy, **kwargs)
            _check(got, exact, bound, dtype, f"{isa} {padding} {data_format} stride {stride} dilation {dilation}")


def test_the_reported_case():
    """The report: 7x7 input, 3x3 ones filter with NaN in tap (0, 0), dilation 2, SAME: as TensorFlow,
    NaN in the 25 cells that tap reads (rows and columns 0-4), not in 35."""
    filt = np.ones((3, 3, 1, 1), np.float32)
    filt[0, 0, 0, 0] = np.nan
    dy = np.ones((1, 7, 7, 1), np.float32)
    for isa in ISAS:
        with cpu.use_isa(isa):
            got = convviz.conv2d_backprop_input([1, 7, 7, 1], filt, dy, [1, 1, 1, 1], "SAME", dilations=[1, 2, 2, 1])
        assert int(np.isnan(got).sum()) == 25, isa
        np.testing.assert_array_equal(np.isnan(got[0, :, :, 0]), np.pad(np.ones((5, 5), bool), ((0, 2), (0, 2))))
