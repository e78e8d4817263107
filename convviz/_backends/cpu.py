"""CPU backend: what every op's CPU plan shares when it calls its Cython kernel.

The plans themselves live with their ops (``convviz/ops/<op>.py``); they get
validated calls, and hand the arrays to the kernels as logical-NHWC views (no
copies), with the geometry's numbers, the SIMD variant chosen here and the
thread count.  The kernels read and write every supported dtype themselves:
half types are computed in float32 and rounded once, so no full-size temporary
is made.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .. import _openmp_info
from .._dtypes import BFLOAT16
from ..geometry import AxisGeometry, ConvGeometry


# dtype -> the kernels' type code (see _ext/cvz_common.hpp).
TYPE_CODES = {np.dtype(np.float16): 0, BFLOAT16: 1, np.dtype(np.float32): 2, np.dtype(np.float64): 3}
BFLOAT16_CODE = TYPE_CODES[BFLOAT16]

# Below this many flops a call runs on one thread: a parallel region costs more
# than it saves.  The split never changes a result, only who computes it.
MIN_PARALLEL_WORK = 2.0e6


def _isa_from_environment() -> str:
    requested = os.environ.get("CONVVIZ_ISA", "").strip().lower()
    if requested and requested in _openmp_info.available_isas():
        return requested
    return _openmp_info.best_isa()


_ISA_CODES = {name: code for code, name in enumerate(_openmp_info.ISA_NAMES)}
_ISA = _isa_from_environment()
#: The kernels' code of the SIMD variant in use (an argument of every kernel call).
ISA_CODE = _ISA_CODES[_ISA]


#: Whether the CPU has the bfloat16 dot-product instruction (AVX512_BF16), which
#: ``precision="fast"`` uses while the AVX-512 kernels run (not under ``use_isa("avx2")``)
#: where it outruns the float32 FMA (see ``bf16_dot_pays``).
BF16_DOT = _openmp_info.bf16_dot_available()
#: Whether the CPU has the float16 FMA (AVX512_FP16) and this build its code:
#: ``precision="fast"`` float16 input gradients while the AVX-512 kernels run.
F16_FMA = _openmp_info.f16_fma_available()

#: The fast-path bits of the input-gradient kernel (``dot`` of convviz.ops._input_grad).
FAST_BF16_DOT, FAST_F16_FMA = 1, 2

# vdpbf16ps adds two products per lane, so it doubles the float32 FMA's rate
# where it runs at the FMA's pace (AMD Zen 4: 461 against 230 GFLOP/s); some
# CPUs run it at a quarter of that pace (an Intel Xeon with AVX512_BF16 and no
# AMX: 174 against 352), where the float32 path is faster.  Measured once, on
# one thread, the first time it matters; None until then.  Tests set it.
_bf16_dot_pays: bool | None = None
BF16_DOT_MIN_GAIN = 1.25  # the dot product's GFLOP/s over the float32 FMA's it must reach


def bf16_dot_pays() -> bool:
    """Whether the bfloat16 dot product outruns the float32 FMA on this CPU (measured once, ~20 ms)."""
    global _bf16_dot_pays
    if _bf16_dot_pays is None:
        if not BF16_DOT or "avx512" not in _openmp_info.available_isas():
            _bf16_dot_pays = False
        else:
            from .. import _machine

            dot = _machine.fma_peak_gflops(1, "avx512", "bfloat16_dot", seconds=0.004, repeats=3)
            fma = _machine.fma_peak_gflops(1, "avx512", "float32", seconds=0.004, repeats=3)
            _bf16_dot_pays = dot >= BF16_DOT_MIN_GAIN * fma
    return _bf16_dot_pays


def bf16_dot_in_use() -> bool:
    """Whether ``precision="fast"`` bfloat16 runs on AVX512_BF16 now (the CPU has it, it pays, AVX-512 kernels run)."""
    return BF16_DOT and _ISA == "avx512" and bf16_dot_pays()


def f16_fma_in_use() -> bool:
    """Whether ``precision="fast"`` float16 runs on AVX512_FP16 now (the CPU has it, AVX-512 kernels run)."""
    return F16_FMA and _ISA == "avx512"


def fast_paths() -> int:
    """The fast-path bits the input-gradient kernel may take now (0: none)."""
    return (FAST_BF16_DOT if bf16_dot_in_use() else 0) | (FAST_F16_FMA if f16_fma_in_use() else 0)


#: ``CONVVIZ_AMX=0`` keeps bfloat16 off the AMX tiles (paired timings; a CPU whose tiles misbehave).
AMX_ALLOWED = os.environ.get("CONVVIZ_AMX", "1").strip() not in ("", "0")
_amx_usable: bool | None = None


def amx_usable() -> bool:
    """Whether bfloat16 can run on AMX tiles here: the CPU has AMX-BF16, this
    build holds the code, and Linux granted the process the tile state (asked
    for on the first call)."""
    global _amx_usable
    if _amx_usable is None:
        from ..ops import _forward

        _amx_usable = bool(_forward.amx_usable())
    return _amx_usable


def amx_unusable_reason() -> str:
    """Why bfloat16 does not run on AMX tiles here ("" where it can)."""
    from ..ops import _forward

    return str(_forward.amx_unusable_reason())


def amx_in_use() -> bool:
    """Whether bfloat16 forward passes, input gradients and dense filter gradients
    run on AMX tiles now (usable here, not switched off by ``CONVVIZ_AMX=0``,
    AVX-512 kernels in use); each call still checks that its shape and values
    suit them."""
    return AMX_ALLOWED and _ISA == "avx512" and amx_usable()


def current_isa() -> str:
    """The SIMD variant the kernels run: 'avx512', 'avx2' or 'generic'."""
    return _ISA


@contextmanager
def use_isa(name: str) -> Iterator[None]:
    """Run the kernels with another compiled-in SIMD variant (for tests and benchmarks)."""
    global _ISA, ISA_CODE
    if name not in _openmp_info.available_isas():
        raise ValueError(f"ISA {name!r} is not available here; choose from {_openmp_info.available_isas()}")
    previous, _ISA, ISA_CODE = _ISA, name, _ISA_CODES[name]
    try:
        yield
    finally:
        _ISA, ISA_CODE = previous, _ISA_CODES[previous]


# Results of at least this many bytes are allocated on a cache-line boundary: NumPy's
# large buffers start 16 bytes into a page, so every 64-byte vector store of the
# kernels would straddle two cache lines.
ALIGNED_FROM_BYTES = 1 << 16
CACHE_LINE = 64


def empty_result(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised result array, 64-byte aligned when it is large (see above).

    Examples
    --------
    >>> import numpy as np
    >>> from convviz._backends.cpu import empty_result
    >>> a = empty_result((256, 256), np.dtype(np.float32))
    >>> a.shape, a.dtype, a.ctypes.data % 64, a.flags.c_contiguous, a.flags.writeable
    ((256, 256), dtype('float32'), 0, True, True)
    """
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < ALIGNED_FROM_BYTES:
        return np.empty(shape, dtype=dtype)
    buffer = np.empty(nbytes + CACHE_LINE, dtype=np.uint8)
    start = -buffer.ctypes.data % CACHE_LINE
    return buffer[start:start + nbytes].view(dtype).reshape(shape)


def kernel_view(array: np.ndarray) -> np.ndarray:
    """The array itself when its strides are whole elements (always, unless built oddly)."""
    itemsize = array.itemsize
    for stride in array.strides:
        if stride % itemsize:
            return np.ascontiguousarray(array)
    return array


def tap_ranges(axis: AxisGeometry) -> np.ndarray:
    """[kernel_size, 2] half-open output ranges whose input cell is real, per tap."""
    table = np.empty((axis.kernel_size, 2), dtype=np.intp)
    for tap in range(axis.kernel_size):
        outputs = axis.output_range(tap)
        table[tap] = outputs.start, outputs.stop
    return table


# The kernel call of one op: ``compute(plan, first, second, result, n_threads)`` with
# the op's two tensors and its result as the kernel sees them (NCHW images transposed
# to logical NHWC, int32 seen as uint32).
Compute = Callable[["ConvPlan", np.ndarray, np.ndarray, np.ndarray, int], object]


def window_compute(kernel: Callable[..., int], image_first: bool = True) -> Compute:
    """The kernel call of an op whose kernel takes (image, filter, result), each with its
    type code, then the window, threads, ISA, ``f64`` and the least parallel work (the
    depthwise forward pass and input gradient); ``image_first``: the op's first tensor
    is the image (else its arguments are (filter, image), TensorFlow's order).

    Every float kernel takes its tensors in logical NHWC order with any element
    strides (an NCHW call arrives transposed; filters are HWIO or, depthwise,
    ``[KH, KW, C, M]``), each with its type code (:data:`TYPE_CODES`), overwrites
    its result and returns the scratch bytes it used."""
    def image_then_filter(plan: ConvPlan, image: np.ndarray, filt: np.ndarray, result: np.ndarray,
                          n_threads: int) -> None:
        code = plan.code
        kernel(image, code, filt, code, result, code, *plan.window, n_threads, ISA_CODE, plan.f64, MIN_PARALLEL_WORK)

    def filter_then_image(plan: ConvPlan, filt: np.ndarray, image: np.ndarray, result: np.ndarray,
                          n_threads: int) -> None:  # (not a call of the other: a frame less per call)
        code = plan.code
        kernel(image, code, filt, code, result, code, *plan.window, n_threads, ISA_CODE, plan.f64, MIN_PARALLEL_WORK)

    compute: Compute = image_then_filter if image_first else filter_then_image
    return compute


def _nhwc(array: np.ndarray) -> np.ndarray:
    return array.transpose(0, 2, 3, 1)


class ConvPlan:
    """The CPU plan of every op: what it knows before any call (the result's shape and
    dtype, the layout, the kernels' type code, the column ranges of each kernel tap,
    the window's numbers in the order the kernels take them, and what the op
    prepared from the call: ``extra``), and ``run``, which only allocates the result
    and hands the arrays to the op's kernel call (``compute``).

    ``images`` says which of the two tensors and the result are activations (4-D in
    ``data_format``: transposed to logical NHWC for an NCHW call); the others are
    HWIO filters.  A call where a tensor or the result has no elements returns
    zeros (an empty sum) without calling the kernel.
    """

    __slots__ = ("shape", "dtype", "empty", "nchw", "code", "f64", "int32", "col_ranges", "window", "ints",
                 "compute", "first_image", "second_image", "result_image", "extra", "aligned")

    def __init__(self, geometry: ConvGeometry, dtype: np.dtype, shape: tuple[int, ...], empty: bool,
                 compute: Compute, images: tuple[bool, bool, bool] = (True, True, True), extra: Any = None) -> None:
        g = geometry
        self.shape = shape
        self.dtype = dtype
        self.empty = empty
        self.nchw = g.data_format == "NCHW"
        self.int32 = dtype == np.int32
        self.code = TYPE_CODES.get(dtype, -1)
        self.f64 = dtype == np.float64
        self.col_ranges = tap_ranges(g.cols)
        # strides, dilations, top and left padding; then the group count (the dense kernels')
        self.window = (g.rows.stride, g.cols.stride, g.rows.dilation, g.cols.dilation,
                       g.rows.pad_before, g.cols.pad_before)
        self.ints = (*self.window, g.groups)
        self.compute = compute
        # Transposed only in an NCHW call: the kernels take logical NHWC.
        self.first_image, self.second_image, self.result_image = (self.nchw and image for image in images)
        self.extra = extra
        self.aligned = math.prod(shape) * dtype.itemsize >= ALIGNED_FROM_BYTES  # (decided once: see empty_result)

    def run(self, first: np.ndarray, second: np.ndarray, n_threads: int) -> np.ndarray:
        if self.empty:
            return np.zeros(self.shape, dtype=self.dtype)  # an empty sum
        result = empty_result(self.shape, self.dtype) if self.aligned else np.empty(self.shape, self.dtype)
        if self.int32:  # wrapping int32 arithmetic as uint32 (same bits, modular arithmetic)
            a, b, out = first.view(np.uint32), second.view(np.uint32), result.view(np.uint32)
        else:
            a, b, out = kernel_view(first), kernel_view(second), result
        self.compute(self, _nhwc(a) if self.first_image else a, _nhwc(b) if self.second_image else b,
                     _nhwc(out) if self.result_image else out, n_threads)
        return result
