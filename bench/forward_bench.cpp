// aclnnCrossEntropyLoss through the public API (phase 1 + phase 2 + aclrtSynchronizeStream per iteration), timed
// side by side with a copy of the same bytes (read N x C, write N x C) over the same aclrtMalloc buffers.
//
// The copy is memcpy split into as many contiguous parts as the op uses threads, each on its own OpenMP thread.
// Every iteration times one op call and one copy, interleaved, so both see the same machine state; `x_copy` is op
// time / copy time over the run (target <= 1.3 for fp32 4096 x 32000).
//
//   bench/forward_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "common/float_convert.h"
#include "runtime/runtime.h"
#include "bench_common.h"

namespace {

using Clock = std::chrono::steady_clock;

using openaclnn_bench::Check;
using openaclnn_bench::DeviceAlloc;
using openaclnn_bench::ThreadedCopy;

aclTensor *Tensor(std::vector<int64_t> dims, aclDataType dtype, void *data) {
    std::vector<int64_t> strides(dims.size(), 1);
    for (int k = static_cast<int>(dims.size()) - 2; k >= 0; --k) strides[k] = strides[k + 1] * dims[k + 1];
    static const int64_t kNone[1] = {0};
    return aclCreateTensor(dims.empty() ? kNone : dims.data(), dims.size(), dtype,
                           strides.empty() ? kNone : strides.data(), 0, ACL_FORMAT_ND,
                           dims.empty() ? kNone : dims.data(), dims.size(), data);
}

aclrtStream Stream() {
    static aclrtStream stream = [] {
        Check(aclInit(nullptr), "aclInit");
        Check(aclrtSetDevice(0), "aclrtSetDevice");
        aclrtStream s = nullptr;
        Check(aclrtCreateStream(&s), "aclrtCreateStream");
        return s;
    }();
    return stream;
}

// args: N, C, dtype (0 fp32, 1 fp16, 27 bf16), smoothing+weight (0/1)
void BM_Forward(benchmark::State &state) {
    const int64_t n = state.range(0), c = state.range(1);
    const auto dtype = static_cast<aclDataType>(state.range(2));
    const bool extras = state.range(3) != 0;
    const size_t element = dtype == ACL_FLOAT ? 4 : 2;
    const size_t bytes = static_cast<size_t>(n * c) * element;
    aclrtStream stream = Stream();
    void *input = DeviceAlloc(bytes), *log_prob = DeviceAlloc(bytes), *copy = DeviceAlloc(bytes);
    {
        std::vector<uint8_t> host(bytes);
        std::mt19937 rng(1);
        std::normal_distribution<float> normal(0.0f, 2.0f);
        for (int64_t k = 0; k < n * c; ++k) {
            const float v = normal(rng);
            if (dtype == ACL_FLOAT) {
                std::memcpy(host.data() + 4 * k, &v, 4);
            } else {
                const uint16_t h = dtype == ACL_FLOAT16 ? openaclnn::FloatToHalf(v) : openaclnn::FloatToBf16(v);
                std::memcpy(host.data() + 2 * k, &h, 2);
            }
        }
        Check(aclrtMemcpy(input, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
        std::memset(log_prob, 0, bytes);
        std::memset(copy, 0, bytes);
    }
    std::vector<int64_t> targets(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) targets[static_cast<size_t>(i)] = (i * 7919) % c;
    void *target = DeviceAlloc(static_cast<size_t>(n) * 8);
    Check(aclrtMemcpy(target, n * 8, targets.data(), n * 8, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
    std::vector<float> weights(static_cast<size_t>(c), 1.0f);
    void *weight = DeviceAlloc(static_cast<size_t>(c) * 4);
    Check(aclrtMemcpy(weight, c * 4, weights.data(), c * 4, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
    void *loss = DeviceAlloc(element), *zloss = DeviceAlloc(element), *lse = DeviceAlloc(n * element);
    void *workspace = DeviceAlloc(static_cast<size_t>(n) * 64 + 4096);

    aclTensor *t_input = Tensor({n, c}, dtype, input), *t_target = Tensor({n}, ACL_INT64, target);
    aclTensor *t_weight = extras ? Tensor({c}, ACL_FLOAT, weight) : nullptr;
    aclTensor *t_loss = Tensor({}, dtype, loss), *t_log_prob = Tensor({n, c}, dtype, log_prob);
    aclTensor *t_zloss = Tensor({}, dtype, zloss), *t_lse = Tensor({n}, dtype, lse);
    const int threads = openaclnn::ConfiguredThreads();
    char reduction[] = "mean";

    double op_seconds = 0.0, copy_seconds = 0.0;
    for (auto _ : state) {
        const auto t0 = Clock::now();
        uint64_t ws = 0;
        aclOpExecutor *executor = nullptr;
        Check(aclnnCrossEntropyLossGetWorkspaceSize(t_input, t_target, t_weight, reduction, -100, extras ? 0.1 : 0.0,
                                                    0.0, false, t_loss, t_log_prob, t_zloss, t_lse, &ws, &executor),
              "phase 1");
        Check(aclnnCrossEntropyLoss(workspace, ws, executor, stream), "phase 2");
        Check(aclrtSynchronizeStream(stream), "sync");
        const auto t1 = Clock::now();
        ThreadedCopy(copy, input, bytes, threads);
        const auto t2 = Clock::now();
        const double op = std::chrono::duration<double>(t1 - t0).count();
        op_seconds += op;
        copy_seconds += std::chrono::duration<double>(t2 - t1).count();
        state.SetIterationTime(op);
    }
    state.counters["GB/s"] = benchmark::Counter(2.0 * bytes * state.iterations() / op_seconds / 1e9);
    state.counters["copy_GB/s"] = benchmark::Counter(2.0 * bytes * state.iterations() / copy_seconds / 1e9);
    state.counters["x_copy"] = benchmark::Counter(op_seconds / copy_seconds);
    state.counters["threads"] = threads;
    for (aclTensor *t : {t_input, t_target, t_weight, t_loss, t_log_prob, t_zloss, t_lse}) aclDestroyTensor(t);
    for (void *p : {input, log_prob, copy, target, weight, loss, zloss, lse, workspace}) aclrtFree(p);
}

BENCHMARK(BM_Forward)
    ->ArgNames({"N", "C", "dtype", "smooth_w"})
    ->Args({4096, 32000, ACL_FLOAT, 0})
    ->Args({4096, 32000, ACL_FLOAT, 1})
    ->Args({4096, 32000, ACL_BF16, 0})
    ->Args({4096, 32000, ACL_FLOAT16, 0})
    ->Args({8192, 50257, ACL_BF16, 0})
    ->Args({1, 152064, ACL_FLOAT, 0})
    ->Args({65536, 1000, ACL_FLOAT, 0})
    ->Args({16384, 10, ACL_FLOAT, 0})
    ->Args({8, 10, ACL_FLOAT, 0})  // the small call: phase 1 + phase 2 + synchronise
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
