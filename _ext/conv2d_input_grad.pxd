# The C++ interface of _ext/conv2d_input_grad.cpp (its argument struct and entry points), for the
# Cython module that links it: the interface part of that one file, included alone.
from _cvz cimport ConvDims, Tensor, idx

cdef extern from * namespace "cvz" nogil:
    """
    #define CVZ_INTERFACE_ONLY
    #include "conv2d_input_grad.cpp"
    #undef CVZ_INTERFACE_ONLY
    """
    cdef cppclass Conv2dInputGradArgs(ConvDims):
        Tensor dy
        Tensor dx
        Tensor w
        idx V, cin_g_pad, ow_lo, ow_span, scratch_elems
        int direct, dy_direct, exact_edges
        void* packed
        int dot
        idx K2, packed_bytes
        int w_exp

    void conv2d_input_grad_prepare(Conv2dInputGradArgs* a, int isa, int f64)
    void conv2d_input_grad_pack(void* args, int isa, int f64)
    void conv2d_input_grad_row(const void* args, int isa, int f64, idx row, void* scratch)
