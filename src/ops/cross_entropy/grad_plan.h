// How a cross-entropy gradient is split across threads ("tiling"): a pure function of the problem and the
// machine, decided in phase 1 and copied into each queued task.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_GRAD_PLAN_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_GRAD_PLAN_H_

#include <cstdint>

#include "kernels/grad_kernel.h"

namespace openaclnn::cross_entropy {

// The output, seen as one sequence of N * C elements in row-major order, is cut into `threads` equal contiguous
// ranges, one per thread (OpenMP, static). A range covers up to three tiles: the end of one row, whole rows, the
// start of another. With many rows this is the static row partition; with few long rows (N = 1, C = 152064) the
// rows are split along their columns, and the threads stay balanced to one element whatever N and C are.
struct GradPlan {
    const GradKernelInfo *kernel;
    int threads;  // threads of the kernel pass; 1 runs it on the stream's own thread, no parallel region
    // For logs only, the shape of the partition: threads == row_blocks with whole rows (N >= threads), else N row
    // blocks of col_blocks column ranges each (rows split along their columns).
    int64_t row_blocks;
    int64_t col_blocks;
};

// max_threads: OPENACLNN_NUM_THREADS or the CPUs available. The partition is static and deterministic; each
// output element's value does not depend on it.
GradPlan MakeGradPlan(const GradKernelArgs &args, int max_threads);

// The tiles of thread k in [0, plan.threads): writes up to 3 into tiles and returns how many.
int PlanTiles(const GradPlan &plan, int64_t n, int64_t c, int k, GradTile tiles[3]);

// What phase 2 does before the kernel, shared by the plan's threads (the coefficients, GradRowsBuilder): Collect (the
// rows' first pass) and Weigh (the pass over the weights) for every part k in [0, parts), then, once all of them have
// returned, Prepare(k, row_begin, row_end) for every part, each followed by the kernel on exactly those rows (whole
// rows, N / parts each, instead of PlanTiles' ranges): parts is plan.threads and each part may run on any thread.
// Together the parts cover every row once. With few rows but many weights (WeightColumns) the parts share Weigh
// alone, and the kernel runs as planned: Collect(0, 1) and Prepare(0, 0, N) on the calling thread first where Prepare
// does not read what Weigh finds (PrepareNeedsWeights), else on one thread after Weigh. With few of both (or one
// thread) the calling thread runs every step first. The kernel gets WeightTraits() (GradKernelArgs::weight_traits).
class GradPrologue {
public:
    virtual ~GradPrologue() = default;
    virtual void Collect(int part, int parts) = 0;
    virtual void Weigh(int part, int parts) = 0;
    virtual void Prepare(int part, int64_t row_begin, int64_t row_end) = 0;
    // Whether Prepare reads what Weigh finds (W: label smoothing with weights).
    virtual bool PrepareNeedsWeights() const = 0;
    // The traits of all C weights, once every Weigh has returned.
    virtual GradWeightTraits WeightTraits() const = 0;
    // How many weights Weigh reads (C with weights, else 0).
    virtual int64_t WeightColumns() const = 0;
};

// Runs the kernel over the whole output according to the plan, after the prologue (if any), in one parallel region.
// A large call's store kind is chosen by measurement (StoreKindChooser, kernels/grad_hwy_shared.h): the
// call is timed, which changes only speed.
void RunGradPlan(const GradPlan &plan, const GradKernelArgs &args, GradPrologue *prologue = nullptr);

}  // namespace openaclnn::cross_entropy

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_GRAD_PLAN_H_
