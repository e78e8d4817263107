"""Threads: results are bitwise identical for any thread count, and threads are used."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import convviz
from convviz import _openmp_info

THREAD_COUNTS = [1, 2, 3, 4, 7, 16]


def _bits(array: np.ndarray) -> np.ndarray:
    return array.view(np.uint8)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_input_gradient_bitwise_identical_across_threads(rng, data_format, dtype):
    sizes = [3, 17, 13, 6] if data_format == "NHWC" else [3, 6, 17, 13]
    strides = [1, 2, 1, 1] if data_format == "NHWC" else [1, 1, 2, 1]
    filt = rng.standard_normal((3, 4, 3, 8)).astype(dtype)  # 2 groups
    dy_shape = (3, 9, 13, 8) if data_format == "NHWC" else (3, 8, 9, 13)
    dy = rng.standard_normal(dy_shape).astype(dtype)
    results = [convviz.conv2d_backprop_input(sizes, filt, dy, strides, "SAME",
                                             data_format=data_format, n_threads=n)
               for n in THREAD_COUNTS]
    for other in results[1:]:
        np.testing.assert_array_equal(_bits(results[0]), _bits(other))


@pytest.mark.parametrize("op", ["conv2d", "conv2d_backprop_input"])
@pytest.mark.parametrize("nonfinite", [False, True])
def test_channel_block_units_bitwise_identical_across_threads(rng, op, nonfinite):
    """A filter that outweighs the input: the forward kernel's units are channel
    blocks (with AVX-512, 160 channels over 7 columns: blocks of 4, 4 and 2
    vectors), each block's rows cut into runs to even out the threads; the input
    gradient runs on the same kernel.  One block's NaN keeps its units exact."""
    filt = rng.standard_normal((3, 3, 72, 160)).astype(np.float32)
    if nonfinite:
        filt[1, 2, 5, 150] = np.nan
    x = rng.standard_normal((2, 5, 7, 72)).astype(np.float32)
    dy = rng.standard_normal((2, 5, 7, 160)).astype(np.float32)
    if op == "conv2d":
        results = [convviz.conv2d(x, filt, [1, 1, 1, 1], "SAME", n_threads=n) for n in THREAD_COUNTS]
    else:
        results = [convviz.conv2d_backprop_input(x.shape, filt, dy, [1, 1, 1, 1], "SAME", n_threads=n)
                   for n in THREAD_COUNTS]
    for other in results[1:]:
        np.testing.assert_array_equal(_bits(results[0]), _bits(other))
    assert np.isnan(results[0]).any() == nonfinite


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_filter_gradient_bitwise_identical_across_threads(rng, dtype):
    # 4 * 40 = 160 rows of out_backprop: more rows than reduction blocks, so the
    # blocks hold several rows each and threads take several blocks each.
    x = rng.standard_normal((4, 80, 33, 5)).astype(dtype)
    dy = rng.standard_normal((4, 40, 17, 10)).astype(dtype)
    results = [convviz.depthwise_conv2d_native_backprop_filter(
        x, [3, 3, 5, 2], dy, [1, 2, 2, 1], "SAME", dilations=[1, 2, 1, 1], n_threads=n)
        for n in THREAD_COUNTS]
    for other in results[1:]:
        np.testing.assert_array_equal(_bits(results[0]), _bits(other))


def test_repeated_calls_are_bitwise_identical(rng):
    x = rng.standard_normal((2, 30, 30, 16)).astype(np.float32)
    dy = rng.standard_normal((2, 30, 30, 16)).astype(np.float32)
    first = convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 16, 1], dy, [1] * 4, "SAME")
    for _ in range(5):
        again = convviz.depthwise_conv2d_native_backprop_filter(x, [3, 3, 16, 1], dy, [1] * 4, "SAME")
        np.testing.assert_array_equal(_bits(first), _bits(again))


def test_default_threads_follow_omp_num_threads():
    """n_threads=None uses OMP_NUM_THREADS (read by the OpenMP runtime at start-up)."""
    code = "import convviz; print(convviz.show_versions(as_dict=True)['max_threads'])"
    env = dict(os.environ, OMP_NUM_THREADS="3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    expected = 3 if convviz.openmp_enabled() else 1
    assert int(out.stdout.strip()) == expected


@pytest.mark.skipif(not convviz.openmp_enabled(), reason="serial build")
def test_parallel_loops_run_on_the_requested_threads():
    assert _openmp_info.threads_used(1) == 1
    assert _openmp_info.threads_used(2) == 2
    assert _openmp_info.threads_used(4) == 4


@pytest.mark.skipif(not convviz.openmp_enabled(), reason="serial build")
def test_kernels_release_the_gil(rng):
    """While a long kernel call runs in one thread, Python code runs in another."""
    filt = rng.standard_normal((3, 3, 32, 32)).astype(np.float32)
    dy = rng.standard_normal((16, 64, 64, 32)).astype(np.float32)
    call = lambda: convviz.conv2d_backprop_input([16, 64, 64, 32], filt, dy, [1] * 4, "SAME",  # noqa: E731
                                                 n_threads=1)
    start = time.perf_counter()
    call()
    single = time.perf_counter() - start
    repeats = max(1, int(0.3 / max(single, 1e-6)))  # keep the worker busy for ~0.3 s

    def work():
        for _ in range(repeats):
            call()

    ticks = 0
    worker = threading.Thread(target=work)
    worker.start()
    started = time.perf_counter()
    while worker.is_alive():
        ticks += 1
        time.sleep(0.001)
    busy = time.perf_counter() - started
    worker.join()
    # With the GIL held during the kernels, this loop would advance only between
    # calls (at most `repeats` times); released, it ticks about once a millisecond.
    assert ticks > repeats + 20 and ticks >= busy / 0.001 / 10
