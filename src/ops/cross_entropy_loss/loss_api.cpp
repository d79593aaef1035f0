// aclnnCrossEntropyLoss: phase 1 checks, plans and builds an executor; phase 2 queues it. No math here.
#include <memory>

#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "loss_plan.h"
#include "loss_problem.h"
#include "loss_rows.h"
#include "runtime/runtime.h"

namespace openaclnn::cross_entropy_loss {
namespace {

constexpr const char *kOpName = "aclnnCrossEntropyLoss";
// The row table is aligned inside the workspace, whatever address the caller passes.
constexpr uint64_t kWorkspaceAlignment = 64;

LossKernelArgs MakeKernelArgs(const CrossEntropyLossProblem &p, LossRowStats *rows) {
    const Operand &input = p.inputs[kInput];
    const Operand &weight = p.inputs[kWeight];
    const Operand &log_prob = p.outputs[kLogProbOut];
    LossKernelArgs args{};
    args.n = p.n;
    args.c = p.c;
    args.dtype = p.dtype;
    args.input = input.Base();
    args.input_row_stride = input.stride0;
    args.input_col_stride = input.stride1;
    args.log_prob = log_prob.MutableBase();
    args.log_prob_row_stride = log_prob.stride0;
    args.log_prob_col_stride = log_prob.stride1;
    args.smoothing = p.label_smoothing > 0.0;
    args.weight = weight.present ? reinterpret_cast<const float *>(weight.Base()) : nullptr;
    args.weight_stride = weight.present ? weight.stride0 : 0;
    args.rows = rows;
    return args;
}

class CrossEntropyLossState final : public OperatorState {
public:
    CrossEntropyLossState(const CrossEntropyLossProblem &problem, const LossPlan &plan)
        : problem_(problem), plan_(plan) {}

    const char *Name() const override { return kOpName; }

    uint64_t WorkspaceSize() const override {
        if (problem_.n == 0) return 0;
        return static_cast<uint64_t>(problem_.n) * sizeof(LossRowStats) + kWorkspaceAlignment;
    }

    aclnnStatus SetInputAddr(size_t index, void *addr) override {
        if (index >= static_cast<size_t>(kLossInputCount)) {
            return Fail(ACLNN_ERR_PARAM_INVALID,
                        "aclSetInputTensorAddr: index is %zu, expected 0..2 (input, target, weightOptional)", index);
        }
        return RebindOperand(problem_.inputs[index], index, "aclSetInputTensorAddr", addr);
    }

    aclnnStatus SetOutputAddr(size_t index, void *addr) override {
        if (index >= static_cast<size_t>(kLossOutputCount)) {
            return Fail(ACLNN_ERR_PARAM_INVALID,
                        "aclSetOutputTensorAddr: index is %zu, expected 0..3 (lossOut, logProbOut, zlossOut, "
                        "lseForZlossOut)",
                        index);
        }
        return RebindOperand(problem_.outputs[index], index, "aclSetOutputTensorAddr", addr);
    }

    Task MakeTask(void *workspace) const override {
        return [problem = problem_, plan = plan_, workspace](TaskContext &context) {
            LossRowStats *rows = nullptr;
            if (problem.n > 0) {
                auto address = reinterpret_cast<uintptr_t>(workspace);
                address = (address + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
                rows = reinterpret_cast<LossRowStats *>(address);
                GatherLossRows(problem, rows, context);
                RunLossPlan(plan, MakeKernelArgs(problem, rows));
            }
            FinishLoss(problem, rows);
        };
    }

private:
    CrossEntropyLossProblem problem_;
    LossPlan plan_;
};

}  // namespace
}  // namespace openaclnn::cross_entropy_loss

using namespace openaclnn;
using namespace openaclnn::cross_entropy_loss;

extern "C" {

aclnnStatus aclnnCrossEntropyLossGetWorkspaceSize(const aclTensor *input, const aclTensor *target,
                                                  const aclTensor *weightOptional, char *reductionOptional,
                                                  int64_t ignoreIndex, double labelSmoothing,
                                                  double lseSquareScaleForZloss, bool returnZloss,
                                                  const aclTensor *lossOut, const aclTensor *logProbOut,
                                                  const aclTensor *zlossOut, const aclTensor *lseForZlossOut,
                                                  uint64_t *workspaceSize, aclOpExecutor **executor) {
    CrossEntropyLossProblem problem;
    const aclnnStatus status = CheckCrossEntropyLoss(
        input, target, weightOptional, reductionOptional, ignoreIndex, labelSmoothing, lseSquareScaleForZloss,
        returnZloss, lossOut, logProbOut, zlossOut, lseForZlossOut, workspaceSize, executor, &problem);
    if (status != ACLNN_SUCCESS) return status;

    LossPlan plan{nullptr, 1, false, false};
    if (problem.n > 0) {
        plan = MakeLossPlan(MakeKernelArgs(problem, nullptr), ConfiguredThreads());
        Log(1, "%s: N=%lld C=%lld %s: kernel %s, %d thread(s)%s%s", kOpName, static_cast<long long>(problem.n),
            static_cast<long long>(problem.c), DataTypeName(problem.dtype), plan.kernel->name, plan.threads,
            plan.split_rows ? " sharing each row" : "", plan.stream_stores ? ", streaming stores" : "");
    }
    auto state = std::make_unique<CrossEntropyLossState>(problem, plan);
    *workspaceSize = state->WorkspaceSize();
    *executor = CreateExecutor(std::move(state));
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnCrossEntropyLoss(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                  aclrtStream stream) {
    return RunExecutor(kOpName, workspace, workspaceSize, executor, stream);
}

}  // extern "C"
