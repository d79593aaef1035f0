// How the forward's kernel pass is split across threads ("tiling"): a pure function of the problem and the
// machine, decided in phase 1 and copied into each queued task.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_LOSS_LOSS_PLAN_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_LOSS_LOSS_PLAN_H_

#include <cstdint>

#include "kernels/loss_kernel.h"

namespace openaclnn::cross_entropy_loss {

struct LossPlan {
    const LossKernelInfo *kernel;
    int threads;         // 1 runs the kernel on the stream's own thread, no parallel region
    bool stream_stores;  // non-temporal stores for the logProb output (fp32, far larger than the caches)
    bool split_rows;     // fewer rows than threads: all threads share each row, one row after the other
};

// max_threads: OPENACLNN_NUM_THREADS or the CPUs available. The threads take chunks of consecutive rows from a shared
// counter (RunLossPlan); a row is computed whole by one thread. With fewer (contiguous) rows than threads and rows of
// at least two pieces (LossPieceColumns), the threads share each row's pieces instead (split_rows). Either way no
// output depends on the number of threads or on who computes what.
LossPlan MakeLossPlan(const LossKernelArgs &args, int max_threads);

// The same with a given kernel (tests and benchmarks).
LossPlan MakeLossPlan(const LossKernelArgs &args, int max_threads, const LossKernelInfo &kernel);

// Runs the kernel over every row according to the plan.
void RunLossPlan(const LossPlan &plan, const LossKernelArgs &args);

}  // namespace openaclnn::cross_entropy_loss

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_LOSS_LOSS_PLAN_H_
