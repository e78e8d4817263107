# The C++ interface of _ext/conv2d_forward.cpp (its argument struct and entry points), for the
# Cython module that links it: the interface part of that one file, included alone.
from _cvz cimport ConvDims, Tensor, idx

cdef extern from * namespace "cvz" nogil:
    """
    #define CVZ_INTERFACE_ONLY
    #include "conv2d_forward.cpp"
    #undef CVZ_INTERFACE_ONLY
    """
    cdef cppclass Conv2dForwardArgs(ConvDims):
        Tensor x
        Tensor w
        Tensor y
        idx V, cout_g_pad, row_pixels, ow_lo, ow_hi, scratch_elems
        idx packed_elems, b_pitch
        int direct, exact_edges
        void* packed
        idx blocks_per_group
        int by_block
        idx row_chunks
        idx staged_elems
        void* staged

    void conv2d_forward_prepare(Conv2dForwardArgs* a, int isa, int f64)
    void conv2d_forward_pack(Conv2dForwardArgs* a, int isa, int f64)
    void conv2d_forward_row(const void* args, int isa, int f64, idx row, void* scratch)
    void conv2d_forward_block(const void* args, int isa, int f64, idx unit, void* scratch)
    idx conv2d_forward_row_chunks(const Conv2dForwardArgs* a, int threads)
    void conv2d_forward_stage(const void* args, int isa, int f64, idx row, void* scratch)
