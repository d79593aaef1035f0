#include "grad_plan.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

#include "kernels/grad_hwy_shared.h"
#include "ops/common/vector_state.h"

namespace openaclnn::cross_entropy {
namespace {

// Below this many elements per thread a parallel region costs more than it saves: waking a thread costs a few
// microseconds, and 32768 elements stream in about 10 (fp32, two cores sharing about 20 GB/s).
constexpr int64_t kMinElementsPerThread = 1 << 15;

// From how many rows the plan's threads share the prologue (RunGradPlan): below, 1 x 152064 took 1.15-1.47x the time
// with it (two barriers then; the rows' work is one row, a barrier's may be a thread wake-up), while 16384 x 10 took
// 0.8x. Rechecked once streams ran on the synchronising thread (the pool's threads awake between calls): from 1024
// rows, 4096 x 10 took 1.4x the time and 2048 x 32 0.8x.
constexpr int64_t kMinSharedPrologueRows = 8192;

// From how many weights the plan's threads share the pass over them (Collect) with fewer rows than that, at the cost
// of a second barrier: its O(C) work ran on the calling thread while the others waited.
constexpr int64_t kMinSharedWeightColumns = 1 << 16;

}  // namespace

GradPlan MakeGradPlan(const GradKernelArgs &args, int max_threads) {
    GradPlan plan{&SelectGradKernel(args), 1, 1, 1};
    const int64_t elements = args.n * args.c;
    if (elements <= 0 || max_threads <= 1) return plan;
    const int64_t useful = std::max<int64_t>(1, elements / kMinElementsPerThread);
    plan.threads = static_cast<int>(std::min<int64_t>(max_threads, useful));
    plan.row_blocks = std::min<int64_t>(args.n, plan.threads);
    plan.col_blocks = (plan.threads + plan.row_blocks - 1) / plan.row_blocks;
    return plan;
}

int PlanTiles(const GradPlan &plan, int64_t n, int64_t c, int k, GradTile tiles[3]) {
    const int64_t total = n * c;
    // Element ranges in exact integer arithmetic (n * c * k fits: n * c < 2^62 / threads in practice).
    const int64_t begin = total / plan.threads * k + std::min<int64_t>(k, total % plan.threads);
    const int64_t end = begin + total / plan.threads + (k < total % plan.threads ? 1 : 0);
    if (begin >= end) return 0;
    int count = 0;
    int64_t row = begin / c;
    int64_t col = begin % c;
    const int64_t last_row = (end - 1) / c;
    const int64_t last_col_end = (end - 1) % c + 1;
    if (row == last_row) {
        tiles[count++] = GradTile{row, row + 1, col, last_col_end};
        return count;
    }
    if (col != 0) {
        tiles[count++] = GradTile{row, row + 1, col, c};
        ++row;
    }
    if (last_col_end == c) {
        tiles[count++] = GradTile{row, last_row + 1, 0, c};
    } else {
        if (row < last_row) tiles[count++] = GradTile{row, last_row, 0, c};
        tiles[count++] = GradTile{last_row, last_row + 1, 0, last_col_end};
    }
    return count;
}

namespace {

void RunGradPlanParts(const GradPlan &plan, const GradKernelArgs &args, GradPrologue *prologue) {
    // The threads share the prologue from kMinSharedPrologueRows rows, or its pass over the weights alone from
    // kMinSharedWeightColumns weights; else its barriers cost more than they save (each may wake a sleeping thread),
    // and the calling thread runs it alone first.
    const bool many_rows = args.n >= kMinSharedPrologueRows;
    const bool share_weights =
        prologue != nullptr && plan.threads > 1 && !many_rows && prologue->WeightColumns() >= kMinSharedWeightColumns;
    const bool prepare_after = share_weights && prologue->PrepareNeedsWeights();
    GradKernelArgs run_args = args;
    GradWeightTraits traits;
    if (prologue != nullptr && (plan.threads <= 1 || !many_rows) && !prepare_after) {
        prologue->Collect(0, 1);
        if (!share_weights) prologue->Weigh(0, 1);
        prologue->Prepare(0, 0, args.n);
        if (!share_weights) {
            traits = prologue->WeightTraits();
            run_args.weight_traits = &traits;
            prologue = nullptr;
        }
    }
    if (plan.threads <= 1) {
        plan.kernel->run(run_args, GradTile{0, args.n, 0, args.c});
        ClearUpperVectorState();  // for the baseline code that follows on this thread (vector_state.h)
        return;
    }
#pragma omp parallel num_threads(plan.threads)
    {
        // The team may be smaller than asked (nested regions, OMP_THREAD_LIMIT): every part still runs once.
        const int team = omp_get_num_threads();
        const int first = omp_get_thread_num();
        GradKernelArgs local = run_args;
        GradWeightTraits local_traits;
        const auto tiles = [&] {
            for (int k = first; k < plan.threads; k += team) {
                GradTile parts[3];
                const int count = PlanTiles(plan, args.n, args.c, k, parts);
                for (int t = 0; t < count; ++t) plan.kernel->run(local, parts[t]);
            }
        };
        if (prologue != nullptr) {
            for (int k = first; k < plan.threads; k += team) {
                if (!share_weights || prepare_after) prologue->Collect(k, plan.threads);
                prologue->Weigh(k, plan.threads);
            }
#pragma omp barrier
            local_traits = prologue->WeightTraits();
            local.weight_traits = &local_traits;
            if (many_rows) {
                // Part k takes whole rows, [N k / threads, N (k + 1) / threads) (at least 8192 / threads each: a row
                // more or less is no imbalance), prepares their coefficients and runs the kernel on them: no barrier
                // between.
                for (int k = first; k < plan.threads; k += team) {
                    const int64_t row_begin = args.n * k / plan.threads;
                    const int64_t row_end = args.n * (k + 1) / plan.threads;
                    prologue->Prepare(k, row_begin, row_end);
                    plan.kernel->run(local, GradTile{row_begin, row_end, 0, args.c});
                }
            } else if (prepare_after) {
#pragma omp single
                prologue->Prepare(0, 0, args.n);
                tiles();  // (after the single's barrier)
            } else {
                tiles();
            }
        } else {
            tiles();
        }
        ClearUpperVectorState();
    }
}

}  // namespace

void RunGradPlan(const GradPlan &plan, const GradKernelArgs &args, GradPrologue *prologue) {
    // A large call whose store kind is measured runs the chooser's kind and reports its time
    // (StoreKindChooser); any other call runs as it is.
    const StoreKindCall stores = BeginStoreKindCall(args);
    if (!stores.measured) {
        RunGradPlanParts(plan, args, prologue);
        return;
    }
    const auto start = std::chrono::steady_clock::now();
    GradKernelArgs call_args = args;
    call_args.stream_measured = stores.trial.stream;
    RunGradPlanParts(plan, call_args, prologue);
    EndStoreKindCall(stores, args, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace openaclnn::cross_entropy
