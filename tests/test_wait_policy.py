"""How idle kernel threads wait (convviz._wait_policy): convviz gives libgomp a short spin
when it loads the runtime itself, leaves a user's choice and another package's runtime
alone, says which is in force, and computes the same either way.  Each case runs in a
fresh process, since libgomp reads its settings once, as it loads."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

import convviz

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libgomp's settings: Linux"),
    pytest.mark.skipif(not convviz.openmp_enabled(), reason="a serial build has no threads that wait"),
    pytest.mark.skipif("not GCC's libgomp" in convviz.show_versions(as_dict=True)["omp_wait"],
                       reason="built with another OpenMP runtime (LLVM's libomp): GCC's settings do not apply"),
]

# Computes one op against the reference, and reports what is in force and the CPU this
# process burns while it sleeps after a parallel call (idle threads spinning).
PROBE = """
import json, os, subprocess, sys, time
import numpy as np
{before}
import convviz
from convviz import reference
x = np.random.default_rng(0).standard_normal((2, 32, 32, 64)).astype(np.float32)
w = np.random.default_rng(1).standard_normal((3, 3, 64, 1)).astype(np.float32)
args = ([1, 1, 1, 1], "SAME")
got = convviz.depthwise_conv2d_native(x, w, *args, n_threads=2)
exact = reference.depthwise_conv2d_native(x.astype(np.float64), w.astype(np.float64), *args)
np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5)
burnt = []
for _ in range(7):
    convviz.depthwise_conv2d_native(x, w, *args, n_threads=2)
    start = time.process_time()
    time.sleep(0.05)
    burnt.append((time.process_time() - start) * 1e3)
child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('GOMP_SPINCOUNT'))"],
                       capture_output=True, text=True).stdout.strip()
print(json.dumps(dict(omp_wait=convviz.show_versions(as_dict=True)["omp_wait"], burnt_ms=burnt,
                      env=os.environ.get("GOMP_SPINCOUNT"), child=child)))
"""


def _probe(before: str = "", **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    result = subprocess.run([sys.executable, "-c", PROBE.format(before=before)], env=dict(clean, **env),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_convviz_loads_libgomp_with_a_short_spin_and_leaves_no_trace():
    """Idle threads spin briefly after a call (libgomp's default spins about 5 ms of a
    core on a recent CPU; the control below), and the variable is gone from the
    environment afterwards: neither this process nor a child sees it."""
    ours = _probe()
    assert ours["omp_wait"] == "GOMP_SPINCOUNT=10000 (set by convviz as it loaded libgomp)"
    assert ours["env"] is None and ours["child"] == "None"
    control = _probe(GOMP_SPINCOUNT="300000")  # libgomp's default, chosen explicitly
    assert control["omp_wait"] == "GOMP_SPINCOUNT=300000 (from the environment)"
    assert statistics.median(ours["burnt_ms"]) < 2.0, ours["burnt_ms"]
    assert statistics.median(ours["burnt_ms"]) < statistics.median(control["burnt_ms"]), (ours, control)


@pytest.mark.parametrize("variable, value", [("OMP_WAIT_POLICY", "PASSIVE"), ("OMP_WAIT_POLICY", "active"),
                                             ("GOMP_SPINCOUNT", "infinity")])
def test_a_users_choice_is_kept(variable, value):
    probe = _probe(**{variable: value})
    assert probe["omp_wait"] == f"{variable}={value} (from the environment)"
    if variable == "GOMP_SPINCOUNT":
        assert probe["env"] == value  # untouched


def test_a_runtime_loaded_before_convviz_keeps_its_settings_and_convviz_computes_alike():
    """Another package's libgomp, loaded first, is the one the kernels share: convviz says
    so, sets nothing, and computes the same (the probe checks the result)."""
    probe = _probe(before="import ctypes; ctypes.CDLL('libgomp.so.1')")
    assert probe["omp_wait"] == "libgomp's default (another package loaded libgomp before convviz)"
    assert probe["env"] is None


def test_pytorch_imported_first():
    """PyTorch's wheel carries its libgomp as libgomp.so.1: imported first, its runtime is
    the one convviz's kernels share (and convviz says so, and computes alike)."""
    pytest.importorskip("torch")
    probe = _probe(before="import torch; torch.ones(64, 64) @ torch.ones(64, 64)")
    assert probe["omp_wait"] == "libgomp's default (another package loaded libgomp before convviz)"


def test_an_empty_variable_is_the_users_and_stays():
    probe = _probe(GOMP_SPINCOUNT="")
    assert probe["omp_wait"] == "GOMP_SPINCOUNT= (from the environment)" and probe["env"] == ""
