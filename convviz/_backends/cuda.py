"""GPU backend: the same validated calls, computed by CUDA kernels through CuPy.

The kernels (``cuda_kernels.cu``) are compiled by CuPy once per device and cached;
arrays stay on the device (results are CuPy arrays on the inputs' device), and
only a small int64 parameter array is uploaded per call.  Semantics and
determinism match the CPU kernels: one thread per input-gradient element, and a
two-pass filter-gradient reduction over fixed pixel chunks merged in order.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from .._validate import BFLOAT16, FilterGradCall, InputGradCall

SOURCE = Path(__file__).with_name("cuda_kernels.cu")
TYPE_CODES = {np.dtype(np.float16): 0, BFLOAT16: 1, np.dtype(np.float32): 2, np.dtype(np.float64): 3,
              np.dtype(np.int32): 4}
# The filter gradient's pixel chunk: fixed, so the sum's grouping never depends on the device;
# small, so that even a single image gives every SM blocks to run.
CHUNK_PIXELS = 256
THREADS = 256
MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y; the kernel loops over what does not fit


class DeviceError(RuntimeError):
    """A GPU was asked for but cannot be used (no CuPy, or no CUDA device)."""


def cupy_module():
    """CuPy, or None when it is not installed (or cannot be imported)."""
    try:
        import cupy
    except Exception:  # absent, or installed without a working CUDA
        return None
    return cupy


def is_cupy_array(value: Any) -> bool:
    """True for CuPy arrays (recognised by their module, without importing CuPy)."""
    return type(value).__module__.split(".")[0] == "cupy"


def require_device(op: str):
    """CuPy with at least one CUDA device, or DeviceError saying what is missing."""
    cp = cupy_module()
    if cp is None:
        raise DeviceError(f"{op}: device='gpu' needs CuPy (pip install cupy-cuda12x) and an NVIDIA GPU; "
                          "CuPy is not installed")
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as err:
        raise DeviceError(f"{op}: device='gpu' needs a CUDA device; CuPy found none ({err})") from None
    if count < 1:
        raise DeviceError(f"{op}: device='gpu' needs a CUDA device; CuPy found none")
    return cp


@functools.lru_cache(maxsize=None)
def _module(device_id: int):
    """The compiled kernels for one device (NVRTC compile once, then cached by CuPy and here)."""
    cp = cupy_module()
    names = [f"input_grad<{t}>" for t in range(5)]
    names += [f"filter_grad_partial<{t}>" for t in range(4)] + [f"filter_grad_merge<{t}>" for t in range(4)]
    with cp.cuda.Device(device_id):
        module = cp.RawModule(code=SOURCE.read_text(), options=("-std=c++17",), name_expressions=names)
        module.compile()
    return module


def _device_array(cp, array: Any, dtype: np.dtype):
    """The array on the current device (moved there when it is a NumPy array), as the kernel's storage type."""
    if dtype == BFLOAT16:
        if not is_cupy_array(array):
            return cp.asarray(np.ascontiguousarray(array).view(np.uint16))
        return array.view(cp.uint16)
    if dtype == np.int32:
        return (array if is_cupy_array(array) else cp.asarray(array)).view(cp.uint32)
    return array if is_cupy_array(array) else cp.asarray(array)


def _strides(array: Any) -> list[int]:
    return [s // array.itemsize for s in array.strides]


def _nhwc(array: Any, nchw: bool) -> Any:
    return array.transpose(0, 2, 3, 1) if nchw else array


def _result(cp, shape: tuple[int, ...], dtype: np.dtype):
    """Output array and the storage view the kernel writes."""
    if dtype == BFLOAT16:
        try:
            out = cp.empty(shape, dtype=BFLOAT16)
        except Exception:
            raise TypeError("bfloat16 results on the GPU need a CuPy with a bfloat16 dtype; this CuPy has none "
                            "(compute in float32 and convert, or use the CPU)") from None
        return out, out.view(cp.uint16)
    out = cp.empty(shape, dtype=dtype)
    return out, (out.view(cp.uint32) if dtype == np.int32 else out)


def _blocks(total: int) -> int:
    return max(1, min((total + THREADS - 1) // THREADS, 65535 * 8))


def conv2d_backprop_input(call: InputGradCall) -> Any:
    """Run the CUDA input-gradient kernel for a validated call; returns a CuPy array."""
    cp = require_device("conv2d_backprop_input")
    g = call.geometry
    nchw = g.data_format == "NCHW"
    if call.out_backprop.size == 0 or 0 in g.input_shape:
        return cp.zeros(g.input_shape, dtype=call.dtype)
    dy = _nhwc(_device_array(cp, call.out_backprop, call.dtype), nchw)
    w = _device_array(cp, call.filter, call.dtype)
    out, store = _result(cp, g.input_shape, call.dtype)
    dx = _nhwc(store, nchw)
    params = [g.batch, *g.input_hw, g.in_channels, *g.output_hw, g.out_channels, *g.kernel_hw, g.groups,
              g.in_channels // g.groups, g.out_channels // g.groups, *g.strides_hw, *g.dilations_hw,
              g.rows.pad_before, g.cols.pad_before, *_strides(dy), *_strides(dx), *_strides(w)]
    p = cp.asarray(np.array(params, dtype=np.int64))
    total = int(np.prod(g.input_shape))
    kernel = _module(cp.cuda.Device().id).get_function(f"input_grad<{TYPE_CODES[call.dtype]}>")
    kernel((_blocks(total),), (THREADS,), (dy, w, dx, p, np.int64(total)))
    return out


def depthwise_conv2d_native_backprop_filter(call: FilterGradCall) -> Any:
    """Run the CUDA depthwise filter-gradient kernels for a validated call; returns a CuPy array."""
    cp = require_device("depthwise_conv2d_native_backprop_filter")
    g = call.geometry
    nchw = g.data_format == "NCHW"
    if call.out_backprop.size == 0 or call.input.size == 0:
        return cp.zeros(g.filter_shape, dtype=call.dtype)
    code = TYPE_CODES[call.dtype]
    x = _nhwc(_device_array(cp, call.input, call.dtype), nchw)
    dy = _nhwc(_device_array(cp, call.out_backprop, call.dtype), nchw)
    out, store = _result(cp, g.filter_shape, call.dtype)
    taps = g.kernel_hw[0] * g.kernel_hw[1]
    cm = g.in_channels * g.multiplier
    pixels = g.batch * g.output_hw[0] * g.output_hw[1]
    chunks = (pixels + CHUNK_PIXELS - 1) // CHUNK_PIXELS
    params = [g.batch, *g.input_hw, g.in_channels, g.multiplier, *g.output_hw, *g.kernel_hw, 0, 0, 0,
              *g.strides_hw, *g.dilations_hw, g.rows.pad_before, g.cols.pad_before,
              *_strides(x), *_strides(dy), CHUNK_PIXELS]
    p = cp.asarray(np.array(params, dtype=np.int64))
    partial = cp.empty((chunks, taps, cm), dtype=cp.float64 if call.dtype == np.float64 else cp.float32)
    module = _module(cp.cuda.Device().id)
    # A block covers at most THREADS channels, and no more warps than the channels need.
    threads = min(THREADS, (cm + 31) // 32 * 32)
    pairs = taps * ((cm + threads - 1) // threads)
    module.get_function(f"filter_grad_partial<{code}>")(
        (chunks, min(pairs, MAX_GRID_Y)), (threads,), (x, dy, partial, p))
    per_chunk = taps * cm
    module.get_function(f"filter_grad_merge<{code}>")(
        ((per_chunk + THREADS - 1) // THREADS,), (THREADS,),
        (partial, store, np.int64(chunks), np.int64(per_chunk)))
    return out


def info() -> dict[str, Any]:
    """CuPy, CUDA and device facts for show_versions()."""
    cp = cupy_module()
    if cp is None:
        return {"cupy": None}
    facts: dict[str, Any] = {"cupy": cp.__version__}
    try:
        facts["cuda_runtime"] = cp.cuda.runtime.runtimeGetVersion()
        count = cp.cuda.runtime.getDeviceCount()
        facts["cuda_devices"] = count
        facts["gpu"] = [cp.cuda.runtime.getDeviceProperties(i)["name"].decode() for i in range(count)]
    except Exception as err:  # CuPy installed without a usable device
        facts["cuda_devices"] = 0
        facts["cuda_error"] = str(err)
    return facts
