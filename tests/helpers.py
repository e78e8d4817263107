"""Helpers shared by the tests: dtypes, random data, comparison with the reference."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np

from convviz import reference

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


# Browser tests: Debian's Chromium (no browser downloads), started as this machine allows
# (no sandbox as root; no background networking: the network is closed).
CHROMIUM = os.environ.get("CONVVIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
