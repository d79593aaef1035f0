// The reference gradient kernel: plain loops, any strides, every element computed in double and rounded once.
//
// exp(x) for a float x is computed in double by ExpDouble (common/exp_double.h: under one ulp of double, the same bits
// as the SIMD kernels' target elements and double-path elements); the products and differences add a few ulps of
// double, so the value before the final rounding is within ~2^-50 relative of the exact one and the stored result is
// the correctly rounded one except in rare near-tie cases. Built with -ffp-contract=off (sources.cmake).
#include <cmath>

#include "common/exp_double.h"
#include "ops/common/element_access.h"
#include "kernels/grad_kernel.h"

namespace openaclnn::cross_entropy {
namespace {

template <aclDataType kType>
void ReferenceTile(const GradKernelArgs &args, const GradTile &tile) {
    for (int64_t i = tile.row_begin; i < tile.row_end; ++i) {
        const GradRowCoefficients &row = args.rows[i];
        const int64_t in_row = i * args.log_prob_row_stride;
        const int64_t out_row = i * args.out_row_stride;
        for (int64_t j = tile.col_begin; j < tile.col_end; ++j) {
            const int64_t out_index = out_row + j * args.out_col_stride;
            if (row.kind == kRowZero) {
                StoreElement<kType>(args.out, out_index, 0.0);
                continue;
            }
            // Read before write: out may be logProb itself (in place), element for element.
            const double x = LoadElement<kType>(args.log_prob, in_row + j * args.log_prob_col_stride);
            const double w = args.weight ? static_cast<double>(args.weight[j * args.weight_stride]) : 1.0;
            double value = ExpDouble(x) * row.a - row.b * w;
            if (j == row.col) value -= row.g;
            StoreElement<kType>(args.out, out_index, value);
        }
    }
}

}  // namespace

void ReferenceGradKernel(const GradKernelArgs &args, const GradTile &tile) {
    switch (args.dtype) {
        case ACL_FLOAT:
            ReferenceTile<ACL_FLOAT>(args, tile);
            break;
        case ACL_FLOAT16:
            ReferenceTile<ACL_FLOAT16>(args, tile);
            break;
        default:
            ReferenceTile<ACL_BF16>(args, tile);
            break;
    }
}

}  // namespace openaclnn::cross_entropy
