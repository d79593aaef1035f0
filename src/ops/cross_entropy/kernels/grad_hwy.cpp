// Compiles grad_hwy-inl.h once per Highway target and lists the results for the registry.
//
// Targets: AVX-512 (AVX3), AVX2, SSE4 and EMU128 (portable scalar-like code) on x86; NEON/SVE/... elsewhere, as
// Highway attains them. All are compiled whatever the build's -march, so that every target this CPU can run is
// testable on it (HWY_COMPILE_ALL_ATTAINABLE). SSSE3 and AVX3_DL add nothing here over SSE4 and AVX3.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
#define HWY_COMPILE_ALL_ATTAINABLE

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/grad_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/grad_hwy-inl.h"

#if HWY_ONCE
#include <atomic>
#include <cmath>
#include <vector>

#include "common/float_convert.h"
#include "ops/common/element_access.h"
#include "kernels/grad_hwy_shared.h"

namespace openaclnn::cross_entropy {

namespace {

// Outputs of at least this many bytes use streaming stores. Off by default: measured on the reference machine
// (2-core Zen 5 VM, 4096 x 32000 fp32, 2 threads), regular stores ran at 1.08-1.18x a memcpy of the same bytes
// and streaming stores at 1.30-1.67x, in the same runs. The path stays built and tested (SetStreamingThreshold).
std::atomic<uint64_t> g_streaming_threshold_bytes{UINT64_MAX};

uint64_t ElementBytes(aclDataType dtype) { return dtype == ACL_FLOAT ? 4 : 2; }

}  // namespace

bool UseStreamingStores(const GradKernelArgs &args) {
    return static_cast<uint64_t>(args.n) * static_cast<uint64_t>(args.c) * ElementBytes(args.dtype) >=
           g_streaming_threshold_bytes.load(std::memory_order_relaxed);
}

uint64_t SetStreamingThreshold(uint64_t bytes) { return g_streaming_threshold_bytes.exchange(bytes); }

void StoreTargetElement(aclDataType dtype, const void *x, void *out, const GradRowCoefficients &row, double weight) {
    // The reference kernel's expression, operation for operation (this file is built with -ffp-contract=off).
    double value = std::exp(LoadFloatAt(static_cast<const char *>(x), dtype)) * row.a - row.b * weight;
    value -= row.g;
    StoreFloatAt(static_cast<char *>(out), dtype, value);
}

void StoreExactElement(aclDataType dtype, float x, void *out, double a, double b, double weight) {
    StoreFloatAt(static_cast<char *>(out), dtype, std::exp(static_cast<double>(x)) * a - b * weight);
}

void StoreExactRow(aclDataType dtype, const void *in, void *out, size_t count, const GradRowCoefficients &row,
                   const float *w) {
    const size_t size = ElementBytes(dtype);
    for (size_t j = 0; j < count; ++j) {
        // The widening is exact, so x as float is the element itself.
        const float x = static_cast<float>(LoadFloatAt(static_cast<const char *>(in) + j * size, dtype));
        StoreExactElement(dtype, x, static_cast<char *>(out) + j * size, row.a, row.b,
                          w != nullptr ? static_cast<double>(w[j]) : 1.0);
    }
}

namespace {

// Every layout: contiguous rows stream directly, any other column strides go through the same vector code via
// stack buffers (grad_hwy-inl.h, GradTileGathered), so that every layout gets the same bits.
bool HwySupports(const GradKernelArgs &args) {
    return args.dtype == ACL_FLOAT || args.dtype == ACL_FLOAT16 || args.dtype == ACL_BF16;
}

// Whether the CPU has the AVX-512 BF16 instructions (the compiler's CPUID check). The OS's support of the AVX-512
// state comes with the AVX3 target, which the entry below also requires.
bool CpuHasAvx512Bf16() {
#if HWY_ARCH_X86
    return __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

struct HwyKernelEntry {
    int64_t target;  // Highway target bit
    GradKernelInfo info;
    bool needs_avx512_bf16;
};

#define OPENACLNN_HWY_ENTRY(TARGET, NS, RANK) \
    HwyKernelEntry { HWY_##TARGET, {"hwy:" #TARGET, HwySupports, &NS::GradKernel, RANK}, false }

// Best first. AVX3_BF16 is the AVX3 code with bf16 results rounded by the AVX-512 BF16 instruction (the same bits;
// grad_hwy-inl.h, StoreBf16PairsNative).
const HwyKernelEntry kHwyKernels[] = {
#if HWY_TARGETS & HWY_AVX3
    HwyKernelEntry{HWY_AVX3, {"hwy:AVX3_BF16", HwySupports, &N_AVX3::GradKernelNativeBf16, kGradIsaAvx512}, true},
    OPENACLNN_HWY_ENTRY(AVX3, N_AVX3, kGradIsaAvx512),
#endif
#if HWY_TARGETS & HWY_AVX2
    OPENACLNN_HWY_ENTRY(AVX2, N_AVX2, kGradIsaAvx2),
#endif
#if HWY_TARGETS & HWY_SSE4
    OPENACLNN_HWY_ENTRY(SSE4, N_SSE4, kGradIsaSse4),
#endif
#if HWY_TARGETS & HWY_SVE2
    OPENACLNN_HWY_ENTRY(SVE2, N_SVE2, kGradIsaAvx512),
#endif
#if HWY_TARGETS & HWY_SVE
    OPENACLNN_HWY_ENTRY(SVE, N_SVE, kGradIsaAvx2),
#endif
#if HWY_TARGETS & HWY_NEON
    OPENACLNN_HWY_ENTRY(NEON, N_NEON, kGradIsaSse4),
#endif
#if HWY_TARGETS & HWY_EMU128
    OPENACLNN_HWY_ENTRY(EMU128, N_EMU128, kGradIsaScalar),
#endif
#if HWY_TARGETS & HWY_SCALAR
    OPENACLNN_HWY_ENTRY(SCALAR, N_SCALAR, kGradIsaScalar),
#endif
};

#undef OPENACLNN_HWY_ENTRY

}  // namespace

std::vector<const GradKernelInfo *> HwyGradKernels() {
    std::vector<const GradKernelInfo *> kernels;
    const int64_t supported = hwy::SupportedTargets();
    for (const HwyKernelEntry &entry : kHwyKernels) {
        if ((supported & entry.target) && (!entry.needs_avx512_bf16 || CpuHasAvx512Bf16())) {
            kernels.push_back(&entry.info);
        }
    }
    return kernels;
}

}  // namespace openaclnn::cross_entropy
#endif  // HWY_ONCE
