// Compiles grad_hwy-inl.h once per Highway target and lists the results for the registry.
//
// Targets: AVX-512 (AVX3), AVX2, SSE4 and EMU128 (portable scalar-like code) on x86; NEON/SVE/... elsewhere, as
// Highway attains them. All are compiled whatever the build's -march, so that every target this CPU can run is
// testable on it (HWY_COMPILE_ALL_ATTAINABLE). SSSE3 and AVX3_DL add nothing here over SSE4 and AVX3, nor SVE_256
// and SVE2_128 (SVE and SVE2 at one fixed vector length) over the length-agnostic SVE and SVE2 kernels.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL | HWY_SVE_256 | HWY_SVE2_128)
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
#include <cstdio>
#include <vector>

#include "common/exp_double.h"
#include "common/float_convert.h"
#include "ops/common/element_access.h"
#include "kernels/grad_hwy_shared.h"
#include "runtime/runtime.h"

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
// For the 16-bit outputs neither kind is right everywhere: their kernels do about as much arithmetic per byte as a
// copy takes to move it, and which store kind wins depends on whether memory or the core limits them. On the same
// 2-core AMD Zen 5 VM (family 1Ah model 2, 2 threads), streaming won when memory was slow (the copy at 29-38 GB/s:
// 4096 x 32000 fp16 0.89-0.96 and bf16 0.80-0.94 the time of regular stores) and lost when it was fast (the copy at
// 50-65 GB/s: regular stores took 0.73-0.90x the time of streaming ones on every fp16 and bf16 variant of 4096 x
// 32000, 8192 x 50257 and 2048 x 128256, `bench/ab_libs.sh -r 3` in both orders). A loop of ten multiply-adds per
// pair of vectors between a bf16 load and store shows the second case alone (x copy 1.39 streaming, 0.96
// regular): a streaming store holds its write-combining buffer until the line reaches memory, and where the core
// is busy computing those buffers run out before the memory does. So by default each large 16-bit call's kind is
// measured (StoreKinds::kMeasured, StoreKindChooser). fp32 is measured too, from the output threshold on: on the Zen 4
// machine streaming stores won by far (regular ones took 1.3-1.5x the time, the figures above), while on the Zen 5
// machine regular stores took 0.90-1.0x its time where memory was fast (8192 x 50257 plain 1.0x, smoothed+weighted
// 0.90x; 2048 x 128256 0.75-1.0x) and 0.82-0.94x on another day (the copy at 26-55 GB/s: 4096 x 32000, 8192 x
// 50257 and 2048 x 128256 plain and smoothed+weighted, `bench/ab_libs.sh -r 4`, paired medians). Each shape and
// variant has a chooser of its own (below).
std::atomic<uint64_t> g_streaming_output_bytes{uint64_t{64} << 20};
std::atomic<uint64_t> g_streaming_row_bytes{uint64_t{16} << 10};
std::atomic<StoreKinds> g_store_kinds{StoreKinds::kMeasured};
// The choosers, one per shape and variant (StoreKindChooserFor): fp32 and 16-bit calls, and the variants, win with
// different kinds (65536 x 1000 fp32, every store regular against the streaming build, ab_libs, 4 rounds: plain 1.04x,
// weighted 0.91x, smoothed+weighted 1.32x, z-loss 1.09x the time).
struct StoreKindSlot {
    std::atomic<uint64_t> key{0};       // the key it serves (StoreKindKey, never 0); 0: free
    std::atomic<uint64_t> last_use{0};  // g_store_kind_uses when it was last looked up
    StoreKindChooser chooser;
};
StoreKindSlot g_store_kind_slots[kStoreKindChoosers];
std::atomic<uint64_t> g_store_kind_uses{0};

uint64_t ElementBytes(aclDataType dtype) { return dtype == ACL_FLOAT ? 4 : 2; }

uint64_t RowBytes(const GradKernelArgs &args) { return static_cast<uint64_t>(args.c) * ElementBytes(args.dtype); }

// Whether the call reaches both thresholds (its store kind aside).
bool ReachesStreamingThresholds(const GradKernelArgs &args) {
    return ReachesOutputThreshold(args) && RowBytes(args) >= g_streaming_row_bytes.load(std::memory_order_relaxed);
}

// Whether the call's store kind is StoreKinds' to decide (measured, where so): outputs that reach both thresholds,
// and fp32 ones from the output threshold on.
bool DecidedByStoreKinds(const GradKernelArgs &args) {
    return ReachesStreamingThresholds(args) || (args.dtype == ACL_FLOAT && ReachesOutputThreshold(args));
}

// Whether the call's kind (StoreKinds; where measured, the kind this call runs) is streaming.
bool KindStreams(const GradKernelArgs &args) {
    const StoreKinds mode = g_store_kinds.load(std::memory_order_relaxed);
    return mode == StoreKinds::kStreaming || (mode == StoreKinds::kMeasured && args.stream_measured);
}

}  // namespace

bool ReachesOutputThreshold(const GradKernelArgs &args) {
    return static_cast<uint64_t>(args.n) * RowBytes(args) >= g_streaming_output_bytes.load(std::memory_order_relaxed);
}

bool UseStreamingStores(const GradKernelArgs &args) { return ReachesStreamingThresholds(args) && KindStreams(args); }

bool UseStreamingStoresForRowGroups(const GradKernelArgs &args) {
    return ReachesOutputThreshold(args) && KindStreams(args);
}

StreamingThresholds SetStreamingThresholds(StreamingThresholds thresholds) {
    return {g_streaming_output_bytes.exchange(thresholds.output_bytes),
            g_streaming_row_bytes.exchange(thresholds.row_bytes), g_store_kinds.exchange(thresholds.store_kinds)};
}

namespace {

// The chooser of a key (StoreKindChooserFor).
StoreKindChooser &ChooserOfKey(uint64_t key) {
    const uint64_t use = g_store_kind_uses.fetch_add(1, std::memory_order_relaxed) + 1;
    for (;;) {
        StoreKindSlot *oldest = &g_store_kind_slots[0];
        for (StoreKindSlot &slot : g_store_kind_slots) {
            if (slot.key.load(std::memory_order_relaxed) == key) {
                slot.last_use.store(use, std::memory_order_relaxed);
                return slot.chooser;
            }
            if (slot.last_use.load(std::memory_order_relaxed) < oldest->last_use.load(std::memory_order_relaxed)) {
                oldest = &slot;
            }
        }
        // None serves the key: it takes the least recently used (free ones first: never used), unless another call
        // took that one meanwhile.
        uint64_t expected = oldest->key.load(std::memory_order_relaxed);
        if (oldest->key.compare_exchange_strong(expected, key, std::memory_order_relaxed)) {
            oldest->last_use.store(use, std::memory_order_relaxed);
            oldest->chooser.Reset();
            return oldest->chooser;
        }
    }
}

}  // namespace

StoreKindChooser &StoreKindChooserFor(const GradKernelArgs &args) { return ChooserOfKey(StoreKindKey(args)); }

void StoreKindChooser::Reset() {
    calls_.store(0, std::memory_order_relaxed);
    stream_.store(true, std::memory_order_relaxed);
    key_.store(0, std::memory_order_relaxed);
    last_cost_.store(0.0, std::memory_order_relaxed);
    previous_cost_.store(0.0, std::memory_order_relaxed);
    trial_wins_.store(0, std::memory_order_relaxed);
}

StoreKindChooser::Trial StoreKindChooser::Choose() {
    const uint64_t phase = calls_.fetch_add(1, std::memory_order_relaxed) % kExploreEvery;
    const bool explore = phase >= 1 && phase <= kTrialCalls;
    const bool current = stream_.load(std::memory_order_relaxed);
    return Trial{explore ? !current : current, explore};
}

bool StoreKindChooser::Record(const Trial &trial, uint64_t key, double seconds_per_byte) {
    const bool same_shape = key == key_.load(std::memory_order_relaxed);
    if (!trial.explore) {
        previous_cost_.store(same_shape ? last_cost_.load(std::memory_order_relaxed) : 0.0, std::memory_order_relaxed);
        last_cost_.store(seconds_per_byte, std::memory_order_relaxed);
        key_.store(key, std::memory_order_relaxed);
        trial_wins_.store(0, std::memory_order_relaxed);
        return false;
    }
    const double last = last_cost_.load(std::memory_order_relaxed);
    const double previous = previous_cost_.load(std::memory_order_relaxed);
    const double best = previous > 0.0 && previous < last ? previous : last;
    if (!same_shape || !(best > 0.0) || !(seconds_per_byte < best * (1.0 - kMargin))) {
        trial_wins_.store(0, std::memory_order_relaxed);
        return false;
    }
    if (trial_wins_.fetch_add(1, std::memory_order_relaxed) + 1 < kTrialCalls) return false;
    // The trial's kind is current; its samples start with this call.
    stream_.store(trial.stream, std::memory_order_relaxed);
    previous_cost_.store(0.0, std::memory_order_relaxed);
    last_cost_.store(seconds_per_byte, std::memory_order_relaxed);
    trial_wins_.store(0, std::memory_order_relaxed);
    return true;
}

namespace {

// A 64-bit mixing function (the finaliser of SplitMix64): every input bit moves about half the output bits.
uint64_t Mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

}  // namespace

uint64_t StoreKindKey(const GradKernelArgs &args) {
    // (A collision only compares two shapes' times once, or shares a chooser.)
    const uint64_t variant = (args.weight != nullptr ? 1u : 0u) | (args.label_smoothing ? 2u : 0u) |
                             (args.z_loss ? 4u : 0u) | static_cast<uint64_t>(args.dtype) << 3;
    const uint64_t key = Mix(Mix(Mix(static_cast<uint64_t>(args.n)) ^ static_cast<uint64_t>(args.c)) ^ variant);
    return key != 0 ? key : 1;  // (0 marks a free chooser)
}

StoreKindCall BeginStoreKindCall(const GradKernelArgs &args) {
    if (g_store_kinds.load(std::memory_order_relaxed) != StoreKinds::kMeasured || !DecidedByStoreKinds(args)) {
        return StoreKindCall{false, {false, false}, nullptr, 0};
    }
    const uint64_t key = StoreKindKey(args);
    StoreKindChooser &chooser = ChooserOfKey(key);
    return StoreKindCall{true, chooser.Choose(), &chooser, key};
}

void EndStoreKindCall(const StoreKindCall &call, const GradKernelArgs &args, double seconds) {
    if (!call.measured) return;
    const double seconds_per_byte = seconds / (static_cast<double>(args.n) * static_cast<double>(RowBytes(args)));
    const bool switched = call.chooser->Record(call.trial, call.key, seconds_per_byte);
    if (LogLevel() < (switched ? 1 : 2)) return;
    const char *kind = call.trial.stream ? "streaming" : "regular";
    char call_name[96];
    std::snprintf(call_name, sizeof(call_name), "%s N=%lld C=%lld%s%s%s", DataTypeName(args.dtype),
                  static_cast<long long>(args.n), static_cast<long long>(args.c), args.weight ? " weighted" : "",
                  args.label_smoothing ? " smoothed" : "", args.z_loss ? " z-loss" : "");
    if (switched) {
        Log(1, "cross-entropy grad: %s: stores now %s (its trial: %.3f ns per output byte)", call_name, kind,
            1e9 * seconds_per_byte);
    } else {
        Log(2, "cross-entropy grad: %s: stores %s%s, %.3f ns per output byte", call_name, kind,
            call.trial.explore ? " (trial)" : "", 1e9 * seconds_per_byte);
    }
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
#define OPENACLNN_HWY_INFO(NAME, NS, KERNEL, RANK)                                                                   \
    GradKernelInfo {                                                                                                 \
        NAME, HwySupports, &NS::KERNEL, RANK, &NS::FmaArrays, &NS::ExpDoubleArrays, &NS::Weigh, &NS::ScaledExpArrays \
    }
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
