"""Half types: the kernels read them exactly and round results once, to nearest even.

A 1x1 convolution with a single weight w gives dx = round(w * dy), where w * dy
is exact in float32 for float16 and bfloat16 inputs.  So every result must equal
NumPy's / ml_dtypes' own rounding of the float32 product, bit for bit.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import convviz
from convviz._backends import cpu
from convviz import _openmp_info


def _all_values(dtype) -> np.ndarray:
    return np.arange(2**16, dtype=np.uint16).view(dtype)


@pytest.mark.parametrize("isa", _openmp_info.available_isas())
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("weight", [1.0, 0.5, 3.0, 1.0009765625, 0.333251953125, -1.5, 2.0**-10, 1000.0])
def test_input_gradient_rounds_like_numpy(dtype, weight, isa):
    values = _all_values(dtype)
    dy = values.reshape(1, 256, 256, 1)
    w = np.array(weight, dtype=dtype).reshape(1, 1, 1, 1)
    with cpu.use_isa(isa):
        got = convviz.conv2d_backprop_input([1, 256, 256, 1], w, dy, [1, 1, 1, 1], "VALID")
    with np.errstate(invalid="ignore", over="ignore"):
        expected = (w.astype(np.float32) * dy.astype(np.float32)).astype(dtype)
    nan = np.isnan(expected.astype(np.float32))
    assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
    # Bit for bit, except that a sum starting from +0 turns a lone -0 into +0.
    nonzero = ~nan & (expected.astype(np.float32) != 0)
    np.testing.assert_array_equal(got.view(np.uint16)[nonzero], expected.view(np.uint16)[nonzero])
    assert not got.astype(np.float32)[~nan & ~nonzero].any()


@pytest.mark.parametrize("isa", _openmp_info.available_isas())
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_filter_gradient_rounds_like_numpy(dtype, isa):
    values = _all_values(dtype)
    finite = values[np.isfinite(values.astype(np.float32))]
    rng = np.random.default_rng(3)
    x = rng.choice(finite, size=4096).reshape(4096, 1, 1, 1)
    dy = rng.choice(finite, size=4096).reshape(4096, 1, 1, 1)
    with cpu.use_isa(isa):
        got = convviz.depthwise_conv2d_native_backprop_filter(x, [1, 1, 1, 1], dy, [1] * 4, "VALID")
        # Each batch element alone: a single product, rounded once.
        singles = [convviz.depthwise_conv2d_native_backprop_filter(x[i:i + 1], [1, 1, 1, 1], dy[i:i + 1],
                                                                    [1] * 4, "VALID") for i in range(64)]
    with np.errstate(invalid="ignore", over="ignore"):
        expected = (x[:64].astype(np.float32) * dy[:64].astype(np.float32)).astype(dtype).ravel()
    got_singles = np.array([s.ravel()[0] for s in singles], dtype=dtype)
    ok = ~np.isnan(expected.astype(np.float32)) & (expected.astype(np.float32) != 0)
    np.testing.assert_array_equal(got_singles.view(np.uint16)[ok], expected.view(np.uint16)[ok])
    assert got.dtype == np.dtype(dtype)
