// The tolerance table: how far an operator output may be from the float64 reference, derived from the dtype.
//
// The contract (DESIGN.md section 2): all arithmetic in fp32 or wider, then one round-to-nearest-even at the
// store. So an element may carry
//   compute error  <= k * u32 * magnitude,  u32 = 2^-24, magnitude = sum of |terms| added into the element
//                     (|exp(x) * A| + |B * w| + |G|), k = 16 + 2 * log2(max(N, C) + 1): a few ulps for exp and
//                     the products, and room for fp32 pairwise sums over rows (the mean denominator) or classes
//                     (sum of the weights);
//   underflow      <= 2^-126 * row_scale: exp(x) in fp32 is subnormal below x = -87;
//   store rounding <= u_out * |value| + denorm_min_out / 2, u_out = eps_out / 2 for FLOAT;
//                     for FLOAT16 and BF16 one whole ulp, eps_out * |value| + denorm_min_out (issue 3: the SIMD
//                     kernels' short exps give 16-bit results correctly rounded in at least 99.5% of elements and
//                     never more than one unit in the last place off; tests/kernels checks the 99.5%).
#ifndef OPENACLNN_TESTS_COMMON_TOLERANCE_H_
#define OPENACLNN_TESTS_COMMON_TOLERANCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "float_formats.h"

namespace openaclnn::test {

inline double ComputeErrorUlps(int64_t n, int64_t c) {
    return 16.0 + 2.0 * std::log2(static_cast<double>(std::max<int64_t>(n, c)) + 1.0);
}

inline double GradTolerance(aclDataType out_dtype, double reference, double magnitude, double row_scale, int64_t n,
                            int64_t c) {
    const double u32 = std::ldexp(1.0, -24);
    const double compute = ComputeErrorUlps(n, c) * u32 * magnitude + std::ldexp(1.0, -126) * row_scale;
    const FloatFormat f = FormatOf(out_dtype);
    const double ulps = out_dtype == ACL_FLOAT ? 0.5 : 1.0;
    const double store = ulps * (f.epsilon * (std::fabs(reference) + compute) + f.denorm_min);
    return compute + store;
}

}  // namespace openaclnn::test

#endif  // OPENACLNN_TESTS_COMMON_TOLERANCE_H_
