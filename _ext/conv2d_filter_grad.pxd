# The C++ interface of _ext/conv2d_filter_grad.cpp (its argument struct and entry points), for the
# Cython module that links it: the interface part of that one file, included alone.
from _cvz cimport ConvDims, Tensor, idx

cdef extern from * namespace "cvz" nogil:
    """
    #define CVZ_INTERFACE_ONLY
    #include "conv2d_filter_grad.cpp"
    #undef CVZ_INTERFACE_ONLY
    """
    cdef cppclass Conv2dFilterGradArgs(ConvDims):
        Tensor x
        Tensor dy
        Tensor out
        const idx* ow_first
        const idx* ow_last
        idx n_units
        idx V, cout_g_pad, mr, ci_tiles, c_blocks, n_tiles, tile_elems, chunk_rows, scratch_elems
        idx parts
        void* acc

    void conv2d_filter_grad_prepare(Conv2dFilterGradArgs* a, int isa, int f64)
    void conv2d_filter_grad_unit(const void* args, int isa, int f64, idx unit, void* scratch)
    void conv2d_filter_grad_reduce(const void* args, int isa, int f64, idx unit, void* scratch)
