"""How many threads a kernel call uses when the caller does not say.

Read on every call, never frozen at import, in the manner of scikit-learn's
``_openmp_effective_n_threads``:

* OpenMP's current limit (``omp_get_max_threads``): it follows
  ``OMP_NUM_THREADS`` and any ``threadpoolctl.threadpool_limits`` in force;
* unless ``OMP_NUM_THREADS`` is set explicitly, also the CPUs this process may
  really use: its affinity mask and the CPU quota of its container (cgroup v2
  ``cpu.max`` or v1 ``cpu.cfs_quota_us``), so a 2-CPU container on a 64-core
  host does not start 64 threads.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

from . import _openmp_info

__all__ = ["cpu_limit", "default_threads"]

# More threads than this is never useful and could exhaust the OS's thread limit.
MAX_THREADS = 1024


def _cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs allowed by the cgroup CPU quota (may be fractional), or None without a quota."""
    try:  # cgroup v2: "max 100000" or "200000 100000"
        quota, period = (root / "cpu.max").read_text().split()[:2]
        if quota != "max" and int(period) > 0:
            return int(quota) / int(period)
        return None
    except (OSError, ValueError):
        pass
    try:  # cgroup v1
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        if quota_us > 0 and period_us > 0:
            return quota_us / period_us
    except (OSError, ValueError):
        pass
    return None


@functools.lru_cache(maxsize=1)
def cpu_limit() -> int:
    """CPUs this process can use: affinity mask and container quota (read once).

    Examples
    --------
    >>> from convviz import _threads
    >>> 1 <= _threads.cpu_limit() <= (__import__("os").cpu_count() or 1)
    True
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return max(1, cpus)


# The OpenMP runtime reads OMP_NUM_THREADS once, at start-up, and a container's
# quota is fixed for its life: both are facts of this process, read once (per call
# they would cost ~0.6 us).  What changes at run time -- threadpoolctl limits --
# is read at every call.
_OMP_NUM_THREADS_SET = bool(os.environ.get("OMP_NUM_THREADS"))
_LIMIT = MAX_THREADS if _OMP_NUM_THREADS_SET else min(cpu_limit(), MAX_THREADS)


def default_threads() -> int:
    """Threads for ``n_threads=None``, read now (see the module docstring).

    Examples
    --------
    >>> from convviz import _threads
    >>> _threads.default_threads() >= 1
    True
    """
    openmp = _openmp_info.max_threads()  # follows threadpoolctl limits as they come and go
    return openmp if 1 <= openmp <= _LIMIT else max(1, min(openmp, _LIMIT))
