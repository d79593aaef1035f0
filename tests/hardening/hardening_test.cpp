// Hostile use of the public API: wild views, out-of-range targets, spent/destroyed/invented handles, freed
// pointers, allocation failure, aclFinalize with work queued, many threads, and create/destroy cycles that
// LeakSanitizer checks at exit (make test-asan). Every call must answer with a status code and leave memory it does
// not own untouched: outputs sit between guard bytes that are checked after every call.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "aclnnop/aclnn_cross_entropy_loss_grad.h"
#include "grad_oracle.h"

namespace {

using namespace openaclnn;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

class Hardening : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const aclError init = aclInit(nullptr);
        ASSERT_TRUE(init == ACL_SUCCESS || init == ACL_ERROR_REPEAT_INITIALIZE);
        ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    }
};

// Float storage with guard regions before and after; Guarded() checks them (and, optionally, the whole storage).
struct GuardedFloats {
    static constexpr size_t kGuard = 256;
    static constexpr uint8_t kPattern = 0xa7;
    std::vector<uint8_t> bytes;
    size_t count;
    explicit GuardedFloats(size_t n, float fill = 7.0f) : bytes(n * 4 + 2 * kGuard, kPattern), count(n) {
        for (size_t k = 0; k < n; ++k) std::memcpy(&bytes[kGuard + 4 * k], &fill, 4);
    }
    float *data() { return reinterpret_cast<float *>(&bytes[kGuard]); }
    bool GuardsIntact() const {
        for (size_t k = 0; k < kGuard; ++k) {
            if (bytes[k] != kPattern || bytes[bytes.size() - 1 - k] != kPattern) return false;
        }
        return true;
    }
    bool AllEqual(float v) const {
        for (size_t k = 0; k < count; ++k) {
            float f;
            std::memcpy(&f, &bytes[kGuard + 4 * k], 4);
            if (std::memcmp(&f, &v, 4) != 0) return false;
        }
        return true;
    }
};

aclTensor *Make(std::vector<int64_t> dims, aclDataType dtype, void *data, std::vector<int64_t> strides = {},
                int64_t offset = 0, std::vector<int64_t> storage = {}) {
    if (storage.empty()) storage = dims;
    return aclCreateTensor(dims.data(), dims.size(), dtype, strides.empty() ? nullptr : strides.data(), offset,
                           ACL_FORMAT_ND, storage.data(), storage.size(), data);
}

// A small valid problem (float, N=4, C=6, mean) whose pieces a test replaces one at a time.
struct Problem {
    int64_t n = 4, c = 6;
    std::vector<float> log_prob, weight;
    std::vector<int64_t> target{0, 5, 2, 3};
    float grad = 1.0f;
    GuardedFloats out{24};
    aclTensor *grad_t, *log_prob_t, *target_t, *out_t;

    Problem() : log_prob(24), weight(6, 1.0f) {
        for (size_t k = 0; k < log_prob.size(); ++k) log_prob[k] = -0.5f - 0.25f * static_cast<float>(k % 7);
        grad_t = Make({}, ACL_FLOAT, &grad);
        log_prob_t = Make({n, c}, ACL_FLOAT, log_prob.data());
        target_t = Make({n}, ACL_INT64, target.data());
        out_t = Make({n, c}, ACL_FLOAT, out.data());
    }
    ~Problem() {
        for (aclTensor *t : {grad_t, log_prob_t, target_t, out_t}) aclDestroyTensor(t);
    }
    aclnnStatus Phase1(const aclTensor *out, uint64_t *ws, aclOpExecutor **executor, const aclTensor *log_prob = nullptr,
                       const aclTensor *target = nullptr, const char *reduction = "mean") {
        return aclnnCrossEntropyLossGradGetWorkspaceSize(grad_t, log_prob ? log_prob : log_prob_t,
                                                         target ? target : target_t, nullptr, nullptr, nullptr,
                                                         const_cast<char *>(reduction), -100, 0.0, 0.0, out, ws,
                                                         executor);
    }
    // Phase 1 + phase 2 + synchronisation on the default stream.
    aclError RunAll(const aclTensor *out, const aclTensor *log_prob = nullptr, const aclTensor *target = nullptr) {
        uint64_t ws = 0;
        aclOpExecutor *executor = nullptr;
        const aclnnStatus s = Phase1(out, &ws, &executor, log_prob, target);
        if (s != ACLNN_SUCCESS) return s;
        if (ws > (uint64_t{1} << 30)) {  // only a view phase 1 should have refused asks for this much
            aclDestroyAclOpExecutor(executor);
            return -1;
        }
        std::vector<uint8_t> workspace(ws);
        const aclnnStatus r = aclnnCrossEntropyLossGrad(ws ? workspace.data() : nullptr, ws, executor, nullptr);
        if (r != ACLNN_SUCCESS) return r;
        return aclrtSynchronizeStream(nullptr);
    }
};

// ---- wild views ----------------------------------------------------------------------------------------------

TEST_F(Hardening, WildStridesAndOffsetsAreRefusedAndTouchNothing) {
    Problem p;
    struct Case {
        std::vector<int64_t> strides;
        int64_t offset;
        std::vector<int64_t> storage;
    } cases[] = {
        {{kI64Max, 1}, 0, {24}},
        {{kI64Min, 1}, 0, {24}},
        {{6, kI64Max}, 0, {24}},
        {{-6, -1}, 0, {24}},                  // reaches below the storage
        {{6, 1}, kI64Max, {24}},              // offset past everything
        {{6, 1}, kI64Max - 5, {24}},          // offset + extent overflows
        {{6, 1}, 1, {24}},                    // one element past the storage
        {{int64_t{1} << 62, 1}, 0, {kI64Max}},  // storage "large enough", address arithmetic is not
        {{6, 1}, 0, {int64_t{1} << 32, int64_t{1} << 32}},  // storage element count overflows
        {{6, 1}, int64_t{1} << 62, {(int64_t{1} << 62) + 24}},  // element offsets fit in int64, byte offsets do not
        {{6, 1}, 0, {int64_t{1} << 62}},                         // a storage of 2^64 bytes
    };
    for (const Case &k : cases) {
        aclTensor *out = Make({4, 6}, ACL_FLOAT, p.out.data(), k.strides, k.offset, k.storage);
        ASSERT_NE(out, nullptr);
        const aclError s = p.RunAll(out);
        EXPECT_TRUE(s == ACLNN_ERR_INNER_TILING_ERROR || s == ACLNN_ERR_PARAM_INVALID) << s;
        EXPECT_NE(aclGetRecentErrMsg(), nullptr);
        EXPECT_TRUE(p.out.GuardsIntact());
        EXPECT_TRUE(p.out.AllEqual(7.0f));
        aclDestroyTensor(out);
        // The same views on an input: refused too.
        aclTensor *in = Make({4, 6}, ACL_FLOAT, p.log_prob.data(), k.strides, k.offset, k.storage);
        const aclError si = p.RunAll(p.out_t, in);
        EXPECT_TRUE(si == ACLNN_ERR_INNER_TILING_ERROR || si == ACLNN_ERR_PARAM_INVALID) << si;
        EXPECT_TRUE(p.out.GuardsIntact());
        EXPECT_TRUE(p.out.AllEqual(7.0f));
        aclDestroyTensor(in);
    }
}

TEST_F(Hardening, ViewLargerThanItsAclrtMallocBlockIsRefused) {
    Problem p;
    // aclrtMalloc(32) has 64 usable bytes (16 floats); aclrtMalloc(64) has 96 (24 floats, exactly [4, 6]).
    void *small = nullptr, *exact = nullptr;
    ASSERT_EQ(aclrtMalloc(&small, 32, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
    ASSERT_EQ(aclrtMalloc(&exact, 64, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
    aclTensor *too_small = Make({4, 6}, ACL_FLOAT, small);
    EXPECT_EQ(p.RunAll(too_small), ACLNN_ERR_INNER_TILING_ERROR);
    aclTensor *fits = Make({4, 6}, ACL_FLOAT, exact);
    EXPECT_EQ(p.RunAll(fits), ACL_SUCCESS) << aclGetRecentErrMsg();
    aclTensor *interior = Make({4, 6}, ACL_FLOAT, static_cast<char *>(exact) + 16);
    EXPECT_EQ(p.RunAll(interior), ACLNN_ERR_INNER_TILING_ERROR);
    aclTensor *input = Make({4, 6}, ACL_FLOAT, small);
    EXPECT_EQ(p.RunAll(p.out_t, input), ACLNN_ERR_INNER_TILING_ERROR);
    EXPECT_TRUE(p.out.AllEqual(7.0f));
    for (aclTensor *t : {too_small, fits, interior, input}) aclDestroyTensor(t);
    EXPECT_EQ(aclrtFree(small), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(exact), ACL_SUCCESS);
}

// An output whose elements share addresses would be written twice, from several threads: refused.
TEST_F(Hardening, SelfOverlappingOutputIsRefused) {
    Problem p;
    const std::vector<int64_t> strides[] = {{0, 1}, {6, 0}, {0, 0}, {1, 1}, {2, 3}};
    for (const auto &s : strides) {
        aclTensor *out = Make({4, 6}, ACL_FLOAT, p.out.data(), s, 0, {24});
        ASSERT_NE(out, nullptr);
        EXPECT_EQ(p.RunAll(out), ACLNN_ERR_PARAM_INVALID) << s[0] << "," << s[1];
        EXPECT_TRUE(p.out.AllEqual(7.0f));
        aclDestroyTensor(out);
    }
    // Non-overlapping interleavings stay valid: strides (3, 2) over a 4 x 2 view never collide.
    std::vector<float> lp(8, -1.0f);
    std::vector<int64_t> target{0, 1, 1, 0};
    GuardedFloats out_mem(16);
    aclTensor *l = Make({4, 2}, ACL_FLOAT, lp.data());
    aclTensor *t = Make({4}, ACL_INT64, target.data());
    aclTensor *o = Make({4, 2}, ACL_FLOAT, out_mem.data(), {3, 2}, 0, {16});
    EXPECT_EQ(p.RunAll(o, l, t), ACL_SUCCESS) << aclGetRecentErrMsg();
    EXPECT_TRUE(out_mem.GuardsIntact());
    for (aclTensor *x : {l, t, o}) aclDestroyTensor(x);
}

// The forward refuses self-overlapping outputs the same way, whichever output it is, and writes nothing.
TEST_F(Hardening, ForwardSelfOverlappingOutputIsRefused) {
    std::vector<float> input(24, 0.5f), log_prob_out(24, 7.0f), loss_out(4, 7.0f), lse_out(4, 7.0f);
    std::vector<int64_t> target{0, 5, 2, 3};
    aclTensor *in = Make({4, 6}, ACL_FLOAT, input.data());
    aclTensor *t = Make({4}, ACL_INT64, target.data());
    aclTensor *zloss = Make({0}, ACL_FLOAT, nullptr);
    const std::vector<int64_t> strides[] = {{0, 1}, {6, 0}, {1, 1}};
    for (const auto &s : strides) {
        aclTensor *lp = Make({4, 6}, ACL_FLOAT, log_prob_out.data(), s, 0, {24});
        aclTensor *loss = Make({4}, ACL_FLOAT, loss_out.data());
        aclTensor *lse = Make({4}, ACL_FLOAT, lse_out.data());
        uint64_t ws = 0;
        aclOpExecutor *ex = nullptr;
        EXPECT_EQ(aclnnCrossEntropyLossGetWorkspaceSize(in, t, nullptr, const_cast<char *>("none"), -100, 0.0, 0.0,
                                                        false, loss, lp, zloss, lse, &ws, &ex),
                  ACLNN_ERR_PARAM_INVALID)
            << s[0] << "," << s[1];
        ASSERT_NE(aclGetRecentErrMsg(), nullptr);
        EXPECT_NE(std::string(aclGetRecentErrMsg()).find("logProbOut"), std::string::npos) << aclGetRecentErrMsg();
        for (aclTensor *x : {lp, loss, lse}) aclDestroyTensor(x);
    }
    // The same loss output with a zero stride (4 elements on one address) is refused too.
    aclTensor *lp = Make({4, 6}, ACL_FLOAT, log_prob_out.data());
    aclTensor *loss = Make({4}, ACL_FLOAT, loss_out.data(), {0}, 0, {4});
    aclTensor *lse = Make({4}, ACL_FLOAT, lse_out.data());
    uint64_t ws = 0;
    aclOpExecutor *ex = nullptr;
    EXPECT_EQ(aclnnCrossEntropyLossGetWorkspaceSize(in, t, nullptr, const_cast<char *>("none"), -100, 0.0, 0.0, false,
                                                    loss, lp, zloss, lse, &ws, &ex),
              ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(std::string(aclGetRecentErrMsg()).find("lossOut"), std::string::npos) << aclGetRecentErrMsg();
    for (float v : log_prob_out) EXPECT_EQ(v, 7.0f);
    for (float v : loss_out) EXPECT_EQ(v, 7.0f);
    for (aclTensor *x : {lp, loss, lse, in, t, zloss}) aclDestroyTensor(x);
}

// A view inside a storage of more than 2^63 bytes: its element offsets fit in int64, its byte offsets do not.
// Refused with 561002 naming the tensor, for the gradient's weight and the forward's weight alike.
TEST_F(Hardening, StorageOfMoreThan2To63BytesIsRefused) {
    Problem p;
    const int64_t far = int64_t{1} << 62;  // 2^64 bytes of float: wraps to the data address itself
    aclTensor *w = Make({6}, ACL_FLOAT, p.weight.data(), {1}, far, {far + 6});
    uint64_t ws = 0;
    aclOpExecutor *ex = nullptr;
    EXPECT_EQ(aclnnCrossEntropyLossGradGetWorkspaceSize(p.grad_t, p.log_prob_t, p.target_t, w, nullptr, nullptr,
                                                        const_cast<char *>("mean"), -100, 0.0, 0.0, p.out_t, &ws, &ex),
              ACLNN_ERR_INNER_TILING_ERROR);
    ASSERT_NE(aclGetRecentErrMsg(), nullptr);
    EXPECT_NE(std::string(aclGetRecentErrMsg()).find("weightOptional storage of shape [4611686018427387910]"),
              std::string::npos)
        << aclGetRecentErrMsg();
    EXPECT_NE(std::string(aclGetRecentErrMsg()).find("more than 2^63 bytes"), std::string::npos)
        << aclGetRecentErrMsg();
    EXPECT_TRUE(p.out.AllEqual(7.0f));

    std::vector<float> log_prob_out(24, 7.0f), loss_out(4, 7.0f), lse_out(4, 7.0f);
    aclTensor *lp = Make({4, 6}, ACL_FLOAT, log_prob_out.data());
    aclTensor *loss = Make({4}, ACL_FLOAT, loss_out.data());
    aclTensor *zloss = Make({0}, ACL_FLOAT, nullptr);
    aclTensor *lse = Make({4}, ACL_FLOAT, lse_out.data());
    EXPECT_EQ(aclnnCrossEntropyLossGetWorkspaceSize(p.log_prob_t, p.target_t, w, const_cast<char *>("none"), -100, 0.0,
                                                    0.0, false, loss, lp, zloss, lse, &ws, &ex),
              ACLNN_ERR_INNER_TILING_ERROR);
    EXPECT_NE(std::string(aclGetRecentErrMsg()).find("weightOptional storage of shape"), std::string::npos)
        << aclGetRecentErrMsg();
    for (float v : log_prob_out) EXPECT_EQ(v, 7.0f);
    for (aclTensor *x : {w, lp, loss, zloss, lse}) aclDestroyTensor(x);
}

// A view with no elements names no memory, so its offset is not bounded: any offset is accepted, and the results
// are bit for bit those of the same call with offset 0 (the offset never enters the address arithmetic, which
// UndefinedBehaviorSanitizer checks in make test-asan).
TEST_F(Hardening, EmptyViewsAcceptAnyOffset) {
    const int64_t far[] = {0, kI64Max, int64_t{1} << 62, kI64Max / 3};
    // The forward with C = 0: input, weight and logProbOut are empty; every row ignored; zlossOut [0].
    std::vector<int64_t> target{-100, -100, -100};
    std::vector<uint32_t> first_loss, first_lse;
    for (const int64_t offset : far) {
        std::vector<float> loss_out(3, 7.0f), lse_out(3, 7.0f);
        float dummy = 7.0f;
        aclTensor *in = Make({3, 0}, ACL_FLOAT, &dummy, {}, offset, {1});
        aclTensor *t = Make({3}, ACL_INT64, target.data());
        aclTensor *w = Make({0}, ACL_FLOAT, &dummy, {}, offset, {1});
        aclTensor *lp = Make({3, 0}, ACL_FLOAT, &dummy, {}, offset, {1});
        aclTensor *loss = Make({3}, ACL_FLOAT, loss_out.data());
        aclTensor *zloss = Make({0}, ACL_FLOAT, &dummy, {}, offset, {1});
        aclTensor *lse = Make({3}, ACL_FLOAT, lse_out.data());
        uint64_t ws = 0;
        aclOpExecutor *ex = nullptr;
        ASSERT_EQ(aclnnCrossEntropyLossGetWorkspaceSize(in, t, w, const_cast<char *>("none"), -100, 0.0, 0.0, false,
                                                        loss, lp, zloss, lse, &ws, &ex),
                  ACLNN_SUCCESS)
            << offset << ": " << aclGetRecentErrMsg();
        std::vector<uint8_t> workspace(ws);
        ASSERT_EQ(aclnnCrossEntropyLoss(ws ? workspace.data() : nullptr, ws, ex, nullptr), ACLNN_SUCCESS);
        ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
        EXPECT_EQ(dummy, 7.0f);
        std::vector<uint32_t> loss_bits(3), lse_bits(3);
        std::memcpy(loss_bits.data(), loss_out.data(), 12);
        std::memcpy(lse_bits.data(), lse_out.data(), 12);
        for (int i = 0; i < 3; ++i) {
            EXPECT_EQ(loss_out[i], 0.0f) << offset;  // ignored rows
            EXPECT_EQ(lse_out[i], -std::numeric_limits<float>::infinity()) << offset;  // log of an empty sum
        }
        if (offset == 0) {
            first_loss = loss_bits;
            first_lse = lse_bits;
        }
        EXPECT_EQ(loss_bits, first_loss) << offset;
        EXPECT_EQ(lse_bits, first_lse) << offset;
        for (aclTensor *x : {in, t, w, lp, loss, zloss, lse}) aclDestroyTensor(x);
    }
    // The gradient with an empty lseForZloss [0] (z-loss scale 0), beside a full problem: the same bits as with
    // offset 0, which match the float64 reference.
    std::vector<uint32_t> first_out;
    for (const int64_t offset : far) {
        Problem p;
        float dummy = 7.0f;
        aclTensor *lse = Make({0}, ACL_FLOAT, &dummy, {}, offset, {1});
        uint64_t ws = 0;
        aclOpExecutor *ex = nullptr;
        ASSERT_EQ(aclnnCrossEntropyLossGradGetWorkspaceSize(p.grad_t, p.log_prob_t, p.target_t, nullptr, nullptr, lse,
                                                            const_cast<char *>("mean"), -100, 0.0, 0.0, p.out_t, &ws,
                                                            &ex),
                  ACLNN_SUCCESS)
            << offset << ": " << aclGetRecentErrMsg();
        std::vector<uint8_t> workspace(ws);
        ASSERT_EQ(aclnnCrossEntropyLossGrad(ws ? workspace.data() : nullptr, ws, ex, nullptr), ACLNN_SUCCESS);
        ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
        EXPECT_TRUE(p.out.GuardsIntact());
        std::vector<uint32_t> out_bits(24);
        std::memcpy(out_bits.data(), p.out.data(), 96);
        if (offset == 0) first_out = out_bits;
        EXPECT_EQ(out_bits, first_out) << offset;
        // mean over 4 rows with weight 1: out = (exp(logProb) - onehot) / 4, within an ulp or two in float.
        for (int64_t i = 0; i < 4; ++i) {
            for (int64_t j = 0; j < 6; ++j) {
                const double lp = p.log_prob[i * 6 + j];
                const double want = (std::exp(lp) - (j == p.target[i] ? 1.0 : 0.0)) / 4.0;
                EXPECT_NEAR(p.out.data()[i * 6 + j], want, 1e-6) << i << "," << j;
            }
        }
        aclDestroyTensor(lse);
    }
}

// A broadcast input of 2^80 logical elements is fine as an input, but no output can hold them: refused quickly.
TEST_F(Hardening, HugeBroadcastViewsAreRefusedNotRun) {
    Problem p;
    const int64_t big = int64_t{1} << 40;
    float one = -1.0f;
    int64_t zero = 0;
    aclTensor *l = Make({big, big}, ACL_FLOAT, &one, {0, 0}, 0, {1});
    aclTensor *t = Make({big}, ACL_INT64, &zero, {0}, 0, {1});
    aclTensor *o = Make({big, big}, ACL_FLOAT, p.out.data(), {0, 0}, 0, {1});
    EXPECT_NE(p.RunAll(o, l, t), ACL_SUCCESS);
    EXPECT_TRUE(p.out.GuardsIntact());
    EXPECT_TRUE(p.out.AllEqual(7.0f));
    for (aclTensor *x : {l, t, o}) aclDestroyTensor(x);
}

TEST_F(Hardening, OutputOverlappingAnInputIsRefused) {
    Problem p;
    aclTensor *o = Make({4, 6}, ACL_FLOAT, p.log_prob.data(), {6, 1}, 1, {25});  // logProb shifted by one
    std::vector<float> saved = p.log_prob;
    EXPECT_EQ(p.RunAll(o), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(saved, p.log_prob);
    aclDestroyTensor(o);
}

// ---- misaligned data addresses --------------------------------------------------------------------------------
// A data address that is not a multiple of its dtype's size (a float at an odd address) is refused with 161002,
// naming the tensor (fuzz/README.md: "Misaligned data addresses"); an address aligned to the element but not to a
// vector is an ordinary address, and gives the same bits as an aligned one.

// 64-byte aligned scratch memory, filled with a pattern; a tensor's data lives at base() + shift.
struct alignas(64) Scratch {
    uint8_t bytes[512];
    Scratch() { std::memset(bytes, 0x3c, sizeof bytes); }
    uint8_t *at(size_t shift) { return bytes + shift; }
};

bool MessageNames(const char *what) {
    const char *message = aclGetRecentErrMsg();
    return message != nullptr && std::strstr(message, what) != nullptr && std::strstr(message, "not a multiple of");
}

TEST_F(Hardening, GradMisalignedDataAddressesAreRefused) {
    const int64_t n = 3, c = 5;
    // Each tensor of the gradient in turn gets an address off by `shift` bytes; the others stay aligned.
    enum { kGradLoss, kLogProb, kTarget, kWeight, kGradZloss, kLse, kOut, kCount };
    const char *names[kCount] = {"gradLoss", "logProb", "target", "weightOptional", "gradZlossOptional",
                                 "lseForZlossOptional", "out"};
    for (const aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
        for (const aclDataType target_type : {ACL_INT64, ACL_INT32}) {
            const int64_t size = dtype == ACL_FLOAT ? 4 : 2, target_size = target_type == ACL_INT64 ? 8 : 4;
            const int64_t sizes[kCount] = {size, size, target_size, 4, size, size, size};
            for (int bad = 0; bad < kCount; ++bad) {
                for (int64_t shift = 1; shift < sizes[bad]; ++shift) {
                    Scratch mem[kCount];
                    for (int k = 0; k < kCount; ++k) std::memset(mem[k].bytes, 0, sizeof mem[k].bytes);
                    const auto data = [&](int k) { return mem[k].at(k == bad ? static_cast<size_t>(shift) : 0); };
                    aclTensor *t[kCount] = {
                        Make({n}, dtype, data(kGradLoss)),     Make({n, c}, dtype, data(kLogProb)),
                        Make({n}, target_type, data(kTarget)), Make({c}, ACL_FLOAT, data(kWeight)),
                        Make({n}, dtype, data(kGradZloss)),    Make({n}, dtype, data(kLse)),
                        Make({n, c}, dtype, data(kOut))};
                    std::memset(mem[kOut].bytes, 0x3c, sizeof mem[kOut].bytes);
                    uint64_t ws = 0;
                    aclOpExecutor *executor = nullptr;
                    const aclnnStatus s = aclnnCrossEntropyLossGradGetWorkspaceSize(
                        t[kGradLoss], t[kLogProb], t[kTarget], t[kWeight], t[kGradZloss], t[kLse],
                        const_cast<char *>("none"), -100, 0.0, 0.5, t[kOut], &ws, &executor);
                    EXPECT_EQ(s, ACLNN_ERR_PARAM_INVALID) << names[bad] << " shifted by " << shift;
                    EXPECT_TRUE(MessageNames(names[bad])) << (aclGetRecentErrMsg() ? aclGetRecentErrMsg() : "");
                    for (uint8_t b : mem[kOut].bytes) ASSERT_EQ(b, 0x3c) << "a refused call wrote memory";
                    for (aclTensor *x : t) aclDestroyTensor(x);
                }
            }
        }
    }
}

TEST_F(Hardening, ForwardMisalignedDataAddressesAreRefused) {
    const int64_t n = 3, c = 5;
    enum { kInput, kTarget, kWeight, kLoss, kLogProb, kZloss, kLse, kCount };
    const char *names[kCount] = {"input", "target", "weightOptional", "lossOut", "logProbOut", "zlossOut",
                                 "lseForZlossOut"};
    for (const aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
        for (const aclDataType target_type : {ACL_INT64, ACL_INT32}) {
            const int64_t size = dtype == ACL_FLOAT ? 4 : 2, target_size = target_type == ACL_INT64 ? 8 : 4;
            const int64_t sizes[kCount] = {size, target_size, 4, size, size, size, size};
            for (int bad = 0; bad < kCount; ++bad) {
                for (int64_t shift = 1; shift < sizes[bad]; ++shift) {
                    Scratch mem[kCount];
                    for (int k = 0; k < kLoss; ++k) std::memset(mem[k].bytes, 0, sizeof mem[k].bytes);
                    const auto data = [&](int k) { return mem[k].at(k == bad ? static_cast<size_t>(shift) : 0); };
                    aclTensor *t[kCount] = {
                        Make({n, c}, dtype, data(kInput)), Make({n}, target_type, data(kTarget)),
                        Make({c}, ACL_FLOAT, data(kWeight)), Make({n}, dtype, data(kLoss)),
                        Make({n, c}, dtype, data(kLogProb)), Make({n}, dtype, data(kZloss)),
                        Make({n}, dtype, data(kLse))};
                    uint64_t ws = 0;
                    aclOpExecutor *executor = nullptr;
                    const aclnnStatus s = aclnnCrossEntropyLossGetWorkspaceSize(
                        t[kInput], t[kTarget], t[kWeight], const_cast<char *>("none"), -100, 0.0, 0.5, true,
                        t[kLoss], t[kLogProb], t[kZloss], t[kLse], &ws, &executor);
                    EXPECT_EQ(s, ACLNN_ERR_PARAM_INVALID) << names[bad] << " shifted by " << shift;
                    EXPECT_TRUE(MessageNames(names[bad])) << (aclGetRecentErrMsg() ? aclGetRecentErrMsg() : "");
                    for (int k = kLoss; k < kCount; ++k) {
                        for (uint8_t b : mem[k].bytes) ASSERT_EQ(b, 0x3c) << "a refused call wrote memory";
                    }
                    for (aclTensor *x : t) aclDestroyTensor(x);
                }
            }
        }
    }
}

// Rebinding a repeatable executor to a misaligned address is refused the same way, and leaves the executor bound
// to its old addresses: it still runs, and gives the same bits.
TEST_F(Hardening, RebindingToMisalignedAddressesIsRefused) {
    Problem p;
    uint64_t ws = 0;
    aclOpExecutor *executor = nullptr;
    ASSERT_EQ(p.Phase1(p.out_t, &ws, &executor), ACLNN_SUCCESS);
    ASSERT_EQ(aclSetAclOpExecutorRepeatable(executor), ACLNN_SUCCESS);
    std::vector<uint8_t> workspace(ws);
    ASSERT_EQ(aclnnCrossEntropyLossGrad(workspace.data(), ws, executor, nullptr), ACLNN_SUCCESS);
    ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
    const std::vector<uint8_t> first(p.out.bytes);
    Scratch spare;
    EXPECT_EQ(aclSetInputTensorAddr(executor, 1, nullptr, spare.at(2)), ACLNN_ERR_PARAM_INVALID);  // logProb
    EXPECT_TRUE(MessageNames("aclSetInputTensorAddr"));
    EXPECT_EQ(aclSetInputTensorAddr(executor, 2, nullptr, spare.at(4)), ACLNN_ERR_PARAM_INVALID);  // int64 target
    EXPECT_EQ(aclSetOutputTensorAddr(executor, 0, nullptr, spare.at(1)), ACLNN_ERR_PARAM_INVALID);  // out
    EXPECT_TRUE(MessageNames("aclSetOutputTensorAddr"));
    std::memset(p.out.data(), 0x11, 24 * 4);
    ASSERT_EQ(aclnnCrossEntropyLossGrad(workspace.data(), ws, executor, nullptr), ACLNN_SUCCESS);
    ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
    EXPECT_EQ(first, p.out.bytes);
    for (uint8_t b : spare.bytes) EXPECT_EQ(b, 0x3c);
    EXPECT_EQ(aclDestroyAclOpExecutor(executor), ACLNN_SUCCESS);
    // The forward's executor, too.
    float input[6] = {0.5f, -1.0f, 2.0f, 0.0f, 1.0f, 3.0f}, loss[2], log_prob[6], lse[2];
    int64_t target[2] = {0, 2};
    aclTensor *in = Make({2, 3}, ACL_FLOAT, input), *t = Make({2}, ACL_INT64, target);
    aclTensor *loss_t = Make({2}, ACL_FLOAT, loss), *lp_t = Make({2, 3}, ACL_FLOAT, log_prob);
    aclTensor *z_t = Make({0}, ACL_FLOAT, nullptr), *lse_t = Make({2}, ACL_FLOAT, lse);
    ASSERT_EQ(aclnnCrossEntropyLossGetWorkspaceSize(in, t, nullptr, const_cast<char *>("none"), -100, 0.0, 0.0, false,
                                                    loss_t, lp_t, z_t, lse_t, &ws, &executor),
              ACLNN_SUCCESS);
    ASSERT_EQ(aclSetAclOpExecutorRepeatable(executor), ACLNN_SUCCESS);
    EXPECT_EQ(aclSetInputTensorAddr(executor, 0, nullptr, spare.at(3)), ACLNN_ERR_PARAM_INVALID);   // input
    EXPECT_EQ(aclSetOutputTensorAddr(executor, 1, nullptr, spare.at(6)), ACLNN_ERR_PARAM_INVALID);  // logProbOut
    EXPECT_TRUE(MessageNames("aclSetOutputTensorAddr"));
    workspace.assign(ws, 0);
    ASSERT_EQ(aclnnCrossEntropyLoss(workspace.data(), ws, executor, nullptr), ACLNN_SUCCESS);
    ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
    EXPECT_NEAR(log_prob[0], 0.5 - std::log(std::exp(0.5) + std::exp(-1.0) + std::exp(2.0)), 1e-6);
    EXPECT_EQ(aclDestroyAclOpExecutor(executor), ACLNN_SUCCESS);
    for (uint8_t b : spare.bytes) EXPECT_EQ(b, 0x3c);
    for (aclTensor *x : {in, t, loss_t, lp_t, z_t, lse_t}) aclDestroyTensor(x);
    EXPECT_EQ(aclDestroyAclOpExecutor(executor), ACLNN_ERR_PARAM_INVALID);
}

// Aligned to the element but not to any vector: every element offset from 0 to 17 gives the aligned result's bits
// (the SIMD kernels load and store such rows unaligned, peel to a vector boundary, or stream).
TEST_F(Hardening, ElementAlignedAddressesGiveTheAlignedBits) {
    const int64_t n = 3, c = 37;
    for (const aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
        const size_t size = dtype == ACL_FLOAT ? 4 : 2;
        std::vector<uint8_t> reference;
        for (size_t shift = 0; shift < 18; ++shift) {
            alignas(64) static uint8_t input[1024], log_prob[1024];
            alignas(64) static float loss[8], lse[8];
            for (int64_t k = 0; k < n * c; ++k) {
                const float v = 0.37f * static_cast<float>((k * 7) % 23) - 3.0f;
                uint32_t bits;
                std::memcpy(&bits, &v, 4);
                const uint16_t half = static_cast<uint16_t>(bits >> 16);  // bf16 by truncation: an exact value
                if (dtype == ACL_FLOAT) std::memcpy(input + shift * size + 4 * k, &v, 4);
                else if (dtype == ACL_BF16) std::memcpy(input + shift * size + 2 * k, &half, 2);
                else {
                    const uint16_t h = aclFloatToFloat16(v);
                    std::memcpy(input + shift * size + 2 * k, &h, 2);
                }
            }
            int64_t target[3] = {0, 36, 5};
            aclTensor *in = Make({n, c}, dtype, input + shift * size), *t = Make({n}, ACL_INT64, target);
            aclTensor *lp = Make({n, c}, dtype, log_prob + shift * size);
            aclTensor *loss_t = Make({n}, dtype, loss), *lse_t = Make({n}, dtype, lse), *z = Make({0}, dtype, nullptr);
            uint64_t ws = 0;
            aclOpExecutor *executor = nullptr;
            ASSERT_EQ(aclnnCrossEntropyLossGetWorkspaceSize(in, t, nullptr, const_cast<char *>("none"), -100, 0.0, 0.0,
                                                            false, loss_t, lp, z, lse_t, &ws, &executor),
                      ACLNN_SUCCESS)
                << aclGetRecentErrMsg();
            std::vector<uint8_t> workspace(ws);
            ASSERT_EQ(aclnnCrossEntropyLoss(workspace.data(), ws, executor, nullptr), ACLNN_SUCCESS);
            ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
            std::vector<uint8_t> got(log_prob + shift * size, log_prob + shift * size + n * c * size);
            if (shift == 0) reference = got;
            EXPECT_EQ(got, reference) << "dtype " << dtype << ", element offset " << shift;
            for (aclTensor *x : {in, t, lp, loss_t, lse_t, z}) aclDestroyTensor(x);
        }
    }
}

// ---- targets ---------------------------------------------------------------------------------------------------

TEST_F(Hardening, OutOfRangeTargetsGiveNanRowsAnErrorAndNoStrayWrites) {
    for (aclDataType target_type : {ACL_INT64, ACL_INT32}) {
        const std::vector<int64_t> wild = {kI64Min, kI64Max, 6, -1, -101, int64_t{1} << 33};
        for (int64_t bad : wild) {
            Problem p;
            std::vector<int64_t> t64{1, bad, 2, -100};
            std::vector<int32_t> t32;
            for (int64_t v : t64) t32.push_back(static_cast<int32_t>(v));
            const int64_t seen = target_type == ACL_INT64 ? bad : static_cast<int32_t>(bad);
            aclTensor *t = Make({4}, target_type, target_type == ACL_INT64 ? static_cast<void *>(t64.data())
                                                                           : static_cast<void *>(t32.data()));
            const aclError s = p.RunAll(p.out_t, nullptr, t);
            const bool in_range = seen >= 0 && seen < 6;
            EXPECT_EQ(s, in_range ? ACL_SUCCESS : ACL_ERROR_RT_VECTOR_CORE_EXCEPTION) << bad;
            if (!in_range) {
                ASSERT_NE(aclGetRecentErrMsg(), nullptr);
                EXPECT_NE(std::string(aclGetRecentErrMsg()).find("target[1]"), std::string::npos)
                    << aclGetRecentErrMsg();
                EXPECT_NE(std::string(aclGetRecentErrMsg()).find(std::to_string(seen)), std::string::npos)
                    << aclGetRecentErrMsg();
                for (int j = 0; j < 6; ++j) EXPECT_TRUE(std::isnan(p.out.data()[6 + j]));
            }
            for (int j = 0; j < 6; ++j) EXPECT_EQ(p.out.data()[18 + j], 0.0f);  // the ignored row
            EXPECT_TRUE(p.out.GuardsIntact());
            // The error was reported once: the stream is clean again.
            EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
            aclDestroyTensor(t);
        }
    }
}

// ---- handles ----------------------------------------------------------------------------------------------------

TEST_F(Hardening, SpentDestroyedAndInventedExecutorsAreErrorCodes) {
    Problem p;
    uint64_t ws = 0;
    aclOpExecutor *executor = nullptr;
    ASSERT_EQ(p.Phase1(p.out_t, &ws, &executor), ACLNN_SUCCESS);
    std::vector<uint8_t> workspace(ws);
    ASSERT_EQ(aclnnCrossEntropyLossGrad(workspace.data(), ws, executor, nullptr), ACLNN_SUCCESS);
    ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
    std::memset(p.out.data(), 0x11, 24 * 4);
    // Spent (freed by its run): every entry point refuses it.
    EXPECT_EQ(aclnnCrossEntropyLossGrad(workspace.data(), ws, executor, nullptr), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(aclSetAclOpExecutorRepeatable(executor), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(aclDestroyAclOpExecutor(executor), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(aclSetInputTensorAddr(executor, 0, nullptr, &p.grad), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(aclSetOutputTensorAddr(executor, 0, nullptr, p.out.data()), ACLNN_ERR_PARAM_INVALID);
    // Invented: the address of something that is not an executor.
    uint64_t junk[8] = {};
    auto *invented = reinterpret_cast<aclOpExecutor *>(junk);
    EXPECT_EQ(aclnnCrossEntropyLossGrad(workspace.data(), ws, invented, nullptr), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(aclDestroyAclOpExecutor(invented), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(aclnnCrossEntropyLossGrad(workspace.data(), ws, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR);
    // Repeatable, then destroyed.
    ASSERT_EQ(p.Phase1(p.out_t, &ws, &executor), ACLNN_SUCCESS);
    ASSERT_EQ(aclSetAclOpExecutorRepeatable(executor), ACLNN_SUCCESS);
    ASSERT_EQ(aclDestroyAclOpExecutor(executor), ACLNN_SUCCESS);
    EXPECT_EQ(aclnnCrossEntropyLossGrad(workspace.data(), ws, executor, nullptr), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(aclDestroyAclOpExecutor(executor), ACLNN_ERR_PARAM_INVALID);
    EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
    std::vector<uint8_t> poison(24 * 4, 0x11);
    EXPECT_EQ(std::memcmp(p.out.data(), poison.data(), poison.size()), 0) << "a refused run wrote its output";
    EXPECT_TRUE(p.out.GuardsIntact());
}

TEST_F(Hardening, DestroyedAndInventedTensorsAreNullptrErrors) {
    Problem p;
    aclTensor *dead = Make({4, 6}, ACL_FLOAT, p.out.data());
    ASSERT_EQ(aclDestroyTensor(dead), ACLNN_SUCCESS);
    EXPECT_EQ(aclDestroyTensor(dead), ACLNN_ERR_PARAM_INVALID);
    uint64_t ws = 0;
    aclOpExecutor *executor = nullptr;
    EXPECT_EQ(p.Phase1(dead, &ws, &executor), ACLNN_ERR_PARAM_NULLPTR);
    uint64_t junk[16] = {};
    EXPECT_EQ(p.Phase1(reinterpret_cast<aclTensor *>(junk), &ws, &executor), ACLNN_ERR_PARAM_NULLPTR);
    EXPECT_EQ(p.Phase1(p.out_t, &ws, &executor, reinterpret_cast<aclTensor *>(junk)), ACLNN_ERR_PARAM_NULLPTR);
    int64_t *dims = nullptr;
    uint64_t count = 0;
    EXPECT_NE(aclGetViewShape(dead, &dims, &count), ACLNN_SUCCESS);
    EXPECT_TRUE(p.out.AllEqual(7.0f));
}

TEST_F(Hardening, FreedAndForeignPointersAreErrorCodes) {
    void *block = nullptr;
    ASSERT_EQ(aclrtMalloc(&block, 1000, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(static_cast<char *>(block) + 64), ACL_ERROR_INVALID_PARAM);  // interior
    EXPECT_EQ(aclrtFreeHost(block), ACL_ERROR_INVALID_PARAM);                        // wrong kind
    EXPECT_EQ(aclrtFree(block), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(block), ACL_ERROR_INVALID_PARAM);  // twice
    int local = 0;
    EXPECT_EQ(aclrtFree(&local), ACL_ERROR_INVALID_PARAM);
    EXPECT_EQ(aclrtFree(nullptr), ACL_ERROR_INVALID_PARAM);
    EXPECT_EQ(aclrtFreeHost(nullptr), ACL_ERROR_INVALID_PARAM);
}

TEST_F(Hardening, DestroyedStreamsAreErrorCodes) {
    Problem p;
    aclrtStream stream = nullptr;
    ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
    ASSERT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
    EXPECT_EQ(aclrtDestroyStream(stream), ACL_ERROR_INVALID_PARAM);
    EXPECT_EQ(aclrtSynchronizeStream(stream), ACL_ERROR_INVALID_PARAM);
    float a = 1, b = 2;
    EXPECT_EQ(aclrtMemcpyAsync(&a, 4, &b, 4, ACL_MEMCPY_HOST_TO_HOST, stream), ACL_ERROR_INVALID_PARAM);
    EXPECT_EQ(a, 1.0f);
    uint64_t ws = 0;
    aclOpExecutor *executor = nullptr;
    ASSERT_EQ(p.Phase1(p.out_t, &ws, &executor), ACLNN_SUCCESS);
    std::vector<uint8_t> workspace(ws);
    EXPECT_EQ(aclnnCrossEntropyLossGrad(workspace.data(), ws, executor, stream), ACLNN_ERR_PARAM_INVALID);
    // The refused run left the executor live: it runs on a good stream, or is destroyed.
    EXPECT_EQ(aclnnCrossEntropyLossGrad(workspace.data(), ws, executor, nullptr), ACLNN_SUCCESS);
    EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
    EXPECT_TRUE(p.out.GuardsIntact());
}

// ---- memory -----------------------------------------------------------------------------------------------------

TEST_F(Hardening, AllocationFailureIs207001) {
    const size_t sizes[] = {size_t{1} << 40, size_t{1} << 50, std::numeric_limits<size_t>::max(),
                            std::numeric_limits<size_t>::max() - 31, std::numeric_limits<size_t>::max() / 2};
    for (size_t size : sizes) {
        for (aclrtMemMallocPolicy policy : {ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_HUGE_ONLY, ACL_MEM_MALLOC_NORMAL_ONLY}) {
            void *ptr = reinterpret_cast<void *>(0x1);
            EXPECT_EQ(aclrtMalloc(&ptr, size, policy), ACL_ERROR_RT_MEMORY_ALLOCATION) << size;
            EXPECT_NE(aclGetRecentErrMsg(), nullptr);
        }
        void *host = nullptr;
        EXPECT_EQ(aclrtMallocHost(&host, size), ACL_ERROR_RT_MEMORY_ALLOCATION) << size;
    }
    // And the allocator still works.
    void *ok = nullptr;
    ASSERT_EQ(aclrtMalloc(&ok, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(ok), ACL_SUCCESS);
}

// Create/destroy cycles of everything that owns memory or threads. LeakSanitizer (make test-asan) checks at exit
// that nothing of it survives; here we also check that handles die with their destroy call.
TEST_F(Hardening, CreateDestroyCyclesLeaveNothingBehind) {
    for (int cycle = 0; cycle < 50; ++cycle) {
        Problem p;
        uint64_t ws = 0;
        aclOpExecutor *never_run = nullptr, *one_shot = nullptr, *repeatable = nullptr;
        ASSERT_EQ(p.Phase1(p.out_t, &ws, &never_run), ACLNN_SUCCESS);
        ASSERT_EQ(aclDestroyAclOpExecutor(never_run), ACLNN_SUCCESS);
        aclrtStream stream = nullptr;
        ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
        void *workspace = nullptr, *out = nullptr;
        ASSERT_EQ(aclrtMalloc(&workspace, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
        ASSERT_EQ(aclrtMalloc(&out, 24 * 4, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
        aclTensor *o = Make({4, 6}, ACL_FLOAT, out);
        ASSERT_EQ(p.Phase1(o, &ws, &one_shot), ACLNN_SUCCESS);
        ASSERT_EQ(aclnnCrossEntropyLossGrad(workspace, ws, one_shot, stream), ACLNN_SUCCESS);
        ASSERT_EQ(p.Phase1(o, &ws, &repeatable), ACLNN_SUCCESS);
        ASSERT_EQ(aclSetAclOpExecutorRepeatable(repeatable), ACLNN_SUCCESS);
        for (int k = 0; k < 3; ++k) ASSERT_EQ(aclnnCrossEntropyLossGrad(workspace, ws, repeatable, stream), ACLNN_SUCCESS);
        ASSERT_EQ(aclDestroyAclOpExecutor(repeatable), ACLNN_SUCCESS);
        float host[24];
        ASSERT_EQ(aclrtMemcpyAsync(host, sizeof host, out, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST, stream), ACL_SUCCESS);
        // Destroyed with work queued: the work completes first.
        ASSERT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
        EXPECT_FLOAT_EQ(host[1], std::exp(p.log_prob[1]) / 4.0f);
        ASSERT_EQ(aclDestroyTensor(o), ACLNN_SUCCESS);
        ASSERT_EQ(aclrtFree(out), ACL_SUCCESS);
        ASSERT_EQ(aclrtFree(workspace), ACL_SUCCESS);
        void *pinned = nullptr;
        ASSERT_EQ(aclrtMallocHost(&pinned, 1 << 20), ACL_SUCCESS);
        ASSERT_EQ(aclrtFreeHost(pinned), ACL_SUCCESS);

        // The forward's executors the same way: never run, one-shot, repeatable (run on a stream destroyed with
        // the runs still queued).
        float logits[24], log_prob[24], lse[4], loss = 0.0f;
        for (int k = 0; k < 24; ++k) logits[k] = 0.25f * static_cast<float>(k % 5);
        aclTensor *in = Make({4, 6}, ACL_FLOAT, logits), *lp = Make({4, 6}, ACL_FLOAT, log_prob);
        aclTensor *loss_t = Make({}, ACL_FLOAT, &loss), *z = Make({0}, ACL_FLOAT, nullptr);
        aclTensor *lse_t = Make({4}, ACL_FLOAT, lse);
        const auto forward = [&](aclOpExecutor **executor) {
            return aclnnCrossEntropyLossGetWorkspaceSize(in, p.target_t, nullptr, nullptr, -100, 0.0, 0.0, false,
                                                         loss_t, lp, z, lse_t, &ws, executor);
        };
        ASSERT_EQ(forward(&never_run), ACLNN_SUCCESS);
        ASSERT_EQ(aclDestroyAclOpExecutor(never_run), ACLNN_SUCCESS);
        ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
        std::vector<uint8_t> forward_workspace(4096);
        ASSERT_EQ(forward(&one_shot), ACLNN_SUCCESS);
        ASSERT_LE(ws, forward_workspace.size());
        ASSERT_EQ(aclnnCrossEntropyLoss(forward_workspace.data(), ws, one_shot, stream), ACLNN_SUCCESS);
        ASSERT_EQ(forward(&repeatable), ACLNN_SUCCESS);
        ASSERT_EQ(aclSetAclOpExecutorRepeatable(repeatable), ACLNN_SUCCESS);
        for (int k = 0; k < 3; ++k) {
            ASSERT_EQ(aclnnCrossEntropyLoss(forward_workspace.data(), ws, repeatable, stream), ACLNN_SUCCESS);
        }
        ASSERT_EQ(aclDestroyAclOpExecutor(repeatable), ACLNN_SUCCESS);
        ASSERT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
        EXPECT_NEAR(lse[0], std::log(2 * std::exp(0.0) + std::exp(0.25) + std::exp(0.5) + std::exp(0.75) + std::exp(1.0)),
                    1e-5);
        for (aclTensor *x : {in, lp, loss_t, z, lse_t}) ASSERT_EQ(aclDestroyTensor(x), ACLNN_SUCCESS);
    }
}

// ---- many threads -------------------------------------------------------------------------------------------------

TEST_F(Hardening, ManyThreadsOnTheDefaultStream) {
    constexpr int kThreads = 16;
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int k = 0; k < 10; ++k) {
                Problem p;
                p.grad = 1.0f + static_cast<float>(t);
                if (p.RunAll(p.out_t) != ACL_SUCCESS) ++failures;
                // Row 0, target 0: (p - 1) * grad / 4 rows.
                const double want = (std::exp(static_cast<double>(p.log_prob[0])) - 1.0) * p.grad / 4.0;
                if (std::fabs(p.out.data()[0] - want) > 1e-5 * std::fabs(want) || !p.out.GuardsIntact()) ++failures;
            }
        });
    }
    for (auto &thread : threads) thread.join();
    EXPECT_EQ(failures.load(), 0);
}

// ---- aclFinalize with work queued (in child processes: aclFinalize is for the whole process) ----------------------

void QueueWorkThenFinalize(bool finalize) {
    if (aclInit(nullptr) != ACL_SUCCESS) std::_Exit(3);
    aclrtStream stream = nullptr;
    if (aclrtCreateStream(&stream) != ACL_SUCCESS) std::_Exit(4);
    const int64_t n = 64, c = 8192;  // enough that the work is still queued when aclFinalize comes
    std::vector<float> log_prob(n * c, -9.0f), copy(n * c, 0.0f);
    std::vector<std::vector<float>> outs(8, std::vector<float>(n * c, 7.0f));  // one per run: two streams run at once
    std::vector<int64_t> target(n, 3);
    float grad = 1.0f;
    aclTensor *g = Make({}, ACL_FLOAT, &grad);
    aclTensor *l = Make({n, c}, ACL_FLOAT, log_prob.data());
    aclTensor *t = Make({n}, ACL_INT64, target.data());
    std::vector<std::vector<uint8_t>> workspaces;
    for (int k = 0; k < 8; ++k) {
        aclTensor *o = Make({n, c}, ACL_FLOAT, outs[k].data());
        uint64_t ws = 0;
        aclOpExecutor *executor = nullptr;
        if (aclnnCrossEntropyLossGradGetWorkspaceSize(g, l, t, nullptr, nullptr, nullptr, nullptr, -100, 0.0, 0.0, o,
                                                      &ws, &executor) != ACLNN_SUCCESS) {
            std::_Exit(5);
        }
        workspaces.emplace_back(ws);
        if (aclnnCrossEntropyLossGrad(workspaces.back().data(), ws, executor, k % 2 ? stream : nullptr) != ACLNN_SUCCESS) {
            std::_Exit(6);
        }
        aclDestroyTensor(o);
    }
    // outs[7] was written on `stream` (odd k): the copy queued behind it sees the result.
    if (aclrtMemcpyAsync(copy.data(), copy.size() * 4, outs[7].data(), copy.size() * 4, ACL_MEMCPY_DEVICE_TO_DEVICE,
                         stream) != ACL_SUCCESS) {
        std::_Exit(7);
    }
    if (finalize) {
        if (aclFinalize() != ACL_SUCCESS) std::_Exit(8);
        // Everything queued ran before aclFinalize returned.
        const float want = static_cast<float>(std::exp(-9.0) / n);
        if (std::fabs(copy[0] - want) > 1e-6f * want) std::_Exit(9);
        if (aclFinalize() != ACL_ERROR_REPEAT_FINALIZE) std::_Exit(10);
    }
    // Without aclFinalize: the process simply exits with work queued; that must not crash either.
    std::exit(0);
}

TEST(HardeningDeathTest, FinalizeWaitsForQueuedWork) {
    ::testing::FLAGS_gtest_death_test_style = "threadsafe";  // a fresh process: no threads forked mid-flight
    EXPECT_EXIT(QueueWorkThenFinalize(true), ::testing::ExitedWithCode(0), "");
}

TEST(HardeningDeathTest, ExitWithWorkQueuedDoesNotCrash) {
    ::testing::FLAGS_gtest_death_test_style = "threadsafe";
    EXPECT_EXIT(QueueWorkThenFinalize(false), ::testing::ExitedWithCode(0), "");
}

}  // namespace
