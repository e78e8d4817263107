// What the AMX kernels share (conv2d_amx.cpp: the forward pass and, through
// its stride phases, the input gradient; conv2d_amx_filter_grad.cpp): whether
// the build and CPU have AMX-BF16, the target region their code compiles in,
// the tile shapes, and the exactness rule that decides when a call may run on
// the tiles.
#pragma once

#include "cvz_common.hpp"

// GCC 11 and clang 12 know the AMX intrinsics; Linux is where the tile state
// is requested (arch_prctl).
#if CVZ_X86 && defined(__linux__) && defined(__x86_64__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define CVZ_AMX_COMPILED 1
#else
#define CVZ_AMX_COMPILED 0
#endif

#if CVZ_AMX_COMPILED
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cvz_isa.hpp"

// Every function between CVZ_AMX_PUSH and CVZ_AMX_POP compiles for AVX-512
// (with AVX512_BF16) and AMX; they run only where amx_unusable_reason() is "".
#if defined(__clang__)
#define CVZ_AMX_PUSH                                                                                            \
    _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma,f16c,amx-tile,amx-bf16\"))), apply_to = function)")
#define CVZ_AMX_POP _Pragma("clang attribute pop")
#else
#define CVZ_AMX_PUSH \
    _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma,f16c,amx-tile,amx-bf16\")")
#define CVZ_AMX_POP _Pragma("GCC pop_options")
#endif

// The layout moves (scatter_rows) of the AVX-512 variant, for the results.
CVZ_AMX_PUSH
namespace cvz {
namespace amx {
constexpr Isa THIS_ISA = ISA_AVX512;
#include "cvz_simd_avx512.hpp"
#include "cvz_layout.hpp"
}  // namespace amx
}  // namespace cvz
CVZ_AMX_POP
#endif  // CVZ_AMX_COMPILED

namespace cvz {

#if CVZ_AMX_COMPILED
namespace amx_detail {

// Linux (5.16 and later) hands out the tile data state only on request.
constexpr int ARCH_REQ_XCOMP_PERM = 0x1023;
constexpr int XFEATURE_XTILEDATA = 18;

inline const char* detect() {
    if (isa_best() != ISA_AVX512) return "the CPU (or the OS) runs no AVX-512";
    unsigned a = 0, b = 0, c = 0, d = 0;
    if ((unsigned)__get_cpuid_max(0, nullptr) < 7) return "the CPU has no AMX";
    __cpuid_count(7, 0, a, b, c, d);
    // Leaf 7 EDX: AMX-BF16 22, AMX-TILE 24.
    if (!((d >> 22) & 1u) || !((d >> 24) & 1u)) return "the CPU has no AMX-BF16 tiles";
    // AVX512_BF16 (leaf 7, subleaf 1, EAX bit 5) rounds the results (every AMX CPU has it).
    if (a < 1) return "the CPU has no AVX512_BF16";
    __cpuid_count(7, 1, a, b, c, d);
    if (!((a >> 5) & 1u)) return "the CPU has no AVX512_BF16";
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
        return "Linux did not grant the AMX tile state (a kernel before 5.16?)";
    return "";
}

}  // namespace amx_detail
#endif

// Why bfloat16 cannot run on AMX tiles here, "" where it can (the CPU has
// AMX-TILE, AMX-BF16 and AVX512_BF16 under AVX-512, the build holds the code,
// and Linux granted the process the tile state: asked on the first call).
static inline const char* amx_unusable_reason() {
#if CVZ_AMX_COMPILED
    static const char* reason = amx_detail::detect();
    return reason;
#else
    return "this build has no AMX code (it needs GCC 11 or clang 12 on x86-64 Linux)";
#endif
}

// Output pixels and channels of a tile; reduction channels of a chunk.
constexpr idx AMX_TILE_M = 16, AMX_TILE_N = 16, AMX_CHUNK = 32;
// A bfloat16 tile of B: 16 rows of 16 channels x 2 (a pair of reduction channels).
constexpr idx AMX_B_TILE = AMX_TILE_N * AMX_CHUNK;
// Per-thread scratch the kernels start with: the tile configuration, then
// the float32 results of a 32 x 32 block.
constexpr idx AMX_CONFIG_BYTES = 64;
constexpr idx AMX_RESULT_BYTES = 4 * AMX_TILE_M * AMX_TILE_N * 4;

// A normal bfloat16 value is an integer of 8 bits times 2^(e - 134) (e its
// biased exponent), so a product is a multiple of 2^(ex + ew - 268) and so is
// every float32 partial sum of such products (rounding keeps multiples of a
// power of two): with ex + ew >= 142 every partial sum is zero or at least
// 2^-126 -- normal, where AMX's flushing changes nothing.
constexpr int AMX_EXACT_EXPONENTS = 142;

// Whether operands whose nonzero values have biased exponents of at least
// `least_a` and `least_b` (255: all zero; 0: a subnormal, or a value that
// must not meet the padding's zeros) keep every sum exact on the tiles.
static inline bool amx_sums_exact(int least_a, int least_b) {
    return least_a >= 1 && least_b >= 1 && (least_a == 255 || least_b == 255 || least_a + least_b >= AMX_EXACT_EXPONENTS);
}

#if CVZ_AMX_COMPILED
CVZ_AMX_PUSH

// Palette 1, loaded from (and kept in) the first AMX_CONFIG_BYTES of a thread's
// scratch: tiles 0-3 (results) of 16 rows of 64 bytes, tiles 4-5 (A) of 16
// rows of `a_bytes` (a reduction shorter than 32 values reads no more), tiles
// 6-7 (B) of `b_rows` rows (its pairs) of 64 bytes.
static inline void amx_configure_tiles(void* scratch, int a_bytes = 64, int b_rows = 16) {
    struct alignas(64) TileConfig {
        std::uint8_t palette, start_row, reserved[14];
        std::uint16_t colsb[16];
        std::uint8_t rows[16];
    };
    TileConfig* cfg = (TileConfig*)scratch;
    std::memset(cfg, 0, sizeof(TileConfig));
    cfg->palette = 1;
    for (int t = 0; t < 8; ++t) {
        cfg->rows[t] = (std::uint8_t)(t >= 6 ? b_rows : 16);
        cfg->colsb[t] = (std::uint16_t)(t == 4 || t == 5 ? a_bytes : 64);
    }
    _tile_loadconfig(cfg);
}

// The smallest exponent field (bits 7-14) among nonzero bfloat16 values, and
// whether any is infinite or NaN, over the values a staging or pack unit moves.
struct ExponentScan {
    __m512i least;
    __mmask32 non_finite;

    ExponentScan() : least(_mm512_set1_epi16(0x7f80)), non_finite(0) {}

    // (Zero-masked intrinsics where GCC 12 warns of the unmasked ones' undefined
    // pass-through, PR 105593: see cvz_simd_avx512.hpp.)
    void add(__m512i v, __mmask32 valid) {
        const __m512i e = _mm512_and_si512(v, _mm512_set1_epi16(0x7f80));
        const __mmask32 nonzero = _mm512_mask_test_epi16_mask(valid, v, _mm512_set1_epi16(0x7fff));
        least = _mm512_mask_min_epu16(least, nonzero, least, e);
        non_finite |= _mm512_mask_cmpeq_epi16_mask(valid, e, _mm512_set1_epi16(0x7f80));
    }
    void add(std::uint16_t v) { add(_mm512_set1_epi16((short)v), 1); }
    // The least biased exponent (255: none), 0 where a value was non-finite and
    // `finite_only` (an operand whose values meet the padding's zeros).
    unsigned char result(bool finite_only) const {
        if (finite_only && non_finite) return 0;
        std::uint16_t lanes[32];
        _mm512_storeu_si512(lanes, least);
        unsigned e = 0x7f80;
        for (int i = 0; i < 32; ++i) e = lanes[i] < e ? lanes[i] : e;
        return (unsigned char)(e >> 7);
    }
};

// Lanes [0, n) of 32 (n clipped to 0..32).
static inline __mmask32 first_lanes(idx n) {
    return n >= 32 ? (__mmask32)0xffffffffu : n <= 0 ? (__mmask32)0 : (__mmask32)((1u << n) - 1u);
}

CVZ_AMX_POP
#endif  // CVZ_AMX_COMPILED

}  // namespace cvz
