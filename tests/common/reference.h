// Float64 references for aclnnCrossEntropyLossGrad and its forward loss.
//
// ReferenceGrad is a literal transcription of the formula in shared/spec/aclnnCrossEntropyLossGrad.md, with the
// decisions of DESIGN.md section 2 where the formula leaves a case open. It is deliberately not written like a
// kernel (no per-row coefficients): each named quantity of the spec is computed as the spec names it.
// ForwardObjective is PyTorch's cross_entropy (weight, ignore_index, label_smoothing, reduction) plus the z-loss,
// contracted with gradLoss / gradZloss, so that its derivative with respect to the logits is the op's output.
#ifndef OPENACLNN_TESTS_COMMON_REFERENCE_H_
#define OPENACLNN_TESTS_COMMON_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace openaclnn::test {

enum class Reduction { kNone, kMean, kSum };
const char *ReductionName(Reduction r);

struct GradProblem {
    int64_t n = 0;
    int64_t c = 0;
    Reduction reduction = Reduction::kMean;
    std::vector<double> log_prob;    // n * c, row-major
    std::vector<int64_t> target;     // n
    std::vector<double> weight;      // c, or empty: all ones
    std::vector<double> grad_loss;   // n for none, 1 for mean/sum
    std::vector<double> grad_zloss;  // like grad_loss, or empty: not passed
    std::vector<double> lse;         // n, or empty (only read when zloss_scale != 0)
    int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    double zloss_scale = 0.0;
};

struct GradReference {
    std::vector<double> out;        // n * c; rows with an out-of-range target are NaN
    std::vector<double> magnitude;  // n * c: the sum of the absolute values of the terms added into out[i][j]
    std::vector<double> row_scale;  // n: |coefficient of exp(logProb)| + |smoothing coefficient| * max|w| + |nll|
    std::vector<int64_t> bad_rows;  // rows whose target is outside [0, C) and not ignoreIndex
};

GradReference ReferenceGrad(const GradProblem &p);

// The forward objective at logits x (n * c):
//   none:      sum_i gradLoss_i * (ce_i + z_i) + sum_i gradZloss_i * z_i
//   mean/sum:  gradLoss * (CE + Z) + gradZloss * Z
// with ce_i = (1 - ls) * nll_i + ls / C * smooth_i (masked), z_i = scale * lse_i^2 (masked); mean divides CE by
// sum_i w[t_i] * mask_i (0 when that is 0) and Z by the count of unmasked rows (0 when that is 0).
// Uses p.target, p.weight, p.grad_loss, p.grad_zloss, p.ignore_index, p.label_smoothing, p.zloss_scale.
double ForwardObjective(const GradProblem &p, const std::vector<double> &logits);

// log_softmax and logsumexp of row-major n * c logits, in double.
void LogSoftmaxRows(const std::vector<double> &logits, int64_t n, int64_t c, std::vector<double> *log_prob,
                    std::vector<double> *lse);

}  // namespace openaclnn::test

#endif  // OPENACLNN_TESTS_COMMON_REFERENCE_H_
