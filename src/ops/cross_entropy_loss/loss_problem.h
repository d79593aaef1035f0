// What phase 1 of aclnnCrossEntropyLoss learns from its arguments, in the form phase 2 needs.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_LOSS_LOSS_PROBLEM_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_LOSS_LOSS_PROBLEM_H_

#include <cstdint>

#include "aclnn/aclnn_base.h"
#include "ops/cross_entropy/grad_problem.h"  // Operand and Reduction, shared with the gradient

namespace openaclnn::cross_entropy_loss {

using cross_entropy::CheckSmoothingAndZlossScale;
using cross_entropy::MakeOperand;
using cross_entropy::Operand;
using cross_entropy::ParseReduction;
using cross_entropy::RebindOperand;
using cross_entropy::Reduction;

// Indices of aclSetInputTensorAddr / aclSetOutputTensorAddr: the prototype's order.
enum LossInput { kInput = 0, kTarget = 1, kWeight = 2 };
constexpr int kLossInputCount = 3;
enum LossOutput { kLossOut = 0, kLogProbOut = 1, kZlossOut = 2, kLseForZlossOut = 3 };
constexpr int kLossOutputCount = 4;

struct CrossEntropyLossProblem {
    int64_t n = 0;
    int64_t c = 0;
    aclDataType dtype = ACL_FLOAT;         // input and all four outputs
    aclDataType target_dtype = ACL_INT64;  // ACL_INT64 or ACL_INT32
    Reduction reduction = Reduction::kMean;
    int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    double zloss_scale = 0.0;
    bool return_zloss = false;
    Operand inputs[kLossInputCount];
    Operand outputs[kLossOutputCount];  // zlossOut / lseForZlossOut may be empty ([0]): elements == 0

    bool WritesZloss() const { return return_zloss && outputs[kZlossOut].elements > 0; }
    bool WritesLse() const { return outputs[kLseForZlossOut].elements > 0; }
};

// Phase 1 checks, in DESIGN order: null (161001), dtype (161002), attributes (561002), shapes and views (561002),
// then aliasing (161002). On success fills problem.
aclnnStatus CheckCrossEntropyLoss(const aclTensor *input, const aclTensor *target, const aclTensor *weightOptional,
                                  const char *reductionOptional, int64_t ignoreIndex, double labelSmoothing,
                                  double lseSquareScaleForZloss, bool returnZloss, const aclTensor *lossOut,
                                  const aclTensor *logProbOut, const aclTensor *zlossOut,
                                  const aclTensor *lseForZlossOut, const uint64_t *workspaceSize,
                                  aclOpExecutor *const *executor, CrossEntropyLossProblem *problem);

}  // namespace openaclnn::cross_entropy_loss

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_LOSS_LOSS_PROBLEM_H_
