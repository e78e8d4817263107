// The depthwise filter gradient's kernel, compiled for every ISA, and its
// entry points: each dispatches on a table [isa][f64] of the body's instantiations.
#include "depthwise_filter_grad.hpp"

#define CVZ_OP_BODY "depthwise_filter_grad_body.hpp"
#include "cvz_per_isa.hpp"

namespace cvz {

namespace {
typedef void (*PrepareFn)(DepthwiseFilterGradArgs*);
typedef void (*BlockFn)(const DepthwiseFilterGradArgs*, idx, void*, const idx*, const idx*);
const PrepareFn prepare_table[ISA_COUNT][2] = CVZ_ISA_TABLE(depthwise_filter_grad_prepare);
const BlockFn block_table[ISA_COUNT][2] = CVZ_ISA_TABLE(depthwise_filter_grad_block);
}  // namespace

void depthwise_filter_grad_prepare(DepthwiseFilterGradArgs* a, int isa, int f64) {
    isa_pick(prepare_table, isa, f64)(a);
}

void depthwise_filter_grad_block(const DepthwiseFilterGradArgs* a, int isa, int f64, idx block, void* scratch,
                                 const idx* ow_first, const idx* ow_last) {
    isa_pick(block_table, isa, f64)(a, block, scratch, ow_first, ow_last);
}

// A plain sum in block order: the same for every ISA.
void depthwise_filter_grad_merge(const DepthwiseFilterGradArgs* a, int f64, idx tap_begin, idx tap_end) {
    if (f64)
        generic::depthwise_filter_grad_merge<double>(a, tap_begin, tap_end);
    else
        generic::depthwise_filter_grad_merge<float>(a, tap_begin, tap_end);
}

}  // namespace cvz
