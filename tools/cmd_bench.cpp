// `openaclnn bench`: times aclnnCrossEntropyLossGrad (phase 1 + phase 2 + synchronise, as a program calls it) next
// to a copy of the same bytes (read N x C, write N x C) on the same aclrtMalloc'd buffers, in the same process, with
// the same number of threads. The copy is the floor: the operator reads logProb once and writes out once.
//
// The library reads OPENACLNN_NUM_THREADS once per process, so the parent runs one worker process per thread
// count (`openaclnn __bench-worker`, the same executable) and gathers their result lines.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <tuple>

#include "acl_session.h"
#include "aclnnop/aclnn_cross_entropy_loss_grad.h"
#include "bench_plot.h"
#include "cli_common.h"
#include "commands.h"
#include "inputs.h"
#include "npy.h"
#include "openaclnn_build_info.h"
#include "subprocess.h"

namespace openaclnn_cli {

namespace {

const std::vector<std::string> kVariants = {"plain", "weighted", "smoothed", "zloss"};

struct Shape {
    int64_t n, c;
};

std::vector<Shape> ParseShapes(const std::string &text) {
    std::vector<Shape> shapes;
    for (const std::string &item : SplitList(text, ',')) {
        const size_t x = item.find_first_of("xX");
        if (item.empty() || x == std::string::npos) BadInput("--shapes: '" + item + "' is not NxC (e.g. 4096x32000)");
        const int64_t n = ParseInt("--shapes", item.substr(0, x));
        const int64_t c = ParseInt("--shapes", item.substr(x + 1));
        if (n <= 0 || c <= 0) BadInput("--shapes: '" + item + "' needs N >= 1 and C >= 1");
        if (n > (int64_t{1} << 40) / c) BadInput("--shapes: '" + item + "' is too large");
        shapes.push_back({n, c});
    }
    return shapes;
}

std::vector<ComputeType> ParseDtypes(const std::string &text) {
    std::vector<ComputeType> types;
    for (const std::string &item : SplitList(text, ',')) types.push_back(ParseComputeType("--dtypes", item));
    return types;
}

std::vector<std::string> ParseVariants(const std::string &text) {
    if (text == "all") return kVariants;
    std::vector<std::string> variants;
    for (const std::string &item : SplitList(text, ',')) {
        if (std::find(kVariants.begin(), kVariants.end(), item) == kVariants.end()) {
            BadInput("--variants: unknown variant '" + item + "' (plain, weighted, smoothed, zloss, or all)");
        }
        variants.push_back(item);
    }
    return variants;
}

std::vector<int> ParseThreads(const std::string &text) {
    std::vector<int> threads;
    for (const std::string &item : SplitList(text, ',')) {
        const int64_t t = ParseInt("--threads", item);
        if (t < 1 || t > 4096) BadInput("--threads: '" + item + "' is not a thread count in [1, 4096]");
        threads.push_back(static_cast<int>(t));
    }
    return threads;
}

int AvailableCpus() {
    cpu_set_t set;
    if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    return 1;
}

double Median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// A copy spread over `threads` threads (the calling one included), like the operator's static partition. The
// helpers sleep on a condition variable between copies, so they take no CPU from the operator's own threads.
class ParallelCopy {
public:
    explicit ParallelCopy(int threads) : threads_(threads) {
        for (int k = 1; k < threads_; ++k) workers_.emplace_back([this, k] { WorkerLoop(k); });
    }
    ~ParallelCopy() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
            ++generation_;
        }
        wake_.notify_all();
        for (std::thread &t : workers_) t.join();
    }
    void Copy(void *dst, const void *src, size_t bytes) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            dst_ = static_cast<uint8_t *>(dst);
            src_ = static_cast<const uint8_t *>(src);
            bytes_ = bytes;
            pending_ = threads_ - 1;
            ++generation_;
        }
        wake_.notify_all();
        CopySlice(0);
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [this] { return pending_ == 0; });
    }

private:
    void CopySlice(int k) {
        // Slices on 64-byte boundaries so that no two threads write the same cache line.
        const size_t lines = (bytes_ + 63) / 64;
        const size_t begin = std::min(bytes_, lines * static_cast<size_t>(k) / static_cast<size_t>(threads_) * 64);
        const size_t end = std::min(bytes_, lines * static_cast<size_t>(k + 1) / static_cast<size_t>(threads_) * 64);
        if (end > begin) std::memcpy(dst_ + begin, src_ + begin, end - begin);
    }
    void WorkerLoop(int k) {
        uint64_t seen = 0;
        while (true) {
            {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [&] { return generation_ != seen; });
                seen = generation_;
                if (stop_) return;
            }
            CopySlice(k);
            std::lock_guard<std::mutex> lock(mutex_);
            if (--pending_ == 0) done_.notify_one();
        }
    }

    int threads_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    uint64_t generation_ = 0;
    int pending_ = 0;
    bool stop_ = false;
    uint8_t *dst_ = nullptr;
    const uint8_t *src_ = nullptr;
    size_t bytes_ = 0;
};

// Deterministic pseudo-random numbers (splitmix64), so every run benchmarks the same data.
struct Random {
    uint64_t state;
    uint64_t Next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
};

struct BenchResult {
    int64_t n = 0, c = 0;
    std::string dtype, variant;
    int threads = 0;
    int repeats = 0;
    double op_median = 0, op_min = 0, copy_median = 0, copy_min = 0;
    double bytes = 0;  // read N x C + write N x C
};

// One line per result between parent and worker: tab-separated fields.
std::string ResultLine(const BenchResult &r) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%lld\t%lld\t%s\t%s\t%d\t%d\t%.9e\t%.9e\t%.9e\t%.9e\t%.17g\n",
                  static_cast<long long>(r.n), static_cast<long long>(r.c), r.dtype.c_str(), r.variant.c_str(),
                  r.threads, r.repeats, r.op_median, r.op_min, r.copy_median, r.copy_min, r.bytes);
    return buf;
}

bool ParseResultLine(const std::string &line, BenchResult *r) {
    std::istringstream in(line);
    std::string field;
    std::vector<std::string> f;
    while (std::getline(in, field, '\t')) f.push_back(field);
    if (f.size() != 11) return false;
    r->n = std::stoll(f[0]);
    r->c = std::stoll(f[1]);
    r->dtype = f[2];
    r->variant = f[3];
    r->threads = std::stoi(f[4]);
    r->repeats = std::stoi(f[5]);
    r->op_median = std::stod(f[6]);
    r->op_min = std::stod(f[7]);
    r->copy_median = std::stod(f[8]);
    r->copy_min = std::stod(f[9]);
    r->bytes = std::stod(f[10]);
    return true;
}

std::string FormatTime(double seconds) {
    char buf[32];
    if (seconds < 1e-3) std::snprintf(buf, sizeof buf, "%.2f us", seconds * 1e6);
    else if (seconds < 1.0) std::snprintf(buf, sizeof buf, "%.3f ms", seconds * 1e3);
    else std::snprintf(buf, sizeof buf, "%.3f s", seconds);
    return buf;
}

std::string JsonString(const std::string &s) {
    std::string out = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') out += '\\';
        if (static_cast<unsigned char>(ch) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", ch);
            out += buf;
            continue;
        }
        out += ch;
    }
    return out + "\"";
}

std::string CpuModel() {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return "unknown CPU";
}

const std::vector<OptionSpec> &BenchOptions() {
    static const std::vector<OptionSpec> specs = {
        {"--shapes", "", true, "NxC,...", "problem shapes (default 4096x32000,1x152064)"},
        {"--dtypes", "", true, "T,...", "float32, float16, bf16 (default float32)"},
        {"--variants", "", true, "V,...", "plain, weighted, smoothed (label smoothing 0.1 + weights), zloss (z-loss "
                                          "scale 1e-4 with lse and gradZloss), or all (default plain)"},
        {"--threads", "", true, "T,...", "thread counts, each run in its own process with OPENACLNN_NUM_THREADS=T "
                                         "(default: the library's default, the CPUs this process may use)"},
        {"--repeats", "", true, "R", "timed calls per row, after one untimed warm-up (default 5)"},
        {"--reduction", "", true, "R", "none, mean (default) or sum"},
        {"--json", "", false, "", "print the results as JSON on stdout instead of the table"},
        {"--plot", "", true, "FILE.svg", "draw achieved GB/s against the copy's, per shape, as an SVG picture"},
    };
    return specs;
}

}  // namespace

// ---- the worker: runs in its own process, prints one result line per configuration on stdout ----------------

int BenchWorkerCommand(int argc, char **argv) {
    std::vector<OptionSpec> specs = BenchOptions();
    specs.push_back({"--progress-base", "", true, "K", ""});
    specs.push_back({"--progress-total", "", true, "K", ""});
    const Options options("bench", specs, argc, argv);
    const std::vector<Shape> shapes = ParseShapes(options.GetOr("--shapes", "4096x32000,1x152064"));
    const std::vector<ComputeType> dtypes = ParseDtypes(options.GetOr("--dtypes", "float32"));
    const std::vector<std::string> variants = ParseVariants(options.GetOr("--variants", "plain"));
    const int repeats = static_cast<int>(options.Int("--repeats", 5));
    std::string reduction = ParseReduction(options.GetOr("--reduction", "mean"));
    int64_t progress = options.Int("--progress-base", 0);
    const int64_t progress_total = options.Int("--progress-total", 1);
    const bool tty = ::isatty(STDERR_FILENO);

    const char *env_threads = std::getenv("OPENACLNN_NUM_THREADS");
    const int threads = env_threads != nullptr ? std::max(1, std::atoi(env_threads)) : AvailableCpus();
    ParallelCopy copier(threads);
    AclSession session;

    for (const Shape &shape : shapes) {
        for (ComputeType type : dtypes) {
            const size_t esize = ComputeTypeSize(type);
            const aclDataType dtype = ToAclDataType(type);
            const size_t elements = static_cast<size_t>(shape.n * shape.c);
            const size_t matrix_bytes = elements * esize;

            // Inputs: log-prob-like values uniform in [-16, 0) (the kernels' speed does not depend on rows being
            // normalised), written through a pinned host staging buffer in chunks.
            DeviceTensor log_prob({shape.n, shape.c}, dtype, esize, nullptr);
            DeviceTensor out({shape.n, shape.c}, dtype, esize, nullptr);
            {
                Random rng{12345};
                const size_t chunk_elements = size_t{1} << 20;
                void *staging = nullptr;
                aclError status = aclrtMallocHost(&staging, chunk_elements * esize);
                if (status != ACL_SUCCESS) Failure(AclFailureText("aclrtMallocHost", status));
                for (size_t begin = 0; begin < elements; begin += chunk_elements) {
                    const size_t count = std::min(chunk_elements, elements - begin);
                    for (size_t i = 0; i < count; ++i) StoreFromDouble(type, staging, i, -16.0 * rng.Uniform());
                    status = aclrtMemcpy(static_cast<uint8_t *>(log_prob.buffer().get()) + begin * esize,
                                         matrix_bytes - begin * esize, staging, count * esize,
                                         ACL_MEMCPY_HOST_TO_DEVICE);
                    if (status != ACL_SUCCESS) Failure(AclFailureText("aclrtMemcpy", status));
                }
                aclrtFreeHost(staging);
            }
            Random rng{777};
            std::vector<int64_t> target(static_cast<size_t>(shape.n));
            for (int64_t &t : target) t = static_cast<int64_t>(rng.Next() % static_cast<uint64_t>(shape.c));
            std::vector<float> weight(static_cast<size_t>(shape.c));
            for (float &w : weight) w = static_cast<float>(0.5 + rng.Uniform());
            const bool none = reduction == "none";
            const std::vector<int64_t> loss_shape = none ? std::vector<int64_t>{shape.n} : std::vector<int64_t>{};
            const size_t loss_count = none ? static_cast<size_t>(shape.n) : 1;
            std::vector<uint8_t> grad(loss_count * esize), grad_zloss(loss_count * esize);
            for (size_t i = 0; i < loss_count; ++i) {
                StoreFromDouble(type, grad.data(), i, 1.0);
                StoreFromDouble(type, grad_zloss.data(), i, 0.5);
            }
            std::vector<uint8_t> lse(static_cast<size_t>(shape.n) * esize);
            // Each row's own logsumexp, as a model's rows have (z-loss rows then differ from row to row).
            for (int64_t i = 0; i < shape.n; ++i) {
                StoreFromDouble(type, lse.data(), static_cast<size_t>(i), 3.0 + static_cast<double>(i % 97) / 64.0);
            }
            DeviceTensor target_t({shape.n}, ACL_INT64, 8, target.data());
            DeviceTensor weight_t({shape.c}, ACL_FLOAT, 4, weight.data());
            DeviceTensor grad_t(loss_shape, dtype, esize, grad.data());
            DeviceTensor grad_zloss_t(loss_shape, dtype, esize, grad_zloss.data());
            DeviceTensor lse_t({shape.n}, dtype, esize, lse.data());
            DeviceBuffer workspace;

            for (const std::string &variant : variants) {
                const bool weighted = variant == "weighted" || variant == "smoothed";
                const double smoothing = variant == "smoothed" ? 0.1 : 0.0;
                const bool zloss = variant == "zloss";
                auto call_op = [&] {
                    uint64_t workspace_size = 0;
                    aclOpExecutor *executor = nullptr;
                    aclnnStatus status = aclnnCrossEntropyLossGradGetWorkspaceSize(
                        grad_t.tensor(), log_prob.tensor(), target_t.tensor(), weighted ? weight_t.tensor() : nullptr,
                        zloss ? grad_zloss_t.tensor() : nullptr, zloss ? lse_t.tensor() : nullptr, reduction.data(),
                        -100, smoothing, zloss ? 1e-4 : 0.0, out.tensor(), &workspace_size, &executor);
                    if (status != ACLNN_SUCCESS) {
                        Failure(AclFailureText("aclnnCrossEntropyLossGradGetWorkspaceSize", status));
                    }
                    if (workspace_size > workspace.bytes()) workspace = DeviceBuffer(workspace_size);
                    status = aclnnCrossEntropyLossGrad(workspace_size ? workspace.get() : nullptr, workspace_size,
                                                       executor, session.stream());
                    if (status != ACLNN_SUCCESS) Failure(AclFailureText("aclnnCrossEntropyLossGrad", status));
                    session.Synchronize("aclnnCrossEntropyLossGrad", kExitFailure);
                };
                auto call_copy = [&] { copier.Copy(out.buffer().get(), log_prob.buffer().get(), matrix_bytes); };

                ++progress;
                char label[160];
                std::snprintf(label, sizeof label, "[%lld/%lld] %lldx%lld %s %s threads=%d",
                              static_cast<long long>(progress), static_cast<long long>(progress_total),
                              static_cast<long long>(shape.n), static_cast<long long>(shape.c), ComputeTypeName(type),
                              variant.c_str(), threads);
                if (tty) std::fprintf(stderr, "\r\033[K%s warm-up", label);
                // Warm-up (excluded): first touch of pages and caches for both, executor paths, thread start-up.
                call_op();
                call_copy();
                std::vector<double> op_times, copy_times;
                using Clock = std::chrono::steady_clock;
                for (int rep = 0; rep < repeats; ++rep) {
                    if (tty) std::fprintf(stderr, "\r\033[K%s call %d/%d", label, rep + 1, repeats);
                    // Interleaved, so that both see the same machine state.
                    auto t0 = Clock::now();
                    call_op();
                    auto t1 = Clock::now();
                    call_copy();
                    auto t2 = Clock::now();
                    op_times.push_back(std::chrono::duration<double>(t1 - t0).count());
                    copy_times.push_back(std::chrono::duration<double>(t2 - t1).count());
                }
                BenchResult r;
                r.n = shape.n;
                r.c = shape.c;
                r.dtype = ComputeTypeName(type);
                r.variant = variant;
                r.threads = threads;
                r.repeats = repeats;
                r.op_median = Median(op_times);
                r.op_min = *std::min_element(op_times.begin(), op_times.end());
                r.copy_median = Median(copy_times);
                r.copy_min = *std::min_element(copy_times.begin(), copy_times.end());
                r.bytes = 2.0 * static_cast<double>(matrix_bytes);
                if (tty) {
                    std::fprintf(stderr, "\r\033[K");
                } else {
                    std::fprintf(stderr, "%s: %s per call, %.3gx the copy\n", label, FormatTime(r.op_median).c_str(),
                                 r.op_median / r.copy_median);
                }
                std::fputs(ResultLine(r).c_str(), stdout);
                std::fflush(stdout);
            }
        }
    }
    return kExitOk;
}

// ---- the parent: validates, runs the workers, prints and draws -------------------------------------------------

int BenchCommand(int argc, char **argv) {
    const std::vector<OptionSpec> &specs = BenchOptions();
    const Options options("bench", specs, argc, argv);
    if (options.Help()) {
        std::cout << FormatHelp(
            "openaclnn bench [--shapes 4096x32000,1x152064] [--dtypes float32,bf16] [--variants all] [--threads 1,2]\n"
            "                      [--repeats 5] [--json] [--plot bench.svg]",
            "Times aclnnCrossEntropyLossGrad as a program calls it (phase 1 + phase 2 + aclrtSynchronizeStream) and\n"
            "a copy of the same bytes (read N x C, write N x C; memcpy split over the same number of threads) on\n"
            "the same aclrtMalloc'd buffers, interleaved in the same process, after an untimed warm-up of each.\n"
            "Reports the median time per call, GB/s (2 x N x C x dtype size / time) and the ratio of the\n"
            "operator's time to the copy's: 1.0 means the operator runs at memory speed.",
            specs,
            "A progress line goes to stderr while it runs. Each thread count runs in its own process.\n"
            "exit status: 0 success, 2 bad arguments, 3 failure (e.g. the shapes do not fit in memory).\n");
        return kExitOk;
    }
    const std::string shapes_text = options.GetOr("--shapes", "4096x32000,1x152064");
    const std::string dtypes_text = options.GetOr("--dtypes", "float32");
    const std::string variants_text = options.GetOr("--variants", "plain");
    const std::vector<Shape> shapes = ParseShapes(shapes_text);
    const std::vector<ComputeType> dtypes = ParseDtypes(dtypes_text);
    const std::vector<std::string> variants = ParseVariants(variants_text);
    const int64_t repeats = options.Int("--repeats", 5);
    if (repeats < 1 || repeats > 100000) BadInput("--repeats: must be in [1, 100000]");
    const std::string reduction = ParseReduction(options.GetOr("--reduction", "mean"));
    std::vector<int> thread_counts;
    if (auto t = options.Get("--threads")) thread_counts = ParseThreads(*t);
    const auto plot_path = options.Get("--plot");
    if (plot_path) AtomicOutputs::CheckWritable(*plot_path, "--plot");
    const bool json = options.Has("--json");

    const int64_t per_process = static_cast<int64_t>(shapes.size() * dtypes.size() * variants.size());
    const int64_t total = per_process * static_cast<int64_t>(std::max<size_t>(1, thread_counts.size()));
    std::vector<BenchResult> results;
    const size_t runs = std::max<size_t>(1, thread_counts.size());
    for (size_t k = 0; k < runs; ++k) {
        std::vector<std::string> args = {"__bench-worker",  "--shapes",    shapes_text,
                                         "--dtypes",        dtypes_text,   "--variants",
                                         variants_text,     "--repeats",   std::to_string(repeats),
                                         "--reduction",     reduction,     "--progress-base",
                                         std::to_string(static_cast<int64_t>(k) * per_process), "--progress-total",
                                         std::to_string(total)};
        std::map<std::string, std::string> env;
        if (!thread_counts.empty()) env["OPENACLNN_NUM_THREADS"] = std::to_string(thread_counts[k]);
        ChildResult child = RunSelf(args, env, false);
        std::istringstream lines(child.out);
        std::string line;
        while (std::getline(lines, line)) {
            BenchResult r;
            if (ParseResultLine(line, &r)) results.push_back(r);
        }
        if (child.exit_status != 0) {
            // The worker already printed its error line on stderr.
            throw CliError(child.exit_status == kExitBadInput ? kExitBadInput : kExitFailure,
                           "benchmark run" +
                               (thread_counts.empty() ? std::string() : " with " + std::to_string(thread_counts[k]) +
                                                                            " threads") +
                               " failed (exit status " + std::to_string(child.exit_status) + ")");
        }
    }

    // Shape first (in --shapes order), then dtype, threads and variant, so that a shape's rows sit together.
    auto index_of = [](const auto &list, const auto &value) {
        return static_cast<size_t>(std::find(list.begin(), list.end(), value) - list.begin());
    };
    std::vector<std::string> dtype_names;
    for (ComputeType t : dtypes) dtype_names.push_back(ComputeTypeName(t));
    std::stable_sort(results.begin(), results.end(), [&](const BenchResult &a, const BenchResult &b) {
        size_t sa = 0, sb = 0;
        for (size_t k = 0; k < shapes.size(); ++k) {
            if (shapes[k].n == a.n && shapes[k].c == a.c) sa = k;
            if (shapes[k].n == b.n && shapes[k].c == b.c) sb = k;
        }
        return std::make_tuple(sa, index_of(dtype_names, a.dtype), a.threads, index_of(variants, a.variant)) <
               std::make_tuple(sb, index_of(dtype_names, b.dtype), b.threads, index_of(variants, b.variant));
    });

    const std::string cpu = CpuModel();
    if (json) {
        std::printf("{\n  \"tool\": \"openaclnn bench\",\n  \"version\": %s,\n  \"cpu\": %s,\n",
                    JsonString(OPENACLNN_TOOL_VERSION).c_str(), JsonString(cpu).c_str());
        std::printf("  \"operator\": \"aclnnCrossEntropyLossGrad\",\n  \"reduction\": %s,\n",
                    JsonString(reduction).c_str());
        std::printf("  \"bytes_definition\": \"read N*C + write N*C elements of the dtype\",\n  \"results\": [\n");
        for (size_t i = 0; i < results.size(); ++i) {
            const BenchResult &r = results[i];
            std::printf("    {\"n\": %lld, \"c\": %lld, \"dtype\": %s, \"variant\": %s, \"threads\": %d, "
                        "\"repeats\": %d, \"bytes\": %.0f, \"op_seconds_median\": %.9g, \"op_seconds_min\": %.9g, "
                        "\"copy_seconds_median\": %.9g, \"copy_seconds_min\": %.9g, \"op_gbps\": %.6g, "
                        "\"copy_gbps\": %.6g, \"op_over_copy\": %.6g}%s\n",
                        static_cast<long long>(r.n), static_cast<long long>(r.c), JsonString(r.dtype).c_str(),
                        JsonString(r.variant).c_str(), r.threads, r.repeats, r.bytes, r.op_median, r.op_min,
                        r.copy_median, r.copy_min, r.bytes / r.op_median / 1e9, r.bytes / r.copy_median / 1e9,
                        r.op_median / r.copy_median, i + 1 < results.size() ? "," : "");
        }
        std::printf("  ]\n}\n");
    } else {
        std::printf("aclnnCrossEntropyLossGrad, reduction %s, median of %lld calls (phase 1 + phase 2 + sync); "
                    "%s\n",
                    reduction.c_str(), static_cast<long long>(repeats), cpu.c_str());
        std::printf("copy = memcpy of the same bytes (read NxC, write NxC) on the same buffers, same threads\n\n");
        std::printf("%-14s %-8s %-9s %7s %12s %9s %12s %9s %8s\n", "shape", "dtype", "variant", "threads",
                    "time/call", "GB/s", "copy time", "copy GB/s", "op/copy");
        for (const BenchResult &r : results) {
            const std::string shape = std::to_string(r.n) + "x" + std::to_string(r.c);
            std::printf("%-14s %-8s %-9s %7d %12s %9.2f %12s %9.2f %8.3f\n", shape.c_str(), r.dtype.c_str(),
                        r.variant.c_str(), r.threads, FormatTime(r.op_median).c_str(), r.bytes / r.op_median / 1e9,
                        FormatTime(r.copy_median).c_str(), r.bytes / r.copy_median / 1e9,
                        r.op_median / r.copy_median);
        }
    }
    std::fflush(stdout);

    if (plot_path) {
        std::vector<PlotPoint> points;
        for (const BenchResult &r : results) {
            PlotPoint p;
            p.group = std::to_string(r.n) + "x" + std::to_string(r.c);
            p.subgroup = r.dtype + ", " + std::to_string(r.threads) + (r.threads == 1 ? " thread" : " threads");
            p.series = r.variant;
            p.op_gbps = r.bytes / r.op_median / 1e9;
            p.copy_gbps = r.bytes / r.copy_median / 1e9;
            points.push_back(p);
        }
        const std::string title = "aclnnCrossEntropyLossGrad: achieved GB/s against a copy of the same bytes";
        const std::string subtitle = cpu + " · reduction " + reduction + " · median of " + std::to_string(repeats) +
                                     " calls · GB/s = (read N×C + write N×C) / time";
        const std::string svg = RenderBenchSvg(title, subtitle, points);
        AtomicOutputs outputs;
        outputs.StageText(*plot_path, "--plot", svg);
        outputs.Commit();
        std::fprintf(stderr, "openaclnn bench: wrote %s\n", plot_path->c_str());
    }
    return kExitOk;
}

}  // namespace openaclnn_cli
