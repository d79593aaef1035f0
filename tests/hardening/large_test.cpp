// Tensors above 2^31 elements: fp16 logProb and out of 65536 x 32769 (2^31 + 65536 elements, 4.3 GB each), so that
// any 32-bit element or byte index wraps somewhere inside them (bytes pass 2^31 at row 32768, elements in the last
// two rows). The gradient first, then the forward over the same buffers (input, logProbOut). Label `large`: about 9 GB of memory. A sample of rows, the first, the last and those around each
// 32-bit boundary among them, is checked element by element against the float64 oracle; the padding after out
// stays untouched.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "aclnnop/aclnn_cross_entropy_loss_grad.h"
#include "grad_oracle.h"

namespace {

using namespace openaclnn;

constexpr int64_t kN = 65536;
constexpr int64_t kC = 32769;

int64_t TargetOf(int64_t i) {
    if (i % 97 == 0) return -100;          // ignored
    if (i >= kN - 3) return kC - 1 - (kN - 1 - i);  // the last columns, in the last rows
    return (i * 7919) % kC;
}

// Parallel over rows with plain threads (the fill is 4.3 GB: one thread would take longer than the operator).
template <class F>
void ParallelRows(int64_t rows, F &&body) {
    const int threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            for (int64_t i = rows * t / threads; i < rows * (t + 1) / threads; ++i) body(i);
        });
    }
    for (auto &thread : pool) thread.join();
}

TEST(Large, Fp16AboveTwoToThe31Elements) {
    const aclError init = aclInit(nullptr);
    ASSERT_TRUE(init == ACL_SUCCESS || init == ACL_ERROR_REPEAT_INITIALIZE);
    const uint64_t elements = static_cast<uint64_t>(kN) * kC;
    ASSERT_GT(elements, uint64_t{1} << 31);
    const size_t bytes = elements * 2;
    void *log_prob = nullptr, *out = nullptr, *target = nullptr, *grad = nullptr;
    ASSERT_EQ(aclrtMalloc(&log_prob, bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    ASSERT_EQ(aclrtMalloc(&out, bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    ASSERT_EQ(aclrtMalloc(&target, kN * 8, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    ASSERT_EQ(aclrtMalloc(&grad, 2, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);

    // Values: 4096 fp16 log-probabilities in [-14, -6], picked by a hash of (i, j); every row differs.
    std::vector<uint16_t> table(4096);
    for (size_t k = 0; k < table.size(); ++k) {
        table[k] = oracle::FloatToHalfBits(-6.0f - 8.0f * static_cast<float>(k) / 4096.0f);
    }
    const auto start = std::chrono::steady_clock::now();
    auto *lp = static_cast<uint16_t *>(log_prob);
    ParallelRows(kN, [&](int64_t i) {
        uint16_t *row = lp + static_cast<uint64_t>(i) * kC;
        const uint64_t seed = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
        for (int64_t j = 0; j < kC; ++j) row[j] = table[((seed >> 40) + static_cast<uint64_t>(j) * 2654435761u) & 4095];
    });
    // Out starts as NaN (0x7e00): an element the kernel skips cannot pass.
    auto *o = static_cast<uint16_t *>(out);
    ParallelRows(kN, [&](int64_t i) { std::fill_n(o + static_cast<uint64_t>(i) * kC, kC, uint16_t{0x7e00}); });
    auto *t = static_cast<int64_t *>(target);
    for (int64_t i = 0; i < kN; ++i) t[i] = TargetOf(i);
    *static_cast<uint16_t *>(grad) = oracle::FloatToHalfBits(1.0f);
    const double fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    const int64_t dims[2] = {kN, kC};
    const int64_t n_dims[1] = {kN};
    aclTensor *grad_t = aclCreateTensor(nullptr, 0, ACL_FLOAT16, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, grad);
    aclTensor *log_prob_t = aclCreateTensor(dims, 2, ACL_FLOAT16, nullptr, 0, ACL_FORMAT_ND, dims, 2, log_prob);
    aclTensor *target_t = aclCreateTensor(n_dims, 1, ACL_INT64, nullptr, 0, ACL_FORMAT_ND, n_dims, 1, target);
    aclTensor *out_t = aclCreateTensor(dims, 2, ACL_FLOAT16, nullptr, 0, ACL_FORMAT_ND, dims, 2, out);
    uint64_t ws = 0;
    aclOpExecutor *executor = nullptr;
    char reduction[] = "mean";
    ASSERT_EQ(aclnnCrossEntropyLossGradGetWorkspaceSize(grad_t, log_prob_t, target_t, nullptr, nullptr, nullptr,
                                                        reduction, -100, 0.1, 0.0, out_t, &ws, &executor),
              ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    void *workspace = nullptr;
    ASSERT_EQ(aclrtMalloc(&workspace, ws, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    const auto run_start = std::chrono::steady_clock::now();
    ASSERT_EQ(aclnnCrossEntropyLossGrad(workspace, ws, executor, nullptr), ACLNN_SUCCESS);
    ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS) << aclGetRecentErrMsg();
    const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    std::printf("large: fill %.1f s, operator %.1f s (%.2f GB/s of logProb + out)\n", fill_s, run_s,
                2.0 * bytes / run_s / 1e9);

    oracle::GradInputs in;
    in.n = kN;
    in.c = kC;
    in.reduction = oracle::Reduction::kMean;
    in.grad_loss = {grad, ACL_FLOAT16, 0, {}};
    in.log_prob = {log_prob, ACL_FLOAT16, 0, {kC, 1}};
    in.target = {target, ACL_INT64, 0, {1}};
    in.label_smoothing = 0.1;
    const oracle::GradOracle reference(in);
    const oracle::View got{out, ACL_FLOAT16, 0, {kC, 1}};
    std::vector<int64_t> rows = {0, 1, 2, 97, 32766, 32767, 32768, 32769, 65532, 65533, 65534, 65535};
    for (int k = 0; k < 20; ++k) rows.push_back((k * 2654435761ull) % kN);
    for (int64_t i : rows) {
        int64_t mismatches = 0;
        std::string first;
        for (int64_t j = 0; j < kC; ++j) {
            std::string why;
            if (oracle::Judge(reference, ACL_FLOAT16, i, j, got.Float(i, j), &why) == oracle::Verdict::kMismatch &&
                mismatches++ == 0) {
                first = "column " + std::to_string(j) + ": " + why;
            }
        }
        EXPECT_EQ(mismatches, 0) << "row " << i << " (target " << TargetOf(i) << "): " << first;
    }
    // The block's padding past the last element: still aclrtMalloc's zeros.
    const auto *tail = static_cast<const uint8_t *>(out) + bytes;
    for (int k = 0; k < 32; ++k) EXPECT_EQ(tail[k], 0) << "byte " << k << " past out";

    // The forward over the same 2^31 + 65536 elements: log_prob's values as logits, logProbOut in out (NaN again).
    ParallelRows(kN, [&](int64_t i) { std::fill_n(o + static_cast<uint64_t>(i) * kC, kC, uint16_t{0x7e00}); });
    void *loss = nullptr, *lse = nullptr;
    ASSERT_EQ(aclrtMalloc(&loss, 2, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    ASSERT_EQ(aclrtMalloc(&lse, kN * 2, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    const int64_t empty_dims[1] = {0};
    aclTensor *loss_t = aclCreateTensor(nullptr, 0, ACL_FLOAT16, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, loss);
    aclTensor *zloss_t = aclCreateTensor(empty_dims, 1, ACL_FLOAT16, nullptr, 0, ACL_FORMAT_ND, empty_dims, 1, nullptr);
    aclTensor *lse_t = aclCreateTensor(n_dims, 1, ACL_FLOAT16, nullptr, 0, ACL_FORMAT_ND, n_dims, 1, lse);
    aclOpExecutor *forward = nullptr;
    uint64_t forward_ws = 0;
    ASSERT_EQ(aclnnCrossEntropyLossGetWorkspaceSize(log_prob_t, target_t, nullptr, reduction, -100, 0.1, 0.0, false,
                                                    loss_t, out_t, zloss_t, lse_t, &forward_ws, &forward),
              ACLNN_SUCCESS)
        << aclGetRecentErrMsg();
    void *forward_workspace = nullptr;
    ASSERT_EQ(aclrtMalloc(&forward_workspace, forward_ws ? forward_ws : 1, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    const auto forward_start = std::chrono::steady_clock::now();
    ASSERT_EQ(aclnnCrossEntropyLoss(forward_workspace, forward_ws, forward, nullptr), ACLNN_SUCCESS);
    ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS) << aclGetRecentErrMsg();
    const double forward_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count();
    std::printf("large: forward %.1f s\n", forward_s);
    // Each sampled row against log_softmax in float64: logProb within one fp16 rounding (2^-11 relative) plus the
    // fp32 lse's error, lse within one fp16 rounding of the row's log-sum-exp.
    const oracle::View input{log_prob, ACL_FLOAT16, 0, {kC, 1}};
    const oracle::View lse_got{lse, ACL_FLOAT16, 0, {1}};
    for (int64_t i : rows) {
        double m = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < kC; ++j) m = std::max(m, input.Float(i, j));
        for (int64_t j = 0; j < kC; ++j) sum += std::exp(input.Float(i, j) - m);
        const double want_lse = m + std::log(sum);
        EXPECT_LE(std::fabs(lse_got.Float(i, 0) - want_lse), std::ldexp(std::fabs(want_lse), -11) + 1e-6)
            << "lse of row " << i;
        int64_t mismatches = 0;
        std::string first;
        for (int64_t j = 0; j < kC; ++j) {
            const double want = input.Float(i, j) - want_lse, value = got.Float(i, j);
            if (!(std::fabs(value - want) <= std::ldexp(std::fabs(want), -11) + 4e-6 * std::fabs(want_lse) + 1e-6) &&
                mismatches++ == 0) {
                first = "column " + std::to_string(j) + ": " + std::to_string(value) + ", expected " +
                        std::to_string(want);
            }
        }
        EXPECT_EQ(mismatches, 0) << "forward row " << i << ": " << first;
    }
    for (int k = 0; k < 32; ++k) EXPECT_EQ(tail[k], 0) << "byte " << k << " past logProbOut";

    for (aclTensor *x : {grad_t, log_prob_t, target_t, out_t, loss_t, zloss_t, lse_t}) aclDestroyTensor(x);
    for (void *p : {log_prob, out, target, grad, workspace, loss, lse, forward_workspace}) {
        EXPECT_EQ(aclrtFree(p), ACL_SUCCESS);
    }
}

}  // namespace
