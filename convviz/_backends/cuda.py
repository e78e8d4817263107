"""GPU backend: what every op's GPU launcher shares.

Each op keeps its CUDA kernels beside its module (``convviz/ops/<op>.cu``) and
declares them with :func:`declare_kernels`; they are compiled together, after
``cuda_common.cuh`` (the element types), by CuPy once per device and cached.  Arrays stay
on the device (results are CuPy arrays on the inputs' device), and only a small
int64 parameter array is uploaded per call.  Semantics and determinism match the
CPU kernels.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .._dtypes import BFLOAT16
from ..errors import DeviceError

COMMON = Path(__file__).with_name("cuda_common.cuh")
TILES = Path(__file__).with_name("cuda_tiles.cuh")  # the tiled kernels' engine, used by several ops
TYPE_CODES = {np.dtype(np.float16): 0, BFLOAT16: 1, np.dtype(np.float32): 2, np.dtype(np.float64): 3,
              np.dtype(np.int32): 4}
THREADS = 256  # a grid-stride loop's block; the depthwise strips' __launch_bounds__(256, 3) assume it
MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y; the kernel loops over what does not fit

# The ops' kernel sources and the instantiations ("input_grad<2>", ...) they launch.
_SOURCES: list[Path] = []
_KERNEL_NAMES: list[str] = []


def declare_kernels(module_file: str | Path, *templates: str, types: int = 4) -> None:
    """Compile the ``.cu`` beside an op's module (``module_file``: its ``__file__``)
    with the others, and each of its kernel ``templates`` for the first ``types``
    type codes (4: the float types; 5: and int32), as ``name<code>`` (called by each
    op's module at import)."""
    source = Path(module_file).with_suffix(".cu")
    if source not in _SOURCES:
        _SOURCES.append(source)
    for template in templates:
        for code in range(types):
            name = f"{template}<{code}>"
            if name not in _KERNEL_NAMES:
                _KERNEL_NAMES.append(name)
    _module.cache_clear()


def source() -> str:
    """The whole CUDA source: the shared types and tile engine, then every declared op's kernels."""
    return "\n".join(path.read_text() for path in [COMMON, TILES, *_SOURCES])


def kernel_names() -> list[str]:
    """Every declared kernel instantiation."""
    return list(_KERNEL_NAMES)


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
    with cp.cuda.Device(device_id):
        module = cp.RawModule(code=source(), options=("-std=c++17",),
                              name_expressions=list(_KERNEL_NAMES))
        module.compile()
    return module


def kernel(name: str) -> Any:
    """The compiled kernel ``name`` for the current device."""
    cp = cupy_module()
    return _module(cp.cuda.Device().id).get_function(name)


def device_array(cp, array: Any, dtype: np.dtype):
    """The array on the current device (moved there when it is a NumPy array), as the kernel's storage type."""
    if dtype == BFLOAT16:
        if not is_cupy_array(array):
            return cp.asarray(np.ascontiguousarray(array).view(np.uint16))
        return array.view(cp.uint16)
    if dtype == np.int32:
        return (array if is_cupy_array(array) else cp.asarray(array)).view(cp.uint32)
    return array if is_cupy_array(array) else cp.asarray(array)


def element_strides(array: Any) -> list[int]:
    return [s // array.itemsize for s in array.strides]


class DensePlan:
    """A dense op's GPU launch for one signature (shapes, dtype, strides, device): the kernel,
    grid and parameters are chosen and uploaded once, so a repeated call only makes its
    arrays' views, allocates the result and launches (the ops cache plans by signature).

    The kernel takes ``(first, second, result, params, total)``: ``params`` holds
    N H W C_in OH OW C_out KH KW G cin_g cout_g, sh sw dh dw pad_top pad_left,
    then the element strides of ``first``, the result and ``second`` (logical
    NHWC for images -- ``images`` says which of first, second, result are
    images in ``geometry.data_format`` -- and HWIO for filters).  With
    ``second_shape``, ``second`` is read as that shape (a depthwise filter
    [KH, KW, C, M] as the dense [KH, KW, 1, C * M]).  An empty input or result
    gives zeros: an empty sum.

    ``tiled(cp, first, second, result, params, type_code)``, given, may return a launch
    ``(first, second, result) -> None`` of the op's tiled kernel for these views; when it
    returns None the one-thread-per-element kernel ``kernel_name`` runs (its int variant
    ``kernel_name + "_narrow"`` when every offset fits 32 bits).
    """

    def __init__(self, op: str, kernel_name: str, geometry: Any, dtype: np.dtype, shape: tuple[int, ...],
                 first: Any, second: Any, images: tuple[bool, bool, bool],
                 second_shape: tuple[int, ...] | None = None, tiled: Callable[..., Any] | None = None) -> None:
        self.cp = cp = require_device(op)
        self.dtype, self.shape, self.images, self.second_shape = dtype, shape, images, second_shape
        self.nchw = geometry.data_format == "NCHW"
        self.launch: Callable[[Any, Any, Any], None] | None = None
        if 0 in shape or 0 in first.shape or 0 in second.shape:
            return
        a, b, _, c = self.operands(first, second)
        params = dense_params(geometry, a, c, b)
        code = TYPE_CODES[dtype]
        self.launch = tiled(cp, a, b, c, params, code) if tiled is not None else None
        if self.launch is None:
            total = int(np.prod(shape))
            narrow = "_narrow" if loop_fits(a, b, c, total=total) else ""
            self.launch = loop_launch(cp, f"{kernel_name}{narrow}<{code}>", params, total)

    def operands(self, first: Any, second: Any) -> tuple[Any, Any, Any, Any]:
        """``(first, second, result, result's storage)`` as the kernels see them."""
        cp = self.cp
        a = device_array(cp, first, self.dtype)
        b = device_array(cp, second, self.dtype)
        if self.second_shape is not None:
            b = cp.ascontiguousarray(b).reshape(self.second_shape)
        out, store = result_array(cp, self.shape, self.dtype)
        a, b, c = (nhwc(x, self.nchw and image) for x, image in zip((a, b, store), self.images))
        return a, b, out, c

    def run(self, first: Any, second: Any) -> Any:
        if self.launch is None:
            return self.cp.zeros(self.shape, dtype=self.dtype)
        a, b, out, c = self.operands(first, second)
        self.launch(a, b, c)
        return out


class Reordered:
    """A plan whose ``run`` takes the op's tensors in the op's order (``order[i]`` is the
    plan's argument that the op's tensor ``i`` becomes)."""

    def __init__(self, plan: Any, order: tuple[int, ...]) -> None:
        self.plan, self.order = plan, order

    def run(self, *tensors: Any) -> Any:
        args = [None] * len(tensors)
        for given, position in zip(tensors, self.order):
            args[position] = given
        return self.plan.run(*args)


def current_device() -> int:
    """The id of CuPy's current device (part of a GPU plan's signature); -1 without one.
    CuPy as already imported (a CuPy array implies it): a failed import costs tens of us."""
    cp = sys.modules.get("cupy")
    if cp is None:
        return -1
    try:
        return cp.cuda.runtime.getDevice()
    except Exception:  # no CuPy, or no usable device: the call's own checks say which
        return -1


def merge_chunks(cp, partial: Any, out: Any, type_code: int) -> None:
    """out[...] = partial[0] + partial[1] + ..., in chunk order (a split reduction's second pass);
    ``out`` is contiguous and holds one chunk's elements."""
    per_chunk = partial.size // partial.shape[0]
    kernel(f"merge_chunk_partials<{type_code}>")(
        (tiles(per_chunk, THREADS),), (THREADS,), (partial, out, np.int64(partial.shape[0]), np.int64(per_chunk)))


def int64_array(cp, values: list[int]) -> Any:
    """A kernel's parameter array, on the device."""
    return cp.asarray(np.array(values, dtype=np.int64))


# The tiled kernels (cuda_tiles.cuh) index with 32-bit ints, and their tiles are CVZ_BM x CVZ_BN.
TILE_M = TILE_N = 64
TILE_THREADS = 256
MAX_TILE_INDEX = 2**31 - 1
MAX_GRID_Z = 65535
# A split filter-gradient reduction aims at this many blocks (about 8 per SM on a 132-SM GPU);
# chunks never get shorter than MIN_CHUNK_PIXELS.  Both depend on the shape alone, so the sums'
# grouping (and the bits of the result) is the same on every device.
SPLIT_TARGET_BLOCKS = 1024
MIN_CHUNK_PIXELS = 256
# The forward pass and input gradient split their terms only when their tiles make fewer than
# SPLIT_BELOW_BLOCKS blocks (about 2 per SM), aiming at SPLIT_TERMS_TARGET_BLOCKS, with chunks of
# at least MIN_CHUNK_TERMS terms: again the shape alone decides.
SPLIT_BELOW_BLOCKS = 264
SPLIT_TERMS_TARGET_BLOCKS = 512
MIN_CHUNK_TERMS = 256


def tiles(count: int, size: int) -> int:
    return (count + size - 1) // size


def split_terms(blocks: int, terms: int) -> tuple[int, int]:
    """``(chunks, terms per chunk)`` for a tiled product of ``blocks`` blocks summing ``terms``
    terms per output: one chunk unless the blocks are too few to fill a device.

    >>> split_terms(blocks=56, terms=4608)   # fwd_late: 8 x 7 x 7 pixels, 512 -> 512 channels
    (10, 464)
    >>> split_terms(blocks=392, terms=576)
    (1, 576)
    """
    chunks = min(tiles(SPLIT_TERMS_TARGET_BLOCKS, blocks), terms // MIN_CHUNK_TERMS)
    if blocks >= SPLIT_BELOW_BLOCKS or chunks <= 1:
        return 1, terms
    per_chunk = tiles(tiles(terms, chunks), 16) * 16
    return tiles(terms, per_chunk), per_chunk


def split_launch(cp, function: Any, grid: tuple[int, int, int], params: list[int], terms: int, total: int,
                 type_code: int) -> Callable[[Any, Any, Any], None]:
    """The launch of a tiled forward pass or input gradient (grid z = groups, or groups x
    stride phases; ``total`` elements in the result) with its terms split as
    :func:`split_terms` says (see :func:`chunked_launch`)."""
    chunks, per_chunk = split_terms(grid[0] * grid[1] * grid[2], terms)
    if grid[2] * chunks > MAX_GRID_Z:
        chunks, per_chunk = 1, terms
    return chunked_launch(cp, function, grid, params, chunks, per_chunk, total, type_code)


def chunked_launch(cp, function: Any, grid: tuple[int, int, int], params: list[int], chunks: int, per_chunk: int,
                   total: int, type_code: int) -> Callable[[Any, Any, Any], None]:
    """The launch ``(first, second, result)`` of a tiled kernel taking ``(first, second, result,
    partial, params + [per_chunk, chunks, total])`` whose sums come in ``chunks`` chunks on the
    grid's z (``grid`` is the grid of one chunk): one chunk stores straight to the result;
    more store partial sums that merge_chunk_partials adds into the result (``total``
    elements) in chunk order."""
    grid = (grid[0], grid[1], grid[2] * chunks)
    partial_type = cp.float64 if type_code == 3 else (cp.uint32 if type_code == 4 else cp.float32)
    p = int64_array(cp, [*params, per_chunk, chunks, total])
    if chunks == 1:
        unused = cp.empty((1,), dtype=partial_type)
        return lambda first, second, result: function(grid, (TILE_THREADS,), (first, second, result, unused, p))

    def launch(first: Any, second: Any, result: Any) -> None:
        partial = cp.empty((chunks, total), dtype=partial_type)
        function(grid, (TILE_THREADS,), (first, second, result, partial, p))
        merge_chunks(cp, partial, result, type_code)
    return launch


def loop_fits(*arrays: Any, total: int) -> bool:
    """Whether a grid-stride loop over ``total`` threads and these arrays' offsets fit 32 bits."""
    return offsets_fit(*arrays, count=total + blocks(total) * THREADS)


def loop_launch(cp, name: str, params: list[int], total: int) -> Callable[[Any, Any, Any], None]:
    """The launch ``(first, second, result)`` of kernel ``name`` (a grid-stride loop over
    ``total`` threads taking ``(first, second, result, params, total)``), parameters uploaded now."""
    function, p = kernel(name), int64_array(cp, params)
    return lambda a, b, c: function((blocks(total),), (THREADS,), (a, b, c, p, np.int64(total)))


def offsets_fit(*arrays: Any, count: int = 0) -> bool:
    """Whether every element offset of these arrays, and ``count`` more (a loop's last index
    plus a grid's stride), fit a 32-bit int: the kernels' int variants then serve."""
    return count < 2**30 and all(sum((n - 1) * abs(s) for n, s in zip(a.shape, element_strides(a))) < MAX_TILE_INDEX
                                 for a in arrays)


def tiled_fits(*arrays: Any, columns: int, groups: int, blocks_z: int | None = None) -> bool:
    """Whether the tiled kernels serve this call: 32-bit offsets suffice, the grid's z
    (``blocks_z``, default ``groups``) fits, and a group's columns fill a good part of a
    tile (a depthwise-like product, one column per group, would waste 63 of 64; the
    one-thread-per-element kernels serve it)."""
    if not offsets_fit(*arrays):
        return False
    return (groups if blocks_z is None else blocks_z) <= MAX_GRID_Z and (groups == 1 or columns >= 16)


def dense_params(geometry: Any, first: Any, result: Any, second: Any) -> list[int]:
    """The dense kernels' parameters (see DensePlan)."""
    g = geometry
    return [g.batch, *g.input_hw, g.in_channels, *g.output_hw, g.out_channels, *g.kernel_hw, g.groups,
            g.in_channels // g.groups, g.out_channels // g.groups, *g.strides_hw, *g.dilations_hw,
            g.rows.pad_before, g.cols.pad_before, *element_strides(first), *element_strides(result),
            *element_strides(second)]


def nhwc(array: Any, nchw: bool) -> Any:
    return array.transpose(0, 2, 3, 1) if nchw else array


def result_array(cp, shape: tuple[int, ...], dtype: np.dtype):
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


def blocks(total: int) -> int:
    return max(1, min((total + THREADS - 1) // THREADS, 65535 * 8))


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
