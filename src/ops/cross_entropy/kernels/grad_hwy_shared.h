// What the per-target SIMD bodies (grad_hwy-inl.h) share, compiled once in grad_hwy.cpp.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_HWY_SHARED_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_HWY_SHARED_H_

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/cross_entropy/kernels/grad_kernel.h"

namespace openaclnn::cross_entropy {

// Whether the kernel writes with streaming (non-temporal) stores: when the output is larger than the last-level
// cache could keep anyway and its rows are long, and there as StreamingThresholds::store_kinds says. The choice
// changes only speed, never a value.
bool UseStreamingStores(const GradKernelArgs &args);

// The same for fp32 rows with weights done in groups (RunWeightedRows) and for the packed rows run as one
// (FlatRows): from the output threshold on, whatever the rows' length (the groups' peels and tails costing less than
// the single rows' do), as StreamingThresholds::store_kinds says.
bool UseStreamingStoresForRowGroups(const GradKernelArgs &args);

// Whether the whole output reaches the output threshold (StreamingThresholds::output_bytes).
bool ReachesOutputThreshold(const GradKernelArgs &args);

// How large outputs are stored (those that reach both thresholds, and fp32 ones from the output threshold on): with
// regular stores, with streaming ones, or with the kind that measures faster on the machine at the time (the default;
// StoreKindChooser, one per shape and variant).
enum class StoreKinds { kRegular, kStreaming, kMeasured };

// From which sizes streaming stores are used: the whole output's bytes and one row's (both must be reached, except by
// fp32's groups and runs of rows, UseStreamingStoresForRowGroups); and how those outputs are stored.
struct StreamingThresholds {
    uint64_t output_bytes;
    uint64_t row_bytes;
    StoreKinds store_kinds;
};

// Sets the thresholds ({0, 0, StoreKinds::kStreaming}: always stream; {UINT64_MAX, ...}: never); returns the old
// ones. For tests and measurements.
StreamingThresholds SetStreamingThresholds(StreamingThresholds thresholds);

// The store kind of the calls whose kind is measured (see grad_hwy.cpp for why it is not fixed). Each call
// runs the current kind, except kTrialCalls calls in a row every kExploreEvery (the second and third, then the 34th
// and 35th, ...), which run the other kind on trial. The other kind becomes current where each of its trial calls took
// less time per byte, by more than kMargin, than the faster of the last two calls of the current kind before them,
// all of the same shape: one slow call on either side cannot switch it. Calls of another shape start the comparison
// afresh. Safe to use from concurrent calls (a lost update at worst delays or skips a switch).
class StoreKindChooser {
public:
    static constexpr uint64_t kExploreEvery = 32;
    static constexpr uint64_t kTrialCalls = 2;
    static constexpr double kMargin = 0.02;
    struct Trial {
        bool stream;   // the kind this call runs
        bool explore;  // whether it is the other kind, on trial
    };
    Trial Choose();
    // key: the call's shape (StoreKindKey); seconds_per_byte: its time over its output's bytes. Returns whether the
    // trial's kind became current.
    bool Record(const Trial &trial, uint64_t key, double seconds_per_byte);
    bool Streaming() const { return stream_.load(std::memory_order_relaxed); }
    // Back to its state when made (streaming current, no samples).
    void Reset();

private:
    std::atomic<uint64_t> calls_{0};
    std::atomic<bool> stream_{true};  // the kind that measured faster on the reference machines (grad_hwy.cpp)
    std::atomic<uint64_t> key_{0};    // the shape of the samples below
    std::atomic<double> last_cost_{0.0};      // the current kind's last call (0: none)
    std::atomic<double> previous_cost_{0.0};  // and the one before it
    std::atomic<uint64_t> trial_wins_{0};     // trial calls in a row that beat them
};

// A call's shape and variant for StoreKindChooser: N, C, the dtype, whether it has weights, label smoothing and
// z-loss.
uint64_t StoreKindKey(const GradKernelArgs &args);

// The chooser of a call: one per key (StoreKindKey), kStoreKindChoosers of them. A key that has none takes a free
// one, or else the least recently used, which starts afresh (Reset). Safe to call from concurrent calls (two new keys
// at once may share one chooser for a call).
constexpr size_t kStoreKindChoosers = 16;
StoreKindChooser &StoreKindChooserFor(const GradKernelArgs &args);

// For RunGradPlan: whether the call's store kind is measured, and the kind it runs (BeginStoreKindCall,
// before the kernel: set args.stream_measured = trial.stream); then its time (EndStoreKindCall).
struct StoreKindCall {
    bool measured;
    StoreKindChooser::Trial trial;
    StoreKindChooser *chooser;  // the call's (StoreKindChooserFor), where measured
    uint64_t key;               // and its key (StoreKindKey)
};
StoreKindCall BeginStoreKindCall(const GradKernelArgs &args);
void EndStoreKindCall(const StoreKindCall &call, const GradKernelArgs &args, double seconds);

// The fast path's window on 16-bit inputs (FastWindow::input_limit, grad_hwy-inl.h), for a row whose a has the
// exponent e in [-124, 125] and an input of dtype (fp16 or bf16): the storage bits, read as an int16_t, of the
// negative input -X of greatest magnitude such that every x in [-X, -0] gets k = round(x * log2(e)) >= -124 - e, with
// k formed as the kernels form it (the exact product of x and the float log2(e), rounded once). Every such x also has
// k <= 0 <= 125 - e, so exp(x) * a stays a normal float: k is within the row's fast window. A table computed at
// compile time: the kernels read it once per row.
struct FastInputLimits {
    static constexpr int kLowest = -124, kHighest = 125;
    int16_t bf16[kHighest - kLowest + 1];
    int16_t fp16[kHighest - kLowest + 1];
};

namespace detail {

// 2^n, exact.
constexpr double Pow2(int n) {
    double v = 1.0;
    for (; n > 0; --n) v *= 2.0;
    for (; n < 0; ++n) v *= 0.5;
    return v;
}

// The value of a 16-bit float's magnitude bits (below infinity): `mantissa_bits` fraction bits, exponent bias `bias`.
constexpr double MagnitudeValue(uint16_t bits, int mantissa_bits, int bias) {
    const int exponent = bits >> mantissa_bits;
    const int fraction = bits & ((1 << mantissa_bits) - 1);
    if (exponent == 0) return fraction * Pow2(1 - bias - mantissa_bits);  // subnormal
    return ((1 << mantissa_bits) + fraction) * Pow2(exponent - bias - mantissa_bits);
}

// The greatest magnitude below `infinity` whose negative x has x * log2e > bottom - 0.5 (then its rounding is >=
// bottom; the product of a 16-bit value and a float is exact in double), as the bits of -x read as int16_t.
// Magnitudes grow with their bits: bisection.
constexpr int16_t GreatestInWindow(int bottom, uint16_t infinity, int mantissa_bits, int bias) {
    const double log2e = static_cast<double>(1.44269504088896341f);  // as ExpShifted rounds it to float
    int low = 0, high = infinity;                                    // low qualifies (-0 does), high does not
    while (high - low > 1) {
        const int mid = (low + high) / 2;
        if (-MagnitudeValue(static_cast<uint16_t>(mid), mantissa_bits, bias) * log2e > bottom - 0.5) {
            low = mid;
        } else {
            high = mid;
        }
    }
    return static_cast<int16_t>(low - 0x8000);  // the bits 0x8000 | low as int16_t
}

constexpr FastInputLimits MakeFastInputLimits() {
    FastInputLimits limits{};
    for (int e = FastInputLimits::kLowest; e <= FastInputLimits::kHighest; ++e) {
        limits.bf16[e - FastInputLimits::kLowest] = GreatestInWindow(-124 - e, 0x7f80, 7, 127);
        limits.fp16[e - FastInputLimits::kLowest] = GreatestInWindow(-124 - e, 0x7c00, 10, 15);
    }
    return limits;
}

}  // namespace detail

inline constexpr FastInputLimits kFastInputLimits = detail::MakeFastInputLimits();

// exponent in [FastInputLimits::kLowest, kHighest]; dtype ACL_BF16 or ACL_FLOAT16.
inline int16_t FastInputLimit(aclDataType dtype, int exponent) {
    const int index = exponent - FastInputLimits::kLowest;
    return dtype == ACL_BF16 ? kFastInputLimits.bf16[index] : kFastInputLimits.fp16[index];
}

// Whether a row's coefficients are outside what the vector path's fp32 arithmetic represents exactly enough: |a|
// nonzero and finite but outside [2^-125, 2^76], or |b| outside [2^-125, 2^126] (a gradLoss near fp32's smallest or
// beyond 1e22, a total weight near fp32's limits). As floats they would be subnormal, zero or infinite, or exp(r) * a
// could leave the normal range before its scaling by 2^k. And the vector path clamps x to [-172, 176] before its
// exp, where exp(-172) * |a| < 2^-172 is zero in every output format only for |a| <= 2^76 (with |a| = 2^100, an
// input of -180 gave 2^-148 instead of 0). Such rows are computed element by element in double (StoreExactRow).
inline bool RowNeedsDouble(const GradRowCoefficients &row) {
    const auto outside = [](double v, double top) {
        const double m = std::fabs(v);
        // The usual case first, in two comparisons (NaN goes on): with this order, 16384 x 10 smoothed+weighted
        // took 0.95x the time (fp32 and bf16, ab_libs 9 rounds, with GradRowsPacked's weight run built without a
        // division per element); the test ran once per row there, and was 6% of the op's perf samples.
        if (m >= 0x1p-125 && m <= top) return false;
        return m != 0.0 && m <= std::numeric_limits<double>::max();  // neither 0 nor infinite nor NaN
    };
    return outside(row.a, 0x1p76) || outside(row.b, 0x1p126);
}

// out[j] = round(exp(in[j]) * a - b * w[j]) for j in [0, count), each in double as StoreExactElement; in and out
// are of dtype and may be the same; w is nullptr for weights of one.
void StoreExactRow(aclDataType dtype, const void *in, void *out, size_t count, const GradRowCoefficients &row,
                   const float *w);

// One element computed in double and rounded once to dtype: *out = round(exp(x) * a - b * weight) (no g).
void StoreExactElement(aclDataType dtype, float x, void *out, double a, double b, double weight);

}  // namespace openaclnn::cross_entropy

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_HWY_SHARED_H_
