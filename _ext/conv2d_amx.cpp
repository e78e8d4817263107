// The conv2d forward pass for bfloat16 on AMX tiles (Intel Sapphire Rapids and
// later: AMX-TILE + AMX-BF16), the default precision's contract kept: every
// product of two bfloat16 numbers is exact in float32, the tiles sum them in
// float32, and the result is rounded once.  The input gradient runs on it too
// (its stride phases are forward convolutions, convviz/ops/input_grad.py).
//
// An implicit GEMM per channel block: C[pixels][channels] (float32 tiles) +=
// A[pixels][input channels] (a staged input row, read straight through the
// tile load's row stride: pixel ow of tap (kh, kw) lies at (ow * sw + kw * dw)
// pixels of row ih) x B[input channels][channels] (the filter, packed in
// AMX's pair-interleaved layout).  A unit is one block of 32 output channels
// of a group over a run of output rows, so the block's filter stays in the
// core's cache while the rows pass; each output element is summed by one
// unit in one fixed order (taps, then 32-channel chunks of the reduction,
// then the instruction's own order), so results do not depend on the threads.
//
// AMX treats subnormal inputs as zero and flushes subnormal results.  The
// filter's pack records the smallest exponent among its nonzero weights and
// staging (or, where the tiles read the input in place, the block units as they
// read it) checks every input value against the bound that keeps every product
// and partial sum a multiple of 2^-126 (zero or normal: see AMX_EXACT_EXPONENTS);
// a call outside it, or with a non-finite weight (whose products with the
// padding's zeros the exact border path of conv2d_forward.cpp must skip), or a
// non-finite input value a tile reads past a pixel's channels (it meets zero
// weights), returns to the AVX-512 kernel.
#ifndef CVZ_CONV2D_AMX_INTERFACE
#define CVZ_CONV2D_AMX_INTERFACE

#include "cvz_common.hpp"

namespace cvz {

struct Conv2dAmxArgs : ConvDims {
    Tensor x;  // bfloat16, logical NHWC element strides
    Tensor w;  // bfloat16, HWIO [KH, KW, cin_g, Cout]
    Tensor y;
    // Filled in by conv2d_amx_prepare: the reduction chunks of 32 channels per
    // tap (cin_g rounded up), tiles of 16 output channels per group, a staged
    // pixel's elements (G * k_chunks * 32; Cin where read in place), a staged row's pixels (what the
    // last 16-pixel tile reads, past the row's end included), the elements of
    // `staged` ([N * H][row_pixels][pixel_pitch]) and
    // `packed` ([G][n_tiles][KH * KW][k_chunks] tiles of 16 pairs x 16
    // channels), the units of conv2d_amx_stage (rows,
    // then pack units), blocks of 32 channels per group, runs of output rows
    // per block, the per-thread scratch bytes.
    idx k_chunks, n_tiles, pixel_pitch, row_pixels, staged_elems, packed_elems, stage_units;
    idx blocks_per_group, row_runs, scratch_bytes;
    // Stride 1 where it wastes no more: the output pixels of an image in one run,
    // m = oh * row_pixels + ow (ow >= OW: computed, never stored), so a tile
    // spans output rows (a 7-pixel row fills 7 of 16 tile rows alone).  Then
    // staged rows are every padded input row the taps read (padding rows
    // zero), contiguous, and the tiles' A rows are pixel_pitch apart.
    int flat;
    // Staged rows per image, the input row of staged row 0 (-pt when flat),
    // elements per staged image (with 32 pixels of slack when flat; the input's
    // batch stride where read in place), tile
    // blocks of 32 output pixels per image (flat) or per row.
    idx staged_rows, first_row, image_elems, pixel_blocks;
    // Fewer than 16 input channels (a 3-channel stem), no groups, no column
    // dilation: a kernel row's taps are one tap whose reduction runs over
    // (kw, ci) -- consecutive in a staged row of unpadded pixels -- so a chunk
    // holds KW * cin_g useful values, not cin_g.  A tile row then reads on into
    // the next pixels, which meet zero weights: the input must be finite.
    int merged;
    idx row_taps, k_len;
    // Reduction values a tile reads per chunk: 32, or, where one chunk holds a
    // tap's k_len values, k_len rounded up to even (16 channels: half a chunk's
    // products, none of them zeros); a group's values in a staged pixel.
    idx k_tile, group_elems;
    // Whether a unit is a run of pixel blocks through every channel block (a
    // filter that stays in cache), else one channel block over a run; the units.
    int pixels_outer;
    idx units;
    // A pointwise call without padding on NHWC input with packed rows: the
    // tiles read the input where it is (pixel_pitch = Cin; at stride 2 every
    // other pixel of every other row, not a staged copy of all of them), and
    // each block unit scans the values it reads for the exactness check (a
    // second pass over the input cost as much as the tiles).  Where Cin does
    // not fill the chunks, a pixel's last chunk reads over_read values of the
    // next pixel, which meet zero weights (the input must then be finite).
    // Tiles whose reads would pass an image's end read a copy in the thread's
    // scratch at tail_offset, zero past it.
    int direct;
    idx over_read, tail_offset;
    // Stage units that stage input rows (the first ones; 0 when direct).
    idx input_rows;
    void* staged;
    void* packed;
    // [stage_units + units]: each stage unit's least exponent (see
    // conv2d_amx_stage), then each block unit's input (direct only).
    unsigned char* least_exponent;
};

// Whether this CPU has AMX-TILE and AMX-BF16, the build holds the code, and
// Linux granted the process the tile state (requested once, on first call).
bool amx_bf16_usable();
// Why not, or "" when usable.
const char* amx_bf16_unusable_reason();
// Sizes for the call; 0 when the shape does not suit the tiles (the caller
// runs the AVX-512 kernel).  `threads` only sets the row runs.
int conv2d_amx_prepare(Conv2dAmxArgs* a, int threads);
// Stage input row `unit` (= n * staged_rows + r) for units below input_rows
// (none where the tiles read the input in place), pack the filter's (group, 16
// channels, tap) unit - input_rows above (a UnitFn of _cvz.pxd; no scratch):
// each records the least exponent it saw in least_exponent[unit].
void conv2d_amx_stage(const void* args, int isa, int f64, idx unit, void* scratch);
// Whether the staged input and packed filter keep AMX's sums exact (see
// AMX_EXACT_EXPONENTS): no non-finite or subnormal weight, no subnormal input,
// no non-finite input where tiles read past a pixel's channels.
// Direct, the input is scanned by the block units: until they ran
// (`blocks_ran` 0) only the filter is checked, and a call found inexact after
// them has written results the caller's kernel must overwrite.
int conv2d_amx_exact(const Conv2dAmxArgs* a, int blocks_ran);
void conv2d_amx_block(const void* args, int isa, int f64, idx unit, void* scratch);

// Several calls as one (the input gradient's stride phases: the same output
// gradient, disjoint cells of the result): every call's stage units in one
// parallel region, then every call's block units in another, not two regions
// per call.  first_stage[c] and first_unit[c] (c <= count) are running sums of
// the calls' stage_units and units.
struct Conv2dAmxBatch {
    const Conv2dAmxArgs* calls;
    idx count;
    const idx* first_stage;
    const idx* first_unit;
};
// conv2d_amx_stage / conv2d_amx_block of the call that holds batch unit `unit` (UnitFns).
void conv2d_amx_batch_stage(const void* batch, int isa, int f64, idx unit, void* scratch);
void conv2d_amx_batch_block(const void* batch, int isa, int f64, idx unit, void* scratch);

}  // namespace cvz

#endif  // CVZ_CONV2D_AMX_INTERFACE

#if !defined(CVZ_INTERFACE_ONLY)

#include "cvz_amx.hpp"

namespace cvz {

bool amx_bf16_usable() { return amx_unusable_reason()[0] == '\0'; }

// The call of a batch that holds unit `unit` of the running sums `first`; the unit within it.
static inline idx batch_call(const idx* first, idx count, idx unit, idx* local) {
    idx c = 0;
    while (c + 1 < count && unit >= first[c + 1]) ++c;
    *local = unit - first[c];
    return c;
}

void conv2d_amx_batch_stage(const void* args, int isa, int f64, idx unit, void* scratch) {
    const Conv2dAmxBatch* b = static_cast<const Conv2dAmxBatch*>(args);
    idx local;
    const idx c = batch_call(b->first_stage, b->count, unit, &local);
    conv2d_amx_stage(&b->calls[c], isa, f64, local, scratch);
}

void conv2d_amx_batch_block(const void* args, int isa, int f64, idx unit, void* scratch) {
    const Conv2dAmxBatch* b = static_cast<const Conv2dAmxBatch*>(args);
    idx local;
    const idx c = batch_call(b->first_unit, b->count, unit, &local);
    conv2d_amx_block(&b->calls[c], isa, f64, local, scratch);
}

const char* amx_bf16_unusable_reason() { return amx_unusable_reason(); }

// A packed filter up to this size stays in a core's L2 cache (2 MiB on
// Sapphire and Emerald Rapids) beside the rows and results passing by.
constexpr idx AMX_CACHED_FILTER_BYTES = 1 << 20;

// Tile rows computed for a run of `pixels` output pixels: blocks of two
// 16-pixel tiles, the last of one tile where 16 or fewer pixels remain.
static inline idx computed_pixels(idx pixels) {
    const idx rest = pixels % (2 * AMX_TILE_M);
    return pixels - rest + (rest > AMX_TILE_M ? 2 * AMX_TILE_M : rest > 0 ? AMX_TILE_M : 0);
}

int conv2d_amx_prepare(Conv2dAmxArgs* a, int threads) {
    // Chunks of 32 reduction channels are zero past cin_g: below 16 channels
    // per group most of each tile would multiply zeros (the AVX-512 kernel
    // merges a 3-channel stem's taps instead).
    if (a->OW <= 0 || a->OH <= 0 || a->cout_g <= 0) return 0;
    a->merged = a->cin_g < 16 && a->G == 1 && a->dw == 1;
    a->row_taps = a->merged ? 1 : a->KW;
    a->k_len = a->merged ? a->KW * a->cin_g : a->cin_g;
    if (a->k_len < (a->merged ? 8 : 16)) return 0;
    if (!amx_bf16_usable()) return 0;  // (its first call asks Linux for the tile state)
    a->k_chunks = (a->k_len + AMX_CHUNK - 1) / AMX_CHUNK;
    a->k_tile = a->k_chunks == 1 ? round_up(a->k_len, 2) : AMX_CHUNK;
    a->group_elems = a->k_chunks == 1 ? a->k_tile : a->k_chunks * AMX_CHUNK;
    a->n_tiles = (a->cout_g + AMX_TILE_N - 1) / AMX_TILE_N;
    a->pixel_pitch = a->merged ? a->Cin : a->G * a->group_elems;
    // Pixels a tile row reads from its tap's first (merged: its chunks run on).
    const idx reach = a->merged ? (a->k_tile + a->Cin - 1) / a->Cin : 1;
    const idx span = (a->KW - 1) * a->dw + 1 > reach ? (a->KW - 1) * a->dw + 1 : reach;
    // Per output row, the last tile of a row reads 16 pixels from its first: up
    // to column round_up(OW, 16) - 1 (its extra rows are never stored).  Flat,
    // a staged row is the padded input row.
    const idx row_flat = a->OW + (a->KW - 1) * a->dw;
    const idx rows_flat = a->OH + (a->KH - 1) * a->dh;
    const idx per_row = a->N * a->OH * computed_pixels(a->OW);
    const idx flat = a->N * computed_pixels(a->OH * row_flat);
    a->flat = a->sh == 1 && a->sw == 1 && flat <= per_row;  // (ties: one run per image)
    if (a->flat) {
        a->row_pixels = row_flat;
        a->staged_rows = rows_flat;
        a->first_row = -a->pt;
        a->image_elems = (rows_flat * row_flat + 2 * AMX_TILE_M + reach) * a->pixel_pitch;
        a->pixel_blocks = (a->OH * row_flat + 2 * AMX_TILE_M - 1) / (2 * AMX_TILE_M);
    } else {
        a->row_pixels = (round_up(a->OW, AMX_TILE_M) - 1) * a->sw + span;
        a->staged_rows = a->H;
        a->first_row = 0;
        a->image_elems = a->H * a->row_pixels * a->pixel_pitch;
        a->pixel_blocks = 1;
    }
    // (Every output pixel reads an input pixel: explicit bottom or right pads
    // would have it read the next row's, or nothing.)
    a->direct = a->KH == 1 && a->KW == 1 && a->G == 1 && !a->merged && a->pt == 0 && a->pl == 0 &&
                (a->OH - 1) * a->sh < a->H && (a->OW - 1) * a->sw < a->W && (!a->flat || a->OW == a->W) &&
                a->x.s[3] == 1 && a->x.s[2] == a->Cin && a->x.s[1] == a->W * a->Cin;
    a->over_read = 0;
    if (a->direct) {
        a->image_elems = a->x.s[0];
        a->pixel_pitch = a->Cin;
        a->over_read = a->group_elems - a->Cin;
    }
    a->staged_elems = a->direct ? 0 : a->N * a->image_elems;
    a->packed_elems = a->G * a->n_tiles * a->KH * a->row_taps * a->k_chunks * AMX_B_TILE;
    a->input_rows = a->direct ? 0 : a->N * a->staged_rows;
    a->stage_units = a->input_rows + a->G * a->KH * a->row_taps * a->n_tiles;
    a->blocks_per_group = (a->n_tiles + 1) / 2;
    // The order of the work: where the packed filter fits a core's L2 cache
    // (AMX_CACHED_FILTER_BYTES) each pixel block passes through every channel
    // block while its input rows are in L1 (read from memory once); a bigger
    // filter is read block by block, each channel block over runs of pixel
    // blocks (its part of the filter read once per run).  Runs: enough units
    // for every thread to claim about eight (so a descheduled thread holds up
    // little), each as long as that allows.
    const idx rows = a->N * (a->flat ? a->pixel_blocks : a->OH), blocks = a->G * a->blocks_per_group;
    a->pixels_outer = a->packed_elems * 2 <= AMX_CACHED_FILTER_BYTES;
    const idx runs = a->pixels_outer ? 8 * (idx)threads : (8 * (idx)threads + blocks - 1) / blocks;
    a->row_runs = threads <= 1 && !a->pixels_outer ? 1 : runs < rows ? runs : rows;
    a->units = a->pixels_outer ? a->row_runs : blocks * a->row_runs;
    // Per thread: the tile configuration, the float32 results of 32 x 32, the
    // taps' A and B addresses and numbers.
    a->scratch_bytes = AMX_CONFIG_BYTES + AMX_RESULT_BYTES + a->KH * a->row_taps * (2 * (idx)sizeof(void*) + (idx)sizeof(idx));
    a->tail_offset = round_up(a->scratch_bytes, 64);
    if (a->direct) a->scratch_bytes = a->tail_offset + (2 * AMX_TILE_M * a->sw * a->pixel_pitch + a->group_elems) * 2;
    return 1;
}

int conv2d_amx_exact(const Conv2dAmxArgs* a, int blocks_ran) {
    int x_least = 255, w_least = 255;
    const idx slots = a->stage_units + (a->direct && blocks_ran ? a->units : 0);
    for (idx u = 0; u < slots; ++u) {
        int& least = u < a->input_rows || u >= a->stage_units ? x_least : w_least;
        if (a->least_exponent[u] < least) least = a->least_exponent[u];
    }
    return amx_sums_exact(x_least, w_least);
}

#if CVZ_AMX_COMPILED
CVZ_AMX_PUSH

// Pack unit u: the B tiles of (group, tap, tile of 16 channels), every chunk:
// tile row r holds reduction channels 2r and 2r + 1 of each output channel,
// side by side; every element is written (zero past the channels), so the
// buffer needs no zeroing first.  Consecutive units read the two halves of
// the same cache lines (a forward filter's 32 channels).
static void conv2d_amx_pack_unit(const Conv2dAmxArgs* a, idx u) {
    const idx taps = a->KH * a->row_taps;
    const idx tile_n = u % a->n_tiles, tap = (u / a->n_tiles) % taps, g = u / (taps * a->n_tiles);
    const idx kh = tap / a->row_taps, kw = tap % a->row_taps;
    const std::uint16_t* w = (const std::uint16_t*)a->w.data + kh * a->w.s[0] + kw * a->w.s[1] +
                             (g * a->cout_g + tile_n * AMX_TILE_N) * a->w.s[3];
    // Reduction value k of the tap: input channel k (merged: tap kw = k / cin_g, channel k % cin_g).
    const idx s_ci = a->w.s[2], s_c = a->w.s[3], k_len = a->k_len;
    auto row_of = [&](idx k) { return a->merged ? w + (k / a->cin_g) * a->w.s[1] + (k % a->cin_g) * s_ci : w + k * s_ci; };
    std::uint16_t* dst = (std::uint16_t*)a->packed + ((g * a->n_tiles + tile_n) * taps + tap) * a->k_chunks * AMX_B_TILE;
    const idx channels = a->cout_g - tile_n * AMX_TILE_N < AMX_TILE_N ? a->cout_g - tile_n * AMX_TILE_N : AMX_TILE_N;
    ExponentScan scan;
    if (s_c == 1) {  // HWIO as given (the forward pass): channel runs, interleaved in pairs
        const __mmask32 lanes = first_lanes(channels);
        const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                    23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        for (idx ci = 0; ci < k_len; ci += 2) {
            // Row ci in lanes 0-15, row ci + 1 in lanes 16-31 (a masked load
            // touches only its lanes' memory).
            const __mmask32 second = ci + 1 < k_len ? (__mmask32)lanes << 16 : 0;
            const __m512i both = _mm512_or_si512(_mm512_maskz_loadu_epi16(lanes, row_of(ci)),
                                                 _mm512_maskz_loadu_epi16(second, row_of(ci + 1 < k_len ? ci + 1 : ci) - 16));
            scan.add(both, (__mmask32)lanes | second);
            _mm512_storeu_si512(dst + (ci / AMX_CHUNK) * AMX_B_TILE + ((ci % AMX_CHUNK) / 2) * (2 * AMX_TILE_N),
                                _mm512_permutexvar_epi16(interleave, both));
        }
        const idx rows_written = (k_len + 1) / 2;  // pair rows; the last chunk's others are zero
        std::memset(dst + rows_written * 2 * AMX_TILE_N, 0,
                    (std::size_t)(a->k_chunks * AMX_CHUNK / 2 - rows_written) * 2 * AMX_TILE_N * 2);
    } else if (!a->merged && s_ci == 1 && (s_c % 2) == 0 && ((std::uintptr_t)w % 4) == 0) {
        // Channels swapped (the input gradient's filter): each output channel's
        // run of 32 reduction channels is a column of 16 pairs; 16 columns
        // transpose into the tile's rows.
        float block[AMX_TILE_N * AMX_TILE_N];
        for (idx kc = 0; kc < a->k_chunks; ++kc) {
            const __mmask32 lanes = first_lanes(a->cin_g - kc * AMX_CHUNK);
            for (idx c = 0; c < AMX_TILE_N; ++c) {
                const __m512i col = c < channels ? _mm512_maskz_loadu_epi16(lanes, w + c * s_c + kc * AMX_CHUNK)
                                                 : _mm512_setzero_si512();
                if (c < channels) scan.add(col, lanes);
                _mm512_storeu_si512(block + c * AMX_TILE_N, col);
            }
            amx::Simd<float>::transpose(block, AMX_TILE_N, (float*)(dst + kc * AMX_B_TILE), AMX_TILE_N);
        }
    } else {
        std::memset(dst, 0, (std::size_t)a->k_chunks * AMX_B_TILE * 2);
        for (idx ci = 0; ci < k_len; ++ci) {
            // Reduction value ci: chunk ci / 32, pair row (ci % 32) / 2, slot ci % 2.
            std::uint16_t* d = dst + (ci / AMX_CHUNK) * AMX_B_TILE + ((ci % AMX_CHUNK) / 2) * (2 * AMX_TILE_N) + ci % 2;
            const std::uint16_t* src = row_of(ci);
            for (idx c = 0; c < channels; ++c) {
                const std::uint16_t v = src[c * s_c];
                d[2 * c] = v;
                scan.add(v);
            }
        }
    }
    a->least_exponent[a->input_rows + u] = scan.result(true);
}

// Input row (n, ih) into its staged row: pixel j holds input column j - pl.
// Every element is written (zero in the padding, past each group's channels
// and past the row), so the buffer needs no zeroing first.
static void conv2d_amx_stage_row(const Conv2dAmxArgs* a, idx row) {
    const idx n = row / a->staged_rows, r = row % a->staged_rows, ih = a->first_row + r;
    std::uint16_t* dst = (std::uint16_t*)a->staged + n * a->image_elems + r * a->row_pixels * a->pixel_pitch;
    const idx chunk_elems = a->group_elems, pitch = a->pixel_pitch;
    if (a->flat && r == a->staged_rows - 1)  // the slack past the image's last row
        std::memset(dst + a->row_pixels * pitch, 0,
                    (std::size_t)(a->image_elems - a->staged_rows * a->row_pixels * pitch) * 2);
    if (ih < 0 || ih >= a->H) {  // a padding row (flat)
        std::memset(dst, 0, (std::size_t)(a->row_pixels * pitch) * 2);
        a->least_exponent[row] = 255;
        return;
    }
    const std::uint16_t* x = (const std::uint16_t*)a->x.data + n * a->x.s[0] + ih * a->x.s[1];
    idx first = a->pl > 0 ? a->pl : 0, last = a->pl + a->W;
    if (first > a->row_pixels) first = a->row_pixels;
    if (last > a->row_pixels) last = a->row_pixels;
    if (last < first) last = first;
    std::memset(dst, 0, (std::size_t)(first * pitch) * 2);
    std::memset(dst + last * pitch, 0, (std::size_t)((a->row_pixels - last) * pitch) * 2);
    ExponentScan scan;
    if (a->merged) {  // unpadded pixels of Cin values
        if (a->x.s[3] == 1 && a->x.s[2] == a->Cin)  // (contiguous NHWC: the row's values as they are)
            std::memcpy(dst + first * pitch, x + (first - a->pl) * a->Cin, (std::size_t)((last - first) * pitch) * 2);
        else
            for (idx j = first; j < last; ++j) {
                const std::uint16_t* px = x + (j - a->pl) * a->x.s[2];
                for (idx c = 0; c < a->Cin; ++c) dst[j * pitch + c] = px[c * a->x.s[3]];
            }
        for (idx e = first * pitch; e < last * pitch; e += 32) {
            const __mmask32 lanes = first_lanes(last * pitch - e);
            scan.add(_mm512_maskz_loadu_epi16(lanes, dst + e), lanes);
        }
        a->least_exponent[row] = scan.result(true);  // (its tiles read on into neighbours: finite only)
        return;
    }
    for (idx j = first; j < last; ++j) {
        const std::uint16_t* px = x + (j - a->pl) * a->x.s[2];
        std::uint16_t* d = dst + j * pitch;
        for (idx g = 0; g < a->G; ++g) {
            const std::uint16_t* src = px + g * a->cin_g * a->x.s[3];
            std::uint16_t* out = d + g * chunk_elems;
            if (a->x.s[3] == 1) {
                for (idx c = 0; c < chunk_elems; c += 32) {  // the group's values: zero past cin_g
                    const __mmask32 lanes = first_lanes(a->cin_g - c);
                    const __m512i v = _mm512_maskz_loadu_epi16(lanes, src + c);
                    _mm512_mask_storeu_epi16(out + c, first_lanes(chunk_elems - c), v);
                    scan.add(v, lanes);
                }
            } else {
                for (idx c = 0; c < a->cin_g; ++c) {
                    const std::uint16_t v = src[c * a->x.s[3]];
                    out[c] = v;
                    scan.add(v);
                }
                std::memset(out + a->cin_g, 0, (std::size_t)(chunk_elems - a->cin_g) * 2);
            }
        }
    }
    a->least_exponent[row] = scan.result(false);
}

void conv2d_amx_stage(const void* args, int, int, idx unit, void*) {
    const Conv2dAmxArgs* a = static_cast<const Conv2dAmxArgs*>(args);
    if (unit < a->input_rows)
        conv2d_amx_stage_row(a, unit);
    else
        conv2d_amx_pack_unit(a, unit - a->input_rows);
}

namespace {

// C tiles 0-3 (pixels 0-15 / 16-31 x channels 0-15 / 16-31), A tiles 4-5, B
// tiles 6-7.  MT x NT tiles of 16 x 16; taps' A at tap_a[t] (pixel stride
// a_stride bytes), B at tap_b[t] (the next 16 channels b_next elements on).
template <int MT, int NT>
void amx_tiles(const std::uint16_t* const* tap_a, const std::uint16_t* const* tap_b, idx n_taps, idx k_chunks,
               idx a_stride, idx a_second, idx b_next, float* c) {
    _tile_zero(0);
    if (NT == 2) _tile_zero(1);
    if (MT == 2) _tile_zero(2);
    if (MT == 2 && NT == 2) _tile_zero(3);
    for (idx t = 0; t < n_taps; ++t) {
        const std::uint16_t* ap = tap_a[t];
        const std::uint16_t* bp = tap_b[t];
        for (idx kc = 0; kc < k_chunks; ++kc) {
            _tile_loadd(4, ap + kc * AMX_CHUNK, a_stride);
            _tile_loadd(6, bp + kc * AMX_B_TILE, AMX_TILE_N * 4);
            if (NT == 2) _tile_loadd(7, bp + b_next + kc * AMX_B_TILE, AMX_TILE_N * 4);
            _tile_dpbf16ps(0, 4, 6);
            if (NT == 2) _tile_dpbf16ps(1, 4, 7);
            if (MT == 2) {
                _tile_loadd(5, ap + a_second + kc * AMX_CHUNK, a_stride);
                _tile_dpbf16ps(2, 5, 6);
                if (NT == 2) _tile_dpbf16ps(3, 5, 7);
            }
        }
    }
    constexpr idx pitch = 2 * AMX_TILE_N * 4;  // bytes of a 32-channel result row
    _tile_stored(0, c, pitch);
    if (NT == 2) _tile_stored(1, c + AMX_TILE_N, pitch);
    if (MT == 2) _tile_stored(2, c + AMX_TILE_M * 2 * AMX_TILE_N, pitch);
    if (MT == 2 && NT == 2) _tile_stored(3, c + AMX_TILE_M * 2 * AMX_TILE_N + AMX_TILE_N, pitch);
}

// Results c[p][0 .. channels) (rows of 32 floats) of `pixels` pixels into
// y at `offset`, pixel stride y_s[2]: bfloat16 with contiguous channels
// through vcvtne2ps2bf16 (round to nearest even; the sums are zero or normal,
// see AMX_EXACT_EXPONENTS, where its flushing of subnormals changes nothing),
// every other type and layout through the AVX-512 layout moves.
void amx_store(const Conv2dAmxArgs* a, idx offset, idx pixels, idx channels, const float* c) {
    if (a->y.type == BF16 && a->y.s[3] == 1) {
        const __mmask32 lanes = first_lanes(channels);
        std::uint16_t* y = (std::uint16_t*)a->y.data + offset;
        for (idx p = 0; p < pixels; ++p) {
            const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(c + p * 32 + 16), _mm512_loadu_ps(c + p * 32));
            _mm512_mask_storeu_epi16(y + p * a->y.s[2], lanes, (__m512i)v);
        }
        return;
    }
    amx::scatter_rows<float>(a->y.data, a->y.type, offset, pixels, a->y.s[2], channels, a->y.s[3], c, 2 * AMX_TILE_N);
}

}  // namespace

void conv2d_amx_block(const void* args, int, int, idx unit, void* raw) {
    const Conv2dAmxArgs* a = static_cast<const Conv2dAmxArgs*>(args);
    amx_configure_tiles(raw, (int)(2 * a->k_tile), (int)(a->k_tile / 2));
    const idx taps = a->KH * a->row_taps, row_taps = a->row_taps;
    float* c = (float*)((char*)raw + AMX_CONFIG_BYTES);
    const std::uint16_t** tap_a = (const std::uint16_t**)((char*)c + AMX_RESULT_BYTES);
    const std::uint16_t** tap_b = tap_a + taps;
    idx* tap_of = (idx*)(tap_b + taps);  // kh * row_taps + kw of each tap in tap_a
    const std::uint16_t* packed = (const std::uint16_t*)a->packed;
    const std::uint16_t* staged = (const std::uint16_t*)a->staged;
    const idx b_next = taps * a->k_chunks * AMX_B_TILE;
    const idx pitch = a->pixel_pitch;
    const idx a_stride = a->sw * pitch * 2;
    const idx a_second = AMX_TILE_M * a->sw * pitch;
    // Units: one channel block over a run of pixel blocks (rows), or
    // (pixels_outer) a run of pixel blocks, each through every channel block
    // while its input rows are in the core's cache.
    const idx blocks = a->G * a->blocks_per_group;
    const idx block_first = a->pixels_outer ? 0 : unit / a->row_runs;
    const idx block_end = a->pixels_outer ? blocks : block_first + 1;
    const idx run = a->pixels_outer ? unit : unit % a->row_runs;
    // Channel block `block`'s results for `pixels` output pixels (tap_a at the
    // first, group 0's channels) into c; returns its channels and sets *y_channel.
    auto compute = [&](idx block, idx n_taps, idx pixels, idx* y_channel) {
        const idx g = block / a->blocks_per_group, tile_n = (block % a->blocks_per_group) * 2;
        const int nt = a->n_tiles - tile_n >= 2 ? 2 : 1;
        const idx c0 = tile_n * AMX_TILE_N;
        const idx group_shift = a->merged ? 0 : g * a->group_elems;
        for (idx t = 0; t < n_taps; ++t) {
            tap_a[t] += group_shift;
            tap_b[t] = packed + ((g * a->n_tiles + tile_n) * taps + tap_of[t]) * a->k_chunks * AMX_B_TILE;
        }
        const bool two_m = pixels > AMX_TILE_M;
        if (two_m && nt == 2) amx_tiles<2, 2>(tap_a, tap_b, n_taps, a->k_chunks, a_stride, a_second, b_next, c);
        else if (two_m) amx_tiles<2, 1>(tap_a, tap_b, n_taps, a->k_chunks, a_stride, a_second, b_next, c);
        else if (nt == 2) amx_tiles<1, 2>(tap_a, tap_b, n_taps, a->k_chunks, a_stride, a_second, b_next, c);
        else amx_tiles<1, 1>(tap_a, tap_b, n_taps, a->k_chunks, a_stride, a_second, b_next, c);
        for (idx t = 0; t < n_taps; ++t) tap_a[t] -= group_shift;
        *y_channel = (g * a->cout_g + c0) * a->y.s[3];
        return a->cout_g - c0 < nt * AMX_TILE_N ? a->cout_g - c0 : nt * AMX_TILE_N;
    };
    // Direct (1x1): the A rows of `pixels` output pixels, sw pixels apart from
    // `src`, read in place or, where the tiles would read past the image's
    // end, through a copy that is zero past it; the values each pixel's tile
    // row reads (its over-read included) go into `scan`, by the units of the
    // first channel block only (the other blocks' units read the same rows: a
    // scan each made a 1024-channel input's call up to 1.3x slower).
    const bool scans = a->direct && block_first == 0;
    auto direct_rows = [&](const std::uint16_t* src, idx pixels, const std::uint16_t* image_end,
                           ExponentScan* scan) -> const std::uint16_t* {
        const idx step = a->sw * pitch, loaded = pixels > AMX_TILE_M ? 2 * AMX_TILE_M : AMX_TILE_M;
        const idx reach = (loaded - 1) * step + a->group_elems;
        const std::uint16_t* rows = src;
        if (src + reach > image_end) {
            std::uint16_t* tail = (std::uint16_t*)((char*)raw + a->tail_offset);
            const idx have = image_end - src;
            std::memcpy(tail, src, (std::size_t)have * 2);
            std::memset(tail + have, 0, (std::size_t)(reach - have) * 2);
            rows = tail;
        }
        auto scan_span = [&](const std::uint16_t* p, idx count) {
            for (idx e = 0; e < count; e += 32) {
                const __mmask32 lanes = first_lanes(count - e);
                scan->add(_mm512_maskz_loadu_epi16(lanes, p + e), lanes);
            }
        };
        if (!scans)
            return rows;
        if (a->sw == 1)
            scan_span(rows, (pixels - 1) * step + a->group_elems);
        else
            for (idx p = 0; p < pixels; ++p) scan_span(rows + p * step, a->group_elems);
        return rows;
    };
    ExponentScan scan;  // direct: the input values the unit reads
    if (a->flat) {
        // Blocks of 32 output pixels m = oh * row_pixels + ow of an image; every
        // tap reads the padded rows (zero where they are padding).
        const idx rp = a->row_pixels, image_pixels = a->OH * rp, items = a->N * a->pixel_blocks;
        const idx begin = items * run / a->row_runs, end = items * (run + 1) / a->row_runs;
        for (idx b = begin; b < end; ++b) {
            const idx n = b / a->pixel_blocks, m0 = (b % a->pixel_blocks) * 2 * AMX_TILE_M;
            const idx pixels = image_pixels - m0 < 2 * AMX_TILE_M ? image_pixels - m0 : 2 * AMX_TILE_M;
            const std::uint16_t* image = a->direct ? (const std::uint16_t*)a->x.data + n * a->x.s[0] : staged + n * a->image_elems;
            for (idx kh = 0; kh < a->KH; ++kh)
                for (idx kw = 0; kw < row_taps; ++kw) {
                    tap_a[kh * row_taps + kw] = image + (m0 + kh * a->dh * rp + kw * a->dw) * pitch;
                    tap_of[kh * row_taps + kw] = kh * row_taps + kw;
                }
            if (a->direct) tap_a[0] = direct_rows(tap_a[0], pixels, image + image_pixels * pitch, &scan);
            for (idx block = block_first; block < block_end; ++block) {
                idx y_channel;
                const idx channels = compute(block, taps, pixels, &y_channel);
                for (idx m = m0; m < m0 + pixels;) {  // the real output pixels, row by row
                    const idx oh = m / rp, ow = m % rp;
                    if (ow >= a->OW) {
                        m += rp - ow;
                        continue;
                    }
                    const idx run_len = a->OW - ow < m0 + pixels - m ? a->OW - ow : m0 + pixels - m;
                    amx_store(a, n * a->y.s[0] + oh * a->y.s[1] + ow * a->y.s[2] + y_channel, run_len, channels,
                              c + (m - m0) * 2 * AMX_TILE_N);
                    m += run_len;
                }
            }
        }
    } else {
        const idx rows = a->N * a->OH;
        const idx row_begin = rows * run / a->row_runs, row_end = rows * (run + 1) / a->row_runs;
        for (idx row = row_begin; row < row_end; ++row) {
            const idx n = row / a->OH, oh = row % a->OH;
            idx n_taps = 0;
            for (idx kh = 0; kh < a->KH; ++kh) {
                const idx ih = oh * a->sh - a->pt + kh * a->dh;
                if (ih < 0 || ih >= a->H) continue;  // a kernel row in the padding adds nothing
                const std::uint16_t* in_row = a->direct ? (const std::uint16_t*)a->x.data + n * a->x.s[0] + ih * a->x.s[1]
                                                        : staged + n * a->image_elems + ih * a->row_pixels * pitch;
                for (idx kw = 0; kw < row_taps; ++kw) {
                    tap_a[n_taps] = in_row + kw * a->dw * pitch;
                    tap_of[n_taps] = kh * row_taps + kw;
                    ++n_taps;
                }
            }
            for (idx ow0 = 0; ow0 < a->OW; ow0 += 2 * AMX_TILE_M) {
                const idx pixels = a->OW - ow0 < 2 * AMX_TILE_M ? a->OW - ow0 : 2 * AMX_TILE_M;
                const idx shift = ow0 * a->sw * pitch;
                for (idx t = 0; t < n_taps; ++t) tap_a[t] += shift;
                const bool in_place_rows = a->direct && n_taps > 0;  // (1x1: one tap)
                const std::uint16_t* in_place = in_place_rows ? tap_a[0] : nullptr;
                if (in_place_rows)
                    tap_a[0] = direct_rows(in_place, pixels,
                                           (const std::uint16_t*)a->x.data + n * a->x.s[0] + a->H * a->x.s[1], &scan);
                for (idx block = block_first; block < block_end; ++block) {
                    idx y_channel;
                    const idx channels = compute(block, n_taps, pixels, &y_channel);
                    amx_store(a, n * a->y.s[0] + oh * a->y.s[1] + ow0 * a->y.s[2] + y_channel, pixels, channels, c);
                }
                if (in_place_rows) tap_a[0] = in_place;
                for (idx t = 0; t < n_taps; ++t) tap_a[t] -= shift;
            }
        }
    }
    if (a->direct) a->least_exponent[a->stage_units + unit] = scans ? scan.result(a->over_read > 0) : 255;
    _tile_release();
}

CVZ_AMX_POP
#else   // no AMX code in this build: never called (amx_bf16_usable() is false)
void conv2d_amx_stage(const void*, int, int, idx, void*) {}
void conv2d_amx_block(const void*, int, int, idx, void*) {}
#endif  // CVZ_AMX_COMPILED

}  // namespace cvz

#endif  // !CVZ_INTERFACE_ONLY
