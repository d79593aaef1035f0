#include "loss_plan.h"

#include <omp.h>

#include <algorithm>
#include <atomic>

#include "ops/common/vector_state.h"

namespace openaclnn::cross_entropy_loss {
namespace {

// Below this many elements per thread a parallel region costs more than it saves (a wake-up is a few
// microseconds; an element a fraction of a nanosecond).
constexpr int64_t kMinElementsPerThread = 1 << 16;
// Non-temporal stores pay once the output is well past what the caches hold (and would evict the input rows the
// second pass reads); below that, ordinary stores leave logProb in cache for whoever reads it next.
constexpr int64_t kStreamBytes = int64_t{64} << 20;
// Rows are handed to threads in chunks of about this many elements (see RunLossPlan).
constexpr int64_t kChunkElements = int64_t{1} << 19;

}  // namespace

LossPlan MakeLossPlan(const LossKernelArgs &args, int max_threads, const LossKernelInfo &kernel) {
    LossPlan plan{&kernel, 1, false, false};
    const int64_t elements = args.n * args.c;
    plan.stream_stores = args.dtype == ACL_FLOAT && args.log_prob_col_stride == 1 &&
                         elements * static_cast<int64_t>(sizeof(float)) >= kStreamBytes;
    if (elements <= 0 || max_threads <= 1) return plan;
    const int64_t useful = std::max<int64_t>(1, elements / kMinElementsPerThread);
    plan.threads = static_cast<int>(std::min<int64_t>({max_threads, useful, args.n}));
    const int64_t pieces = LossPieceCount(args.c);
    if (args.n < max_threads && kernel.split_row != nullptr && pieces >= 2 && LossRowsContiguous(args)) {
        const int shared = static_cast<int>(std::min<int64_t>({max_threads, useful, pieces}));
        if (shared > plan.threads) {
            plan.threads = shared;
            plan.split_rows = true;
        }
    }
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
        ClearUpperVectorState();  // for the epilogue, built for the baseline ISA (vector_state.h)
        return;
    }
    if (plan.split_rows) {
        LossSplitScratch scratch;
        LossSpinBarrier between_rows(plan.threads);
#pragma omp parallel num_threads(plan.threads)
        {
            // Any team size works within a row; the barrier between rows counts plan.threads, so a smaller team
            // (an OpenMP thread limit) leaves the rows to its first thread.
            const bool full = omp_get_num_threads() == plan.threads;
            if (full) {
                for (int64_t i = 0; i < args.n; ++i) {
                    plan.kernel->split_row(run_args, i, scratch);
                    if (i + 1 < args.n) between_rows.Wait([&] { scratch.Reset(); });
                }
            } else if (omp_get_thread_num() == 0) {
                plan.kernel->run(run_args, 0, args.n);
            }
            ClearUpperVectorState();
        }
        return;
    }
    // Rows are handed out in chunks from a shared counter rather than as one fixed range per thread: on a machine
    // shared with other work a thread that gets less of its core then simply takes fewer chunks, instead of the
    // whole call waiting for it. A row is always computed whole by one thread, so no value depends on who takes
    // which chunk. A chunk is at least kChunkElements (a few hundred microseconds of work) and there are at least
    // 4 per thread.
    const int64_t per_thread = (args.n + plan.threads - 1) / plan.threads;
    const int64_t by_size = (kChunkElements + std::max<int64_t>(args.c, 1) - 1) / std::max<int64_t>(args.c, 1);
    const int64_t chunk = std::max<int64_t>(1, std::min(by_size, (per_thread + 3) / 4));
    std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(plan.threads)
    {
        for (;;) {
            const int64_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
            if (begin >= args.n) break;
            plan.kernel->run(run_args, begin, std::min(args.n, begin + chunk));
        }
        ClearUpperVectorState();
    }
}

}  // namespace openaclnn::cross_entropy_loss
