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
#if HWY_ARCH_X86
#include <cpuid.h>
#endif
#include <vector>

#include "common/exp_double.h"
#include "common/float_convert.h"
#include "ops/common/element_access.h"
#include "kernels/grad_hwy_shared.h"

namespace openaclnn::cross_entropy {

namespace {

// Streaming stores write whole lines to memory without first reading them (the read-for-ownership of regular
// stores), so an output that the caches cannot keep costs one transfer per line instead of two. They are used from
// 64 MiB of output (twice the reference machine's last-level cache) with rows of at least 16 KiB. Measured on the
// reference machine (2-core Zen 4 VM, 2 threads, `bench/ab_libs.sh`, paired op time streaming / regular, median of 3
// rounds): 4096 x 32000 fp32 plain, weighted and z-loss 0.67-0.76 and smoothed+weighted 0.69 (x copy 1.17 -> 0.87,
// 1.37 -> 1.00: the copy is glibc's memcpy, which streams too), fp16 0.89-0.96, bf16 0.80-0.84 and smoothed+weighted
// 0.94. With rows of 1000 classes (65536 x 1000) fp16 and bf16 ran 1.4-1.8x slower: each row starts and ends in a
// partial line, which the rows' peel and tail write with regular stores, hence the row minimum. There fp32 plain ran
// 1.03x, z-loss 0.96x and weighted 1.33x the time, but smoothed+weighted, whose rows go in groups of four
// (RunWeightedRows), 0.71x; the groups stream from the output threshold on at any row length (fp32
// smoothed+weighted, 2 threads, against regular stores: 32768 x 2000 0.82-1.01, 65536 x 1000 0.72-0.75, 131072 x
// 500 0.68-0.71, 262144 x 250 0.77-0.84).
// The 16-bit outputs do not stream on AMD Zen 5 (family 1Ah; HalfTypesStream): there the 16-bit kernels, which do
// about as much arithmetic per byte as a copy takes to move it, took 0.73-0.90x the time with regular stores
// (2-core EPYC 9005 VM, model 2, 2 threads, `bench/ab_libs.sh -r 3`, both orders of the two builds: 4096 x 32000
// every fp16 and bf16 variant, 8192 x 50257 and 2048 x 128256 alike), while fp32 kept streaming's gain or lost
// nothing (8192 x 50257 fp32 plain took 1.29x the time with regular stores, 4096 x 32000 0.88-1.04x). A loop of
// ten multiply-adds per pair of vectors between a bf16 load and store shows the same alone (x copy 1.39 streaming,
// 0.96 regular; 1.38 and 1.08 with twelve): a streaming store holds its write-combining buffer until the line
// reaches memory, and where the core is busy computing those buffers run out before the memory does.
bool HalfTypesStream() {
#if HWY_ARCH_X86
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return true;
    const bool amd = ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;  // "AuthenticAMD"
    if (!amd || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return true;
    unsigned family = (eax >> 8) & 0xfu;
    if (family == 0xfu) family += (eax >> 20) & 0xffu;
    return family != 0x1au;
#else
    return true;
#endif
}

std::atomic<uint64_t> g_streaming_output_bytes{uint64_t{64} << 20};
std::atomic<uint64_t> g_streaming_row_bytes{uint64_t{16} << 10};
std::atomic<bool> g_streaming_half_types{HalfTypesStream()};

uint64_t ElementBytes(aclDataType dtype) { return dtype == ACL_FLOAT ? 4 : 2; }

}  // namespace

bool UseStreamingStoresForRowGroups(const GradKernelArgs &args) {
    const uint64_t row_bytes = static_cast<uint64_t>(args.c) * ElementBytes(args.dtype);
    return static_cast<uint64_t>(args.n) * row_bytes >= g_streaming_output_bytes.load(std::memory_order_relaxed);
}

bool UseStreamingStores(const GradKernelArgs &args) {
    const uint64_t row_bytes = static_cast<uint64_t>(args.c) * ElementBytes(args.dtype);
    if (args.dtype != ACL_FLOAT && !g_streaming_half_types.load(std::memory_order_relaxed)) return false;
    return UseStreamingStoresForRowGroups(args) && row_bytes >= g_streaming_row_bytes.load(std::memory_order_relaxed);
}

StreamingThresholds SetStreamingThresholds(StreamingThresholds thresholds) {
    return {g_streaming_output_bytes.exchange(thresholds.output_bytes),
            g_streaming_row_bytes.exchange(thresholds.row_bytes),
            g_streaming_half_types.exchange(thresholds.half_types)};
}

void StoreExactElement(aclDataType dtype, float x, void *out, double a, double b, double weight) {
    StoreFloatAt(static_cast<char *>(out), dtype, ExpDouble(static_cast<double>(x)) * a - b * weight);
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

// A target's registry entry: its kernel, and its vector helpers that the tests hold to the scalar code.
#define OPENACLNN_HWY_INFO(NAME, NS, KERNEL, RANK) \
    GradKernelInfo { NAME, HwySupports, &NS::KERNEL, RANK, &NS::FmaArrays, &NS::ExpDoubleArrays, &NS::Weigh }
#define OPENACLNN_HWY_ENTRY(TARGET, NS, RANK) \
    HwyKernelEntry { HWY_##TARGET, OPENACLNN_HWY_INFO("hwy:" #TARGET, NS, GradKernel, RANK), false }

// Best first. AVX3_BF16 is the AVX3 code with bf16 results rounded by the AVX-512 BF16 instruction (the same bits;
// grad_hwy-inl.h, StoreBf16PairsNative).
const HwyKernelEntry kHwyKernels[] = {
#if HWY_TARGETS & HWY_AVX3
    HwyKernelEntry{HWY_AVX3, OPENACLNN_HWY_INFO("hwy:AVX3_BF16", N_AVX3, GradKernelNativeBf16, kGradIsaAvx512), true},
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
#undef OPENACLNN_HWY_INFO

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
