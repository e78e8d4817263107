"""The machine's measured limits (``convviz._machine``): FMA peak and memory bandwidth,
for every compiled-in SIMD variant, on 1 and 2 threads.  Behaviour only: every figure
is a positive finite number, never compared with a threshold (speed claims come from
running the benchmark, not from tests).  Tiny settings keep the whole file fast."""

from __future__ import annotations

import doctest
import math

import pytest

from convviz import _machine, _openmp_info
from convviz._backends import cpu

ISAS = _openmp_info.available_isas()
TINY_FMA = dict(seconds=0.001, repeats=1)
TINY_ARRAY = 1 << 20  # far inside the cache: the kernels run, the figure means nothing


def _positive(value: float) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fma_peak_for_every_isa_and_thread_count(isa, n_threads, dtype):
    assert _positive(_machine.fma_peak_gflops(n_threads, isa, dtype, **TINY_FMA))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_bandwidth_for_every_isa_and_thread_count(isa, n_threads):
    found = _machine.memory_bandwidth(n_threads, isa, array_bytes=TINY_ARRAY, seconds=0, min_passes=1)
    # Streaming stores only where the variant has them (the generic one stores plainly).
    expected = {"read", "write", "copy"} | ({"copy_streaming"} if isa != "generic" else set())
    assert set(found) == expected
    assert all(_positive(value) for value in found.values())


def test_odd_sizes_and_more_threads_than_blocks():
    # 1000 bytes: one 1024-float block per thread at least; 3 threads on 2 cores
    found = _machine.memory_bandwidth(3, array_bytes=1000, seconds=0, min_passes=2)
    assert all(_positive(value) for value in found.values())


def test_measure_reports_everything_for_the_kernels_isa():
    lines: list[str] = []
    peaks = _machine.measure(2, seconds=0.001, array_bytes=TINY_ARRAY, progress=lines.append, repeats=1)
    assert peaks["isa"] == cpu.current_isa()
    assert peaks["threads"] == (2 if _openmp_info.openmp_enabled() else 1)
    # The bfloat16 dot product and the float16 FMA (precision="fast") are
    # measured where they run (the dot product also where it does not pay).
    dot = cpu.BF16_DOT and cpu.current_isa() == "avx512"
    half = cpu.f16_fma_in_use()
    amx = cpu.current_isa() == "avx512" and _machine.amx_bf16_available()
    assert set(peaks["fma_gflops"]) == ({"float32", "float64"} | ({"bfloat16_dot"} if dot else set())
                                        | ({"float16"} if half else set()) | ({"amx_bf16"} if amx else set()))
    assert all(_positive(v) for v in [*peaks["fma_gflops"].values(), *peaks["bandwidth_gbs"].values()])
    assert peaks["array_bytes"] == TINY_ARRAY and peaks["llc_bytes"] >= 0 and peaks["seconds"] > 0
    assert len(lines) == 3 + dot + half + amx and all(cpu.current_isa() in line and "2 threads" in line for line in lines)


@pytest.mark.parametrize("dtype, name", [("bfloat16_dot", "bfloat16 dot product"), ("float16", "float16 FMA"),
                                         ("amx_bf16", "AMX-BF16 tiles")])
def test_the_half_type_peaks_are_measured_only_where_they_run(dtype, name):
    runs = {"bfloat16_dot": cpu.BF16_DOT and cpu.current_isa() == "avx512", "float16": cpu.f16_fma_in_use(),
            "amx_bf16": cpu.current_isa() == "avx512" and _machine.amx_bf16_available()}[dtype]
    if runs:
        assert _positive(_machine.fma_peak_gflops(2, dtype=dtype, seconds=0.001, repeats=1))
    else:
        with pytest.raises(ValueError, match=name):
            _machine.fma_peak_gflops(1, dtype=dtype, seconds=0.001, repeats=1)
    if "avx2" in ISAS:
        with cpu.use_isa("avx2"), pytest.raises(ValueError, match=name):
            _machine.fma_peak_gflops(1, isa="avx2", dtype=dtype, seconds=0.001, repeats=1)


def test_the_isa_follows_the_kernels_and_a_missing_one_is_refused():
    for isa in ISAS:
        with cpu.use_isa(isa):
            assert _machine.measure(1, seconds=0.001, array_bytes=TINY_ARRAY, repeats=1)["isa"] == isa
    with pytest.raises(ValueError, match="not available"):
        _machine.fma_peak_gflops(1, "sse9")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_threads"):
        _machine.memory_bandwidth(0, array_bytes=TINY_ARRAY)
    with pytest.raises(ValueError, match="dtype"):
        _machine.fma_peak_gflops(1, dtype="int8", **TINY_FMA)  # type: ignore[arg-type]


def test_the_default_arrays_are_far_beyond_the_cache(monkeypatch):
    monkeypatch.setattr(_machine, "last_level_cache_bytes", lambda: 96 << 20)
    assert _machine.default_array_bytes() == 4 * (96 << 20)
    monkeypatch.setattr(_machine, "last_level_cache_bytes", lambda: 0)  # unknown
    assert _machine.default_array_bytes() == 128 << 20
    monkeypatch.setattr(_machine, "last_level_cache_bytes", lambda: 64 << 30)  # absurd: capped
    assert _machine.default_array_bytes() == 2 << 30


def test_cache_sizes_as_linux_writes_them():
    assert _machine._size_in_bytes("32768K\n") == 32 << 20
    assert _machine._size_in_bytes("2M") == 2 << 20
    assert _machine._size_in_bytes("512") == 512


def test_the_docstring_examples_run():
    # pytest collects doctests from .py files only: the compiled module's are run here.
    result = doctest.testmod(_machine, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 5 and result.failed == 0
