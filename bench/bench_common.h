// Helpers shared by the benchmarks: status checks, aclrtMalloc'd buffers and the copy floor.
#ifndef OPENACLNN_BENCH_BENCH_COMMON_H_
#define OPENACLNN_BENCH_BENCH_COMMON_H_

#include <omp.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "acl/acl.h"

namespace openaclnn_bench {

// Aborts with the call's name, its status and the runtime's last message when status is not 0.
inline void Check(int status, const char *what) {
    if (status != 0) {
        const char *msg = aclGetRecentErrMsg();
        std::fprintf(stderr, "%s failed: %d %s\n", what, status, msg ? msg : "");
        std::abort();
    }
}

// The CPU as /proc/cpuinfo names it, with its family and model numbers ("AMD EPYC, family 26 model 2"), for the
// benchmarks' context: the machines these benchmarks run on are virtual, and the host behind them has not always been
// the same processor (AMD family 25 model 17 is Zen 4, family 26 Zen 5); figures from different ones do not compare.
inline std::string CpuDescription() {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, name, family, model;
    const auto value = [&line] {
        const size_t colon = line.find(':');
        const size_t start = colon == std::string::npos ? colon : line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? std::string() : line.substr(start);
    };
    while (std::getline(cpuinfo, line) && !line.empty()) {
        if (line.rfind("model name", 0) == 0) name = value();
        if (line.rfind("cpu family", 0) == 0) family = value();
        if (line.rfind("model\t", 0) == 0) model = value();
    }
    if (name.empty()) return "unknown";
    return family.empty() ? name : name + ", family " + family + " model " + model;
}

// Device memory as a program for the NPU gets it (HUGE_FIRST: transparent huge pages on this runtime).
inline void *DeviceAlloc(size_t bytes) {
    void *p = nullptr;
    Check(aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
    return p;
}

// The copy floor: dst <- src, `bytes` split into `parts` contiguous pieces (64-byte aligned boundaries), each
// copied by its own OpenMP thread, by memcpy or by `copy` (called as memcpy is).
inline void ThreadedCopy(void *dst, const void *src, size_t bytes, int parts,
                         void (*copy)(void *, const void *, size_t) = nullptr) {
#pragma omp parallel num_threads(parts)
    {
        const size_t k = static_cast<size_t>(omp_get_thread_num());
        const size_t team = static_cast<size_t>(omp_get_num_threads());
        const size_t begin = bytes * k / team / 64 * 64;
        const size_t end = k + 1 == team ? bytes : bytes * (k + 1) / team / 64 * 64;
        char *to = static_cast<char *>(dst) + begin;
        const char *from = static_cast<const char *>(src) + begin;
        if (copy != nullptr) {
            copy(to, from, end - begin);
        } else {
            std::memcpy(to, from, end - begin);
        }
    }
}

}  // namespace openaclnn_bench

#endif  // OPENACLNN_BENCH_BENCH_COMMON_H_
