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
``flops(geometry)``.  Only PyTorch, whose API differs per op, needs one small
function per op (:data:`TORCH_CALLS`).  To benchmark a new op: a few cases in
:data:`CASES`, and its PyTorch function.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

import ml_dtypes
import numpy as np

from ._info import cpu_model_and_flags
from .errors import DeviceError
from .geometry import ConvGeometry
from .ops import BY_NAME, Op
from .ops._op import random_values, window_arguments

DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
PADDING = "SAME"  # every case's padding (PyTorch's calls below rely on it)
# The CPU flags machine_description() reports: the SIMD and matrix extensions
# that decide which kernels convviz and the peers' oneDNN can run.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16")


@dataclass(frozen=True)
class Case:
    """One benchmark case (float32, NHWC, SAME unless stated).

    ``op`` is the record's name (a key of :data:`convviz.ops.BY_NAME`); the
    sizes describe the convolution whatever the op computes of it, so
    ``c_out_or_mult`` is the output depth, or the channel multiplier of a
    depthwise op.
    """

    name: str
    op: str
    n: int
    h: int
    w: int
    c_in: int
    c_out_or_mult: int
    k: int
    stride: int
    dilation: int
    dtype: str = "float32"
    data_format: str = "NHWC"
    precision: str = "accurate"  # convviz's precision= (the peers run as they do by default)

    def __post_init__(self) -> None:
        if self.op not in BY_NAME:  # fail at import, not halfway through a run
            raise ValueError(f"bench case {self.name}: no op {self.op!r}; choose from {sorted(BY_NAME)}")

    @property
    def record(self) -> Op:
        return BY_NAME[self.op]

    @property
    def depthwise(self) -> bool:
        # TensorFlow names every depthwise op "Depthwise...": their filters are [KH, KW, C, multiplier].
        return self.op.startswith("depthwise")

    @property
    def geometry(self) -> ConvGeometry:
        out_channels = self.c_in * self.c_out_or_mult if self.depthwise else self.c_out_or_mult
        return ConvGeometry.build(
            batch=self.n, input_hw=(self.h, self.w), in_channels=self.c_in, out_channels=out_channels,
            kernel_hw=(self.k, self.k), strides=(self.stride, self.stride),
            dilations=(self.dilation, self.dilation), padding=PADDING, depthwise=self.depthwise,
            data_format=self.data_format)

    @property
    def out_hw(self) -> tuple[int, int]:
        return self.geometry.output_hw

    @property
    def flops(self) -> float:
        return self.record.flops(self.geometry)

    @property
    def bytes(self) -> int:
        """Compulsory memory traffic of one call: every tensor argument read once and
        the result written once (a kernel moves at least this much)."""
        g = self.geometry
        result = {"output": g.output_shape, "input gradient": g.input_shape}.get(self.record.result, g.filter_shape)
        shapes = [ARGUMENTS[name][1](g) for name in self.record.tensors] + [result]
        return int(sum(math.prod(shape) for shape in shapes)) * np.dtype(DTYPES[self.dtype]).itemsize

    @property
    def label(self) -> str:
        extra = "" if (self.dtype, self.data_format) == ("float32", "NHWC") else f" [{self.dtype}, {self.data_format}]"
        if self.precision != "accurate":
            extra += f" {self.precision}"
        return f"{self.name} {self.n},{self.h},{self.w},{self.c_in},{self.c_out_or_mult},{self.k},{self.stride},{self.dilation}{extra}"


def _cases_of(op: str) -> Callable[..., Case]:
    """``make(name, n, h, w, c_in, c_out_or_mult, k, stride, dilation, **options)`` for ``op``'s cases."""
    def make(name: str, *sizes: Any, **options: Any) -> Case:
        return Case(name, op, *sizes, **options)
    return make


_fwd = _cases_of("conv2d")
_bpi = _cases_of("conv2d_backprop_input")
_bpf = _cases_of("conv2d_backprop_filter")
_dwc = _cases_of("depthwise_conv2d_native")
_dwi = _cases_of("depthwise_conv2d_native_backprop_input")
_dwf = _cases_of("depthwise_conv2d_native_backprop_filter")

CASES = [
    _fwd("fwd_tiny", 1, 8, 8, 3, 8, 3, 1, 1),
    _fwd("fwd_resnet", 8, 56, 56, 64, 64, 3, 1, 1),
    _fwd("fwd_stride2", 8, 28, 28, 128, 256, 3, 2, 1),
    _fwd("fwd_stem", 4, 224, 224, 3, 64, 7, 2, 1),
    _fwd("fwd_pointwise", 8, 28, 28, 256, 256, 1, 1, 1),  # MobileNet's 1x1 convolution
    _fwd("fwd_late", 8, 7, 7, 512, 512, 3, 1, 1),
    _bpi("bpi_tiny", 1, 8, 8, 3, 8, 3, 1, 1),
    _bpi("bpi_cifar", 8, 32, 32, 16, 32, 3, 1, 1),
    _bpi("bpi_resnet", 8, 56, 56, 64, 64, 3, 1, 1),
    _bpi("bpi_stride2", 8, 56, 56, 64, 128, 3, 2, 1),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2),
    _bpi("bpi_k7", 4, 64, 64, 16, 16, 7, 1, 1),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2, dtype="float64"),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2, dtype="float16"),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2, dtype="bfloat16"),
    # bfloat16 at the default precision: on AMX tiles where the CPU has them.
    _fwd("fwd_resnet", 8, 56, 56, 64, 64, 3, 1, 1, dtype="bfloat16"),
    _fwd("fwd_stem", 4, 224, 224, 3, 64, 7, 2, 1, dtype="bfloat16"),
    _fwd("fwd_pointwise", 8, 28, 28, 256, 256, 1, 1, 1, dtype="bfloat16"),
    _bpi("bpi_resnet", 8, 56, 56, 64, 64, 3, 1, 1, dtype="bfloat16"),
    _bpf("bpf_resnet", 8, 56, 56, 64, 64, 3, 1, 1, dtype="bfloat16"),
    _bpf("bpf_pointwise", 8, 28, 28, 256, 256, 1, 1, 1, dtype="bfloat16"),
    # precision="fast": bfloat16 on the CPU's dot-product instruction where it
    # has one (on AMX tiles where they run: exact products, so the same contract).
    _bpi("bpi_cifar", 8, 32, 32, 16, 32, 3, 1, 1, dtype="bfloat16", precision="fast"),
    _bpi("bpi_resnet", 8, 56, 56, 64, 64, 3, 1, 1, dtype="bfloat16", precision="fast"),
    _bpi("bpi_stride2", 8, 56, 56, 64, 128, 3, 2, 1, dtype="bfloat16", precision="fast"),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2, dtype="bfloat16", precision="fast"),
    _bpi("bpi_k7", 4, 64, 64, 16, 16, 7, 1, 1, dtype="bfloat16", precision="fast"),
    # precision="fast": float16 on the CPU's float16 FMA where it has one (32 or
    # more input channels per group; bpi_cifar and bpi_k7 have 16).
    _bpi("bpi_resnet", 8, 56, 56, 64, 64, 3, 1, 1, dtype="float16"),
    _bpi("bpi_resnet", 8, 56, 56, 64, 64, 3, 1, 1, dtype="float16", precision="fast"),
    _bpi("bpi_stride2", 8, 56, 56, 64, 128, 3, 2, 1, dtype="float16", precision="fast"),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2, dtype="float16", precision="fast"),
    _bpi("bpi_dilated", 4, 64, 64, 32, 32, 3, 1, 2, data_format="NCHW"),
    _bpf("bpf_tiny", 1, 8, 8, 3, 8, 3, 1, 1),
    _bpf("bpf_resnet", 8, 56, 56, 64, 64, 3, 1, 1),
    _bpf("bpf_stride2", 8, 28, 28, 128, 256, 3, 2, 1),
    _bpf("bpf_stem", 4, 224, 224, 3, 64, 7, 2, 1),
    _bpf("bpf_pointwise", 8, 28, 28, 256, 256, 1, 1, 1),
    _bpf("bpf_late", 8, 7, 7, 512, 512, 3, 1, 1),
    _dwc("dwc_tiny", 1, 8, 8, 4, 1, 3, 1, 1),
    _dwc("dwc_mobilenet", 8, 112, 112, 32, 1, 3, 1, 1),
    _dwc("dwc_stride2", 8, 112, 112, 64, 1, 3, 2, 1),
    _dwc("dwc_k5", 8, 28, 28, 256, 1, 5, 1, 1),
    _dwc("dwc_mult2", 4, 32, 32, 32, 2, 3, 1, 1),
    _dwi("dwi_tiny", 1, 8, 8, 4, 1, 3, 1, 1),
    _dwi("dwi_mobilenet", 8, 112, 112, 32, 1, 3, 1, 1),
    _dwi("dwi_stride2", 8, 112, 112, 64, 1, 3, 2, 1),
    _dwi("dwi_k5", 8, 28, 28, 256, 1, 5, 1, 1),
    _dwi("dwi_mult2", 4, 32, 32, 32, 2, 3, 1, 1),
    _dwf("dwf_tiny", 1, 8, 8, 4, 1, 3, 1, 1),
    _dwf("dwf_mobilenet", 8, 56, 56, 64, 1, 3, 1, 1),
    _dwf("dwf_stride2", 8, 112, 112, 32, 1, 3, 2, 1),
    _dwf("dwf_k5", 8, 28, 28, 256, 1, 5, 1, 1),
    _dwf("dwf_mult2", 4, 32, 32, 32, 2, 3, 1, 1),
    _dwf("dwf_dilated", 4, 64, 64, 64, 1, 3, 1, 2),
    _dwf("dwf_mobilenet", 8, 56, 56, 64, 1, 3, 1, 1, dtype="float64"),
    _dwf("dwf_mobilenet", 8, 56, 56, 64, 1, 3, 1, 1, dtype="float16"),
    _dwf("dwf_mobilenet", 8, 56, 56, 64, 1, 3, 1, 1, dtype="bfloat16"),
    _dwf("dwf_mobilenet", 8, 56, 56, 64, 1, 3, 1, 1, data_format="NCHW"),
]


#: The short name of each op's cases (fwd_resnet, bpi_k7, dwf_mult2, ...).
SHORT_NAMES = {"conv2d": "fwd", "conv2d_backprop_input": "bpi", "conv2d_backprop_filter": "bpf",
               "depthwise_conv2d_native": "dwc", "depthwise_conv2d_native_backprop_input": "dwi",
               "depthwise_conv2d_native_backprop_filter": "dwf"}
SWEEP_BATCHES = (1, 8)


def sweep_cases(networks: list[str] | None = None, batches: tuple[int, ...] = SWEEP_BATCHES) -> list[Case]:
    """The cases of ``--sweep``: each op of every distinct convolution layer of the
    networks (:mod:`convviz.networks`; all of them by default) at each batch size,
    float32, NHWC, SAME, grouped by op.

    Examples
    --------
    >>> cases = sweep_cases(["resnet18"], batches=(1,))
    >>> len(cases), cases[0].label
    (33, 'fwd 1,224,224,3,64,7,2,1')
    """
    from .networks import distinct_layers

    found = distinct_layers(networks)
    cases = []
    for op, short in SHORT_NAMES.items():  # a dense layer gets the dense ops, a depthwise one the depthwise ops
        depthwise = op.startswith("depthwise")  # as Case.depthwise tells them apart
        for layer in (layer for layer in found if layer.depthwise == depthwise):
            for n in batches:
                cases.append(Case(short, op, n, layer.size, layer.size, layer.c_in,
                                  1 if depthwise else layer.c_out, layer.k, layer.stride, 1))
    return cases


def sweep_summary(results: list[Result], peers: tuple[str, ...] = ("tensorflow", "torch"),
                  peaks: dict[str, Any] | None = None) -> str:
    """Per op: how many cases, the min / median / max speedup over the fastest peer,
    how many are under 1.0x, and how many of those have both convviz and the peer
    at 90% or more of the roof (a tie at the machine's limit).

    Examples
    --------
    >>> fwd = [c for c in sweep_cases(["resnet18"], batches=(1,)) if c.op == "conv2d"][:3]
    >>> rs = [Result(c, times={"convviz": t, "torch": 1.0}) for c, t in zip(fwd, (0.5, 1.0, 2.0))]
    >>> print(sweep_summary(rs, ("torch",)))
    | op | cases | min | median | max | under 1.0x | of those, both at 90% of the roof or more |
    |---|---|---|---|---|---|---|
    | conv2d | 3 | 0.50x | 1.00x | 2.00x | 1 | - |
    """
    head = ["op", "cases", "min", "median", "max", "under 1.0x", "of those, both at 90% of the roof or more"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for op in dict.fromkeys(r.case.op for r in results):
        speedups, under, tied = [], 0, 0
        for r in (r for r in results if r.case.op == op):
            t = r.times.get("convviz")
            known = [x for x in (r.times.get(p) for p in peers) if x]
            if not (t and known):
                continue
            speedups.append(min(known) / t)
            if speedups[-1] < 1.0:
                under += 1
                roof, peer_roof = (case_roofline(r, peaks), best_peer_roofline(r, peaks, peers)) if peaks \
                    else (None, None)
                tied += bool(roof and peer_roof and roof.of_roof >= 0.9 and peer_roof.of_roof >= 0.9)
        if speedups:
            lines.append(f"| {op} | {len(speedups)} | {min(speedups):.2f}x | {statistics.median(speedups):.2f}x | "
                         f"{max(speedups):.2f}x | {under} | {tied if peaks else '-'} |")
    return "\n".join(lines)


@dataclass
class Result:
    case: Case
    times: dict[str, float | None] = field(default_factory=dict)  # seconds per call, by implementation
    notes: dict[str, str] = field(default_factory=dict)
    convviz_1thread: float | None = None
    extra_bytes: int | None = None
    output_bytes: int | None = None
    # With ``load``: the mean seconds per call of each implementation while busy processes run
    # beside it, and quiet (from the same calls as ``times``, whose medians those are).
    loaded: dict[str, float | None] = field(default_factory=dict)
    quiet_mean: dict[str, float | None] = field(default_factory=dict)


# -- data and callables ----------------------------------------------------------
class NoPeerCall(LookupError):
    """A peer has no call for the case's op (reported in the table, unlike a peer's error)."""


#: How each argument of an op is made from the case's geometry: a shape gives a
#: random tensor of that shape, a ``list`` the shape itself.  The names are
#: TensorFlow's and mean the same in every op.
ARGUMENTS: dict[str, tuple[type, Callable[[ConvGeometry], tuple[int, ...]]]] = {
    "input": (np.ndarray, lambda g: g.input_shape),
    "filter": (np.ndarray, lambda g: g.filter_shape),
    "out_backprop": (np.ndarray, lambda g: g.output_shape),
    "input_sizes": (list, lambda g: g.input_shape),
    "filter_sizes": (list, lambda g: g.filter_shape),
}


def _data(case: Case, rng: np.random.Generator) -> dict[str, Any]:
    """The op's arguments, by name (tensors in the case's data format, as every implementation gets them)."""
    geometry, data = case.geometry, {}
    for name in case.record.args:
        if name not in ARGUMENTS:
            raise KeyError(f"bench: {case.op} takes {name!r}, which ARGUMENTS does not know how to build")
        kind, shape_of = ARGUMENTS[name]
        shape = shape_of(geometry)
        data[name] = random_values(rng, shape, DTYPES[case.dtype]) if kind is np.ndarray else list(shape)
    return data


def convviz_call(case: Case, data: dict[str, Any], n_threads: int | None,
                 device: str = "cpu") -> Callable[[], Any]:
    op = case.record
    if device == "gpu":  # the same op on CuPy arrays, timed to completion on the device
        import cupy as cp

        gpu = {k: cp.asarray(v) if k in op.tensors else v for k, v in data.items()}
        call = convviz_call(case, gpu, None)

        def timed() -> Any:
            out = call()
            cp.cuda.runtime.deviceSynchronize()
            return out
        return timed
    # Positional through the record, as the public function calls it: plain
    # lists and strings keep the call on the plan cache's fast path.
    args = (*(data[name] for name in op.args), *window_arguments(case.geometry, PADDING), n_threads)
    if case.precision != "accurate":
        return lambda: op.run(*args, precision=case.precision)
    return lambda: op.run(*args)


def tensorflow_call(case: Case, data: dict[str, Any]) -> Callable[[], Any]:
    """``tf.raw_ops.<tf_name>`` with the op's arguments and TensorFlow's 4-value window, by keyword."""
    import tensorflow as tf

    op = case.record
    if op.tf_name is None:
        raise NoPeerCall("no TensorFlow op")
    raw_op = getattr(tf.raw_ops, op.tf_name)
    strides, padding, explicit_paddings, data_format, dilations = window_arguments(case.geometry, PADDING)
    keywords = {name: tf.constant(value) if name in op.tensors else value for name, value in data.items()}
    keywords.update(strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                    data_format=data_format, dilations=dilations)
    return lambda: raw_op(**keywords).numpy()


@dataclass
class TorchCase:
    """A case in PyTorch's terms: NCHW tensors, channels-last in memory when the case is NHWC
    (so PyTorch runs its oneDNN channels-last kernels, as TensorFlow and convviz get NHWC),
    contiguous NCHW when the case is NCHW."""

    case: Case
    data: dict[str, Any]
    torch: Any
    device: str  # "cpu" or "cuda"

    @property
    def dtype(self) -> Any:
        return getattr(self.torch, self.case.dtype)

    @property
    def stride(self) -> list[int]:
        return [self.case.stride] * 2

    @property
    def dilation(self) -> list[int]:
        return [self.case.dilation] * 2

    @property
    def symmetric_pad(self) -> list[int]:
        """PyTorch pads symmetrically: with SAME's odd extra row it computes on a
        window shifted by one pixel -- the same work, slightly different numbers,
        which is all a timing needs (and the output size is the same)."""
        return [((self.case.k - 1) * self.case.dilation) // 2] * 2

    def _laid_out(self, t: Any) -> Any:
        return t.contiguous(memory_format=self.torch.channels_last) if self.case.data_format == "NHWC" else t

    def _tensor(self, array: np.ndarray) -> Any:
        # Through float32: from_numpy knows no bfloat16.
        return self.torch.from_numpy(np.ascontiguousarray(array).astype(np.float32)).to(self.device, self.dtype)

    def activation(self, name: str) -> Any:
        """The argument ``name`` (an input or output of the convolution) as NCHW."""
        array = self.data[name]
        return self._laid_out(self._tensor(array.transpose(0, 3, 1, 2) if self.case.data_format == "NHWC" else array))

    def weight(self, name: str = "filter") -> Any:
        """The filter argument ``name``, TensorFlow's HWIO, as PyTorch's OIHW."""
        return self._laid_out(self._tensor(self.data[name].transpose(3, 2, 0, 1)))

    def depthwise_weight(self, name: str = "filter") -> Any:
        """A depthwise filter [KH, KW, C, M] as PyTorch's grouped weight (C * M, 1, KH, KW)."""
        kh, kw, c, m = self.data[name].shape
        return self._laid_out(self._tensor(self.data[name].reshape(kh, kw, 1, c * m).transpose(3, 2, 0, 1)))

    def empty(self, shape: tuple[int, ...], laid_out: bool = True) -> Any:
        """A tensor that only lends its shape (and memory format) to an aten call."""
        t = self.torch.empty(shape, dtype=self.dtype, device=self.device)
        return self._laid_out(t) if laid_out else t


def _torch_conv2d(t: TorchCase) -> Callable[[], Any]:
    """``torch.nn.functional.conv2d``; an odd SAME padding is padded first, inside the timed call,
    since TensorFlow's result needs it."""
    conv, pad = t.torch.nn.functional.conv2d, t.torch.nn.functional.pad
    x, weight = t.activation("input"), t.weight("filter")
    top, bottom, left, right = t.case.geometry.pads
    stride, dilation = t.stride, t.dilation
    if (top, left) == (bottom, right):
        return lambda: conv(x, weight, None, stride, [top, left], dilation)
    return lambda: conv(pad(x, (left, right, top, bottom)), weight, None, stride, 0, dilation)


def _torch_conv2d_backprop_input(t: TorchCase) -> Callable[[], Any]:
    """aten's convolution backward, input gradient only; the input tensor only lends shape and layout."""
    dy, weight = t.activation("out_backprop"), t.weight("filter")
    c = t.case
    x_meta = t.empty((c.n, c.c_in, c.h, c.w))
    backward, stride, pad, dilation = t.torch.ops.aten.convolution_backward, t.stride, t.symmetric_pad, t.dilation
    return lambda: backward(dy, x_meta, weight, None, stride, pad, dilation, False, [0, 0], 1, [True, False, False])[0]


def _torch_conv2d_backprop_filter(t: TorchCase) -> Callable[[], Any]:
    """aten's convolution backward, filter gradient only; the weight tensor only lends shape and layout."""
    x, dy = t.activation("input"), t.activation("out_backprop")
    c = t.case
    weight = t.empty((c.c_out_or_mult, c.c_in, c.k, c.k))
    backward, stride, pad, dilation = t.torch.ops.aten.convolution_backward, t.stride, t.symmetric_pad, t.dilation
    return lambda: backward(dy, x, weight, None, stride, pad, dilation, False, [0, 0], 1, [False, True, False])[1]


def _torch_depthwise_conv2d_native(t: TorchCase) -> Callable[[], Any]:
    """``torch.nn.functional.conv2d`` with one group per input channel."""
    x, weight, c = t.activation("input"), t.depthwise_weight("filter"), t.case
    conv, stride, pad, dilation = t.torch.nn.functional.conv2d, t.stride, t.symmetric_pad, t.dilation
    return lambda: conv(x, weight, None, stride, pad, dilation, c.c_in)


def _torch_depthwise_conv2d_native_backprop_input(t: TorchCase) -> Callable[[], Any]:
    """aten's convolution backward with one group per channel, input gradient only."""
    dy, weight, c = t.activation("out_backprop"), t.depthwise_weight("filter"), t.case
    x_meta = t.empty((c.n, c.c_in, c.h, c.w))
    backward, stride, pad, dilation = t.torch.ops.aten.convolution_backward, t.stride, t.symmetric_pad, t.dilation
    return lambda: backward(dy, x_meta, weight, None, stride, pad, dilation, False, [0, 0], c.c_in,
                            [True, False, False])[0]


def _torch_depthwise_conv2d_native_backprop_filter(t: TorchCase) -> Callable[[], Any]:
    """aten's convolution backward with one group per channel, filter gradient only."""
    x, dy = t.activation("input"), t.activation("out_backprop")
    c = t.case
    weight = t.empty((c.c_in * c.c_out_or_mult, 1, c.k, c.k), laid_out=False)
    backward, stride, pad, dilation = t.torch.ops.aten.convolution_backward, t.stride, t.symmetric_pad, t.dilation
    return lambda: backward(dy, x, weight, None, stride, pad, dilation, False, [0, 0], c.c_in, [False, True, False])[1]


#: PyTorch's call for each op (by record name): its API differs per op.
TORCH_CALLS: dict[str, Callable[[TorchCase], Callable[[], Any]]] = {
    "conv2d": _torch_conv2d,
    "conv2d_backprop_input": _torch_conv2d_backprop_input,
    "conv2d_backprop_filter": _torch_conv2d_backprop_filter,
    "depthwise_conv2d_native": _torch_depthwise_conv2d_native,
    "depthwise_conv2d_native_backprop_input": _torch_depthwise_conv2d_native_backprop_input,
    "depthwise_conv2d_native_backprop_filter": _torch_depthwise_conv2d_native_backprop_filter,
}


def torch_call(case: Case, data: dict[str, Any], device: str = "cpu") -> Callable[[], Any]:
    """PyTorch's native convolution (:data:`TORCH_CALLS`) on the same values; on the GPU, timed to completion."""
    if case.op not in TORCH_CALLS:
        raise NoPeerCall("no PyTorch call (bench.TORCH_CALLS)")
    import torch

    if device == "gpu":
        # cuDNN rounds float32 convolutions' inputs to TF32 (10-bit mantissa) by default on
        # Ampere and later; convviz sums exact float32 products, so PyTorch is timed doing the same.
        torch.backends.cudnn.allow_tf32 = False
    run = TORCH_CALLS[case.op](TorchCase(case, data, torch, "cuda" if device == "gpu" else "cpu"))
    if device != "gpu":
        return run

    def synchronised() -> Any:
        out = run()
        torch.cuda.synchronize()
        return out
    return synchronised


# -- timing ------------------------------------------------------------------------
def _interleaved_times(calls: dict[str, Callable[[], Any]], min_seconds: float, min_rounds: int,
                       max_rounds: int) -> dict[str, list[float]]:
    """Seconds of every timed call of each implementation, measured in rotating blocks.

    Each round gives every implementation one untimed call and then a few timed
    ones.  Rotating keeps slow drift of a shared machine fair to all; the untimed
    call absorbs the other framework's worker threads, which keep spinning for a
    while after their own parallel region and would otherwise slow the first
    call that follows them.
    """
    times: dict[str, list[float]] = {name: [] for name in calls}
    per_block: dict[str, int] = {}
    for name, call in calls.items():  # warm-up, and calls per block (~20 ms of work)
        call()
        start = time.perf_counter()
        call()
        per_block[name] = max(1, min(20, int(0.02 / max(time.perf_counter() - start, 1e-6))))
    spent = 0.0
    rounds = 0
    while rounds < max_rounds and (rounds < min_rounds or spent < min_seconds):
        for name, call in calls.items():
            call()  # untimed: lets the previous implementation's threads go quiet
            for _ in range(per_block[name]):
                start = time.perf_counter()
                call()
                elapsed = time.perf_counter() - start
                times[name].append(elapsed)
                spent += elapsed
        rounds += 1
    return times


def _extra_memory(case: Case, data: dict[str, np.ndarray], threads: int) -> tuple[int, int]:
    """(convviz's peak bytes beyond inputs and output, output bytes) for one call."""
    from convviz.ops import BY_NAME

    call = convviz_call(case, data, threads)
    call()
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    kernel_scratch = case.record.kernel.last_scratch_bytes()
    return max(0, peak - out.nbytes) + kernel_scratch, out.nbytes


def _load_peers(wanted: list[str], threads: int) -> dict[str, str]:
    """Import the peers; returns {name: version or 'absent: reason'}."""
    status: dict[str, str] = {}
    if "tensorflow" in wanted:
        try:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
            status["tensorflow"] = tf.__version__
        except Exception as err:  # not installed, or broken: report, do not fail
            status["tensorflow"] = f"absent: {type(err).__name__}: {err}"[:120]
    if "torch" in wanted:
        try:
            import torch

            torch.set_num_threads(threads)
            status["torch"] = torch.__version__
        except Exception as err:
            status["torch"] = f"absent: {type(err).__name__}: {err}"[:120]
    return status


def machine_description() -> dict[str, Any]:
    """What the numbers were measured on: CPU model and ISA, cores, convviz's kernels, versions."""
    import convviz
    from convviz import _openmp_info, _wait_policy
    from convviz._backends import cpu

    model, flags = cpu_model_and_flags()
    return {
        "cpu": model,
        # The CPU features that decide which kernels convviz and the peers (oneDNN) can use.
        "isa": [flag for flag in ISA_FLAGS if flag in flags],
        "cores": os.cpu_count(),
        "convviz": convviz.__version__,
        "kernels": cpu.current_isa(),
        "kernels_compiled": list(_openmp_info.available_isas()),
        "openmp": _openmp_info.openmp_enabled(),
        # How idle threads wait (convviz/_wait_policy.py): it decides the loaded times.
        "omp_wait": _wait_policy.describe(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
    }


# -- the machine's limits (the roofline) -------------------------------------------
def measure_peaks(threads: int, seconds: float = 0.1, array_bytes: int | None = None,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The machine's FMA peaks and memory bandwidth on ``threads`` threads, for the
    SIMD variant the kernels run (:func:`convviz._machine.measure`), with the
    bandwidth roof the table uses (``roof_bandwidth_gbs``, :func:`roof_bandwidth`),
    and whether precision="fast" bfloat16 runs on the dot product here
    (``bf16_dot_runs``: it is measured wherever the CPU has it, and taken only
    where it outruns the float32 FMA) and bfloat16's dense ops on AMX tiles
    (``amx_runs``).

    ``seconds`` is the time of each timed run (the whole takes about fifteen
    times that, plus the first touch of the arrays); ``array_bytes`` the size of
    each of the bandwidth's two arrays (None: far beyond the last-level cache).
    """
    from . import _machine

    peaks = _machine.measure(threads, seconds=seconds, array_bytes=array_bytes, progress=progress)
    peaks["roof_bandwidth_gbs"] = roof_bandwidth(peaks["bandwidth_gbs"])
    from ._backends import cpu

    peaks["bf16_dot_runs"] = cpu.bf16_dot_in_use()
    peaks["amx_runs"] = cpu.amx_in_use()
    return peaks


def best_peaks(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two measurements of the machine (:func:`measure_peaks`) merged: the higher
    FMA peak of each type and bandwidth of each kind.  A peak is what the machine
    can do, so a measurement that another process slowed down says less than one
    it did not; measuring before and after the cases leaves a noisy spell less
    chance to lower every one.

    Examples
    --------
    >>> a = {"fma_gflops": {"float32": 200.0}, "bandwidth_gbs": {"copy": 50.0}, "seconds": 2.0}
    >>> b = {"fma_gflops": {"float32": 230.0}, "bandwidth_gbs": {"copy": 40.0}, "seconds": 2.5}
    >>> merged = best_peaks(a, b)
    >>> merged["fma_gflops"], merged["bandwidth_gbs"], merged["seconds"]
    ({'float32': 230.0}, {'copy': 50.0}, 4.5)
    """
    merged = dict(first)
    for key in ("fma_gflops", "bandwidth_gbs"):
        merged[key] = {name: max(value, second[key].get(name, value)) for name, value in first[key].items()}
    merged["seconds"] = first["seconds"] + second["seconds"]
    merged["roof_bandwidth_gbs"] = roof_bandwidth(merged["bandwidth_gbs"])
    return merged


def roof_bandwidth(bandwidth: dict[str, float]) -> float:
    """The bandwidth roof of every case: the faster of the two copies, in GB/s.

    A kernel reads its inputs and writes its result, the traffic of a copy, and a
    copy's bandwidth counts the same bytes (read + written) as a case's
    compulsory traffic does.  The kernels write results of 8 MiB and more with
    streaming stores (``STREAM_MIN_BYTES`` in ``_ext/cvz_common.hpp``), smaller
    ones with ordinary stores, so the faster copy is the most a kernel can
    reach.  The read bandwidth is higher still, but no kernel only reads.

    Examples
    --------
    >>> roof_bandwidth({"read": 40.0, "write": 30.0, "copy": 35.0, "copy_streaming": 50.0})
    50.0
    >>> roof_bandwidth({"read": 40.0, "write": 30.0, "copy": 35.0})  # no streaming stores (generic)
    35.0
    """
    return max(bandwidth["copy"], bandwidth.get("copy_streaming", 0.0))


# The ops whose bfloat16 calls run on AMX tiles where they run (their roof is the tiles' peak).
AMX_OPS = frozenset({"conv2d", "conv2d_backprop_input", "conv2d_backprop_filter"})


def peak_gflops(peaks: dict[str, Any], dtype: str, precision: str = "accurate", op: str | None = None) -> float:
    """The FMA peak that bounds a case of ``dtype``: float64's for float64, else
    float32's (the kernels compute float16 and bfloat16 in float32) -- but the
    AMX tiles' for bfloat16 cases of the dense ops (``AMX_OPS``) where they run,
    and, with precision="fast", the bfloat16 dot product's for bfloat16 where
    it ran and the float16 FMA's for float16 where it was measured.

    Examples
    --------
    >>> peaks = {"fma_gflops": {"float32": 350.0, "float64": 175.0, "bfloat16_dot": 172.0}, "bf16_dot_runs": False}
    >>> peak_gflops(peaks, "bfloat16", "fast")  # the dot product is slower here: float32 ran
    350.0
    >>> peaks = {"fma_gflops": {"float32": 350.0, "float64": 175.0, "amx_bf16": 5500.0}, "amx_runs": True}
    >>> peak_gflops(peaks, "bfloat16", op="conv2d"), peak_gflops(peaks, "bfloat16", op="depthwise_conv2d_native")
    (5500.0, 350.0)
    """
    fma = peaks["fma_gflops"]
    if dtype == "bfloat16" and op in AMX_OPS and "amx_bf16" in fma and peaks.get("amx_runs", True):
        return float(fma["amx_bf16"])
    if dtype == "bfloat16" and precision == "fast" and "bfloat16_dot" in fma and peaks.get("bf16_dot_runs", True):
        return float(fma["bfloat16_dot"])
    if dtype == "float16" and precision == "fast" and "float16" in fma:
        return float(fma["float16"])
    return float(fma["float64"] if dtype == "float64" else fma["float32"])


@dataclass(frozen=True)
class Roofline:
    """Where a case sits under the roofline (rates in GFLOP/s and GB/s, fractions of 1)."""

    gflops: float  # achieved: flops / time
    gbs: float  # compulsory bytes / time
    intensity: float  # flops per compulsory byte
    ridge: float  # peak / bandwidth: the intensity at which the two roofs meet
    bound: str  # "memory" (intensity below the ridge) or "compute"
    of_peak: float  # gflops / FMA peak
    of_bandwidth: float  # gbs / bandwidth
    of_roof: float  # gflops / min(peak, intensity * bandwidth): how close to the roof that bounds it


def roofline(flops: float, nbytes: float, seconds: float, peak: float, bandwidth: float) -> Roofline:
    """Set a case (``flops`` and compulsory ``nbytes`` done in ``seconds``) against
    the machine's FMA ``peak`` (GFLOP/s) and ``bandwidth`` (GB/s).

    The case is memory-bound when its arithmetic intensity (flops per byte) is
    below the ridge point peak / bandwidth, compute-bound at or above it; its
    roof is min(peak, intensity * bandwidth).

    Examples
    --------
    >>> r = roofline(flops=2e9, nbytes=1e8, seconds=0.1, peak=100.0, bandwidth=10.0)
    >>> r.intensity, r.ridge, r.bound, round(r.gflops), round(r.of_peak, 2), round(r.of_roof, 2)
    (20.0, 10.0, 'compute', 20, 0.2, 0.2)
    >>> r = roofline(flops=1e8, nbytes=1e8, seconds=0.02, peak=100.0, bandwidth=10.0)
    >>> r.bound, round(r.gbs), round(r.of_bandwidth, 2), round(r.of_roof, 2)
    ('memory', 5, 0.5, 0.5)
    """
    gflops, gbs = flops / seconds / 1e9, nbytes / seconds / 1e9
    intensity, ridge = flops / nbytes, peak / bandwidth
    return Roofline(gflops=gflops, gbs=gbs, intensity=intensity, ridge=ridge,
                    bound="memory" if intensity < ridge else "compute", of_peak=gflops / peak,
                    of_bandwidth=gbs / bandwidth, of_roof=gflops / min(peak, intensity * bandwidth))


def case_roofline(result: Result, peaks: dict[str, Any] | None) -> Roofline | None:
    """The roofline of a result's convviz time (None without peaks or a time)."""
    return _roofline_of(result, peaks, result.times.get("convviz"))


def _roofline_of(result: Result, peaks: dict[str, Any] | None, seconds: float | None) -> Roofline | None:
    """The roofline of ``seconds`` for a result's case (None without peaks or a time)."""
    if not peaks or not seconds:
        return None
    return roofline(result.case.flops, result.case.bytes, seconds,
                    peak_gflops(peaks, result.case.dtype, result.case.precision, result.case.op),
                    peaks["roof_bandwidth_gbs"])


def best_peer_roofline(result: Result, peaks: dict[str, Any] | None,
                       peers: tuple[str, ...] = ("tensorflow", "torch")) -> Roofline | None:
    """The roofline of the fastest peer's time for a result, against the same roof as
    convviz's (None without peaks or a peer time).  Where the peer already runs
    close to the roof, no kernel can beat it by much: the table shows how close.

    Examples
    --------
    >>> case = next(c for c in CASES if c.name == "fwd_resnet")
    >>> result = Result(case, times={"convviz": 0.006, "torch": 0.005, "tensorflow": 0.007})
    >>> peaks = {"fma_gflops": {"float32": 400.0, "float64": 200.0}, "roof_bandwidth_gbs": 40.0}
    >>> round(best_peer_roofline(result, peaks).of_peak, 2)  # torch's 5 ms
    0.92
    """
    known = [t for t in (result.times.get(p) for p in peers) if t]
    return _roofline_of(result, peaks, min(known) if known else None)


# -- load ----------------------------------------------------------------------------
#: A busy process: Python arithmetic on one core until its deadline, or until its
#: parent is gone, so it never outlives the benchmark that started it.
_BUSY_LOOP = """
import os, sys, time
deadline = time.monotonic() + float(sys.argv[1])
parent = os.getppid()
while time.monotonic() < deadline and os.getppid() == parent:
    for _ in range(20000):
        pass
"""

#: The longest a busy process runs: each case starts its own, so this bounds one case.
LOAD_SECONDS = 120.0
#: At most this many busy processes (``--load``).
MAX_LOAD = 64
#: The least time each case's loaded calls take in all: a stall costs a time slice of
#: the scheduler (milliseconds), so the mean needs many of them to settle.
LOAD_MIN_SECONDS = 1.0


@contextlib.contextmanager
def busy_processes(count: int, seconds: float = LOAD_SECONDS) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Run ``count`` processes that each keep a core busy -- what a browser tab or a
    second notebook kernel does to a laptop -- while the block runs.  They stop at
    the end of the block, and by themselves after ``seconds`` or when this
    process is gone.

    Examples
    --------
    >>> with busy_processes(1, seconds=5) as procs:
    ...     [p.poll() for p in procs]
    [None]
    >>> [p.returncode is not None for p in procs]
    [True]
    """
    if not 0 <= count <= MAX_LOAD:
        raise ValueError(f"busy_processes: count must be 0..{MAX_LOAD}, got {count}")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):  # inside the try: a failed start still stops the ones before it
            procs.append(subprocess.Popen([sys.executable, "-c", _BUSY_LOOP, str(seconds)], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if procs:
            time.sleep(0.1)  # past the interpreter's start, into the loop
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def run(cases: list[Case], threads: int = 2, peers: tuple[str, ...] = ("tensorflow", "torch"),
        min_seconds: float = 0.5, min_rounds: int = 6, max_rounds: int = 200, scaling: bool = True,
        seed: int = 0, progress: Callable[[str], None] | None = None,
        device: str = "cpu", peaks: bool = True, peak_seconds: float = 0.1,
        peak_array_bytes: int | None = None, load: int = 0) -> tuple[list[Result], dict[str, Any]]:
    """Time every case; returns the results and a description of the run.

    With ``load`` > 0 each case is timed twice, quiet and then with ``load`` busy
    processes beside it (:func:`busy_processes`), every implementation alike;
    the loaded times go to ``Result.loaded``.

    On the CPU, the machine's peaks are measured before the cases and again after
    them (``peaks``; see :func:`measure_peaks` for ``peak_seconds`` and
    ``peak_array_bytes``); the higher of each (:func:`best_peaks`) is stored as
    ``info["peaks"]``.  ``device="gpu"`` times convviz on CuPy against
    PyTorch on CUDA (cuDNN); TensorFlow (the CPU build), the CPU peaks and the
    1-thread and memory columns are left out.
    """
    if device == "gpu":
        peers = tuple(p for p in peers if p == "torch")
        scaling = False
        peaks = False
    peer_status = _load_peers(list(peers), threads)
    machine_peaks = measure_peaks(threads, peak_seconds, peak_array_bytes, progress) if peaks else None
    if machine_peaks and progress:
        progress(peaks_line(machine_peaks))
    rng = np.random.default_rng(seed)
    results = []
    for number, case in enumerate(cases, 1):
        step = f"[{number}/{len(cases)}] {case.label}"
        if progress:
            progress(f"{step} ...")
        data = _data(case, rng)
        result = Result(case)
        calls: dict[str, Callable[[], Any]] = {"convviz": convviz_call(case, data, threads, device)}
        if device == "gpu":  # a case the GPU backend refuses is noted; the other cases still run
            try:
                calls["convviz"]()
            except Exception as err:
                result.notes["convviz"] = f"error: {str(err).splitlines()[0][:80]}"
                del calls["convviz"]
        makers = {"tensorflow": tensorflow_call, "torch": lambda c, d: torch_call(c, d, device)}
        for name in peers:
            if peer_status.get(name, "absent").startswith("absent"):
                result.notes[name] = "not installed"
                continue
            try:
                call = makers[name](case, data)
                call()
                calls[name] = call
            except NoPeerCall as err:
                result.notes[name] = str(err)
            except Exception as err:  # the peer refuses this case
                result.notes[name] = f"error: {str(err).splitlines()[0][:80]}"
        if scaling:
            calls["convviz_1thread"] = convviz_call(case, data, 1)
        times = _interleaved_times(calls, min_seconds, min_rounds, max_rounds)
        medians = {name: statistics.median(values) for name, values in times.items()}
        result.convviz_1thread = medians.pop("convviz_1thread", None)
        result.times = {name: medians.get(name) for name in ["convviz", *peers]}
        if load:
            # Means, not medians: under load most calls run at full speed and a few wait a
            # whole time slice for a core; what a loop of calls takes is the mean.
            result.quiet_mean = {name: statistics.fmean(times[name]) for name in result.times if name in times}
            with busy_processes(load):
                loaded = _interleaved_times({k: v for k, v in calls.items() if k != "convviz_1thread"},
                                            max(min_seconds, LOAD_MIN_SECONDS), min_rounds, max_rounds)
            result.loaded = {name: statistics.fmean(loaded[name]) if name in loaded else None
                             for name in ["convviz", *peers]}
        if device == "cpu":
            result.extra_bytes, result.output_bytes = _extra_memory(case, data, threads)
        results.append(result)
        if progress:
            progress(f"{step}: " + ", ".join(
                f"{name} {_ms(t)} ms" if t else f"{name} {result.notes.get(name, '-')}"
                for name, t in result.times.items()) + "".join(
                f"; loaded: {name} {_ms(t)} ms" for name, t in result.loaded.items() if t))
    if machine_peaks and cases:
        machine_peaks = best_peaks(machine_peaks, measure_peaks(threads, peak_seconds, peak_array_bytes, progress))
        if progress:
            progress(peaks_line(machine_peaks) + ", the best of the measurements before and after the cases")
    info = {"machine": machine_description(), "threads": threads, "peers": peer_status, "device": device,
            "load": load}
    if machine_peaks:
        info["peaks"] = machine_peaks
    if device == "gpu":
        from ._backends import cuda

        info["gpu"] = cuda.info()
    return results, info


# -- reporting ---------------------------------------------------------------------
def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


def peaks_line(peaks: dict[str, Any], cpu: str | None = None) -> str:
    """One line of the machine's measured limits (as the benchmark prints them)."""
    fma, bandwidth = peaks["fma_gflops"], peaks["bandwidth_gbs"]
    streaming = (f", copy with streaming stores {bandwidth['copy_streaming']:.1f}"
                 if "copy_streaming" in bandwidth else "")
    cache = f"; last-level cache {_bytes(peaks['llc_bytes'])}" if peaks.get("llc_bytes") else ""
    return (f"machine: {cpu + ', ' if cpu else ''}ISA {peaks['isa']}: FMA peak {fma['float32']:.1f} GFLOP/s "
            f"float32, {fma['float64']:.1f} float64"
            + (f", {fma['bfloat16_dot']:.1f} bfloat16 dot product" if "bfloat16_dot" in fma else "")
            + (f", {fma['float16']:.1f} float16" if "float16" in fma else "")
            + (f", {fma['amx_bf16']:.1f} bfloat16 on AMX tiles" if "amx_bf16" in fma else "")
            + f" ({peaks['isa']}, {peaks['threads']} threads); bandwidth "
            f"read {bandwidth['read']:.1f}, write {bandwidth['write']:.1f}, copy {bandwidth['copy']:.1f}"
            f"{streaming} GB/s (2 arrays of {_bytes(peaks['array_bytes'])}{cache}; measured in "
            f"{peaks['seconds']:.1f} s)")


def roofline_legend(peaks: dict[str, Any]) -> str:
    """What the table's roofline columns mean, with this machine's numbers."""
    bandwidth = peaks["roof_bandwidth_gbs"]
    fma = peaks["fma_gflops"]
    cache = (f" \\* the case's tensors fit in the {_bytes(peaks['llc_bytes'])} last-level cache, where repeated "
             f"calls find them: it can beat the memory bandwidth." if peaks.get("llc_bytes") else "")
    return (
        "Roofline columns: *traffic* is the compulsory memory traffic of a call (every tensor argument read once, the "
        "result written once) and *GB/s* that traffic over convviz's time. *% FMA* is GFLOP/s against the "
        f"measured FMA peak ({fma['float32']:.1f} GFLOP/s float32, {fma['float64']:.1f} float64 for the "
        "float64 cases"
        + (f", {fma['bfloat16_dot']:.1f} for the bfloat16 dot product of precision=\"fast\""
           if "bfloat16_dot" in fma and peaks.get("bf16_dot_runs", True) else "")
        + (f", {fma['float16']:.1f} for the float16 FMA of precision=\"fast\" float16"
           if "float16" in fma else "")
        + (f", {fma['amx_bf16']:.1f} for bfloat16 forward passes and gradients on AMX tiles"
           if "amx_bf16" in fma and peaks.get("amx_runs", True) else "")
        + f"; {peaks['isa']}, {peaks['threads']} threads). *% BW* is GB/s against the copy "
        f"bandwidth, {bandwidth:.1f} GB/s: a kernel reads its inputs and writes its result, as a copy does "
        "(counted the same way, bytes read + written), and the faster of the two measured copies (ordinary "
        "or streaming stores; the kernels stream results of 8 MiB and more) is the most it can reach. "
        "*bound* is the roof the case's arithmetic intensity (flops per compulsory byte) puts it under: "
        f"memory below the ridge point (peak / bandwidth = {peak_gflops(peaks, 'float32') / bandwidth:.1f} "
        "flop/byte in float32), compute above. *% roof* is GFLOP/s against that roof, min(peak, "
        f"intensity x bandwidth); *best peer % roof* the same for the fastest peer's time: a peer close to "
        f"the roof leaves little to beat it by.{cache}")


def table(results: list[Result], peers: tuple[str, ...] = ("tensorflow", "torch"),
          peaks: dict[str, Any] | None = None) -> str:
    """A Markdown table of the results; with the machine's ``peaks``, roofline columns too
    (see :func:`roofline_legend`)."""
    head = ["case (N,H,W,Cin,Cout\\|M,K,s,d)", "convviz ms", "GFLOP/s"]
    if peaks:
        head += ["traffic", "GB/s", "% FMA", "% BW", "bound", "% roof"]
    head += [f"{p} ms" for p in peers] + ["speedup vs best peer"]
    if peaks:
        head.append("best peer % roof")
    head += ["1-thread ms", "2T/1T", "extra memory (output)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        t = r.times.get("convviz")
        peer_times = [r.times.get(p) for p in peers]
        known = [x for x in peer_times if x]
        speedup = f"{min(known) / t:.2f}x" if known and t else "-"
        cells = [r.case.label, _ms(t), f"{r.case.flops / t / 1e9:.1f}" if t else "-"]
        if peaks:
            roof = case_roofline(r, peaks)
            cached = "\\*" if peaks.get("llc_bytes") and r.case.bytes <= peaks["llc_bytes"] else ""
            cells.append(_bytes(r.case.bytes))
            cells += ([f"{roof.gbs:.1f}", f"{roof.of_peak * 100:.0f}", f"{roof.of_bandwidth * 100:.0f}{cached}",
                       roof.bound, f"{roof.of_roof * 100:.0f}"] if roof else ["-"] * 5)
        for p, x in zip(peers, peer_times):
            cells.append(_ms(x) if x else (r.notes.get(p, "-")[:40]))
        scaling = f"{r.convviz_1thread / t:.2f}" if r.convviz_1thread and t else "-"
        cells.append(speedup)
        if peaks:
            peer_roof = best_peer_roofline(r, peaks, peers)
            cells.append(f"{peer_roof.of_roof * 100:.0f}" if peer_roof else "-")
        cells += [_ms(r.convviz_1thread), scaling,
                  f"{_bytes(r.extra_bytes)} ({_bytes(r.output_bytes)})"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: The lead over the fastest peer the shortfall table measures against (issue 16 asks it of
#: every float32 case).
TARGET_SPEEDUP = 1.05


def shortfall_table(results: list[Result], peers: tuple[str, ...] = ("tensorflow", "torch"),
                    peaks: dict[str, Any] | None = None, target: float = TARGET_SPEEDUP) -> str:
    """A Markdown table of the cases under ``target`` times the fastest peer, and what
    ``target`` would take: the fraction of the roof convviz would have to reach,
    ``target`` times the one the peer reaches (its *best peer % roof*).  Where that
    is near or past 100%, the peer already runs at the machine's limit; where it is
    well below, the kernel has room.  Empty without ``peaks`` or without such cases.

    Examples
    --------
    >>> case = next(c for c in CASES if c.name == "fwd_resnet")
    >>> peaks = {"fma_gflops": {"float32": 400.0, "float64": 200.0}, "roof_bandwidth_gbs": 40.0}
    >>> flops_at = lambda fraction: case.flops / (fraction * 400e9)  # seconds at that fraction of the peak
    >>> result = Result(case, times={"convviz": flops_at(0.80), "torch": flops_at(0.84)})
    >>> print(shortfall_table([result], ("torch",), peaks).splitlines()[2])
    | fwd_resnet 8,56,56,64,64,3,1,1 | 0.952x | compute | 80 | 84 | 88 |
    """
    if not peaks:
        return ""
    rows = []
    for r in results:
        t = r.times.get("convviz")
        known = [x for x in (r.times.get(p) for p in peers) if x]
        roof, peer_roof = case_roofline(r, peaks), best_peer_roofline(r, peaks, peers)
        if not (t and known and roof and peer_roof) or min(known) / t >= target:
            continue
        # Three decimals, rounded down: rounded to nearest, a case at 1.0499x would read 1.050x,
        # as if it met the target it misses.
        speedup = math.floor(min(known) / t * 1000 + 1e-9) / 1000
        rows.append(f"| {r.case.label} | {speedup:.3f}x | {roof.bound} | {roof.of_roof * 100:.0f} | "
                    f"{peer_roof.of_roof * 100:.0f} | {peer_roof.of_roof * target * 100:.0f} |")
    if not rows:
        return ""
    head = ["case", "speedup vs best peer", "bound", "convviz % roof", "best peer % roof",
            f"% roof {target:.2f}x needs"]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows])


#: What a loaded call may cost against a quiet one (issue 35: TensorFlow's figure on 2 cores).
LOAD_TARGET = 2.0


def load_table(results: list[Result], peers: tuple[str, ...] = ("tensorflow", "torch"),
               load: int = 0) -> str:
    """A Markdown table of each case's loaded / quiet ratio of the mean time per call,
    for convviz and each peer, and a closing line with convviz's median and worst
    ratio.  Empty when no case was timed under load.

    Examples
    --------
    >>> case = next(c for c in CASES if c.name == "fwd_tiny")
    >>> r = Result(case, times={"convviz": 1e-4, "torch": 2e-4}, quiet_mean={"convviz": 1e-4, "torch": 2e-4},
    ...            loaded={"convviz": 1.5e-4, "torch": 5e-4})
    >>> print(load_table([r], ("torch",), load=2))  # doctest: +NORMALIZE_WHITESPACE
    | case | convviz quiet ms (mean) | convviz loaded ms (mean) | convviz loaded/quiet | torch loaded/quiet |
    |---|---|---|---|---|
    | fwd_tiny 1,8,8,3,8,3,1,1 | 0.100 | 0.150 | 1.50 | 2.50 |
    <BLANKLINE>
    With 2 busy processes beside it, convviz's loaded/quiet ratio: median 1.50, worst 1.50 (fwd_tiny 1,8,8,3,8,3,1,1); target 2.0 or less.
    """
    timed = [r for r in results if r.loaded]
    if not timed:
        return ""
    head = ["case", "convviz quiet ms (mean)", "convviz loaded ms (mean)", "convviz loaded/quiet",
            *(f"{p} loaded/quiet" for p in peers)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ratios: list[tuple[float, str]] = []
    for r in timed:
        cells = [r.case.label, _ms(r.quiet_mean.get("convviz")), _ms(r.loaded.get("convviz"))]
        for name in ("convviz", *peers):
            quiet, loaded = r.quiet_mean.get(name), r.loaded.get(name)
            cells.append(f"{loaded / quiet:.2f}" if quiet and loaded else "-")
            if name == "convviz" and quiet and loaded:
                ratios.append((loaded / quiet, r.case.label))
        lines.append("| " + " | ".join(cells) + " |")
    if ratios:
        worst = max(ratios)
        lines += ["", f"With {load} busy processes beside it, convviz's loaded/quiet ratio: median "
                      f"{statistics.median(x for x, _ in ratios):.2f}, worst {worst[0]:.2f} ({worst[1]}); "
                      f"target {LOAD_TARGET:.1f} or less."]
    return "\n".join(lines)


def _asdict_or_none(roof: Roofline | None) -> dict[str, Any] | None:
    return None if roof is None else asdict(roof)


#: The time of each timed run of the peaks' measurement (about 1.5 s in all, 0.5 s with --quick),
#: and the size of each of the bandwidth's two arrays (None: four times the last-level cache, at
#: least 128 MiB).
PEAK_SECONDS = 0.1
QUICK_PEAK_SECONDS = 0.02
PEAK_ARRAY_BYTES: int | None = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="convviz bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for every implementation (default 2)")
    parser.add_argument("--only", default="",
                        help="comma-separated case names to run (e.g. bpi_resnet,dwf_k5; with --sweep: ops, e.g. fwd,dwf)")
    parser.add_argument("--no-peers", action="store_true", help="time convviz alone")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a rough table in seconds)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--sweep", action="store_true",
                        help="instead of the cases, every op on every distinct layer of real networks "
                             "(convviz.networks) at batch 1 and 8: hundreds of cases, long")
    parser.add_argument("--networks", default="", help="with --sweep: comma-separated networks (default all)")
    parser.add_argument("--batches", default="1,8", help="with --sweep: comma-separated batch sizes (default 1,8)")
    parser.add_argument("--load", type=int, default=0, metavar="N",
                        help="time every case again with N busy processes beside it (each stops by itself "
                             f"within {LOAD_SECONDS:.0f} s) and report loaded/quiet per implementation")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                        help="gpu: convviz on CuPy against PyTorch on CUDA (needs CuPy and a GPU)")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    if not 0 <= args.load <= MAX_LOAD:
        parser.error(f"--load must be 0..{MAX_LOAD}, got {args.load}")
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    names = set(SHORT_NAMES.values()) if args.sweep else {c.name for c in CASES}  # a sweep's cases: by op
    unknown = wanted - names
    if unknown:
        parser.error(f"unknown case(s) {sorted(unknown)}; choose from {sorted(names)}")
    if not args.sweep:
        cases = [c for c in CASES if not wanted or c.name in wanted]
    else:
        from .networks import NETWORKS

        networks = [name.strip() for name in args.networks.split(",") if name.strip()] or None
        unknown = set(networks or ()) - set(NETWORKS)
        if unknown:
            parser.error(f"unknown network(s) {sorted(unknown)}; choose from {sorted(NETWORKS)}")
        try:
            batches = tuple(int(b) for b in args.batches.split(",") if b.strip())
        except ValueError:
            parser.error(f"--batches takes whole numbers, got {args.batches!r}")
        if not batches or min(batches) < 1:
            parser.error(f"--batches takes batch sizes of 1 or more, got {args.batches!r}")
        cases = [c for c in sweep_cases(networks, batches) if not wanted or c.name in wanted]
    peers = () if args.no_peers else ("tensorflow", "torch")
    rounds: dict[str, Any] = dict(min_seconds=0.02, min_rounds=2, max_rounds=10) if args.quick else {}
    if args.device == "gpu":
        from ._backends import cuda

        try:
            cuda.require_device("convviz bench")
        except DeviceError as err:
            parser.error(str(err))
    results, info = run(cases, threads=args.threads, peers=peers, device=args.device,
                        progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
                        peak_seconds=QUICK_PEAK_SECONDS if args.quick else PEAK_SECONDS,
                        peak_array_bytes=PEAK_ARRAY_BYTES, load=args.load, **rounds)
    machine = info["machine"]
    if args.device == "gpu":
        print(f"\nconvviz {machine['convviz']} on {', '.join(info['gpu'].get('gpu', ['?']))} "
              f"(CuPy {info['gpu'].get('cupy')}, CUDA runtime {info['gpu'].get('cuda_runtime')})")
    else:
        print(f"\nconvviz {machine['convviz']} ({machine['kernels']} kernels, OpenMP "
              f"{'on' if machine['openmp'] else 'off'}), {args.threads} threads on {machine['cpu']} "
              f"({machine['cores']} cores; {' '.join(machine['isa']) or 'ISA unknown'})")
        print(peaks_line(info["peaks"], machine["cpu"]))
    for name, version in info["peers"].items():
        print(f"  {name}: {version}")
    print()
    peaks = info.get("peaks")
    columns = peers or ("tensorflow", "torch")  # the peers' columns, "-" where not run
    print(table(results, columns, peaks))
    if args.sweep:
        print(f"\nThe sweep, per op (speedup over the fastest peer):\n")
        print(sweep_summary(results, columns, peaks))
    if peaks:
        print()
        print(roofline_legend(peaks))
        shortfall = shortfall_table(results, columns, peaks)
        if shortfall:
            print(f"\nUnder {TARGET_SPEEDUP:.2f}x the fastest peer, and the fraction of the roof "
                  f"{TARGET_SPEEDUP:.2f}x would take:\n")
            print(shortfall)
    loaded = load_table(results, columns, args.load)
    if loaded:
        print(f"\nUnder load: each case again with {args.load} busy processes beside it\n")
        print(loaded)
    if args.json:
        payload = {"info": info, "results": [
            {**asdict(r.case), "label": r.case.label, "flops": r.case.flops, "bytes": r.case.bytes,
             "times": r.times, "notes": r.notes, "convviz_1thread": r.convviz_1thread,
             "extra_bytes": r.extra_bytes, "output_bytes": r.output_bytes, "loaded": r.loaded,
             "quiet_mean": r.quiet_mean,
             "roofline": _asdict_or_none(case_roofline(r, peaks)),
             "best_peer_roofline": _asdict_or_none(best_peer_roofline(r, peaks, columns))}
            for r in results]}
        with open(args.json, "w") as handle:
            json.dump(payload, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
