# The C++ interface of _ext/conv2d_amx.cpp (its argument struct and entry points), for the
# Cython module that links it: the interface part of that one file, included alone.
from _cvz cimport ConvDims, Tensor, idx

cdef extern from * namespace "cvz" nogil:
    """
    #define CVZ_INTERFACE_ONLY
    #include "conv2d_amx.cpp"
    #undef CVZ_INTERFACE_ONLY
    """
    cdef cppclass Conv2dAmxArgs(ConvDims):
        Tensor x
        Tensor w
        Tensor y
        idx staged_elems, packed_elems, stage_units, units, scratch_bytes
        void* staged
        void* packed
        unsigned char* least_exponent

    bint amx_bf16_usable()
    const char* amx_bf16_unusable_reason()
    int conv2d_amx_prepare(Conv2dAmxArgs* a, int threads)
    void conv2d_amx_stage(const void* args, int isa, int f64, idx unit, void* scratch)
    int conv2d_amx_exact(const Conv2dAmxArgs* a, int blocks_ran)
    void conv2d_amx_block(const void* args, int isa, int f64, idx unit, void* scratch)
    cdef struct Conv2dAmxBatch:
        const Conv2dAmxArgs* calls
        idx count
        const idx* first_stage
        const idx* first_unit
    void conv2d_amx_batch_stage(const void* batch, int isa, int f64, idx unit, void* scratch)
    void conv2d_amx_batch_block(const void* batch, int isa, int f64, idx unit, void* scratch)
