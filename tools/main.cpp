// openaclnn: the command-line face of the library. It drives the operators only through the public C API, as any
// program written for an Ascend NPU would, and reads and writes NumPy .npy files.
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "openaclnn_build_info.h"

namespace {

const char *kUsage =
    "usage: openaclnn <command> [options]      (openaclnn <command> --help for each)\n"
    "\n"
    "Runs openaclnn's aclnn operators (a CPU implementation of Huawei Ascend CANN's aclnn API) on NumPy .npy\n"
    "files, through the same public C API a program written for an Ascend NPU uses.\n"
    "\n"
    "commands:\n"
    "  grad      aclnnCrossEntropyLossGrad: gradient of the cross-entropy loss from the forward's log-probs\n"
    "  forward   aclnnCrossEntropyLoss: loss, log-probs, row log-sum-exp and z-loss from logits\n"
    "  check     compare a result (e.g. an NPU's output dump) with the golden gradient; exit 1 on mismatch\n"
    "  bench     time the gradient against a copy of the same bytes; table, --json, --plot SVG\n"
    "  info      version, build options, SIMD targets, threads\n"
    "\n"
    "exit status: 0 success, 1 check found a mismatch, 2 bad arguments or input files (one line on stderr\n"
    "names the flag or file), 3 library or system failure.\n"
    "\n"
    "environment: OPENACLNN_NUM_THREADS (threads), OPENACLNN_MAX_ISA (cap the SIMD target: scalar, sse4, avx2,\n"
    "avx512), OPENACLNN_LOG (info, debug: which kernel ran). Results do not depend on them.\n"
    "\n"
    "example:\n"
    "  python3 -c \"import numpy as np; x=np.random.randn(4,10).astype(np.float32); \\\n"
    "      np.save('lp.npy', x - np.log(np.exp(x).sum(1, keepdims=True))); np.save('t.npy', np.arange(4))\"\n"
    "  openaclnn grad --log-prob lp.npy --target t.npy -o grad.npy\n"
    "  openaclnn check --log-prob lp.npy --target t.npy --expected npu_grad.npy\n";

int Dispatch(int argc, char **argv) {
    using namespace openaclnn_cli;
    if (argc < 2) {
        std::fputs(kUsage, stderr);
        return kExitBadInput;
    }
    const std::string command = argv[1];
    if (command == "--help" || command == "-h" || command == "help") {
        if (command == "help" && argc >= 3) {
            // `openaclnn help grad` == `openaclnn grad --help`
            char help_flag[] = "--help";
            char *args[] = {argv[0], argv[2], help_flag, nullptr};
            return Dispatch(3, args);
        }
        std::fputs(kUsage, stdout);
        return kExitOk;
    }
    if (command == "--version" || command == "version") {
        std::printf("openaclnn %s\n", OPENACLNN_TOOL_VERSION);
        return kExitOk;
    }
    int (*run)(int, char **) = nullptr;
    if (command == "grad") run = GradCommand;
    else if (command == "check") run = CheckCommand;
    else if (command == "forward") run = ForwardCommand;
    else if (command == "bench") run = BenchCommand;
    else if (command == "info") run = InfoCommand;
    else if (command == "__bench-worker") run = BenchWorkerCommand;
    else if (command == "__kernel-probe") run = KernelProbeCommand;
    if (run == nullptr) {
        std::fprintf(stderr, "openaclnn: error: unknown command '%s' (commands: grad, forward, check, bench, info; "
                             "see openaclnn --help)\n", command.c_str());
        return kExitBadInput;
    }
    const std::string shown = command == "__bench-worker" ? "bench" : command == "__kernel-probe" ? "info" : command;
    try {
        return run(argc - 2, argv + 2);
    } catch (const CliError &e) {
        std::fflush(stdout);
        std::fprintf(stderr, "openaclnn %s: error: %s\n", shown.c_str(), e.what());
        return e.status();
    } catch (const std::bad_alloc &) {
        std::fflush(stdout);
        std::fprintf(stderr, "openaclnn %s: error: out of memory\n", shown.c_str());
        return kExitFailure;
    } catch (const std::exception &e) {
        std::fflush(stdout);
        std::fprintf(stderr, "openaclnn %s: error: %s\n", shown.c_str(), e.what());
        return kExitFailure;
    }
}

}  // namespace

int main(int argc, char **argv) { return Dispatch(argc, argv); }
