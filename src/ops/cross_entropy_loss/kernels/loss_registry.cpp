// The one place that decides which forward kernel runs. The API, tests and benchmarks all go through it.
#include <cstdlib>
#include <cstring>

#include "kernels/loss_kernel.h"
#include "runtime/runtime.h"

namespace openaclnn::cross_entropy_loss {
namespace {

bool SupportsAll(const LossKernelArgs &) { return true; }

const LossKernelInfo kReferenceKernel = {"reference", 0, SupportsAll, ReferenceLossKernel, nullptr};

// OPENACLNN_MAX_ISA as a rank: scalar 0, sse4 1, avx2 2 (neon counts as 2), avx512/avx3 3; unset or unknown: no cap.
int MaxIsaRank() {
    const char *value = std::getenv("OPENACLNN_MAX_ISA");
    if (value == nullptr || *value == '\0') return 3;
    static const struct {
        const char *name;
        int rank;
    } kNames[] = {{"scalar", 0}, {"reference", 0}, {"sse4", 1}, {"sse4.2", 1}, {"avx2", 2},
                  {"neon", 2},   {"avx512", 3},    {"avx3", 3}, {"native", 3}};
    for (const auto &entry : kNames) {
        if (strcasecmp(value, entry.name) == 0) return entry.rank;
    }
    return 3;
}

}  // namespace

int AvailableLossKernels(const LossKernelInfo **out, int capacity) {
    // The CPU's targets are read once: hwy::SupportedTargets() runs CPUID, which a virtual machine may trap (about
    // 25 us per call measured on the development VM, more than the rest of a small call).
    static const struct HighwayList {
        const LossKernelInfo *kernels[8];
        int count;
        HighwayList() : kernels{}, count(HighwayLossKernels(kernels, 8)) {}
    } kHighway;
    int count = 0;
    for (; count < kHighway.count && count < capacity - 1; ++count) out[count] = kHighway.kernels[count];
    out[count++] = &kReferenceKernel;
    return count;
}

const LossKernelInfo &SelectLossKernel(const LossKernelArgs &args) {
    const LossKernelInfo *kernels[8];
    const int count = AvailableLossKernels(kernels, 8);
    const int max_rank = MaxIsaRank();
    for (int k = 0; k < count; ++k) {
        if (kernels[k]->isa_rank <= max_rank && kernels[k]->supports(args)) return *kernels[k];
        Log(2, "aclnnCrossEntropyLoss: skipped kernel %s: %s", kernels[k]->name,
            kernels[k]->isa_rank > max_rank ? "above OPENACLNN_MAX_ISA" : "layout not supported (column stride != 1)");
    }
    return kReferenceKernel;
}

}  // namespace openaclnn::cross_entropy_loss
