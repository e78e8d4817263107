# The C++ interface of _ext/depthwise_input_grad.cpp (its argument struct and entry points), for the
# Cython module that links it: the interface part of that one file, included alone.
from _cvz cimport ConvDims, Tensor, idx

cdef extern from * namespace "cvz" nogil:
    """
    #define CVZ_INTERFACE_ONLY
    #include "depthwise_input_grad.cpp"
    #undef CVZ_INTERFACE_ONLY
    """
    cdef cppclass DepthwiseInputGradArgs(ConvDims):
        Tensor dy
        Tensor w
        Tensor dx
        idx V, c_pad, scratch_elems, packed_elems
        int dy_direct, dx_direct
        void* packed

    void depthwise_input_grad_prepare(DepthwiseInputGradArgs* a, int isa, int f64)
    void depthwise_input_grad_pack(void* args, int isa, int f64)
    void depthwise_input_grad_row(const void* args, int isa, int f64, idx row, void* scratch)
