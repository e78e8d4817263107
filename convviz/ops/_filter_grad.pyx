# distutils: language = c++
# C++ (in _ext/): conv2d_filter_grad.cpp conv2d_amx_filter_grad.cpp cvz_isa.cpp
"""Kernel for the gradient of conv2d with respect to its filter.

Trusts its arguments: ``convviz.ops.filter_grad`` validates everything and
builds the geometry first.  Arrays arrive in logical NHWC order as (possibly
strided) views, so one kernel serves both data formats and non-contiguous inputs.

``filter_grad`` (float16, bfloat16, float32, float64) runs the SIMD kernel of
``_ext/conv2d_filter_grad.cpp``.  The filter is cut into tiles; each tile sums
all of its terms in one fixed order (chunks of output rows, fixed by the
problem size; where the filter has few tiles and the sum is long, the rows in
parts, also fixed by the problem size, each part's sums added in part order
afterwards) and belongs to one unit, so results are bitwise identical for
any thread count and no thread adds into another's memory.  Half types are
read into float32 and rounded once at the end.

Scratch memory (see _ext/kernel_module.pxi): tile sums, per-thread staged rows.
"""

include "kernel_module.pxi"

from _cvz cimport (BF16, conv_args, conv_flops, free_aligned, idx, record_amx_scratch, record_scratch, run_units,
                   scratch_alloc, scratch_alloc_unzeroed, threads_for)
from conv2d_amx_filter_grad cimport (Conv2dAmxFilterGradArgs, conv2d_amx_filter_grad_prepare,
                                     conv2d_amx_filter_grad_window, conv2d_amx_filter_grad_stage,
                                     conv2d_amx_filter_grad_exact,
                                     conv2d_amx_filter_grad_block, conv2d_amx_filter_grad_reduce)
from conv2d_filter_grad cimport (Conv2dFilterGradArgs, conv2d_filter_grad_prepare, conv2d_filter_grad_reduce,
                                 conv2d_filter_grad_unit)


# bfloat16 on AMX tiles (_ext/conv2d_amx_filter_grad.cpp).
# Partial sums of every chunk at once up to this many bytes (more: the chunks run one
# after another): a 3x3 512 -> 512 filter has 2,304 blocks of 4 KiB.
cdef size_t _AMX_PARTIAL_BYTES = 8 << 20
def filter_grad_amx(cnp.ndarray input, cnp.ndarray out_backprop, cnp.ndarray filter_grad, int out_type,
                    Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dil_h, Py_ssize_t dil_w,
                    Py_ssize_t pad_top, Py_ssize_t pad_left, Py_ssize_t groups,
                    int n_threads, double min_parallel_work) -> int:
    """``filter_grad`` for bfloat16 ``input`` and ``out_backprop`` on AMX tiles
    (the caller checked that AMX is in use); return the scratch bytes used, or
    -1 (nothing written) where the shape does not suit the tiles or the values
    could take AMX's sums off the accurate contract (see
    _ext/conv2d_amx_filter_grad.cpp): then run ``filter_grad``."""
    record_scratch(0)  # (a call that does not suit the tiles ran nothing, and not on AMX)
    global _last_amx_plan
    _last_amx_plan = {}
    cdef Conv2dAmxFilterGradArgs a
    conv_args(&a, &a.x, input, BF16, &a.out, filter_grad, out_type, &a.dy, out_backprop, BF16,
              filter_grad.shape[2], groups, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
    cdef double work = conv_flops(&a)
    cdef idx units, chunk, first, last, stage_units
    cdef int threads, allow_flat, restage
    cdef size_t x_bytes, dy_bytes, partial_bytes
    cdef Py_ssize_t used = 0, scratch = 0
    # Flat first where it suits the shape; an input with an infinite or NaN value
    # (which the flat layout's extra columns would meet) is staged again by rows.
    for allow_flat in (1, 0):
        a.x_staged = NULL
        a.dy_staged = NULL
        a.partial = NULL
        a.least_exponent = NULL
        if not conv2d_amx_filter_grad_prepare(&a, allow_flat):
            return -1
        units = a.chunks * a.blocks
        threads = threads_for(work, min_parallel_work, n_threads, units)
        # The chunks one after another where each has blocks enough for every thread
        # or their partial sums would take much memory, else all at once (the same
        # bits). One after another, each chunk is staged just before its blocks run,
        # in buffers of one chunk (in cache; no pages of the whole staged tensors).
        a.sequential = a.chunks == 1 or a.blocks >= 8 * threads or units * 32 * 32 * 4 > _AMX_PARTIAL_BYTES
        x_bytes = <size_t>((a.x_slots_chunk if a.sequential else a.x_slots_all) * a.x_row_elems) * 2
        dy_bytes = <size_t>((a.chunk_rows if a.sequential else a.rows) * a.dy_row_elems) * 2
        stage_units = a.stage_units_chunk if a.sequential else a.stage_units_all
        # Partial sums per chunk and block, or, where the chunks run one after another,
        # per block (none with one chunk: its units round their sums into the result).
        partial_bytes = <size_t>(a.blocks if a.sequential else units) * 32 * 32 * 4 if a.chunks > 1 else 0
        used = x_bytes + dy_bytes + partial_bytes + stage_units
        restage = False
        try:
            # (Staging writes every element a tile reads, and every unit its partial sum: no zeroing.)
            a.x_staged = scratch_alloc_unzeroed(x_bytes)
            a.dy_staged = scratch_alloc_unzeroed(dy_bytes)
            a.partial = <float*>scratch_alloc_unzeroed(partial_bytes)
            a.least_exponent = <unsigned char*>scratch_alloc_unzeroed(stage_units)
            for chunk in range(a.chunks if a.sequential else 1):
                first = chunk * a.chunk_rows if a.sequential else 0
                last = min(first + a.chunk_rows, a.rows) if a.sequential else a.rows
                stage_units = conv2d_amx_filter_grad_window(&a, first, last)
                run_units(conv2d_amx_filter_grad_stage, &a, 0, 0, stage_units, threads, 0)
                # (Nothing is written to the result before the last chunk's blocks.)
                if not conv2d_amx_filter_grad_exact(&a, stage_units):
                    restage = a.flat and a.x_non_finite
                    break
                a.chunk_now = chunk
                if a.sequential:
                    scratch = run_units(conv2d_amx_filter_grad_block, &a, 0, 0, a.blocks,
                                        threads_for(work, min_parallel_work, n_threads, a.blocks), a.scratch_bytes)
                else:
                    scratch = run_units(conv2d_amx_filter_grad_block, &a, 0, 0, units, threads, a.scratch_bytes)
                    scratch += run_units(conv2d_amx_filter_grad_reduce, &a, 0, 0, a.blocks, min(threads, a.blocks),
                                         a.scratch_bytes)
            else:
                used += scratch
                break
            if not restage:
                return -1
        finally:
            free_aligned(a.x_staged)
            free_aligned(a.dy_staged)
            free_aligned(a.partial)
            free_aligned(a.least_exponent)
    _last_amx_plan = {"layout": "flat" if a.flat else "rows", "chunks": a.chunks, "sequential": bool(a.sequential)}
    record_amx_scratch(used)
    return used


_last_amx_plan: dict[str, object] = {}


def last_amx_plan() -> dict[str, object]:
    """How the most recent AMX filter gradient in this process ran, for the tests:
    ``layout`` ``"flat"`` (an image's rows in one run of 32-pixel steps) or ``"rows"``
    (each output row in its own steps), ``chunks`` of steps, and whether they ran
    ``sequential`` (one after another, each block's sums carried); ``{}`` where it did
    not run on the tiles."""
    return _last_amx_plan


cdef idx _last_row_parts = 0


def last_row_parts() -> int:
    """Into how many parts the most recent ``filter_grad`` call in this process cut
    the output rows (1: none; see Conv2dFilterGradArgs::parts): for the tests."""
    return _last_row_parts


def filter_grad(cnp.ndarray input, int x_type, cnp.ndarray out_backprop, int dy_type,
                cnp.ndarray filter_grad, int out_type, const Py_ssize_t[:, ::1] col_ranges,
                Py_ssize_t stride_h, Py_ssize_t stride_w, Py_ssize_t dil_h, Py_ssize_t dil_w,
                Py_ssize_t pad_top, Py_ssize_t pad_left, Py_ssize_t groups,
                int n_threads, int isa, bint f64, double min_parallel_work) -> int:
    """Overwrite ``filter_grad`` [KH, KW, C_in / groups, C_out] with the gradient; return the scratch bytes used.

    ``input`` is [N, H, W, C_in], ``out_backprop`` [N, OH, OW, C_out], any
    strides (in elements).  Type codes: 0 float16, 1 bfloat16, 2 float32,
    3 float64; ``f64`` selects float64 arithmetic.  ``col_ranges[kw]`` is the
    half-open range of output columns whose input column through tap ``kw`` is
    real (from the geometry).
    """
    cdef Conv2dFilterGradArgs a
    conv_args(&a, &a.x, input, x_type, &a.out, filter_grad, out_type, &a.dy, out_backprop, dy_type,
              filter_grad.shape[2], groups, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
    a.acc = NULL
    conv2d_filter_grad_prepare(&a, isa, f64)
    global _last_row_parts
    _last_row_parts = a.parts

    cdef size_t elem = 8 if f64 else 4
    cdef size_t scratch_bytes = <size_t>a.scratch_elems * elem
    cdef double work = conv_flops(&a)
    # Units: (part of the rows, share of the tiles); with several parts, each part
    # is one unit that holds all the tiles (see Conv2dFilterGradArgs::parts), and
    # no more threads than parts.
    cdef int threads = threads_for(work, min_parallel_work, n_threads, a.n_tiles if a.parts == 1 else a.parts)
    cdef size_t acc_bytes = <size_t>(a.parts * a.n_tiles * a.tile_elems) * elem
    cdef idx* ranges = NULL
    cdef idx kw
    cdef Py_ssize_t used = acc_bytes
    a.n_units = threads if a.parts == 1 else 1
    try:
        if acc_bytes:  # (none when the tiles store straight into the result: direct_out)
            a.acc = scratch_alloc(acc_bytes)
        ranges = <idx*>scratch_alloc(2 * a.KW * sizeof(idx))
        for kw in range(a.KW):
            ranges[kw] = col_ranges[kw, 0]
            ranges[a.KW + kw] = col_ranges[kw, 1]
        a.ow_first = ranges
        a.ow_last = ranges + a.KW
        used += run_units(conv2d_filter_grad_unit, &a, isa, f64, a.parts * a.n_units, threads, scratch_bytes)
        if a.parts > 1:
            run_units(conv2d_filter_grad_reduce, &a, isa, f64, a.n_tiles, min(threads, a.n_tiles), 0)
    finally:
        free_aligned(a.acc)
        free_aligned(ranges)
    record_scratch(used)
    return used
