// The conv2d input gradient: its arguments and entry points (the interface the
// Cython module includes).  conv2d_input_grad.cpp holds the kernel, per ISA.
#pragma once

#include "cvz_common.hpp"

namespace cvz {

// dx[n, ih, iw, ci] = sum over taps and the group's output channels.
// All element strides are in logical NHWC order (the caller permutes NCHW).
struct Conv2dInputGradArgs {
    idx N, H, W, Cin, OH, OW, Cout, KH, KW, G, cin_g, cout_g;
    idx sh, sw, dh, dw, pt, pl;
    const void* dy; int dy_type; idx dy_s[4];
    void* dx; int dx_type; idx dx_s[4];
    const void* w; int w_type; idx w_s[4];
    // Filled in by prepare(): padded channel count per group, dy row buffer
    // window [ow_lo, ow_lo + ow_span), whether tiles store straight into dx or
    // read dy in place, the per-thread scratch size.  The caller allocates
    // `packed` ([KH][KW][G][cout_g][cin_g_pad] of the compute type); pack()
    // fills it and sets exact_edges when a weight is NaN or infinite.
    idx V, cin_g_pad, ow_lo, ow_span, scratch_elems;
    int direct, dy_direct, exact_edges;
    void* packed;
};

// isa: an Isa code (cvz_isa.hpp); f64: compute in double (else float).
void conv2d_input_grad_prepare(Conv2dInputGradArgs* a, int isa, int f64);
void conv2d_input_grad_pack(Conv2dInputGradArgs* a, int isa, int f64);
// One input row (row = n * H + ih), with `scratch` of a->scratch_elems elements, zeroed before first use.
void conv2d_input_grad_row(const Conv2dInputGradArgs* a, int isa, int f64, idx row, void* scratch);

}  // namespace cvz
