// The prologue of phase 2: per-row coefficients of the gradient (see kernels/grad_kernel.h).
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_GRAD_ROWS_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_GRAD_ROWS_H_

#include <cstdint>

#include "grad_problem.h"
#include "kernels/grad_kernel.h"
#include "runtime/runtime.h"

namespace openaclnn::cross_entropy {

// What pass 1 learns from one chunk of rows.
struct GradRowChunkTotals {
    double weight_total = 0.0;  // sum of w[t_i] over the chunk's valid, unmasked rows, in row order
    int64_t unmasked = 0;       // how many such rows
    int64_t bad_rows = 0;       // rows whose target is outside [0, C) and not ignoreIndex
    int64_t first_bad_row = 0;  // the first of them, and its target (when bad_rows != 0)
    int64_t first_bad_target = 0;
};

// The scalars every row's coefficients need, from the totals of pass 1 and the weights (Finish).
struct GradRowScales {
    bool ce_vanishes = false;  // a mean over zero total weight: the cross-entropy terms are dropped
    double nll_scale = 1.0;    // 1 / D for a mean
    double zloss_scale = 1.0;  // 1 / K for a mean
    double weight_sum = 0.0;   // W = sum_j w_j (C without weights)
    double max_abs_weight = 1.0;
};

// The coefficients of rows[0, N), made in two passes that threads may share while every bit of the result stays
// independent of how many do:
//   pass 1 (Collect, one chunk at a time): targets checked, and each chunk's share of D = sum_i m_i w[t_i] and of
//     K = sum_i m_i. The rows fall into Chunks() chunks of consecutive rows, their number and length a function of N
//     alone;
//   Finish: D as the chunks' shares added in chunk order (each a sum in row order), K, and the per-call scalars;
//     any thread may call it, and each gets the same scalars;
//   pass 2 (Fill, any ranges of rows): each row's coefficients, a function of that row's inputs and the scalars.
// Pass 1 writes only the builder's totals; pass 2 writes only rows[begin, end). A target outside [0, C) that is not
// ignoreIndex is never used as an index: its row becomes NaN and ReportBadTargets records the first such row on the
// stream (507035).
class GradRowsBuilder {
public:
    static constexpr int64_t kMinChunkRows = 1024;
    static constexpr int64_t kMaxChunks = 256;

    GradRowsBuilder(const CrossEntropyGradProblem &problem, GradRowCoefficients *rows);

    int64_t Chunks() const { return chunks_; }
    // Pass 1 on chunk k in [0, Chunks()): each chunk once, on any thread, in any order.
    void Collect(int64_t k);
    // The pass over the weights, where there are weights: their traits (for the kernel, WeightTraits) and, with
    // label smoothing, W and max_j |w_j| for the rows. O(C), in kWeightSlices slices (grad_kernel.h): part k of
    // `parts` weighs its share of them, each part once, on any thread, before Finish. weigh: a kernel's vector code
    // for contiguous weights (GradKernelInfo::weigh), or null; the same bits.
    void Weigh(int part, int parts, GradWeighFn weigh = nullptr);
    // The traits of all C weights, after every Weigh (the defaults without weights).
    GradWeightTraits WeightTraits() const;
    // After every Collect and Weigh.
    GradRowScales Finish() const;
    // Pass 2 on rows [begin, end).
    void Fill(const GradRowScales &scales, int64_t begin, int64_t end) const;
    // After every Collect: records the first bad target, if any, on context.
    void ReportBadTargets(TaskContext &context) const;

private:
    const CrossEntropyGradProblem &p_;
    GradRowCoefficients *rows_;
    int64_t chunk_rows_;
    int64_t chunks_;
    double weight_part_[kWeightSumParts] = {};       // W's parts (kWeightSumParts, grad_kernel.h)
    GradWeightTraits weight_traits_[kWeightSlices];  // of each part's slices, at its first slice
    GradRowChunkTotals totals_[kMaxChunks];
};

// Every step of GradRowsBuilder on the calling thread: fills rows[0, n) and reports a bad target on context.
void ComputeGradRows(const CrossEntropyGradProblem &problem, GradRowCoefficients *rows, TaskContext &context);

}  // namespace openaclnn::cross_entropy

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_GRAD_ROWS_H_
