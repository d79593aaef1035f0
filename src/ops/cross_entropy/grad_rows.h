// The prologue of phase 2: per-row coefficients of the gradient (see kernels/grad_kernel.h).
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_GRAD_ROWS_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_GRAD_ROWS_H_

#include "grad_problem.h"
#include "kernels/grad_kernel.h"
#include "runtime/runtime.h"

namespace openaclnn::cross_entropy {

// Fills rows[0, n) from gradLoss, target, weight and the z-loss inputs. Serial and in a fixed order, so the
// result does not depend on the thread count. A target outside [0, C) that is not ignoreIndex is never used as an
// index: its row becomes NaN and the first such row is recorded on the stream (507035).
void ComputeGradRows(const CrossEntropyGradProblem &problem, GradRowCoefficients *rows, TaskContext &context);

}  // namespace openaclnn::cross_entropy

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_GRAD_ROWS_H_
