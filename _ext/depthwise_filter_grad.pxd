# The C++ interface of _ext/depthwise_filter_grad.cpp (its argument struct and entry points), for the
# Cython module that links it: the interface part of that one file, included alone.
from _cvz cimport Tensor, idx

cdef extern from * namespace "cvz" nogil:
    """
    #define CVZ_INTERFACE_ONLY
    #include "depthwise_filter_grad.cpp"
    #undef CVZ_INTERFACE_ONLY
    """
    cdef struct DepthwiseFilterGradArgs:
        idx N, H, W, C, M, OH, OW, KH, KW
        idx sh, sw, dh, dw, pt, pl
        Tensor x
        Tensor dy
        Tensor out
        idx n_blocks
        const idx* ow_first
        const idx* ow_last
        idx V, cm, cm_pad, scratch_elems
        int direct
        void* partial

    void depthwise_filter_grad_prepare(DepthwiseFilterGradArgs* a, int isa, int f64)
    void depthwise_filter_grad_block(const void* args, int isa, int f64, idx block, void* scratch)
    void depthwise_filter_grad_merge(const void* args, int isa, int f64, idx tap, void* scratch)
