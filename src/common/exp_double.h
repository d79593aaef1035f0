// exp(x) in double from basic IEEE operations only: no fused multiply-add, no table, no library call. Each step is
// one correctly rounded addition, subtraction or multiplication (or an exact bit operation), so the same steps give
// the same bits in scalar code on any CPU and in the vector code of every SIMD target (the gradient kernels' ExpDouble
// over vectors, grad_hwy-inl.h, which repeats these steps). Files that use it are built with -ffp-contract=off.
//
// x = k ln2 + r with k = round(x log2(e)) and |r| <= ln2 / 2 (plus rounding): r = r_hi - r_lo from the two-part ln2
// (the high part has 32 significant bits, so k ln2_hi and r_hi = x - k ln2_hi are exact for |k| <= 1077), exp(r) as
// 1 + r_hi + (r^2 P(r) - r_lo) with P the Taylor series' 1/2! + r/3! + ... + r^11/13! (the first term left out,
// r^14/14!, is below 2^-58), the two sums carried exactly and rounded once, and 2^k applied as two exact powers of two
// (the second multiplication rounds once where the result is subnormal).
// Measured against a long double exp over float inputs (tests/kernels/grad_kernel_test.cpp, ExpDoubleIsWithinOneUlp):
// under one ulp of double (worst 0.69 ulp over 2.5 million floats, 98.7% of them correctly rounded).
#ifndef OPENACLNN_COMMON_EXP_DOUBLE_H_
#define OPENACLNN_COMMON_EXP_DOUBLE_H_

#include <cstdint>

#include "common/float_convert.h"

namespace openaclnn {
namespace exp_double {

constexpr double kLog2e = 0x1.71547652b82fep0;
constexpr double kLn2Hi = 0x1.62e42fee00000p-1;   // ln2 to 32 significant bits
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;  // ln2 - kLn2Hi (hi + lo is ln2 within 1.2e-26)
constexpr double kRound = 0x1.8p52;               // t + kRound - kRound rounds t to an integer (|t| < 2^51)
// Inputs beyond these give +inf and +0 (or the smallest subnormals' roundings) through the same steps.
constexpr double kLowest = -746.0;
constexpr double kHighest = 710.0;
// 1/n! for n = 13 down to 2 (each n! is exact in double, so each quotient is 1/n! correctly rounded).
constexpr double kTaylor[12] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
                                1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        1.0 / 2.0};

}  // namespace exp_double

inline double ExpDouble(double x) {
    using namespace exp_double;
    if (x != x) return x + x;  // NaN, quieted
    const double xc = x < kLowest ? kLowest : (x > kHighest ? kHighest : x);
    const double t = xc * kLog2e + kRound;
    const double kd = t - kRound;
    const int64_t k = static_cast<int64_t>(DoubleBits(t) - DoubleBits(kRound));  // kd as an integer
    const double r_hi = xc - kd * kLn2Hi;                                        // exact
    const double r_lo = kd * kLn2Lo;                                             // r = r_hi - r_lo
    const double r = r_hi - r_lo;
    double p = kTaylor[0];
    for (int i = 1; i < 12; ++i) p = p * r + kTaylor[i];
    // exp(r) = 1 + r_hi + small, small = r^2 P(r) - r_lo; the sums carried exactly (TwoSum, then Fast2Sum: |s_hi| <=
    // 0.36 < 1) and rounded once at the end.
    const double small = (r * r) * p - r_lo;
    const double s_hi = r_hi + small;
    const double s_b = s_hi - r_hi;
    const double s_lo = (r_hi - (s_hi - s_b)) + (small - s_b);
    const double m_hi = 1.0 + s_hi;
    const double m_lo = (1.0 - m_hi) + s_hi;
    const double m = m_hi + (m_lo + s_lo);
    const int64_t k1 = k >> 1;  // floor(k / 2): k1 and k - k1 within [-539, 512]
    const int64_t k2 = k - k1;
    const double scale1 = BitsToDouble(static_cast<uint64_t>(k1 + 1023) << 52);
    const double scale2 = BitsToDouble(static_cast<uint64_t>(k2 + 1023) << 52);
    return (m * scale1) * scale2;
}

}  // namespace openaclnn

#endif  // OPENACLNN_COMMON_EXP_DOUBLE_H_
