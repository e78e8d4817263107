// Run-time choice of the kernel variant: CPU features from cpuid, and the
// register state the OS saves from XCR0 (a CPU with AVX-512 under an OS that
// does not save ZMM state must not run AVX-512 code).
#include "cvz_isa.hpp"

#if CVZ_X86
#if defined(_MSC_VER)
#include <immintrin.h>
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#endif

namespace cvz {

#if CVZ_X86
namespace {

struct CpuidRegs {
    unsigned eax, ebx, ecx, edx;
};

CpuidRegs cpuid(unsigned leaf, unsigned subleaf) {
    CpuidRegs r = {0, 0, 0, 0};
#if defined(_MSC_VER)
    int regs[4];
    __cpuidex(regs, (int)leaf, (int)subleaf);
    r.eax = (unsigned)regs[0];
    r.ebx = (unsigned)regs[1];
    r.ecx = (unsigned)regs[2];
    r.edx = (unsigned)regs[3];
#else
    if ((unsigned)__get_cpuid_max(leaf & 0x80000000u, nullptr) < leaf) return r;
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
#endif
    return r;
}

// XCR0: which register state the OS saves on context switches.
unsigned long long xcr0() {
#if defined(_MSC_VER)
    return _xgetbv(0);
#else
    unsigned eax = 0, edx = 0;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
#endif
}

bool bit(unsigned reg, int n) { return (reg >> n) & 1u; }

int detect() {
    const CpuidRegs max = cpuid(0, 0);
    if (max.eax < 7) return ISA_GENERIC;
    const CpuidRegs l1 = cpuid(1, 0), l7 = cpuid(7, 0);
    // Leaf 1 ECX: FMA 12, OSXSAVE 27, AVX 28, F16C 29.
    if (!(bit(l1.ecx, 27) && bit(l1.ecx, 28) && bit(l1.ecx, 12) && bit(l1.ecx, 29))) return ISA_GENERIC;
    const unsigned long long xcr = xcr0();
    if ((xcr & 0x6u) != 0x6u) return ISA_GENERIC;  // XMM and YMM state (bits 1, 2)
    if (!bit(l7.ebx, 5)) return ISA_GENERIC;       // AVX2
    // Leaf 7 EBX: AVX512F 16, AVX512DQ 17, AVX512BW 30, AVX512VL 31; XCR0 bits 5-7:
    // opmask, upper halves of ZMM0-15, ZMM16-31.
    const bool avx512 = bit(l7.ebx, 16) && bit(l7.ebx, 17) && bit(l7.ebx, 30) && bit(l7.ebx, 31);
    if (avx512 && (xcr & 0xe0u) == 0xe0u) return ISA_AVX512;
    return ISA_AVX2;
}

// AVX512_BF16 (leaf 7, subleaf 1, EAX bit 5), on top of usable AVX-512.
bool detect_bf16_dot() {
    if (detect() != ISA_AVX512 || cpuid(7, 0).eax < 1) return false;
    return bit(cpuid(7, 1).eax, 5);
}

#if CVZ_F16_FMA_COMPILED
// AVX512_FP16 (leaf 7, subleaf 0, EDX bit 23), on top of usable AVX-512.
bool detect_f16_fma() { return detect() == ISA_AVX512 && bit(cpuid(7, 0).edx, 23); }
#endif

}  // namespace
#endif  // CVZ_X86

bool cpu_has_f16_fma() {
#if CVZ_X86 && CVZ_F16_FMA_COMPILED
    static const bool has = detect_f16_fma();
    return has;
#else
    return false;
#endif
}

bool cpu_has_bf16_dot() {
#if CVZ_X86
    static const bool has = detect_bf16_dot();
    return has;
#else
    return false;
#endif
}

int isa_best() {
#if CVZ_X86
    static const int best = detect();
    return best;
#else
    return ISA_GENERIC;
#endif
}

}  // namespace cvz
