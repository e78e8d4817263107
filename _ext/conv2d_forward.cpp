// The conv2d forward pass: one file in three parts (Highway's foreach_target
// idiom, see cvz_per_isa.hpp):
//   1. the interface, its argument struct and entry points: all the Cython
//      module includes (it defines CVZ_INTERFACE_ONLY first);
//   2. the entry points, each dispatching on a table [isa][f64] of the body's
//      instantiations;
//   3. the kernel body, compiled once per ISA: cvz_per_isa.hpp includes this
//      file again with CVZ_PER_ISA_PASS defined.
#ifndef CVZ_CONV2D_FORWARD_INTERFACE  // 1. the interface
#define CVZ_CONV2D_FORWARD_INTERFACE

#include "cvz_common.hpp"

namespace cvz {

// y[n, oh, ow, co] = sum over taps (kh, kw) and the group's input channels ci of
// x[n, oh*sh - pt + kh*dh, ow*sw - pl + kw*dw, g*cin_g + ci] * w[kh, kw, ci, co],
// g = co / cout_g.  All element strides are in logical NHWC order (the caller
// permutes NCHW); the filter is HWIO [KH, KW, cin_g, Cout].
struct Conv2dForwardArgs : ConvDims {
    Tensor x;
    Tensor w;
    Tensor y;
    // Filled in by prepare(): the vector width, output channels per group
    // padded to it, the zero-padded input row buffer's width in pixels, the
    // output columns [ow_lo, ow_hi) whose taps all read real input columns,
    // whether tiles store straight into y, the per-thread scratch size.  The
    // caller allocates `packed` (packed_elems of the compute type, see
    // conv2d_forward_pack); pack() fills it and sets exact_edges when a weight
    // is NaN or infinite.  b_pitch: the packed filter's row stride.
    idx V, cout_g_pad, row_pixels, ow_lo, ow_hi, scratch_elems;
    idx packed_elems, b_pitch;
    int block_major;
    int direct, exact_edges;
    void* packed;
    // With channel-block units (by_block, whose filter is always block-major),
    // each unit packs its own block into its scratch (packed_elems is then 0 and
    // pack() a no-op): the packing runs on every thread, and the block is still
    // in the core's cache when its tiles read it.  packed_first_block: the block
    // that `packed` starts with (0 for the whole filter).
    idx block_pack_elems, packed_first_block;
    // Channel blocks (block_vecs vectors of a group's output channels; the last
    // may have fewer) per group, and whether units are blocks (a filter bigger
    // than the input: each block's filter stays in cache over every row) rather
    // than rows.
    idx block_vecs, blocks_per_group;
    int by_block;
    // With channel-block units: each block's output rows in row_chunks runs of
    // equal length, a unit per (block, run), block-major (prepare sets 1; the
    // caller raises it to balance the threads, see conv2d_forward_row_chunks).
    // A unit that packs its own block packs it only when its thread's scratch
    // does not hold that block already (consecutive units share it).
    idx row_chunks;
    // With channel-block units, every block reads every input row: the rows are
    // staged once, before the blocks, into `staged` (staged_elems of the compute
    // type, [N * H][row_pixels][Cin], zero outside the real columns; the caller
    // allocates it zeroed and runs conv2d_forward_stage on each row), not once
    // per block.  staged_elems is 0 (and staged unused) with row units.
    idx staged_elems;
    void* staged;
    // Whether the tiles read the input rows where they are instead of staging them
    // (staged_elems 0, no per-thread row slots): the input is the compute type in
    // packed NHWC and every pixel a tile reads is a real column (no left padding,
    // rows no wider than the input: 1x1 and VALID convolutions, the input
    // gradient's 1x1 phases).  Staging would only copy them: with channel-block
    // units into a buffer zeroed first, in a parallel region of its own (a fifth
    // of a 7x7, 960 -> 160 channel call); with row units, a row at a time into
    // the thread's slots (a 1x1 layer's whole input copied once more).
    int in_place;
};

// Output rows [*begin, *end) of run `run` of `runs` runs of `rows` (equal to within one).
static inline void row_run(idx rows, idx runs, idx run, idx* begin, idx* end) {
    *begin = rows * run / runs;
    *end = rows * (run + 1) / runs;
}

// isa: an Isa code (cvz_isa.hpp); f64: compute in double (else float).
void conv2d_forward_prepare(Conv2dForwardArgs* a, int isa, int f64);
void conv2d_forward_pack(Conv2dForwardArgs* a, int isa, int f64);
// One output row (row = n * OH + oh) of the call `args` (a Conv2dForwardArgs), with
// `scratch` of scratch_elems elements, zeroed before first use (a UnitFn of _cvz.pxd).
void conv2d_forward_row(const void* args, int isa, int f64, idx row, void* scratch);
// One channel block over one run of output rows (unit = block * row_chunks + run,
// block = g * blocks_per_group + b; a UnitFn).
void conv2d_forward_block(const void* args, int isa, int f64, idx unit, void* scratch);
// The row_chunks that spread blocks * row_chunks units most evenly over `threads`
// threads (static split, block widths counted): the fewest that come within 5%
// of an even share, or the best found.  ISA-free.
idx conv2d_forward_row_chunks(const Conv2dForwardArgs* a, int threads);
// Stage input row `row` (= n * H + ih) into `staged` (a UnitFn; no scratch).
void conv2d_forward_stage(const void* args, int isa, int f64, idx row, void* scratch);

}  // namespace cvz

#endif  // CVZ_CONV2D_FORWARD_INTERFACE

#if defined(CVZ_INTERFACE_ONLY)
// The Cython module's include: the interface above is all it needs.
#elif !defined(CVZ_PER_ISA_PASS)  // 2. the entry points

#define CVZ_OP_BODY "conv2d_forward.cpp"  // this file again, once per ISA
#include "cvz_per_isa.hpp"

namespace cvz {

namespace {
typedef void (*PrepareFn)(Conv2dForwardArgs*);
typedef void (*PackFn)(Conv2dForwardArgs*);
typedef void (*RowFn)(const Conv2dForwardArgs*, idx, void*);
const PrepareFn prepare_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_forward_prepare);
const PackFn pack_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_forward_pack);
const RowFn row_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_forward_row);
const RowFn block_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_forward_channel_block);
const RowFn stage_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_forward_stage);
}  // namespace

void conv2d_forward_prepare(Conv2dForwardArgs* a, int isa, int f64) { isa_pick(prepare_table, isa, f64)(a); }

void conv2d_forward_pack(Conv2dForwardArgs* a, int isa, int f64) { isa_pick(pack_table, isa, f64)(a); }

void conv2d_forward_row(const void* args, int isa, int f64, idx row, void* scratch) {
    isa_pick(row_table, isa, f64)(static_cast<const Conv2dForwardArgs*>(args), row, scratch);
}

void conv2d_forward_block(const void* args, int isa, int f64, idx unit, void* scratch) {
    isa_pick(block_table, isa, f64)(static_cast<const Conv2dForwardArgs*>(args), unit, scratch);
}

// The largest load (vectors x rows) a thread gets when `runs` runs of rows per
// block are split statically (OpenMP's schedule(static): contiguous shares, the
// first units % threads threads one unit more) over `threads` threads.  The units
// are walked in order with counters rather than a division or four each: the search
// below runs on the calling thread before every call by blocks (1x14x14 80 -> 480
// on 2 threads: 0.96x the time of the divisions, 80 -> 200 0.97x; the same choice).
static double busiest_thread(const Conv2dForwardArgs* a, idx runs, int threads) {
    const idx vectors = a->cout_g_pad / a->V, rows = a->N * a->OH;
    const idx units = a->G * a->blocks_per_group * runs;
    const idx share = units / threads, extra = units % threads;
    double busiest = 0;
    idx run = 0, j = 0, begin = 0;  // the unit's run of rows, its block's place in the group, the run's first row
    for (int t = 0; t < threads; ++t) {
        double load = 0;
        for (idx n = share + (t < extra ? 1 : 0); n > 0; --n) {
            const idx left = vectors - j * a->block_vecs;
            const idx stop = rows * (run + 1) / runs;  // row_run's end of this run
            load += (double)(left < a->block_vecs ? left : a->block_vecs) * (double)(stop - begin);
            begin = stop;
            if (++run == runs) {
                run = begin = 0;
                if (++j == a->blocks_per_group) j = 0;
            }
        }
        if (load > busiest) busiest = load;
    }
    return busiest;
}

idx conv2d_forward_row_chunks(const Conv2dForwardArgs* a, int threads) {
    const idx rows = a->N * a->OH;
    if (threads <= 1 || !a->by_block || rows <= 1) return 1;
    const double even = (double)(a->G * (a->cout_g_pad / a->V)) * (double)rows / threads;
    idx best = 1;
    double best_load = busiest_thread(a, 1, threads);
    for (idx runs = 2; runs <= rows && runs <= 4 * threads && best_load > 1.05 * even; ++runs) {
        const double load = busiest_thread(a, runs, threads);
        if (load < best_load) {
            best = runs;
            best_load = load;
        }
    }
    return best;
}

void conv2d_forward_stage(const void* args, int isa, int f64, idx row, void* scratch) {
    isa_pick(stage_table, isa, f64)(static_cast<const Conv2dForwardArgs*>(args), row, scratch);
}

}  // namespace cvz

#else  // CVZ_PER_ISA_PASS: the kernel body, compiled once per ISA by cvz_per_isa.hpp

// The conv2d forward pass, written once against Simd<T> and the register tile
// of cvz_tiles.hpp, compiled once per instruction set.
//
// Nothing here depends on the thread count: each output row is written by one
// call of conv2d_forward_row, and each element sums its terms in one fixed
// order (taps row by row, then the group's input channels).
//
// Input rows are staged, in the compute type and NHWC order, into per-thread
// buffers with zero columns on both sides, so a tile never checks a border.
// Only (output cell, tap) pairs that exist are ever added: a tap that lands in
// the padding reads a zero, which adds nothing to a finite sum; when the
// filter holds a NaN or an infinity (NaN * 0 = NaN), the output columns near
// the borders take an exact path that skips those taps instead.  Kernel rows
// that land in the padding are skipped for every column.

// Tile shapes per ISA (generic, AVX2, AVX-512): output pixels of a tile of 4,
// 3, 2 and 1 vectors of output channels (4 * MR4, 3 * MR3, 2 * MR2 and MR1
// accumulators; 0: no such tile).  Wider blocks serve rows too short for an MR2
// tile (fwd_late's 7 columns: a 7 x 2 tile loads a broadcast for every 2 FMAs,
// a 7 x 4 tile for every 4): 4 vectors where AVX-512's 32 registers hold them,
// 3 (tiles of 4 and 3 pixels) in AVX2's 16.
constexpr int FWD_MR4 = per_isa(THIS_ISA, 0, 0, 7);
constexpr int FWD_MR3 = per_isa(THIS_ISA, 0, 4, 8);
// Vectors of a channel block for rows of at most FWD_SHORT_ROW columns.
constexpr int FWD_SHORT_BLOCK = per_isa(THIS_ISA, 2, 3, 4);
constexpr int FWD_SHORT_ROW = per_isa(THIS_ISA, 0, 7, 7);
// Vectors of a channel block for longer rows, where a group has that many
// (else 2) and the block's packed filter is at most FWD_LONG_BLOCK_BYTES, and
// the pixels of its tiles.  On AVX-512, 6 x 4 tiles: 24 accumulators, the 4
// filter vectors and a broadcast in registers (a 7 x 4 tile keeps one
// accumulator on the stack), 10 loads for 24 FMAs where 14 x 2 tiles take 16
// for 28, but 256 bytes of filter per step against 128: where the block's
// filter stays in L1 (short sums: 1x1 layers, stems) the wide tile wins, where
// it streams from L2 (3x3 layers of 64 channels and more) the 14 x 2 tile
// reads half as much of it per FMA.  The same bits.  Timed against 14 x 2 in
// one process, alternating, 10 rounds, 2 threads (in separate processes this
// VM's noise was larger than the change): 1x1 layers 14x14 80->184 0.85x the
// time, 28x28 40->240 0.89x, 112x112 16->96 0.83x, 8x56x56 24->144 0.84x,
// 14x14 96->576 0.95x, 56x56 64->256 0.96x; the 3-channel 3x3 stem at
// 256x256 0.81x, at 224x224 stride 2 1.02x.  Blocks of up to 64 KiB (1x1 layers of
// 129-256 input channels, 3x3 layers of up to 28; the core's L1 is 48 KiB, the
// filter's rows stream through it once per tile): 8x56x56 256->64 0.88x the time,
// 256->128 0.95x, 8x14x14 192->64 0.94x, 8x28x28 16->128 3x3 0.91x, no layer of
// 18 slower than 1.01x.
constexpr int FWD_LONG_BLOCK = per_isa(THIS_ISA, 2, 2, 4);
constexpr int FWD_MR4_LONG = per_isa(THIS_ISA, 0, 0, 6);
constexpr idx FWD_LONG_BLOCK_BYTES = 64 * 1024;
constexpr int FWD_MR2 = per_isa(THIS_ISA, 4, 6, 14);
// A short call (see conv2d_forward_prepare's channel-block rule): 2^26 flops, about
// 0.2-0.4 ms on 2 cores of the AVX-512 machine.
constexpr double FWD_SHORT_CALL_FLOPS = 67108864.0;
constexpr int FWD_MR1 = per_isa(THIS_ISA, 4, 12, 24);

// Per-thread scratch, carved from one allocation: the unit's packed filter
// block (channel-block units), KH staged input rows
// [row_pixels][Cin] (zero outside the real columns; none when the call stages
// every row once), the output row [OW][G][cout_g_pad] when tiles cannot store
// into y, which input row each slot holds, and the tap tables.
template <class T>
struct Conv2dForwardScratch {
    T* block_pack;  // this unit's block of the packed filter (channel-block units)
    T* rows;
    T* out_row;
    idx* slot_key;  // n * H + ih + 1 of the row in each slot (0: empty)
    idx* slot_of;   // the slot of each kernel row, for the current output row
    idx* kept;      // whether a slot holds a row the current output row reads
    const T** tap_base;  // a tap's first input pixel, channel 0
    const T** tap_a;     // ... and of this group's channels
    const T** tap_b;
    const T** tile_a;
    idx* tap_kh;
    idx* tap_kw;
    idx* pack_key;  // [0]: block + 1 held in block_pack (0: none), [1]: whether it is non-finite
};

// The per-thread cache of KH staged input rows (none when all are staged once).
static inline idx conv2d_forward_slot_elems(const Conv2dForwardArgs* a) {
    return a->staged_elems > 0 || a->in_place ? 0 : a->KH * a->row_pixels * a->Cin;
}

template <class T>
static inline Conv2dForwardScratch<T> conv2d_forward_scratch(const Conv2dForwardArgs* a, void* raw) {
    Conv2dForwardScratch<T> s;
    const idx taps = a->KH * a->KW;
    s.block_pack = (T*)raw;
    s.rows = s.block_pack + (a->by_block ? round_up(a->block_pack_elems, 16) : 0);
    s.out_row = s.rows + round_up(conv2d_forward_slot_elems(a), 16);
    s.slot_key = (idx*)(s.out_row + round_up(a->direct ? 0 : a->OW * a->G * a->cout_g_pad, 16));
    s.slot_of = s.slot_key + a->KH;
    s.kept = s.slot_of + a->KH;
    s.tap_kh = s.kept + a->KH;
    s.tap_kw = s.tap_kh + taps;
    s.tap_base = (const T**)(s.tap_kw + taps);
    s.tap_a = s.tap_base + taps;
    s.tap_b = s.tap_a + taps;
    s.tile_a = s.tap_b + taps;
    s.pack_key = (idx*)(s.tile_a + taps);
    return s;
}

template <class T>
static void conv2d_forward_prepare(Conv2dForwardArgs* a) {
    a->V = Simd<T>::V;
    a->cout_g_pad = round_up(a->cout_g, a->V);
    const bool y_same = (sizeof(T) == 4) ? a->y.type == F32 : a->y.type == F64;
    // Straight into y whatever the channel count: a group's last vector, when only part of
    // it is channels, is stored through a mask (conv2d_forward_block_tail), where the row
    // went through a buffer and was scattered (a 1x1 14x14x80 -> 184 layer: a tenth of its time).
    a->direct = y_same && a->y.s[3] == 1;
    // Buffer pixel j holds input column j - pl; output column ow reads pixels
    // ow * sw + kw * dw (tiles never pass the last output column).
    const idx span = (a->KW - 1) * a->dw + 1;
    a->row_pixels = (a->OW > 0 ? (a->OW - 1) * a->sw : 0) + span;
    // Output columns whose every tap reads a real column: ow*sw >= pl and
    // ow*sw - pl + span - 1 <= W - 1.
    idx lo = (a->pl + a->sw - 1) / a->sw;
    idx hi = a->W - span + a->pl >= 0 ? (a->W - span + a->pl) / a->sw + 1 : 0;
    if (lo > a->OW) lo = a->OW;
    if (hi > a->OW) hi = a->OW;
    if (hi < lo) hi = lo;
    a->ow_lo = lo;
    a->ow_hi = hi;
    const idx vectors = a->cout_g_pad / a->V;
    const idx long_block_bytes = a->KH * a->KW * a->cin_g * FWD_LONG_BLOCK * a->V * (idx)sizeof(T);
    const int wide = a->OW <= FWD_SHORT_ROW                       ? FWD_SHORT_BLOCK
                     : long_block_bytes <= FWD_LONG_BLOCK_BYTES ? FWD_LONG_BLOCK
                                                                  : 2;
    a->block_vecs = vectors >= wide ? wide : 2;
    a->blocks_per_group = (vectors + a->block_vecs - 1) / a->block_vecs;
    // By channel blocks when the filter outweighs a batch of input: rows would
    // stream the whole filter through the cache once per output row.  Also in a
    // short call whose filter weighs half the input or more: row units wait for the
    // whole filter's pack on the calling thread, where channel-block units pack
    // their own blocks in parallel.  Timed in one process, the two rules alternating
    // (12 rounds, 2 threads, median ratio; the same bits), two passes: 14x14 1x1
    // 80->184 0.75 / 0.82x the time, 112->112 0.78 / 0.82x, 256->128 0.85 / 0.77x,
    // 384->192 0.82 / 0.69x, 72->168 0.88 / 0.87x, 4x7x7 256->160 0.86 / 0.89x,
    // 8x7x7 320->256 1.07 / 0.88x; longer calls lost (28x28 128->416 1x1, 84
    // MFLOP, 1.11x; 28x28 192->512 1.11x; 2x28x28 128->128 3x3 1.28x), so past
    // FWD_SHORT_CALL_FLOPS the first rule alone.
    const double filter_elems = (double)a->KH * a->KW * a->cin_g * a->Cout;
    const double input_elems = (double)a->N * a->H * a->W * a->Cin;
    const bool short_call = a->flops() <= FWD_SHORT_CALL_FLOPS;
    a->by_block = (filter_elems > input_elems || (short_call && 2 * filter_elems >= input_elems)) &&
                  a->G * a->blocks_per_group >= 2;
    // Wide filters are packed block by block: a tile reads one filter row of its
    // channel block per reduction step, and in [..][cin_g][cout_g_pad] order
    // those rows lie a whole filter width apart (2 KiB for 512 channels), each
    // in a new cache line and, past two, a new page for the prefetcher; block by
    // block they are consecutive.  Channel-block units always are, each packing
    // its own block: a whole-filter pack ran on the calling
    // thread alone before the units started (with its buffer's zeroing, a third
    // of a 7x7 input gradient of 160 x 960 channels).
    a->block_major = a->cout_g_pad * (idx)sizeof(T) >= 1024 || a->by_block;
    a->b_pitch = a->block_major ? a->block_vecs * a->V : a->cout_g_pad;
    a->row_chunks = 1;
    a->in_place = a->x.type == (sizeof(T) == 4 ? F32 : F64) && a->x.s[3] == 1 &&
                  a->x.s[2] == a->Cin && a->pl == 0 && a->row_pixels <= a->W;
    a->staged_elems = a->by_block && !a->in_place ? a->N * a->H * a->row_pixels * a->Cin : 0;
    a->block_pack_elems = a->KH * a->KW * a->cin_g * a->block_vecs * a->V;
    a->packed_first_block = 0;
    a->packed_elems = a->by_block ? 0
                      : a->block_major ? a->G * a->blocks_per_group * a->block_pack_elems
                                       : a->KH * a->KW * a->G * a->cin_g * a->cout_g_pad;
    const idx taps = a->KH * a->KW;
    a->scratch_elems = (a->by_block ? round_up(a->block_pack_elems, 16) : 0) +
                       round_up(conv2d_forward_slot_elems(a), 16) +
                       round_up(a->direct ? 0 : a->OW * a->G * a->cout_g_pad, 16) +
                       (idx)(((3 * a->KH + 2 * taps + 2) * sizeof(idx) + 4 * taps * sizeof(void*)) / sizeof(T)) + 16;
}

// The packed filter of tap (kh, kw), group g, from output channel c0 of the group
// (c0 a multiple of block_vecs vectors when packed block by block).
template <class T>
static inline const T* conv2d_forward_packed(const Conv2dForwardArgs* a, idx kh, idx kw, idx g, idx c0) {
    if (a->block_major) {
        const idx block = g * a->blocks_per_group + c0 / (a->block_vecs * a->V) - a->packed_first_block;
        return (const T*)a->packed + ((block * a->KH + kh) * a->KW + kw) * a->cin_g * a->b_pitch;
    }
    return (const T*)a->packed + ((kh * a->KW + kw) * a->G + g) * a->cin_g * a->cout_g_pad + c0;
}

// Pack channel block [c0, c0 + block_vecs vectors) of group g, block-major
// ([KH][KW][cin_g][block_vecs vectors], zero in the channels past the group's last) into
// dst; returns whether any of its weights is NaN or infinite.
template <class T>
static bool conv2d_forward_pack_block(const Conv2dForwardArgs* a, idx g, idx c0, T* dst) {
    const idx width = a->block_vecs * a->V;
    const idx count = a->cout_g - c0 < width ? a->cout_g - c0 : width;
    typedef Simd<T> S;
    // The common case, a whole block of the compute type's contiguous channels:
    // a few vectors a row (gather_rows would call memcpy for each short row).
    const bool plain = count == width && a->w.type == (sizeof(T) == 4 ? F32 : F64) && a->w.s[3] == 1;
    for (idx kh = 0; kh < a->KH; ++kh)
        for (idx kw = 0; kw < a->KW; ++kw) {
            T* d = dst + (kh * a->KW + kw) * a->cin_g * width;
            if (plain) {
                const T* w = (const T*)a->w.data + kh * a->w.s[0] + kw * a->w.s[1] + (g * a->cout_g + c0);
                for (idx k = 0; k < a->cin_g; ++k) {
                    for (idx q = 0; q < width; q += S::V) S::store(d + k * width + q, S::load(w + k * a->w.s[2] + q));
                }
                continue;
            }
            const idx from = kh * a->w.s[0] + kw * a->w.s[1] + (g * a->cout_g + c0) * a->w.s[3];
            gather_rows<T>(d, width, a->w.data, a->w.type, from, a->cin_g, a->w.s[2], count, a->w.s[3]);
            if (count < width)  // the scratch may hold an earlier block's weights
                for (idx k = 0; k < a->cin_g; ++k)
                    for (idx c = count; c < width; ++c) d[k * width + c] = T(0);
        }
    return any_nonfinite(dst, a->block_pack_elems);
}

// Pack the HWIO filter in the compute type, zero in the padding channels, so a
// tile reads contiguous output channels: [KH][KW][G][cin_g][cout_g_pad], or
// block by block ([G][block][KH][KW][cin_g][block_vecs vectors], block_major).  Notes
// whether any weight is NaN or infinite (then the border columns go exact).
// Nothing to do when the units pack their own blocks (channel-block units).
template <class T>
static void conv2d_forward_pack(Conv2dForwardArgs* a) {
    bool nonfinite = false;
    if (a->by_block) {
        a->exact_edges = 0;  // set per unit, from its own block
        return;
    }
    if (a->block_major) {
        for (idx g = 0; g < a->G; ++g)
            for (idx c0 = 0; c0 < a->cout_g; c0 += a->block_vecs * a->V)
                nonfinite |= conv2d_forward_pack_block<T>(a, g, c0, (T*)conv2d_forward_packed<T>(a, 0, 0, g, c0));
        a->exact_edges = nonfinite;
        return;
    }
    for (idx kh = 0; kh < a->KH; ++kh)
        for (idx kw = 0; kw < a->KW; ++kw)
            for (idx g = 0; g < a->G; ++g) {  // cin_g rows of the group's channels
                T* dst = (T*)conv2d_forward_packed<T>(a, kh, kw, g, 0);
                const idx from = kh * a->w.s[0] + kw * a->w.s[1] + g * a->cout_g * a->w.s[3];
                gather_rows<T>(dst, a->b_pitch, a->w.data, a->w.type, from, a->cin_g, a->w.s[2], a->cout_g, a->w.s[3]);
                // The padding channels are zero (the buffer comes zeroed).
                nonfinite |= any_nonfinite(dst, a->cin_g * a->b_pitch);
            }
    a->exact_edges = nonfinite;
}

// Output pixels [ow_begin, ow_end) of one group and channel block [c0, c0 + NRV * V),
// one at a time and exactly: pixel ow gets the terms of tap t only when its
// input column lies in [0, W).  Terms are added in the tiles' order.
template <class T, int NRV>
CVZ_NOINLINE static void conv2d_forward_exact(const Conv2dForwardArgs* a, const Conv2dForwardScratch<T>& s,
                                              idx n_taps, idx ow_begin, idx ow_end, T* out, idx out_pixel,
                                              idx tail) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    const idx pitch = a->Cin;
    for (idx ow = ow_begin; ow < ow_end; ++ow) {
        vec acc[NRV];
        for (int q = 0; q < NRV; ++q) acc[q] = S::zero();
        for (idx t = 0; t < n_taps; ++t) {
            const idx iw = ow * a->sw - a->pl + s.tap_kw[t] * a->dw;
            if (iw < 0 || iw >= a->W) continue;  // this tap reads padding here
            const T* x = s.tap_a[t] + ow * a->sw * pitch;
            const T* b = s.tap_b[t];
            for (idx k = 0; k < a->cin_g; ++k) {
                const vec av = S::set1(x[k]);
                for (int q = 0; q < NRV; ++q) acc[q] = S::fma(av, S::load(b + k * a->b_pitch + q * S::V), acc[q]);
            }
        }
        for (int q = 0; q < NRV; ++q) store_part(out + ow * out_pixel + q * S::V, acc[q], q == NRV - 1 ? tail : 0);
    }
}

// One channel block of NRV vectors: tiles over [ow_begin, ow_end), then
// (with a non-finite filter) the border columns exactly.  tail: gemm_tile's.
template <class T, int MR, int NRV>
static void conv2d_forward_tiles(const Conv2dForwardArgs* a, const Conv2dForwardScratch<T>& s, idx n_taps, idx K,
                                 T* out, idx out_pixel, bool resume, idx tail) {
    const idx pitch = a->Cin;
    const bool exact = a->exact_edges != 0;
    const idx begin = exact ? a->ow_lo : 0, end = exact ? a->ow_hi : a->OW;
    // Balanced exact tiles (cvz_tiles.hpp): a tile never computes a pixel past the row, so
    // the staged rows need no slack (with a huge stride, slack of a tile's width
    // would be a huge buffer).
    const idx step = a->sw * pitch;
    balanced_tiles<MR>(begin, end, [&](auto shape, idx ow) {
        for (idx t = 0; t < n_taps; ++t) s.tile_a[t] = s.tap_a[t] + ow * step;
        gemm_tile<T, decltype(shape)::value, NRV>(s.tile_a, s.tap_b, n_taps, step, K, a->b_pitch,
                                                  out + ow * out_pixel, out_pixel, decltype(shape)::value, resume,
                                                  tail);
    });
    if (exact) {
        conv2d_forward_exact<T, NRV>(a, s, n_taps, 0, a->ow_lo, out, out_pixel, tail);
        conv2d_forward_exact<T, NRV>(a, s, n_taps, a->ow_hi, a->OW, out, out_pixel, tail);
    }
}

// Stage the input rows that output row (n, oh) reads and list its taps
// (s.tap_base, tap_kh, tap_kw); returns their count and sets the reduction
// length *K.  Consecutive output rows of a unit share rows: a slot is restaged
// only when its row changes.  Without groups and dilation, a kernel row's taps
// read consecutive pixels of contiguous channels, and the packed filter holds
// them in the same order: the row is one tap of KW * Cin reduction channels
// (fewer, longer runs -- what makes a 3-channel stem fast).  A non-finite
// filter keeps the taps apart for the exact border path.
// Input row (n, ih) into a buffer row of row_pixels pixels: real columns
// [0, copy) at pixels [pl, pl + copy); the rest of the buffer row stays as it is
// (zero).
template <class T>
static inline void conv2d_forward_stage_row(const Conv2dForwardArgs* a, idx n, idx ih, T* dst) {
    idx copy = a->row_pixels - a->pl;
    if (copy > a->W) copy = a->W;
    if (copy < 0) copy = 0;
    gather_rows<T>(dst + a->pl * a->Cin, a->Cin, a->x.data, a->x.type, n * a->x.s[0] + ih * a->x.s[1], copy, a->x.s[2],
                   a->Cin, a->x.s[3]);
}

template <class T>
static void conv2d_forward_stage(const Conv2dForwardArgs* a, idx row, void*) {
    conv2d_forward_stage_row<T>(a, row / a->H, row % a->H, (T*)a->staged + row * a->row_pixels * a->Cin);
}

// Whether a kernel row's taps are one tap of KW * cin_g reduction channels (see
// conv2d_forward_taps).
static inline bool conv2d_forward_merged(const Conv2dForwardArgs* a) {
    return a->G == 1 && a->dw == 1 && !a->exact_edges;
}

template <class T>
static idx conv2d_forward_taps(const Conv2dForwardArgs* a, const Conv2dForwardScratch<T>& s, idx n, idx oh, idx* K) {
    const idx pitch = a->Cin, row_elems = a->row_pixels * pitch;
    const bool merge = conv2d_forward_merged(a);
    *K = merge ? a->KW * a->cin_g : a->cin_g;
    // Staged rows: all of them, once per call (channel-block units), or a cache of
    // KH slots: the slots that already hold a row this output row reads keep it;
    // the others take the rows still missing (a row is staged once while a unit's
    // rows pass).
    const bool all_staged = a->staged_elems > 0;
    idx* slot_of = s.slot_of;
    idx* kept = s.kept;
    if (!all_staged && !a->in_place) {
        for (idx j = 0; j < a->KH; ++j) kept[j] = 0;
        for (idx kh = 0; kh < a->KH; ++kh) {
            const idx ih = oh * a->sh - a->pt + kh * a->dh;
            slot_of[kh] = -1;
            if (ih < 0 || ih >= a->H) continue;
            for (idx j = 0; j < a->KH; ++j)
                if (s.slot_key[j] == n * a->H + ih + 1) {
                    slot_of[kh] = j;
                    kept[j] = 1;
                }
        }
    }
    idx free_slot = 0;
    idx n_taps = 0;
    for (idx kh = 0; kh < a->KH; ++kh) {
        const idx ih = oh * a->sh - a->pt + kh * a->dh;
        if (ih < 0 || ih >= a->H) continue;
        const T* row;
        if (a->in_place) {
            row = (const T*)a->x.data + n * a->x.s[0] + ih * a->x.s[1];
        } else if (all_staged) {
            row = (const T*)a->staged + (n * a->H + ih) * row_elems;
        } else {
            if (slot_of[kh] < 0) {
                while (kept[free_slot]) ++free_slot;
                kept[free_slot] = 1;
                slot_of[kh] = free_slot;
                conv2d_forward_stage_row<T>(a, n, ih, s.rows + free_slot * row_elems);
                s.slot_key[free_slot] = n * a->H + ih + 1;
            }
            row = s.rows + slot_of[kh] * row_elems;
        }
        for (idx kw = 0; kw < (merge ? 1 : a->KW); ++kw) {
            s.tap_kh[n_taps] = kh;
            s.tap_kw[n_taps] = kw;
            s.tap_base[n_taps] = row + kw * a->dw * pitch;
            ++n_taps;
        }
    }
    return n_taps;
}


// The vectors of the channel block that starts at channel c0 of its group.
static inline int conv2d_forward_block_width(const Conv2dForwardArgs* a, idx c0) {
    const idx left = (a->cout_g_pad - c0) / a->V;
    return (int)(left < a->block_vecs ? left : a->block_vecs);
}

// Stored straight into y, the channels of the block's last vector where only part of
// it is channels (its group's remainder, stored through a mask), else 0.
static inline idx conv2d_forward_block_tail(const Conv2dForwardArgs* a, idx c0, int nrv) {
    const idx last = c0 + (nrv - 1) * a->V;
    return a->direct && a->cout_g - last < a->V ? a->cout_g - last : 0;
}

// The tiles of one channel block of nrv vectors (block_vecs, or fewer for a
// group's last vectors), over s.tap_a / s.tap_b; the block starts at channel c0.
template <class T>
static inline void conv2d_forward_block_tiles(const Conv2dForwardArgs* a, const Conv2dForwardScratch<T>& s,
                                              idx n_taps, idx K, idx c0, int nrv, T* dst, idx out_pixel,
                                              bool resume) {
    const idx tail = conv2d_forward_block_tail(a, c0, nrv);
    if constexpr (FWD_MR4 > 0) {
        if (nrv == 4 && a->OW <= FWD_SHORT_ROW)
            return conv2d_forward_tiles<T, FWD_MR4, 4>(a, s, n_taps, K, dst, out_pixel, resume, tail);
    }
    if constexpr (FWD_MR4_LONG > 0) {
        if (nrv == 4) return conv2d_forward_tiles<T, FWD_MR4_LONG, 4>(a, s, n_taps, K, dst, out_pixel, resume, tail);
    }
    if constexpr (FWD_MR3 > 0) {
        if (nrv == 3) return conv2d_forward_tiles<T, FWD_MR3, 3>(a, s, n_taps, K, dst, out_pixel, resume, tail);
    }
    if (nrv == 2)
        conv2d_forward_tiles<T, FWD_MR2, 2>(a, s, n_taps, K, dst, out_pixel, resume, tail);
    else
        conv2d_forward_tiles<T, FWD_MR1, 1>(a, s, n_taps, K, dst, out_pixel, resume, tail);
}

// Channel blocks [b_begin, b_end) of output row (n, oh), stored at `out`
// (pixel stride out_pixel; group g's channels at g * out_group).
template <class T>
static void conv2d_forward_blocks(const Conv2dForwardArgs* a, const Conv2dForwardScratch<T>& s, idx n_taps, idx K,
                                  idx b_begin, idx b_end, T* out, idx out_pixel, idx out_group) {
    typedef Simd<T> S;
    for (idx b = b_begin; b < b_end; ++b) {
        const idx g = b / a->blocks_per_group, c0 = (b % a->blocks_per_group) * a->block_vecs * S::V;
        const int nrv = conv2d_forward_block_width(a, c0);
        T* dst = out + g * out_group + c0;
        if (n_taps == 0) {  // every kernel row is in the padding: an empty sum
            const idx tail = conv2d_forward_block_tail(a, c0, nrv);
            for (idx ow = 0; ow < a->OW; ++ow)
                for (int q = 0; q < nrv; ++q)
                    store_part(dst + ow * out_pixel + q * S::V, S::zero(), q == nrv - 1 ? tail : 0);
            continue;
        }
        for (idx t = 0; t < n_taps; ++t) {
            s.tap_a[t] = s.tap_base[t] + g * a->cin_g;
            s.tap_b[t] = conv2d_forward_packed<T>(a, s.tap_kh[t], s.tap_kw[t], g, c0);
        }
        conv2d_forward_block_tiles<T>(a, s, n_taps, K, c0, nrv, dst, out_pixel, false);
    }
}

// Where a row's results go: straight into y, or the row buffer (then scattered).
template <class T>
static inline T* conv2d_forward_out(const Conv2dForwardArgs* a, const Conv2dForwardScratch<T>& s, idx n, idx oh,
                                    idx* out_pixel, idx* out_group) {
    if (a->direct) {
        *out_pixel = a->y.s[2];
        *out_group = a->cout_g;
        return (T*)a->y.data + n * a->y.s[0] + oh * a->y.s[1];
    }
    *out_pixel = a->G * a->cout_g_pad;
    *out_group = a->cout_g_pad;
    return s.out_row;
}

// Channels [c0, c0 + count) of group g of the row buffer into y (its dtype and layout).
template <class T>
static inline void conv2d_forward_scatter(const Conv2dForwardArgs* a, const Conv2dForwardScratch<T>& s, idx n, idx oh,
                                          idx g, idx c0, idx count) {
    scatter_rows<T>(a->y.data, a->y.type, n * a->y.s[0] + oh * a->y.s[1] + (g * a->cout_g + c0) * a->y.s[3], a->OW,
                    a->y.s[2], count, a->y.s[3], s.out_row + g * a->cout_g_pad + c0, a->G * a->cout_g_pad);
}

template <class T>
static void conv2d_forward_row(const Conv2dForwardArgs* a, idx row, void* raw) {
    const Conv2dForwardScratch<T> s = conv2d_forward_scratch<T>(a, raw);
    const idx n = row / a->OH, oh = row % a->OH;
    idx K, out_pixel, out_group;
    const idx n_taps = conv2d_forward_taps<T>(a, s, n, oh, &K);
    T* out = conv2d_forward_out<T>(a, s, n, oh, &out_pixel, &out_group);
    conv2d_forward_blocks<T>(a, s, n_taps, K, 0, a->G * a->blocks_per_group, out, out_pixel, out_group);
    if (!a->direct)
        for (idx g = 0; g < a->G; ++g) conv2d_forward_scatter<T>(a, s, n, oh, g, 0, a->cout_g);
}

// The reduction channels of one part of a split sum: the block's filter rows of
// a part (each block_vecs vectors wide) fill about this many bytes, which stay in the
// core's L2 cache while the part passes the rows of a chunk.
constexpr idx FWD_PART_BYTES = 64 * 1024;
// The rows of a chunk: their input fills about this many bytes, which stay in
// the core's L2 while every part passes them.  The parts passed all of a unit's
// rows (every row of the call, for a channel block), whose input (3.2 MB in
// 8x14x14x512) came from L3 once per part: one thread at 74% of its FMA peak on
// 8x14x14 512 -> 512 3x3, 90% with 128 channels.  Timed in one process, chunks
// and whole passes alternating call by call (ABBA, 3 s a case, 2 threads,
// median ratio; the same bits): forward 3x3 layers of 256-1024 channels 0.85-0.98x
// the time (8x14x14 512 -> 512 0.88, 8x16x16 512 -> 1024 0.85, 1x28x28 512 ->
// 512 0.90), their input gradients (this kernel, per stride phase) 0.87-0.91x,
// float64 0.83-0.99x, AVX2 0.95-1.00x; 8x28x28 256 -> 512 1.00x.  Chunks of 1
// MiB lost 2-7% against 256-512 KiB; 128 KiB was no better.
constexpr idx FWD_PART_CHUNK_BYTES = 256 * 1024;

// Whether a channel block's filter (KH * KW * cin_g rows of block_vecs vectors) is
// bigger than two parts: then the block's sums are split
// (conv2d_forward_block_parts).  Direct stores only (the partial sums live in
// y), and a finite filter (the exact border path sums all taps at once).
template <class T>
static inline bool conv2d_forward_split(const Conv2dForwardArgs* a) {
    const idx row_bytes = a->block_vecs * Simd<T>::V * (idx)sizeof(T);
    return a->direct && !a->exact_edges && a->KH * a->KW * a->cin_g * row_bytes > 2 * FWD_PART_BYTES;
}

// One channel block over output rows [row_begin, row_end) with the sum split into parts, when
// the block's whole filter would not stay in L2 (fwd_late: 9 x 512 rows of 2
// vectors, 590 KB).  A part is one tap (a kernel row, when merged) and a run of
// its reduction channels (as many parts per tap as FWD_PART_BYTES asks, of
// equal size); chunk by chunk of rows (FWD_PART_CHUNK_BYTES), parts go in the
// order of the unsplit sum, and each resumes from the sums the previous one
// stored in y, so every element adds the same terms in the same order (the
// same bits).
template <class T>
static void conv2d_forward_block_parts(const Conv2dForwardArgs* a, const Conv2dForwardScratch<T>& s, idx block,
                                       idx row_begin, idx row_end) {
    typedef Simd<T> S;
    const bool merge = conv2d_forward_merged(a);
    const idx positions = merge ? a->KH : a->KH * a->KW;
    const idx K = merge ? a->KW * a->cin_g : a->cin_g;
    const idx row_bytes = a->block_vecs * S::V * (idx)sizeof(T);
    const idx parts = (K * row_bytes + FWD_PART_BYTES - 1) / FWD_PART_BYTES;
    const idx k_part = (K + parts - 1) / parts;
    const idx g = block / a->blocks_per_group, c0 = (block % a->blocks_per_group) * a->block_vecs * S::V;
    const int nrv = conv2d_forward_block_width(a, c0);
    // The input rows an output row brings in: sh of them (W pixels of Cin channels).
    const idx row_input_bytes = a->sh * a->W * a->Cin * (idx)sizeof(T);
    const idx chunk = row_input_bytes <= 0                      ? row_end - row_begin
                      : row_input_bytes < FWD_PART_CHUNK_BYTES ? FWD_PART_CHUNK_BYTES / row_input_bytes
                                                                : 1;
    for (idx chunk_begin = row_begin; chunk_begin < row_end; chunk_begin += chunk) {
        const idx chunk_end = row_end - chunk_begin < chunk ? row_end : chunk_begin + chunk;
        for (idx position = 0; position < positions; ++position)
            for (idx k0 = 0; k0 < K; k0 += k_part) {
                const idx kn = K - k0 < k_part ? K - k0 : k_part;
                for (idx row = chunk_begin; row < chunk_end; ++row) {
                    const idx n = row / a->OH, oh = row % a->OH;
                    idx row_K, out_pixel, out_group;
                    const idx n_taps = conv2d_forward_taps<T>(a, s, n, oh, &row_K);
                    T* out = conv2d_forward_out<T>(a, s, n, oh, &out_pixel, &out_group);
                    if (n_taps == 0) {  // every kernel row in the padding: an empty sum, stored once
                        if (position == 0 && k0 == 0)
                            conv2d_forward_blocks<T>(a, s, 0, row_K, block, block + 1, out, out_pixel, out_group);
                        continue;
                    }
                    idx t = 0;  // this row's tap at this position, if it has one
                    while (t < n_taps && (merge ? s.tap_kh[t] : s.tap_kh[t] * a->KW + s.tap_kw[t]) != position) ++t;
                    if (t == n_taps) continue;
                    s.tap_a[0] = s.tap_base[t] + g * a->cin_g + k0;
                    s.tap_b[0] = conv2d_forward_packed<T>(a, s.tap_kh[t], s.tap_kw[t], g, c0) + k0 * a->b_pitch;
                    conv2d_forward_block_tiles<T>(a, s, 1, kn, c0, nrv, out + g * out_group + c0, out_pixel,
                                                  t > 0 || k0 > 0);
                }
            }
    }
}

template <class T>
static void conv2d_forward_channel_block(const Conv2dForwardArgs* call, idx unit_index, void* raw) {
    typedef Simd<T> S;
    const Conv2dForwardScratch<T> s = conv2d_forward_scratch<T>(call, raw);
    const idx block = unit_index / call->row_chunks;
    idx row_begin, row_end;
    row_run(call->N * call->OH, call->row_chunks, unit_index % call->row_chunks, &row_begin, &row_end);
    const idx g = block / call->blocks_per_group, c0 = (block % call->blocks_per_group) * call->block_vecs * S::V;
    // Packing its own block (once per thread: the next unit of the same block
    // finds it in the scratch), the unit reads the packed filter from its
    // scratch, and takes the exact border path only when its own weights need it.
    Conv2dForwardArgs unit = *call;
    if (s.pack_key[0] != block + 1) {
        s.pack_key[1] = conv2d_forward_pack_block<T>(call, g, c0, s.block_pack);
        s.pack_key[0] = block + 1;
    }
    unit.packed = s.block_pack;
    unit.packed_first_block = block;
    unit.exact_edges = (int)s.pack_key[1];
    const Conv2dForwardArgs* a = &unit;
    const idx count = a->cout_g - c0 < a->block_vecs * S::V ? a->cout_g - c0 : a->block_vecs * S::V;
    if (conv2d_forward_split<T>(a)) {
        conv2d_forward_block_parts<T>(a, s, block, row_begin, row_end);
        return;
    }
    for (idx row = row_begin; row < row_end; ++row) {
        const idx n = row / a->OH, oh = row % a->OH;
        idx K, out_pixel, out_group;
        const idx n_taps = conv2d_forward_taps<T>(a, s, n, oh, &K);
        T* out = conv2d_forward_out<T>(a, s, n, oh, &out_pixel, &out_group);
        conv2d_forward_blocks<T>(a, s, n_taps, K, block, block + 1, out, out_pixel, out_group);
        if (!a->direct && count > 0) conv2d_forward_scatter<T>(a, s, n, oh, g, c0, count);
    }
}

#endif  // CVZ_PER_ISA_PASS
