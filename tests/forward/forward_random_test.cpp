// aclnnCrossEntropyLoss through the C ABI against the float64 reference: random configurations over dtypes,
// reductions, weight, ignore index, label smoothing, z-loss, int32/int64 targets, strided/transposed/in-place
// views and shapes around the vector widths, for every ISA cap; plus determinism across thread counts.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>

#include "forward_harness.h"

namespace openaclnn::test {
namespace {

struct EnvGuard {
    EnvGuard(const char *name, const std::string &value) : name_(name) {
        if (const char *old = std::getenv(name)) old_ = old, had_ = true;
        setenv(name, value.c_str(), 1);
    }
    ~EnvGuard() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }
    const char *name_;
    std::string old_;
    bool had_ = false;
};

const std::vector<std::pair<int64_t, int64_t>> kShapes = {
    {1, 1}, {3, 1}, {5, 2}, {4, 3}, {2, 15}, {3, 16}, {3, 17}, {2, 31}, {2, 32}, {2, 33}, {2, 127},
    {2, 128}, {2, 129}, {3, 255}, {2, 256}, {2, 257}, {6, 1000}, {33, 40}, {1, 4099}};

using Param = std::tuple<std::string, aclDataType>;

class ForwardRandomTest : public ::testing::TestWithParam<Param> {};

TEST_P(ForwardRandomTest, MatchesReference) {
    const auto [isa, dtype] = GetParam();
    EnvGuard cap("OPENACLNN_MAX_ISA", isa);
    uint64_t seed = 1000 * static_cast<uint64_t>(dtype) + std::hash<std::string>()(isa) % 1000;
    for (int repeat = 0; repeat < 3; ++repeat) {
        for (const auto &[n, c] : kShapes) {
            const ForwardCase fc = RandomForwardCase(++seed, dtype, n, c);
            const ForwardOutcome got = RunForward(fc, TestStream());
            ASSERT_EQ(got.phase1, ACLNN_SUCCESS) << got.phase1_message << "\n" << fc.Describe();
            ASSERT_EQ(got.phase2, ACLNN_SUCCESS) << fc.Describe();
            ASSERT_EQ(got.sync, ACL_SUCCESS) << got.sync_message << "\n" << fc.Describe();
            if (CompareForward(fc, ReferenceForward(fc), got) > 0) return;
        }
    }
}

TEST_P(ForwardRandomTest, LongRows) {
    const auto [isa, dtype] = GetParam();
    EnvGuard cap("OPENACLNN_MAX_ISA", isa);
    for (const int64_t c : {int64_t{32000}, int64_t{131073}}) {
        const ForwardCase fc = RandomForwardCase(77 + c, dtype, 3, c);
        const ForwardOutcome got = RunForward(fc, TestStream());
        ASSERT_EQ(got.phase1, ACLNN_SUCCESS) << got.phase1_message;
        ASSERT_EQ(got.sync, ACL_SUCCESS) << got.sync_message;
        CompareForward(fc, ReferenceForward(fc), got);
    }
}

INSTANTIATE_TEST_SUITE_P(
    IsaDtype, ForwardRandomTest,
    ::testing::Combine(::testing::Values("avx512", "avx2", "sse4", "scalar"),
                       ::testing::Values(ACL_FLOAT, ACL_FLOAT16, ACL_BF16)),
    [](const ::testing::TestParamInfo<Param> &info) {
        const aclDataType dtype = std::get<1>(info.param);
        return std::get<0>(info.param) + "_" +
               (dtype == ACL_FLOAT ? "fp32" : dtype == ACL_FLOAT16 ? "fp16" : "bf16");
    });

// Every output bitwise identical for OPENACLNN_NUM_THREADS = 1, 2, 3: many short rows (each row run whole by one
// thread), and few long rows, which 3 threads (and for one row 2) share piece by piece; the loss reduction is serial
// in row order.
TEST(ForwardDeterminism, SameBitsForAnyThreadCount) {
    struct Shape {
        int64_t n, c;
    };
    for (const aclDataType dtype : {ACL_FLOAT, ACL_BF16}) {
        for (const Shape shape : {Shape{97, 3001}, Shape{2, 100000}, Shape{1, 152064}}) {
            for (const Reduction reduction : {Reduction::kMean, Reduction::kSum}) {
                ForwardCase fc = RandomForwardCase(4242, dtype, shape.n, shape.c);
                fc.reduction = reduction;
                fc.label_smoothing = 0.1;
                fc.zloss_scale = 1e-3;
                fc.lse_empty = false;
                std::vector<ForwardOutcome> outcomes;
                for (const char *threads : {"1", "2", "3"}) {
                    EnvGuard guard("OPENACLNN_NUM_THREADS", threads);
                    outcomes.push_back(RunForward(fc, TestStream()));
                    ASSERT_EQ(outcomes.back().sync, ACL_SUCCESS);
                }
                for (size_t k = 1; k < outcomes.size(); ++k) {
                    EXPECT_EQ(0, std::memcmp(outcomes[0].loss.data(), outcomes[k].loss.data(),
                                             outcomes[0].loss.size() * sizeof(double)));
                    EXPECT_EQ(outcomes[0].log_prob, outcomes[k].log_prob);
                    EXPECT_EQ(outcomes[0].lse, outcomes[k].lse);
                }
            }
        }
    }
}

}  // namespace
}  // namespace openaclnn::test
