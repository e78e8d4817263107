# distutils: language = c++
# C++ (in _ext/): cvz_machine.cpp cvz_isa.cpp
"""The machine's limits, measured on the machine at hand: FMA peak and memory bandwidth.

The benchmark's roofline (``convviz bench``) compares every case with them.  The
FMA peak is measured for a kernel variant ('generic', 'avx2', 'avx512'; by
default the one the kernels run), with the same per-ISA machinery as the
kernels (``_ext/cvz_machine.cpp``): independent chains of vector FMAs in
registers on every thread, no memory traffic.  The bandwidth is measured with
simple vector kernels (read, write, copy, copy with streaming stores) on arrays
well beyond the last-level cache, each thread its own contiguous part, the
pages first touched by the thread that uses them.  Every figure is the best of
several repetitions, measured without the GIL.
"""

import math
import os
import time

from _openmp cimport CONVVIZ_OPENMP_ENABLED

from . import _openmp_info
from ._openmp_info import bf16_dot_available, f16_fma_available

cdef extern from "cvz_amx.hpp" namespace "cvz" nogil:
    const char* amx_unusable_reason()

cdef extern from * namespace "cvz" nogil:
    """
    #define CVZ_INTERFACE_ONLY
    #include "cvz_machine.cpp"
    #undef CVZ_INTERFACE_ONLY
    """
    ctypedef Py_ssize_t idx
    double machine_fma(int isa, int f64, int n_threads, long long rounds, int* threads, double* flops,
                       double* sink)
    double machine_bf16_dot(int n_threads, long long rounds, int* threads, double* flops, double* sink)
    double machine_f16_fma(int n_threads, long long rounds, int* threads, double* flops, double* sink)
    double machine_amx_bf16(int n_threads, long long rounds, int* threads, double* flops, double* sink)
    void* machine_alloc(idx bytes)
    void machine_free(void* p)
    int machine_first_touch(float* a, float* b, idx n, int n_threads)
    double machine_memory_pass(int isa, int kind, const float* a, float* b, idx n, int n_threads, double* sink)

# The memory kernels (cvz::MemoryKernel) and the bytes one pass moves per float
# of the array: a copy reads one array and writes the other.
MEMORY_KERNELS = ("read", "write", "copy", "copy_streaming")
_BYTES_PER_ELEMENT = {"read": 4, "write": 4, "copy": 8, "copy_streaming": 8}
_MIB = 1 << 20
# The array size when the cache size is unknown, and the most memory one array takes.
_MIN_ARRAY_BYTES = 128 * _MIB
_MAX_ARRAY_BYTES = 2048 * _MIB


def amx_bf16_available():
    """Whether AMX-BF16 tiles run here: the CPU has them (with AVX512_BF16 and
    AVX-512), this build holds the code, and Linux granted the tile state."""
    return amx_unusable_reason()[0] == 0


def _isa_code(isa):
    """(name, code) of ``isa`` (None: the variant the kernels run); ValueError when this CPU lacks it."""
    if isa is None:
        from ._backends import cpu

        isa = cpu.current_isa()
    if isa not in _openmp_info.available_isas():
        raise ValueError(f"ISA {isa!r} is not available here; choose from {_openmp_info.available_isas()}")
    return isa, _openmp_info.ISA_NAMES.index(isa)


def _check_threads(n_threads):
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")


def _size_in_bytes(text):
    """'32768K' (as /sys writes cache sizes) -> 33554432."""
    text = text.strip().upper()
    for suffix, scale in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if text.endswith(suffix):
            return int(text[:len(text) - 1]) * scale
    return int(text)


def last_level_cache_bytes():
    """Size of the CPU's last-level cache in bytes, or 0 when it cannot be read.

    Read from Linux's ``/sys/devices/system/cpu/cpu0/cache`` (the cache of
    highest level that holds data), else from ``sysconf``.

    Examples
    --------
    >>> from convviz import _machine
    >>> _machine.last_level_cache_bytes() >= 0
    True
    """
    best_level, best_size = 0, 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        entries = []
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(os.path.join(base, entry, "type")) as handle:
                kind = handle.read().strip()
            with open(os.path.join(base, entry, "level")) as handle:
                level = int(handle.read())
            with open(os.path.join(base, entry, "size")) as handle:
                size = _size_in_bytes(handle.read())
        except (OSError, ValueError):
            continue
        if kind != "Instruction" and level > best_level:
            best_level, best_size = level, size
    if best_size > 0:
        return best_size
    for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            size = os.sysconf(name)
        except (ValueError, OSError, AttributeError):
            continue
        if size > 0:
            return size
    return 0


def default_array_bytes():
    """Bytes of each of the bandwidth measurement's two arrays: four times the
    last-level cache, at least 128 MiB (so a copy moves at least 256 MiB), at
    most 2 GiB.

    Examples
    --------
    >>> from convviz import _machine
    >>> _machine.default_array_bytes() >= 128 * 2**20
    True
    """
    return min(_MAX_ARRAY_BYTES, max(_MIN_ARRAY_BYTES, 4 * last_level_cache_bytes()))


cdef tuple _fma_run(int code, int f64, int n_threads, long long rounds):
    """(seconds, flops, threads) of one run of ``rounds`` rounds of FMA chains."""
    cdef int threads = 1
    cdef double flops = 0, sink = 0, seconds
    with nogil:
        if f64 == 2:  # the bfloat16 dot product (checked available by the caller)
            seconds = machine_bf16_dot(n_threads, rounds, &threads, &flops, &sink)
        elif f64 == 3:  # the float16 FMA (likewise)
            seconds = machine_f16_fma(n_threads, rounds, &threads, &flops, &sink)
        elif f64 == 4:  # AMX-BF16 tiles (likewise)
            seconds = machine_amx_bf16(n_threads, rounds, &threads, &flops, &sink)
        else:
            seconds = machine_fma(code, f64, n_threads, rounds, &threads, &flops, &sink)
    if not math.isfinite(sink):  # the chains tend to 1: never happens, but keeps `sink` used
        raise RuntimeError("convviz: the FMA chains diverged")
    return seconds, flops, threads


def _fma_peak(int n_threads, isa, dtype, double seconds, int repeats):
    """(GFLOP/s, threads that ran) of the FMA peak; see fma_peak_gflops."""
    _check_threads(n_threads)
    if dtype not in ("float32", "float64", "bfloat16_dot", "float16", "amx_bf16"):
        raise ValueError(f"dtype must be 'float32', 'float64', 'bfloat16_dot', 'float16' or 'amx_bf16', "
                         f"got {dtype!r}")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    name, code = _isa_code(isa)
    if dtype == "bfloat16_dot" and not (name == "avx512" and bf16_dot_available()):
        raise ValueError(f"the bfloat16 dot product (AVX512_BF16) does not run here ({name} kernels)")
    if dtype == "float16" and not (name == "avx512" and f16_fma_available()):
        raise ValueError(f"the float16 FMA (AVX512_FP16) does not run here ({name} kernels)")
    if dtype == "amx_bf16" and not (name == "avx512" and amx_bf16_available()):
        raise ValueError(f"AMX-BF16 tiles do not run here ({name} kernels; {amx_unusable_reason().decode() or 'ok'})")
    cdef int f64 = {"bfloat16_dot": 2, "float16": 3, "amx_bf16": 4}.get(dtype, dtype == "float64")
    # Calibrate (this also starts the threads): grow the rounds until a run
    # takes a tenth of the target, then scale them to the target.  The shorter
    # of two runs counts, so that one run slowed down by another process does
    # not make all the timed runs too short.
    cdef long long rounds = 256
    elapsed = min(_fma_run(code, f64, n_threads, rounds)[0], _fma_run(code, f64, n_threads, rounds)[0])
    while elapsed < seconds / 10 and rounds < (1 << 40):
        rounds *= 4
        elapsed = min(_fma_run(code, f64, n_threads, rounds)[0], _fma_run(code, f64, n_threads, rounds)[0])
    if elapsed > 0 and seconds > 0:
        rounds = max(rounds, <long long>(rounds * seconds / elapsed))
    best, used = 0.0, 1
    for _ in range(repeats):
        elapsed, flops, threads = _fma_run(code, f64, n_threads, rounds)
        if elapsed > 0 and flops / elapsed / 1e9 > best:
            best, used = flops / elapsed / 1e9, threads
    return best, used


def fma_peak_gflops(n_threads, isa=None, dtype="float32", seconds=0.1, repeats=3):
    """The FMA peak in GFLOP/s of one kernel variant on ``n_threads`` threads.

    Every thread runs independent chains of vector FMAs (12 vectors, 16 with
    AVX-512: enough to hide the FMA latency) in registers, with no memory
    traffic; an FMA counts two flops per vector lane.  The result is the best
    of ``repeats`` runs of about ``seconds`` each.  Without OpenMP, one thread
    runs whatever ``n_threads`` asks.

    Parameters
    ----------
    n_threads : int
        Threads (OpenMP), at least 1.
    isa : {'generic', 'avx2', 'avx512'} or None
        Kernel variant; None: the one the kernels run (``CONVVIZ_ISA`` or the best).
    dtype : {'float32', 'float64', 'bfloat16_dot', 'float16', 'amx_bf16'}
        Type of the FMAs; 'bfloat16_dot': chains of the AVX512_BF16 dot
        product ``vdpbf16ps`` (4 flops per lane), where the CPU has it and
        ``isa`` is 'avx512'; 'float16': the AVX512_FP16 FMA ``vfmadd231ph``
        (32 lanes), likewise; 'amx_bf16': AMX tiles' ``tdpbf16ps`` (16 x 16
        x 32 products per instruction), where they run (:func:`amx_bf16_available`).
    seconds : float
        Duration of each run (shorter: rougher).
    repeats : int
        Runs; the best is returned.

    Returns
    -------
    float
        GFLOP/s of all threads together.

    Raises
    ------
    ValueError
        For an ISA this CPU or build lacks, or a bad argument.

    Examples
    --------
    >>> from convviz import _machine
    >>> _machine.fma_peak_gflops(1, seconds=0.001, repeats=1) > 0
    True
    """
    return _fma_peak(n_threads, isa, dtype, seconds, repeats)[0]


def memory_bandwidth(int n_threads, isa=None, array_bytes=None, double seconds=0.1, int min_passes=3):
    """Memory bandwidth in GB/s (10**9 bytes per second) on ``n_threads`` threads.

    Four vector kernels run over two float32 arrays of ``array_bytes`` each,
    every thread on its own contiguous part, whose pages that thread touched
    first:

    - ``read``: the sum of one array (bytes read);
    - ``write``: one array filled with a value (bytes written);
    - ``copy``: one array copied to the other with ordinary stores, counted as
      the bytes read plus the bytes written (twice the array; the CPU also
      reads each destination line before writing it, which is not counted);
    - ``copy_streaming``: the same copy with streaming (non-temporal) stores,
      which bypass the caches and need no such read; only for the variants
      that have them ('avx2', 'avx512').

    Each kernel is timed pass by pass, for at least ``min_passes`` passes and
    ``seconds`` in all; the best pass counts.

    Parameters
    ----------
    n_threads : int
        Threads (OpenMP), at least 1.
    isa : {'generic', 'avx2', 'avx512'} or None
        Kernel variant; None: the one the kernels run.
    array_bytes : int or None
        Bytes of each array; None: :func:`default_array_bytes` (far beyond the
        last-level cache, as a measurement of the memory needs).
    seconds : float
        Time spent on each kernel (beyond the first passes).
    min_passes : int
        Passes of each kernel at least.

    Returns
    -------
    dict of str to float
        GB/s by kernel: 'read', 'write', 'copy' and, with streaming stores,
        'copy_streaming'.

    Raises
    ------
    MemoryError
        When the arrays cannot be allocated.

    Examples
    --------
    >>> from convviz import _machine
    >>> found = _machine.memory_bandwidth(1, array_bytes=2**20, seconds=0)
    >>> {"read", "write", "copy"} <= set(found), all(value > 0 for value in found.values())
    (True, True)
    """
    _check_threads(n_threads)
    if min_passes < 1:
        raise ValueError(f"min_passes must be at least 1, got {min_passes}")
    name, isa_code = _isa_code(isa)
    cdef int code = isa_code
    if array_bytes is None:
        array_bytes = default_array_bytes()
    # Whole 1024-float blocks, at least one per thread.
    cdef idx n = max(<idx>(array_bytes // 4 // 1024), n_threads) * 1024
    kernels = [k for k in MEMORY_KERNELS if k != "copy_streaming" or name != "generic"]
    cdef float* a = <float*>machine_alloc(n * 4)
    cdef float* b = <float*>machine_alloc(n * 4)
    cdef int kind, passes
    cdef double best, spent, elapsed, sink = 0
    found = {}
    try:
        if a == NULL or b == NULL:
            raise MemoryError(f"convviz: cannot allocate two arrays of {n * 4} bytes to measure the bandwidth")
        with nogil:
            machine_first_touch(a, b, n, n_threads)
        for kernel in kernels:
            kind = MEMORY_KERNELS.index(kernel)
            best, spent, passes = math.inf, 0.0, 0
            with nogil:
                while passes < min_passes or spent < seconds:
                    elapsed = machine_memory_pass(code, kind, a, b, n, n_threads, &sink)
                    spent += elapsed
                    passes += 1
                    if elapsed < best:
                        best = elapsed
            found[kernel] = _BYTES_PER_ELEMENT[kernel] * n / max(best, 1e-9) / 1e9
    finally:
        machine_free(a)
        machine_free(b)
    return found


def measure(n_threads, isa=None, seconds=0.1, array_bytes=None, progress=None, repeats=5):
    """Everything the roofline needs: FMA peaks (float32 and float64) and bandwidths.

    Parameters
    ----------
    n_threads : int
        Threads, at least 1 (the benchmark's own thread count).
    isa : {'generic', 'avx2', 'avx512'} or None
        Kernel variant; None: the one the kernels run.
    seconds : float
        Time per FMA run and per memory kernel.
    array_bytes : int or None
        Bytes of each array of the bandwidth measurement (None: the default).
    progress : callable or None
        Called with a line of text before each measurement.
    repeats : int
        FMA runs per type (the best counts): a machine shared with other
        work needs a few.

    Returns
    -------
    dict
        ``isa``; ``threads`` (that ran: 1 without OpenMP); ``fma_gflops``
        ({'float32': ..., 'float64': ...}, and 'bfloat16_dot' where the
        CPU has AVX512_BF16 and ``isa`` is 'avx512', 'float16' where it has
        AVX512_FP16, 'amx_bf16' where AMX tiles run); ``bandwidth_gbs`` (see
        :func:`memory_bandwidth`); ``array_bytes`` (of each array);
        ``llc_bytes`` (the last-level cache, 0 if unknown); ``seconds`` (the
        measurement took).

    Examples
    --------
    >>> from convviz import _machine
    >>> peaks = _machine.measure(1, seconds=0.001, array_bytes=2**20)
    >>> peaks["fma_gflops"]["float32"] > 0 and peaks["bandwidth_gbs"]["copy"] > 0
    True
    """
    name, _ = _isa_code(isa)
    _check_threads(n_threads)
    start = time.perf_counter()
    fma, threads = {}, 1
    dtypes = ["float32", "float64"]
    if name == "avx512" and bf16_dot_available():
        dtypes.append("bfloat16_dot")  # what precision="fast" runs on
    if name == "avx512" and f16_fma_available():
        dtypes.append("float16")  # what precision="fast" runs float16 on
    if name == "avx512" and amx_bf16_available():
        dtypes.append("amx_bf16")  # what bfloat16's dense ops run on
    for dtype in dtypes:
        if progress is not None:
            progress(f"measuring the {dtype} FMA peak ({name}, {n_threads} threads) ...")
        fma[dtype], threads = _fma_peak(n_threads, name, dtype, seconds, repeats)
    if array_bytes is None:
        array_bytes = default_array_bytes()
    if progress is not None:
        progress(f"measuring the memory bandwidth ({name}, {n_threads} threads, "
                 f"2 arrays of {array_bytes / _MIB:.0f} MiB) ...")
    bandwidth = memory_bandwidth(n_threads, name, array_bytes, seconds)
    return {
        "isa": name,
        "threads": threads if CONVVIZ_OPENMP_ENABLED else 1,
        "fma_gflops": fma,
        "bandwidth_gbs": bandwidth,
        "array_bytes": int(array_bytes),
        "llc_bytes": last_level_cache_bytes(),
        "seconds": time.perf_counter() - start,
    }
