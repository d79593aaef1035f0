// The API contract of aclnnCrossEntropyLossGrad (DESIGN.md section 2): every status code, in the documented check
// order, each with a message that names the parameter; empty problems; the workspace checks; the executor
// lifecycle (single use, repeatable, rebinding addresses); inputs left unchanged; ordering on a stream.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "acl_helpers.h"
#include "float_formats.h"
#include "grad_cases.h"
#include "random_inputs.h"
#include "reference.h"
#include "tolerance.h"

namespace openaclnn::test {
namespace {

constexpr int64_t kN = 4;
constexpr int64_t kC = 5;

// Leaves a known, unrelated message in aclGetRecentErrMsg, so that a check cannot pass on a stale message.
std::string ResetMessage() {
    EXPECT_EQ(aclrtFree(nullptr), ACL_ERROR_INVALID_PARAM);
    return RecentError();
}

class GradApiTest : public ::testing::Test {
protected:
    void SetUp() override {
        grad_loss_ = Make(ACL_FLOAT, {});
        grad_loss_none_ = Make(ACL_FLOAT, {kN});
        log_prob_ = Make(ACL_FLOAT, {kN, kC});
        target_ = Make(ACL_INT64, {kN});
        weight_ = Make(ACL_FLOAT, {kC});
        grad_zloss_ = Make(ACL_FLOAT, {});
        lse_ = Make(ACL_FLOAT, {kN});
        out_ = Make(ACL_FLOAT, {kN, kC});
        Rng rng(5);
        grad_loss_->Set(0, 0, 0.5);
        grad_zloss_->Set(0, 0, 0.25);
        for (int64_t i = 0; i < kN; ++i) {
            grad_loss_none_->Set(i, 0, 0.1 * static_cast<double>(i + 1));
            target_->SetInt(i, i % kC);
            lse_->Set(i, 0, 1.5);
            for (int64_t j = 0; j < kC; ++j) log_prob_->Set(i, j, std::log(1.0 / kC));
        }
        for (int64_t j = 0; j < kC; ++j) weight_->Set(j, 0, 1.0 + 0.25 * static_cast<double>(j));
        for (DeviceTensor *t : {grad_loss_, grad_loss_none_, log_prob_, target_, weight_, grad_zloss_, lse_, out_}) {
            t->Upload();
        }
    }

    DeviceTensor *Make(aclDataType dtype, const std::vector<int64_t> &dims) {
        return Keep(std::make_unique<DeviceTensor>(dtype, ContiguousLayout(dims)));
    }
    DeviceTensor *MakeLayout(aclDataType dtype, const Layout &layout) {
        return Keep(std::make_unique<DeviceTensor>(dtype, layout));
    }
    DeviceTensor *Keep(std::unique_ptr<DeviceTensor> t) {
        tensors_.push_back(std::move(t));
        return tensors_.back().get();
    }

    // A valid mean call with weight and z-loss.
    GradCall Valid() const {
        GradCall call;
        call.grad_loss = grad_loss_->get();
        call.log_prob = log_prob_->get();
        call.target = target_->get();
        call.weight = weight_->get();
        call.grad_zloss = grad_zloss_->get();
        call.lse = lse_->get();
        call.reduction = "mean";
        call.ignore_index = -100;
        call.label_smoothing = 0.1;
        call.zloss_scale = 0.01;
        call.out = out_->get();
        return call;
    }

    // Phase 1 must return `expected`, and, for a failure, leave a message that contains `name`.
    void Expect(const GradCall &call, aclnnStatus expected, const std::string &name, const std::string &what) {
        SCOPED_TRACE(what);
        const std::string sentinel = ResetMessage();
        uint64_t workspace = 12345;
        aclOpExecutor *executor = nullptr;
        const aclnnStatus status = GradPhase1(call, &workspace, &executor);
        EXPECT_EQ(status, expected);
        if (expected != ACLNN_SUCCESS) {
            const std::string message = RecentError();
            EXPECT_NE(message, sentinel) << "no new message";
            EXPECT_NE(message.find(name), std::string::npos) << "message should name " << name << ": " << message;
        }
        if (status == ACLNN_SUCCESS && executor != nullptr) {
            // Run it, so the single-use executor is consumed rather than leaked.
            void *ws = nullptr;
            if (workspace > 0) {
                ASSERT_EQ(aclrtMalloc(&ws, workspace, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
            }
            EXPECT_EQ(aclnnCrossEntropyLossGrad(ws, workspace, executor, TestStream()), ACLNN_SUCCESS);
            EXPECT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
            if (ws) aclrtFree(ws);
        }
    }

    std::vector<std::unique_ptr<DeviceTensor>> tensors_;
    DeviceTensor *grad_loss_, *grad_loss_none_, *log_prob_, *target_, *weight_, *grad_zloss_, *lse_, *out_;
};

TEST_F(GradApiTest, ValidCallSucceeds) { Expect(Valid(), ACLNN_SUCCESS, "", "valid"); }

TEST_F(GradApiTest, NullPointers) {
    GradCall c = Valid();
    c.grad_loss = nullptr;
    Expect(c, ACLNN_ERR_PARAM_NULLPTR, "gradLoss", "gradLoss NULL");
    c = Valid();
    c.log_prob = nullptr;
    Expect(c, ACLNN_ERR_PARAM_NULLPTR, "logProb", "logProb NULL");
    c = Valid();
    c.target = nullptr;
    Expect(c, ACLNN_ERR_PARAM_NULLPTR, "target", "target NULL");
    c = Valid();
    c.out = nullptr;
    Expect(c, ACLNN_ERR_PARAM_NULLPTR, "out", "out NULL");

    const GradCall v = Valid();
    aclOpExecutor *executor = nullptr;
    uint64_t ws = 0;
    std::string sentinel = ResetMessage();
    EXPECT_EQ(aclnnCrossEntropyLossGradGetWorkspaceSize(v.grad_loss, v.log_prob, v.target, v.weight, v.grad_zloss,
                                                        v.lse, const_cast<char *>("mean"), -100, 0.0, 0.01, v.out,
                                                        nullptr, &executor),
              ACLNN_ERR_PARAM_NULLPTR);
    EXPECT_NE(RecentError().find("workspaceSize"), std::string::npos) << RecentError();
    sentinel = ResetMessage();
    EXPECT_EQ(
        aclnnCrossEntropyLossGradGetWorkspaceSize(v.grad_loss, v.log_prob, v.target, v.weight, v.grad_zloss, v.lse,
                                                  const_cast<char *>("mean"), -100, 0.0, 0.01, v.out, &ws, nullptr),
        ACLNN_ERR_PARAM_NULLPTR);
    EXPECT_NE(RecentError().find("executor"), std::string::npos) << RecentError();

    // Optional inputs may be NULL (no z-loss then).
    c = Valid();
    c.weight = nullptr;
    c.grad_zloss = nullptr;
    c.lse = nullptr;
    c.zloss_scale = 0.0;
    Expect(c, ACLNN_SUCCESS, "", "optional inputs NULL");
}

TEST_F(GradApiTest, DataTypes) {
    struct Case {
        const char *what;
        int slot;  // 0 gradLoss, 1 logProb, 2 target, 3 weight, 4 gradZloss, 5 lse, 6 out
        aclDataType dtype;
        const char *name;
    };
    const Case cases[] = {
        {"logProb DOUBLE", 1, ACL_DOUBLE, "logProb"},
        {"logProb INT32", 1, ACL_INT32, "logProb"},
        {"gradLoss FLOAT16", 0, ACL_FLOAT16, "gradLoss"},
        {"gradLoss BF16", 0, ACL_BF16, "gradLoss"},
        {"target FLOAT", 2, ACL_FLOAT, "target"},
        {"target INT16", 2, ACL_INT16, "target"},
        {"target UINT8", 2, ACL_UINT8, "target"},
        {"target UINT64", 2, ACL_UINT64, "target"},
        {"weight FLOAT16", 3, ACL_FLOAT16, "weight"},
        {"weight DOUBLE", 3, ACL_DOUBLE, "weight"},
        {"gradZloss FLOAT16", 4, ACL_FLOAT16, "gradZloss"},
        {"lseForZloss BF16", 5, ACL_BF16, "lseForZloss"},
        {"out FLOAT16", 6, ACL_FLOAT16, "out"},
        {"out DOUBLE", 6, ACL_DOUBLE, "out"},
    };
    for (const Case &k : cases) {
        GradCall c = Valid();
        const std::vector<int64_t> dims[] = {{}, {kN, kC}, {kN}, {kC}, {}, {kN}, {kN, kC}};
        DeviceTensor *t = Make(k.dtype, dims[k.slot]);
        const aclTensor **slots[] = {&c.grad_loss, &c.log_prob, &c.target, &c.weight, &c.grad_zloss, &c.lse, &c.out};
        *slots[k.slot] = t->get();
        Expect(c, ACLNN_ERR_PARAM_INVALID, k.name, k.what);
    }
    // A half-precision call is valid when every float tensor is FLOAT16; targets INT32 are valid.
    GradCall c = Valid();
    c.grad_loss = Make(ACL_FLOAT16, {})->get();
    c.log_prob = Make(ACL_FLOAT16, {kN, kC})->get();
    c.grad_zloss = Make(ACL_FLOAT16, {})->get();
    c.lse = Make(ACL_FLOAT16, {kN})->get();
    c.out = Make(ACL_FLOAT16, {kN, kC})->get();
    DeviceTensor *t32 = Make(ACL_INT32, {kN});
    for (int64_t i = 0; i < kN; ++i) t32->SetInt(i, 1);
    t32->Upload();
    c.target = t32->get();
    Expect(c, ACLNN_SUCCESS, "", "all FLOAT16 with INT32 targets");
}

TEST_F(GradApiTest, Attributes) {
    for (const char *r : {"avg", "", "MEAN", "none ", "summ"}) {
        GradCall c = Valid();
        c.reduction = r;
        Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "reduction", std::string("reduction '") + r + "'");
    }
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (double ls : {-0.1, -1e-300, 1.0000001, 2.0, nan, inf, -inf}) {
        GradCall c = Valid();
        c.label_smoothing = ls;
        Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "labelSmoothing", "labelSmoothing " + std::to_string(ls));
    }
    for (double ls : {0.0, 1.0, 0.5}) {
        GradCall c = Valid();
        c.label_smoothing = ls;
        Expect(c, ACLNN_SUCCESS, "", "labelSmoothing " + std::to_string(ls));
    }
    for (double s : {nan, inf, -inf}) {
        GradCall c = Valid();
        c.zloss_scale = s;
        Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "lseSquareScaleForZloss", "scale " + std::to_string(s));
    }
    GradCall c = Valid();
    c.lse = nullptr;
    Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "lseForZloss", "scale non-zero without lseForZloss");
    c.zloss_scale = -0.5;
    Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "lseForZloss", "negative scale without lseForZloss");
    // Reduction NULL means mean: gradLoss [] valid, [N] invalid.
    c = Valid();
    c.reduction = nullptr;
    Expect(c, ACLNN_SUCCESS, "", "reduction NULL");
    c.grad_loss = grad_loss_none_->get();
    c.grad_zloss = nullptr;
    Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "gradLoss", "reduction NULL with gradLoss [N]");
}

TEST_F(GradApiTest, Shapes) {
    struct Case {
        const char *what;
        int slot;
        std::vector<int64_t> dims;
        const char *reduction;
        const char *name;
    };
    const Case cases[] = {
        {"logProb 1-D", 1, {kN * kC}, "mean", "logProb"},
        {"logProb 3-D", 1, {kN, kC, 1}, "mean", "logProb"},
        {"logProb 0-D", 1, {}, "mean", "logProb"},
        {"target [N+1]", 2, {kN + 1}, "mean", "target"},
        {"target [N,1]", 2, {kN, 1}, "mean", "target"},
        {"target []", 2, {}, "mean", "target"},
        {"weight [C+1]", 3, {kC + 1}, "mean", "weight"},
        {"weight [1,C]", 3, {1, kC}, "mean", "weight"},
        {"out [N,C+1]", 6, {kN, kC + 1}, "mean", "out"},
        {"out [N+1,C]", 6, {kN + 1, kC}, "mean", "out"},
        {"out [N*C]", 6, {kN * kC}, "mean", "out"},
        {"gradLoss [N] for mean", 0, {kN}, "mean", "gradLoss"},
        {"gradLoss [2] for sum", 0, {2}, "sum", "gradLoss"},
        {"gradLoss [1,1] for mean", 0, {1, 1}, "mean", "gradLoss"},
        {"gradZloss [N] for mean", 4, {kN}, "mean", "gradZloss"},
        {"lseForZloss [N+1]", 5, {kN + 1}, "mean", "lseForZloss"},
        {"lseForZloss [N,1]", 5, {kN, 1}, "mean", "lseForZloss"},
        {"lseForZloss [0] with a non-zero scale", 5, {0}, "mean", "lseForZloss"},
    };
    for (const Case &k : cases) {
        GradCall c = Valid();
        c.reduction = k.reduction;
        const aclDataType dtype = k.slot == 2 ? ACL_INT64 : ACL_FLOAT;
        DeviceTensor *t = Make(dtype, k.dims);
        const aclTensor **slots[] = {&c.grad_loss, &c.log_prob, &c.target, &c.weight, &c.grad_zloss, &c.lse, &c.out};
        *slots[k.slot] = t->get();
        Expect(c, ACLNN_ERR_INNER_TILING_ERROR, k.name, k.what);
    }
    // reduction none: gradLoss and gradZloss must be [N].
    GradCall c = Valid();
    c.reduction = "none";
    c.grad_zloss = nullptr;
    Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "gradLoss", "gradLoss [] for none");
    c.grad_loss = Make(ACL_FLOAT, {kN + 1})->get();
    Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "gradLoss", "gradLoss [N+1] for none");
    c.grad_loss = grad_loss_none_->get();
    Expect(c, ACLNN_SUCCESS, "", "gradLoss [N] for none");
    c.grad_zloss = grad_zloss_->get();
    Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "gradZloss", "gradZloss [] for none");
    c.grad_zloss = grad_loss_none_->get();
    Expect(c, ACLNN_SUCCESS, "", "gradZloss [N] for none");

    // Valid variants: gradLoss [1] for mean and sum; lseForZloss NULL, [0] or [N] when the scale is 0.
    for (const char *r : {"mean", "sum"}) {
        c = Valid();
        c.reduction = r;
        DeviceTensor *g1 = Make(ACL_FLOAT, {1});
        g1->Set(0, 0, 1.0);
        g1->Upload();
        c.grad_loss = g1->get();
        c.grad_zloss = nullptr;
        Expect(c, ACLNN_SUCCESS, "", std::string("gradLoss [1] for ") + r);
    }
    c = Valid();
    c.zloss_scale = 0.0;
    c.lse = nullptr;
    Expect(c, ACLNN_SUCCESS, "", "scale 0, lseForZloss NULL");
    c.lse = Make(ACL_FLOAT, {0})->get();
    Expect(c, ACLNN_SUCCESS, "", "scale 0, lseForZloss [0]");
    c.lse = lse_->get();
    Expect(c, ACLNN_SUCCESS, "", "scale 0, lseForZloss [N]");
    c.lse = Make(ACL_FLOAT, {kN + 2})->get();
    Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "lseForZloss", "scale 0, lseForZloss [N+2]");
}

TEST_F(GradApiTest, ViewsOutsideTheirStorage) {
    // Each view reaches one element past its storage.
    struct Case {
        int slot;
        Layout layout;
        aclDataType dtype;
        const char *name;
    };
    auto past = [](std::vector<int64_t> dims, std::vector<int64_t> strides, int64_t offset, int64_t storage) {
        Layout l;
        l.dims = std::move(dims);
        l.strides = std::move(strides);
        l.offset = offset;
        l.storage_dims = {storage};
        return l;
    };
    const Case cases[] = {
        {1, past({kN, kC}, {kC, 1}, 0, kN * kC - 1), ACL_FLOAT, "logProb"},
        {1, past({kN, kC}, {kC, 1}, 1, kN * kC), ACL_FLOAT, "logProb"},
        {1, past({kN, kC}, {1, kN + 1}, 0, kN * kC), ACL_FLOAT, "logProb"},
        {6, past({kN, kC}, {kC + 1, 1}, 0, (kN - 1) * (kC + 1) + kC - 1), ACL_FLOAT, "out"},
        {2, past({kN}, {2}, 0, 2 * kN - 2), ACL_INT64, "target"},
        {3, past({kC}, {1}, 1, kC), ACL_FLOAT, "weight"},
        {5, past({kN}, {1}, 3, kN + 2), ACL_FLOAT, "lseForZloss"},
        {0, past({}, {}, 1, 1), ACL_FLOAT, "gradLoss"},
    };
    for (const Case &k : cases) {
        GradCall c = Valid();
        DeviceTensor *backing = Make(k.dtype, {64});
        aclTensor *t = backing->View(k.layout, k.dtype);
        ASSERT_NE(t, nullptr) << "aclCreateTensor must describe any view; phase 1 rejects it";
        const aclTensor **slots[] = {&c.grad_loss, &c.log_prob, &c.target, &c.weight, &c.grad_zloss, &c.lse, &c.out};
        *slots[k.slot] = t;
        Expect(c, ACLNN_ERR_INNER_TILING_ERROR, k.name, k.layout.Describe());
    }
}

TEST_F(GradApiTest, OutMayOnlyBeLogProbItself) {
    // Same aclTensor, or another aclTensor with logProb's address and layout: in place, valid.
    GradCall c = Valid();
    c.out = log_prob_->get();
    Expect(c, ACLNN_SUCCESS, "", "out is the logProb tensor");
    c.out = log_prob_->Alias();
    Expect(c, ACLNN_SUCCESS, "", "out aliases logProb exactly");

    // Any other overlap: 161002, naming out.
    DeviceTensor *big = Make(ACL_FLOAT, {4 * kN * kC});
    c = Valid();
    c.log_prob = big->View(ContiguousLayout({kN, kC}), ACL_FLOAT);
    c.out = big->View(StridedLayout({kN, kC}, {kC, 1}, 1), ACL_FLOAT);
    Expect(c, ACLNN_ERR_PARAM_INVALID, "out", "out shifted by one element from logProb");
    c.out = big->View(TransposedLayout(kN, kC), ACL_FLOAT);
    Expect(c, ACLNN_ERR_PARAM_INVALID, "out", "out a transposed view of logProb's storage");
    c.out = big->View(StridedLayout({kN, kC}, {2 * kC, 2}, 0), ACL_FLOAT);
    Expect(c, ACLNN_ERR_PARAM_INVALID, "out", "out strided over logProb's storage");

    // out over the memory of another input.
    struct Case {
        int slot;
        const char *what;
    };
    for (const Case &k :
         {Case{0, "gradLoss"}, Case{2, "target"}, Case{3, "weight"}, Case{4, "gradZloss"}, Case{5, "lseForZloss"}}) {
        c = Valid();
        DeviceTensor *shared = Make(ACL_FLOAT, {4 * kN * kC});
        c.out = shared->View(ContiguousLayout({kN, kC}), ACL_FLOAT);
        const aclTensor **slots[] = {&c.grad_loss, &c.log_prob, &c.target, &c.weight, &c.grad_zloss, &c.lse, &c.out};
        const aclDataType dtype = k.slot == 2 ? ACL_INT64 : ACL_FLOAT;
        const std::vector<int64_t> dims[] = {{}, {kN, kC}, {kN}, {kC}, {}, {kN}};
        *slots[k.slot] =
            shared->View(StridedLayout(dims[k.slot], std::vector<int64_t>(dims[k.slot].size(), 1), 3), dtype);
        Expect(c, ACLNN_ERR_PARAM_INVALID, "out", std::string("out overlaps ") + k.what);
    }
}

TEST_F(GradApiTest, CheckOrder) {
    // null before dtype
    GradCall c = Valid();
    c.grad_loss = nullptr;
    c.log_prob = Make(ACL_DOUBLE, {kN, kC})->get();
    Expect(c, ACLNN_ERR_PARAM_NULLPTR, "gradLoss", "NULL gradLoss and DOUBLE logProb");
    c = Valid();
    c.out = nullptr;
    c.target = Make(ACL_FLOAT, {kN})->get();
    Expect(c, ACLNN_ERR_PARAM_NULLPTR, "out", "NULL out and FLOAT target");
    // dtype before attributes
    c = Valid();
    c.target = Make(ACL_FLOAT, {kN})->get();
    c.reduction = "bogus";
    Expect(c, ACLNN_ERR_PARAM_INVALID, "target", "FLOAT target and bad reduction");
    c = Valid();
    c.weight = Make(ACL_DOUBLE, {kC})->get();
    c.label_smoothing = 7.0;
    Expect(c, ACLNN_ERR_PARAM_INVALID, "weight", "DOUBLE weight and bad labelSmoothing");
    // dtype before shapes
    c = Valid();
    c.out = Make(ACL_FLOAT16, {kN + 1, kC})->get();
    Expect(c, ACLNN_ERR_PARAM_INVALID, "out", "FLOAT16 out of wrong shape");
    // attributes before shapes
    c = Valid();
    c.reduction = "bogus";
    c.weight = Make(ACL_FLOAT, {kC + 1})->get();
    Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "reduction", "bad reduction and bad weight shape");
    c = Valid();
    c.label_smoothing = -1.0;
    c.log_prob = Make(ACL_FLOAT, {kN * kC})->get();
    Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "labelSmoothing", "bad labelSmoothing and 1-D logProb");
    // shapes before aliasing: out of the wrong shape that also overlaps gradZloss is a shape error.
    c = Valid();
    DeviceTensor *wrong = Make(ACL_FLOAT, {kN, kC + 1});
    c.out = wrong->get();
    c.grad_zloss = wrong->View(ContiguousLayout({}), ACL_FLOAT);
    Expect(c, ACLNN_ERR_INNER_TILING_ERROR, "out", "out of wrong shape overlapping gradZloss");
}

// N == 0 or C == 0: success, workspace 0, nothing written, a clean synchronisation.
TEST_F(GradApiTest, EmptyProblems) {
    for (aclDataType dt : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
        for (const char *reduction : {"none", "mean", "sum"}) {
            for (const auto &shape :
                 {std::vector<int64_t>{0, 7}, std::vector<int64_t>{3, 0}, std::vector<int64_t>{0, 0}}) {
                const int64_t n = shape[0];
                const int64_t c = shape[1];
                SCOPED_TRACE(std::string(DtypeName(dt)) + " " + reduction + " N=" + std::to_string(n) +
                             " C=" + std::to_string(c));
                const bool none = std::string(reduction) == "none";
                DeviceTensor *gl = Make(dt, none ? std::vector<int64_t>{n} : std::vector<int64_t>{});
                if (!none) gl->Set(0, 0, 1.0);
                gl->Upload();
                DeviceTensor *lp = Make(dt, {n, c});
                DeviceTensor *tg = Make(ACL_INT64, {n});
                for (int64_t i = 0; i < n; ++i) tg->SetInt(i, 0);
                tg->Upload();
                DeviceTensor *w = Make(ACL_FLOAT, {c});
                DeviceTensor *lse = Make(dt, {n});
                DeviceTensor *out = Make(dt, {n, c});
                GradCall call;
                call.grad_loss = gl->get();
                call.log_prob = lp->get();
                call.target = tg->get();
                call.weight = w->get();
                call.lse = lse->get();
                call.zloss_scale = 0.1;
                call.label_smoothing = 0.2;
                call.reduction = reduction;
                call.out = out->get();
                const GradOutcome r = RunGrad(call, TestStream());
                EXPECT_EQ(r.phase1, ACLNN_SUCCESS) << r.phase1_message;
                EXPECT_EQ(r.workspace_size, 0u);
                EXPECT_EQ(r.phase2, ACLNN_SUCCESS) << RecentError();
                EXPECT_EQ(r.sync, ACL_SUCCESS) << r.sync_message;
            }
        }
    }
}

// ---- executors and workspace ----

// A mean problem big enough that it needs a workspace (N rows), with its reference.
struct Problem {
    GradProblem p;
    std::unique_ptr<DeviceTensor> grad_loss, log_prob, target, weight, grad_zloss, lse, out;
    GradCall call;
};

std::unique_ptr<Problem> MakeProblem(uint64_t seed, int64_t n, int64_t c) {
    auto pr = std::make_unique<Problem>();
    Rng rng(seed);
    GradProblem &p = pr->p;
    p.n = n;
    p.c = c;
    p.reduction = Reduction::kMean;
    p.label_smoothing = 0.15;
    p.zloss_scale = 0.02;
    p.ignore_index = -1;
    std::vector<double> logits = RandomLogits(rng, n, c);
    std::vector<double> lse;
    LogSoftmaxRows(logits, n, c, &p.log_prob, &lse);
    for (double &v : p.log_prob) v = static_cast<float>(v);
    for (int64_t i = 0; i < n; ++i) p.target.push_back(rng.Chance(0.2) ? -1 : rng.Int(0, c - 1));
    for (int64_t j = 0; j < c; ++j) p.weight.push_back(static_cast<float>(rng.Uniform(0.1, 2.0)));
    p.grad_loss = {static_cast<float>(rng.Uniform(0.5, 2.0))};
    p.grad_zloss = {static_cast<float>(rng.Uniform(-1.0, 1.0))};
    for (double v : lse) p.lse.push_back(static_cast<float>(v));
    pr->grad_loss = std::make_unique<DeviceTensor>(ACL_FLOAT, ContiguousLayout({}));
    pr->log_prob = std::make_unique<DeviceTensor>(ACL_FLOAT, ContiguousLayout({n, c}));
    pr->target = std::make_unique<DeviceTensor>(ACL_INT64, ContiguousLayout({n}));
    pr->weight = std::make_unique<DeviceTensor>(ACL_FLOAT, ContiguousLayout({c}));
    pr->grad_zloss = std::make_unique<DeviceTensor>(ACL_FLOAT, ContiguousLayout({}));
    pr->lse = std::make_unique<DeviceTensor>(ACL_FLOAT, ContiguousLayout({n}));
    pr->out = std::make_unique<DeviceTensor>(ACL_FLOAT, ContiguousLayout({n, c}));
    pr->grad_loss->Set(0, 0, p.grad_loss[0]);
    pr->grad_zloss->Set(0, 0, p.grad_zloss[0]);
    for (int64_t i = 0; i < n; ++i) {
        pr->target->SetInt(i, p.target[i]);
        pr->lse->Set(i, 0, p.lse[i]);
        for (int64_t j = 0; j < c; ++j) pr->log_prob->Set(i, j, p.log_prob[static_cast<size_t>(i * c + j)]);
    }
    for (int64_t j = 0; j < c; ++j) pr->weight->Set(j, 0, p.weight[j]);
    for (auto *t : {pr->grad_loss.get(), pr->log_prob.get(), pr->target.get(), pr->weight.get(), pr->grad_zloss.get(),
                    pr->lse.get(), pr->out.get()}) {
        t->Upload();
    }
    GradCall &call = pr->call;
    call.grad_loss = pr->grad_loss->get();
    call.log_prob = pr->log_prob->get();
    call.target = pr->target->get();
    call.weight = pr->weight->get();
    call.grad_zloss = pr->grad_zloss->get();
    call.lse = pr->lse->get();
    call.reduction = "mean";
    call.ignore_index = p.ignore_index;
    call.label_smoothing = p.label_smoothing;
    call.zloss_scale = p.zloss_scale;
    call.out = pr->out->get();
    return pr;
}

// Downloads out and compares with the reference of p; returns the number of bad elements.
int64_t CountMismatches(DeviceTensor &out, const GradProblem &p) {
    out.Download();
    const GradReference ref = ReferenceGrad(p);
    int64_t bad = 0;
    for (int64_t i = 0; i < p.n; ++i) {
        for (int64_t j = 0; j < p.c; ++j) {
            const size_t k = static_cast<size_t>(i * p.c + j);
            const double tol = GradTolerance(ACL_FLOAT, ref.out[k], ref.magnitude[k], ref.row_scale[i], p.n, p.c);
            if (out.ElementIsPoison(out.layout().Index(i, j)) || !(std::fabs(out.Get(i, j) - ref.out[k]) <= tol)) ++bad;
        }
    }
    return bad;
}

class GradExecutorTest : public ::testing::Test {
protected:
    void *Workspace(uint64_t size) {
        if (size == 0) return nullptr;
        void *p = nullptr;
        EXPECT_EQ(aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
        workspaces_.push_back(p);
        return p;
    }
    void TearDown() override {
        for (void *p : workspaces_) aclrtFree(p);
    }
    // Queues phase 2 of pr's call on stream, then an async download of out into *result (no synchronisation).
    void QueueOpAndDownload(Problem &pr, aclrtStream stream, std::vector<uint8_t> *result) {
        uint64_t size = 0;
        aclOpExecutor *executor = nullptr;
        ASSERT_EQ(GradPhase1(pr.call, &size, &executor), ACLNN_SUCCESS);
        ASSERT_EQ(aclnnCrossEntropyLossGrad(Workspace(size), size, executor, stream), ACLNN_SUCCESS);
        result->assign(pr.out->bytes(), 0);
        ASSERT_EQ(aclrtMemcpyAsync(result->data(), result->size(), pr.out->device(), pr.out->bytes(),
                                   ACL_MEMCPY_DEVICE_TO_HOST, stream),
                  ACL_SUCCESS);
    }
    std::vector<void *> workspaces_;
};

TEST_F(GradExecutorTest, SingleUseExecutorRefusesASecondRun) {
    auto pr = MakeProblem(11, 64, 33);
    uint64_t size = 0;
    aclOpExecutor *executor = nullptr;
    ASSERT_EQ(GradPhase1(pr->call, &size, &executor), ACLNN_SUCCESS) << RecentError();
    void *ws = Workspace(size);
    ASSERT_EQ(aclnnCrossEntropyLossGrad(ws, size, executor, TestStream()), ACLNN_SUCCESS);
    ASSERT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
    EXPECT_EQ(CountMismatches(*pr->out, pr->p), 0);
    const std::string sentinel = ResetMessage();
    EXPECT_NE(aclnnCrossEntropyLossGrad(ws, size, executor, TestStream()), ACLNN_SUCCESS);
    EXPECT_NE(RecentError(), sentinel);
    EXPECT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
    EXPECT_NE(aclnnCrossEntropyLossGrad(ws, size, nullptr, TestStream()), ACLNN_SUCCESS);
}

TEST_F(GradExecutorTest, RepeatableExecutorRunsAgainAndRebindsEveryAddress) {
    auto first = MakeProblem(21, 48, 29);
    auto second = MakeProblem(22, 48, 29);  // same shapes and attributes, other data
    second->p.label_smoothing = first->p.label_smoothing;
    uint64_t size = 0;
    aclOpExecutor *executor = nullptr;
    ASSERT_EQ(GradPhase1(first->call, &size, &executor), ACLNN_SUCCESS) << RecentError();
    ASSERT_EQ(aclSetAclOpExecutorRepeatable(executor), ACLNN_SUCCESS) << RecentError();
    void *ws = Workspace(size);
    for (int run = 0; run < 3; ++run) {
        FillPoison(ACL_FLOAT, first->out->host().data(), first->out->layout().StorageElements());
        first->out->Upload();
        ASSERT_EQ(aclnnCrossEntropyLossGrad(ws, size, executor, TestStream()), ACLNN_SUCCESS) << RecentError();
        ASSERT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
        EXPECT_EQ(CountMismatches(*first->out, first->p), 0) << "run " << run;
    }
    // Rebind every input (prototype order) and the output to the second problem's storage.
    EXPECT_EQ(
        aclSetInputTensorAddr(executor, 0, const_cast<aclTensor *>(first->call.grad_loss), second->grad_loss->device()),
        ACLNN_SUCCESS);
    EXPECT_EQ(
        aclSetInputTensorAddr(executor, 1, const_cast<aclTensor *>(first->call.log_prob), second->log_prob->device()),
        ACLNN_SUCCESS);
    EXPECT_EQ(aclSetInputTensorAddr(executor, 2, const_cast<aclTensor *>(first->call.target), second->target->device()),
              ACLNN_SUCCESS);
    EXPECT_EQ(aclSetInputTensorAddr(executor, 3, const_cast<aclTensor *>(first->call.weight), second->weight->device()),
              ACLNN_SUCCESS);
    EXPECT_EQ(aclSetInputTensorAddr(executor, 4, const_cast<aclTensor *>(first->call.grad_zloss),
                                    second->grad_zloss->device()),
              ACLNN_SUCCESS);
    EXPECT_EQ(aclSetInputTensorAddr(executor, 5, const_cast<aclTensor *>(first->call.lse), second->lse->device()),
              ACLNN_SUCCESS);
    EXPECT_EQ(aclSetOutputTensorAddr(executor, 0, const_cast<aclTensor *>(first->call.out), second->out->device()),
              ACLNN_SUCCESS);
    // Out-of-range indices are errors.
    EXPECT_NE(aclSetInputTensorAddr(executor, 6, const_cast<aclTensor *>(first->call.lse), second->lse->device()),
              ACLNN_SUCCESS);
    EXPECT_NE(aclSetOutputTensorAddr(executor, 1, const_cast<aclTensor *>(first->call.out), second->out->device()),
              ACLNN_SUCCESS);

    FillPoison(ACL_FLOAT, first->out->host().data(), first->out->layout().StorageElements());
    first->out->Upload();
    const uint64_t first_out_before = first->out->DeviceChecksum();
    ASSERT_EQ(aclnnCrossEntropyLossGrad(ws, size, executor, TestStream()), ACLNN_SUCCESS) << RecentError();
    ASSERT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
    EXPECT_EQ(CountMismatches(*second->out, second->p), 0) << "after rebinding, the second problem is computed";
    EXPECT_EQ(first->out->DeviceChecksum(), first_out_before) << "the old output must not be written";

    EXPECT_EQ(aclDestroyAclOpExecutor(executor), ACLNN_SUCCESS);
    EXPECT_NE(aclnnCrossEntropyLossGrad(ws, size, executor, TestStream()), ACLNN_SUCCESS) << "destroyed executor";
    EXPECT_NE(aclDestroyAclOpExecutor(executor), ACLNN_SUCCESS) << "double destroy";
    EXPECT_NE(
        aclSetInputTensorAddr(executor, 0, const_cast<aclTensor *>(first->call.grad_loss), second->grad_loss->device()),
        ACLNN_SUCCESS);
    EXPECT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
}

TEST_F(GradExecutorTest, WorkspaceChecks) {
    auto pr = MakeProblem(31, 256, 9);
    uint64_t size = 0;
    aclOpExecutor *executor = nullptr;
    ASSERT_EQ(GradPhase1(pr->call, &size, &executor), ACLNN_SUCCESS) << RecentError();
    if (size == 0) {
        // Nothing to check on a plan without workspace; consume the executor.
        EXPECT_EQ(aclnnCrossEntropyLossGrad(nullptr, 0, executor, TestStream()), ACLNN_SUCCESS);
        GTEST_SKIP() << "this plan needs no workspace";
    }
    ASSERT_EQ(aclSetAclOpExecutorRepeatable(executor), ACLNN_SUCCESS);
    ResetMessage();
    EXPECT_EQ(aclnnCrossEntropyLossGrad(nullptr, size, executor, TestStream()), ACLNN_ERR_PARAM_NULLPTR);
    EXPECT_NE(RecentError().find("workspace"), std::string::npos) << RecentError();
    void *ws = Workspace(size);
    ResetMessage();
    EXPECT_EQ(aclnnCrossEntropyLossGrad(ws, size - 1, executor, TestStream()), ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(RecentError().find("workspace"), std::string::npos) << RecentError();
    EXPECT_EQ(aclnnCrossEntropyLossGrad(ws, 0, executor, TestStream()), ACLNN_ERR_PARAM_INVALID);
    // The refused runs queued nothing; a correct one still works, also with a larger workspace than asked.
    EXPECT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
    EXPECT_EQ(aclnnCrossEntropyLossGrad(Workspace(size + 4096), size + 4096, executor, TestStream()), ACLNN_SUCCESS);
    EXPECT_EQ(aclrtSynchronizeStream(TestStream()), ACL_SUCCESS);
    EXPECT_EQ(CountMismatches(*pr->out, pr->p), 0);
    EXPECT_EQ(aclDestroyAclOpExecutor(executor), ACLNN_SUCCESS);
}

TEST_F(GradExecutorTest, InputsUnchangedAndDefaultStream) {
    auto pr = MakeProblem(41, 37, 70);
    const uint64_t before[] = {pr->grad_loss->DeviceChecksum(),  pr->log_prob->DeviceChecksum(),
                               pr->target->DeviceChecksum(),     pr->weight->DeviceChecksum(),
                               pr->grad_zloss->DeviceChecksum(), pr->lse->DeviceChecksum()};
    const GradOutcome r = RunGrad(pr->call, nullptr);  // NULL: the default stream
    ASSERT_EQ(r.phase1, ACLNN_SUCCESS) << r.phase1_message;
    ASSERT_EQ(r.phase2, ACLNN_SUCCESS);
    ASSERT_EQ(r.sync, ACL_SUCCESS);
    const uint64_t after[] = {pr->grad_loss->DeviceChecksum(),  pr->log_prob->DeviceChecksum(),
                              pr->target->DeviceChecksum(),     pr->weight->DeviceChecksum(),
                              pr->grad_zloss->DeviceChecksum(), pr->lse->DeviceChecksum()};
    for (int k = 0; k < 6; ++k) EXPECT_EQ(before[k], after[k]) << "input " << k;
    EXPECT_EQ(CountMismatches(*pr->out, pr->p), 0);
}

TEST_F(GradExecutorTest, OperatorAndAsyncCopiesRunInStreamOrder) {
    // Queue: upload logProb (async), run the op, download out (async); one synchronisation at the end.
    auto pr = MakeProblem(51, 200, 300);
    std::vector<uint8_t> staged = pr->log_prob->host();
    FillPoison(ACL_FLOAT, pr->log_prob->host().data(), pr->log_prob->layout().StorageElements());
    pr->log_prob->Upload();  // device holds poison until the async copy runs
    aclrtStream stream = nullptr;
    ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
    ASSERT_EQ(aclrtMemcpyAsync(pr->log_prob->device(), pr->log_prob->bytes(), staged.data(), staged.size(),
                               ACL_MEMCPY_HOST_TO_DEVICE, stream),
              ACL_SUCCESS);
    std::vector<uint8_t> result;
    QueueOpAndDownload(*pr, stream, &result);
    ASSERT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    pr->out->Download();
    EXPECT_EQ(result, pr->out->host());
    EXPECT_EQ(CountMismatches(*pr->out, pr->p), 0);
    EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

// Queued calls run in order when the stream is synchronised: behind a long copy that stages their input, a small
// copy of that input, the op (N = 8, C = 10) and the download each wait their turn.
TEST_F(GradExecutorTest, QueuedCallsKeepTheStreamOrder) {
    constexpr size_t kLongBytes = size_t{256} << 20;  // tens of milliseconds of copying
    void *long_src = nullptr;
    void *long_dst = nullptr;
    ASSERT_EQ(aclrtMalloc(&long_src, kLongBytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    ASSERT_EQ(aclrtMalloc(&long_dst, kLongBytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    aclrtStream stream = nullptr;
    ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
    for (uint64_t seed = 61; seed < 64; ++seed) {
        auto pr = MakeProblem(seed, 8, 10);
        const std::vector<uint8_t> staged = pr->log_prob->host();
        ASSERT_EQ(aclrtMemcpy(long_src, kLongBytes, staged.data(), staged.size(), ACL_MEMCPY_HOST_TO_DEVICE),
                  ACL_SUCCESS);
        FillPoison(ACL_FLOAT, pr->log_prob->host().data(), pr->log_prob->layout().StorageElements());
        pr->log_prob->Upload();  // device holds poison until the async copies run
        std::vector<uint8_t> poison(staged.size());
        FillPoison(ACL_FLOAT, poison.data(), static_cast<int64_t>(poison.size() / sizeof(float)));
        ASSERT_EQ(aclrtMemcpy(long_dst, kLongBytes, poison.data(), poison.size(), ACL_MEMCPY_HOST_TO_DEVICE),
                  ACL_SUCCESS);
        ASSERT_EQ(aclrtMemcpyAsync(long_dst, kLongBytes, long_src, kLongBytes, ACL_MEMCPY_DEVICE_TO_DEVICE, stream),
                  ACL_SUCCESS);
        ASSERT_EQ(aclrtMemcpyAsync(pr->log_prob->device(), pr->log_prob->bytes(), long_dst, staged.size(),
                                   ACL_MEMCPY_DEVICE_TO_DEVICE, stream),
                  ACL_SUCCESS);
        std::vector<uint8_t> result;
        QueueOpAndDownload(*pr, stream, &result);
        ASSERT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        pr->out->Download();
        EXPECT_EQ(result, pr->out->host()) << "seed " << seed;
        EXPECT_EQ(CountMismatches(*pr->out, pr->p), 0) << "seed " << seed;
        // And on the idle stream, with nothing before it.
        uint64_t size = 0;
        aclOpExecutor *executor = nullptr;
        ASSERT_EQ(GradPhase1(pr->call, &size, &executor), ACLNN_SUCCESS);
        FillPoison(ACL_FLOAT, pr->out->host().data(), pr->out->layout().StorageElements());
        pr->out->Upload();
        ASSERT_EQ(aclnnCrossEntropyLossGrad(Workspace(size), size, executor, stream), ACLNN_SUCCESS);
        ASSERT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        EXPECT_EQ(CountMismatches(*pr->out, pr->p), 0) << "seed " << seed;
    }
    EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(long_src), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(long_dst), ACL_SUCCESS);
}

TEST(GradDocumentedExample, PrintsTheDocumentedValues) {
    // The documentation's example through the helpers, output poisoned first.
    DeviceTensor gl(ACL_FLOAT, ContiguousLayout({}));
    DeviceTensor lp(ACL_FLOAT, ContiguousLayout({2, 3}));
    DeviceTensor tg(ACL_INT64, ContiguousLayout({2}));
    DeviceTensor w(ACL_FLOAT, ContiguousLayout({3}));
    DeviceTensor out(ACL_FLOAT, ContiguousLayout({2, 3}));
    gl.Set(0, 0, 0.1);
    for (int i = 0; i < 2; ++i) {
        tg.SetInt(i, 0);
        for (int j = 0; j < 3; ++j) lp.Set(i, j, -0.2);
    }
    for (int j = 0; j < 3; ++j) w.Set(j, 0, 1.0);
    for (DeviceTensor *t : {&gl, &lp, &tg, &w, &out}) t->Upload();
    GradCall call;
    call.grad_loss = gl.get();
    call.log_prob = lp.get();
    call.target = tg.get();
    call.weight = w.get();
    call.out = out.get();
    const GradOutcome r = RunGrad(call, TestStream());
    ASSERT_EQ(r.sync, ACL_SUCCESS) << r.phase1_message;
    out.Download();
    const double expected[] = {-0.0091, 0.0409, 0.0409, -0.0091, 0.0409, 0.0409};
    for (int k = 0; k < 6; ++k) EXPECT_NEAR(out.Get(k / 3, k % 3), expected[k], 5e-5) << k;
}

}  // namespace
}  // namespace openaclnn::test
