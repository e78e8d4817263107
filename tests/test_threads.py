"""The default thread count is read at each call and respects every limit a user can set."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import convviz
from convviz import _openmp_info, _threads

needs_openmp = pytest.mark.skipif(not convviz.openmp_enabled(), reason="a serial build always uses one thread")


@needs_openmp
def test_threadpoolctl_limits_are_respected():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    if _openmp_info.max_threads() < 2:
        pytest.skip("needs OpenMP allowing at least 2 threads")
    with threadpoolctl.threadpool_limits(limits=1, user_api="openmp"):
        assert _threads.default_threads() == 1
    assert _threads.default_threads() >= 1


@pytest.mark.parametrize("value", ["1", "3"])
@needs_openmp
def test_omp_num_threads_is_read_in_a_fresh_process(value):
    """OMP_NUM_THREADS is the user's explicit choice: it wins even over the CPU count."""
    env = {**os.environ, "OMP_NUM_THREADS": value}
    out = subprocess.run([sys.executable, "-c", "from convviz import _threads; print(_threads.default_threads())"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert int(out) == int(value)


def test_cgroup_v2_and_v1_quotas(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert _threads._cgroup_quota(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert _threads._cgroup_quota(tmp_path) is None
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert _threads._cgroup_quota(tmp_path) == 2.0
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert _threads._cgroup_quota(tmp_path) is None
    assert _threads._cgroup_quota(tmp_path / "absent") is None


def test_a_container_quota_caps_the_default(monkeypatch):
    monkeypatch.setattr(_threads, "_cgroup_quota", lambda: 0.5)  # half a CPU still gets one thread
    _threads.cpu_limit.cache_clear()
    try:
        assert _threads.cpu_limit() == 1
    finally:
        _threads.cpu_limit.cache_clear()
    monkeypatch.setattr(_threads, "_LIMIT", 1)
    assert _threads.default_threads() == 1


def test_the_default_is_read_on_every_call_even_from_the_plan_cache(monkeypatch, rng):
    seen = []

    def counting() -> int:
        seen.append(1)
        return 1

    monkeypatch.setattr(_threads, "default_threads", counting)
    monkeypatch.setattr(convviz._validate, "default_threads", counting)
    filt = rng.standard_normal((3, 3, 2, 4)).astype(np.float32)
    dy = rng.standard_normal((1, 6, 6, 4)).astype(np.float32)
    for _ in range(3):  # the first call validates, the next two reuse its plan
        convviz.conv2d_backprop_input([1, 6, 6, 2], filt, dy, [1, 1, 1, 1], "SAME")
    assert len(seen) == 3


def test_errors_are_public_and_the_old_paths_still_work():
    from convviz import errors
    from convviz._backends import cuda
    from convviz._validate import InvalidArgumentError as old_invalid

    assert convviz.InvalidArgumentError is errors.InvalidArgumentError is old_invalid
    assert convviz.DeviceError is errors.DeviceError is cuda.DeviceError
    assert issubclass(errors.InvalidArgumentError, ValueError) and issubclass(errors.DeviceError, RuntimeError)
