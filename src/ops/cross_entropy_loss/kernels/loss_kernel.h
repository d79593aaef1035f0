// The contract between the cross-entropy forward's plan and its kernels.
//
// Phase 2 of aclnnCrossEntropyLoss runs three steps (loss_rows.cpp holds the first and the last):
//   1. prologue, serial O(N): reads each row's target, classifies the row (counted, ignored, out of range) and
//      gathers the target's logit x[i][t_i] into the row table (before step 2, which may overwrite it in place);
//   2. the kernel, parallel over rows: for every row computes lse_i = log(sum_j exp(x_ij)), writes
//      logProb[i][j] = x_ij - lse_i, and, when label smoothing needs it, sum_j w_j * logProb[i][j];
//   3. epilogue, serial O(N) in double and a fixed order: per-row losses, the reductions, lossOut, zlossOut and
//      lseForZlossOut, and the out-of-range report.
// A kernel reads the input row, writes the logProb row and its own entry of the row table; it allocates nothing
// and reports nothing. Everything it needs was checked in phase 1.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_LOSS_KERNELS_LOSS_KERNEL_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_LOSS_KERNELS_LOSS_KERNEL_H_

#include <cstdint>

#include "acl/acl_base.h"

namespace openaclnn::cross_entropy_loss {

enum LossRowKind : int32_t {
    kLossRowCounted = 0,      // target in [0, C): contributes to the loss and to the mean's denominators
    kLossRowIgnored = 1,      // target == ignoreIndex: loss 0, left out of the denominators
    kLossRowOutOfRange = 2,   // target outside [0, C) and not ignoreIndex: loss NaN, reported at sync
};

// One row of the workspace table (40 bytes, so the workspace is N * 40 bytes plus alignment).
struct LossRowStats {
    double lse;                    // kernel: log(sum_j exp(x_ij)); NaN when the row holds NaN or +inf
    double weighted_log_prob_sum;  // kernel, only with smoothing: sum_j w_j * logProb_ij (w_j = 1 without weight)
    double target_logit;           // prologue: x[i][t_i] for a counted row, else 0
    double target_weight;          // prologue: w[t_i] (1 without weight) for a counted row, else 0
    int32_t kind;                  // prologue: LossRowKind
    int32_t reserved;
};
static_assert(sizeof(LossRowStats) == 40, "row table layout");

// Everything a kernel reads and writes. Pointers already include the view offsets; strides are in elements.
struct LossKernelArgs {
    int64_t n;
    int64_t c;
    aclDataType dtype;  // of input and logProb: ACL_FLOAT, ACL_FLOAT16 or ACL_BF16
    const void *input;
    int64_t input_row_stride;
    int64_t input_col_stride;
    void *log_prob;  // may be input itself (same layout): each element is read before it is written
    int64_t log_prob_row_stride;
    int64_t log_prob_col_stride;
    bool smoothing;       // compute weighted_log_prob_sum
    const float *weight;  // nullptr: all ones; read only when smoothing
    int64_t weight_stride;
    LossRowStats *rows;   // n entries; the kernel writes lse (and weighted_log_prob_sum) of rows it owns
    bool stream_stores;   // hint: the logProb output is far larger than the caches; non-temporal stores pay
};

// Rows [row_begin, row_end), every column.
using LossKernelFn = void (*)(const LossKernelArgs &args, int64_t row_begin, int64_t row_end);

// One entry of the registry (loss_registry.cpp), walked in order: the first entry whose ISA the CPU has, within
// OPENACLNN_MAX_ISA, and whose `supports` accepts the arguments runs. The reference kernel, last, supports all.
struct LossKernelInfo {
    const char *name;  // "reference", "hwy:AVX3", ...
    int isa_rank;      // 0 scalar, 1 sse4, 2 avx2, 3 avx512 (compared with OPENACLNN_MAX_ISA)
    bool (*supports)(const LossKernelArgs &args);
    LossKernelFn run;
};

// The reference kernel: plain loops over any strides, all arithmetic in double, each output rounded once.
void ReferenceLossKernel(const LossKernelArgs &args, int64_t row_begin, int64_t row_end);

// The Highway kernels compiled into this build for the targets this CPU supports, best first (loss_hwy.cpp).
int HighwayLossKernels(const LossKernelInfo **out, int capacity);

// Every kernel this CPU can run, best first, the reference last (for tests and benchmarks).
int AvailableLossKernels(const LossKernelInfo **out, int capacity);

// Picks the kernel for args: honours OPENACLNN_MAX_ISA and logs the choice at OPENACLNN_LOG=info.
const LossKernelInfo &SelectLossKernel(const LossKernelArgs &args);

}  // namespace openaclnn::cross_entropy_loss

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_LOSS_KERNELS_LOSS_KERNEL_H_
