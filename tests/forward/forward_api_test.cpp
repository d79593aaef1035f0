// The API contract of aclnnCrossEntropyLoss: every status code of DESIGN.md section 2 in its check order, with
// the message naming the parameter; phase 2's workspace and executor rules; out-of-range targets reported at
// sync; N or C zero; all-ignored mean; in-place logProb.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "forward_harness.h"

namespace openaclnn::test {
namespace {

constexpr int64_t kN = 4;
constexpr int64_t kC = 5;

// A valid call whose parts a test replaces one at a time.
struct Call {
    std::unique_ptr<DeviceTensor> input_storage, target_storage, weight_storage, loss_storage, log_prob_storage,
        zloss_storage, lse_storage;
    const aclTensor *input, *target, *weight, *loss, *log_prob, *zloss, *lse;
    const char *reduction = "mean";
    int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    double zloss_scale = 0.0;
    bool return_zloss = false;
    uint64_t workspace_size = 0;
    aclOpExecutor *executor = nullptr;
    uint64_t *workspace_size_ptr = &workspace_size;
    aclOpExecutor **executor_ptr = &executor;

    explicit Call(aclDataType dtype = ACL_FLOAT) {
        input_storage = std::make_unique<DeviceTensor>(dtype, ContiguousLayout({kN, kC}));
        for (int64_t i = 0; i < kN; ++i) {
            for (int64_t j = 0; j < kC; ++j) input_storage->Set(i, j, 0.25 * static_cast<double>(i - j));
        }
        input_storage->Upload();
        target_storage = std::make_unique<DeviceTensor>(ACL_INT64, ContiguousLayout({kN}));
        for (int64_t i = 0; i < kN; ++i) target_storage->SetInt(i, i % kC);
        target_storage->Upload();
        weight_storage = std::make_unique<DeviceTensor>(ACL_FLOAT, ContiguousLayout({kC}));
        for (int64_t j = 0; j < kC; ++j) weight_storage->Set(j, 0, 1.0 + 0.1 * static_cast<double>(j));
        weight_storage->Upload();
        loss_storage = std::make_unique<DeviceTensor>(dtype, ContiguousLayout({}));
        log_prob_storage = std::make_unique<DeviceTensor>(dtype, ContiguousLayout({kN, kC}));
        zloss_storage = std::make_unique<DeviceTensor>(dtype, ContiguousLayout({}));
        lse_storage = std::make_unique<DeviceTensor>(dtype, ContiguousLayout({kN}));
        input = input_storage->get();
        target = target_storage->get();
        weight = weight_storage->get();
        loss = loss_storage->get();
        log_prob = log_prob_storage->get();
        zloss = zloss_storage->get();
        lse = lse_storage->get();
    }

    aclnnStatus Phase1() {
        return aclnnCrossEntropyLossGetWorkspaceSize(input, target, weight, const_cast<char *>(reduction),
                                                     ignore_index, label_smoothing, zloss_scale, return_zloss, loss,
                                                     log_prob, zloss, lse, workspace_size_ptr, executor_ptr);
    }
};

// Phase 1 fails with `code` and a message that mentions `name`.
void ExpectPhase1(Call &call, aclnnStatus code, const std::string &name) {
    const aclnnStatus status = call.Phase1();
    EXPECT_EQ(status, code) << RecentError();
    const std::string message = RecentError();
    EXPECT_NE(message.find(name), std::string::npos) << "message: " << message << "\nexpected to name: " << name;
}

DeviceTensor *Keep(std::vector<std::unique_ptr<DeviceTensor>> &keep, aclDataType dtype, const Layout &layout) {
    keep.push_back(std::make_unique<DeviceTensor>(dtype, layout));
    return keep.back().get();
}

TEST(ForwardApi, ValidCallSucceeds) {
    Call call;
    ASSERT_EQ(call.Phase1(), ACLNN_SUCCESS) << RecentError();
    void *workspace = nullptr;
    if (call.workspace_size) {
        ASSERT_EQ(aclrtMalloc(&workspace, call.workspace_size, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    }
    EXPECT_EQ(aclnnCrossEntropyLoss(workspace, call.workspace_size, call.executor, TestStream()), ACLNN_SUCCESS);
    EXPECT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
    if (workspace) aclrtFree(workspace);
}

TEST(ForwardApi, NullPointers161001) {
    const char *names[] = {"input", "target", "lossOut", "logProbOut", "zlossOut", "lseForZlossOut"};
    for (int k = 0; k < 6; ++k) {
        Call call;
        const aclTensor **slots[] = {&call.input, &call.target, &call.loss, &call.log_prob, &call.zloss, &call.lse};
        *slots[k] = nullptr;
        ExpectPhase1(call, ACLNN_ERR_PARAM_NULLPTR, names[k]);
    }
    {
        Call call;
        call.workspace_size_ptr = nullptr;
        ExpectPhase1(call, ACLNN_ERR_PARAM_NULLPTR, "workspaceSize");
    }
    {
        Call call;
        call.executor_ptr = nullptr;
        ExpectPhase1(call, ACLNN_ERR_PARAM_NULLPTR, "executor");
    }
    {
        Call call;
        call.weight = nullptr;  // optional
        EXPECT_EQ(call.Phase1(), ACLNN_SUCCESS) << RecentError();
        aclDestroyAclOpExecutor(call.executor);
    }
    {
        // A handle that is not a live tensor.
        Call call;
        aclTensor *dead = CreateTensor(ContiguousLayout({kN}), ACL_INT64, call.target_storage->device());
        aclDestroyTensor(dead);
        call.target = dead;
        ExpectPhase1(call, ACLNN_ERR_PARAM_NULLPTR, "target");
    }
    {
        // Null comes before dtype: a NULL lossOut and a wrong input dtype report the NULL.
        Call call;
        call.loss = nullptr;
        call.input = call.input_storage->View(ContiguousLayout({kN, kC}), ACL_INT32);
        ExpectPhase1(call, ACLNN_ERR_PARAM_NULLPTR, "lossOut");
    }
}

TEST(ForwardApi, DataTypes161002) {
    std::vector<std::unique_ptr<DeviceTensor>> keep;
    {
        Call call;
        call.input = Keep(keep, ACL_DOUBLE, ContiguousLayout({kN, kC}))->get();
        ExpectPhase1(call, ACLNN_ERR_PARAM_INVALID, "input");
    }
    {
        Call call;
        call.target = Keep(keep, ACL_FLOAT, ContiguousLayout({kN}))->get();
        ExpectPhase1(call, ACLNN_ERR_PARAM_INVALID, "target");
    }
    {
        Call call;
        call.weight = Keep(keep, ACL_FLOAT16, ContiguousLayout({kC}))->get();
        ExpectPhase1(call, ACLNN_ERR_PARAM_INVALID, "weightOptional");
    }
    const char *names[] = {"lossOut", "logProbOut", "zlossOut", "lseForZlossOut"};
    const Layout layouts[] = {ContiguousLayout({}), ContiguousLayout({kN, kC}), ContiguousLayout({}),
                              ContiguousLayout({kN})};
    for (int k = 0; k < 4; ++k) {
        Call call;
        const aclTensor **slots[] = {&call.loss, &call.log_prob, &call.zloss, &call.lse};
        *slots[k] = Keep(keep, ACL_FLOAT16, layouts[k])->get();
        ExpectPhase1(call, ACLNN_ERR_PARAM_INVALID, names[k]);
    }
    {
        // dtype comes before attributes.
        Call call;
        call.target = Keep(keep, ACL_FLOAT, ContiguousLayout({kN}))->get();
        call.reduction = "avg";
        ExpectPhase1(call, ACLNN_ERR_PARAM_INVALID, "target");
    }
}

TEST(ForwardApi, Attributes561002) {
    {
        Call call;
        call.reduction = "avg";
        ExpectPhase1(call, ACLNN_ERR_INNER_TILING_ERROR, "reductionOptional");
    }
    for (const double ls : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::infinity()}) {
        Call call;
        call.label_smoothing = ls;
        ExpectPhase1(call, ACLNN_ERR_INNER_TILING_ERROR, "labelSmoothing");
    }
    for (const double scale : {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()}) {
        Call call;
        call.zloss_scale = scale;
        ExpectPhase1(call, ACLNN_ERR_INNER_TILING_ERROR, "lseSquareScaleForZloss");
    }
    {
        // attributes come before shapes.
        Call call;
        call.reduction = "avg";
        call.loss = call.log_prob;
        ExpectPhase1(call, ACLNN_ERR_INNER_TILING_ERROR, "reductionOptional");
    }
    {
        Call call;  // NULL reduction means mean
        call.reduction = nullptr;
        EXPECT_EQ(call.Phase1(), ACLNN_SUCCESS) << RecentError();
        aclDestroyAclOpExecutor(call.executor);
    }
}

TEST(ForwardApi, Shapes561002) {
    std::vector<std::unique_ptr<DeviceTensor>> keep;
    struct Case {
        const char *name;
        int slot;  // 0 input, 1 target, 2 weight, 3 loss, 4 logProb, 5 zloss, 6 lse
        Layout layout;
        const char *reduction;
        bool return_zloss;
        double scale;
    };
    const Case cases[] = {
        {"input", 0, ContiguousLayout({kN * kC}), "mean", false, 0.0},
        {"input", 0, ContiguousLayout({1, kN, kC}), "mean", false, 0.0},
        {"target", 1, ContiguousLayout({kN + 1}), "mean", false, 0.0},
        {"target", 1, ContiguousLayout({kN, 1}), "mean", false, 0.0},
        {"weightOptional", 2, ContiguousLayout({kC - 1}), "mean", false, 0.0},
        {"lossOut", 3, ContiguousLayout({kN}), "mean", false, 0.0},
        {"lossOut", 3, ContiguousLayout({}), "none", false, 0.0},
        {"lossOut", 3, ContiguousLayout({2}), "sum", false, 0.0},
        {"logProbOut", 4, ContiguousLayout({kN, kC + 1}), "mean", false, 0.0},
        {"zlossOut", 5, ContiguousLayout({kN}), "mean", true, 0.0},
        {"zlossOut", 5, ContiguousLayout({0}), "mean", true, 0.0},
        {"zlossOut", 5, ContiguousLayout({3}), "mean", false, 0.0},
        {"lseForZlossOut", 6, ContiguousLayout({kN + 1}), "mean", false, 0.0},
        {"lseForZlossOut", 6, ContiguousLayout({0}), "mean", false, 0.5},
        {"lseForZlossOut", 6, ContiguousLayout({}), "mean", false, 0.0},
    };
    for (const Case &c : cases) {
        Call call;
        const aclDataType dtype = c.slot == 1 ? ACL_INT64 : (c.slot == 2 ? ACL_FLOAT : ACL_FLOAT);
        const aclTensor **slots[] = {&call.input, &call.target, &call.weight, &call.loss,
                                     &call.log_prob, &call.zloss, &call.lse};
        *slots[c.slot] = Keep(keep, dtype, c.layout)->get();
        call.reduction = c.reduction;
        call.return_zloss = c.return_zloss;
        call.zloss_scale = c.scale;
        SCOPED_TRACE(std::string(c.name) + " " + c.layout.Describe() + " reduction " + c.reduction);
        ExpectPhase1(call, ACLNN_ERR_INNER_TILING_ERROR, c.name);
    }
    {
        // Accepted alternatives: [1] loss, [0] zloss without returnZloss, [0] lse with scale 0.
        Call call;
        call.loss = Keep(keep, ACL_FLOAT, ContiguousLayout({1}))->get();
        call.zloss = Keep(keep, ACL_FLOAT, ContiguousLayout({0}))->get();
        call.lse = Keep(keep, ACL_FLOAT, ContiguousLayout({0}))->get();
        EXPECT_EQ(call.Phase1(), ACLNN_SUCCESS) << RecentError();
        aclDestroyAclOpExecutor(call.executor);
    }
    {
        // A view reaching outside its storage.
        Call call;
        DeviceTensor *storage = Keep(keep, ACL_FLOAT, ContiguousLayout({kN, kC}));
        Layout outside = ContiguousLayout({kN, kC});
        outside.offset = 1;
        call.log_prob = storage->View(outside, ACL_FLOAT);
        ExpectPhase1(call, ACLNN_ERR_INNER_TILING_ERROR, "logProbOut");
    }
}

TEST(ForwardApi, Aliasing161002) {
    {
        // logProbOut exactly the input: in place, accepted.
        Call call;
        call.log_prob = call.input_storage->Alias();
        EXPECT_EQ(call.Phase1(), ACLNN_SUCCESS) << RecentError();
        aclDestroyAclOpExecutor(call.executor);
    }
    std::vector<std::unique_ptr<DeviceTensor>> keep;
    {
        Call call;
        DeviceTensor *big = Keep(keep, ACL_FLOAT, ContiguousLayout({2 * kN * kC}));
        call.input = big->View(StridedLayout({kN, kC}, {kC, 1}, 0), ACL_FLOAT);
        call.log_prob = big->View(StridedLayout({kN, kC}, {kC, 1}, kC), ACL_FLOAT);  // the input shifted by a row: refused
        ExpectPhase1(call, ACLNN_ERR_PARAM_INVALID, "logProbOut");
    }
    {
        // lossOut inside the input.
        Call call;
        call.loss = call.input_storage->View(ContiguousLayout({}), ACL_FLOAT);
        ExpectPhase1(call, ACLNN_ERR_PARAM_INVALID, "lossOut");
    }
    {
        // lseForZlossOut over the target.
        Call call;
        call.lse = call.target_storage->View(ContiguousLayout({kN}), ACL_FLOAT);
        ExpectPhase1(call, ACLNN_ERR_PARAM_INVALID, "lseForZlossOut");
    }
    {
        // Two outputs on the same memory.
        Call call;
        call.zloss = call.loss_storage->Alias();
        ExpectPhase1(call, ACLNN_ERR_PARAM_INVALID, "zlossOut");
    }
}

TEST(ForwardApi, WorkspaceAndExecutor) {
    {
        Call call;
        ASSERT_EQ(call.Phase1(), ACLNN_SUCCESS);
        ASSERT_GT(call.workspace_size, 0u);
        EXPECT_EQ(aclnnCrossEntropyLoss(nullptr, call.workspace_size, call.executor, TestStream()),
                  ACLNN_ERR_PARAM_NULLPTR);
        void *small = nullptr;
        ASSERT_EQ(aclrtMalloc(&small, 8, ACL_MEM_MALLOC_HUGE_FIRST), 0);
        EXPECT_EQ(aclnnCrossEntropyLoss(small, 8, call.executor, TestStream()), ACLNN_ERR_PARAM_INVALID);
        aclrtFree(small);
        aclDestroyAclOpExecutor(call.executor);
    }
    {
        // Single use: the second phase 2 on a spent executor is an error, not a crash.
        Call call;
        ASSERT_EQ(call.Phase1(), ACLNN_SUCCESS);
        void *workspace = nullptr;
        ASSERT_EQ(aclrtMalloc(&workspace, call.workspace_size, ACL_MEM_MALLOC_HUGE_FIRST), 0);
        EXPECT_EQ(aclnnCrossEntropyLoss(workspace, call.workspace_size, call.executor, TestStream()), ACLNN_SUCCESS);
        EXPECT_NE(aclnnCrossEntropyLoss(workspace, call.workspace_size, call.executor, TestStream()), ACLNN_SUCCESS);
        EXPECT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
        aclrtFree(workspace);
    }
    {
        // Repeatable: run twice, rebinding the input (index 0) to another buffer in between.
        Call call;
        ASSERT_EQ(call.Phase1(), ACLNN_SUCCESS);
        ASSERT_EQ(aclSetAclOpExecutorRepeatable(call.executor), ACLNN_SUCCESS);
        void *workspace = nullptr;
        ASSERT_EQ(aclrtMalloc(&workspace, call.workspace_size, ACL_MEM_MALLOC_HUGE_FIRST), 0);
        EXPECT_EQ(aclnnCrossEntropyLoss(workspace, call.workspace_size, call.executor, TestStream()), ACLNN_SUCCESS);
        ASSERT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
        call.loss_storage->Download();
        const double first = call.loss_storage->Get(0);
        DeviceTensor other(ACL_FLOAT, ContiguousLayout({kN, kC}));
        for (int64_t i = 0; i < kN; ++i) {
            for (int64_t j = 0; j < kC; ++j) other.Set(i, j, 0.0);
        }
        other.Upload();
        EXPECT_EQ(aclSetInputTensorAddr(call.executor, 0, const_cast<aclTensor *>(call.input), other.device()), ACLNN_SUCCESS);
        EXPECT_NE(aclSetInputTensorAddr(call.executor, 3, const_cast<aclTensor *>(call.input), other.device()), ACLNN_SUCCESS);
        EXPECT_NE(aclSetOutputTensorAddr(call.executor, 4, const_cast<aclTensor *>(call.loss), other.device()), ACLNN_SUCCESS);
        EXPECT_EQ(aclnnCrossEntropyLoss(workspace, call.workspace_size, call.executor, TestStream()), ACLNN_SUCCESS);
        ASSERT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
        call.loss_storage->Download();
        EXPECT_NE(call.loss_storage->Get(0), first);
        EXPECT_NEAR(call.loss_storage->Get(0), std::log(static_cast<double>(kC)), 1e-6);  // uniform logits
        EXPECT_EQ(aclDestroyAclOpExecutor(call.executor), ACLNN_SUCCESS);
        aclrtFree(workspace);
    }
}

TEST(ForwardApi, OutOfRangeTargetReportedAtSync507035) {
    for (const int64_t bad : {int64_t{kC}, int64_t{-3}, int64_t{1} << 40}) {
        ForwardCase fc = RandomForwardCase(5, ACL_FLOAT, kN, kC);
        fc.target_dtype = ACL_INT64;
        fc.ignore_index = -100;
        fc.target = {0, bad, 2, 3};
        fc.reduction = Reduction::kNone;
        ForwardOutcome got = RunForward(fc, TestStream());
        ASSERT_EQ(got.phase1, ACLNN_SUCCESS);
        EXPECT_EQ(got.phase2, ACLNN_SUCCESS);
        EXPECT_EQ(got.sync, ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
        EXPECT_NE(got.sync_message.find("target[1]"), std::string::npos) << got.sync_message;
        EXPECT_NE(got.sync_message.find(std::to_string(bad)), std::string::npos) << got.sync_message;
        EXPECT_TRUE(std::isnan(got.loss[1]));
        EXPECT_FALSE(std::isnan(got.loss[0]));
        CompareForward(fc, ReferenceForward(fc), got);
        // The error is reported once: the next synchronisation is clean.
        EXPECT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
        fc.reduction = Reduction::kMean;
        got = RunForward(fc, TestStream());
        EXPECT_EQ(got.sync, ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
        EXPECT_TRUE(std::isnan(got.loss[0]));
    }
}

TEST(ForwardApi, EmptyAndDegenerate) {
    for (const Reduction reduction : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
        // N == 0: mean is NaN (0/0, as PyTorch), sum is 0, none is empty.
        ForwardCase fc = RandomForwardCase(9, ACL_FLOAT, 0, 7);
        fc.reduction = reduction;
        fc.return_zloss = true;
        fc.zloss_empty = false;
        fc.zloss_scale = 0.25;
        fc.lse_empty = false;
        ForwardOutcome got = RunForward(fc, TestStream());
        ASSERT_EQ(got.phase1, ACLNN_SUCCESS) << got.phase1_message;
        EXPECT_EQ(got.sync, ACL_SUCCESS);
        CompareForward(fc, ReferenceForward(fc), got);
        if (reduction == Reduction::kMean) {
            EXPECT_TRUE(std::isnan(got.loss[0]));
        }
        if (reduction == Reduction::kSum) {
            EXPECT_EQ(got.loss[0], 0.0);
        }
        // C == 0: every row ignored gives loss 0 (none/sum) or NaN (mean) and lse = -inf.
        fc = RandomForwardCase(10, ACL_FLOAT, 3, 0);
        fc.reduction = reduction;
        fc.ignore_index = -100;
        fc.target = {-100, -100, -100};
        fc.lse_empty = false;
        got = RunForward(fc, TestStream());
        ASSERT_EQ(got.phase1, ACLNN_SUCCESS) << got.phase1_message;
        EXPECT_EQ(got.sync, ACL_SUCCESS);
        CompareForward(fc, ReferenceForward(fc), got);
        // C == 0 with a class index as target: no index lies in [0, 0), so the row is out of range as DESIGN.md
        // defines it (PyTorch raises "Target 0 is out of bounds"): its loss is NaN and the next synchronisation
        // returns 507035 naming it; ignored rows still give 0 and lse is log(0) = -inf on every row.
        fc = RandomForwardCase(12, ACL_FLOAT, 3, 0);
        fc.reduction = reduction;
        fc.ignore_index = -100;
        fc.target = {-100, 0, -100};
        fc.lse_empty = false;
        got = RunForward(fc, TestStream());
        ASSERT_EQ(got.phase1, ACLNN_SUCCESS) << got.phase1_message;
        EXPECT_EQ(got.phase2, ACLNN_SUCCESS);
        EXPECT_EQ(got.sync, ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
        EXPECT_NE(got.sync_message.find("target[1] is 0"), std::string::npos) << got.sync_message;
        EXPECT_NE(got.sync_message.find("[0, 0)"), std::string::npos) << got.sync_message;
        ASSERT_EQ(got.lse.size(), 3u);
        for (const double lse : got.lse) EXPECT_EQ(lse, -std::numeric_limits<double>::infinity());
        EXPECT_TRUE(std::isnan(got.loss[reduction == Reduction::kNone ? 1 : 0]));
        if (reduction == Reduction::kNone) {
            EXPECT_EQ(got.loss[0], 0.0);
            EXPECT_EQ(got.loss[2], 0.0);
        }
        CompareForward(fc, ReferenceForward(fc), got);
        EXPECT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);  // reported once
    }
    {
        // Mean over all-ignored rows: NaN, like PyTorch and CANN.
        ForwardCase fc = RandomForwardCase(11, ACL_BF16, 6, 9);
        fc.reduction = Reduction::kMean;
        fc.target.assign(6, fc.ignore_index);
        const ForwardOutcome got = RunForward(fc, TestStream());
        EXPECT_EQ(got.sync, ACL_SUCCESS);
        EXPECT_TRUE(std::isnan(got.loss[0]));
        CompareForward(fc, ReferenceForward(fc), got);
    }
}

}  // namespace
}  // namespace openaclnn::test
