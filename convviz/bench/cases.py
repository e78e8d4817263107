"""The benchmark's cases: an op and a geometry each (the list, and every layer of real networks
for ``--sweep``), the arguments built from a case, and a case's results."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import ml_dtypes
import numpy as np

from ..geometry import ConvGeometry
from ..ops import BY_NAME, Op
from ..ops._op import random_values


DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


PADDING = "SAME"  # every case's padding (PyTorch's calls below rely on it)


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
        result = getattr(g, f"{self.record.result_role}_shape")
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


# Each op's float32 NHWC cases: name, n, h, w, c_in, c_out_or_mult, k, stride, dilation.
_FLOAT32 = [
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
]


def _again(names: str, dtype: str = "float32", data_format: str = "NHWC", precision: str = "accurate") -> list[Case]:
    """The float32 NHWC cases ``names`` (space-separated) again, in another dtype, layout or precision."""
    by_name = {case.name: case for case in _FLOAT32}
    return [replace(by_name[name], dtype=dtype, data_format=data_format, precision=precision)
            for name in names.split()]


CASES = [
    *_FLOAT32,
    *_again("bpi_dilated dwf_mobilenet", dtype="float64"),
    *_again("bpi_dilated dwf_mobilenet", dtype="float16"),
    *_again("bpi_dilated dwf_mobilenet", dtype="bfloat16"),
    # bfloat16 at the default precision: on AMX tiles where the CPU has them.
    *_again("fwd_resnet fwd_stem fwd_pointwise bpi_resnet bpf_resnet bpf_pointwise", dtype="bfloat16"),
    # precision="fast": bfloat16 on the CPU's dot-product instruction where it
    # has one (on AMX tiles where they run: exact products, so the same contract).
    *_again("bpi_cifar bpi_resnet bpi_stride2 bpi_dilated bpi_k7", dtype="bfloat16", precision="fast"),
    # precision="fast": float16 on the CPU's float16 FMA where it has one (32 or
    # more input channels per group; bpi_cifar and bpi_k7 have 16).
    *_again("bpi_resnet", dtype="float16"),
    *_again("bpi_resnet bpi_stride2 bpi_dilated", dtype="float16", precision="fast"),
    *_again("bpi_dilated dwf_mobilenet", data_format="NCHW"),
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
    from ..networks import distinct_layers

    found = distinct_layers(networks)
    cases = []
    for op, short in SHORT_NAMES.items():  # a dense layer gets the dense ops, a depthwise one the depthwise ops
        depthwise = op.startswith("depthwise")  # as Case.depthwise tells them apart
        for layer in (layer for layer in found if layer.depthwise == depthwise):
            for n in batches:
                cases.append(Case(short, op, n, layer.size, layer.size, layer.c_in,
                                  1 if depthwise else layer.c_out, layer.k, layer.stride, 1))
    return cases


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
