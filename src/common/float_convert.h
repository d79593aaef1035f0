// Exact conversions between the float formats openaclnn stores (fp32, IEEE fp16, bf16) and fp32/fp64.
//
// Loads (fp16/bf16 -> fp32) are exact. Stores round to nearest even exactly once: a double is first narrowed to
// float with round-to-odd (which keeps the sticky information a second rounding needs: float has 24 significant
// bits, at least two more than fp16's 11 and bf16's 8), then rounded to nearest even to the 16-bit format; that
// pair of roundings equals one correct rounding of the double. NaN stays NaN (quiet), overflow goes to infinity.
#ifndef OPENACLNN_COMMON_FLOAT_CONVERT_H_
#define OPENACLNN_COMMON_FLOAT_CONVERT_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace openaclnn {

inline uint32_t FloatBits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

inline float BitsToFloat(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

inline uint64_t DoubleBits(double d) {
    uint64_t u;
    std::memcpy(&u, &d, sizeof u);
    return u;
}

inline double BitsToDouble(uint64_t u) {
    double d;
    std::memcpy(&d, &u, sizeof d);
    return d;
}

inline float Bf16ToFloat(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN keeps its sign and becomes quiet.
inline uint16_t FloatToBf16(float f) {
    uint32_t u = FloatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

inline float HalfToFloat(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mant << 13));  // inf / NaN
    if (exp != 0) return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0) return BitsToFloat(sign);
    // Subnormal half: value = mant * 2^-24, exactly representable in float.
    const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
}

// Round to nearest even, with subnormals, overflow to infinity and quiet NaN.
inline uint16_t FloatToHalf(float f) {
    const uint32_t u = FloatBits(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x1ffu));
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: rounds to infinity
    if (abs >= 0x38800000u) {                                              // normal half range (>= 2^-14)
        const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
        return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
    }
    if (abs < 0x33000000u) return sign;  // < 2^-25: rounds to zero (2^-25 itself is a tie, goes to even 0)
    // Subnormal half: shift the full significand so that bit 0 is 2^-24, rounding to nearest even.
    const uint32_t exp = abs >> 23;
    const uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14..24 for exp in [102, 112]
    const uint32_t half_ulp = 1u << (shift - 1);
    uint32_t result = significand >> shift;
    const uint32_t remainder = significand & ((1u << shift) - 1u);
    if (remainder > half_ulp || (remainder == half_ulp && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
}

// double -> float rounding to odd: exact values pass through; inexact ones take the neighbour whose last
// significand bit is 1. Values beyond the float range become +-FLT_MAX (odd), which still rounds to infinity in
// the 16-bit formats.
inline float DoubleToFloatRoundToOdd(double d) {
    if (std::isnan(d)) return static_cast<float>(d);
    if (std::isinf(d)) return static_cast<float>(d);
    float f = static_cast<float>(d);
    if (static_cast<double>(f) == d) return f;
    if (std::isinf(f)) f = std::copysign(std::numeric_limits<float>::max(), f);
    uint32_t bits = FloatBits(f);
    // Truncate toward zero: f is not zero here, so one less in its magnitude bits is its neighbour toward zero.
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --bits;
    return BitsToFloat(bits | 1u);
}

inline uint16_t DoubleToHalf(double d) { return FloatToHalf(DoubleToFloatRoundToOdd(d)); }
inline uint16_t DoubleToBf16(double d) { return FloatToBf16(DoubleToFloatRoundToOdd(d)); }

}  // namespace openaclnn

#endif  // OPENACLNN_COMMON_FLOAT_CONVERT_H_
