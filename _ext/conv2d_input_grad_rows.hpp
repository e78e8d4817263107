// The row walk of the conv2d input gradient: what its per-ISA kernels
// (conv2d_input_grad.cpp) and its precision="fast" paths
// (conv2d_input_grad_fast.cpp) share.  Included after the op's interface
// (Conv2dInputGradArgs).
#pragma once

#include <cstdint>
#include <cstring>

namespace cvz {

// ---------------------------------------------------------------- the row walk
// What every path (the per-ISA kernels and the fast paths) does to walk one
// input row: the kernel rows that reach it, the dy rows they need
// (cached across consecutive rows), and each stride phase's taps.  ISA-free.

// The tap tables of a row, carved from the end of a thread's scratch.
struct RowTaps {
    idx* slot_kh;      // kernel row of each slot (kernel rows reaching the input row)
    idx* slot_oh;      // its dy row
    idx* slot_key;     // cached dy row of each buffer slot (n * OH + oh + 1, 0 = empty)
    idx* row_of_slot;  // buffer slot holding the dy row of kernel-row slot i
    idx* tap_ow0;      // per tap of a phase: its first dy pixel
    idx* tap_slot;     // its kernel-row slot
    idx* tap_k;        // its kernel tap kh * KW + kw
};

// How many dy rows a thread keeps staged (Conv2dInputGradArgs::dy_slots): the
// dy rows one input row reads lie within a span of (KH - 1) * dh / sh + 1, so
// with that many slots in a ring (row oh in slot oh % span) consecutive input
// rows find every row they share, where KH slots kept none across rows with
// dilation 2 (rows ih and ih + 1 read no common dy row, and each row's three
// evicted the previous row's: each dy row staged three times).  A span too wide
// to keep (large dilations) gets KH slots, refilled as rows need them.
static inline void dy_cache_slots(Conv2dInputGradArgs* a) {
    const idx span = (a->KH - 1) * a->dh / a->sh + 1;
    a->dy_ring = span <= a->KH + 8;
    a->dy_slots = a->dy_ring ? span : a->KH;
}

// Bytes of the tables and of the two pointer arrays (a_ptrs, b_ptrs) after them.
static inline idx row_taps_bytes(const Conv2dInputGradArgs* a) {
    const idx taps = a->KH * a->KW;
    return (idx)((3 * a->KH + a->dy_slots + 3 * taps) * sizeof(idx) + 2 * taps * sizeof(void*));
}

// Fill *t from `ints`; returns where the pointer arrays start.
static inline void* carve_row_taps(RowTaps* t, idx* ints, const Conv2dInputGradArgs* a) {
    const idx taps = a->KH * a->KW;
    t->slot_kh = ints;
    t->slot_oh = ints + a->KH;
    t->slot_key = t->slot_oh + a->KH;
    t->row_of_slot = t->slot_key + a->dy_slots;
    t->tap_ow0 = t->row_of_slot + a->KH;
    t->tap_slot = t->tap_ow0 + taps;
    t->tap_k = t->tap_slot + taps;
    return t->tap_k + taps;
}

// The kernel rows that reach input row ih (slot_kh, slot_oh); returns how many.
static inline idx row_slots(const Conv2dInputGradArgs* a, idx ih, RowTaps* t) {
    idx n_slots = 0;
    for (idx kh = 0; kh < a->KH; ++kh) {
        const idx u = ih + a->pt - kh * a->dh;
        // (Stride 1 without the divisions: this walk runs once per input row, and
        // its divisions were 2-4% of bpi_cifar.)
        if (u < 0 || (a->sh != 1 && u % a->sh != 0)) continue;
        const idx oh = a->sh == 1 ? u : u / a->sh;
        if (oh >= a->OH) continue;
        t->slot_kh[n_slots] = kh;
        t->slot_oh[n_slots++] = oh;
    }
    return n_slots;
}

// Point row_of_slot[i] at a buffer slot holding dy row (n, slot_oh[i]): a cached
// one, else (ring) slot oh % dy_slots or (no ring) a slot no other kernel row
// needs, filled by stage(oh, slot).  The dy_slots slots stay cached across the
// thread's consecutive rows, which share most of their dy rows (slot_key = n * OH
// + oh + 1; 0 = empty, as zeroed).
template <class Stage>
static inline void cache_dy_rows(const Conv2dInputGradArgs* a, idx n, idx n_slots, RowTaps* t, Stage stage) {
    if (a->dy_ring) {
        for (idx i = 0; i < n_slots; ++i) {
            const idx at = t->slot_oh[i] % a->dy_slots, key = n * a->OH + t->slot_oh[i] + 1;
            if (t->slot_key[at] != key) {
                stage(t->slot_oh[i], at);
                t->slot_key[at] = key;
            }
            t->row_of_slot[i] = at;
        }
        return;
    }
    for (idx i = 0; i < n_slots; ++i) {
        t->row_of_slot[i] = -1;
        for (idx k = 0; k < a->dy_slots; ++k)
            if (t->slot_key[k] == n * a->OH + t->slot_oh[i] + 1) t->row_of_slot[i] = k;
    }
    for (idx i = 0; i < n_slots; ++i) {
        if (t->row_of_slot[i] >= 0) continue;
        idx free_slot = 0;
        for (idx k = 0; k < a->dy_slots; ++k) {
            bool needed = false;
            for (idx j = 0; j < n_slots; ++j) needed = needed || t->row_of_slot[j] == k;
            if (!needed) { free_slot = k; break; }
        }
        stage(t->slot_oh[i], free_slot);
        t->slot_key[free_slot] = n * a->OH + t->slot_oh[i] + 1;
        t->row_of_slot[i] = free_slot;
    }
}

// The taps of phase r (pixels iw = r + j * sw): (slot, kw) with r + pl - kw * dw
// divisible by sw, slot-major.  Returns how many.
static inline idx phase_taps(const Conv2dInputGradArgs* a, idx r, idx n_slots, RowTaps* t) {
    idx n_taps = 0;
    for (idx slot = 0; slot < n_slots; ++slot)
        for (idx kw = 0; kw < a->KW; ++kw) {
            const idx u = r + a->pl - kw * a->dw;
            if (a->sw != 1 && ((u % a->sw) + a->sw) % a->sw != 0) continue;
            t->tap_ow0[n_taps] = a->sw == 1 ? u : floor_div(u, a->sw);
            t->tap_slot[n_taps] = slot;
            t->tap_k[n_taps++] = t->slot_kh[slot] * a->KW + kw;
        }
    return n_taps;
}

// Every kernel row of a phase has the same kwt taps; whether their windows form
// an arithmetic run (step *dstep >= 1), so that fused tiles can share dy pixels.
static inline bool phase_fusable(const RowTaps& t, idx n_taps, idx kwt, idx* dstep) {
    *dstep = 0;
    if (kwt < 2) return false;
    *dstep = t.tap_ow0[0] - t.tap_ow0[1];
    bool fusable = *dstep >= 1;
    for (idx row = 0; row < n_taps && fusable; row += kwt)
        for (idx i = 0; i < kwt && fusable; ++i) fusable = t.tap_ow0[row + i] == t.tap_ow0[row] - i * *dstep;
    return fusable;
}

}  // namespace cvz
