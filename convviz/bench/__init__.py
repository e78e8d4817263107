"""Speed benchmark: convviz against TensorFlow and PyTorch, in one process, on the same data.

Run it as ``convviz bench`` (or ``python benchmarks/bench.py``).  For each case
every implementation is warmed up, then called in interleaved rounds (convviz,
TensorFlow, PyTorch, convviz, ...) so that a noisy machine slows all of them
alike; the table reports the median time per call, GFLOP/s, the speedup over the
fastest peer, convviz's 1-thread time and 2-thread scaling, and convviz's peak
memory beyond its inputs and output.  Peers that are not installed, or that
refuse a case, are reported as such.

The roofline: before the cases, the benchmark measures the machine's limits on
the same threads (:mod:`convviz._machine`: the FMA peak of the kernels' SIMD
variant, the memory bandwidth), and the table sets every case against them:
its compulsory memory traffic, the GB/s that makes, the fractions of the FMA
peak and of the bandwidth, which of the two bounds it, and how close it comes
to the roof that bounds it (:func:`roofline`).

The benchmark is driven by the op records (:data:`convviz.ops.OPS`): a case
names its op and its geometry; the op's arguments are built from the geometry
by name (:data:`ARGUMENTS`), convviz runs through the record, TensorFlow
through ``tf.raw_ops.<tf_name>`` and the FLOP count is the record's
``flops(geometry)``.  PyTorch's call is read from the record's arguments too
(:data:`TORCH_CALLS`: ``conv2d`` for a forward op, aten's ``convolution_backward``
for a gradient, one group per channel for a depthwise op).  To benchmark a new op:
a few cases in :data:`CASES`.

The package, by concern: :mod:`.cases` (the cases and their arguments), :mod:`.peers` (the
calls of convviz, TensorFlow and PyTorch), :mod:`.timing` (interleaved rounds, memory, busy
processes, :func:`run`), :mod:`.machine` (the CPU, its peak and bandwidth), :mod:`.roofline`
(each case against the roof), :mod:`.report` (the tables) and :mod:`.cli` (``convviz bench``).
Their public names are all here.
"""

from __future__ import annotations

from ..ops._op import window_arguments
from .cases import (ARGUMENTS, CASES, DTYPES, PADDING, SHORT_NAMES, SWEEP_BATCHES, Case, Result, _data,
                    sweep_cases)
from .cli import PEAK_ARRAY_BYTES, PEAK_SECONDS, QUICK_PEAK_SECONDS, main
from .machine import ISA_FLAGS, best_peaks, machine_description, measure_peaks, roof_bandwidth
from .peers import TORCH_CALLS, NoPeerCall, TorchCase, _load_peers, convviz_call, tensorflow_call, torch_call
from .report import (LOAD_TARGET, TARGET_SPEEDUP, load_table, machine_load_line, peaks_line, roofline_legend,
                     shortfall_table, sweep_summary, table)
from .roofline import AMX_OPS, Roofline, best_peer_roofline, case_roofline, peak_gflops, roofline
from .timing import (LOAD_MIN_SECONDS, LOAD_PROBE_BYTES, LOAD_SECONDS, MAX_LOAD, _interleaved_times, busy_processes,
                     machine_under_load, run)

__all__ = [
    "AMX_OPS", "ARGUMENTS", "CASES", "DTYPES", "ISA_FLAGS", "LOAD_MIN_SECONDS", "LOAD_PROBE_BYTES", "LOAD_SECONDS",
    "LOAD_TARGET",
    "MAX_LOAD", "PADDING", "PEAK_ARRAY_BYTES", "PEAK_SECONDS", "QUICK_PEAK_SECONDS", "SHORT_NAMES",
    "SWEEP_BATCHES", "TARGET_SPEEDUP", "TORCH_CALLS", "Case", "NoPeerCall", "Result", "Roofline", "TorchCase",
    "best_peaks", "best_peer_roofline", "busy_processes", "case_roofline", "convviz_call", "load_table",
    "machine_description", "machine_load_line", "machine_under_load", "main", "measure_peaks", "peak_gflops", "peaks_line", "roof_bandwidth", "roofline",
    "roofline_legend", "run", "shortfall_table", "sweep_cases", "sweep_summary", "table", "tensorflow_call",
    "torch_call", "window_arguments", "_data", "_interleaved_times", "_load_peers",
]
