// How a cross-entropy gradient is split across threads ("tiling"): a pure function of the problem and the
// machine, decided in phase 1 and copied into each queued task.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_GRAD_PLAN_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_GRAD_PLAN_H_

#include <cstdint>

#include "kernels/grad_kernel.h"

namespace openaclnn::cross_entropy {

struct GradPlan {
    const GradKernelInfo *kernel;
    int threads;         // threads of the kernel pass; 1 runs it on the stream's own thread, no parallel region
    int64_t row_blocks;  // threads == row_blocks * col_blocks
    int64_t col_blocks;  // > 1 only when there are fewer rows than threads and long rows
};

// max_threads: OPENACLNN_NUM_THREADS or the CPUs available. The partition is static and deterministic; each
// output element's value does not depend on it.
GradPlan MakeGradPlan(const GradKernelArgs &args, int max_threads);

// Tile k in [0, plan.threads).
GradTile PlanTile(const GradPlan &plan, int64_t n, int64_t c, int k);

// Runs the kernel over the whole output according to the plan.
void RunGradPlan(const GradPlan &plan, const GradKernelArgs &args);

}  // namespace openaclnn::cross_entropy

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_GRAD_PLAN_H_
