// Phase 1 checks of aclnnCrossEntropyLossGrad, one block per rule of DESIGN.md section 2, in its order:
// null (161001), dtype (161002), attributes (561002), shapes and views (561002), then aliasing (161002).
#include <cmath>
#include <cstring>

#include "grad_problem.h"
#include "ops/common/tensor_checks.h"

namespace openaclnn::cross_entropy {
namespace {

constexpr const char *kApi = "aclnnCrossEntropyLossGradGetWorkspaceSize";

// gradLoss and gradZloss: [N] for none; [] or [1] for mean and sum.
aclnnStatus CheckGradShape(const char *name, const aclTensor *t, Reduction reduction, int64_t n) {
    if (reduction == Reduction::kNone) return CheckShape(kApi, name, t, {n});
    if (t->view_dims.empty() || t->view_dims == std::vector<int64_t>{1}) return ACLNN_SUCCESS;
    return Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: %s has shape %s, expected [] or [1] for reduction \"%s\"", kApi,
                name, DimsToString(t->view_dims).c_str(), reduction == Reduction::kMean ? "mean" : "sum");
}

}  // namespace

Operand MakeOperand(const aclTensor *t) {
    Operand operand;
    if (!t) return operand;
    operand.present = true;
    operand.data = t->data;
    operand.elements = t->NumElements();
    // An empty view's offset is never used and phase 1 does not bound it: kept out of the address arithmetic.
    operand.offset = operand.elements > 0 ? t->offset : 0;
    operand.stride0 = t->Rank() >= 1 ? t->strides[0] : 0;
    operand.stride1 = t->Rank() >= 2 ? t->strides[1] : 0;
    operand.element_size = static_cast<int64_t>(aclDataTypeSize(t->dtype));
    return operand;
}

aclnnStatus ParseReduction(const char *api, const char *reductionOptional, Reduction *reduction) {
    *reduction = Reduction::kMean;
    if (!reductionOptional) return ACLNN_SUCCESS;
    if (std::strcmp(reductionOptional, "none") == 0) {
        *reduction = Reduction::kNone;
    } else if (std::strcmp(reductionOptional, "mean") == 0) {
        *reduction = Reduction::kMean;
    } else if (std::strcmp(reductionOptional, "sum") == 0) {
        *reduction = Reduction::kSum;
    } else {
        return Fail(ACLNN_ERR_INNER_TILING_ERROR,
                    "%s: reductionOptional is \"%.64s\", expected \"none\", \"mean\" or \"sum\" (or NULL for "
                    "\"mean\")",
                    api, reductionOptional);
    }
    return ACLNN_SUCCESS;
}

aclnnStatus CheckSmoothingAndZlossScale(const char *api, double labelSmoothing, double lseSquareScaleForZloss) {
    if (!std::isfinite(labelSmoothing) || labelSmoothing < 0.0 || labelSmoothing > 1.0) {
        return Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: labelSmoothing is %g, expected a finite value in [0, 1]", api,
                    labelSmoothing);
    }
    if (!std::isfinite(lseSquareScaleForZloss)) {
        return Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: lseSquareScaleForZloss is %g, expected a finite value", api,
                    lseSquareScaleForZloss);
    }
    return ACLNN_SUCCESS;
}

aclnnStatus RebindOperand(Operand &operand, size_t index, const char *api, void *addr) {
    if (!operand.present) {
        return Fail(ACLNN_ERR_PARAM_INVALID, "%s: index %zu names an optional tensor that was not given", api, index);
    }
    if (!addr && operand.elements != 0) {
        return Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: addr is NULL for index %zu, expected an address", api, index);
    }
    // As phase 1 (CheckDataAligned): an address aligned to the element size, or 161002.
    if (operand.element_size > 1 && reinterpret_cast<uintptr_t>(addr) % operand.element_size != 0) {
        return Fail(ACLNN_ERR_PARAM_INVALID,
                    "%s: addr is %p for index %zu, which is not a multiple of %lld bytes, expected an address "
                    "aligned to the tensor's element size",
                    api, addr, index, static_cast<long long>(operand.element_size));
    }
    operand.data = addr;
    return ACLNN_SUCCESS;
}

aclnnStatus CheckCrossEntropyGrad(const aclTensor *gradLoss, const aclTensor *logProb, const aclTensor *target,
                                  const aclTensor *weightOptional, const aclTensor *gradZlossOptional,
                                  const aclTensor *lseForZlossOptional, const char *reductionOptional,
                                  int64_t ignoreIndex, double labelSmoothing, double lseSquareScaleForZloss,
                                  const aclTensor *out, const uint64_t *workspaceSize,
                                  aclOpExecutor *const *executor, CrossEntropyGradProblem *problem) {
    // ---- null (161001) ----
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "gradLoss", gradLoss, true));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "logProb", logProb, true));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "target", target, true));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "weightOptional", weightOptional, false));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "gradZlossOptional", gradZlossOptional, false));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "lseForZlossOptional", lseForZlossOptional, false));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "out", out, true));
    OPENACLNN_RETURN_IF_ERROR(CheckPhase1Outputs(kApi, workspaceSize, executor));

    // ---- dtype (161002) ----
    OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "logProb", logProb, {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}));
    const aclDataType dtype = logProb->dtype;
    OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "gradLoss", gradLoss, {dtype}));
    OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "target", target, {ACL_INT64, ACL_INT32}));
    if (weightOptional) OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "weightOptional", weightOptional, {ACL_FLOAT}));
    if (gradZlossOptional) {
        OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "gradZlossOptional", gradZlossOptional, {dtype}));
    }
    if (lseForZlossOptional) {
        OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "lseForZlossOptional", lseForZlossOptional, {dtype}));
    }
    OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "out", out, {dtype}));

    // ---- attributes (561002) ----
    Reduction reduction = Reduction::kMean;
    OPENACLNN_RETURN_IF_ERROR(ParseReduction(kApi, reductionOptional, &reduction));
    OPENACLNN_RETURN_IF_ERROR(CheckSmoothingAndZlossScale(kApi, labelSmoothing, lseSquareScaleForZloss));
    const bool zloss = lseSquareScaleForZloss != 0.0;
    if (zloss && !lseForZlossOptional) {
        return Fail(ACLNN_ERR_INNER_TILING_ERROR,
                    "%s: lseForZlossOptional is NULL while lseSquareScaleForZloss is %g, expected an [N] tensor when "
                    "the scale is non-zero",
                    kApi, lseSquareScaleForZloss);
    }

    // ---- shapes and views (561002) ----
    if (logProb->Rank() != 2) {
        return Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: logProb has shape %s, expected a 2-D [N, C] tensor", kApi,
                    DimsToString(logProb->view_dims).c_str());
    }
    const int64_t n = logProb->view_dims[0];
    const int64_t c = logProb->view_dims[1];
    OPENACLNN_RETURN_IF_ERROR(CheckShape(kApi, "target", target, {n}));
    if (weightOptional) OPENACLNN_RETURN_IF_ERROR(CheckShape(kApi, "weightOptional", weightOptional, {c}));
    OPENACLNN_RETURN_IF_ERROR(CheckShape(kApi, "out", out, {n, c}));
    OPENACLNN_RETURN_IF_ERROR(CheckGradShape("gradLoss", gradLoss, reduction, n));
    if (gradZlossOptional) OPENACLNN_RETURN_IF_ERROR(CheckGradShape("gradZlossOptional", gradZlossOptional, reduction, n));
    if (lseForZlossOptional) {
        const bool empty_ok = !zloss && lseForZlossOptional->view_dims == std::vector<int64_t>{0};
        if (!empty_ok && lseForZlossOptional->view_dims != std::vector<int64_t>{n}) {
            return Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: lseForZlossOptional has shape %s, expected [%lld]%s", kApi,
                        DimsToString(lseForZlossOptional->view_dims).c_str(), static_cast<long long>(n),
                        zloss ? "" : " or [0] (the z-loss scale is 0)");
        }
    }
    const struct {
        const char *name;
        const aclTensor *tensor;
    } all[] = {{"gradLoss", gradLoss},
               {"logProb", logProb},
               {"target", target},
               {"weightOptional", weightOptional},
               {"gradZlossOptional", gradZlossOptional},
               {"lseForZlossOptional", lseForZlossOptional},
               {"out", out}};
    for (const auto &entry : all) {
        if (entry.tensor) OPENACLNN_RETURN_IF_ERROR(CheckViewInStorage(kApi, entry.name, entry.tensor));
    }

    // ---- aliasing (161002): out may be logProb itself, and overlap nothing else, itself included ----
    if (OverlapsItself(out)) {
        return Fail(ACLNN_ERR_PARAM_INVALID,
                    "%s: out (shape %s, strides %s) has elements that share an address, expected a view whose "
                    "elements are distinct",
                    kApi, DimsToString(out->view_dims).c_str(), DimsToString(out->strides).c_str());
    }
    for (const auto &entry : all) {
        if (!entry.tensor || entry.tensor == out) continue;
        if (entry.tensor == logProb && SameView(out, logProb)) continue;
        if (MayOverlap(out, entry.tensor)) {
            return Fail(ACLNN_ERR_PARAM_INVALID,
                        "%s: out overlaps %s in memory, expected out to be separate from every input (or exactly "
                        "logProb, for an in-place call)",
                        kApi, entry.name);
        }
    }

    problem->n = n;
    problem->c = c;
    problem->dtype = dtype;
    problem->target_dtype = target->dtype;
    problem->reduction = reduction;
    problem->ignore_index = ignoreIndex;
    problem->label_smoothing = labelSmoothing;
    problem->zloss_scale = lseSquareScaleForZloss;
    problem->inputs[kGradLoss] = MakeOperand(gradLoss);
    problem->inputs[kLogProb] = MakeOperand(logProb);
    problem->inputs[kTarget] = MakeOperand(target);
    problem->inputs[kWeight] = MakeOperand(weightOptional);
    problem->inputs[kGradZloss] = MakeOperand(gradZlossOptional);
    problem->inputs[kLseForZloss] = MakeOperand(lseForZlossOptional);
    problem->out = MakeOperand(out);
    return ACLNN_SUCCESS;
}

}  // namespace openaclnn::cross_entropy
