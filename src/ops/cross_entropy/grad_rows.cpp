// Per-row coefficients of the cross-entropy gradient, a literal reading of the formula.
//
// With g_i the incoming gradient (gradLoss[i] for none, the scalar otherwise), m_i the ignore mask, t_i the
// target, w the class weights (ones when absent), ls the label smoothing, D = sum_i m_i w[t_i] (mean only) and
// K = sum_i m_i (the z-loss mean's count):
//   nll_i    = g_i (1 - ls) w[t_i] m_i / D          (no / D for sum and none)
//   smooth_i = g_i ls / C m_i / D                  (idem)
//   lse_i'   = 2 scale lse_i m_i (g_i + gz_i) / K   (no / K for sum and none; only when scale != 0)
//   out_ij   = p_ij (nll_i + smooth_i sum_k w_k + lse_i') - smooth_i w_j - [j == t_i] nll_i
// so a_i = nll_i + smooth_i W + lse_i', b_i = smooth_i, g_i' = nll_i. D == 0 (all rows ignored, or zero weights)
// gives zeros, as PyTorch does; K == 0 likewise. Everything here is in double: O(N + C) work.
#include "grad_rows.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/common/element_access.h"
#include "ops/common/vector_state.h"

namespace openaclnn::cross_entropy {
namespace {

// Sum and largest magnitude of the FLOAT weight vector.
struct WeightSummary {
    double sum;      // W = sum_j w_j
    double max_abs;  // max_j |w_j|; +inf where a weight is not finite or the maximum is not needed (no flag then)
};

// W in double, in one fixed order whatever the threads or the CPU: kParts partial sums (j mod kParts), then combined
// as a fixed tree (part k with part k + width, for width = kParts / 2, ..., 1). The independent sums let the additions
// overlap: each sum is one chain of dependent additions, so with 8 of them the pass waited on the adder's latency (3
// cycles per 8 weights; 16 halve that). A single running sum was most of the call for one row of 152064 classes.
// The largest |w_j| (kMax: only fp16 rows use the flag it sets, GradRowFlags) comes from the same pass, in kParts
// running maxima as well; without it the pass is pure additions, all kept in registers. Every weight is finite
// exactly when W is: a sum of at most 2^62 finite floats cannot overflow a double, and an infinite or NaN weight
// makes it infinite or NaN (so a maximum that missed a NaN does no harm). The weights lie `step` bytes apart, a
// compile-time 4 for the usual contiguous layout, and `omp simd` has the compiler run a block's parts as vector lanes
// (each lane its own sum, so no sum is reordered). With std::fmax per element, a separate finiteness test and a
// run-time stride, this pass took 3 ns per class: 1 x 152064 smoothed+weighted took 0.33 ms against 0.05 ms without
// smoothing.
template <bool kMax, typename Step>
WeightSummary SummarizeWeightsAt(const char *base, int64_t c, Step step) {
    constexpr int kParts = 16;
    double part[kParts] = {};
    float max_part[kParts] = {};
    const auto add = [&](int k, int64_t j) {
        float w;
        std::memcpy(&w, base + j * step, sizeof(w));  // the data may be unaligned
        part[k] += static_cast<double>(w);
        if constexpr (kMax) max_part[k] = std::max(max_part[k], std::fabs(w));
    };
    int64_t j = 0;
    for (; j + kParts <= c; j += kParts) {
#pragma omp simd
        for (int k = 0; k < kParts; ++k) add(k, j + k);
    }
    for (int k = 0; j < c; ++j, ++k) add(k, j);
    for (int width = kParts / 2; width >= 1; width /= 2) {
        for (int k = 0; k < width; ++k) part[k] += part[k + width];
    }
    const double sum = part[0];
    float max = 0.0f;
    for (float m : max_part) max = std::max(max, m);
    const bool use_max = kMax && std::isfinite(sum);
    return WeightSummary{sum, use_max ? static_cast<double>(max) : std::numeric_limits<double>::infinity()};
}

template <bool kMax>
WeightSummary SummarizeWeightsOf(const Operand &weight, int64_t c) {
    const char *base = weight.Element(0, weight.stride0);
    if (weight.stride0 == 1) {
        return SummarizeWeightsAt<kMax>(base, c, std::integral_constant<int64_t, sizeof(float)>());
    }
    return SummarizeWeightsAt<kMax>(base, c, weight.stride0 * static_cast<int64_t>(sizeof(float)));
}

WeightSummary SummarizeWeights(const Operand &weight, int64_t c, aclDataType dtype) {
    return dtype == ACL_FLOAT16 ? SummarizeWeightsOf<true>(weight, c) : SummarizeWeightsOf<false>(weight, c);
}

// Reading one operand along dimension 0, its base and step hoisted out of the row loops (the rows written there may
// alias nothing the compiler can prove, so it would reload the operand's fields every row).
// The byte offset is formed as Operand::Element forms it, (index * stride) * size, for the elements read only: a
// dimension of one element may have any stride, and stride * size alone could overflow (found by fuzz_grad).
struct RowAccess {
    const char *base = nullptr;
    int64_t stride = 0;  // elements between consecutive rows' elements
    int64_t size = 0;    // bytes per element

    explicit RowAccess(const Operand &operand)
        : base(operand.present ? operand.Element(0, operand.stride0) : nullptr),
          stride(operand.stride0),
          size(operand.element_size) {}
    const char *At(int64_t index) const { return base + index * stride * size; }
};

}  // namespace

void ComputeGradRows(const CrossEntropyGradProblem &p, GradRowCoefficients *rows, TaskContext &context) {
    ClearUpperVectorState();  // whatever ran last on this thread: this pass is baseline code (vector_state.h)
    const Operand &weight = p.inputs[kWeight];
    const RowAccess targets(p.inputs[kTarget]);
    const RowAccess weights_at(weight);
    const RowAccess grad_losses(p.inputs[kGradLoss]);
    const RowAccess grad_zlosses(p.inputs[kGradZloss]);
    const RowAccess lses(p.inputs[kLseForZloss]);
    const aclDataType target_dtype = p.target_dtype;
    const aclDataType dtype = p.dtype;
    const int64_t n = p.n;
    const int64_t c = p.c;
    const int64_t ignore_index = p.ignore_index;
    const bool per_row = p.reduction == Reduction::kNone;
    const bool zloss = p.zloss_scale != 0.0;
    const auto class_weight = [&](int64_t j) {
        return weights_at.base != nullptr ? LoadFloatAt(weights_at.At(j), ACL_FLOAT) : 1.0;
    };

    // Pass 1: classify rows, and the denominators in row order. (The first bad target is reported after the loop,
    // so that no call inside it keeps the sums in memory.)
    double weight_total = 0.0;  // D
    int64_t unmasked = 0;       // K
    int64_t bad_rows = 0;
    int64_t first_bad_row = 0;
    int64_t first_bad_target = 0;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (int64_t i = 0; i < n; ++i) {
        const int64_t t = LoadIndexAt(targets.At(i), target_dtype);
        GradRowCoefficients &row = rows[i];
        if (t == ignore_index) {
            row = GradRowCoefficients{0.0, 0.0, 0.0, -1, kRowZero, 0};
        } else if (t < 0 || t >= c) {
            row = GradRowCoefficients{nan, nan, 0.0, -1, kRowCompute, 0};
            if (bad_rows++ == 0) {
                first_bad_row = i;
                first_bad_target = t;
            }
        } else {
            row = GradRowCoefficients{0.0, 0.0, 0.0, t, kRowCompute, 0};
            weight_total += class_weight(t);
            ++unmasked;
        }
    }
    if (bad_rows != 0) {
        context.RecordError(
            ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
            Format("aclnnCrossEntropyLossGrad: target[%lld] is %lld, expected a class index in [0, %lld) or "
                   "ignoreIndex (%lld); that row of out is NaN",
                   static_cast<long long>(first_bad_row), static_cast<long long>(first_bad_target),
                   static_cast<long long>(c), static_cast<long long>(ignore_index)));
    }

    const bool mean = p.reduction == Reduction::kMean;
    // Without label smoothing b is 0: W is not used, and the guard that kRowSmallBias lets a kernel skip never flags
    // a lane of a row with b = 0, so the flag changes nothing there.
    WeightSummary weights{static_cast<double>(p.c), 1.0};
    if (weight.present && p.label_smoothing != 0.0) weights = SummarizeWeights(weight, p.c, p.dtype);
    // A mean over zero total weight drops the cross-entropy terms altogether (DESIGN.md: zeros), even for an
    // infinite or NaN gradLoss, which a factor of 0 would turn into NaN.
    const bool ce_vanishes = mean && weight_total == 0.0;
    const double nll_scale = mean && !ce_vanishes ? 1.0 / weight_total : 1.0;
    const double zloss_scale = mean ? (unmasked != 0 ? 1.0 / static_cast<double>(unmasked) : 0.0) : 1.0;
    const double smoothing = p.label_smoothing;

    // The terms that depend on gradLoss (and gradZloss) alone: once per row for reduction none, once per call
    // otherwise (one scalar each). The expressions, and so the bits, are the same either way.
    struct GradTerms {
        double nll_factor = 0.0;  // g (1 - smoothing)
        double smooth = 0.0;      // g smoothing / C / D
        double smooth_sum = 0.0;  // smooth W
        double g_plus_gz = 0.0;   // g + gz, for the z-loss
        int32_t flags = 0;
    };
    const auto terms_of = [&](int64_t k) {
        GradTerms t;
        const double g = LoadFloatAt(grad_losses.At(k), dtype);
        t.nll_factor = g * (1.0 - smoothing);
        t.smooth = ce_vanishes ? 0.0 : g * smoothing / static_cast<double>(p.c) * nll_scale;
        t.smooth_sum = t.smooth * weights.sum;
        t.flags = GradRowFlags(t.smooth, weights.max_abs);
        if (zloss) t.g_plus_gz = g + (grad_zlosses.base != nullptr ? LoadFloatAt(grad_zlosses.At(k), dtype) : 0.0);
        return t;
    };
    const GradTerms shared = per_row ? GradTerms{} : terms_of(0);

    // Pass 2: the coefficients of each unmasked, valid row.
    const double zloss_factor = 2.0 * p.zloss_scale;
    for (int64_t i = 0; i < n; ++i) {
        GradRowCoefficients &row = rows[i];
        if (row.kind != kRowCompute || row.col < 0) continue;
        const GradTerms t = per_row ? terms_of(i) : shared;
        const double nll = ce_vanishes ? 0.0 : t.nll_factor * class_weight(row.col) * nll_scale;
        double lse_grad = 0.0;
        if (zloss) lse_grad = zloss_factor * LoadFloatAt(lses.At(i), dtype) * t.g_plus_gz * zloss_scale;
        row.a = nll + t.smooth_sum + lse_grad;
        row.b = t.smooth;
        row.g = nll;
        row.flags = t.flags;
        if (row.a == 0.0 && row.b == 0.0 && row.g == 0.0) row.kind = kRowZero;
    }
}

}  // namespace openaclnn::cross_entropy
