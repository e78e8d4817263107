"""How long the kernels' idle threads spin before they sleep: set as the OpenMP runtime loads.

GCC's OpenMP runtime (libgomp) lets a thread that has finished its part of a
parallel region spin for up to 300,000 ``pause`` instructions before it sleeps
(about 5 ms of a core on a recent Intel CPU), and reads that count once, when it
is loaded.  On a quiet machine the spin saves a wake-up.  On a busy one the
spinning threads burn their share of the cores, and the scheduler then makes the
thread that still has work wait for one.  With two busy processes beside it on
2 cores, the benchmark's cases took 3.3 times their quiet time on the median
(mean time per call) and up to 57 times (a 0.35 ms depthwise filter gradient
averaged 19.9 ms); with 10,000 spins (about 0.4 ms) 2.2 times on the median and
4.6 at worst -- twice is the fair share of 2 cores among 4 busy threads -- while
the smallest parallel calls on a quiet machine took the same time (paired,
1.00-1.01x).  Passive waiting (no spin) did worse under load and costs a
wake-up per call.  (BENCHMARKS.md, "Under load".)

So, when convviz is the one that loads libgomp and the user has not chosen a
policy (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` present in the environment,
even empty), ``GOMP_SPINCOUNT=10000`` is in the environment for the moment
libgomp reads it, and removed right after: no child process sees it.  A
library that loads a libgomp *later* in this process shares the one already
loaded (PyTorch's wheels carry theirs under the same name, libgomp.so.1), and
with it this setting; a libgomp loaded *before* convviz -- by PyTorch imported
first, for one -- keeps its own settings, and convviz's kernels use it.
:func:`describe` says what is in force (``convviz.show_versions()``).
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys

#: The spin count convviz gives libgomp (see the module docstring for the measurements).
SPIN_COUNT = 10_000
#: The environment variables by which a user chooses libgomp's waiting.
USER_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
LIBGOMP = "libgomp.so.1"

_in_force = "not loaded yet"


def _libgomp_loaded() -> bool | None:
    """Whether this process has GCC's OpenMP runtime loaded (None off Linux, where it is
    not the runtime a build uses)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "RTLD_NOLOAD"):
        return None
    try:
        ctypes.CDLL(LIBGOMP, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return False
    return True


def load_runtime() -> str:
    """Import ``convviz._openmp_info`` (the compiled module that loads the OpenMP
    runtime first) with convviz's spin count in the environment when it is convviz
    that loads libgomp and the user chose nothing; return :func:`describe`."""
    global _in_force
    chosen = {name: os.environ[name] for name in USER_VARIABLES if name in os.environ}
    before = _libgomp_loaded()
    ours = not chosen and before is False
    if ours:
        os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    try:
        module = importlib.import_module("convviz._openmp_info")
    finally:
        if ours:
            del os.environ["GOMP_SPINCOUNT"]
    if not module.openmp_enabled():
        _in_force = "no OpenMP (a serial build: no threads wait)"
    elif chosen:
        _in_force = " ".join(f"{k}={v}" for k, v in chosen.items()) + " (from the environment)"
    elif before:
        _in_force = "libgomp's default (another package loaded libgomp before convviz)"
    elif _libgomp_loaded():
        _in_force = f"GOMP_SPINCOUNT={SPIN_COUNT} (set by convviz as it loaded libgomp)"
    else:
        _in_force = "the OpenMP runtime's default (not GCC's libgomp)"
    return _in_force


def describe() -> str:
    """What governs the idle threads' waiting in this process.

    Examples
    --------
    >>> import convviz
    >>> from convviz import _wait_policy
    >>> isinstance(_wait_policy.describe(), str)
    True
    """
    return _in_force
