// The serial steps of phase 2 around the kernel (see kernels/loss_kernel.h): the prologue, which classifies rows
// and gathers target logits, and the epilogue, which turns the row table into the loss outputs.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_LOSS_LOSS_ROWS_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_LOSS_LOSS_ROWS_H_

#include "kernels/loss_kernel.h"
#include "loss_problem.h"
#include "runtime/runtime.h"

namespace openaclnn::cross_entropy_loss {

// Fills kind and target_logit of rows[0, n). A target outside [0, C) that is not ignoreIndex is never used as an
// index: its row is marked kLossRowOutOfRange and the first such row is recorded on the stream (507035).
void GatherLossRows(const CrossEntropyLossProblem &problem, LossRowStats *rows, TaskContext &context);

// From the completed row table: lossOut, zlossOut (when returnZloss) and lseForZlossOut (when not empty). Serial,
// in double and in row order, so the reductions do not depend on the thread count.
void FinishLoss(const CrossEntropyLossProblem &problem, const LossRowStats *rows);

}  // namespace openaclnn::cross_entropy_loss

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_LOSS_LOSS_ROWS_H_
