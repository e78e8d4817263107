# The C++ interface of _ext/depthwise_forward.cpp (its argument struct and entry points), for the
# Cython module that links it: the interface part of that one file, included alone.
from _cvz cimport ConvDims, Tensor, idx

cdef extern from * namespace "cvz" nogil:
    """
    #define CVZ_INTERFACE_ONLY
    #include "depthwise_forward.cpp"
    #undef CVZ_INTERFACE_ONLY
    """
    cdef cppclass DepthwiseForwardArgs(ConvDims):
        Tensor x
        Tensor w
        Tensor y
        idx V, cm_pad, ow_lo, ow_hi, scratch_elems
        int x_direct, y_direct
        void* packed

    void depthwise_forward_prepare(DepthwiseForwardArgs* a, int isa, int f64)
    void depthwise_forward_pack(void* args, int isa, int f64)
    void depthwise_forward_row(const void* args, int isa, int f64, idx row, void* scratch)
