# What every convviz kernel module shares: the index type, aligned scratch
# memory (cvz_common.hpp), the ISA codes (cvz_isa.hpp), the per-thread record
# of the latest call (cvz_call_record.hpp), and small helpers.
# Each op's module declares its own kernel (the interface part of its _ext/<op>.cpp).
# This file and _openmp.pxd stay in _ext/, on Cython's include path (setup.py).
cimport numpy as cnp
from cython.parallel cimport parallel, prange, threadid
from libc.string cimport memset

cdef extern from "cvz_common.hpp" namespace "cvz" nogil:
    ctypedef Py_ssize_t idx
    void* alloc_zeroed(size_t bytes)
    void* alloc_aligned(size_t bytes)
    void free_aligned(void* p)

    # The kernels' type codes.
    enum DType:
        F16, BF16, F32, F64

    # One tensor of a kernel's arguments: data, type code, 4 strides in elements.
    cdef cppclass Tensor:
        void* data
        int type
        idx s[4]

    # What every dense op's argument struct derives from (cvz_common.hpp).
    cdef cppclass ConvDims:
        idx N, H, W, Cin, OH, OW, Cout, KH, KW, G, cin_g, cout_g
        idx sh, sw, dh, dw, pt, pl
        double flops()

cdef extern from "cvz_isa.hpp" namespace "cvz" nogil:
    int isa_best()
    bint isa_compiled(int isa)
    bint cpu_has_bf16_dot()
    bint cpu_has_f16_fma()

# The module's most recent kernel call, per thread (C++ thread_locals: no
# Python-level cost per call): its scratch bytes, and whether it ran on AMX.
cdef extern from "cvz_call_record.hpp" nogil:
    void record_scratch "cvz_record_scratch"(size_t bytes)
    void record_amx_scratch "cvz_record_amx_scratch"(size_t bytes)
    size_t recorded_scratch "cvz_recorded_scratch"()
    bint recorded_amx "cvz_recorded_amx"()


cdef inline void element_strides(cnp.ndarray array, idx* out) noexcept:
    """The 4 strides of ``array`` in elements (the kernels index elements, NumPy counts bytes)."""
    cdef int d
    cdef idx itemsize = cnp.PyArray_ITEMSIZE(array)
    for d in range(4):
        out[d] = cnp.PyArray_STRIDES(array)[d] // itemsize


cdef inline void* array_data(cnp.ndarray array, idx* strides) noexcept:
    """NumPy's data pointer of ``array``; its 4 strides in elements go into ``strides``."""
    element_strides(array, strides)
    return cnp.PyArray_DATA(array)


cdef inline void conv_dims(ConvDims* d, cnp.ndarray inputs, cnp.ndarray outputs, idx kernel_h, idx kernel_w,
                           idx cin_g, idx groups, idx stride_h, idx stride_w, idx dil_h, idx dil_w, idx pad_top,
                           idx pad_left) noexcept:
    """Fill a kernel's sizes and window: ``inputs`` is input-shaped [N, H, W, C_in] and
    ``outputs`` output-shaped [N, OH, OW, C_out] (logical NHWC, whichever arrays the op has)."""
    d.N, d.H, d.W, d.Cin = inputs.shape[0], inputs.shape[1], inputs.shape[2], inputs.shape[3]
    d.OH, d.OW, d.Cout = outputs.shape[1], outputs.shape[2], outputs.shape[3]
    d.KH, d.KW, d.G, d.cin_g, d.cout_g = kernel_h, kernel_w, groups, cin_g, d.Cout // groups
    d.sh, d.sw, d.dh, d.dw, d.pt, d.pl = stride_h, stride_w, dil_h, dil_w, pad_top, pad_left


cdef inline void tensor(Tensor* t, cnp.ndarray array, int type_code) noexcept:
    """``array``'s data pointer, its type code and its 4 strides in elements, into ``t``."""
    t.data = array_data(array, t.s)
    t.type = type_code


cdef inline void conv_args(ConvDims* d, Tensor* input, cnp.ndarray input_array, int input_type,
                           Tensor* filter, cnp.ndarray filter_array, int filter_type,
                           Tensor* output, cnp.ndarray output_array, int output_type, idx cin_g, idx groups,
                           idx stride_h, idx stride_w, idx dil_h, idx dil_w, idx pad_top, idx pad_left) noexcept:
    """A kernel's three tensors by their roles in the convolution -- the input-shaped
    one [N, H, W, C_in], the filter [KH, KW, ...] and the output-shaped one [N, OH,
    OW, C_out], whichever of them the op reads or writes -- and its sizes and window."""
    tensor(input, input_array, input_type)
    tensor(filter, filter_array, filter_type)
    tensor(output, output_array, output_type)
    conv_dims(d, input_array, output_array, filter_array.shape[0], filter_array.shape[1], cin_g, groups,
              stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)


cdef inline double conv_flops(const ConvDims* d) noexcept nogil:
    """The convolution's multiply-adds times two (``ConvGeometry.flops``): the work that
    decides whether a call is worth a parallel region (``threads_for``; ConvDims::flops)."""
    return d.flops()


cdef inline int threads_for(double work, double min_parallel_work, int n_threads, idx units) noexcept nogil:
    """Threads for a call: one when the work is too small to pay for a parallel
    region, never more than its ``units`` of work (rows or blocks), at least one."""
    cdef int threads = n_threads if work >= min_parallel_work else 1
    if threads > units:
        threads = <int>units
    return threads if threads >= 1 else 1


cdef inline void* scratch_alloc(size_t bytes) except NULL:
    """Zeroed, 64-byte aligned scratch for a kernel (free with free_aligned); MemoryError if none."""
    cdef void* p = alloc_zeroed(bytes)
    if p == NULL:
        raise MemoryError("convviz: cannot allocate the kernel's scratch memory")
    return p


cdef inline void* scratch_alloc_unzeroed(size_t bytes) except NULL:
    """64-byte aligned scratch a kernel writes in full before reading (free with
    free_aligned); at least one byte; MemoryError if none."""
    cdef void* p = alloc_aligned(bytes if bytes else 1)
    if p == NULL:
        raise MemoryError("convviz: cannot allocate the kernel's scratch memory")
    return p


# A kernel's packing step: the filter into the packed buffer of args (its argument struct).
ctypedef void (*PackFn)(void* args, int isa, int f64) noexcept nogil


# A kernel's unit of parallel work (one output row, one block of a reduction):
# args is the op's argument struct, scratch this thread's zeroed scratch.
ctypedef void (*UnitFn)(const void* args, int isa, int f64, idx unit, void* scratch) noexcept nogil


cdef inline Py_ssize_t run_units(UnitFn fn, const void* args, int isa, int f64, idx units, int threads,
                                 size_t scratch_bytes, bint claimed=True) except -1:
    """Call ``fn`` on every unit in [0, units) on ``threads`` threads without the
    GIL, each thread with its own zeroed scratch of ``scratch_bytes``; return the
    scratch bytes allocated.  Each unit writes its own outputs, so the result
    does not depend on which thread runs which unit.

    ``claimed``: threads claim runs of consecutive units as they go (about eight
    runs per thread), so that on a busy machine a thread the OS has set aside for
    a time slice holds up one run, not a fixed half of the call, while the other
    takes the rest (the depthwise input gradient at stride 2 beside two busy
    processes: 2.6 -> 2.2x its quiet time, paired).  Otherwise each thread takes one
    contiguous share (the forward kernel's channel blocks, whose consecutive
    units reuse the block a thread has packed)."""
    # Each thread's part starts on a cache line of its own: the parts lie end to
    # end, and a kernel's staged vectors are laid out from its part's start (a
    # part 8 bytes off the line split every load of the second thread's staged
    # output gradient: 7% of an AVX2 filter gradient).
    # Each thread zeroes its own part as it starts (a channel block's packed filter
    # makes a part hundreds of KiB: zeroed by the calling thread alone before the
    # units began, it was a tenth of a 7x7 layer's call).
    scratch_bytes = (scratch_bytes + 63) // 64 * 64
    cdef char* scratch = <char*>alloc_aligned(scratch_bytes * threads if scratch_bytes else 1)
    if scratch == NULL:
        raise MemoryError("convviz: cannot allocate the kernel's scratch memory")
    cdef idx unit
    cdef int tid
    cdef idx run = units // (8 * threads) if units >= 8 * threads else 1
    try:
        with nogil:
            if threads == 1:
                memset(scratch, 0, scratch_bytes)
                for unit in range(units):
                    fn(args, isa, f64, unit, scratch)
            else:
                with parallel(num_threads=threads):
                    tid = threadid()
                    memset(scratch + tid * scratch_bytes, 0, scratch_bytes)
                    if claimed:
                        for unit in prange(units, schedule="dynamic", chunksize=run):
                            fn(args, isa, f64, unit, scratch + tid * scratch_bytes)
                    else:
                        for unit in prange(units, schedule="static"):
                            fn(args, isa, f64, unit, scratch + tid * scratch_bytes)
    finally:
        free_aligned(scratch)
    return scratch_bytes * threads


cdef inline Py_ssize_t run_packed(void** packed, size_t packed_bytes, PackFn pack, UnitFn fn, void* args, int isa,
                                  int f64, idx units, int threads, size_t scratch_bytes) except -1:
    """The kernels that pack their filter first: allocate ``*packed`` (``packed_bytes``,
    zeroed; a member of ``args``), ``pack`` into it without the GIL, run ``fn`` on every
    unit (``run_units``), free it; record and return the scratch bytes, the packed
    filter's and the threads' own."""
    cdef Py_ssize_t used = packed_bytes
    packed[0] = NULL  # (freed below even when the allocation fails)
    try:
        packed[0] = scratch_alloc(packed_bytes)
        with nogil:
            pack(args, isa, f64)
        used += run_units(fn, args, isa, f64, units, threads, scratch_bytes)
    finally:
        free_aligned(packed[0])
        packed[0] = NULL
    record_scratch(used)
    return used
