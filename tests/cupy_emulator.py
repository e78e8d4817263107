"""A CPU stand-in for the part of CuPy that convviz's GPU backend uses.

It runs the *real* CUDA source (``convviz/_backends/cuda_*.cuh`` and every
op's ``convviz/ops/<op>.cu``): it is compiled as host C++ (a small prelude maps ``__global__``, ``threadIdx`` and
friends and ``cuda_fp16.h`` onto plain C++), and a "launch" walks the grid and
block one thread at a time.  A kernel without barriers runs each thread to its
end; one that uses ``__syncthreads`` (the tiled kernels) runs its block's threads as
fibers (``ucontext``) that take turns up to each barrier, with ``__shared__``
arrays as statics the block's fibers share -- what the GPU computes, in the same
order.  The one difference is rounding: NVRTC fuses multiply-adds by default and this
host build does not (``-ffp-contract=off``), and the tests' error bounds allow
for either.

"Device" arrays are wrappers around NumPy arrays that, like CuPy arrays, refuse
implicit conversion to NumPy, so a host round trip in convviz fails loudly.
What this cannot check: NVRTC-specific compile errors (tests/test_cuda_source.py
compiles with nvcc where present), races between threads that a barrier does not
order (fibers switch only at barriers), launch limits, speed.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

PRELUDE = r"""
#include <cstdint>
#include <cstring>
#define __global__
#define __device__
#define __launch_bounds__(...)
struct cvz_emulated_dim3 { unsigned x, y, z; };
static cvz_emulated_dim3 threadIdx, blockIdx, blockDim, gridDim;
static inline float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }

// Barriers: the threads of a block are fibers; __syncthreads hands control back to the
// scheduler (cvz_walk_fibers), which resumes every fiber once per barrier, in thread order.
#include <ucontext.h>
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
struct float4 { float x, y, z, w; };
struct uint4 { unsigned int x, y, z, w; };
struct double2 { double x, y; };
static ucontext_t cvz_scheduler;
static ucontext_t* cvz_fiber_context;
static unsigned cvz_fiber_current;
static int cvz_barrier_or_pending, cvz_barrier_or_result;
static inline void __syncthreads() { swapcontext(&cvz_fiber_context[cvz_fiber_current], &cvz_scheduler); }
static inline int __syncthreads_or(int predicate) {
    cvz_barrier_or_pending |= predicate != 0;
    __syncthreads();
    return cvz_barrier_or_result;
}
"""

# GCC's _Float16 converts with round-to-nearest-even, as __float2half_rn does.
FP16_HEADER = r"""
#pragma once
struct __half { _Float16 value; };
static inline float __half2float(__half h) { return (float)h.value; }
static inline __half __float2half_rn(float f) { __half h; h.value = (_Float16)f; return h; }
"""

WALK = r"""
template <class Body>
static void cvz_walk(const unsigned* grid, unsigned threads, Body body) {
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {threads, 1, 1};
    for (unsigned z = 0; z < grid[2]; ++z)
        for (unsigned y = 0; y < grid[1]; ++y)
            for (unsigned x = 0; x < grid[0]; ++x)
                for (unsigned t = 0; t < threads; ++t) {
                    blockIdx = {x, y, z};
                    threadIdx = {t, 0, 0};
                    body();
                }
}

#include <vector>
static void (*cvz_fiber_body)(void*);
static void* cvz_fiber_argument;
static std::vector<char>* cvz_fiber_done;
static void cvz_fiber_entry() {
    cvz_fiber_body(cvz_fiber_argument);
    (*cvz_fiber_done)[cvz_fiber_current] = 1;  // then uc_link returns to the scheduler
}

template <class Body>
static void cvz_walk_fibers(const unsigned* grid, unsigned threads, Body body) {
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {threads, 1, 1};
    std::vector<ucontext_t> contexts(threads);
    std::vector<std::vector<char>> stacks(threads, std::vector<char>(1 << 16));
    std::vector<char> done(threads);
    cvz_fiber_context = contexts.data();
    cvz_fiber_done = &done;
    cvz_fiber_body = [](void* b) { (*static_cast<Body*>(b))(); };
    cvz_fiber_argument = &body;
    for (unsigned z = 0; z < grid[2]; ++z)
        for (unsigned y = 0; y < grid[1]; ++y)
            for (unsigned x = 0; x < grid[0]; ++x) {
                blockIdx = {x, y, z};
                for (unsigned t = 0; t < threads; ++t) {
                    getcontext(&contexts[t]);
                    contexts[t].uc_stack.ss_sp = stacks[t].data();
                    contexts[t].uc_stack.ss_size = stacks[t].size();
                    contexts[t].uc_link = &cvz_scheduler;
                    makecontext(&contexts[t], cvz_fiber_entry, 0);
                    done[t] = 0;
                }
                cvz_barrier_or_pending = 0;
                for (bool waiting = true; waiting;) {  // one round per barrier
                    waiting = false;
                    for (unsigned t = 0; t < threads; ++t) {
                        if (done[t]) continue;
                        cvz_fiber_current = t;
                        threadIdx = {t, 0, 0};
                        swapcontext(&cvz_scheduler, &contexts[t]);
                        waiting = waiting || !done[t];
                    }
                    cvz_barrier_or_result = cvz_barrier_or_pending;
                    cvz_barrier_or_pending = 0;
                }
            }
}
"""

_KERNEL = re.compile(
    r"template\s*<int TYPE>\s*__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)")


def kernel_signatures(code: str) -> dict[str, list[str]]:
    """``{kernel: [parameter type, ...]}`` of every ``template <int TYPE> __global__`` kernel in ``code``."""
    found = {}
    for name, params in _KERNEL.findall(code):
        types = []
        for param in params.split(","):
            param = " ".join(param.split())
            types.append(re.sub(r"\s*\b\w+$", "", param))  # drop the parameter's name
        found[name] = types
    return found


def _bodies(code: str) -> dict[str, str]:
    """``{function: body}`` for every function defined in ``code`` (by brace matching)."""
    bodies: dict[str, str] = {}
    for match in re.finditer(r"\b(\w+)\s*\([^;{}()]*(?:\([^()]*\)[^;{}()]*)*\)\s*(?::[^{;]*)?\{", code):
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(code)):
            depth += {"{": 1, "}": -1}.get(code[end], 0)
            if depth == 0:
                break
        bodies.setdefault(match.group(1), "")
        bodies[match.group(1)] += code[match.end():end]
    return bodies


def uses_barriers(code: str, kernel: str) -> bool:
    """Whether ``kernel`` reaches ``__syncthreads`` (in its body or a function it calls)."""
    bodies = _bodies(code)
    seen, todo = set(), [kernel]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        body = bodies.get(name, "")
        if "__syncthreads" in body:
            return True
        todo.extend(called for called in re.findall(r"\b(\w+)\s*[(<]", body) if called in bodies)
    return False


def instantiation(name: str, types: list[str], type_code: int) -> tuple[str, list[str]]:
    """The kernel's name and parameter types with ``TYPE`` = ``type_code``."""
    return f"{name}<{type_code}>", [re.sub(r"\bTYPE\b", str(type_code), t) for t in types]


def launchers(code: str, name_expressions: list[str]) -> str:
    """One ``extern "C" launch_<kernel>_<type>(grid, threads, argv)`` per name expression:
    it walks the grid and calls the kernel with each argument cast to its parameter type
    (pointers are passed as they are, scalars through a pointer to them)."""
    signatures = kernel_signatures(code)
    out = [WALK]
    for expression in name_expressions:
        kernel, type_code = re.fullmatch(r"(\w+)<(\d)>", expression).groups()
        call, types = instantiation(kernel, signatures[kernel], int(type_code))
        args = ", ".join(f"({t})a[{i}]" if t.endswith("*") else f"*({t}*)a[{i}]" for i, t in enumerate(types))
        walk = "cvz_walk_fibers" if uses_barriers(code, kernel) else "cvz_walk"
        out.append(f'extern "C" void launch_{kernel}_{type_code}(const unsigned* g, unsigned b, void** a) '
                   f"{{ {walk}(g, b, [&] {{ {call}({args}); }}); }}")
    return "\n".join(out)


def compiler() -> str | None:
    """The host C++ compiler the emulator needs (GCC 12+ or Clang 15+ for _Float16), or None."""
    return shutil.which("g++") or shutil.which("clang++")


@functools.lru_cache(maxsize=None)
def _build(code: str, name_expressions: tuple[str, ...]) -> ctypes.CDLL:
    """Compile the kernel source and the launchers into a shared library (once per source)."""
    work = Path(tempfile.mkdtemp(prefix="convviz-cupy-emulator-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # the loaded library needs no file
    (work / "cuda_fp16.h").write_text(FP16_HEADER)
    (work / "prelude.hpp").write_text(PRELUDE)
    source = work / "kernels.cpp"
    source.write_text(code + "\n" + launchers(code, list(name_expressions)))
    library = work / "kernels.so"
    command = [compiler(), "-std=c++17", "-O2", "-ffp-contract=off", "-shared", "-fPIC",
               "-include", str(work / "prelude.hpp"), "-I", str(work), str(source), "-o", str(library)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"the CUDA source does not compile as host C++:\n{result.stderr[-4000:]}")
    return ctypes.CDLL(str(library))


class ndarray:
    """A "device" array: a NumPy array that refuses implicit conversion, as CuPy arrays do."""

    __module__ = "cupy"

    def __init__(self, host: np.ndarray):
        self._host = host

    shape = property(lambda self: self._host.shape)
    dtype = property(lambda self: self._host.dtype)
    ndim = property(lambda self: self._host.ndim)
    size = property(lambda self: self._host.size)
    strides = property(lambda self: self._host.strides)
    itemsize = property(lambda self: self._host.itemsize)
    nbytes = property(lambda self: self._host.nbytes)
    device = property(lambda self: cuda.Device(0))

    def view(self, dtype) -> ndarray:
        return ndarray(self._host.view(dtype))

    def transpose(self, *axes) -> ndarray:
        return ndarray(self._host.transpose(*axes))

    def reshape(self, *shape) -> ndarray:
        return ndarray(self._host.reshape(*shape))

    def get(self) -> np.ndarray:
        return self._host.copy()

    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct "
                        "a NumPy array explicitly.")

    def __repr__(self) -> str:
        return f"emulated cupy array({self._host!r})"


def asarray(value, dtype=None) -> ndarray:
    if isinstance(value, ndarray):
        return value if dtype is None else ndarray(value._host.astype(dtype))
    return ndarray(np.array(value, dtype=dtype, copy=True))


def ascontiguousarray(value) -> ndarray:
    return ndarray(np.ascontiguousarray(value._host)) if isinstance(value, ndarray) else asarray(value)


def asnumpy(value) -> np.ndarray:
    return value.get() if isinstance(value, ndarray) else np.asarray(value)


def empty(shape, dtype=np.float64) -> ndarray:
    # Filled with a signalling pattern: a kernel that skips an element shows up as NaN/garbage.
    host = np.empty(shape, dtype=dtype)
    host.view(np.uint8)[...] = 0xA5
    return ndarray(host)


def zeros(shape, dtype=np.float64) -> ndarray:
    return ndarray(np.zeros(shape, dtype=dtype))


def ones(shape, dtype=np.float64) -> ndarray:
    return ndarray(np.ones(shape, dtype=dtype))


def array_equal(a: ndarray, b: ndarray) -> bool:
    return bool(np.array_equal(a._host, b._host))


class _Function:
    def __init__(self, symbol):
        self._symbol = symbol

    def __call__(self, grid, block, args):
        grid3 = (ctypes.c_uint * 3)(*(tuple(grid) + (1, 1))[:3])
        keep, pointers = [], []
        for arg in args:
            if isinstance(arg, ndarray):
                pointers.append(arg._host.ctypes.data)
            elif isinstance(arg, np.integer):
                scalar = ctypes.c_longlong(int(arg))
                keep.append(scalar)
                pointers.append(ctypes.addressof(scalar))
            else:
                raise TypeError(f"kernel argument of unexpected type {type(arg).__name__} (CuPy wants arrays "
                                "and NumPy scalars)")
        argv = (ctypes.c_void_p * len(pointers))(*pointers)
        self._symbol(grid3, ctypes.c_uint(block[0]), argv)


class RawModule:
    def __init__(self, code: str, options=(), name_expressions=()):
        self._code = code
        self._names = list(name_expressions)
        self._library: ctypes.CDLL | None = None

    def compile(self) -> None:
        self._library = _build(self._code, tuple(self._names))

    def get_function(self, name: str) -> _Function:
        if name not in self._names:
            raise KeyError(f"{name} was not among the name expressions {self._names}")
        if self._library is None:
            self.compile()
        kernel, type_code = re.fullmatch(r"(\w+)<(\d)>", name).groups()
        return _Function(getattr(self._library, f"launch_{kernel}_{type_code}"))


class _Device:
    def __init__(self, device_id: int = 0):
        self.id = device_id
        self.mem_info = (2**33, 2**34)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


cuda = types.SimpleNamespace(
    Device=_Device,
    runtime=types.SimpleNamespace(
        getDeviceCount=lambda: 1,
        getDevice=lambda: 0,
        runtimeGetVersion=lambda: 0,
        getDeviceProperties=lambda i: {"name": b"convviz CPU emulator"},
    ),
)


def as_module() -> types.ModuleType:
    """This emulator as a module to put in ``sys.modules["cupy"]``."""
    module = types.ModuleType("cupy")
    for name in ("ndarray", "asarray", "ascontiguousarray", "asnumpy", "empty", "zeros", "ones", "array_equal",
                 "RawModule", "cuda"):
        setattr(module, name, getattr(sys.modules[__name__], name))
    module.uint16, module.uint32 = np.uint16, np.uint32
    module.float32, module.float64 = np.float32, np.float64
    module.__version__ = "emulated"
    return module
