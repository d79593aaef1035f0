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

double LoadFloat(const Operand &operand, aclDataType dtype, int64_t index) {
    return LoadFloatAt(operand.Element(index, operand.stride0), dtype);
}

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

}  // namespace

void ComputeGradRows(const CrossEntropyGradProblem &p, GradRowCoefficients *rows, TaskContext &context) {
    ClearUpperVectorState();  // whatever ran last on this thread: this pass is baseline code (vector_state.h)
    const Operand &grad_loss = p.inputs[kGradLoss];
    const Operand &target = p.inputs[kTarget];
    const Operand &weight = p.inputs[kWeight];
    const Operand &grad_zloss = p.inputs[kGradZloss];
    const Operand &lse = p.inputs[kLseForZloss];
    const bool per_row = p.reduction == Reduction::kNone;
    const bool zloss = p.zloss_scale != 0.0;
    const auto class_weight = [&](int64_t j) {
        return weight.present ? LoadFloat(weight, ACL_FLOAT, j) : 1.0;
    };

    // Pass 1: classify rows, and the denominators in row order.
    double weight_total = 0.0;  // D
    int64_t unmasked = 0;       // K
    int64_t bad_rows = 0;
    for (int64_t i = 0; i < p.n; ++i) {
        const int64_t t = LoadIndexAt(target.Element(i, target.stride0), p.target_dtype);
        GradRowCoefficients &row = rows[i];
        row = GradRowCoefficients{0.0, 0.0, 0.0, -1, kRowZero, 0};
        if (t == p.ignore_index) continue;
        if (t < 0 || t >= p.c) {
            const double nan = std::numeric_limits<double>::quiet_NaN();
            row = GradRowCoefficients{nan, nan, 0.0, -1, kRowCompute, 0};
            if (bad_rows++ == 0) {
                context.RecordError(
                    ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
                    Format("aclnnCrossEntropyLossGrad: target[%lld] is %lld, expected a class index in [0, %lld) or "
                           "ignoreIndex (%lld); that row of out is NaN",
                           static_cast<long long>(i), static_cast<long long>(t), static_cast<long long>(p.c),
                           static_cast<long long>(p.ignore_index)));
            }
            continue;
        }
        row.col = t;
        row.kind = kRowCompute;
        weight_total += class_weight(t);
        ++unmasked;
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
        const double g = LoadFloat(grad_loss, p.dtype, k);
        t.nll_factor = g * (1.0 - smoothing);
        t.smooth = ce_vanishes ? 0.0 : g * smoothing / static_cast<double>(p.c) * nll_scale;
        t.smooth_sum = t.smooth * weights.sum;
        t.flags = GradRowFlags(t.smooth, weights.max_abs);
        if (zloss) t.g_plus_gz = g + (grad_zloss.present ? LoadFloat(grad_zloss, p.dtype, k) : 0.0);
        return t;
    };
    const GradTerms shared = per_row ? GradTerms{} : terms_of(0);

    // Pass 2: the coefficients of each unmasked, valid row.
    for (int64_t i = 0; i < p.n; ++i) {
        GradRowCoefficients &row = rows[i];
        if (row.kind != kRowCompute || row.col < 0) continue;
        const GradTerms t = per_row ? terms_of(i) : shared;
        const double nll = ce_vanishes ? 0.0 : t.nll_factor * class_weight(row.col) * nll_scale;
        double lse_grad = 0.0;
        if (zloss) lse_grad = 2.0 * p.zloss_scale * LoadFloat(lse, p.dtype, i) * t.g_plus_gz * zloss_scale;
        row.a = nll + t.smooth_sum + lse_grad;
        row.b = t.smooth;
        row.g = nll;
        row.flags = t.flags;
        if (row.a == 0.0 && row.b == 0.0 && row.g == 0.0) row.kind = kRowZero;
    }
}

}  // namespace openaclnn::cross_entropy
