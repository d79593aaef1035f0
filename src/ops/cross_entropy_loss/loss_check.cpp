// Phase 1 checks of aclnnCrossEntropyLoss, one block per rule of DESIGN.md section 2, in its order (the same
// rules and helpers as the gradient's grad_check.cpp): null (161001), dtype (161002), attributes (561002), shapes
// and views (561002), then aliasing (161002).

#include "loss_problem.h"
#include "ops/common/tensor_checks.h"

namespace openaclnn::cross_entropy_loss {
namespace {

constexpr const char *kApi = "aclnnCrossEntropyLossGetWorkspaceSize";

const char *ReductionName(Reduction reduction) {
    return reduction == Reduction::kNone ? "none" : reduction == Reduction::kMean ? "mean" : "sum";
}

// lossOut (and zlossOut when written): [N] for none; [] or [1] for mean and sum.
aclnnStatus CheckLossShape(const char *name, const aclTensor *t, Reduction reduction, int64_t n) {
    if (reduction == Reduction::kNone) return CheckShape(kApi, name, t, {n});
    if (t->view_dims.empty() || t->view_dims == std::vector<int64_t>{1}) return ACLNN_SUCCESS;
    return Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: %s has shape %s, expected [] or [1] for reduction \"%s\"", kApi,
                name, DimsToString(t->view_dims).c_str(), ReductionName(reduction));
}

}  // namespace

aclnnStatus CheckCrossEntropyLoss(const aclTensor *input, const aclTensor *target, const aclTensor *weightOptional,
                                  const char *reductionOptional, int64_t ignoreIndex, double labelSmoothing,
                                  double lseSquareScaleForZloss, bool returnZloss, const aclTensor *lossOut,
                                  const aclTensor *logProbOut, const aclTensor *zlossOut,
                                  const aclTensor *lseForZlossOut, const uint64_t *workspaceSize,
                                  aclOpExecutor *const *executor, CrossEntropyLossProblem *problem) {
    // ---- null (161001): all four outputs are required, as in CANN ----
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "input", input, true));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "target", target, true));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "weightOptional", weightOptional, false));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "lossOut", lossOut, true));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "logProbOut", logProbOut, true));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "zlossOut", zlossOut, true));
    OPENACLNN_RETURN_IF_ERROR(CheckTensorPresent(kApi, "lseForZlossOut", lseForZlossOut, true));
    OPENACLNN_RETURN_IF_ERROR(CheckPhase1Outputs(kApi, workspaceSize, executor));

    // ---- dtype (161002) ----
    OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "input", input, {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}));
    const aclDataType dtype = input->dtype;
    OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "target", target, {ACL_INT64, ACL_INT32}));
    if (weightOptional) OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "weightOptional", weightOptional, {ACL_FLOAT}));
    OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "lossOut", lossOut, {dtype}));
    OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "logProbOut", logProbOut, {dtype}));
    OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "zlossOut", zlossOut, {dtype}));
    OPENACLNN_RETURN_IF_ERROR(CheckDataType(kApi, "lseForZlossOut", lseForZlossOut, {dtype}));

    // ---- attributes (561002) ----
    Reduction reduction = Reduction::kMean;
    OPENACLNN_RETURN_IF_ERROR(ParseReduction(kApi, reductionOptional, &reduction));
    OPENACLNN_RETURN_IF_ERROR(CheckSmoothingAndZlossScale(kApi, labelSmoothing, lseSquareScaleForZloss));
    const bool zloss = lseSquareScaleForZloss != 0.0;

    // ---- shapes and views (561002) ----
    if (input->Rank() != 2) {
        return Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: input has shape %s, expected a 2-D [N, C] tensor", kApi,
                    DimsToString(input->view_dims).c_str());
    }
    const int64_t n = input->view_dims[0];
    const int64_t c = input->view_dims[1];
    OPENACLNN_RETURN_IF_ERROR(CheckShape(kApi, "target", target, {n}));
    if (weightOptional) OPENACLNN_RETURN_IF_ERROR(CheckShape(kApi, "weightOptional", weightOptional, {c}));
    OPENACLNN_RETURN_IF_ERROR(CheckLossShape("lossOut", lossOut, reduction, n));
    OPENACLNN_RETURN_IF_ERROR(CheckShape(kApi, "logProbOut", logProbOut, {n, c}));
    const bool zloss_empty = zlossOut->view_dims == std::vector<int64_t>{0};
    if (returnZloss || !zloss_empty) {
        const aclnnStatus shape = CheckLossShape("zlossOut", zlossOut, reduction, n);
        if (shape != ACLNN_SUCCESS) {
            if (returnZloss) return shape;
            return Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: zlossOut has shape %s, expected %s or [0] (returnZloss is "
                        "false)", kApi, DimsToString(zlossOut->view_dims).c_str(),
                        reduction == Reduction::kNone ? DimsToString({n}).c_str() : "[] or [1]");
        }
    }
    {
        const bool empty_ok = !zloss && lseForZlossOut->view_dims == std::vector<int64_t>{0};
        if (!empty_ok && lseForZlossOut->view_dims != std::vector<int64_t>{n}) {
            return Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: lseForZlossOut has shape %s, expected [%lld]%s", kApi,
                        DimsToString(lseForZlossOut->view_dims).c_str(), static_cast<long long>(n),
                        zloss ? " (lseSquareScaleForZloss is non-zero)" : " or [0] (the z-loss scale is 0)");
        }
    }
    const struct {
        const char *name;
        const aclTensor *tensor;
    } inputs[] = {{"input", input}, {"target", target}, {"weightOptional", weightOptional}},
      outputs[] = {{"lossOut", lossOut}, {"logProbOut", logProbOut}, {"zlossOut", zlossOut},
                   {"lseForZlossOut", lseForZlossOut}};
    for (const auto &entry : inputs) {
        if (entry.tensor) OPENACLNN_RETURN_IF_ERROR(CheckViewInStorage(kApi, entry.name, entry.tensor));
    }
    for (const auto &entry : outputs) OPENACLNN_RETURN_IF_ERROR(CheckViewInStorage(kApi, entry.name, entry.tensor));

    // ---- aliasing (161002): logProbOut may be input itself; otherwise no output overlaps an input or another
    // output ----
    for (size_t k = 0; k < std::size(outputs); ++k) {
        const auto &out = outputs[k];
        if (OverlapsItself(out.tensor)) {
            return Fail(ACLNN_ERR_PARAM_INVALID,
                        "%s: %s (shape %s, strides %s) has elements that share an address, expected a view whose "
                        "elements are distinct",
                        kApi, out.name, DimsToString(out.tensor->view_dims).c_str(),
                        DimsToString(out.tensor->strides).c_str());
        }
        for (const auto &in : inputs) {
            if (!in.tensor) continue;
            if (k == kLogProbOut && in.tensor == input && SameView(out.tensor, input)) continue;
            if (MayOverlap(out.tensor, in.tensor)) {
                return Fail(ACLNN_ERR_PARAM_INVALID,
                            "%s: %s overlaps %s in memory, expected every output separate from the inputs (only "
                            "logProbOut may be exactly input, for an in-place call)",
                            kApi, out.name, in.name);
            }
        }
        for (size_t other = 0; other < k; ++other) {
            if (MayOverlap(out.tensor, outputs[other].tensor)) {
                return Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s overlaps %s in memory, expected separate outputs", kApi,
                            out.name, outputs[other].name);
            }
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
    problem->return_zloss = returnZloss;
    problem->inputs[kInput] = MakeOperand(input);
    problem->inputs[kTarget] = MakeOperand(target);
    problem->inputs[kWeight] = MakeOperand(weightOptional);
    problem->outputs[kLossOut] = MakeOperand(lossOut);
    problem->outputs[kLogProbOut] = MakeOperand(logProbOut);
    problem->outputs[kZlossOut] = MakeOperand(zlossOut);
    problem->outputs[kLseForZlossOut] = MakeOperand(lseForZlossOut);
    return ACLNN_SUCCESS;
}

}  // namespace openaclnn::cross_entropy_loss
