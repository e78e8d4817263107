// The conv2d input gradient's kernel, compiled for every ISA, and its entry
// points: each dispatches on a table [isa][f64] of the body's instantiations.
#include "conv2d_input_grad.hpp"

#define CVZ_OP_BODY "conv2d_input_grad_body.hpp"
#include "cvz_per_isa.hpp"

namespace cvz {

namespace {
typedef void (*PrepareFn)(Conv2dInputGradArgs*);
typedef void (*PackFn)(Conv2dInputGradArgs*);
typedef void (*RowFn)(const Conv2dInputGradArgs*, idx, void*);
const PrepareFn prepare_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_input_grad_prepare);
const PackFn pack_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_input_grad_pack);
const RowFn row_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_input_grad_row);
}  // namespace

void conv2d_input_grad_prepare(Conv2dInputGradArgs* a, int isa, int f64) { isa_pick(prepare_table, isa, f64)(a); }

void conv2d_input_grad_pack(Conv2dInputGradArgs* a, int isa, int f64) { isa_pick(pack_table, isa, f64)(a); }

void conv2d_input_grad_row(const Conv2dInputGradArgs* a, int isa, int f64, idx row, void* scratch) {
    isa_pick(row_table, isa, f64)(a, row, scratch);
}

}  // namespace cvz
