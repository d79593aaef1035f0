#include "reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace openaclnn::test {

const char *ReductionName(Reduction r) {
    switch (r) {
        case Reduction::kNone:
            return "none";
        case Reduction::kSum:
            return "sum";
        default:
            return "mean";
    }
}

namespace {

bool InRange(const GradProblem &p, int64_t t) { return t >= 0 && t < p.c; }

double Weight(const GradProblem &p, int64_t j) { return p.weight.empty() ? 1.0 : p.weight[j]; }

double GradOf(const std::vector<double> &g, Reduction r, int64_t i) { return r == Reduction::kNone ? g[i] : g[0]; }

}  // namespace

GradReference ReferenceGrad(const GradProblem &p) {
    const int64_t n = p.n;
    const int64_t c = p.c;
    GradReference ref;
    ref.out.assign(static_cast<size_t>(n * c), 0.0);
    ref.magnitude.assign(static_cast<size_t>(n * c), 0.0);
    ref.row_scale.assign(static_cast<size_t>(n), 0.0);
    const double nan = std::numeric_limits<double>::quiet_NaN();

    // ignoreMask_i = [target_i != ignoreIndex]; a target outside [0, C) that is not ignoreIndex makes the row NaN
    // and leaves it out of both mean denominators (DESIGN.md section 2).
    std::vector<double> ignore_mask(n);
    std::vector<bool> bad(n, false);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t t = p.target[i];
        if (t == p.ignore_index) {
            ignore_mask[i] = 0.0;
        } else if (!InRange(p, t)) {
            ignore_mask[i] = 0.0;
            bad[i] = true;
            ref.bad_rows.push_back(i);
        } else {
            ignore_mask[i] = 1.0;
        }
    }

    // sum(weight_target * ignoreMask), the mean denominator of the cross-entropy terms.
    double weight_sum = 0.0;
    double mask_sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        if (ignore_mask[i] != 0.0) {
            weight_sum += Weight(p, p.target[i]) * ignore_mask[i];
            mask_sum += ignore_mask[i];
        }
    }
    double weight_total = 0.0;  // sum_j weight_j, for sum(logSoftmaxGradSmoothLoss)
    double weight_abs_total = 0.0;
    double weight_abs_max = 0.0;
    for (int64_t j = 0; j < c; ++j) {
        weight_total += Weight(p, j);
        weight_abs_total += std::fabs(Weight(p, j));
        weight_abs_max = std::max(weight_abs_max, std::fabs(Weight(p, j)));
    }
    const double ls = p.label_smoothing;
    const bool mean = p.reduction == Reduction::kMean;
    // Mean with total weight 0: the cross-entropy part of the gradient is zero (PyTorch's behaviour).
    const bool ce_vanishes = mean && weight_sum == 0.0;

    for (int64_t i = 0; i < n; ++i) {
        double *out_row = &ref.out[static_cast<size_t>(i * c)];
        double *mag_row = &ref.magnitude[static_cast<size_t>(i * c)];
        if (bad[i]) {
            std::fill(out_row, out_row + c, nan);
            continue;
        }
        const double grad = GradOf(p.grad_loss, p.reduction, i);
        const int64_t t = p.target[i];

        // smoothLossGrad and lossOutGrad.
        double smooth_loss_grad = 0.0;
        double loss_out_grad = 0.0;
        if (!ce_vanishes) {
            if (mean) {
                smooth_loss_grad = grad / weight_sum * ls / static_cast<double>(c);
                loss_out_grad = grad * (1.0 - ls) / weight_sum * ignore_mask[i];
            } else {
                smooth_loss_grad = grad * ls / static_cast<double>(c);
                loss_out_grad = grad * (1.0 - ls) * ignore_mask[i];
            }
        }
        // nllLossGrad = lossOutGrad * weight_target (weight of an ignored row's target is irrelevant: factor 0).
        const double nll_loss_grad = ignore_mask[i] != 0.0 ? loss_out_grad * Weight(p, t) : 0.0;
        // smoothLossGrad = smoothLossGrad * ignoreMask; logSoftmaxGradSmoothLoss_j = smoothLossGrad * weight_j.
        smooth_loss_grad = smooth_loss_grad * ignore_mask[i];
        const double sum_log_softmax_grad_smooth_loss = smooth_loss_grad * weight_total;

        // z-loss: gradZ = grad (+ gradZloss); zlossGrad = gradZ (/ sum(ignoreMask) for mean);
        // lseGrad = 2 * scale * lseForZloss * ignoreMask * zlossGrad.
        double lse_grad = 0.0;
        if (p.zloss_scale != 0.0) {
            double grad_z = grad;
            if (!p.grad_zloss.empty()) grad_z = grad + GradOf(p.grad_zloss, p.reduction, i);
            double zloss_grad = grad_z;
            if (mean) zloss_grad = mask_sum > 0.0 ? grad_z / mask_sum : 0.0;
            lse_grad = 2.0 * p.zloss_scale * p.lse[i] * ignore_mask[i] * zloss_grad;
        }

        ref.row_scale[i] = std::fabs(nll_loss_grad) + std::fabs(sum_log_softmax_grad_smooth_loss) +
                           std::fabs(lse_grad) + std::fabs(smooth_loss_grad) * weight_abs_max;
        const double smooth_abs_sum = std::fabs(smooth_loss_grad) * weight_abs_total;
        for (int64_t j = 0; j < c; ++j) {
            const double prob = std::exp(p.log_prob[static_cast<size_t>(i * c + j)]);
            // predictionsGradLossOut = exp(logProb) * nllLossGrad - [j == target] * nllLossGrad
            const double log_softmax_grad_loss_out_sub_part = prob * nll_loss_grad;
            const double predictions_grad_loss_out_at_target = j == t ? nll_loss_grad : 0.0;
            const double predictions_grad_loss_out =
                log_softmax_grad_loss_out_sub_part - predictions_grad_loss_out_at_target;
            // predictionsGradSmoothLoss = exp(logProb) * sum(logSoftmaxGradSmoothLoss) - logSoftmaxGradSmoothLoss
            const double log_softmax_grad_smooth_loss = smooth_loss_grad * Weight(p, j);
            const double predictions_grad_smooth_loss =
                prob * sum_log_softmax_grad_smooth_loss - log_softmax_grad_smooth_loss;
            // zlossOutputGrad = exp(logProb) * lseGrad
            const double zloss_output_grad = prob * lse_grad;
            out_row[j] = predictions_grad_loss_out + predictions_grad_smooth_loss + zloss_output_grad;
            mag_row[j] = std::fabs(log_softmax_grad_loss_out_sub_part) +
                         std::fabs(predictions_grad_loss_out_at_target) + prob * smooth_abs_sum +
                         std::fabs(log_softmax_grad_smooth_loss) + std::fabs(zloss_output_grad);
        }
    }
    return ref;
}

void LogSoftmaxRows(const std::vector<double> &logits, int64_t n, int64_t c, std::vector<double> *log_prob,
                    std::vector<double> *lse) {
    log_prob->assign(static_cast<size_t>(n * c), 0.0);
    lse->assign(static_cast<size_t>(n), 0.0);
    for (int64_t i = 0; i < n; ++i) {
        const double *x = &logits[static_cast<size_t>(i * c)];
        double m = -INFINITY;
        for (int64_t j = 0; j < c; ++j) m = std::max(m, x[j]);
        double s = 0.0;
        for (int64_t j = 0; j < c; ++j) s += std::exp(x[j] - m);
        const double l = m + std::log(s);
        (*lse)[i] = l;
        for (int64_t j = 0; j < c; ++j) (*log_prob)[static_cast<size_t>(i * c + j)] = x[j] - l;
    }
}

double ForwardObjective(const GradProblem &p, const std::vector<double> &logits) {
    const int64_t n = p.n;
    const int64_t c = p.c;
    std::vector<double> logp;
    std::vector<double> lse;
    LogSoftmaxRows(logits, n, c, &logp, &lse);
    const double ls = p.label_smoothing;

    std::vector<double> ce(n, 0.0);
    std::vector<double> z(n, 0.0);
    double weight_sum = 0.0;
    double count = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t t = p.target[i];
        if (t == p.ignore_index || t < 0 || t >= c) continue;  // masked (out-of-range rows are not differentiated)
        const double *lp = &logp[static_cast<size_t>(i * c)];
        // PyTorch: nll_i = -w[t] * logp[t]; smooth_i = -sum_j w_j * logp_j.
        const double nll = -Weight(p, t) * lp[t];
        double smooth = 0.0;
        for (int64_t j = 0; j < c; ++j) smooth -= Weight(p, j) * lp[j];
        ce[i] = (1.0 - ls) * nll + ls / static_cast<double>(c) * smooth;
        z[i] = p.zloss_scale * lse[i] * lse[i];
        weight_sum += Weight(p, t);
        count += 1.0;
    }
    if (p.reduction == Reduction::kNone) {
        double total = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            total += p.grad_loss[i] * (ce[i] + z[i]);
            if (!p.grad_zloss.empty()) total += p.grad_zloss[i] * z[i];
        }
        return total;
    }
    double ce_total = 0.0;
    double z_total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        ce_total += ce[i];
        z_total += z[i];
    }
    if (p.reduction == Reduction::kMean) {
        ce_total = weight_sum != 0.0 ? ce_total / weight_sum : 0.0;
        z_total = count > 0.0 ? z_total / count : 0.0;
    }
    double total = p.grad_loss[0] * (ce_total + z_total);
    if (!p.grad_zloss.empty()) total += p.grad_zloss[0] * z_total;
    return total;
}

}  // namespace openaclnn::test
