#include "grad_plan.h"

#include <omp.h>

#include <algorithm>

namespace openaclnn::cross_entropy {
namespace {

// Below this many elements a parallel region costs more than it saves (a wake-up is a few microseconds; a
// streaming element a fraction of a nanosecond).
constexpr int64_t kMinElementsPerThread = 1 << 16;
// Column blocks are only worth it when each keeps whole cache lines to itself.
constexpr int64_t kMinColumnsPerBlock = 4096;

int64_t SplitPoint(int64_t total, int64_t parts, int64_t k) { return total * k / parts; }

}  // namespace

GradPlan MakeGradPlan(const GradKernelArgs &args, int max_threads) {
    GradPlan plan{&SelectGradKernel(args), 1, 1, 1};
    const int64_t elements = args.n * args.c;
    if (elements <= 0 || max_threads <= 1) return plan;
    const int64_t useful = std::max<int64_t>(1, elements / kMinElementsPerThread);
    const int threads = static_cast<int>(std::min<int64_t>(max_threads, useful));
    if (threads <= 1) return plan;
    if (args.n >= threads) {
        plan.row_blocks = threads;
    } else {
        // Few long rows: give each row its share of threads, split along columns.
        plan.row_blocks = args.n;
        plan.col_blocks = std::max<int64_t>(1, std::min<int64_t>(threads / args.n, args.c / kMinColumnsPerBlock));
    }
    plan.threads = static_cast<int>(plan.row_blocks * plan.col_blocks);
    return plan;
}

GradTile PlanTile(const GradPlan &plan, int64_t n, int64_t c, int k) {
    const int64_t row_block = k / plan.col_blocks;
    const int64_t col_block = k % plan.col_blocks;
    return GradTile{SplitPoint(n, plan.row_blocks, row_block), SplitPoint(n, plan.row_blocks, row_block + 1),
                    SplitPoint(c, plan.col_blocks, col_block), SplitPoint(c, plan.col_blocks, col_block + 1)};
}

void RunGradPlan(const GradPlan &plan, const GradKernelArgs &args) {
    if (plan.threads <= 1) {
        plan.kernel->run(args, GradTile{0, args.n, 0, args.c});
        return;
    }
#pragma omp parallel num_threads(plan.threads)
    {
        // The team may be smaller than asked (nested regions, OMP_THREAD_LIMIT): every tile still runs once.
        const int team = omp_get_num_threads();
        for (int k = omp_get_thread_num(); k < plan.threads; k += team) {
            plan.kernel->run(args, PlanTile(plan, args.n, args.c, k));
        }
    }
}

}  // namespace openaclnn::cross_entropy
