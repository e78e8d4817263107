// The conv2d filter gradient: one file in three parts (Highway's foreach_target
// idiom, see cvz_per_isa.hpp):
//   1. the interface, its argument struct and entry points: all the Cython
//      module includes (it defines CVZ_INTERFACE_ONLY first);
//   2. the entry points, each dispatching on a table [isa][f64] of the body's
//      instantiations;
//   3. the kernel body, compiled once per ISA: cvz_per_isa.hpp includes this
//      file again with CVZ_PER_ISA_PASS defined.
#ifndef CVZ_CONV2D_FILTER_GRAD_INTERFACE  // 1. the interface
#define CVZ_CONV2D_FILTER_GRAD_INTERFACE

#include "cvz_common.hpp"

namespace cvz {

// dw[kh, kw, ci, co] = sum over n, oh, ow of
// x[n, oh*sh - pt + kh*dh, ow*sw - pl + kw*dw, g*cin_g + ci] * dy[n, oh, ow, co],
// g = co / cout_g, over the (output cell, tap) pairs that read a real input cell.
// Element strides of x and dy are in logical NHWC order (the caller permutes
// NCHW); dw is HWIO [KH, KW, cin_g, Cout] with any strides.
struct Conv2dFilterGradArgs : ConvDims {
    Tensor x;
    Tensor dy;
    Tensor out;
    // ow_first/ow_last[kw]: the output columns whose input column through tap kw is real.
    const idx* ow_first;
    const idx* ow_last;
    // How many units share the filter's tiles within a part of the rows (any
    // count gives the same bits); a call runs parts * n_units units.
    idx n_units;
    // Filled in by prepare(): the vector width, output channels per group
    // padded to it, the tile grid (input-channel tiles of up to MR rows by blocks of
    // 2 vectors of output channels, per tap and group), the output rows per
    // chunk, the per-thread scratch size.  The caller allocates `acc`
    // (parts * n_tiles tiles of tile_elems elements of the compute type, zeroed).
    idx V, cout_g_pad, mr, ci_tiles, c_blocks, n_tiles, tile_elems, chunk_rows, scratch_elems;
    idx block_vectors;  // vectors of output channels per tile: 2, or 4 for a few input channels
    // kw_merged: a kernel row's taps are one run of KW * cin_g reduction rows
    // (kw, ci), tiled MR rows at a time (ci_tiles counts those tiles per kernel
    // row); see conv2d_filter_grad_prepare.
    int kw_merged;
    // x_direct / dy_direct: rows read in place, not staged (the compute type,
    // plain NHWC, no channel padding; x only where no tile reads past a
    // pixel's channels).
    int x_direct, dy_direct;
    // dy_blocked: dy staged channel block by channel block ([G * c_blocks]
    // [chunk pixels][block_vectors * V]), so a tile reads its block's pixels
    // one after another, not a whole pixel's channels apart.
    int dy_blocked;
    // blocks_outer: tiles ordered by output-channel block first, so each unit
    // stages only its blocks of dy (see prepare).
    int blocks_outer;
    // x_blocked: input rows staged once each per chunk, input-channel tile by
    // tile ([G * ci_tiles][chunk_rows * KH slots][W][mr]), for the same reason
    // (a tile broadcasts a few channels of each pixel).
    int x_blocked;
    // direct_out: each tile's sum is whole after one chunk (every output row fits
    // in one), so tiles start from zero in registers and store straight into
    // `out` (the compute type, contiguous channels, a whole number of vectors per
    // group; kernel rows not merged): no accumulator buffer to zero, load, store
    // and copy out (tile_elems is then 0 and `acc` unused).  Late layers: 7x7
    // pixels, 160 x 960 filter values.
    int direct_out;
    // parts: the output rows cut into this many parts, fixed by the problem size
    // (never by the thread count), each summed into its own accumulator buffer
    // (acc holds parts of n_tiles * tile_elems), added in part order afterwards
    // by conv2d_filter_grad_reduce.  Where the filter has few tiles and the sum is
    // long (a 1x1 layer of 16-144 channels at 56x56, batch 8: 7 tiles, 25,088
    // pixels), threads sharing tiles each staged every row and split the tiles
    // unevenly.
    idx parts;
    void* acc;
};

// isa: an Isa code (cvz_isa.hpp); f64: compute in double (else float).
void conv2d_filter_grad_prepare(Conv2dFilterGradArgs* a, int isa, int f64);
// Unit `unit` of the call `args` (a Conv2dFilterGradArgs): the whole sum for its
// share of the filter's tiles, then their store into `out`, with `scratch` of
// scratch_elems elements (a UnitFn of _cvz.pxd).
void conv2d_filter_grad_unit(const void* args, int isa, int f64, idx unit, void* scratch);
// Tile `unit` of a call of several parts: its parts' sums added in part order,
// stored into `out` (a UnitFn; n_tiles units, after every unit above).
void conv2d_filter_grad_reduce(const void* args, int isa, int f64, idx unit, void* scratch);

}  // namespace cvz

#endif  // CVZ_CONV2D_FILTER_GRAD_INTERFACE

#if defined(CVZ_INTERFACE_ONLY)
// The Cython module's include: the interface above is all it needs.
#elif !defined(CVZ_PER_ISA_PASS)  // 2. the entry points

#define CVZ_OP_BODY "conv2d_filter_grad.cpp"  // this file again, once per ISA
#include "cvz_per_isa.hpp"

namespace cvz {

namespace {
typedef void (*PrepareFn)(Conv2dFilterGradArgs*);
typedef void (*UnitFnT)(const Conv2dFilterGradArgs*, idx, void*);
const PrepareFn prepare_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_filter_grad_prepare);
const UnitFnT unit_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_filter_grad_unit);
const UnitFnT reduce_table[ISA_COUNT][2] = CVZ_ISA_TABLE(conv2d_filter_grad_reduce);
}  // namespace

void conv2d_filter_grad_prepare(Conv2dFilterGradArgs* a, int isa, int f64) { isa_pick(prepare_table, isa, f64)(a); }

void conv2d_filter_grad_unit(const void* args, int isa, int f64, idx unit, void* scratch) {
    isa_pick(unit_table, isa, f64)(static_cast<const Conv2dFilterGradArgs*>(args), unit, scratch);
}

void conv2d_filter_grad_reduce(const void* args, int isa, int f64, idx unit, void* scratch) {
    isa_pick(reduce_table, isa, f64)(static_cast<const Conv2dFilterGradArgs*>(args), unit, scratch);
}

}  // namespace cvz

#else  // CVZ_PER_ISA_PASS: the kernel body, compiled once per ISA by cvz_per_isa.hpp

// The conv2d filter gradient, written once against Simd<T>, compiled once per
// instruction set.
//
// Per tap, the gradient is a product of the input's pixels (transposed) and the
// output gradient's: dw_tap[ci, co] = sum over pixels p of x_tap[p, ci] * dy[p, co].
// The filter is cut into tiles (one tap and group, MR input channels, 2 vectors
// of output channels), and each tile's sum stays in registers over a chunk of
// output rows.  The chunks are fixed by the problem size, every tile adds them
// in chunk order, and a tile belongs to one unit: the result is bitwise the same
// for any thread count, and no two threads ever add into the same memory.  Where
// the filter has few tiles and the sum is long, the rows are cut into parts (their
// number fixed by the problem size), a unit per part, and each tile's parts are
// added in part order afterwards (conv2d_filter_grad_reduce).
//
// Only pairs that exist are added: for each kernel row, the output rows whose
// input row is real; for each kernel column, the output columns whose input
// column is real (ow_first/ow_last) -- a NaN or Inf reaches exactly the taps
// that read it.

// Tile shapes per ISA (generic, AVX2, AVX-512): MR input channels by 2 vectors
// of output channels (2 * MR accumulators).
constexpr int FG_MR = per_isa(THIS_ISA, 4, 6, 14);
// Groups of up to this many input channels merge a kernel row's taps (see
// prepare): MR/4, in tiles of MR/2 rows where the output channels are wide, and
// 3 on AVX2 (an RGB stem, in MR-row tiles), whose MR/4 of 2 left bpf_stem in
// 3-row tiles of 2 vectors: 6 FMAs for 5 loads.
constexpr int FG_MERGE_HALF_TILE_MAX_CIN = (FG_MR + 3) / 4;
constexpr int FG_MERGE_MAX_CIN = FG_MERGE_HALF_TILE_MAX_CIN > 3 ? FG_MERGE_HALF_TILE_MAX_CIN : 3;
// Output pixels per chunk (about): enough to amortise a tile's load and store,
// few enough that a chunk's staged rows stay in the core's cache.
constexpr idx FG_CHUNK_PIXELS = 256;
// The first tile of a unit to read a chunk's input pixels in place (the rest
// find them in cache) fetches the pixel this many steps ahead (PREFETCH_X in
// filter_grad_tile) where pixels lie FG_PREFETCH_MIN_STRIDE bytes or more apart:
// the core's prefetchers follow such strides a line ahead at most, and the tile
// waited on L3 or memory for each pixel (perf: 8x56x56 256 -> 64, 1x1, all but
// a few percent of the call in the tile's loop, at 31% of the FMA peak).  Timed
// in one process, on and off alternating call by call (ABBA, 2 s a case, 2
// threads, median ratio; the same bits): float32 1x1 layers 0.78-0.95x the time
// (8x56x56 256 -> 64 0.79, 8x28x28 512 -> 256 0.82, 8x14x14 1024 -> 256 0.91,
// 8x7x7 1152 -> 192 0.87), float64 0.78-0.98x, 3x3 layers and narrow pixels
// 0.98-1.01x.  Prefetching in every tile gained nothing more (0.97-1.02x); nor
// did pixels 128 bytes apart (0.98-1.01x).  AVX2's 6-row tiles do half the work a
// step and gained nothing (0.95-1.02x): off there.
constexpr idx FG_PREFETCH_STEPS = per_isa(THIS_ISA, 0, 0, 16);
constexpr idx FG_PREFETCH_MIN_STRIDE = 256;
// Parts of the rows (see Conv2dFilterGradArgs::parts): at most this many, each
// of at least FG_PART_MIN_CHUNKS chunks and FG_PART_MIN_FLOPS of work, where a
// part's accumulators take at most FG_PART_MAX_ACC_BYTES (they stay in the
// core's L2 beside the staged rows; a 3x3 64 -> 64 layer's 161 KiB of tiles
// already splits evenly over threads), and only where shares of the tiles would
// cost: fewer than FG_PART_MAX_TILES tiles (shares of 2 or 3 tiles are uneven:
// 112x112 32 -> 16, 3 tiles, 0.73x the time with parts), or a tensor every share
// reads whole (dy, or x where each share stages only its blocks of dy) of at
// least FG_PART_MIN_SHARED_BYTES, read again by every thread from beyond its L2
// (8x56x56 256 -> 64: 0.75x).  Below that, the parts' zeroing and second pass
// cost more than they save (8x14x14 200 -> 80, 1.7 MB, 45 tiles: 1.08x).
constexpr idx FG_MAX_PARTS = 8;
constexpr idx FG_PART_MIN_CHUNKS = 2;
constexpr double FG_PART_MIN_FLOPS = double(1 << 21);
constexpr idx FG_PART_MAX_ACC_BYTES = 96 * 1024;
constexpr idx FG_PART_MAX_TILES = 16;
constexpr idx FG_PART_MIN_SHARED_BYTES = 1 << 20;
// Or bigger accumulators where a part's work is at least this many flops per byte
// of them (their zeroing and the second pass are then a few percent: 8x28x28
// 512 -> 128, 265 KiB of tiles, 103 MFLOP a part).
constexpr double FG_PART_FLOPS_PER_ACC_BYTE = 256.0;
// and at most this many bytes of them: every chunk of a part passes all of its
// tiles' accumulators through the core's cache (3x3 layers of 256-1024 -> 512
// channels, 4.9-9.5 MB of tiles, took 1.37-1.45x the time in parts).
constexpr idx FG_PART_MAX_BIG_ACC_BYTES = 1 << 20;

// The elements of a thread's staged input rows and output-gradient rows (0
// where read in place): [chunk_rows][KH][W * Cin] + MR of slack (a partial tile
// reads past its group's last channel), or blocked (x_blocked: a slot per
// (chunk row, kh), tile by tile); dy [chunk_rows][OW][G][cout_g_pad], or
// blocked (dy_blocked).
static inline idx filter_grad_x_stage_elems(const Conv2dFilterGradArgs* a) {
    if (a->x_direct) return 0;
    if (a->x_blocked) return a->G * a->ci_tiles * a->chunk_rows * a->KH * a->W * a->mr;
    return a->chunk_rows * a->KH * a->W * a->Cin + FG_MR;
}
static inline idx filter_grad_dy_stage_elems(const Conv2dFilterGradArgs* a) {
    if (a->dy_direct) return 0;
    if (a->dy_blocked) return a->G * a->c_blocks * a->chunk_rows * a->OW * a->block_vectors * a->V;
    return a->chunk_rows * a->OW * a->G * a->cout_g_pad;
}

template <class T>
static void conv2d_filter_grad_prepare(Conv2dFilterGradArgs* a) {
    a->V = Simd<T>::V;
    a->cout_g_pad = round_up(a->cout_g, a->V);
    // A group with at most MR/4 input channels (a network's stem) would fill only
    // MR/4-row tiles per tap.  Without groups and dilation, a kernel row's taps
    // read KW consecutive input pixels, (kw, ci) runs of KW * cin_g values: one
    // tap of that many reduction rows fills whole tiles, of MR/2 rows by 4
    // vectors of output channels (bpf_stem: 21 rows in three tiles of 7 by 64
    // channels, where 49 taps of 3 rows took 4-row tiles).
    a->kw_merged = a->G == 1 && a->dw == 1 && a->KW > 1 && a->cin_g <= FG_MERGE_MAX_CIN;
    const bool wide = a->cout_g_pad >= 4 * a->V;
    a->mr = a->kw_merged && wide && a->cin_g <= FG_MERGE_HALF_TILE_MAX_CIN ? (FG_MR + 1) / 2 : FG_MR;
    const idx rows = a->kw_merged ? a->KW * a->cin_g : a->cin_g;
    // As few tiles as MR-row tiles need, their heights as equal as can be (64
    // channels: 13, 13, 13, 13, 12 rows, not 14, 14, 14, 14 and an 8-row
    // remainder in a 14-row tile, 9% of bpf_resnet's FMAs wasted).
    a->ci_tiles = (rows + a->mr - 1) / a->mr;
    // Otherwise such a group fills MR/4-row tiles: 4 vectors of output channels
    // then keep the FMA units busy per load.
    a->block_vectors = wide && a->cin_g <= (FG_MR + 3) / 4 ? 4 : 2;
    a->c_blocks = (a->cout_g_pad / a->V + a->block_vectors - 1) / a->block_vectors;
    a->n_tiles = a->KH * (a->kw_merged ? 1 : a->KW) * a->G * a->ci_tiles * a->c_blocks;
    a->tile_elems = FG_MR * a->block_vectors * a->V;  // (0 below with direct_out)
    // Rows are read in place where staging would only copy them: the compute
    // type, pixels of contiguous channels, no channel padding; the input only
    // where every tile is as tall as its real rows (a taller tile reads past its
    // last channel, which staging leaves slack for).
    const bool x_same = sizeof(T) == 4 ? a->x.type == F32 : a->x.type == F64;
    const bool dy_same = sizeof(T) == 4 ? a->dy.type == F32 : a->dy.type == F64;
    // Tiles are exactly as tall as their rows but for a lone tile of fewer than
    // MR/4 (filter_grad_tile_for).
    const bool exact_tiles = rows >= (FG_MR + 3) / 4;
    // Only where the tiles do enough work per staged value for the copy (each
    // thread stages every row) to pay: 2 * KH * KW * cout_g / (sh * sw) flops,
    // 9216 in bpf_late (AVX2 17.3 -> 14.5 ms); bpf_pointwise's 512 and
    // bpf_stride2's 1152 ran 10-20% slower staged.
    a->x_blocked = !a->kw_merged && a->sw * a->Cin * (idx)sizeof(T) >= 512 &&
                   2 * a->KH * a->KW * a->cout_g >= 4096 * a->sh * a->sw;
    a->x_direct = !a->x_blocked && x_same && a->x.s[3] == 1 && a->x.s[2] == a->Cin && exact_tiles;
    // Pixels 512 bytes or more apart (128 float32 channels) are staged block by
    // block: a tile reading a few vectors of each pixel in place stalled on
    // every load (the prefetchers do not follow; AVX2 bpf_late, 2 KiB apart).
    a->dy_blocked = a->cout_g_pad * a->G * (idx)sizeof(T) >= 512;
    // With one tap, each unit staging only its own channel blocks of dy (each
    // thread staged all of it, 6.4 MB a thread in bpf_pointwise) pays: 2.98 ->
    // 2.89 ms; with 9 taps the blocks-first order ran slower (bpf_late 6.5 -> 7.1).
    a->blocks_outer = a->dy_blocked && a->KH * a->KW == 1;
    a->dy_direct = !a->dy_blocked && dy_same && a->dy.s[3] == 1 && a->dy.s[2] == a->Cout && a->cout_g_pad == a->cout_g;
    // 1x1 filters over more pixels than one chunk take chunks of half as many: a tile's
    // chunk of the output gradient's block and of its input channels then stays in L1
    // (8x28x28 512 -> 128: 0.82x the time; 3x3 layers, whose taps share staged rows,
    // were 1.01-1.03x with them).
    const bool one_tap = a->KH * a->KW == 1;
    const idx chunk_pixels = one_tap && a->N * a->OH * a->OW > FG_CHUNK_PIXELS
                                 ? FG_CHUNK_PIXELS / 2
                                 : FG_CHUNK_PIXELS;
    idx chunk = (chunk_pixels + a->OW - 1) / (a->OW > 0 ? a->OW : 1);
    if (chunk < 1) chunk = 1;
    if (chunk > 64) chunk = 64;
    a->chunk_rows = chunk;
    const bool out_same = sizeof(T) == 4 ? a->out.type == F32 : a->out.type == F64;
    a->direct_out = a->N * a->OH <= chunk && out_same && a->out.s[3] == 1 && a->cout_g % a->V == 0 && !a->kw_merged;
    if (a->direct_out) a->tile_elems = 0;
    a->parts = 1;
    const idx chunks = (a->N * a->OH + chunk - 1) / chunk;
    const double flops = a->flops();
    const idx shared_bytes =
        (a->blocks_outer ? a->N * a->H * a->W * a->Cin : a->N * a->OH * a->OW * a->Cout) * (idx)sizeof(T);
    if (!a->direct_out && (a->n_tiles < FG_PART_MAX_TILES || shared_bytes >= FG_PART_MIN_SHARED_BYTES)) {
        // (Chunks of FG_CHUNK_PIXELS, whatever this call's: 28x28 1x1 calls of 0.06 ms
        // in 2 parts of 3 half-size chunks took 1.1-1.2x the time.)
        const idx full_chunks = a->N * a->OH * a->OW / FG_CHUNK_PIXELS;
        idx parts = (full_chunks < chunks ? full_chunks : chunks) / FG_PART_MIN_CHUNKS;
        const double by_work = flops / FG_PART_MIN_FLOPS;
        if (by_work < (double)parts) parts = (idx)by_work;
        if (parts > FG_MAX_PARTS) parts = FG_MAX_PARTS;
        // A power of two, so that 2, 4 or 8 threads share the parts evenly (3 parts
        // on 2 threads: one thread summed two, 1.25-1.4x the time of no parts).
        while (parts & (parts - 1)) parts &= parts - 1;
        const double acc_bytes = (double)(a->n_tiles * a->tile_elems * (idx)sizeof(T));
        const bool acc_fits = acc_bytes <= FG_PART_MAX_ACC_BYTES ||
                              (acc_bytes <= flops / (parts * FG_PART_FLOPS_PER_ACC_BYTE) &&
                               acc_bytes <= FG_PART_MAX_BIG_ACC_BYTES);
        if (parts > 1 && acc_fits) a->parts = parts;
    }
    // The staged rows (filter_grad_*_stage_elems), then the per-row tables:
    // a_rows, b_rows, x_rows (KH per row) and dy_rows (pointers), counts, ih_of
    // and the blocked stage's slot keys (KH per row).
    a->scratch_elems = round_up(filter_grad_x_stage_elems(a), 16) + round_up(filter_grad_dy_stage_elems(a), 16) +
                       (idx)(((3 + a->KH) * chunk * sizeof(void*) + (1 + 2 * a->KH) * chunk * sizeof(idx)) /
                             sizeof(T)) +
                       16;
}

// One tile over a chunk: acc (MR x NRV vectors, row p at tile + p * tile_row) +=
// the rows' terms, or (from_zero) = them.  Row r adds counts[r] pixels:
// a_rows[r][k * a_step + p] * b_rows[r][k * b_step + c].  Rows from store_rows
// on are computed but not stored (a lone short tile's).  PREFETCH_X: fetch the
// input pixel FG_PREFETCH_STEPS steps ahead (into the next row past a row's end).
template <class T, int MR, int NRV, bool PREFETCH_X>
static inline void filter_grad_tile(const T* const* a_rows, const T* const* b_rows, const idx* counts, idx n_rows,
                                    idx a_step, idx b_step, T* tile, idx tile_row, idx store_rows, bool from_zero) {
    typedef Simd<T> S;
    typedef typename S::vec vec;
    vec acc[MR][NRV];
    CVZ_UNROLL(32)
    for (int p = 0; p < MR; ++p)
        CVZ_UNROLL(4)
        for (int q = 0; q < NRV; ++q) acc[p][q] = from_zero ? S::zero() : S::load(tile + p * tile_row + q * S::V);
    for (idx r = 0; r < n_rows; ++r) {
        const T* a = a_rows[r];
        const T* b = b_rows[r];
        const idx K = counts[r];
        // (Rows need not be adjacent: a stride skips input rows.)
        const T* next = r + 1 < n_rows ? a_rows[r + 1] : a + K * a_step;
        const T* ahead =
            K > FG_PREFETCH_STEPS ? a + FG_PREFETCH_STEPS * a_step : next + (FG_PREFETCH_STEPS - K) * a_step;
        for (idx k = 0; k < K; ++k) {
            if constexpr (PREFETCH_X) {  // the tile's MR channels of a pixel: one to three cache lines
                CVZ_PREFETCH(ahead);
                if constexpr (MR * sizeof(T) > 64) CVZ_PREFETCH(ahead + MR / 2);
                CVZ_PREFETCH(ahead + MR - 1);
                ahead = k + 1 + FG_PREFETCH_STEPS == K ? next : ahead + a_step;
            }
            vec bv[NRV];
            CVZ_UNROLL(4)
            for (int q = 0; q < NRV; ++q) bv[q] = S::load(b + k * b_step + q * S::V);
            CVZ_UNROLL(32)
            for (int p = 0; p < MR; ++p) {
                const vec av = S::set1(a[k * a_step + p]);
                CVZ_UNROLL(4)
                for (int q = 0; q < NRV; ++q) acc[p][q] = S::fma(av, bv[q], acc[p][q]);
            }
        }
    }
    CVZ_UNROLL(32)
    for (int p = 0; p < MR; ++p)
        if (p < store_rows)
            CVZ_UNROLL(4)
            for (int q = 0; q < NRV; ++q) S::store(tile + p * tile_row + q * S::V, acc[p][q]);
}

// The tile of `rows` rows (at least MR/4: a lone tile of fewer rows takes
// MR/4 and computes a few rows it does not store) and NRV vectors; tiles of
// 3 and 4 vectors are at most MR/2 rows tall (what the registers hold).
template <class T, int NRV, int H = (NRV > 2 ? (FG_MR + 1) / 2 : FG_MR)>
static inline void filter_grad_tile_for(idx rows, const T* const* a_rows, const T* const* b_rows, const idx* counts,
                                        idx n_rows, idx a_step, idx b_step, T* tile, bool direct, idx out_row,
                                        bool prefetch_x) {
    constexpr int quarter = (FG_MR + 3) / 4;
    if constexpr (H > quarter) {
        if (rows < H)
            return filter_grad_tile_for<T, NRV, H - 1>(rows, a_rows, b_rows, counts, n_rows, a_step, b_step, tile,
                                                       direct, out_row, prefetch_x);
    }
    // The accumulator buffer holds every row of the tile; `out` only the real ones.
    const idx tile_row = direct ? out_row : NRV * Simd<T>::V, store_rows = direct ? rows : H;
    // (Tiles of 3-4 vectors are a stem's, whose pixels are a few channels wide.)
    if constexpr (NRV <= 2 && FG_PREFETCH_STEPS > 0) {
        if (prefetch_x)
            return filter_grad_tile<T, H, NRV, true>(a_rows, b_rows, counts, n_rows, a_step, b_step, tile, tile_row,
                                                     store_rows, direct);
    }
    filter_grad_tile<T, H, NRV, false>(a_rows, b_rows, counts, n_rows, a_step, b_step, tile, tile_row, store_rows,
                                       direct);
}

// Vectors of output channels in the tile whose channels start at c0.
static inline idx filter_grad_vectors(const Conv2dFilterGradArgs* a, idx c0) {
    const idx left = (a->cout_g_pad - c0) / a->V;
    return left < a->block_vectors ? left : a->block_vectors;
}

// A tile of the grid: its kernel row and column (0 when the row's taps are
// merged), group, first reduction row (an input channel, or a (kw, ci) run
// index when merged), how many of its rows are real, its first output channel,
// where its rows start in a staged input pixel (x_offset), and its output
// columns: [lo, hi) where every tap of the tile reads a real input column,
// [first, last) where some tap does (the same unless merged).
struct FilterGradTile {
    idx kh, kw, g, ct, r0, rows, c0, x_offset, lo, hi, first, last;
};

template <class T>
static inline FilterGradTile filter_grad_tile_at(const Conv2dFilterGradArgs* a, idx tile) {
    const idx per_row = a->kw_merged ? 1 : a->KW;
    const idx taps = a->KH * per_row;
    idx rest = tile, tap, g, ct, cb;
    if (a->blocks_outer) {  // (group, channel block, tap, input-channel tile)
        ct = rest % a->ci_tiles;
        rest /= a->ci_tiles;
        tap = rest % taps;
        rest /= taps;
        cb = rest % a->c_blocks;
        g = rest / a->c_blocks;
    } else {  // (tap, group, input-channel tile, channel block)
        cb = rest % a->c_blocks;
        rest /= a->c_blocks;
        ct = rest % a->ci_tiles;
        rest /= a->ci_tiles;
        g = rest % a->G;
        tap = rest / a->G;
    }
    const idx reduction = a->kw_merged ? a->KW * a->cin_g : a->cin_g;
    FilterGradTile f;
    const EvenSplit split(reduction, a->ci_tiles);
    f.kh = tap / per_row, f.kw = tap % per_row, f.g = g, f.ct = ct;
    f.r0 = split.first(ct);
    f.rows = split.size(ct);
    f.c0 = cb * a->block_vectors * Simd<T>::V;
    f.x_offset = a->kw_merged ? 0 : f.kw * a->dw * a->Cin + f.g * a->cin_g;
    f.lo = f.first = a->ow_first[f.kw], f.hi = f.last = a->ow_last[f.kw];
    if (a->kw_merged) {  // the taps of kernel columns r0 / cin_g .. (r0 + rows - 1) / cin_g
        f.lo = f.last = 0, f.hi = f.first = a->OW;
        for (idx kw = f.r0 / a->cin_g; kw <= (f.r0 + f.rows - 1) / a->cin_g; ++kw) {
            if (a->ow_first[kw] > f.lo) f.lo = a->ow_first[kw];
            if (a->ow_last[kw] < f.hi) f.hi = a->ow_last[kw];
            if (a->ow_first[kw] < f.first) f.first = a->ow_first[kw];
            if (a->ow_last[kw] > f.last) f.last = a->ow_last[kw];
        }
    }
    return f;
}

// A merged tile's border pixels of one staged row (x_row: the input row the
// kernel row reads, dy_row: the tile's channels of the output row's pixel 0):
// the columns in [first, last) but outside [lo, hi), each (pixel, row) pair
// added only where its input column is real, into the tile's sums in memory.
template <class T>
static inline void filter_grad_merged_border(const Conv2dFilterGradArgs* a, const FilterGradTile& f, const T* x_row,
                                             const T* dy_row, idx dy_pixel, idx nrv, T* t) {
    typedef Simd<T> S;
    for (idx ow = f.first; ow < f.last; ++ow) {
        if (ow >= f.lo && ow < f.hi) {
            ow = f.hi - 1;  // the interior went through the tile
            continue;
        }
        const T* x = x_row + (ow * a->sw - a->pl) * a->Cin + f.r0;
        const T* dy = dy_row + ow * dy_pixel;
        for (idx p = 0; p < f.rows; ++p) {
            const idx kw = (f.r0 + p) / a->cin_g;
            if (ow < a->ow_first[kw] || ow >= a->ow_last[kw]) continue;
            const typename S::vec xv = S::set1(x[p]);
            for (idx q = 0; q < nrv; ++q) {
                T* sum = t + (p * nrv + q) * S::V;
                S::store(sum, S::fma(xv, S::load(dy + q * S::V), S::load(sum)));
            }
        }
    }
}

// Output-gradient row (n, oh), staged block by block: block b of pixel ow at
// dst[b * block_span + ow * block] (zero past the group's channels: the stage
// comes zeroed and those places are never written).
template <class T>
static void filter_grad_stage_blocked(const Conv2dFilterGradArgs* a, idx n, idx oh, T* dst, idx block_span,
                                      idx first_block, idx last_block) {
    typedef Simd<T> S;
    const idx block = a->block_vectors * S::V;
    const idx offset = n * a->dy.s[0] + oh * a->dy.s[1];
    const bool plain = (sizeof(T) == 4 ? a->dy.type == F32 : a->dy.type == F64) && a->dy.s[3] == 1;
    for (idx gcb = first_block; gcb <= last_block; ++gcb) {
        const idx g = gcb / a->c_blocks, cb = gcb % a->c_blocks;
        const idx c0 = cb * block, count = a->cout_g - c0 < block ? a->cout_g - c0 : block;
        T* d = dst + (g * a->c_blocks + cb) * block_span;
        if (plain && count == block) {
            copy_channel_block<T>(d, block, (const T*)a->dy.data + offset + (g * a->cout_g + c0), a->dy.s[2], a->OW, count);
        } else {
            gather_rows<T>(d, block, a->dy.data, a->dy.type, offset + (g * a->cout_g + c0) * a->dy.s[3], a->OW,
                           a->dy.s[2], count, a->dy.s[3]);
        }
    }
}

// Input row (n, ih), staged input-channel tile by tile: the channels of tile
// (g, ct) of pixel w at dst[(g * ci_tiles + ct) * tile_span + w * mr] (the rest
// of each mr stays zero: the stage comes zeroed and is never written there).
template <class T>
static void filter_grad_stage_x_blocked(const Conv2dFilterGradArgs* a, idx n, idx ih, T* dst, idx tile_span) {
    const bool plain = (sizeof(T) == 4 ? a->x.type == F32 : a->x.type == F64) && a->x.s[3] == 1;
    const EvenSplit split(a->cin_g, a->ci_tiles);  // the tiles of filter_grad_tile_at (never merged here)
    const idx offset = n * a->x.s[0] + ih * a->x.s[1];
    for (idx g = 0; g < a->G; ++g)
        for (idx ct = 0; ct < a->ci_tiles; ++ct) {
            const idx r0 = split.first(ct), rows = split.size(ct);
            T* d = dst + (g * a->ci_tiles + ct) * tile_span;
            const idx from = offset + (g * a->cin_g + r0) * a->x.s[3];
            if (plain) {
                const T* src = (const T*)a->x.data + from;
                for (idx w = 0; w < a->W; ++w)
                    for (idx c = 0; c < rows; ++c) d[w * a->mr + c] = src[w * a->x.s[2] + c];
            } else {
                gather_rows<T>(d, a->mr, a->x.data, a->x.type, from, a->W, a->x.s[2], rows, a->x.s[3]);
            }
        }
}

// Store tile `tile`'s sums (acc: the tile's accumulators) into the filter
// gradient (HWIO, the result's dtype).
template <class T>
static void filter_grad_store_tile(const Conv2dFilterGradArgs* a, idx tile, const T* t) {
    typedef Simd<T> S;
    const FilterGradTile f = filter_grad_tile_at<T>(a, tile);
    const idx nrv = filter_grad_vectors(a, f.c0);
    const idx cols = a->cout_g - f.c0 < nrv * S::V ? a->cout_g - f.c0 : nrv * S::V;
    for (idx p = 0; p < f.rows; ++p) {
        // Reduction row r0 + p: input channel ci of tap kw (merged: the run's (kw, ci)).
        const idx kw = a->kw_merged ? (f.r0 + p) / a->cin_g : f.kw;
        const idx ci = a->kw_merged ? (f.r0 + p) % a->cin_g : f.r0 + p;
        // A run of channels at a time (element by element, the stores took 10% of bpf_late).
        const idx at =
            f.kh * a->out.s[0] + kw * a->out.s[1] + ci * a->out.s[2] + (f.g * a->cout_g + f.c0) * a->out.s[3];
        scatter_rows<T>(a->out.data, a->out.type, at, 1, 0, cols, a->out.s[3], t + p * nrv * S::V, 0);
    }
}

template <class T>
static void conv2d_filter_grad_reduce(const Conv2dFilterGradArgs* a, idx tile, void*) {
    typedef Simd<T> S;
    const idx part_elems = a->n_tiles * a->tile_elems;
    T* t = (T*)a->acc + tile * a->tile_elems;
    // Part 0's sums plus part 1's, plus part 2's, ...: one order, whatever the threads.
    for (idx part = 1; part < a->parts; ++part) {
        const T* u = t + part * part_elems;
        for (idx e = 0; e < a->tile_elems; e += S::V) S::store(t + e, S::add(S::load(t + e), S::load(u + e)));
    }
    filter_grad_store_tile<T>(a, tile, t);
}

template <class T>
static void conv2d_filter_grad_unit(const Conv2dFilterGradArgs* a, idx unit, void* raw) {
    typedef Simd<T> S;
    // Unit = (part of the rows, share of the tiles).
    const idx part = unit / a->n_units, share = unit % a->n_units;
    const idx tile_begin = share * a->n_tiles / a->n_units, tile_end = (share + 1) * a->n_tiles / a->n_units;
    if (tile_begin >= tile_end) return;
    // The output-channel blocks (g * c_blocks + cb) this unit's tiles read.
    const idx tiles_per_block = a->n_tiles / (a->G * a->c_blocks);
    const idx first_block = a->blocks_outer ? tile_begin / tiles_per_block : 0;
    const idx last_block = a->blocks_outer ? (tile_end - 1) / tiles_per_block : a->G * a->c_blocks - 1;
    const idx rows_total = a->N * a->OH, chunk_rows = a->chunk_rows;
    // The part's rows: whole chunks (the last part ends at the last row).
    const idx chunks = (rows_total + chunk_rows - 1) / chunk_rows;
    const EvenSplit part_chunks(chunks, a->parts);
    const idx row_begin = part_chunks.first(part) * chunk_rows;
    const idx row_end_chunks = (part_chunks.first(part) + part_chunks.size(part)) * chunk_rows;
    const idx row_end = row_end_chunks < rows_total ? row_end_chunks : rows_total;
    const idx x_row = a->W * a->Cin, dy_row = a->OW * a->G * a->cout_g_pad;
    const idx block = a->block_vectors * S::V, block_span = chunk_rows * a->OW * block;
    // dy's pixel stride as the tiles read it, and where block (g, c0) starts in
    // a pixel (or, blocked, in the stage).
    const idx dy_pixel = a->dy_blocked ? block : a->G * a->cout_g_pad;
    auto block_at = [&](idx g, idx c0) {
        return a->dy_blocked ? (g * a->c_blocks + c0 / block) * block_span : g * a->cout_g_pad + c0;
    };
    // The blocked input stage: tile (g, ct) of slot k's pixel w at
    // x_stage[(g * ci_tiles + ct) * x_tile_span + (k * W + w) * mr].
    const idx x_tile_span = chunk_rows * a->KH * a->W * a->mr;
    const idx x_pixel = a->x_blocked ? a->mr : a->Cin;  // the input's pixel stride as the tiles read it
    // Where a tile's first channel of a staged (or in-place) input row's pixel 0
    // lies, its kernel column's shift included.
    auto x_at = [&](const FilterGradTile& f) {
        return a->x_blocked ? (f.g * a->ci_tiles + f.ct) * x_tile_span + f.kw * a->dw * a->mr : f.x_offset + f.r0;
    };
    T* x_stage = (T*)raw;
    T* dy_stage = x_stage + round_up(filter_grad_x_stage_elems(a), 16);
    const T** a_rows = (const T**)(dy_stage + round_up(filter_grad_dy_stage_elems(a), 16));
    const T** b_rows = a_rows + chunk_rows;
    const T** x_rows = b_rows + chunk_rows;         // the input row of (chunk row, kh)
    const T** dy_rows = x_rows + chunk_rows * a->KH;  // the output-gradient row of a chunk row
    idx* counts = (idx*)(dy_rows + chunk_rows);
    idx* ih_of = counts + chunk_rows;  // input row of (chunk row, kh), -1 when in the padding
    idx* slot_key = ih_of + chunk_rows * a->KH;  // blocked stage: n * H + ih of each slot
    T* acc = (T*)a->acc + part * a->n_tiles * a->tile_elems;

    for (idx row0 = row_begin; row0 < row_end; row0 += chunk_rows) {
        const idx n_rows = row_end - row0 < chunk_rows ? row_end - row0 : chunk_rows;
        idx slots = 0;  // blocked input rows staged for this chunk
        // The chunk's dy rows, and for each (row, kh) the input row it reads:
        // staged, or in place.
        for (idx r = 0; r < n_rows; ++r) {
            const idx n = (row0 + r) / a->OH, oh = (row0 + r) % a->OH;
            if (a->dy_direct) {
                dy_rows[r] = (const T*)a->dy.data + n * a->dy.s[0] + oh * a->dy.s[1];
            } else if (a->dy_blocked) {
                filter_grad_stage_blocked<T>(a, n, oh, dy_stage + r * a->OW * block, chunk_rows * a->OW * block,
                                             first_block, last_block);
                dy_rows[r] = dy_stage + r * a->OW * block;
            } else {
                for (idx g = 0; g < a->G; ++g)
                    gather_rows<T>(dy_stage + r * dy_row + g * a->cout_g_pad, dy_pixel, a->dy.data, a->dy.type,
                                   n * a->dy.s[0] + oh * a->dy.s[1] + g * a->cout_g * a->dy.s[3], a->OW,
                                   a->dy.s[2], a->cout_g, a->dy.s[3]);
                dy_rows[r] = dy_stage + r * dy_row;
            }
            for (idx kh = 0; kh < a->KH; ++kh) {
                const idx ih = oh * a->sh - a->pt + kh * a->dh;
                const bool real = ih >= 0 && ih < a->H;
                ih_of[r * a->KH + kh] = real ? ih : -1;
                if (!real) continue;
                if (a->x_direct) {
                    x_rows[r * a->KH + kh] = (const T*)a->x.data + n * a->x.s[0] + ih * a->x.s[1];
                } else if (a->x_blocked) {  // each input row once a chunk (KH output rows read it)
                    idx k = 0;
                    while (k < slots && slot_key[k] != n * a->H + ih) ++k;
                    if (k == slots) {
                        filter_grad_stage_x_blocked<T>(a, n, ih, x_stage + k * a->W * a->mr, x_tile_span);
                        slot_key[slots++] = n * a->H + ih;
                    }
                    x_rows[r * a->KH + kh] = x_stage + k * a->W * a->mr;
                } else {
                    gather_rows<T>(x_stage + (r * a->KH + kh) * x_row, a->Cin, a->x.data, a->x.type,
                                   n * a->x.s[0] + ih * a->x.s[1], a->W, a->x.s[2], a->Cin, a->x.s[3]);
                    x_rows[r * a->KH + kh] = x_stage + (r * a->KH + kh) * x_row;
                }
            }
        }
        // Every tile of this unit adds the chunk.
        for (idx tile = tile_begin; tile < tile_end; ++tile) {
            const FilterGradTile f = filter_grad_tile_at<T>(a, tile);
            // The tile's offsets into every row, computed once (block_at divides:
            // per row, 4% of an AVX2 bpf_late).
            const idx a_offset = x_at(f) + (f.lo * a->sw - a->pl) * x_pixel;
            const idx b_offset = f.lo * dy_pixel + block_at(f.g, f.c0);
            idx used = 0;
            if (f.hi > f.lo)
                for (idx r = 0; r < n_rows; ++r) {
                    if (ih_of[r * a->KH + f.kh] < 0) continue;
                    a_rows[used] = x_rows[r * a->KH + f.kh] + a_offset;
                    b_rows[used] = dy_rows[r] + b_offset;
                    counts[used] = f.hi - f.lo;
                    ++used;
                }
            // The tile's sums: in the accumulator buffer, or (direct_out) its rows of the result.
            const bool direct = a->direct_out != 0;
            T* t = direct ? (T*)a->out.data + f.kh * a->out.s[0] + f.kw * a->out.s[1] + f.r0 * a->out.s[2] +
                                (f.g * a->cout_g + f.c0)
                          : acc + tile * a->tile_elems;
            const idx nrv = filter_grad_vectors(a, f.c0), a_step = a->sw * x_pixel, out_row = a->out.s[2];
            // The unit's first tile over these input channels of the chunk: blocks
            // first, the unit's first block; else each group's block 0.
            const bool first_read = a->blocks_outer ? f.g * a->c_blocks + f.c0 / block == first_block : f.c0 == 0;
            const bool prefetch_x = FG_PREFETCH_STEPS > 0 && a->x_direct && first_read &&
                                    a_step * (idx)sizeof(T) >= FG_PREFETCH_MIN_STRIDE;
            if (used > 0 || direct) {  // (direct: a tile no pair reaches stores its zeros)
                switch (nrv) {
                    case 4:
                        filter_grad_tile_for<T, 4>(f.rows, a_rows, b_rows, counts, used, a_step, dy_pixel, t, direct,
                                                   out_row, prefetch_x);
                        break;
                    case 3:
                        filter_grad_tile_for<T, 3>(f.rows, a_rows, b_rows, counts, used, a_step, dy_pixel, t, direct,
                                                   out_row, prefetch_x);
                        break;
                    case 2:
                        filter_grad_tile_for<T, 2>(f.rows, a_rows, b_rows, counts, used, a_step, dy_pixel, t, direct,
                                                   out_row, prefetch_x);
                        break;
                    default:
                        filter_grad_tile_for<T, 1>(f.rows, a_rows, b_rows, counts, used, a_step, dy_pixel, t, direct,
                                                   out_row, prefetch_x);
                }
            }
            if (a->kw_merged)  // then the columns where only some of the tile's taps are real
                for (idx r = 0; r < n_rows; ++r)
                    if (ih_of[r * a->KH + f.kh] >= 0)
                        filter_grad_merged_border<T>(a, f, x_rows[r * a->KH + f.kh], dy_rows[r] + block_at(f.g, f.c0),
                                                     dy_pixel, nrv, t);
        }
    }

    // Store this unit's tiles into the filter gradient (with parts, reduce does,
    // once every part is summed; direct_out: the tiles stored their sums themselves).
    if (a->direct_out || a->parts > 1) return;
    for (idx tile = tile_begin; tile < tile_end; ++tile) filter_grad_store_tile<T>(a, tile, acc + tile * a->tile_elems);
}

#endif  // CVZ_PER_ISA_PASS
