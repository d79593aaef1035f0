// Concurrency stress: several host threads, several streams each plus two streams every thread shares (the default
// stream and one created stream), interleaving aclrtMemcpyAsync in and out, calls of both operators (the gradient
// and the forward) of random shapes and dtypes (one-shot executors, and repeatable ones rebound to new addresses
// between queued runs), synchronisations and destruction of streams with work still queued. Every result is checked against the float64 oracle once its
// stream has synchronised. The run is bounded in time (OPENACLNN_STRESS_SECONDS, default 6 s per test) and is
// meant to be clean under ThreadSanitizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
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

double StressSeconds() {
    const char *value = std::getenv("OPENACLNN_STRESS_SECONDS");
    return value ? std::atof(value) : 6.0;
}

struct Rng {
    uint64_t state;
    uint64_t Next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    int64_t Below(int64_t n) { return static_cast<int64_t>(Next() % static_cast<uint64_t>(n)); }
    double Uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(Next() >> 11) * 0x1p-53; }
};

// A block of device memory, freed with its owner.
struct DeviceBlock {
    void *ptr = nullptr;
    size_t bytes = 0;
    explicit DeviceBlock(size_t size) : bytes(size) {
        EXPECT_EQ(aclrtMalloc(&ptr, size ? size : 1, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    }
    ~DeviceBlock() {
        if (ptr) {
            EXPECT_EQ(aclrtFree(ptr), ACL_SUCCESS);
        }
    }
};

// A class index as INT64 or INT32 at element `index`.
void StoreIndex(std::vector<uint8_t> &bytes, aclDataType dtype, int64_t index, int64_t t) {
    if (dtype == ACL_INT64) {
        std::memcpy(&bytes[static_cast<size_t>(index) * 8], &t, 8);
    } else {
        const int32_t t32 = static_cast<int32_t>(t);
        std::memcpy(&bytes[static_cast<size_t>(index) * 4], &t32, 4);
    }
}

void StoreFloat(std::vector<uint8_t> &bytes, aclDataType dtype, int64_t index, double v) {
    if (dtype == ACL_FLOAT) {
        const float f = static_cast<float>(v);
        std::memcpy(&bytes[static_cast<size_t>(index) * 4], &f, 4);
    } else {
        const uint16_t h = dtype == ACL_FLOAT16 ? oracle::FloatToHalfBits(static_cast<float>(v))
                                                : oracle::FloatToBf16Bits(static_cast<float>(v));
        std::memcpy(&bytes[static_cast<size_t>(index) * 2], &h, 2);
    }
}

// One operator call (or a repeatable executor's several runs): host inputs, their device copies, the results copied
// back, and what the oracle needs to judge them after the stream synchronises.
struct Job {
    int64_t n = 0, c = 0;
    aclDataType dtype = ACL_FLOAT;
    aclDataType target_dtype = ACL_INT64;
    oracle::Reduction reduction = oracle::Reduction::kMean;
    std::string reduction_name;
    bool has_weight = false, zloss = false;
    int64_t ignore_index = -100;
    double smoothing = 0.0, zscale = 0.0;
    bool bad_target = false;
    // Host inputs (contiguous). log_prob[1] is the second input a repeatable executor is rebound to.
    std::vector<uint8_t> grad_loss, log_prob[2], target, weight, lse;
    std::vector<std::unique_ptr<DeviceBlock>> blocks;
    std::vector<std::vector<uint8_t>> results;  // one per run, copied back asynchronously
    std::vector<int> result_input;             // which log_prob each run read
    // The forward (aclnnCrossEntropyLoss): log_prob[] hold its input logits, results its logProbOut, lse_results
    // its lseForZlossOut.
    bool forward = false;
    std::vector<std::vector<uint8_t>> lse_results;

    size_t Size() const { return oracle::ElementSize(dtype); }

    oracle::GradInputs Inputs(int which) const {
        oracle::GradInputs in;
        in.n = n;
        in.c = c;
        in.reduction = reduction;
        in.grad_loss = {grad_loss.data(), dtype, 0, {1}};
        in.log_prob = {log_prob[which].data(), dtype, 0, {c, 1}};
        in.target = {target.data(), target_dtype, 0, {1}};
        in.has_weight = has_weight;
        if (has_weight) in.weight = {weight.data(), ACL_FLOAT, 0, {1}};
        in.has_lse = zloss;
        if (zloss) in.lse = {lse.data(), dtype, 0, {1}};
        in.ignore_index = ignore_index;
        in.label_smoothing = smoothing;
        in.zloss_scale = zscale;
        return in;
    }

    // The forward's logProbOut and lse against log_softmax in float64: one rounding to the stored format, plus a few
    // fp32 roundings of the terms (|x| + |lse|).
    void VerifyForward() const {
        const oracle::DtypeLimits limits = oracle::LimitsOf(dtype);
        const auto tolerance = [&](double want, double terms) {
            return std::fabs(want) * 2 * limits.epsilon + terms * 64 * std::ldexp(1.0, -24) + 2 * limits.tiny;
        };
        for (size_t r = 0; r < results.size(); ++r) {
            const oracle::View x{log_prob[result_input[r]].data(), dtype, 0, {c, 1}};
            const oracle::View got{results[r].data(), dtype, 0, {c, 1}};
            const oracle::View lse_got{lse_results[r].data(), dtype, 0, {1}};
            int64_t mismatches = 0;
            std::string first;
            for (int64_t i = 0; i < n; ++i) {
                double m = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < c; ++j) m = std::max(m, x.Float(i, j));
                for (int64_t j = 0; j < c; ++j) sum += std::exp(x.Float(i, j) - m);
                const double lse_want = m + std::log(sum);
                if (!(std::fabs(lse_got.Float(i, 0) - lse_want) <= tolerance(lse_want, std::fabs(lse_want)))) {
                    if (mismatches++ == 0) first = "lse[" + std::to_string(i) + "] " + std::to_string(lse_got.Float(i, 0));
                }
                for (int64_t j = 0; j < c; ++j) {
                    const double want = x.Float(i, j) - lse_want;
                    if (!(std::fabs(got.Float(i, j) - want) <= tolerance(want, std::fabs(x.Float(i, j)) + std::fabs(lse_want)))) {
                        if (mismatches++ == 0) {
                            first = "logProbOut[" + std::to_string(i) + "][" + std::to_string(j) + "] " +
                                    std::to_string(got.Float(i, j)) + ", expected " + std::to_string(want);
                        }
                    }
                }
            }
            EXPECT_EQ(mismatches, 0) << "forward run " << r << " of N=" << n << " C=" << c << " dtype " << dtype
                                     << " reduction " << reduction_name << ": " << first;
        }
    }

    // Runs after synchronisation: every element of every run against the oracle.
    void Verify() const {
        if (forward) {
            VerifyForward();
            return;
        }
        for (size_t r = 0; r < results.size(); ++r) {
            const oracle::GradOracle reference(Inputs(result_input[r]));
            const oracle::View out{results[r].data(), dtype, 0, {c, 1}};
            int64_t mismatches = 0;
            std::string first;
            for (int64_t i = 0; i < n; ++i) {
                for (int64_t j = 0; j < c; ++j) {
                    std::string why;
                    if (oracle::Judge(reference, dtype, i, j, out.Float(i, j), &why) == oracle::Verdict::kMismatch) {
                        if (mismatches++ == 0) first = "out[" + std::to_string(i) + "][" + std::to_string(j) + "]: " + why;
                    }
                }
            }
            EXPECT_EQ(mismatches, 0) << "run " << r << " of N=" << n << " C=" << c << " dtype " << dtype
                                     << " reduction " << reduction_name << ": " << first;
        }
    }
};

aclTensor *Tensor(const std::vector<int64_t> &dims, aclDataType dtype, void *data) {
    std::vector<int64_t> strides(dims.size(), 1);
    for (int64_t k = static_cast<int64_t>(dims.size()) - 2; k >= 0; --k) strides[k] = strides[k + 1] * dims[k + 1];
    return aclCreateTensor(dims.data(), dims.size(), dtype, strides.data(), 0, ACL_FORMAT_ND, dims.data(), dims.size(),
                           data);
}

class StressWorker {
public:
    StressWorker(int id, aclrtStream shared, double seconds) : shared_(shared), seconds_(seconds) {
        rng_.state = 0x5eed0000ull + static_cast<uint64_t>(id) * 7919;
    }

    void Run() {
        ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
        for (int s = 0; s < kOwnStreams; ++s) NewStream(s);
        const auto start = std::chrono::steady_clock::now();
        while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds_) {
            const int64_t action = rng_.Below(16);
            const int s = static_cast<int>(rng_.Below(kOwnStreams + 2));  // own streams, then shared, default
            if (action < 6) {
                Submit(s, /*repeatable=*/false);
            } else if (action < 8) {
                Submit(s, /*repeatable=*/true);
            } else if (action < 10) {
                SubmitForward(s, /*repeatable=*/rng_.Below(3) == 0);
            } else if (action < 14) {
                Synchronize(s);
            } else if (s < kOwnStreams) {
                // Destroyed with work queued: the work finishes first; errors go with the stream.
                ASSERT_EQ(aclrtDestroyStream(streams_[s]), ACL_SUCCESS);
                VerifyPending(s);
                NewStream(s);
                ++destroyed_;
            }
            if (::testing::Test::HasFailure()) break;
        }
        for (int s = 0; s < kOwnStreams + 2; ++s) Synchronize(s);
        for (int s = 0; s < kOwnStreams; ++s) EXPECT_EQ(aclrtDestroyStream(streams_[s]), ACL_SUCCESS);
    }

    int64_t calls() const { return calls_; }
    int64_t destroyed() const { return destroyed_; }

private:
    static constexpr int kOwnStreams = 3;

    aclrtStream StreamOf(int s) const {
        if (s < kOwnStreams) return streams_[s];
        return s == kOwnStreams ? shared_ : nullptr;
    }

    void NewStream(int s) {
        ASSERT_EQ(aclrtCreateStream(&streams_[s]), ACL_SUCCESS);
        pending_[s].clear();
        bad_[s] = false;
    }

    void Synchronize(int s) {
        const aclError status = aclrtSynchronizeStream(StreamOf(s));
        EXPECT_EQ(status, bad_[s] ? ACL_ERROR_RT_VECTOR_CORE_EXCEPTION : ACL_SUCCESS) << "stream " << s;
        bad_[s] = false;
        VerifyPending(s);
    }

    void VerifyPending(int s) {
        for (auto &job : pending_[s]) job->Verify();
        pending_[s].clear();
    }

    void Submit(int s, bool repeatable) {
        aclrtStream stream = StreamOf(s);
        auto job = std::make_unique<Job>();
        Job &j = *job;
        const bool big = rng_.Below(24) == 0;  // enough elements for a multi-threaded plan
        j.n = big ? 2 + rng_.Below(3) : 1 + rng_.Below(40);
        j.c = big ? 40000 + rng_.Below(30000) : 1 + rng_.Below(300);
        static const aclDataType kTypes[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
        j.dtype = kTypes[rng_.Below(3)];
        j.target_dtype = rng_.Below(2) ? ACL_INT64 : ACL_INT32;
        const int64_t r = rng_.Below(3);
        j.reduction = r == 0 ? oracle::Reduction::kNone : r == 1 ? oracle::Reduction::kMean : oracle::Reduction::kSum;
        j.reduction_name = r == 0 ? "none" : r == 1 ? "mean" : "sum";
        j.has_weight = rng_.Below(2);
        j.smoothing = rng_.Below(3) == 0 ? 0.1 : 0.0;
        j.zloss = rng_.Below(4) == 0;
        j.zscale = j.zloss ? 1e-3 : 0.0;
        // Out-of-range targets only on this thread's own streams: the error a shared stream reports could be
        // another thread's.
        j.bad_target = s < kOwnStreams && rng_.Below(12) == 0;
        const size_t es = j.Size();
        const int64_t grad_count = j.reduction == oracle::Reduction::kNone ? j.n : 1;
        j.grad_loss.resize(static_cast<size_t>(grad_count) * es);
        for (int64_t i = 0; i < grad_count; ++i) StoreFloat(j.grad_loss, j.dtype, i, rng_.Uniform(-2, 2));
        const int runs = repeatable ? 2 + static_cast<int>(rng_.Below(2)) : 1;
        for (int k = 0; k < (repeatable ? 2 : 1); ++k) {
            j.log_prob[k].resize(static_cast<size_t>(j.n * j.c) * es);
            for (int64_t e = 0; e < j.n * j.c; ++e) StoreFloat(j.log_prob[k], j.dtype, e, rng_.Uniform(-12, 0));
        }
        const size_t ts = j.target_dtype == ACL_INT64 ? 8 : 4;
        j.target.resize(static_cast<size_t>(j.n) * ts);
        for (int64_t i = 0; i < j.n; ++i) {
            int64_t t = rng_.Below(j.c);
            if (rng_.Below(6) == 0) t = j.ignore_index;
            if (j.bad_target && i == j.n / 2) t = j.c + rng_.Below(3);
            StoreIndex(j.target, j.target_dtype, i, t);
        }
        if (j.has_weight) {
            j.weight.resize(static_cast<size_t>(j.c) * 4);
            for (int64_t k = 0; k < j.c; ++k) StoreFloat(j.weight, ACL_FLOAT, k, rng_.Uniform(0.1, 2.0));
        }
        if (j.zloss) {
            j.lse.resize(static_cast<size_t>(j.n) * es);
            for (int64_t i = 0; i < j.n; ++i) StoreFloat(j.lse, j.dtype, i, rng_.Uniform(0, 10));
        }

        // Device copies, queued on the stream.
        const auto upload = [&](const std::vector<uint8_t> &host) -> void * {
            j.blocks.push_back(std::make_unique<DeviceBlock>(host.size()));
            void *device = j.blocks.back()->ptr;
            EXPECT_EQ(aclrtMemcpyAsync(device, host.size(), host.data(), host.size(), ACL_MEMCPY_HOST_TO_DEVICE, stream),
                      ACL_SUCCESS);
            return device;
        };
        void *grad_d = upload(j.grad_loss);
        void *logp_d[2] = {upload(j.log_prob[0]), repeatable ? upload(j.log_prob[1]) : nullptr};
        void *target_d = upload(j.target);
        void *weight_d = j.has_weight ? upload(j.weight) : nullptr;
        void *lse_d = j.zloss ? upload(j.lse) : nullptr;
        const size_t out_bytes = static_cast<size_t>(j.n * j.c) * es;
        std::vector<void *> outs;
        for (int k = 0; k < runs; ++k) {
            j.blocks.push_back(std::make_unique<DeviceBlock>(out_bytes));
            EXPECT_EQ(aclrtMemset(j.blocks.back()->ptr, out_bytes, 0x5a, out_bytes), ACL_SUCCESS);  // poison
            outs.push_back(j.blocks.back()->ptr);
        }

        aclTensor *grad_t = Tensor(j.reduction == oracle::Reduction::kNone ? std::vector<int64_t>{j.n}
                                                                           : std::vector<int64_t>{},
                                   j.dtype, grad_d);
        aclTensor *logp_t = Tensor({j.n, j.c}, j.dtype, logp_d[0]);
        aclTensor *target_t = Tensor({j.n}, j.target_dtype, target_d);
        aclTensor *weight_t = j.has_weight ? Tensor({j.c}, ACL_FLOAT, weight_d) : nullptr;
        aclTensor *lse_t = j.zloss ? Tensor({j.n}, j.dtype, lse_d) : nullptr;
        aclTensor *out_t = Tensor({j.n, j.c}, j.dtype, outs[0]);
        uint64_t workspace_size = 0;
        aclOpExecutor *executor = nullptr;
        ASSERT_EQ(aclnnCrossEntropyLossGradGetWorkspaceSize(grad_t, logp_t, target_t, weight_t, nullptr, lse_t,
                                                            j.reduction_name.data(), j.ignore_index, j.smoothing,
                                                            j.zscale, out_t, &workspace_size, &executor),
                  ACLNN_SUCCESS)
            << aclGetRecentErrMsg();
        // The tensors may go at once: the executor holds what it needs.
        for (aclTensor *t : {grad_t, logp_t, target_t, weight_t, lse_t, out_t}) EXPECT_EQ(aclDestroyTensor(t), ACLNN_SUCCESS);
        if (repeatable) {
            ASSERT_EQ(aclSetAclOpExecutorRepeatable(executor), ACLNN_SUCCESS);
        }
        j.results.resize(static_cast<size_t>(runs));
        for (int k = 0; k < runs; ++k) {
            // A workspace per run: queued runs must not share one.
            j.blocks.push_back(std::make_unique<DeviceBlock>(workspace_size));
            if (k > 0) {
                // Rebinding while the previous run may still be queued: that run keeps its own addresses.
                const int input = static_cast<int>(rng_.Below(2));
                ASSERT_EQ(aclSetInputTensorAddr(executor, 1, nullptr, logp_d[input]), ACLNN_SUCCESS);
                ASSERT_EQ(aclSetOutputTensorAddr(executor, 0, nullptr, outs[k]), ACLNN_SUCCESS);
                j.result_input.push_back(input);
            } else {
                j.result_input.push_back(0);
            }
            ASSERT_EQ(aclnnCrossEntropyLossGrad(workspace_size ? j.blocks.back()->ptr : nullptr, workspace_size,
                                                executor, stream),
                      ACLNN_SUCCESS)
                << aclGetRecentErrMsg();
            j.results[k].resize(out_bytes);
            EXPECT_EQ(aclrtMemcpyAsync(j.results[k].data(), out_bytes, outs[k], out_bytes, ACL_MEMCPY_DEVICE_TO_HOST,
                                       stream),
                      ACL_SUCCESS);
            ++calls_;
        }
        if (repeatable) {
            // Destroyed with its runs still queued.
            EXPECT_EQ(aclDestroyAclOpExecutor(executor), ACLNN_SUCCESS);
        } else {
            // Spent: a second run is an error code.
            EXPECT_EQ(aclnnCrossEntropyLossGrad(nullptr, 0, executor, stream), ACLNN_ERR_PARAM_INVALID);
        }
        if (j.bad_target) bad_[s] = true;
        pending_[s].push_back(std::move(job));
    }

    // One aclnnCrossEntropyLoss call (or a repeatable executor's several runs, rebound between them): logProbOut and
    // lseForZlossOut copied back and checked after synchronisation. Targets stay in range (or ignored): the
    // forward's NaN rows for bad targets are the gradient's, covered above.
    void SubmitForward(int s, bool repeatable) {
        aclrtStream stream = StreamOf(s);
        auto job = std::make_unique<Job>();
        Job &j = *job;
        j.forward = true;
        const bool big = rng_.Below(24) == 0;
        j.n = big ? 2 + rng_.Below(3) : 1 + rng_.Below(40);
        j.c = big ? 40000 + rng_.Below(30000) : 1 + rng_.Below(300);
        static const aclDataType kTypes[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
        j.dtype = kTypes[rng_.Below(3)];
        j.target_dtype = rng_.Below(2) ? ACL_INT64 : ACL_INT32;
        const int64_t r = rng_.Below(3);
        j.reduction_name = r == 0 ? "none" : r == 1 ? "mean" : "sum";
        j.has_weight = rng_.Below(2);
        j.smoothing = rng_.Below(3) == 0 ? 0.1 : 0.0;
        j.zscale = rng_.Below(4) == 0 ? 1e-3 : 0.0;
        const bool return_zloss = rng_.Below(2);
        const size_t es = j.Size();
        const int runs = repeatable ? 2 + static_cast<int>(rng_.Below(2)) : 1;
        for (int k = 0; k < (repeatable ? 2 : 1); ++k) {
            j.log_prob[k].resize(static_cast<size_t>(j.n * j.c) * es);
            for (int64_t e = 0; e < j.n * j.c; ++e) StoreFloat(j.log_prob[k], j.dtype, e, rng_.Uniform(-20, 20));
        }
        const size_t ts = j.target_dtype == ACL_INT64 ? 8 : 4;
        j.target.resize(static_cast<size_t>(j.n) * ts);
        for (int64_t i = 0; i < j.n; ++i) {
            const int64_t t = rng_.Below(6) == 0 ? j.ignore_index : rng_.Below(j.c);
            StoreIndex(j.target, j.target_dtype, i, t);
        }
        if (j.has_weight) {
            j.weight.resize(static_cast<size_t>(j.c) * 4);
            for (int64_t k = 0; k < j.c; ++k) StoreFloat(j.weight, ACL_FLOAT, k, rng_.Uniform(0.1, 2.0));
        }
        const auto upload = [&](const std::vector<uint8_t> &host) -> void * {
            j.blocks.push_back(std::make_unique<DeviceBlock>(host.size()));
            void *device = j.blocks.back()->ptr;
            EXPECT_EQ(aclrtMemcpyAsync(device, host.size(), host.data(), host.size(), ACL_MEMCPY_HOST_TO_DEVICE, stream),
                      ACL_SUCCESS);
            return device;
        };
        const auto device_block = [&](size_t bytes) {
            j.blocks.push_back(std::make_unique<DeviceBlock>(bytes));
            EXPECT_EQ(aclrtMemset(j.blocks.back()->ptr, bytes, 0x5a, bytes), ACL_SUCCESS);  // poison
            return j.blocks.back()->ptr;
        };
        void *input_d[2] = {upload(j.log_prob[0]), repeatable ? upload(j.log_prob[1]) : nullptr};
        void *target_d = upload(j.target);
        void *weight_d = j.has_weight ? upload(j.weight) : nullptr;
        const std::vector<int64_t> loss_dims = r == 0 ? std::vector<int64_t>{j.n} : std::vector<int64_t>{};
        const size_t loss_bytes = static_cast<size_t>(r == 0 ? j.n : 1) * es;
        const size_t log_prob_bytes = static_cast<size_t>(j.n * j.c) * es, lse_bytes = static_cast<size_t>(j.n) * es;
        std::vector<void *> log_prob_outs, lse_outs;
        for (int k = 0; k < runs; ++k) {
            log_prob_outs.push_back(device_block(log_prob_bytes));
            lse_outs.push_back(device_block(lse_bytes));
        }
        void *loss_d = device_block(loss_bytes);
        void *zloss_d = return_zloss ? device_block(loss_bytes) : nullptr;

        aclTensor *input_t = Tensor({j.n, j.c}, j.dtype, input_d[0]);
        aclTensor *target_t = Tensor({j.n}, j.target_dtype, target_d);
        aclTensor *weight_t = j.has_weight ? Tensor({j.c}, ACL_FLOAT, weight_d) : nullptr;
        aclTensor *loss_t = Tensor(loss_dims, j.dtype, loss_d);
        aclTensor *log_prob_t = Tensor({j.n, j.c}, j.dtype, log_prob_outs[0]);
        aclTensor *zloss_t = return_zloss ? Tensor(loss_dims, j.dtype, zloss_d) : Tensor({0}, j.dtype, nullptr);
        aclTensor *lse_t = Tensor({j.n}, j.dtype, lse_outs[0]);
        uint64_t workspace_size = 0;
        aclOpExecutor *executor = nullptr;
        ASSERT_EQ(aclnnCrossEntropyLossGetWorkspaceSize(input_t, target_t, weight_t, j.reduction_name.data(),
                                                        j.ignore_index, j.smoothing, j.zscale, return_zloss, loss_t,
                                                        log_prob_t, zloss_t, lse_t, &workspace_size, &executor),
                  ACLNN_SUCCESS)
            << aclGetRecentErrMsg();
        for (aclTensor *t : {input_t, target_t, weight_t, loss_t, log_prob_t, zloss_t, lse_t}) {
            EXPECT_EQ(aclDestroyTensor(t), ACLNN_SUCCESS);
        }
        if (repeatable) {
            ASSERT_EQ(aclSetAclOpExecutorRepeatable(executor), ACLNN_SUCCESS);
        }
        j.results.resize(static_cast<size_t>(runs));
        j.lse_results.resize(static_cast<size_t>(runs));
        for (int k = 0; k < runs; ++k) {
            j.blocks.push_back(std::make_unique<DeviceBlock>(workspace_size));
            if (k > 0) {
                const int input = static_cast<int>(rng_.Below(2));
                ASSERT_EQ(aclSetInputTensorAddr(executor, 0, nullptr, input_d[input]), ACLNN_SUCCESS);
                ASSERT_EQ(aclSetOutputTensorAddr(executor, 1, nullptr, log_prob_outs[k]), ACLNN_SUCCESS);
                ASSERT_EQ(aclSetOutputTensorAddr(executor, 3, nullptr, lse_outs[k]), ACLNN_SUCCESS);
                j.result_input.push_back(input);
            } else {
                j.result_input.push_back(0);
            }
            ASSERT_EQ(aclnnCrossEntropyLoss(workspace_size ? j.blocks.back()->ptr : nullptr, workspace_size, executor,
                                            stream),
                      ACLNN_SUCCESS)
                << aclGetRecentErrMsg();
            j.results[k].resize(log_prob_bytes);
            j.lse_results[k].resize(lse_bytes);
            EXPECT_EQ(aclrtMemcpyAsync(j.results[k].data(), log_prob_bytes, log_prob_outs[k], log_prob_bytes,
                                       ACL_MEMCPY_DEVICE_TO_HOST, stream),
                      ACL_SUCCESS);
            EXPECT_EQ(aclrtMemcpyAsync(j.lse_results[k].data(), lse_bytes, lse_outs[k], lse_bytes,
                                       ACL_MEMCPY_DEVICE_TO_HOST, stream),
                      ACL_SUCCESS);
            ++calls_;
        }
        if (repeatable) {
            EXPECT_EQ(aclDestroyAclOpExecutor(executor), ACLNN_SUCCESS);
        } else {
            EXPECT_EQ(aclnnCrossEntropyLoss(nullptr, 0, executor, stream), ACLNN_ERR_PARAM_INVALID);
        }
        pending_[s].push_back(std::move(job));
    }

    aclrtStream shared_;
    double seconds_;
    Rng rng_{};
    aclrtStream streams_[kOwnStreams] = {};
    std::vector<std::unique_ptr<Job>> pending_[kOwnStreams + 2];
    bool bad_[kOwnStreams + 2] = {};
    int64_t calls_ = 0;
    int64_t destroyed_ = 0;
};

class StressTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const aclError init = aclInit(nullptr);
        ASSERT_TRUE(init == ACL_SUCCESS || init == ACL_ERROR_REPEAT_INITIALIZE);
        ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    }
};

TEST_F(StressTest, ThreadsStreamsCopiesAndCalls) {
    aclrtStream shared = nullptr;
    ASSERT_EQ(aclrtCreateStream(&shared), ACL_SUCCESS);
    constexpr int kThreads = 4;
    std::vector<std::unique_ptr<StressWorker>> workers;
    for (int t = 0; t < kThreads; ++t) workers.push_back(std::make_unique<StressWorker>(t, shared, StressSeconds()));
    std::vector<std::thread> threads;
    for (auto &worker : workers) threads.emplace_back([&worker] { worker->Run(); });
    for (auto &thread : threads) thread.join();
    EXPECT_EQ(aclrtDestroyStream(shared), ACL_SUCCESS);
    int64_t calls = 0, destroyed = 0;
    for (auto &worker : workers) {
        calls += worker->calls();
        destroyed += worker->destroyed();
    }
    std::printf("stress: %lld operator runs verified, %lld streams destroyed with work queued\n",
                static_cast<long long>(calls), static_cast<long long>(destroyed));
    EXPECT_GT(calls, kThreads);
}

// Many threads race to run one single-use executor: exactly one wins; the others get an error code.
TEST_F(StressTest, RaceOnOneSingleUseExecutor) {
    for (int round = 0; round < 20; ++round) {
        const int64_t n = 3, c = 5;
        std::vector<float> logp(n * c, -1.6f), grad{1.0f}, out(n * c, 7.0f);
        std::vector<int64_t> target{0, 1, 4};
        aclTensor *g = Tensor({}, ACL_FLOAT, grad.data());
        aclTensor *l = Tensor({n, c}, ACL_FLOAT, logp.data());
        aclTensor *t = Tensor({n}, ACL_INT64, target.data());
        aclTensor *o = Tensor({n, c}, ACL_FLOAT, out.data());
        uint64_t ws = 0;
        aclOpExecutor *executor = nullptr;
        ASSERT_EQ(aclnnCrossEntropyLossGradGetWorkspaceSize(g, l, t, nullptr, nullptr, nullptr, nullptr, -100, 0.0, 0.0,
                                                            o, &ws, &executor),
                  ACLNN_SUCCESS);
        std::vector<uint8_t> workspace(ws);
        std::atomic<int> wins{0}, refusals{0};
        std::vector<std::thread> racers;
        for (int k = 0; k < 8; ++k) {
            racers.emplace_back([&] {
                const aclnnStatus s = aclnnCrossEntropyLossGrad(workspace.data(), ws, executor, nullptr);
                if (s == ACLNN_SUCCESS) ++wins;
                if (s == ACLNN_ERR_PARAM_INVALID) ++refusals;
            });
        }
        for (auto &racer : racers) racer.join();
        EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
        EXPECT_EQ(wins.load(), 1);
        EXPECT_EQ(refusals.load(), 7);
        for (aclTensor *x : {g, l, t, o}) aclDestroyTensor(x);
    }
}

}  // namespace
