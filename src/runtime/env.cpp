// Environment: OPENACLNN_NUM_THREADS and OPENACLNN_LOG.
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/runtime.h"

namespace openaclnn {
namespace {

// The CPUs this process may run on, asked of the kernel once: the system call costs about a microsecond on a
// virtual machine, which was most of phase 1 of a small call.
int AffinityCpus() {
    static const int cpus = [] {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0) {
            const int count = CPU_COUNT(&set);
            if (count >= 1) return count;
        }
        return 1;
    }();
    return cpus;
}

int ReadThreads() {
    if (const char *value = std::getenv("OPENACLNN_NUM_THREADS")) {
        char *end = nullptr;
        const long parsed = std::strtol(value, &end, 10);
        if (end != value && *end == '\0' && parsed >= 1 && parsed <= 1024) return static_cast<int>(parsed);
        std::fprintf(stderr, "openaclnn: ignoring OPENACLNN_NUM_THREADS='%s' (expected an integer in [1, 1024])\n",
                     value);
    }
    return AffinityCpus();
}

int ReadLogLevel() {
    const char *value = std::getenv("OPENACLNN_LOG");
    if (!value) return 0;
    if (std::strcmp(value, "info") == 0) return 1;
    if (std::strcmp(value, "debug") == 0) return 2;
    return 0;
}

}  // namespace

int ConfiguredThreads() {
    // The variable is read on each call (cheap) so that tests may change it between runs; the CPU count once.
    return ReadThreads();
}

int LogLevel() {
    static const int level = ReadLogLevel();
    return level;
}

void Log(int level, const char *fmt, ...) {
    if (LogLevel() < level) return;
    va_list args;
    va_start(args, fmt);
    std::fprintf(stderr, "openaclnn[%s]: ", level >= 2 ? "debug" : "info");
    std::vfprintf(stderr, fmt, args);
    std::fputc('\n', stderr);
    va_end(args);
}

}  // namespace openaclnn
