# distutils: language = c++
# C++ (in _ext/): conv2d_forward.cpp conv2d_amx.cpp cvz_isa.cpp
"""Kernels for the conv2d forward pass.

Trust their arguments: ``convviz.ops.forward`` validates everything and builds
the geometry first.  Arrays arrive in logical NHWC order as (possibly strided)
views, so one kernel serves both data formats and non-contiguous inputs.

``forward`` (float16, bfloat16, float32, float64) runs the SIMD kernel of
``_ext/conv2d_forward.cpp``: work is split over output rows ``(n, oh)``; each
row is written by exactly one thread, and each element sums its terms in one
fixed order (taps, then input channels), so results are bitwise identical for
any thread count.  Half types are read into float32 and rounded once at the end.

``forward_int32`` computes int32 data as ``unsigned int``: two's-complement
multiply-add modulo 2**32 is exactly TensorFlow's wrapping int32 arithmetic,
without signed-overflow undefined behaviour.

Scratch memory (see _ext/kernel_module.pxi): packed filter, per-thread buffers.
"""

include "kernel_module.pxi"

from libc.stdlib cimport calloc, free
from cython.parallel cimport prange, threadid

from _cvz cimport (BF16, conv_args, conv_flops, free_aligned, idx, record_amx_scratch, record_scratch, run_units,
                   scratch_alloc, scratch_alloc_unzeroed, threads_for)
from conv2d_forward cimport (Conv2dForwardArgs, conv2d_forward_prepare, conv2d_forward_pack, conv2d_forward_row,
                             conv2d_forward_block, conv2d_forward_row_chunks, conv2d_forward_stage)
from conv2d_amx cimport (Conv2dAmxArgs, amx_bf16_usable, amx_bf16_unusable_reason, conv2d_amx_prepare,
                         conv2d_amx_exact, Conv2dAmxBatch, conv2d_amx_batch_stage, conv2d_amx_batch_block)


# bfloat16 on AMX tiles (_ext/conv2d_amx.cpp).


def amx_usable() -> bool:
    """Whether bfloat16 can run on AMX tiles here: the CPU has AMX-TILE and
    AMX-BF16, this build holds the code, and Linux granted the tile state."""
    return bool(amx_bf16_usable())


def amx_unusable_reason() -> str:
    """Why bfloat16 does not run on AMX tiles here ("" when it can)."""
    return amx_bf16_unusable_reason().decode()


def forward(cnp.ndarray input, int x_type, cnp.ndarray filter, int w_type, cnp.ndarray output, int y_type,
            Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dil_h, Py_ssize_t dil_w,
            Py_ssize_t pad_top, Py_ssize_t pad_left, Py_ssize_t groups,
            int n_threads, int isa, bint f64, double min_parallel_work, bint amx=False) -> int:
    """Overwrite ``output`` [N, OH, OW, C_out] with conv2d(input, filter); return the scratch bytes used.

    ``input`` is [N, H, W, C_in] and ``filter`` HWIO [KH, KW, C_in / groups,
    C_out], any strides (in elements).  The ``*_type`` codes are 0 float16,
    1 bfloat16, 2 float32, 3 float64; ``f64`` selects float64 arithmetic
    (otherwise float32).  ``isa`` picks the SIMD variant.  ``amx``: bfloat16
    input and filter run on AMX tiles where the call suits them (the caller
    checked ``amx_usable()``); elsewhere, the SIMD kernel.
    """
    cdef Py_ssize_t used
    if amx and x_type == 1 and w_type == 1 and not f64:
        used = forward_amx([(input, filter, output, (stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, groups))],
                           y_type, n_threads, min_parallel_work)
        if used >= 0:
            return used
    cdef Conv2dForwardArgs a
    conv_args(&a, &a.x, input, x_type, &a.w, filter, w_type, &a.y, output, y_type, filter.shape[2], groups,
              stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
    a.packed = NULL
    a.staged = NULL
    conv2d_forward_prepare(&a, isa, f64)

    cdef size_t elem = 8 if f64 else 4
    cdef size_t scratch_bytes = <size_t>a.scratch_elems * elem
    # Units: output rows, or channel blocks when the filter outweighs the input
    # (then each block's part of the filter stays in cache over its rows), each
    # block's rows cut into as many runs as it takes to give the threads even
    # shares (3 blocks on 2 threads left one idle a third of the time).
    cdef idx rows = a.N * a.OH
    cdef idx units = a.G * a.blocks_per_group * rows if a.by_block else rows
    cdef double work = conv_flops(&a)
    cdef int threads = threads_for(work, min_parallel_work, n_threads, units)
    if a.by_block:
        a.row_chunks = conv2d_forward_row_chunks(&a, threads)
        units = a.G * a.blocks_per_group * a.row_chunks
    cdef size_t packed_bytes = <size_t>a.packed_elems * elem
    cdef size_t staged_bytes = <size_t>a.staged_elems * elem
    used = packed_bytes + staged_bytes
    try:
        a.packed = scratch_alloc(packed_bytes)
        with nogil:
            conv2d_forward_pack(&a, isa, f64)
        if staged_bytes:  # channel-block units: every input row staged once, for all the blocks
            a.staged = scratch_alloc(staged_bytes)
            run_units(conv2d_forward_stage, &a, isa, f64, a.N * a.H, threads, 0)
        # (Channel-block units in contiguous shares: a thread packs a block once for its consecutive units.)
        used += run_units(conv2d_forward_block if a.by_block else conv2d_forward_row, &a, isa, f64, units, threads,
                          scratch_bytes, not a.by_block)
    finally:
        free_aligned(a.packed)
        free_aligned(a.staged)
    record_scratch(used)
    return used


def forward_amx(list calls, int y_type, int n_threads, double min_parallel_work) -> int:
    """Several bfloat16 forward calls on AMX tiles as one: ``calls`` is a list of
    (input, filter, output, (stride_h, stride_w, dil_h, dil_w, pad_top,
    pad_left, groups)), arrays as ``forward`` takes them (bfloat16 input and
    filter).  Every call's staging in one parallel region, every call's tiles
    in another (the input gradient's stride phases).  Returns the scratch bytes
    used, or -1 where any call does not suit the tiles (the caller then runs
    ``forward`` on each, which overwrites every output element: a pointwise
    call may have written results before its input was found inexact)."""
    record_scratch(0)  # (calls that do not suit the tiles ran nothing, and not on AMX)
    used = _forward_amx(calls, y_type, n_threads, min_parallel_work)
    if used >= 0:
        record_amx_scratch(used)
    return used


cdef Py_ssize_t _forward_amx(list calls, int y_type, int n_threads, double min_parallel_work) except -2:
    """The bfloat16 calls on AMX tiles; the scratch bytes used, or -1 (outputs
    to be overwritten) where a shape does not suit the tiles, a weight is non-finite or
    subnormal, an input value is too small for AMX's float32 sums to stay
    exact, or a non-finite input value is read past a pixel's channels, where
    it meets zero weights (see _ext/conv2d_amx.cpp)."""
    cdef idx count = len(calls), c, rows = 0
    cdef double work = 0
    cdef Conv2dAmxArgs* args = NULL
    cdef idx* first = NULL
    cdef Conv2dAmxBatch batch
    cdef cnp.ndarray input, filter, output
    cdef size_t scratch_bytes = 0
    cdef Py_ssize_t used = 0
    cdef int threads
    if count == 0:
        return 0
    args = <Conv2dAmxArgs*>calloc(count, sizeof(Conv2dAmxArgs))
    first = <idx*>calloc(2 * (count + 1), sizeof(idx))
    if args == NULL or first == NULL:
        free(args)
        free(first)
        raise MemoryError("convviz: cannot allocate the kernel's scratch memory")
    try:
        for c in range(count):
            input, filter, output, window = calls[c]
            sh, sw, dh, dw, pt, pl, groups = window
            conv_args(&args[c], &args[c].x, input, BF16, &args[c].w, filter, BF16, &args[c].y, output, y_type,
                      filter.shape[2], groups, sh, sw, dh, dw, pt, pl)
            work += conv_flops(&args[c])
            rows += args[c].N * args[c].OH
        threads = threads_for(work, min_parallel_work, n_threads, rows)
        for c in range(count):
            if not conv2d_amx_prepare(&args[c], threads):
                return -1
            first[c + 1] = first[c] + args[c].stage_units
            first[count + 1 + c + 1] = first[count + 1 + c] + args[c].units
            scratch_bytes = max(scratch_bytes, <size_t>args[c].scratch_bytes)
            used += args[c].staged_elems * 2 + args[c].packed_elems * 2 + args[c].stage_units + args[c].units
        batch.calls = args
        batch.count = count
        batch.first_stage = first
        batch.first_unit = first + count + 1
        for c in range(count):
            # (Staging and packing write every element: no zeroing first.)
            args[c].packed = scratch_alloc_unzeroed(<size_t>args[c].packed_elems * 2)
            args[c].staged = scratch_alloc_unzeroed(<size_t>args[c].staged_elems * 2)
            args[c].least_exponent = <unsigned char*>scratch_alloc(args[c].stage_units + args[c].units)
        # One parallel region stages every call's input rows and packs its filter, one runs the tiles.
        run_units(conv2d_amx_batch_stage, &batch, 0, 0, first[count], threads, 0)
        for c in range(count):
            if not conv2d_amx_exact(&args[c], 0):
                return -1
        used += run_units(conv2d_amx_batch_block, &batch, 0, 0, first[2 * count + 1],
                          min(threads, <int>first[2 * count + 1]), scratch_bytes)
        for c in range(count):  # (a pointwise call's input is scanned as its tiles read it)
            if not conv2d_amx_exact(&args[c], 1):
                return -1
    finally:
        for c in range(count):
            free_aligned(args[c].packed)
            free_aligned(args[c].staged)
            free_aligned(args[c].least_exponent)
        free(args)
        free(first)
    return used


# ---------------------------------------------------------------- int32
cdef inline void _int_row(const unsigned int[:, :, :, :] input, const unsigned int[:, :, :, :] filter,
                          unsigned int[:, :, :, :] output, const Py_ssize_t[:, ::1] col_ranges, Py_ssize_t n,
                          Py_ssize_t oh, Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dil_h,
                          Py_ssize_t dil_w, Py_ssize_t pad_top, Py_ssize_t pad_left, Py_ssize_t groups) noexcept nogil:
    cdef Py_ssize_t height = input.shape[1]
    cdef Py_ssize_t out_w = output.shape[2]
    cdef Py_ssize_t out_channels = output.shape[3]
    cdef Py_ssize_t kernel_h = filter.shape[0]
    cdef Py_ssize_t kernel_w = filter.shape[1]
    cdef Py_ssize_t in_per_group = filter.shape[2]
    cdef Py_ssize_t out_per_group = out_channels // groups
    cdef Py_ssize_t ow, co, kh, kw, ih, iw, g, ci, co_base
    cdef unsigned int value

    for ow in range(out_w):
        for co in range(out_channels):
            output[n, oh, ow, co] = 0
    for kh in range(kernel_h):
        ih = oh * stride_h - pad_top + kh * dil_h
        if ih < 0 or ih >= height:
            continue
        for kw in range(kernel_w):
            # col_ranges[kw] holds exactly the outputs whose input column is real.
            for ow in range(col_ranges[kw, 0], col_ranges[kw, 1]):
                iw = ow * stride_w - pad_left + kw * dil_w
                for g in range(groups):
                    co_base = g * out_per_group
                    for ci in range(in_per_group):
                        value = input[n, ih, iw, g * in_per_group + ci]
                        for co in range(co_base, co_base + out_per_group):
                            output[n, oh, ow, co] += value * filter[kh, kw, ci, co]


def forward_int32(const unsigned int[:, :, :, :] input, const unsigned int[:, :, :, :] filter,
                  unsigned int[:, :, :, :] output, const Py_ssize_t[:, ::1] col_ranges, Py_ssize_t stride_h,
                  Py_ssize_t stride_w, Py_ssize_t dil_h, Py_ssize_t dil_w, Py_ssize_t pad_top, Py_ssize_t pad_left,
                  Py_ssize_t groups, int n_threads, double min_parallel_work=0.0) -> int:
    """Overwrite ``output`` (int32 data viewed as uint32) with conv2d(input, filter); return 0.

    ``col_ranges[kw]`` is the half-open range of output columns whose input
    column through tap ``kw`` is real (``AxisGeometry.output_range``).  Below
    ``min_parallel_work`` multiply-adds (times 2) the call runs on one thread.
    It allocates no scratch: the return value (and ``last_scratch_bytes()``) is 0.
    """
    cdef Py_ssize_t out_h = output.shape[1]
    cdef Py_ssize_t rows = output.shape[0] * out_h
    cdef double work = (2.0 * output.shape[0] * out_h * output.shape[2] * output.shape[3]
                        * filter.shape[0] * filter.shape[1] * filter.shape[2])
    cdef int threads = threads_for(work, min_parallel_work, n_threads, rows)
    cdef Py_ssize_t row
    with nogil:
        if threads == 1:
            for row in range(rows):
                _int_row(input, filter, output, col_ranges, row // out_h, row % out_h,
                         stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, groups)
        else:
            for row in prange(rows, num_threads=threads, schedule="static"):
                _int_row(input, filter, output, col_ranges, row // out_h, row % out_h,
                         stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, groups)
    record_scratch(0)
    return 0
