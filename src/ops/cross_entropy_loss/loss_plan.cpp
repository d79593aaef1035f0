#include "loss_plan.h"

#include <omp.h>

#include <algorithm>

namespace openaclnn::cross_entropy_loss {
namespace {

// Below this many elements per thread a parallel region costs more than it saves (a wake-up is a few
// microseconds; an element a fraction of a nanosecond).
constexpr int64_t kMinElementsPerThread = 1 << 16;
// Non-temporal stores pay once the output is well past what the caches hold (and would evict the input rows the
// second pass reads); below that, ordinary stores leave logProb in cache for whoever reads it next.
constexpr int64_t kStreamBytes = int64_t{64} << 20;

}  // namespace

LossPlan MakeLossPlan(const LossKernelArgs &args, int max_threads, const LossKernelInfo &kernel) {
    LossPlan plan{&kernel, 1, false};
    const int64_t elements = args.n * args.c;
    plan.stream_stores = args.dtype == ACL_FLOAT && args.log_prob_col_stride == 1 &&
                         elements * static_cast<int64_t>(sizeof(float)) >= kStreamBytes;
    if (elements <= 0 || max_threads <= 1) return plan;
    const int64_t useful = std::max<int64_t>(1, elements / kMinElementsPerThread);
    plan.threads = static_cast<int>(std::min<int64_t>({max_threads, useful, args.n}));
    return plan;
}

LossPlan MakeLossPlan(const LossKernelArgs &args, int max_threads) {
    return MakeLossPlan(args, max_threads, SelectLossKernel(args));
}

void RunLossPlan(const LossPlan &plan, const LossKernelArgs &args) {
    LossKernelArgs run_args = args;
    run_args.stream_stores = plan.stream_stores;
    if (plan.threads <= 1) {
        plan.kernel->run(run_args, 0, args.n);
        return;
    }
#pragma omp parallel num_threads(plan.threads)
    {
        // The team may be smaller than asked (nested regions, OMP_THREAD_LIMIT): every range still runs once.
        const int team = omp_get_num_threads();
        for (int k = omp_get_thread_num(); k < plan.threads; k += team) {
            plan.kernel->run(run_args, RowSplit(args.n, plan.threads, k), RowSplit(args.n, plan.threads, k + 1));
        }
    }
}

}  // namespace openaclnn::cross_entropy_loss
