// `openaclnn info`: what is running here. The library has no public call that names its SIMD kernels, so the tool
// reports what can be known honestly: the CPU's features, the environment settings, and the kernel choice the
// library itself logs (OPENACLNN_LOG=info) for a small gradient call under each OPENACLNN_MAX_ISA cap, each in a
// child process of its own.
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "acl_session.h"
#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "aclnnop/aclnn_cross_entropy_loss_grad.h"
#include "cli_common.h"
#include "commands.h"
#include "openaclnn_build_info.h"
#include "subprocess.h"

#pragma weak aclnnCrossEntropyLossGetWorkspaceSize

namespace openaclnn_cli {

namespace {

std::string LibraryOf(const void *symbol) {
    Dl_info info;
    if (symbol != nullptr && ::dladdr(symbol, &info) != 0 && info.dli_fname != nullptr) {
        char resolved[4096];
        if (::realpath(info.dli_fname, resolved) != nullptr) return resolved;
        return info.dli_fname;
    }
    return "(not found)";
}

std::string CpuModel() {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
            const size_t colon = line.find(':');
            if (colon != std::string::npos) return line.substr(colon + 2);
        }
    }
    return "unknown";
}

// The SIMD-relevant CPU features, as the CPU reports them.
std::string CpuFeatures() {
    std::string out;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    struct Feature {
        const char *name;
        int present;
    };
    const Feature features[] = {
        {"sse4.1", __builtin_cpu_supports("sse4.1")},     {"sse4.2", __builtin_cpu_supports("sse4.2")},
        {"avx", __builtin_cpu_supports("avx")},           {"avx2", __builtin_cpu_supports("avx2")},
        {"fma", __builtin_cpu_supports("fma")},           {"avx512f", __builtin_cpu_supports("avx512f")},
        {"avx512bw", __builtin_cpu_supports("avx512bw")}, {"avx512dq", __builtin_cpu_supports("avx512dq")},
        {"avx512vl", __builtin_cpu_supports("avx512vl")},
    };
    for (const Feature &f : features) {
        if (f.present) out += std::string(out.empty() ? "" : " ") + f.name;
    }
    // Flags the builtin does not know in this compiler version: read them from /proc/cpuinfo.
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("flags", 0) != 0) continue;
        std::istringstream words(line.substr(line.find(':') + 1));
        std::set<std::string> flags;
        std::string w;
        while (words >> w) flags.insert(w);
        for (const char *extra : {"f16c", "avx512_bf16", "avx512_fp16", "avx512vnni", "amx_bf16"}) {
            if (flags.count(extra)) out += std::string(" ") + extra;
        }
        break;
    }
#elif defined(__aarch64__)
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("Features", 0) == 0) return line.substr(line.find(':') + 2);
    }
#endif
    return out.empty() ? "(none detected)" : out;
}

int AvailableCpus() {
    cpu_set_t set;
    if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<int>(n) : 1;
}

std::string EnvOr(const char *name, const char *fallback) {
    const char *v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string(fallback);
}

// The lines of the library's log that name a kernel (all of them when none does).
std::vector<std::string> KernelLines(const std::string &log) {
    std::vector<std::string> all, kernel;
    std::istringstream in(log);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        all.push_back(line);
        std::string lower;
        for (char ch : line) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (lower.find("kernel") != std::string::npos) kernel.push_back(line);
    }
    return kernel.empty() ? all : kernel;
}

}  // namespace

// Child: one small float32 gradient call, so that the library logs its kernel choice on stderr.
int KernelProbeCommand(int, char **) {
    AclSession session;
    const int64_t n = 4, c = 1000;
    std::vector<float> log_prob(static_cast<size_t>(n * c), -6.907755f);  // log(1/1000)
    std::vector<int64_t> target = {0, 1, 2, 3};
    float grad = 1.0f;
    const std::vector<int64_t> scalar = {};
    DeviceTensor lp({n, c}, ACL_FLOAT, 4, log_prob.data());
    DeviceTensor t({n}, ACL_INT64, 8, target.data());
    DeviceTensor g(scalar, ACL_FLOAT, 4, &grad);
    DeviceTensor out({n, c}, ACL_FLOAT, 4, nullptr);
    uint64_t workspace_size = 0;
    aclOpExecutor *executor = nullptr;
    char reduction[] = "mean";
    aclnnStatus status = aclnnCrossEntropyLossGradGetWorkspaceSize(g.tensor(), lp.tensor(), t.tensor(), nullptr,
                                                                   nullptr, nullptr, reduction, -100, 0.0, 0.0,
                                                                   out.tensor(), &workspace_size, &executor);
    if (status != ACLNN_SUCCESS) Failure(AclFailureText("aclnnCrossEntropyLossGradGetWorkspaceSize", status));
    DeviceBuffer workspace;
    if (workspace_size > 0) workspace = DeviceBuffer(workspace_size);
    status = aclnnCrossEntropyLossGrad(workspace.get(), workspace_size, executor, session.stream());
    if (status != ACLNN_SUCCESS) Failure(AclFailureText("aclnnCrossEntropyLossGrad", status));
    session.Synchronize("aclnnCrossEntropyLossGrad", kExitFailure);
    return kExitOk;
}

int InfoCommand(int argc, char **argv) {
    const std::vector<OptionSpec> specs = {
        {"--no-probe", "", false, "", "skip running the library to see which kernel it picks"},
    };
    const Options options("info", specs, argc, argv);
    if (options.Help()) {
        std::cout << FormatHelp(
            "openaclnn info [--no-probe]",
            "Prints the version, the libraries loaded, the build options, the CPU's SIMD features, the\n"
            "environment settings, the thread count, and the gradient kernel the library picks under each\n"
            "OPENACLNN_MAX_ISA cap (as the library logs it with OPENACLNN_LOG=info, one child process per cap).",
            specs, "");
        return kExitOk;
    }
    std::printf("openaclnn %s\n", OPENACLNN_TOOL_VERSION);
    std::printf("libraries:\n");
    std::printf("  libopapi_nn   %s\n", LibraryOf(reinterpret_cast<const void *>(&aclnnCrossEntropyLossGrad)).c_str());
    std::printf("  libascendcl   %s\n", LibraryOf(reinterpret_cast<const void *>(&aclrtMalloc)).c_str());
    std::printf("operators:\n");
    std::printf("  aclnnCrossEntropyLossGrad  yes\n");
    std::printf("  aclnnCrossEntropyLoss      %s\n", aclnnCrossEntropyLossGetWorkspaceSize != nullptr
                                                          ? "yes"
                                                          : "no (this library build does not have it)");
    std::printf("build (of this tool, configured with the library):\n");
    std::printf("  type          %s\n", OPENACLNN_BUILD_TYPE);
    std::printf("  compiler      %s\n", OPENACLNN_BUILD_COMPILER);
    std::printf("  flags         %s\n", std::string(OPENACLNN_BUILD_CXX_FLAGS).empty() ? "(defaults of the type)"
                                                                                    : OPENACLNN_BUILD_CXX_FLAGS);
    std::printf("  sanitizers    %s\n", std::string(OPENACLNN_BUILD_SANITIZE).empty() ? "none"
                                                                                  : OPENACLNN_BUILD_SANITIZE);
    std::printf("cpu:\n");
    std::printf("  model         %s\n", CpuModel().c_str());
    std::printf("  simd features %s\n", CpuFeatures().c_str());
    const int cpus = AvailableCpus();
    std::printf("  usable cpus   %d\n", cpus);
    std::printf("environment:\n");
    const std::string threads = EnvOr("OPENACLNN_NUM_THREADS", "");
    std::printf("  OPENACLNN_NUM_THREADS  %s\n", threads.empty() ? "(unset)" : threads.c_str());
    std::printf("  OPENACLNN_MAX_ISA      %s\n", EnvOr("OPENACLNN_MAX_ISA", "(unset: no cap)").c_str());
    std::printf("  OPENACLNN_LOG          %s\n", EnvOr("OPENACLNN_LOG", "(unset)").c_str());
    std::printf("threads:       %s\n",
                threads.empty() ? (std::to_string(cpus) + " (unset OPENACLNN_NUM_THREADS: the CPUs this process may "
                                                          "use)").c_str()
                                : (threads + " (from OPENACLNN_NUM_THREADS)").c_str());
    if (options.Has("--no-probe")) return kExitOk;

    std::printf("gradient kernel chosen by the library (float32, N=4, C=1000; from its OPENACLNN_LOG=info log):\n");
#if defined(__aarch64__)
    const std::vector<std::string> caps = {"", "sve", "neon", "scalar"};
#else
    const std::vector<std::string> caps = {"", "avx512", "avx2", "sse4", "scalar"};
#endif
    const std::string current_cap = EnvOr("OPENACLNN_MAX_ISA", "");
    for (const std::string &cap : caps) {
        // The first probe keeps the caller's own cap (if any): that is what a run here dispatches to.
        const std::string effective = cap.empty() ? current_cap : cap;
        ChildResult r = RunSelf({"__kernel-probe"}, {{"OPENACLNN_LOG", "info"}, {"OPENACLNN_MAX_ISA", effective}}, true);
        const std::string label = cap.empty() ? (current_cap.empty() ? "no cap (dispatched here)"
                                                                     : "cap " + current_cap + " (dispatched here)")
                                              : "OPENACLNN_MAX_ISA=" + cap;
        std::printf("  %-28s ", label.c_str());
        if (r.exit_status != 0) {
            std::printf("probe failed (exit %d): %s\n", r.exit_status, KernelLines(r.err).empty()
                                                                           ? ""
                                                                           : KernelLines(r.err).back().c_str());
            continue;
        }
        const std::vector<std::string> lines = KernelLines(r.err);
        if (lines.empty()) {
            std::printf("(the library logged nothing)\n");
            continue;
        }
        for (size_t i = 0; i < lines.size(); ++i) {
            std::printf("%s%s\n", i == 0 ? "" : "                               ", lines[i].c_str());
        }
    }
    return kExitOk;
}

}  // namespace openaclnn_cli
