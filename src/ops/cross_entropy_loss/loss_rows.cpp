// The loss from the row table, a literal reading of PyTorch's cross_entropy plus the z-loss.
//
// With m_i the mask (1 for counted rows), t_i the target, w the class weights (ones when absent), ls the label
// smoothing, lp_ij = x_ij - lse_i:
//   nll_i    = -w[t_i] lp_i,t_i
//   smooth_i = -sum_j w_j lp_ij                              (only computed when ls > 0, as PyTorch does)
//   ce_i     = (1 - ls) nll_i + ls / C * smooth_i            (= nll_i when ls == 0)
//   z_i      = scale * lse_i^2
// none: loss_i = m_i (ce_i + [scale != 0] z_i); sum: the sums; mean: sum_i m_i ce_i / W + [scale != 0]
// sum_i m_i z_i / K with W = sum_i m_i w[t_i] and K = sum_i m_i. W == 0 gives NaN (0/0, as PyTorch and CANN).
// zlossOut holds the z-loss term alone, reduced the same way. An out-of-range row's loss is NaN, and so is any
// reduction over it. Everything in double, in row order; one rounding at each store.
#include "loss_rows.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/common/element_access.h"
#include "ops/common/vector_state.h"

namespace openaclnn::cross_entropy_loss {
namespace {

double LoadFloat(const Operand &operand, aclDataType dtype, int64_t index, int64_t stride) {
    return LoadFloatAt(operand.Element(index, stride), dtype);
}

void StoreFloat(const Operand &operand, aclDataType dtype, int64_t index, double value) {
    StoreFloatAt(operand.MutableElement(index, operand.stride0), dtype, value);
}

}  // namespace

void GatherLossRows(const CrossEntropyLossProblem &p, LossRowStats *rows, TaskContext &context) {
    ClearUpperVectorState();  // whatever ran last on this thread: this pass is baseline code (vector_state.h)
    const Operand &input = p.inputs[kInput];
    const Operand &target = p.inputs[kTarget];
    const Operand &weight = p.inputs[kWeight];
    int64_t bad_rows = 0;
    for (int64_t i = 0; i < p.n; ++i) {
        LossRowStats &row = rows[i];
        row = LossRowStats{0.0, 0.0, 0.0, 0.0, kLossRowIgnored, 0};
        const int64_t t = LoadIndexAt(target.Element(i, target.stride0), p.target_dtype);
        if (t == p.ignore_index) continue;
        if (t < 0 || t >= p.c) {
            row.kind = kLossRowOutOfRange;
            if (bad_rows++ == 0) {
                context.RecordError(
                    ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
                    Format("aclnnCrossEntropyLoss: target[%lld] is %lld, expected a class index in [0, %lld) or "
                           "ignoreIndex (%lld); that row's loss is NaN",
                           static_cast<long long>(i), static_cast<long long>(t), static_cast<long long>(p.c),
                           static_cast<long long>(p.ignore_index)));
            }
            continue;
        }
        row.kind = kLossRowCounted;
        // Element (i, t) of the input view; read now, because the kernel may overwrite it (in place).
        const int64_t element = i * input.stride0 + t * input.stride1;
        row.target_logit = LoadFloat(input, p.dtype, element, 1);
        row.target_weight = weight.present ? LoadFloat(weight, ACL_FLOAT, t, weight.stride0) : 1.0;
    }
}

void FinishLoss(const CrossEntropyLossProblem &p, const LossRowStats *rows) {
    const bool per_row = p.reduction == Reduction::kNone;
    const bool zloss = p.zloss_scale != 0.0;
    const bool smoothing = p.label_smoothing > 0.0;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Operand &loss_out = p.outputs[kLossOut];
    const Operand &zloss_out = p.outputs[kZlossOut];
    const Operand &lse_out = p.outputs[kLseForZlossOut];
    const bool write_zloss = p.WritesZloss();

    double loss_total = 0.0;    // sum_i m_i ce_i
    double zloss_total = 0.0;   // sum_i m_i z_i
    double weight_total = 0.0;  // W
    int64_t counted = 0;        // K
    for (int64_t i = 0; i < p.n; ++i) {
        const LossRowStats &row = rows[i];
        if (p.WritesLse()) StoreFloat(lse_out, p.dtype, i, row.lse);
        double ce = 0.0;
        double z = 0.0;
        if (row.kind == kLossRowOutOfRange) {
            ce = nan;
            z = nan;
        } else if (row.kind == kLossRowCounted) {
            const double w_t = row.target_weight;
            ce = -w_t * (row.target_logit - row.lse);
            if (smoothing) {
                ce = (1.0 - p.label_smoothing) * ce -
                     p.label_smoothing / static_cast<double>(p.c) * row.weighted_log_prob_sum;
            }
            z = p.zloss_scale * row.lse * row.lse;
            weight_total += w_t;
            ++counted;
        }
        loss_total += ce;
        zloss_total += z;
        if (per_row) {
            StoreFloat(loss_out, p.dtype, i, zloss ? ce + z : ce);
            if (write_zloss) StoreFloat(zloss_out, p.dtype, i, z);
        }
    }
    if (per_row) return;
    double loss = loss_total;
    double zloss_value = zloss_total;
    if (p.reduction == Reduction::kMean) {
        loss = loss_total / weight_total;  // 0/0 = NaN when nothing is counted, as PyTorch
        zloss_value = zloss_total / static_cast<double>(counted);
    }
    StoreFloat(loss_out, p.dtype, 0, zloss ? loss + zloss_value : loss);
    if (write_zloss) StoreFloat(zloss_out, p.dtype, 0, zloss_value);
}

}  // namespace openaclnn::cross_entropy_loss
