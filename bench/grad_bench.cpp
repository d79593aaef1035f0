// aclnnCrossEntropyLossGrad through the public API (phase 1 + phase 2 + aclrtSynchronizeStream per iteration),
// timed side by side with a copy of the same bytes (read N x C, write N x C) over the same aclrtMalloc buffers.
//
// The copy is memcpy split into as many equal contiguous parts as the op uses threads (OPENACLNN_NUM_THREADS or
// all CPUs), each on its own OpenMP thread: the memory-speed floor on this machine. Every iteration times one op
// call and one copy, interleaved, so both see the same machine state; `x_copy` is op time / copy time over the
// run. Buffers are allocated once per shape and dtype (HUGE_FIRST: transparent huge pages), touched before any
// timing, and reused.
//
//   bench/grad_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_cross_entropy_loss_grad.h"
#include "common/float_convert.h"
#include "ops/cross_entropy/grad_plan.h"
#include "runtime/runtime.h"
#include "bench_common.h"
#include "copy_kinds.h"

namespace {

using Clock = std::chrono::steady_clock;

enum Variant { kPlain, kWeighted, kSmoothedWeighted, kZloss };
const char *kVariantNames[] = {"plain", "weighted", "smoothed+weighted", "zloss"};

struct Shape {
    int64_t n, c;
};
const Shape kShapes[] = {{4096, 32000}, {8192, 50257}, {2048, 128256}, {1, 152064}, {65536, 1000}, {16384, 10}};
const aclDataType kDtypes[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
const char *DtypeName(aclDataType t) { return t == ACL_FLOAT ? "fp32" : t == ACL_FLOAT16 ? "fp16" : "bf16"; }

using openaclnn_bench::Check;
using openaclnn_bench::DeviceAlloc;
using openaclnn_bench::ThreadedCopy;

// One problem's device buffers, kept for every variant of a shape and dtype (allocating and first-touching 3 GB
// per benchmark would dominate the run).
struct Buffers {
    Shape shape{};
    aclDataType dtype{};
    size_t elem = 0;
    void *log_prob = nullptr, *out = nullptr, *target = nullptr, *weight = nullptr, *grad_loss = nullptr;
    void *grad_zloss = nullptr, *lse = nullptr, *workspace = nullptr;
    uint64_t workspace_bytes = 0;

    ~Buffers() {
        for (void *p : {log_prob, out, target, weight, grad_loss, grad_zloss, lse, workspace}) {
            if (p) aclrtFree(p);
        }
    }
};

std::unique_ptr<Buffers> g_buffers;
aclrtStream g_stream = nullptr;

Buffers &GetBuffers(Shape shape, aclDataType dtype) {
    if (g_buffers && g_buffers->shape.n == shape.n && g_buffers->shape.c == shape.c && g_buffers->dtype == dtype) {
        return *g_buffers;
    }
    g_buffers.reset();
    auto b = std::make_unique<Buffers>();
    b->shape = shape;
    b->dtype = dtype;
    b->elem = dtype == ACL_FLOAT ? 4 : 2;
    const size_t count = static_cast<size_t>(shape.n * shape.c);
    b->log_prob = DeviceAlloc(count * b->elem);
    b->out = DeviceAlloc(count * b->elem);
    // Log-probabilities around -log(C) with a spread of a few nats (a trained model's rows), in parallel.
    const double center = -std::log(static_cast<double>(shape.c));
#pragma omp parallel
    {
        std::mt19937 rng(1234 + omp_get_thread_num());
        std::normal_distribution<float> spread(0.0f, 2.0f);
        const int threads = omp_get_num_threads();
        const size_t begin = count * omp_get_thread_num() / threads, end = count * (omp_get_thread_num() + 1) / threads;
        for (size_t k = begin; k < end; ++k) {
            const float x = std::fmin(0.0f, static_cast<float>(center) + spread(rng));
            if (dtype == ACL_FLOAT) {
                static_cast<float *>(b->log_prob)[k] = x;
            } else {
                static_cast<uint16_t *>(b->log_prob)[k] =
                    dtype == ACL_FLOAT16 ? openaclnn::FloatToHalf(x) : openaclnn::FloatToBf16(x);
            }
        }
        std::memset(static_cast<char *>(b->out) + begin * b->elem, 0, (end - begin) * b->elem);  // first touch
    }
    std::vector<int64_t> target(shape.n);
    std::vector<float> weight(shape.c);
    std::mt19937 rng(99);
    for (auto &t : target) t = static_cast<int64_t>(rng() % shape.c);
    for (auto &w : weight) w = 0.5f + static_cast<float>(rng() % 1000) / 1000.0f;
    b->target = DeviceAlloc(shape.n * 8);
    b->weight = DeviceAlloc(shape.c * 4);
    Check(aclrtMemcpy(b->target, shape.n * 8, target.data(), shape.n * 8, ACL_MEMCPY_HOST_TO_DEVICE), "memcpy");
    Check(aclrtMemcpy(b->weight, shape.c * 4, weight.data(), shape.c * 4, ACL_MEMCPY_HOST_TO_DEVICE), "memcpy");
    // gradLoss (scalar, mean), gradZloss (scalar) and lseForZloss [N] in the op's dtype.
    b->grad_loss = DeviceAlloc(8);
    b->grad_zloss = DeviceAlloc(8);
    b->lse = DeviceAlloc(shape.n * b->elem);
    // n elements, each value().
    auto fill_with = [&](void *p, size_t n, const auto &value) {
        std::vector<uint8_t> host(n * b->elem);
        for (size_t k = 0; k < n; ++k) {
            const float v = value();
            if (dtype == ACL_FLOAT) {
                std::memcpy(&host[k * 4], &v, 4);
            } else {
                const uint16_t h = dtype == ACL_FLOAT16 ? openaclnn::FloatToHalf(v) : openaclnn::FloatToBf16(v);
                std::memcpy(&host[k * 2], &h, 2);
            }
        }
        Check(aclrtMemcpy(p, host.size(), host.data(), host.size(), ACL_MEMCPY_HOST_TO_DEVICE), "memcpy");
    };
    fill_with(b->grad_loss, 1, [] { return 1.0f; });
    fill_with(b->grad_zloss, 1, [] { return 1.0f; });
    // Each row's own logsumexp, as a model's rows have: log(C) and a spread of a nat (so that z-loss rows, whose a
    // depends on it, differ from row to row as in training).
    std::normal_distribution<float> lse_spread(0.0f, 1.0f);
    fill_with(b->lse, shape.n, [&] { return static_cast<float>(-center) + lse_spread(rng); });
    b->workspace_bytes = 64 + static_cast<uint64_t>(shape.n) * 64;  // grown below if phase 1 asks for more
    b->workspace = DeviceAlloc(b->workspace_bytes);
    g_buffers = std::move(b);
    return *g_buffers;
}

// One op call: phase 1 + phase 2 + synchronise.
void RunOp(Buffers &b, Variant variant) {
    const int64_t dims2[2] = {b.shape.n, b.shape.c};
    const int64_t n1[1] = {b.shape.n};
    const int64_t c1[1] = {b.shape.c};
    const int64_t one[1] = {1};
    aclTensor *log_prob = aclCreateTensor(dims2, 2, b.dtype, nullptr, 0, ACL_FORMAT_ND, dims2, 2, b.log_prob);
    aclTensor *out = aclCreateTensor(dims2, 2, b.dtype, nullptr, 0, ACL_FORMAT_ND, dims2, 2, b.out);
    aclTensor *target = aclCreateTensor(n1, 1, ACL_INT64, nullptr, 0, ACL_FORMAT_ND, n1, 1, b.target);
    aclTensor *grad_loss = aclCreateTensor(one, 0, b.dtype, nullptr, 0, ACL_FORMAT_ND, one, 0, b.grad_loss);
    aclTensor *weight = nullptr, *grad_zloss = nullptr, *lse = nullptr;
    if (variant == kWeighted || variant == kSmoothedWeighted) {
        weight = aclCreateTensor(c1, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, c1, 1, b.weight);
    }
    double scale = 0.0;
    if (variant == kZloss) {
        grad_zloss = aclCreateTensor(one, 0, b.dtype, nullptr, 0, ACL_FORMAT_ND, one, 0, b.grad_zloss);
        lse = aclCreateTensor(n1, 1, b.dtype, nullptr, 0, ACL_FORMAT_ND, n1, 1, b.lse);
        scale = 1e-4;
    }
    const double smoothing = variant == kSmoothedWeighted ? 0.1 : 0.0;
    char reduction[] = "mean";
    uint64_t workspace_size = 0;
    aclOpExecutor *executor = nullptr;
    Check(aclnnCrossEntropyLossGradGetWorkspaceSize(grad_loss, log_prob, target, weight, grad_zloss, lse, reduction,
                                                    -100, smoothing, scale, out, &workspace_size, &executor),
          "aclnnCrossEntropyLossGradGetWorkspaceSize");
    if (workspace_size > b.workspace_bytes) {
        aclrtFree(b.workspace);
        b.workspace_bytes = workspace_size;
        b.workspace = DeviceAlloc(workspace_size);
    }
    Check(aclnnCrossEntropyLossGrad(b.workspace, workspace_size, executor, g_stream), "aclnnCrossEntropyLossGrad");
    Check(aclrtSynchronizeStream(g_stream), "aclrtSynchronizeStream");
    for (aclTensor *t : {log_prob, out, target, grad_loss, weight, grad_zloss, lse}) aclDestroyTensor(t);
}

// The copy floor: out <- logProb, split across the op's threads; by memcpy, or by `copy` (ThreadedCopy).
void RunCopy(Buffers &b, int threads, void (*copy)(void *, const void *, size_t) = nullptr) {
    const size_t bytes = static_cast<size_t>(b.shape.n * b.shape.c) * b.elem;
    const int parts = bytes >= (1u << 17) ? threads : 1;
    ThreadedCopy(b.out, b.log_prob, bytes, parts, copy);
}

// Times run() against the copy (RunCopy) on b's buffers, one of each per iteration, interleaved: the iteration's time
// is run's; the counters are run's GB/s, the copy's and x_copy (run's time / the copy's over the benchmark).
template <class Run>
void TimeAgainstCopy(benchmark::State &state, Buffers &b, const Run &run) {
    const int threads = openaclnn::ConfiguredThreads();
    run();  // warm: thread pools, page tables
    RunCopy(b, threads);
    double run_seconds = 0, copy_seconds = 0;
    for (auto _ : state) {
        auto t0 = Clock::now();
        run();
        auto t1 = Clock::now();
        RunCopy(b, threads);
        auto t2 = Clock::now();
        const double seconds = std::chrono::duration<double>(t1 - t0).count();
        run_seconds += seconds;
        copy_seconds += std::chrono::duration<double>(t2 - t1).count();
        state.SetIterationTime(seconds);
    }
    const double bytes = 2.0 * static_cast<double>(b.shape.n * b.shape.c) * b.elem;
    state.counters["GB/s"] = benchmark::Counter(bytes * state.iterations() / run_seconds / 1e9);
    state.counters["copy_GB/s"] = benchmark::Counter(bytes * state.iterations() / copy_seconds / 1e9);
    state.counters["x_copy"] = benchmark::Counter(run_seconds / copy_seconds);
}

void BM_Grad(benchmark::State &state, Shape shape, aclDataType dtype, Variant variant) {
    Buffers &b = GetBuffers(shape, dtype);
    TimeAgainstCopy(state, b, [&] { RunOp(b, variant); });
}

// Which copy is the floor: a vector copy on regular or on streaming stores, timed against RunCopy (memcpy) in the
// same iterations, as the op is. `x_copy` is its time / memcpy's: below 1, that copy is the faster floor here. With
// exp, each element goes through Highway's vector Exp on its way: whether streaming stores still gain when the loop
// has arithmetic to do between its loads and stores, as the kernels do.
void BM_CopyKind(benchmark::State &state, Shape shape, bool stream, bool exp) {
    Buffers &b = GetBuffers(shape, ACL_FLOAT);
    if (reinterpret_cast<uintptr_t>(b.log_prob) % 64 != 0 || reinterpret_cast<uintptr_t>(b.out) % 64 != 0) {
        state.SkipWithError("buffers not 64-byte aligned");
        return;
    }
    const int threads = openaclnn::ConfiguredThreads();
    // (Split as memcpy is: the pieces start on 64-byte boundaries, so the vectors are aligned.)
    const auto copy = exp ? (stream ? openaclnn_bench::StreamingExpCopy : openaclnn_bench::RegularExpCopy)
                          : (stream ? openaclnn_bench::StreamingCopy : openaclnn_bench::RegularCopy);
    TimeAgainstCopy(state, b, [&] { RunCopy(b, threads, copy); });
}

// The small-call round trip: N = 8, C = 10, phase 1 + phase 2 + synchronise.
void BM_SmallCall(benchmark::State &state) {
    Buffers &b = GetBuffers(Shape{8, 10}, ACL_FLOAT);
    RunOp(b, kPlain);
    for (auto _ : state) RunOp(b, kPlain);
}

// The kernel alone per ISA, through the plan (no API, no prologue), for 4096 x 32000 plain.
void BM_KernelIsa(benchmark::State &state, aclDataType dtype, const openaclnn::cross_entropy::GradKernelInfo *kernel) {
    using namespace openaclnn::cross_entropy;
    const Shape shape{4096, 32000};
    Buffers &b = GetBuffers(shape, dtype);
    std::vector<GradRowCoefficients> rows(shape.n);
    for (int64_t i = 0; i < shape.n; ++i) rows[i] = {1.0 / shape.n, 0.0, 1.0 / shape.n, i % shape.c, kRowCompute, 0};
    GradKernelArgs args{};
    args.n = shape.n;
    args.c = shape.c;
    args.dtype = dtype;
    args.log_prob = b.log_prob;
    args.log_prob_row_stride = shape.c;
    args.log_prob_col_stride = 1;
    args.out = b.out;
    args.out_row_stride = shape.c;
    args.out_col_stride = 1;
    args.rows = rows.data();
    GradPlan plan = MakeGradPlan(args, openaclnn::ConfiguredThreads());
    plan.kernel = kernel;
    const int threads = openaclnn::ConfiguredThreads();
    double op_seconds = 0, copy_seconds = 0;
    for (auto _ : state) {
        auto t0 = Clock::now();
        RunGradPlan(plan, args);
        auto t1 = Clock::now();
        RunCopy(b, threads);
        auto t2 = Clock::now();
        op_seconds += std::chrono::duration<double>(t1 - t0).count();
        copy_seconds += std::chrono::duration<double>(t2 - t1).count();
        state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    }
    state.counters["x_copy"] = benchmark::Counter(op_seconds / copy_seconds);
}

void RegisterAll() {
    for (const Shape &shape : kShapes) {
        for (aclDataType dtype : kDtypes) {
            for (Variant v : {kPlain, kWeighted, kSmoothedWeighted, kZloss}) {
                const std::string name = std::string("grad/") + std::to_string(shape.n) + "x" +
                                         std::to_string(shape.c) + "/" + DtypeName(dtype) + "/" + kVariantNames[v];
                benchmark::RegisterBenchmark(name.c_str(), BM_Grad, shape, dtype, v)
                    ->UseManualTime()
                    ->Unit(benchmark::kMillisecond)
                    ->MinTime(0.3);
            }
        }
    }
    for (const Shape &shape : kShapes) {
        if (shape.n * shape.c < (int64_t{1} << 24)) continue;  // the large outputs only
        for (bool exp : {false, true}) {
            for (bool stream : {false, true}) {
                const std::string name = std::string("copy_kinds/") + std::to_string(shape.n) + "x" +
                                         std::to_string(shape.c) + "/fp32/" + (stream ? "streaming" : "regular") +
                                         (exp ? "_exp" : "");
                benchmark::RegisterBenchmark(name.c_str(), BM_CopyKind, shape, stream, exp)
                    ->UseManualTime()
                    ->Unit(benchmark::kMillisecond)
                    ->MinTime(0.3);
            }
        }
    }
    benchmark::RegisterBenchmark("small_call/8x10/fp32/plain", BM_SmallCall)->Unit(benchmark::kMicrosecond);
    for (aclDataType dtype : kDtypes) {
        for (const auto *kernel : openaclnn::cross_entropy::GradKernels()) {
            const std::string name = std::string("kernel/4096x32000/") + DtypeName(dtype) + "/" + kernel->name;
            benchmark::RegisterBenchmark(name.c_str(), BM_KernelIsa, dtype, kernel)
                ->UseManualTime()
                ->Unit(benchmark::kMillisecond)
                ->MinTime(0.3);
        }
    }
}

}  // namespace

int main(int argc, char **argv) {
    Check(aclInit(nullptr), "aclInit");
    Check(aclrtSetDevice(0), "aclrtSetDevice");
    Check(aclrtCreateStream(&g_stream), "aclrtCreateStream");
    RegisterAll();
    benchmark::Initialize(&argc, argv);
    benchmark::AddCustomContext("cpu", openaclnn_bench::CpuDescription());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    g_buffers.reset();
    aclrtDestroyStream(g_stream);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}
