// The depthwise conv2d filter gradient: its arguments and entry points (the
// interface the Cython module includes).  depthwise_filter_grad.cpp holds the
// kernel, per ISA.
#pragma once

#include "cvz_common.hpp"

namespace cvz {

// dw[kh, kw, c, m] = sum over n, oh, ow.  Element strides of x and dy are in
// logical NHWC order (the caller permutes NCHW).
struct DepthwiseFilterGradArgs {
    idx N, H, W, C, M, OH, OW, KH, KW;
    idx sh, sw, dh, dw, pt, pl;
    const void* x; int x_type; idx x_s[4];
    const void* dy; int dy_type; idx dy_s[4];
    void* out; int out_type;  // [KH][KW][C][M], contiguous
    idx n_blocks;
    // Filled in by prepare(): channels C*M padded to the vector width, whether
    // rows are read in place, the per-thread scratch size.  The caller
    // allocates `partial` ([n_blocks][KH*KW][cm_pad] of the compute type).
    idx V, cm, cm_pad, scratch_elems;
    int direct;
    void* partial;
};

// isa: an Isa code (cvz_isa.hpp); f64: compute in double (else float).
void depthwise_filter_grad_prepare(DepthwiseFilterGradArgs* a, int isa, int f64);
// Sum the rows of block `block` into its partial sums; ow_first/ow_last[kw]: the
// output columns whose input column through tap kw is real.
void depthwise_filter_grad_block(const DepthwiseFilterGradArgs* a, int isa, int f64, idx block, void* scratch,
                                 const idx* ow_first, const idx* ow_last);
// out[taps tap_begin..tap_end) = the partial sums added in block order.
void depthwise_filter_grad_merge(const DepthwiseFilterGradArgs* a, int f64, idx tap_begin, idx tap_end);

}  // namespace cvz
