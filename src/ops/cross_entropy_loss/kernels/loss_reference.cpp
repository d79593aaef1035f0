// The reference forward kernel: plain loops over any strides, all arithmetic in double, each output rounded once.
//
// Per row: m = max_j x_j, s = sum_j exp(x_j - m), lse = m + log(s). Every x_j - m is exact in double (both are
// floats), exp and log add < 1 ulp of double each and the sum of C positive terms < C ulps, so lse is within
// ~C * 2^-53 relative of the exact value and logProb = x - lse, rounded once to the output type, is the correctly
// rounded result except in near-tie cases far below any tolerance.
//
// Special values follow the literal formula (as PyTorch's log_softmax): a NaN or +inf in the row makes lse NaN
// (x - m is NaN for the +inf itself); a row of all -inf has m = -inf and every x - m NaN, so lse is NaN too; an
// empty row (C == 0) has lse = log(0) = -inf.
#include <cmath>
#include <limits>

#include "ops/common/element_access.h"
#include "kernels/loss_kernel.h"

namespace openaclnn::cross_entropy_loss {
namespace {

template <aclDataType kType>
double RowLogSumExp(const LossKernelArgs &args, int64_t row) {
    if (args.c == 0) return -std::numeric_limits<double>::infinity();
    const int64_t base = row * args.input_row_stride;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < args.c; ++j) {
        const double x = LoadElement<kType>(args.input, base + j * args.input_col_stride);
        if (std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
        m = std::max(m, x);
    }
    double s = 0.0;
    for (int64_t j = 0; j < args.c; ++j) s += std::exp(LoadElement<kType>(args.input, base + j * args.input_col_stride) - m);
    return m + std::log(s);
}

template <aclDataType kType>
void ReferenceRows(const LossKernelArgs &args, int64_t row_begin, int64_t row_end) {
    for (int64_t i = row_begin; i < row_end; ++i) {
        const double lse = RowLogSumExp<kType>(args, i);
        const int64_t in_row = i * args.input_row_stride;
        const int64_t out_row = i * args.log_prob_row_stride;
        double weighted_sum = 0.0;
        for (int64_t j = 0; j < args.c; ++j) {
            // Read before write: logProb may be the input itself, element for element.
            const double log_prob = LoadElement<kType>(args.input, in_row + j * args.input_col_stride) - lse;
            if (args.smoothing) {
                const double w = args.weight ? static_cast<double>(args.weight[j * args.weight_stride]) : 1.0;
                weighted_sum += w * log_prob;
            }
            StoreElement<kType>(args.log_prob, out_row + j * args.log_prob_col_stride, log_prob);
        }
        args.rows[i].lse = lse;
        args.rows[i].weighted_log_prob_sum = weighted_sum;
    }
}

}  // namespace

void ReferenceLossKernel(const LossKernelArgs &args, int64_t row_begin, int64_t row_end) {
    switch (args.dtype) {
        case ACL_FLOAT:
            ReferenceRows<ACL_FLOAT>(args, row_begin, row_end);
            break;
        case ACL_FLOAT16:
            ReferenceRows<ACL_FLOAT16>(args, row_begin, row_end);
            break;
        default:
            ReferenceRows<ACL_BF16>(args, row_begin, row_end);
            break;
    }
}

}  // namespace openaclnn::cross_entropy_loss
