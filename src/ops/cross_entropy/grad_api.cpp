// aclnnCrossEntropyLossGrad: phase 1 checks, plans and builds an executor; phase 2 queues it. No math here.
#include <memory>

#include "aclnnop/aclnn_cross_entropy_loss_grad.h"
#include "grad_plan.h"
#include "grad_problem.h"
#include "grad_rows.h"
#include "runtime/runtime.h"

namespace openaclnn::cross_entropy {
namespace {

constexpr const char *kOpName = "aclnnCrossEntropyLossGrad";
// The workspace holds the coefficient table, then (bf16 with weights) the weights de-interleaved for the kernel
// (SplitWeightPairs); each is aligned inside it, whatever address the caller passes.
constexpr uint64_t kWorkspaceAlignment = 64;

uint64_t AlignUp(uint64_t value) {
    return (value + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

// bf16 with contiguous weights: the kernel's pair loop reads the weights de-interleaved (GradKernelArgs::
// weight_pairs; strided weights are gathered in chunks instead). Making them is a pass over the C weights, which pays
// for itself over many rows only: 1 x 152064 smoothed+weighted took 1.5x the time with it.
constexpr int64_t kWeightPairsMinRows = 16;

bool NeedsWeightPairs(const CrossEntropyGradProblem &p) {
    const Operand &weight = p.inputs[kWeight];
    return p.dtype == ACL_BF16 && weight.present && weight.stride0 == 1 && p.n >= kWeightPairsMinRows;
}

// Where the de-interleaved weights start in the (aligned) workspace: after the coefficient table.
uint64_t WeightPairsOffset(const CrossEntropyGradProblem &p) {
    return AlignUp(static_cast<uint64_t>(p.n) * sizeof(GradRowCoefficients));
}

GradKernelArgs MakeKernelArgs(const CrossEntropyGradProblem &p, const GradRowCoefficients *rows,
                              const float *weight_pairs) {
    const Operand &log_prob = p.inputs[kLogProb];
    const Operand &weight = p.inputs[kWeight];
    GradKernelArgs args{};
    args.n = p.n;
    args.c = p.c;
    args.dtype = p.dtype;
    args.log_prob = log_prob.Base();
    args.log_prob_row_stride = log_prob.stride0;
    args.log_prob_col_stride = log_prob.stride1;
    args.out = p.out.MutableBase();
    args.out_row_stride = p.out.stride0;
    args.out_col_stride = p.out.stride1;
    args.weight = weight.present ? reinterpret_cast<const float *>(weight.Base()) : nullptr;
    args.weight_stride = weight.present ? weight.stride0 : 0;
    args.weight_pairs = weight_pairs;
    args.rows = rows;
    args.label_smoothing = p.label_smoothing != 0.0;
    args.z_loss = p.zloss_scale != 0.0;
    return args;
}

// The prologue of one call, shared by the plan's parts (RunGradPlan): part k collects its share of the row chunks
// and weighs its share of the weights (their traits and sum; the last part also makes the weights' de-interleaved
// copy for bf16), and each part fills the coefficients of its own rows. Part 0 reports a bad target.
class GradTaskPrologue final : public GradPrologue {
public:
    GradTaskPrologue(const CrossEntropyGradProblem &problem, const GradKernelInfo &kernel, GradRowCoefficients *rows,
                     float *weight_pairs, TaskContext &context)
        : problem_(problem), kernel_(kernel), builder_(problem, rows), weight_pairs_(weight_pairs), context_(context) {}

    void Collect(int part, int parts) override {
        const int64_t chunks = builder_.Chunks();
        for (int64_t k = chunks * part / parts; k < chunks * (part + 1) / parts; ++k) builder_.Collect(k);
    }

    void Weigh(int part, int parts) override {
        builder_.Weigh(part, parts, kernel_.weigh);
        if (part != parts - 1) return;
        if (weight_pairs_ != nullptr) {
            SplitWeightPairs(reinterpret_cast<const float *>(problem_.inputs[kWeight].Base()), problem_.c,
                             weight_pairs_);
        }
    }

    void Prepare(int part, int64_t row_begin, int64_t row_end) override {
        builder_.Fill(builder_.Finish(), row_begin, row_end);
        if (part == 0) builder_.ReportBadTargets(context_);
    }

    bool PrepareNeedsWeights() const override {
        return problem_.inputs[kWeight].present && problem_.label_smoothing != 0.0;
    }

    GradWeightTraits WeightTraits() const override { return builder_.WeightTraits(); }

    int64_t WeightColumns() const override { return problem_.inputs[kWeight].present ? problem_.c : 0; }

private:
    const CrossEntropyGradProblem &problem_;
    const GradKernelInfo &kernel_;
    GradRowsBuilder builder_;
    float *weight_pairs_;
    TaskContext &context_;
};

class CrossEntropyGradState final : public OperatorState {
public:
    CrossEntropyGradState(const CrossEntropyGradProblem &problem, const GradPlan &plan)
        : problem_(problem), plan_(plan) {}

    const char *Name() const override { return kOpName; }

    uint64_t WorkspaceSize() const override {
        if (problem_.Empty()) return 0;
        uint64_t size = WeightPairsOffset(problem_);
        if (NeedsWeightPairs(problem_)) size += static_cast<uint64_t>(WeightPairsSize(problem_.c)) * sizeof(float);
        return size + kWorkspaceAlignment;
    }

    aclnnStatus SetInputAddr(size_t index, void *addr) override {
        if (index >= static_cast<size_t>(kGradInputCount)) {
            return Fail(ACLNN_ERR_PARAM_INVALID,
                        "aclSetInputTensorAddr: index is %zu, expected 0..5 (gradLoss, logProb, target, "
                        "weightOptional, gradZlossOptional, lseForZlossOptional)",
                        index);
        }
        return RebindOperand(problem_.inputs[index], index, "aclSetInputTensorAddr", addr);
    }

    aclnnStatus SetOutputAddr(size_t index, void *addr) override {
        if (index != 0) {
            return Fail(ACLNN_ERR_PARAM_INVALID, "aclSetOutputTensorAddr: index is %zu, expected 0 (out)", index);
        }
        return RebindOperand(problem_.out, index, "aclSetOutputTensorAddr", addr);
    }

    Task MakeTask(void *workspace) const override {
        return [problem = problem_, plan = plan_, workspace](TaskContext &context) {
            if (problem.Empty()) return;
            const uint64_t address = AlignUp(reinterpret_cast<uintptr_t>(workspace));
            auto *rows = reinterpret_cast<GradRowCoefficients *>(address);
            float *weight_pairs = nullptr;
            if (NeedsWeightPairs(problem)) {
                weight_pairs = reinterpret_cast<float *>(address + WeightPairsOffset(problem));
            }
            GradTaskPrologue prologue(problem, *plan.kernel, rows, weight_pairs, context);
            RunGradPlan(plan, MakeKernelArgs(problem, rows, weight_pairs), &prologue);
        };
    }

private:
    CrossEntropyGradProblem problem_;
    GradPlan plan_;
};

}  // namespace
}  // namespace openaclnn::cross_entropy

using namespace openaclnn;
using namespace openaclnn::cross_entropy;

extern "C" {

aclnnStatus aclnnCrossEntropyLossGradGetWorkspaceSize(const aclTensor *gradLoss, const aclTensor *logProb,
                                                      const aclTensor *target, const aclTensor *weightOptional,
                                                      const aclTensor *gradZlossOptional,
                                                      const aclTensor *lseForZlossOptional, char *reductionOptional,
                                                      int64_t ignoreIndex, double labelSmoothing,
                                                      double lseSquareScaleForZloss, const aclTensor *out,
                                                      uint64_t *workspaceSize, aclOpExecutor **executor) {
    CrossEntropyGradProblem problem;
    const aclnnStatus status =
        CheckCrossEntropyGrad(gradLoss, logProb, target, weightOptional, gradZlossOptional, lseForZlossOptional,
                              reductionOptional, ignoreIndex, labelSmoothing, lseSquareScaleForZloss, out,
                              workspaceSize, executor, &problem);
    if (status != ACLNN_SUCCESS) return status;

    GradPlan plan{};
    if (!problem.Empty()) {
        plan = MakeGradPlan(MakeKernelArgs(problem, nullptr, nullptr), ConfiguredThreads());
        Log(1, "%s: N=%lld C=%lld %s: kernel %s, %d thread(s) (%lld x %lld blocks)", kOpName,
            static_cast<long long>(problem.n), static_cast<long long>(problem.c), DataTypeName(problem.dtype),
            plan.kernel->name, plan.threads, static_cast<long long>(plan.row_blocks),
            static_cast<long long>(plan.col_blocks));
    }
    auto state = std::make_unique<CrossEntropyGradState>(problem, plan);
    *workspaceSize = state->WorkspaceSize();
    *executor = CreateExecutor(std::move(state));
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnCrossEntropyLossGrad(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                      aclrtStream stream) {
    return RunExecutor(kOpName, workspace, workspaceSize, executor, stream);
}

}  // extern "C"
