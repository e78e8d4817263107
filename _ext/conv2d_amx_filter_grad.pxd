# The C++ interface of _ext/conv2d_amx_filter_grad.cpp (its argument struct and entry points), for the
# Cython module that links it: the interface part of that one file, included alone.
from _cvz cimport ConvDims, Tensor, idx

cdef extern from * namespace "cvz" nogil:
    """
    #define CVZ_INTERFACE_ONLY
    #include "conv2d_amx_filter_grad.cpp"
    #undef CVZ_INTERFACE_ONLY
    """
    cdef cppclass Conv2dAmxFilterGradArgs(ConvDims):
        Tensor x
        Tensor dy
        Tensor out
        idx x_row_elems, dy_row_elems, rows, chunk_rows, chunks, blocks
        idx x_slots_all, x_slots_chunk, stage_units_all, stage_units_chunk, scratch_bytes
        int flat, x_non_finite, sequential
        idx chunk_now
        void* x_staged
        void* dy_staged
        float* partial
        unsigned char* least_exponent

    int conv2d_amx_filter_grad_prepare(Conv2dAmxFilterGradArgs* a, int allow_flat)
    void conv2d_amx_filter_grad_stage(const void* args, int isa, int f64, idx unit, void* scratch)
    idx conv2d_amx_filter_grad_window(Conv2dAmxFilterGradArgs* a, idx first, idx last)
    int conv2d_amx_filter_grad_exact(Conv2dAmxFilterGradArgs* a, idx units)
    void conv2d_amx_filter_grad_block(const void* args, int isa, int f64, idx unit, void* scratch)
    void conv2d_amx_filter_grad_reduce(const void* args, int isa, int f64, idx unit, void* scratch)
