// The dense filter gradient for bfloat16 on AMX tiles (see conv2d_amx.cpp for
// the forward pass), the default precision's contract kept: exact products,
// float32 sums, one rounding.
//
// dw[kh, kw, ci, co] = sum over output pixels p of x[p's input pixel through
// tap (kh, kw), ci] * dy[p, co]: per tap a GEMM C[ci][co] += A[ci][p] B[p][co]
// whose reduction runs over the pixels, 32 at a time (a tile's step).  A
// wants each input channel's pixels in a row, so the input is staged
// transposed ([stride phase][channel][column]); B wants pairs of pixels side
// by side: the output gradient is staged pair-interleaved ([pixel pair]
// [channel][2]).  Two layouts of the pixels:
// - by rows: each output row's pixels in its own steps (OW rounded up to 32),
//   read from its input rows (a tap's pixels of one output row are then
//   consecutive columns of the row's phase);
// - flat, where it takes fewer steps (rows shorter than 32 columns, each
//   alone in a step, as in a network's 7x7 and 14x14 layers): an image's
//   output pixels numbered m = oh * Wq + ow, Wq = OW plus the columns a
//   tap's shift adds, and each stride phase of the input staged as one stream
//   of the same width, so that tap (kh, kw) reads the phase's column
//   m + (its row shift) * Wq + (its column shift) for every m: one run of
//   columns per image.  The columns ow >= OW are computed against zero output
//   gradients (an input value there must be finite: else the call is staged
//   again by rows).
// A unit is one block of 32 x 32 (input x output channels) of one tap over
// one chunk of steps (the chunks fixed by the shape: the staged rows of a
// chunk fit a core's L2 cache).  The chunks run one after another, each
// staged just before its blocks run (in buffers of one chunk), each block
// adding its chunk's sum to its running float32 sum and the last chunk
// rounding it into out, or, where a chunk has too few blocks for the threads,
// all at once, each unit writing its partial sum and a second pass adding a
// block's partial sums: the same additions in the same order, so the result
// does not depend on the threads.
//
// Exactness (AMX_EXACT_EXPONENTS): the input's and output gradient's least
// exponents decide, with an infinite or NaN output-gradient value sending the
// call back (its products with the padding's zeros must not be summed); an
// infinite or NaN input value is summed where the reference sums it (the
// pixels past a row's end read zeros, not the next columns, when there is one).
#ifndef CVZ_CONV2D_AMX_FILTER_GRAD_INTERFACE
#define CVZ_CONV2D_AMX_FILTER_GRAD_INTERFACE

#include "cvz_common.hpp"

namespace cvz {

struct Conv2dAmxFilterGradArgs : ConvDims {
    Tensor x;    // bfloat16, logical NHWC element strides
    Tensor dy;  // bfloat16
    Tensor out;  // HWIO [KH, KW, cin_g, Cout]
    // Filled in by prepare: channels per group rounded up to 32 (input,
    // output), output columns rounded up to 32; whether the layout is flat;
    // the columns of a staged input row (by rows) or image's phase stream
    // (flat), the width Wq and the steps of an image, the columns a tap's
    // shift adds at most (flat); the staged elements of an input slot (a row,
    // flat an image) and of an output slot (a row, flat a step); the output
    // rows (flat: steps), a chunk's and the chunks; 32 x 32 blocks (taps x
    // groups x input x output channel blocks); the input slots and stage units
    // of the whole call and of its largest chunk; the per-thread scratch bytes.
    idx ci_pad, co_pad, ow_pad;
    int flat;
    idx x_row_pixels, flat_width, flat_steps, flat_reach, x_row_elems, dy_row_elems;
    idx rows, chunk_rows, chunks, blocks;
    idx x_slots_all, x_slots_chunk, stage_units_all, stage_units_chunk, scratch_bytes;
    // The staged window (conv2d_amx_filter_grad_window): output rows (flat:
    // steps) [win_first, win_last), their first input row (flat: image) and
    // input stage units.  A chunk's window when the chunks run one after
    // another (staged just before its blocks, in buffers of one chunk), else
    // the whole call.
    idx win_first, win_last, win_x_first, win_x_units;
    // Set by conv2d_amx_filter_grad_exact: whether the window's input holds an
    // infinite or NaN value (then, by rows, the tiles past a row's end read it
    // through a zeroed copy), and the least exponents seen so far.
    int x_non_finite, x_least, dy_least;
    // Set by the caller: whether the chunks run one after another (one
    // parallel region each, the block units of chunk chunk_now), each unit
    // adding its sum over the chunk to its block's running sum in `partial`
    // and the last rounding it into out; else every chunk's units run at once,
    // each writing its own partial sum, and the reduce units add them.  The
    // same additions in the same order either way: the same bits.
    int sequential;
    idx chunk_now;
    void* x_staged;
    void* dy_staged;
    float* partial;                 // [chunks][blocks][32][32], sequential: [blocks][32][32]
    unsigned char* least_exponent;  // [the window's stage units]
};

// Sizes, flat where allowed and it takes fewer steps; 0 where the shape does
// not suit the tiles (or AMX cannot run here).
int conv2d_amx_filter_grad_prepare(Conv2dAmxFilterGradArgs* a, int allow_flat);
// Make output rows (flat: steps) [first, last) the staged window; returns its
// stage units.
idx conv2d_amx_filter_grad_window(Conv2dAmxFilterGradArgs* a, idx first, idx last);
// Stage the window's input unit `unit` (< win_x_units) or its output-gradient
// unit unit - win_x_units (a UnitFn).
void conv2d_amx_filter_grad_stage(const void* args, int isa, int f64, idx unit, void* scratch);
// Whether the operands staged so far keep the tiles' sums exact (flat: and the
// window's input is finite), from the window's `units` stage units.
int conv2d_amx_filter_grad_exact(Conv2dAmxFilterGradArgs* a, idx units);
// Unit = chunk * blocks + block (sequential: block, of chunk chunk_now): that
// block's sum over that chunk, written as its partial sum or, after the last
// chunk of a sequential run, rounded into out (a UnitFn).
void conv2d_amx_filter_grad_block(const void* args, int isa, int f64, idx unit, void* scratch);
// Unit = block: its chunks' partial sums added in order, rounded into out (a
// UnitFn; not run when the chunks run one after another).
void conv2d_amx_filter_grad_reduce(const void* args, int isa, int f64, idx unit, void* scratch);

}  // namespace cvz

#endif  // CVZ_CONV2D_AMX_FILTER_GRAD_INTERFACE

#if !defined(CVZ_INTERFACE_ONLY)

#include "cvz_amx.hpp"

namespace cvz {

// A chunk of output rows (flat: of steps): its staged input and output-gradient
// rows take about this many bytes, so that they stay in a core's L2 cache (2
// MiB on Sapphire and Emerald Rapids) while every channel block of every tap
// reads them, and it has at least this many pixels (each chunk's sums are
// stored and added once).
constexpr idx AMX_FG_CHUNK_BYTES = 1 << 20;
constexpr idx AMX_FG_MIN_CHUNK_PIXELS = 512;

int conv2d_amx_filter_grad_prepare(Conv2dAmxFilterGradArgs* a, int allow_flat) {
    if (a->cin_g < 16 || a->cout_g < 16 || a->OW <= 0 || a->OH <= 0 || a->N <= 0) return 0;
    if (amx_unusable_reason()[0] != '\0') return 0;
    a->ci_pad = round_up(a->cin_g, 32);
    a->co_pad = round_up(a->cout_g, 32);
    a->ow_pad = round_up(a->OW, 32);
    // By rows: tap kw reads column j = ow + kw * dw / sw of phase kw * dw % sw;
    // rows of whole 32-column blocks (the transpose's unit).  Flat: a tap's
    // shift adds up to qh rows of Wq columns and qw columns to m; a stream's
    // columns reach the last step's, shifted, in whole 32-column blocks.
    const idx qh = ((a->KH - 1) * a->dh) / a->sh, qw = ((a->KW - 1) * a->dw) / a->sw;
    a->flat_width = a->OW + qw;
    a->flat_steps = (a->OH * a->flat_width + 31) / 32;
    // (A 1x1 stride-1 call has no extra columns: filter_grad.pixel_rows already
    // runs its pixels in rows that fill the steps, across images too.)
    const bool pointwise_dense = a->KH * a->KW == 1 && a->sh == 1 && a->sw == 1;
    a->flat = allow_flat && !pointwise_dense && a->flat_steps < a->OH * (a->ow_pad / 32);
    // A 1x1 filter does as few flops per staged value as it has channels: where
    // the tiles' padding (channels to 32, pixels to whole steps) leaves fewer
    // than 30 useful ones on the smaller side, staging (a transpose, an
    // interleave) costs more than the tiles save over the AVX-512 kernel
    // (paired over the pointwise layers of seven networks, batch 1: 0.46-0.97x
    // below, mostly 1.0-2.5x above).
    if (a->KH * a->KW == 1) {
        const double pixels_used = a->flat ? (double)a->OH * a->OW / (a->flat_steps * 32) : (double)a->OW / a->ow_pad;
        const double used = (double)a->cin_g / a->ci_pad * a->cout_g / a->co_pad * pixels_used;
        const idx narrow = a->cin_g < a->cout_g ? a->cin_g : a->cout_g;
        if (used * narrow < 30) return 0;
    }
    a->flat_reach = qh * a->flat_width + qw;
    idx row_bytes;
    if (a->flat) {
        a->x_row_pixels = round_up(a->flat_steps * 32 + a->flat_reach, 32);
        a->x_row_elems = a->sh * a->sw * a->G * a->ci_pad * a->x_row_pixels;  // per image
        a->dy_row_elems = 32 * a->G * a->co_pad;                              // per step
        a->rows = a->N * a->flat_steps;
        // Staged bytes a step brings: its output gradient and its columns of every phase.
        row_bytes = 2 * 32 * (a->G * a->co_pad + a->sh * a->sw * a->G * a->ci_pad);
    } else {
        a->x_row_pixels = round_up(a->ow_pad + ((a->KW - 1) * a->dw) / a->sw, 32);
        a->x_row_elems = a->sw * a->G * a->ci_pad * a->x_row_pixels;
        a->dy_row_elems = a->ow_pad * a->G * a->co_pad;
        a->rows = a->N * a->OH;
        // Staged bytes an output row brings: its output-gradient row, and sh input
        // rows (the rows between two output rows' first taps).
        row_bytes = 2 * (a->dy_row_elems + a->sh * a->x_row_elems);
    }
    const idx row_pixels = a->flat ? 32 : a->ow_pad;
    idx chunk_rows = AMX_FG_CHUNK_BYTES / row_bytes;
    const idx min_rows = (AMX_FG_MIN_CHUNK_PIXELS + row_pixels - 1) / row_pixels;
    if (chunk_rows < min_rows) chunk_rows = min_rows;
    if (chunk_rows > a->rows) chunk_rows = a->rows;
    a->chunk_rows = chunk_rows;
    a->chunks = (a->rows + chunk_rows - 1) / chunk_rows;
    a->blocks = a->KH * a->KW * a->G * (a->ci_pad / 32) * (a->co_pad / 32);
    // The buffers' sizes: every window's input slots and stage units.
    a->stage_units_all = conv2d_amx_filter_grad_window(a, 0, a->rows);
    a->x_slots_all = a->flat ? a->N : a->win_x_units;
    a->stage_units_chunk = a->x_slots_chunk = 0;
    for (idx c = 0; c < a->chunks; ++c) {
        const idx last = (c + 1) * chunk_rows < a->rows ? (c + 1) * chunk_rows : a->rows;
        const idx units = conv2d_amx_filter_grad_window(a, c * chunk_rows, last);
        const idx slots = a->flat ? (last - 1) / a->flat_steps - a->win_x_first + 1 : a->win_x_units;
        if (units > a->stage_units_chunk) a->stage_units_chunk = units;
        if (slots > a->x_slots_chunk) a->x_slots_chunk = slots;
    }
    a->sequential = 1;  // (the caller decides)
    a->chunk_now = 0;
    a->x_non_finite = 0;
    a->x_least = a->dy_least = 255;
    // The tile configuration, a 32 x 32 float32 block, a zeroed copy of two A tiles.
    a->scratch_bytes = AMX_CONFIG_BYTES + AMX_RESULT_BYTES + 2 * AMX_TILE_M * 64;
    return 1;
}

// The columns (in blocks of 32) of image n's streams that steps [s_a, s_b) of it
// read, flat: [cb_lo, cb_hi).
static inline void flat_column_blocks(const Conv2dAmxFilterGradArgs* a, idx n, idx first, idx last, idx* cb_lo,
                                      idx* cb_hi) {
    const idx image_first = n * a->flat_steps;
    const idx s_a = (first > image_first ? first : image_first) - image_first;
    const idx s_b = (last < image_first + a->flat_steps ? last : image_first + a->flat_steps) - image_first;
    const idx reach = (32 * s_b + a->flat_reach + 31) / 32;
    *cb_lo = s_a;
    *cb_hi = reach < a->x_row_pixels / 32 ? reach : a->x_row_pixels / 32;
}

idx conv2d_amx_filter_grad_window(Conv2dAmxFilterGradArgs* a, idx first, idx last) {
    a->win_first = first;
    a->win_last = last;
    if (a->flat) {
        a->win_x_first = first / a->flat_steps;
        a->win_x_units = 0;
        for (idx n = a->win_x_first; n <= (last - 1) / a->flat_steps; ++n) {
            idx lo, hi;
            flat_column_blocks(a, n, first, last, &lo, &hi);
            a->win_x_units += hi - lo;
        }
    } else {
        // The input rows the window's taps read: from its first row's first tap to
        // its last row's last (the rows between, across an image's end, included).
        const auto clamp = [a](idx ih) { return ih < 0 ? 0 : ih >= a->H ? a->H - 1 : ih; };
        const idx n_f = first / a->OH, oh_f = first % a->OH, n_l = (last - 1) / a->OH, oh_l = (last - 1) % a->OH;
        a->win_x_first = n_f * a->H + clamp(oh_f * a->sh - a->pt);
        a->win_x_units = n_l * a->H + clamp(oh_l * a->sh - a->pt + (a->KH - 1) * a->dh) - a->win_x_first + 1;
    }
    return a->win_x_units + (last - first);
}

int conv2d_amx_filter_grad_exact(Conv2dAmxFilterGradArgs* a, idx units) {
    a->x_non_finite = 0;
    for (idx u = 0; u < units; ++u) {
        const int e = a->least_exponent[u];
        if (u < a->win_x_units) {
            // (bit 7 of an input unit's byte: it holds a non-finite value)
            a->x_non_finite |= (e >> 7) & 1;
            if ((e & 0x7f) * 2 < a->x_least) a->x_least = (e & 0x7f) * 2;
        } else if (e < a->dy_least) {
            a->dy_least = e;
        }
    }
    // (Flat, the columns past OW meet zero output gradients with real inputs.)
    if (a->flat && a->x_non_finite) return 0;
    return amx_sums_exact(a->x_least, a->dy_least);
}

#if CVZ_AMX_COMPILED
CVZ_AMX_PUSH

namespace {

// Lane indices of the transpose's five rounds (block size b = 16, 8, 4, 2, 1):
// the top row of a pair keeps its lanes j with j & b clear and takes the
// bottom row's lanes j - b for the others; the bottom row the converse.
// (Computed by the compiler: a constructor run as the module loads would be
// AVX-512 code, run on every CPU.)
struct TransposeIndices {
    alignas(64) std::uint16_t lo[5][32];
    alignas(64) std::uint16_t hi[5][32];
};
constexpr TransposeIndices transpose_indices() {
    TransposeIndices t{};
    for (int round = 0, b = 16; round < 5; ++round, b /= 2)
        for (int j = 0; j < 32; ++j) {
            t.lo[round][j] = (std::uint16_t)((j & b) ? 32 + j - b : j);
            t.hi[round][j] = (std::uint16_t)((j & b) ? 32 + j : j + b);
        }
    return t;
}
constexpr TransposeIndices TRANSPOSE_INDICES = transpose_indices();

// Rounds `first` to 4 (blocks of 16 >> first) of the transpose on rows
// r[0..rows): after round 0 the two halves of 16 rows are independent, so each
// is finished while its 16 rows stay in registers.
template <int ROWS>
inline void transpose_rounds(__m512i* r, int first) {
    for (int round = first, b = 16 >> first; round < 5; ++round, b /= 2) {
        const __m512i lo = _mm512_load_si512(TRANSPOSE_INDICES.lo[round]);
        const __m512i hi = _mm512_load_si512(TRANSPOSE_INDICES.hi[round]);
        CVZ_UNROLL(32)
        for (int i = 0; i < ROWS; ++i) {
            if (i & b) continue;
            const __m512i top = r[i], bottom = r[i + b];
            r[i] = _mm512_permutex2var_epi16(top, lo, bottom);
            r[i + b] = _mm512_permutex2var_epi16(top, hi, bottom);
        }
    }
}

// The 32 x 32 matrix of 16-bit values in r[0..32) transposed in place: five
// rounds of swapping the off-diagonal halves of ever smaller blocks.
inline void transpose_32x32_u16(__m512i r[32]) {
    const __m512i lo = _mm512_load_si512(TRANSPOSE_INDICES.lo[0]);
    const __m512i hi = _mm512_load_si512(TRANSPOSE_INDICES.hi[0]);
    CVZ_UNROLL(16)
    for (int i = 0; i < 16; ++i) {  // round 0: rows i and i + 16
        const __m512i top = r[i], bottom = r[i + 16];
        r[i] = _mm512_permutex2var_epi16(top, lo, bottom);
        r[i + 16] = _mm512_permutex2var_epi16(top, hi, bottom);
    }
    transpose_rounds<16>(r, 1);
    transpose_rounds<16>(r + 16, 1);
}

// Whether a tap of `taps` (dilation `dil`, stride `stride`) reads input phase
// `phase`: (t * dil) % stride == phase for some tap t (a 1x1 stride-2 filter
// reads one phase of two; unread phases are never staged).
inline bool phase_read(idx taps, idx dil, idx stride, idx phase) {
    for (idx t = 0; t < taps; ++t)
        if ((t * dil) % stride == phase) return true;
    return false;
}

// 32 staged columns from j0 of one phase, every group and channel block:
// column j holds the input pixel at pixel(j) (nullptr: zeros), its channels
// g * cin_g + ci transposed into rows `pitch` elements apart, dst[(g * ci_pad
// + ci) * pitch + j] (zero past cin_g).
template <class Pixel>
void stage_x_columns(const Conv2dAmxFilterGradArgs* a, std::uint16_t* dst, idx pitch, idx j0, Pixel pixel,
                     ExponentScan& scan) {
    __m512i r[32];
    const std::uint16_t* src[32];
    for (int i = 0; i < 32; ++i) src[i] = pixel(j0 + i);
    for (idx g = 0; g < a->G; ++g)
        for (idx c0 = 0; c0 < a->ci_pad; c0 += 32) {
            const __mmask32 lanes = first_lanes(a->cin_g - c0);
            const idx first = (g * a->cin_g + c0) * a->x.s[3];
            for (int i = 0; i < 32; ++i) {
                if (src[i] == nullptr || lanes == 0) {
                    r[i] = _mm512_setzero_si512();
                    continue;
                }
                if (a->x.s[3] == 1) {
                    r[i] = _mm512_maskz_loadu_epi16(lanes, src[i] + first);
                } else {
                    alignas(64) std::uint16_t gathered[32] = {0};
                    for (idx c = 0; c < 32 && c0 + c < a->cin_g; ++c) gathered[c] = src[i][first + c * a->x.s[3]];
                    r[i] = _mm512_load_si512(gathered);
                }
                scan.add(r[i], lanes);
            }
            transpose_32x32_u16(r);
            std::uint16_t* out = dst + (g * a->ci_pad + c0) * pitch + j0;
            for (int i = 0; i < 32; ++i) _mm512_storeu_si512(out + i * pitch, r[i]);
        }
}

// The byte an input unit records: bit 7 a non-finite value, bits 0-6 half the
// least exponent (rounded down: the check stays on the safe side).
unsigned char x_exponent_byte(const ExponentScan& scan) {
    return (unsigned char)((scan.non_finite ? 0x80 : 0) | (scan.result(false) / 2));
}

// By rows, the window's input unit `unit`: input row (n, ih) = win_x_first +
// unit transposed into slot `unit`: [phase r][g * ci_pad + ci][j] = x[n, ih,
// j * sw + r - pl, g * cin_g + ci] (zero outside the row).
void stage_x_row(const Conv2dAmxFilterGradArgs* a, idx unit) {
    const idx row = a->win_x_first + unit, n = row / a->H, ih = row % a->H;
    const std::uint16_t* x = (const std::uint16_t*)a->x.data + n * a->x.s[0] + ih * a->x.s[1];
    std::uint16_t* dst = (std::uint16_t*)a->x_staged + unit * a->x_row_elems;
    const idx pitch = a->x_row_pixels;
    ExponentScan scan;
    for (idx phase = 0; phase < a->sw; ++phase) {
        if (!phase_read(a->KW, a->dw, a->sw, phase)) continue;
        for (idx j0 = 0; j0 < pitch; j0 += 32)
            stage_x_columns(a, dst + phase * a->G * a->ci_pad * pitch, pitch, j0, [&](idx j) -> const std::uint16_t* {
                const idx iw = j * a->sw + phase - a->pl;
                return iw < 0 || iw >= a->W ? nullptr : x + iw * a->x.s[2];
            }, scan);
    }
    a->least_exponent[unit] = x_exponent_byte(scan);
}

// Flat, the window's input unit `unit`: columns [32 b, 32 b + 32) of image n's
// phase streams (the window's images in order, each its blocks that the
// window's steps read), into slot n - win_x_first: phase (pr, pc) column j =
// r * Wq + c holds x[n, r * sh + pr - pt, c * sw + pc - pl] (zero outside the
// input and for r past the rows a tap reaches).  Phases no tap reads are left
// unwritten.
void stage_x_flat(const Conv2dAmxFilterGradArgs* a, idx unit) {
    idx n = a->win_x_first, j0 = 0;
    for (idx rest = unit;; ++n) {
        idx lo, hi;
        flat_column_blocks(a, n, a->win_first, a->win_last, &lo, &hi);
        if (rest < hi - lo) {
            j0 = (lo + rest) * 32;
            break;
        }
        rest -= hi - lo;
    }
    const idx wq = a->flat_width, rows = a->OH + ((a->KH - 1) * a->dh) / a->sh;
    const std::uint16_t* x = (const std::uint16_t*)a->x.data + n * a->x.s[0];
    const idx pitch = a->x_row_pixels;
    ExponentScan scan;
    for (idx pr = 0; pr < a->sh; ++pr) {
        if (!phase_read(a->KH, a->dh, a->sh, pr)) continue;
        for (idx pc = 0; pc < a->sw; ++pc) {
            if (!phase_read(a->KW, a->dw, a->sw, pc)) continue;
            std::uint16_t* dst = (std::uint16_t*)a->x_staged + (n - a->win_x_first) * a->x_row_elems +
                                 (pr * a->sw + pc) * a->G * a->ci_pad * pitch;
            stage_x_columns(a, dst, pitch, j0, [&](idx j) -> const std::uint16_t* {
                const idx r = j / wq, ih = r * a->sh + pr - a->pt, iw = (j % wq) * a->sw + pc - a->pl;
                return r >= rows || ih < 0 || ih >= a->H || iw < 0 || iw >= a->W ? nullptr
                                                                                 : x + ih * a->x.s[1] + iw * a->x.s[2];
            }, scan);
        }
    }
    a->least_exponent[unit] = x_exponent_byte(scan);
}

// Output-gradient pixels [0, 2 * pairs) of a staged row (by rows) or step
// (flat) pair-interleaved, as whole B tiles: [32-pixel step][tile of 16
// channels][pair q % 16][channel][e] = pixel 2q + e's channel g * cout_g + co
// (pixel(m): its address, nullptr past OW; zero past cout_g): a tile is 1 KiB
// in a row, not 16 rows a whole pixel pair apart.
template <class Pixel>
unsigned char stage_dy_pairs(const Conv2dAmxFilterGradArgs* a, std::uint16_t* dst, idx pairs, Pixel pixel) {
    const idx tiles_per_pair = a->G * a->co_pad / 16;  // B tiles side by side in a 32-pixel step
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    ExponentScan scan;
    for (idx q = 0; q < pairs; ++q) {
        const std::uint16_t* src_of[2] = {pixel(2 * q), pixel(2 * q + 1)};
        for (idx g = 0; g < a->G; ++g)
            for (idx c0 = 0; c0 < a->co_pad; c0 += 16) {
                const __mmask32 lanes = first_lanes(a->cout_g - c0) & 0xffffu;
                __m512i both = _mm512_setzero_si512();
                __mmask32 valid = 0;
                for (int e = 0; e < 2; ++e) {
                    if (src_of[e] == nullptr || lanes == 0) continue;
                    const std::uint16_t* src = src_of[e] + (g * a->cout_g + c0) * a->dy.s[3];
                    __m512i v;
                    if (a->dy.s[3] == 1) {
                        // Lanes 16e .. 16e + 15 (a masked load reads only its lanes).
                        v = _mm512_maskz_loadu_epi16(lanes << (16 * e), src - 16 * e);
                    } else {
                        alignas(64) std::uint16_t gathered[32] = {0};
                        for (idx c = 0; c < 16 && c0 + c < a->cout_g; ++c) gathered[16 * e + c] = src[c * a->dy.s[3]];
                        v = _mm512_load_si512(gathered);
                    }
                    both = _mm512_or_si512(both, v);
                    valid |= lanes << (16 * e);
                }
                scan.add(both, valid);
                // The B tile (step q / 16, 16 channels from g * co_pad + c0), row q % 16.
                std::uint16_t* tile = dst + ((q / 16) * tiles_per_pair + (g * a->co_pad + c0) / 16) * AMX_B_TILE;
                _mm512_storeu_si512(tile + (q % 16) * 32, _mm512_permutexvar_epi16(interleave, both));
            }
    }
    return scan.result(true);
}

// By rows, the window's output-gradient unit `unit`: row (n, oh) = win_first +
// unit, pixel m its column, into slot `unit`.
void stage_dy_row(const Conv2dAmxFilterGradArgs* a, idx unit) {
    const idx row = a->win_first + unit, n = row / a->OH, oh = row % a->OH;
    const std::uint16_t* dy = (const std::uint16_t*)a->dy.data + n * a->dy.s[0] + oh * a->dy.s[1];
    std::uint16_t* dst = (std::uint16_t*)a->dy_staged + unit * a->dy_row_elems;
    a->least_exponent[a->win_x_units + unit] = stage_dy_pairs(a, dst, a->ow_pad / 2, [&](idx m) -> const std::uint16_t* {
        return m < a->OW ? dy + m * a->dy.s[2] : nullptr;
    });
}

// Flat: step win_first + unit (= n * flat_steps + s) of image n, pixel m = 32 s
// + i at (m / Wq, m % Wq), into slot `unit`.
void stage_dy_flat(const Conv2dAmxFilterGradArgs* a, idx unit) {
    const idx step = a->win_first + unit;
    const idx n = step / a->flat_steps, m0 = (step % a->flat_steps) * 32, wq = a->flat_width;
    const std::uint16_t* dy = (const std::uint16_t*)a->dy.data + n * a->dy.s[0];
    std::uint16_t* dst = (std::uint16_t*)a->dy_staged + unit * a->dy_row_elems;
    a->least_exponent[a->win_x_units + unit] = stage_dy_pairs(a, dst, 16, [&](idx i) -> const std::uint16_t* {
        const idx oh = (m0 + i) / wq, ow = (m0 + i) % wq;
        return oh < a->OH && ow < a->OW ? dy + oh * a->dy.s[1] + ow * a->dy.s[2] : nullptr;
    });
}

// Where block `block` sits: its tap (kh, kw), group and 32-channel blocks of
// input and output channels (blocks run output channels fastest, then input
// channels, groups, taps).
struct BlockPlace {
    idx kh, kw, g, cib, cob;
};
inline BlockPlace block_place(const Conv2dAmxFilterGradArgs* a, idx block) {
    const idx co_blocks = a->co_pad / 32, ci_blocks = a->ci_pad / 32;
    const idx tap = block / (co_blocks * ci_blocks * a->G);
    return {tap / a->KW, tap % a->KW, (block / (co_blocks * ci_blocks)) % a->G, (block / co_blocks) % ci_blocks,
            block % co_blocks};
}

// Block `block`'s 32 x 32 float32 sums (rows: input channels) rounded into out.
void write_block(const Conv2dAmxFilterGradArgs* a, idx block, const float* sum) {
    const BlockPlace p = block_place(a, block);
    const idx kh = p.kh, kw = p.kw, g = p.g, ci0 = p.cib * 32, co0 = p.cob * 32;
    const idx ci_count = a->cin_g - ci0 < 32 ? a->cin_g - ci0 : 32;
    const idx co_count = a->cout_g - co0 < 32 ? a->cout_g - co0 : 32;
    if (ci_count <= 0 || co_count <= 0) return;
    amx::scatter_rows<float>(a->out.data, a->out.type,
                             kh * a->out.s[0] + kw * a->out.s[1] + ci0 * a->out.s[2] + (g * a->cout_g + co0) * a->out.s[3],
                             ci_count, a->out.s[2], co_count, a->out.s[3], sum, 32);
}

}  // namespace

void conv2d_amx_filter_grad_stage(const void* args, int, int, idx unit, void*) {
    const Conv2dAmxFilterGradArgs* a = static_cast<const Conv2dAmxFilterGradArgs*>(args);
    if (unit < a->win_x_units)
        a->flat ? stage_x_flat(a, unit) : stage_x_row(a, unit);
    else
        a->flat ? stage_dy_flat(a, unit - a->win_x_units) : stage_dy_row(a, unit - a->win_x_units);
}

void conv2d_amx_filter_grad_block(const void* args, int, int, idx unit, void* raw) {
    const Conv2dAmxFilterGradArgs* a = static_cast<const Conv2dAmxFilterGradArgs*>(args);
    amx_configure_tiles(raw);
    std::uint16_t* a_copy = (std::uint16_t*)((char*)raw + AMX_CONFIG_BYTES + AMX_RESULT_BYTES);
    const idx chunk = a->sequential ? a->chunk_now : unit / a->blocks, block = a->sequential ? unit : unit % a->blocks;
    const BlockPlace p = block_place(a, block);
    const idx kh = p.kh, kw = p.kw, g = p.g, cib = p.cib, cob = p.cob;
    const idx pixels = a->x_row_pixels;
    const idx a_stride = pixels * 2, tiles_per_pair = a->G * a->co_pad / 16;
    const idx first = chunk * a->chunk_rows;
    const idx last = first + a->chunk_rows < a->rows ? first + a->chunk_rows : a->rows;
    // One 32-pixel step: A (32 input channels x 32 pixels, rows `stride` bytes
    // apart) times B (32 pixels x 32 output channels, two staged tiles).
    const auto step = [](const std::uint16_t* a0, idx stride, const std::uint16_t* b0) {
        _tile_loadd(4, a0, stride);
        _tile_loadd(5, a0 + 16 * (stride / 2), stride);
        _tile_loadd(6, b0, 64);
        _tile_loadd(7, b0 + AMX_B_TILE, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    };
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    if (a->flat) {
        // Tap (kh, kw): phase ((kh dh) % sh, (kw dw) % sw), columns shifted by
        // (kh dh / sh) rows of Wq and (kw dw / sw).
        const idx phase = ((kh * a->dh) % a->sh) * a->sw + (kw * a->dw) % a->sw;
        const idx shift = ((kh * a->dh) / a->sh) * a->flat_width + (kw * a->dw) / a->sw;
        const std::uint16_t* xa = (const std::uint16_t*)a->x_staged +
                                  ((phase * a->G + g) * a->ci_pad + cib * 32) * pixels + shift;
        const std::uint16_t* yb = (const std::uint16_t*)a->dy_staged + ((g * a->co_pad + cob * 32) / 16) * AMX_B_TILE;
        // (Slots of the staged window: images from win_x_first, steps from win_first.)
        for (idx row = first; row < last; ++row) {
            const idx n = row / a->flat_steps, s = row % a->flat_steps;
            step(xa + (n - a->win_x_first) * a->x_row_elems + s * 32, a_stride,
                 yb + (row - a->win_first) * a->dy_row_elems);
        }
    } else {
        const idx phase = (kw * a->dw) % a->sw, shift = (kw * a->dw) / a->sw;
        const idx pixel_chunks = a->ow_pad / 32;
        // The last 32 columns of a row where OW ends inside them: with a
        // non-finite input their columns past OW are read from a zeroed copy.
        const bool copy_tail = a->x_non_finite && a->OW % 32 != 0;
        const idx tail_columns = a->OW % 32;
        for (idx row = first; row < last; ++row) {
            const idx n = row / a->OH, oh = row % a->OH;
            const idx ih = oh * a->sh - a->pt + kh * a->dh;
            if (ih < 0 || ih >= a->H) continue;  // this tap reads padding for the whole row
            // (Slots of the staged window: input rows from win_x_first, output rows from win_first.)
            const std::uint16_t* xa = (const std::uint16_t*)a->x_staged + (n * a->H + ih - a->win_x_first) * a->x_row_elems +
                                      ((phase * a->G + g) * a->ci_pad + cib * 32) * pixels + shift;
            const std::uint16_t* yb = (const std::uint16_t*)a->dy_staged + (row - a->win_first) * a->dy_row_elems +
                                      ((g * a->co_pad + cob * 32) / 16) * AMX_B_TILE;
            for (idx pc = 0; pc < pixel_chunks; ++pc) {
                const std::uint16_t* a0 = xa + pc * 32;
                idx stride = a_stride;
                if (copy_tail && pc == pixel_chunks - 1) {
                    const __mmask32 lanes = first_lanes(tail_columns);
                    for (int i = 0; i < 32; ++i)
                        _mm512_storeu_si512(a_copy + i * 32, _mm512_maskz_loadu_epi16(lanes, a0 + i * pixels));
                    a0 = a_copy;
                    stride = 64;
                }
                step(a0, stride, yb + pc * tiles_per_pair * AMX_B_TILE);
            }
        }
    }
    // Run one after another, the chunk's sum goes to the thread's scratch and is
    // added to the block's running sum (the reduce units' additions, in their
    // order); after the last chunk the block's sums are whole and rounded.
    float* c = a->sequential ? (float*)((char*)raw + AMX_CONFIG_BYTES) : a->partial + (chunk * a->blocks + block) * 32 * 32;
    _tile_stored(0, c, 128);
    _tile_stored(1, c + 16, 128);
    _tile_stored(2, c + 16 * 32, 128);
    _tile_stored(3, c + 16 * 32 + 16, 128);
    _tile_release();
    if (!a->sequential) return;
    if (a->chunks > 1) {
        float* running = a->partial + block * 32 * 32;
        for (int i = 0; i < 32 * 32; i += 16) {
            const __m512 sum = chunk == 0 ? _mm512_loadu_ps(c + i) : _mm512_add_ps(_mm512_loadu_ps(running + i), _mm512_loadu_ps(c + i));
            _mm512_storeu_ps(chunk == a->chunks - 1 ? c + i : running + i, sum);
        }
    }
    if (chunk == a->chunks - 1) write_block(a, block, c);
}

void conv2d_amx_filter_grad_reduce(const void* args, int, int, idx block, void* raw) {
    const Conv2dAmxFilterGradArgs* a = static_cast<const Conv2dAmxFilterGradArgs*>(args);
    float* sum = (float*)((char*)raw + AMX_CONFIG_BYTES);
    for (int i = 0; i < 32 * 32; i += 16) {
        __m512 s = _mm512_loadu_ps(a->partial + block * 32 * 32 + i);
        for (idx chunk = 1; chunk < a->chunks; ++chunk)
            s = _mm512_add_ps(s, _mm512_loadu_ps(a->partial + (chunk * a->blocks + block) * 32 * 32 + i));
        _mm512_storeu_ps(sum + i, s);
    }
    write_block(a, block, sum);
}

CVZ_AMX_POP
#else   // no AMX code in this build: never called (prepare returns 0)
void conv2d_amx_filter_grad_stage(const void*, int, int, idx, void*) {}
void conv2d_amx_filter_grad_block(const void*, int, int, idx, void*) {}
void conv2d_amx_filter_grad_reduce(const void*, int, int, idx, void*) {}
#endif  // CVZ_AMX_COMPILED

}  // namespace cvz

#endif  // !CVZ_INTERFACE_ONLY
