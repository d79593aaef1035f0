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
// gives zeros, as PyTorch does; K == 0 likewise. Everything here is in double: O(N + C) work. D is summed per chunk
// of rows, in row order, and the chunks' sums in chunk order (GradRowsBuilder, grad_rows.h).
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

// The pass over the weights for slices [first_slice, first_slice + slices) (kWeightSumParts, grad_kernel.h): W's
// parts of those slices (where part is not null), each in increasing j, and the traits of their weights. Contiguous
// weights take the kernel's vector code (GradKernelInfo::weigh), the same sums and traits; this is the code for
// strided ones and for the reference kernel. Every weight is finite exactly when W is: a sum of at most 2^62 finite
// floats cannot overflow a double, and an infinite or NaN weight makes it infinite or NaN. The weights lie `step`
// bytes apart.
GradWeightTraits WeighAt(const char *base, int64_t c, int64_t step, int first_slice, int slices, double *part) {
    GradWeightTraits traits;
    const int first = first_slice * kWeightSliceParts;
    const int end = (first_slice + slices) * kWeightSliceParts;
    for (int k = first; k < end; ++k) {
        for (int64_t j = k; j < c; j += kWeightSumParts) {
            float w;
            std::memcpy(&w, base + j * step, sizeof(w));  // the data may be unaligned
            if (part != nullptr) part[k] += static_cast<double>(w);
            const float abs = std::fabs(w);
            traits.finite = traits.finite && std::isfinite(w);
            traits.positive = traits.positive && std::isfinite(w) && !std::signbit(w);
            if (abs != 0.0f) traits.min_nonzero = std::min(traits.min_nonzero, abs);
            traits.max = std::max(traits.max, abs);
        }
    }
    return traits;
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

GradRowsBuilder::GradRowsBuilder(const CrossEntropyGradProblem &problem, GradRowCoefficients *rows)
    : p_(problem), rows_(rows) {
    const int64_t n = problem.n;
    chunk_rows_ = std::max(kMinChunkRows, (n + kMaxChunks - 1) / kMaxChunks);
    chunks_ = (n + chunk_rows_ - 1) / chunk_rows_;
}

void GradRowsBuilder::Collect(int64_t k) {
    ClearUpperVectorState();  // whatever ran last on this thread: this pass is baseline code (vector_state.h)
    const RowAccess targets(p_.inputs[kTarget]);
    const RowAccess weights(p_.inputs[kWeight]);
    const aclDataType target_dtype = p_.target_dtype;
    const int64_t c = p_.c;
    const int64_t ignore_index = p_.ignore_index;
    const int64_t begin = k * chunk_rows_;
    const int64_t end = std::min(p_.n, begin + chunk_rows_);
    GradRowChunkTotals totals;
    // Without weights D is K: a count, exact in double (the sum of K ones in any order).
    const bool weighted = weights.base != nullptr;
    double weight_total = 0.0;
    int64_t unmasked = 0;
    for (int64_t i = begin; i < end; ++i) {
        const int64_t t = LoadIndexAt(targets.At(i), target_dtype);
        if (t == ignore_index) continue;
        if (t < 0 || t >= c) {
            if (totals.bad_rows++ == 0) {
                totals.first_bad_row = i;
                totals.first_bad_target = t;
            }
            continue;
        }
        if (weighted) weight_total += LoadFloatAt(weights.At(t), ACL_FLOAT);
        ++unmasked;
    }
    totals.weight_total = weighted ? weight_total : static_cast<double>(unmasked);
    totals.unmasked = unmasked;
    totals_[k] = totals;
}

void GradRowsBuilder::Weigh(int part, int parts, GradWeighFn weigh) {
    const Operand &weight = p_.inputs[kWeight];
    if (!weight.present) return;
    const int first = kWeightSlices * part / parts;
    const int slices = kWeightSlices * (part + 1) / parts - first;
    if (slices <= 0) return;
    // Without label smoothing b is 0: W is not used (the traits are).
    double *sums = p_.label_smoothing != 0.0 ? weight_part_ : nullptr;
    ClearUpperVectorState();
    if (weigh != nullptr && weight.stride0 == 1) {
        weight_traits_[first] = weigh(reinterpret_cast<const float *>(weight.Base()), p_.c, first, slices, sums);
        ClearUpperVectorState();
    } else {
        weight_traits_[first] = WeighAt(weight.Element(0, weight.stride0), p_.c,
                                        weight.stride0 * static_cast<int64_t>(sizeof(float)), first, slices, sums);
    }
}

GradWeightTraits GradRowsBuilder::WeightTraits() const {
    GradWeightTraits traits;
    for (const GradWeightTraits &slice : weight_traits_) traits = MergeWeightTraits(traits, slice);
    return traits;
}

GradRowScales GradRowsBuilder::Finish() const {
    double weight_total = 0.0;  // D
    int64_t unmasked = 0;       // K
    for (int64_t k = 0; k < chunks_; ++k) {
        weight_total += totals_[k].weight_total;
        unmasked += totals_[k].unmasked;
    }
    const bool mean = p_.reduction == Reduction::kMean;
    GradRowScales scales;
    // A mean over zero total weight drops the cross-entropy terms altogether (DESIGN.md: zeros), even for an
    // infinite or NaN gradLoss, which a factor of 0 would turn into NaN.
    scales.ce_vanishes = mean && weight_total == 0.0;
    scales.nll_scale = mean && !scales.ce_vanishes ? 1.0 / weight_total : 1.0;
    scales.zloss_scale = mean ? (unmasked != 0 ? 1.0 / static_cast<double>(unmasked) : 0.0) : 1.0;
    // W and the weights' maximum with label smoothing only: without it b is 0, W is not used, and the guard that
    // kRowSmallBias lets a kernel skip never flags a lane of a row with b = 0, so the flag changes nothing there.
    scales.weight_sum = static_cast<double>(p_.c);
    if (p_.inputs[kWeight].present && p_.label_smoothing != 0.0) {
        double part[kWeightSumParts];
        std::memcpy(part, weight_part_, sizeof part);
        scales.weight_sum = WeightSumOfParts(part);
        // The maximum flags fp16 rows only (GradRowFlags), and means something only where every weight is finite.
        const bool use_max = p_.dtype == ACL_FLOAT16 && std::isfinite(scales.weight_sum);
        scales.max_abs_weight =
            use_max ? static_cast<double>(WeightTraits().max) : std::numeric_limits<double>::infinity();
    }
    return scales;
}

namespace {

// Pass 2 with the target's integer type and the presence of weights fixed at compile time, instead of a branch on
// each per row (16384 x 10 fp32, one thread, perf: the pass 22% of the samples before, 19% after). kShared: a
// reduction to a scalar without the z-loss, the usual case, whose rows read only their target and its weight; the
// general loop's other operands kept registers spilling to the stack there.
template <typename Index, bool kWeighted, bool kShared>
void FillRows(const CrossEntropyGradProblem &p, const GradRowScales &scales, GradRowCoefficients *rows_out,
              int64_t begin, int64_t end) {
    const RowAccess targets(p.inputs[kTarget]);
    const RowAccess weights_at(p.inputs[kWeight]);
    const RowAccess grad_losses(p.inputs[kGradLoss]);
    const RowAccess grad_zlosses(p.inputs[kGradZloss]);
    const RowAccess lses(p.inputs[kLseForZloss]);
    const aclDataType dtype = p.dtype;
    const int64_t c = p.c;
    const int64_t ignore_index = p.ignore_index;
    const bool per_row = !kShared && p.reduction == Reduction::kNone;
    const bool zloss = !kShared && p.zloss_scale != 0.0;
    const bool ce_vanishes = scales.ce_vanishes;
    const double nll_scale = scales.nll_scale;
    const double zloss_scale = scales.zloss_scale;
    const double smoothing = p.label_smoothing;
    const auto class_weight = [&](int64_t j) {
        if constexpr (kWeighted) {
            float w;
            std::memcpy(&w, weights_at.At(j), sizeof(w));
            return static_cast<double>(w);
        }
        return 1.0;
    };

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
        t.smooth = ce_vanishes ? 0.0 : g * smoothing / static_cast<double>(c) * nll_scale;
        t.smooth_sum = t.smooth * scales.weight_sum;
        t.flags = GradRowFlags(t.smooth, scales.max_abs_weight);
        if (zloss) t.g_plus_gz = g + (grad_zlosses.base != nullptr ? LoadFloatAt(grad_zlosses.At(k), dtype) : 0.0);
        return t;
    };
    const GradTerms shared = per_row ? GradTerms{} : terms_of(0);

    const double zloss_factor = 2.0 * p.zloss_scale;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (int64_t i = begin; i < end; ++i) {
        GradRowCoefficients &row = rows_out[i];
        Index index;
        std::memcpy(&index, targets.At(i), sizeof(index));
        const int64_t t = index;
        if (t == ignore_index) {
            row = GradRowCoefficients{0.0, 0.0, 0.0, -1, kRowZero, 0};
            continue;
        }
        if (t < 0 || t >= c) {
            row = GradRowCoefficients{nan, nan, 0.0, -1, kRowCompute, 0};
            continue;
        }
        const GradTerms terms = per_row ? terms_of(i) : shared;
        const double nll = ce_vanishes ? 0.0 : terms.nll_factor * class_weight(t) * nll_scale;
        double lse_grad = 0.0;
        if (zloss) lse_grad = zloss_factor * LoadFloatAt(lses.At(i), dtype) * terms.g_plus_gz * zloss_scale;
        const double a = nll + terms.smooth_sum + lse_grad;
        const double b = terms.smooth;
        const int32_t kind = a == 0.0 && b == 0.0 && nll == 0.0 ? kRowZero : kRowCompute;
        row = GradRowCoefficients{a, b, nll, t, kind, terms.flags};
    }
}

template <typename Index>
void FillRowsOf(bool weighted, bool shared, const CrossEntropyGradProblem &p, const GradRowScales &scales,
                GradRowCoefficients *rows_out, int64_t begin, int64_t end) {
    if (weighted) {
        if (shared) {
            FillRows<Index, true, true>(p, scales, rows_out, begin, end);
        } else {
            FillRows<Index, true, false>(p, scales, rows_out, begin, end);
        }
    } else if (shared) {
        FillRows<Index, false, true>(p, scales, rows_out, begin, end);
    } else {
        FillRows<Index, false, false>(p, scales, rows_out, begin, end);
    }
}

}  // namespace

void GradRowsBuilder::Fill(const GradRowScales &scales, int64_t begin, int64_t end) const {
    ClearUpperVectorState();
    const bool weighted = p_.inputs[kWeight].present;
    const bool shared = p_.reduction != Reduction::kNone && p_.zloss_scale == 0.0;
    if (p_.target_dtype == ACL_INT32) {
        FillRowsOf<int32_t>(weighted, shared, p_, scales, rows_, begin, end);
    } else {
        FillRowsOf<int64_t>(weighted, shared, p_, scales, rows_, begin, end);
    }
}

void GradRowsBuilder::ReportBadTargets(TaskContext &context) const {
    for (int64_t k = 0; k < chunks_; ++k) {
        const GradRowChunkTotals &totals = totals_[k];
        if (totals.bad_rows == 0) continue;
        context.RecordError(
            ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
            Format("aclnnCrossEntropyLossGrad: target[%lld] is %lld, expected a class index in [0, %lld) or "
                   "ignoreIndex (%lld); that row of out is NaN",
                   static_cast<long long>(totals.first_bad_row), static_cast<long long>(totals.first_bad_target),
                   static_cast<long long>(p_.c), static_cast<long long>(p_.ignore_index)));
        return;
    }
}

void ComputeGradRows(const CrossEntropyGradProblem &problem, GradRowCoefficients *rows, TaskContext &context) {
    GradRowsBuilder builder(problem, rows);
    for (int64_t k = 0; k < builder.Chunks(); ++k) builder.Collect(k);
    builder.Weigh(0, 1);
    builder.Fill(builder.Finish(), 0, problem.n);
    builder.ReportBadTargets(context);
}

}  // namespace openaclnn::cross_entropy
