// The dense filter gradient for bfloat16 on AMX tiles (see conv2d_amx.cpp for
// the forward pass), the default precision's contract kept: exact products,
// float32 sums, one rounding.
//
// dw[kh, kw, ci, co] = sum over output pixels p of x[p's input pixel through
// tap (kh, kw), ci] * dy[p, co]: per tap a GEMM C[ci][co] += A[ci][p] B[p][co]
// whose reduction runs over the pixels.  A wants each input channel's pixels
// in a row: every input row is staged transposed ([stride phase][channel]
// [column]; a tap's pixels of one output row are then consecutive columns of
// its phase); B wants pairs of pixels side by side: every output-gradient row
// is staged pair-interleaved ([pixel pair][channel][2]).  A unit is one block
// of 32 x 32 (input x output channels) of one tap over one chunk of output
// rows (the chunks fixed by the shape); each writes its float32 partial sum,
// and a second pass adds a block's chunks in order and rounds once, so the
// result does not depend on the threads.
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
    // output), output columns rounded up to 32, a staged input row's columns
    // per stride phase and elements, a staged output-gradient row's elements,
    // output rows per chunk and chunks, 32 x 32 blocks (taps x groups x input
    // x output channel blocks), the staging units (input rows, then output
    // rows), the per-thread scratch bytes.
    idx ci_pad, co_pad, ow_pad, x_row_pixels, x_row_elems, dy_row_elems;
    idx chunk_rows, chunks, blocks, stage_units, scratch_bytes;
    // Set after staging: whether the input holds an infinite or NaN value
    // (then the tiles past a row's end are read through a zeroed copy).
    int x_non_finite;
    void* x_staged;
    void* dy_staged;
    float* partial;                 // [chunks][blocks][32][32]
    unsigned char* least_exponent;  // [stage_units]
};

// Sizes; 0 where the shape does not suit the tiles (or AMX cannot run here).
int conv2d_amx_filter_grad_prepare(Conv2dAmxFilterGradArgs* a);
// Stage input row `unit` (< N * H) or output-gradient row unit - N * H (a UnitFn).
void conv2d_amx_filter_grad_stage(const void* args, int isa, int f64, idx unit, void* scratch);
// Whether the staged operands keep the tiles' sums exact; sets x_non_finite.
int conv2d_amx_filter_grad_exact(Conv2dAmxFilterGradArgs* a);
// Unit = chunk * blocks + block: that block's partial sum over that chunk (a UnitFn).
void conv2d_amx_filter_grad_block(const void* args, int isa, int f64, idx unit, void* scratch);
// Unit = block: its chunks' partial sums added in order, rounded into out (a UnitFn).
void conv2d_amx_filter_grad_reduce(const void* args, int isa, int f64, idx unit, void* scratch);

}  // namespace cvz

#endif  // CVZ_CONV2D_AMX_FILTER_GRAD_INTERFACE

#if !defined(CVZ_INTERFACE_ONLY)

#include "cvz_amx.hpp"

namespace cvz {

// A chunk of output rows: its staged input and output-gradient rows take about
// this many bytes, so that they stay in a core's L2 cache (2 MiB on Sapphire
// and Emerald Rapids) while every channel block of every tap reads them; at
// most this many chunks (their partial sums are kept in memory), and at least
// this many pixels a chunk (each partial sum is stored and added once).
constexpr idx AMX_FG_CHUNK_BYTES = 1 << 20;
constexpr idx AMX_FG_MAX_CHUNKS = 64;
constexpr idx AMX_FG_MIN_CHUNK_PIXELS = 512;

int conv2d_amx_filter_grad_prepare(Conv2dAmxFilterGradArgs* a) {
    if (a->cin_g < 16 || a->cout_g < 16 || a->OW <= 0 || a->OH <= 0 || a->N <= 0) return 0;
    if (amx_unusable_reason()[0] != '\0') return 0;
    a->ci_pad = round_up(a->cin_g, 32);
    a->co_pad = round_up(a->cout_g, 32);
    a->ow_pad = round_up(a->OW, 32);
    // A 1x1 filter does as few flops per staged value as it has channels: where
    // the tiles' padding (channels to 32, columns to 32) leaves fewer than 30
    // useful ones on the smaller side, staging (a transpose, an interleave)
    // costs more than the tiles save over the AVX-512 kernel (paired over the
    // pointwise layers of seven networks, batch 1: 0.46-0.97x below, mostly
    // 1.0-2.5x above).
    if (a->KH * a->KW == 1) {
        const double used = (double)a->cin_g / a->ci_pad * a->cout_g / a->co_pad * a->OW / a->ow_pad;
        const idx narrow = a->cin_g < a->cout_g ? a->cin_g : a->cout_g;
        if (used * narrow < 30) return 0;
    }
    // Tap kw reads column j = ow + kw * dw / sw of phase kw * dw % sw; rows of
    // whole 32-column blocks (the transpose's unit).
    a->x_row_pixels = round_up(a->ow_pad + ((a->KW - 1) * a->dw) / a->sw, 32);
    a->x_row_elems = a->sw * a->G * a->ci_pad * a->x_row_pixels;
    a->dy_row_elems = a->ow_pad * a->G * a->co_pad;
    const idx rows = a->N * a->OH;
    // Staged bytes an output row brings: its output-gradient row, and sh input
    // rows (the rows between two output rows' first taps).
    const idx row_bytes = 2 * (a->dy_row_elems + a->sh * a->x_row_elems);
    idx chunk_rows = AMX_FG_CHUNK_BYTES / row_bytes;
    const idx min_rows = (AMX_FG_MIN_CHUNK_PIXELS + a->ow_pad - 1) / a->ow_pad;
    if (chunk_rows < min_rows) chunk_rows = min_rows;
    if ((rows + chunk_rows - 1) / chunk_rows > AMX_FG_MAX_CHUNKS) chunk_rows = (rows + AMX_FG_MAX_CHUNKS - 1) / AMX_FG_MAX_CHUNKS;
    if (chunk_rows > rows) chunk_rows = rows;
    a->chunk_rows = chunk_rows;
    a->chunks = (rows + chunk_rows - 1) / chunk_rows;
    a->blocks = a->KH * a->KW * a->G * (a->ci_pad / 32) * (a->co_pad / 32);
    a->stage_units = a->N * a->H + a->N * a->OH;
    // The tile configuration, a 32 x 32 float32 block, a zeroed copy of two A tiles.
    a->scratch_bytes = AMX_CONFIG_BYTES + AMX_RESULT_BYTES + 2 * AMX_TILE_M * 64;
    return 1;
}

int conv2d_amx_filter_grad_exact(Conv2dAmxFilterGradArgs* a) {
    int x_least = 255, dy_least = 255;
    a->x_non_finite = 0;
    const idx x_rows = a->N * a->H;
    for (idx u = 0; u < a->stage_units; ++u) {
        const int e = a->least_exponent[u];
        if (u < x_rows) {
            // (bit 7 of an input row's byte: it holds a non-finite value)
            a->x_non_finite |= (e >> 7) & 1;
            if ((e & 0x7f) * 2 < x_least) x_least = (e & 0x7f) * 2;
        } else if (e < dy_least) {
            dy_least = e;
        }
    }
    return amx_sums_exact(x_least, dy_least);
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

// Input row (n, ih) transposed: [phase r][g * ci_pad + ci][j] = x[n, ih,
// j * sw + r - pl, g * cin_g + ci] (zero outside the row and past cin_g).
// The byte recorded: bit 7 a non-finite value, bits 0-6 half the least
// exponent (rounded down: the check stays on the safe side).
void stage_x_row(const Conv2dAmxFilterGradArgs* a, idx row) {
    const idx n = row / a->H, ih = row % a->H;
    const std::uint16_t* x = (const std::uint16_t*)a->x.data + n * a->x.s[0] + ih * a->x.s[1];
    std::uint16_t* dst = (std::uint16_t*)a->x_staged + row * a->x_row_elems;
    const idx pixels = a->x_row_pixels;
    ExponentScan scan;
    __m512i r[32];
    for (idx phase = 0; phase < a->sw; ++phase)
        for (idx g = 0; g < a->G; ++g)
            for (idx c0 = 0; c0 < a->ci_pad; c0 += 32) {
                const __mmask32 lanes = first_lanes(a->cin_g - c0);
                std::uint16_t* out = dst + ((phase * a->G + g) * a->ci_pad + c0) * pixels;
                for (idx j0 = 0; j0 < pixels; j0 += 32) {
                    const idx iw0 = j0 * a->sw + phase - a->pl, iw31 = (j0 + 31) * a->sw + phase - a->pl;
                    if (a->x.s[3] == 1 && lanes != 0 && iw0 >= 0 && iw31 < a->W) {  // every row a real column
                        const std::uint16_t* src = x + iw0 * a->x.s[2] + (g * a->cin_g + c0);
                        const idx step = a->sw * a->x.s[2];
                        for (int i = 0; i < 32; ++i) {
                            r[i] = _mm512_maskz_loadu_epi16(lanes, src + i * step);
                            scan.add(r[i], lanes);
                        }
                        transpose_32x32_u16(r);
                        for (int i = 0; i < 32; ++i) _mm512_storeu_si512(out + i * pixels + j0, r[i]);
                        continue;
                    }
                    for (int i = 0; i < 32; ++i) {
                        const idx iw = (j0 + i) * a->sw + phase - a->pl;
                        if (iw < 0 || iw >= a->W || lanes == 0) {
                            r[i] = _mm512_setzero_si512();
                            continue;
                        }
                        const std::uint16_t* src = x + iw * a->x.s[2] + (g * a->cin_g + c0) * a->x.s[3];
                        if (a->x.s[3] == 1) {
                            r[i] = _mm512_maskz_loadu_epi16(lanes, src);
                        } else {
                            alignas(64) std::uint16_t gathered[32] = {0};
                            for (idx c = 0; c < 32 && c0 + c < a->cin_g; ++c) gathered[c] = src[c * a->x.s[3]];
                            r[i] = _mm512_load_si512(gathered);
                        }
                        scan.add(r[i], lanes);
                    }
                    transpose_32x32_u16(r);
                    for (int i = 0; i < 32; ++i) _mm512_storeu_si512(out + i * pixels + j0, r[i]);
                }
            }
    const int least = scan.result(false);
    a->least_exponent[row] = (unsigned char)((scan.non_finite ? 0x80 : 0) | (least / 2));
}

// Output-gradient row (n, oh) pair-interleaved, as whole B tiles: [32-pixel
// chunk][tile of 16 channels][pair q % 16][channel][e] = dy[n, oh, 2q + e,
// g * cout_g + co] (zero past OW and cout_g): a tile is 1 KiB in a row, not
// 16 rows a whole pixel pair apart.
void stage_dy_row(const Conv2dAmxFilterGradArgs* a, idx row) {
    const idx n = row / a->OH, oh = row % a->OH;
    const std::uint16_t* dy = (const std::uint16_t*)a->dy.data + n * a->dy.s[0] + oh * a->dy.s[1];
    std::uint16_t* dst = (std::uint16_t*)a->dy_staged + row * a->dy_row_elems;
    const idx tiles_per_pair = a->G * a->co_pad / 16;  // B tiles side by side in a 32-pixel chunk
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    ExponentScan scan;
    for (idx q = 0; q < a->ow_pad / 2; ++q)
        for (idx g = 0; g < a->G; ++g)
            for (idx c0 = 0; c0 < a->co_pad; c0 += 16) {
                const __mmask32 lanes = first_lanes(a->cout_g - c0) & 0xffffu;
                __m512i both = _mm512_setzero_si512();
                __mmask32 valid = 0;
                for (int e = 0; e < 2; ++e) {
                    const idx ow = 2 * q + e;
                    if (ow >= a->OW || lanes == 0) continue;
                    const std::uint16_t* src = dy + ow * a->dy.s[2] + (g * a->cout_g + c0) * a->dy.s[3];
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
                // The B tile (32-pixel chunk q / 16, 16 channels from g * co_pad + c0), row q % 16.
                std::uint16_t* tile = dst + ((q / 16) * tiles_per_pair + (g * a->co_pad + c0) / 16) * AMX_B_TILE;
                _mm512_storeu_si512(tile + (q % 16) * 32, _mm512_permutexvar_epi16(interleave, both));
            }
    a->least_exponent[a->N * a->H + row] = scan.result(true);
}

}  // namespace

void conv2d_amx_filter_grad_stage(const void* args, int, int, idx unit, void*) {
    const Conv2dAmxFilterGradArgs* a = static_cast<const Conv2dAmxFilterGradArgs*>(args);
    if (unit < a->N * a->H)
        stage_x_row(a, unit);
    else
        stage_dy_row(a, unit - a->N * a->H);
}

void conv2d_amx_filter_grad_block(const void* args, int, int, idx unit, void* raw) {
    const Conv2dAmxFilterGradArgs* a = static_cast<const Conv2dAmxFilterGradArgs*>(args);
    amx_configure_tiles(raw);
    std::uint16_t* a_copy = (std::uint16_t*)((char*)raw + AMX_CONFIG_BYTES + AMX_RESULT_BYTES);
    const idx chunk = unit / a->blocks, block = unit % a->blocks;
    const idx co_blocks = a->co_pad / 32, ci_blocks = a->ci_pad / 32;
    const idx cob = block % co_blocks, cib = (block / co_blocks) % ci_blocks;
    const idx g = (block / (co_blocks * ci_blocks)) % a->G, tap = block / (co_blocks * ci_blocks * a->G);
    const idx kh = tap / a->KW, kw = tap % a->KW;
    const idx phase = (kw * a->dw) % a->sw, shift = (kw * a->dw) / a->sw;
    const idx pixels = a->x_row_pixels;
    const idx a_stride = pixels * 2, tiles_per_pair = a->G * a->co_pad / 16;
    const idx rows = a->N * a->OH, first = chunk * a->chunk_rows;
    const idx last = first + a->chunk_rows < rows ? first + a->chunk_rows : rows;
    const idx pixel_chunks = a->ow_pad / 32;
    // The last 32 columns of a row where OW ends inside them: with a
    // non-finite input their columns past OW are read from a zeroed copy.
    const bool copy_tail = a->x_non_finite && a->OW % 32 != 0;
    const idx tail_columns = a->OW % 32;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (idx row = first; row < last; ++row) {
        const idx n = row / a->OH, oh = row % a->OH;
        const idx ih = oh * a->sh - a->pt + kh * a->dh;
        if (ih < 0 || ih >= a->H) continue;  // this tap reads padding for the whole row
        const std::uint16_t* xa = (const std::uint16_t*)a->x_staged + (n * a->H + ih) * a->x_row_elems +
                                  ((phase * a->G + g) * a->ci_pad + cib * 32) * pixels + shift;
        const std::uint16_t* yb = (const std::uint16_t*)a->dy_staged + row * a->dy_row_elems +
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
            const std::uint16_t* b0 = yb + pc * tiles_per_pair * AMX_B_TILE;
            _tile_loadd(4, a0, stride);
            _tile_loadd(5, a0 + 16 * (stride / 2), stride);
            _tile_loadd(6, b0, 64);
            _tile_loadd(7, b0 + AMX_B_TILE, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    float* c = a->partial + (chunk * a->blocks + block) * 32 * 32;
    _tile_stored(0, c, 128);
    _tile_stored(1, c + 16, 128);
    _tile_stored(2, c + 16 * 32, 128);
    _tile_stored(3, c + 16 * 32 + 16, 128);
    _tile_release();
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
    const idx co_blocks = a->co_pad / 32, ci_blocks = a->ci_pad / 32;
    const idx cob = block % co_blocks, cib = (block / co_blocks) % ci_blocks;
    const idx g = (block / (co_blocks * ci_blocks)) % a->G, tap = block / (co_blocks * ci_blocks * a->G);
    const idx kh = tap / a->KW, kw = tap % a->KW;
    const idx ci0 = cib * 32, co0 = cob * 32;
    const idx ci_count = a->cin_g - ci0 < 32 ? a->cin_g - ci0 : 32;
    const idx co_count = a->cout_g - co0 < 32 ? a->cout_g - co0 : 32;
    if (ci_count <= 0 || co_count <= 0) return;
    amx::scatter_rows<float>(a->out.data, a->out.type,
                             kh * a->out.s[0] + kw * a->out.s[1] + ci0 * a->out.s[2] + (g * a->cout_g + co0) * a->out.s[3],
                             ci_count, a->out.s[2], co_count, a->out.s[3], sum, 32);
}

CVZ_AMX_POP
#else   // no AMX code in this build: never called (prepare returns 0)
void conv2d_amx_filter_grad_stage(const void*, int, int, idx, void*) {}
void conv2d_amx_filter_grad_block(const void*, int, int, idx, void*) {}
void conv2d_amx_filter_grad_reduce(const void*, int, int, idx, void*) {}
#endif  // CVZ_AMX_COMPILED

}  // namespace cvz

#endif  // !CVZ_INTERFACE_ONLY
