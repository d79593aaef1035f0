// What phase 1 of aclnnCrossEntropyLossGrad learns from its arguments, in the form phase 2 needs.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_GRAD_PROBLEM_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_GRAD_PROBLEM_H_

#include <cstddef>
#include <cstdint>

#include "aclnn/aclnn_base.h"

namespace openaclnn::cross_entropy {

enum class Reduction { kNone, kMean, kSum };

// One tensor argument: its (rebindable) data address and its fixed geometry, strides in elements.
struct Operand {
    bool present = false;
    void *data = nullptr;     // base address, as given to aclCreateTensor or aclSet*TensorAddr
    int64_t offset = 0;       // element offset of the view
    int64_t stride0 = 0;      // stride of dim 0 (0 for a rank-0 or single-element view)
    int64_t stride1 = 0;      // stride of dim 1 (2-D views)
    int64_t elements = 0;
    int64_t element_size = 0;

    // NULL stays NULL (allowed for a view with no elements): no arithmetic on a null pointer.
    const char *Base() const { return data ? static_cast<const char *>(data) + offset * element_size : nullptr; }
    char *MutableBase() const { return data ? static_cast<char *>(data) + offset * element_size : nullptr; }
    // Element index of a view along a dimension of the given stride.
    const char *Element(int64_t index, int64_t stride) const { return Base() + index * stride * element_size; }
    char *MutableElement(int64_t index, int64_t stride) const {
        return MutableBase() + index * stride * element_size;
    }
};

// The operand of a tensor argument (not present for NULL); shared by the forward's checks.
Operand MakeOperand(const aclTensor *t);

// Shared by both operators' phase 1 (attribute stage, 561002): reductionOptional parsed ("none", "mean", "sum";
// NULL is "mean"), labelSmoothing finite in [0, 1], lseSquareScaleForZloss finite.
aclnnStatus ParseReduction(const char *api, const char *reductionOptional, Reduction *reduction);
aclnnStatus CheckSmoothingAndZlossScale(const char *api, double labelSmoothing, double lseSquareScaleForZloss);

// aclSetInputTensorAddr / aclSetOutputTensorAddr on one operand of an executor (api names the call in messages):
// 161002 for an operand that was not given or an address not aligned to its element size, 161001 for NULL where
// the view has elements; otherwise the operand's data becomes addr.
aclnnStatus RebindOperand(Operand &operand, size_t index, const char *api, void *addr);

// Input indices of aclSetInputTensorAddr: the prototype's order.
enum GradInput { kGradLoss = 0, kLogProb = 1, kTarget = 2, kWeight = 3, kGradZloss = 4, kLseForZloss = 5 };
constexpr int kGradInputCount = 6;

struct CrossEntropyGradProblem {
    int64_t n = 0;
    int64_t c = 0;
    aclDataType dtype = ACL_FLOAT;         // logProb, gradLoss, out, gradZloss, lseForZloss
    aclDataType target_dtype = ACL_INT64;  // ACL_INT64 or ACL_INT32
    Reduction reduction = Reduction::kMean;
    int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    double zloss_scale = 0.0;
    Operand inputs[kGradInputCount];
    Operand out;

    bool Empty() const { return n == 0 || c == 0; }
};

// Phase 1 checks, in DESIGN order (null, dtype, attributes, shapes, aliasing). On success fills problem.
aclnnStatus CheckCrossEntropyGrad(const aclTensor *gradLoss, const aclTensor *logProb, const aclTensor *target,
                                  const aclTensor *weightOptional, const aclTensor *gradZlossOptional,
                                  const aclTensor *lseForZlossOptional, const char *reductionOptional,
                                  int64_t ignoreIndex, double labelSmoothing, double lseSquareScaleForZloss,
                                  const aclTensor *out, const uint64_t *workspaceSize,
                                  aclOpExecutor *const *executor, CrossEntropyGradProblem *problem);

}  // namespace openaclnn::cross_entropy

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_GRAD_PROBLEM_H_
