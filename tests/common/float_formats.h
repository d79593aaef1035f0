// Test-side encodings of the float formats the operator stores (fp32, IEEE fp16, bf16), written independently of
// src/common/float_convert.h so that the tests do not share a bug with the library.
//
// Rounding works on the value, not on the bits: a double is scaled by a power of two (exact) so that its last kept
// significand bit has weight 1, rounded with std::nearbyint (round-to-nearest-even under the default rounding mode)
// and scaled back. That is one correct rounding of the double, subnormals and overflow included.
#ifndef OPENACLNN_TESTS_COMMON_FLOAT_FORMATS_H_
#define OPENACLNN_TESTS_COMMON_FLOAT_FORMATS_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "acl/acl_base.h"

namespace openaclnn::test {

struct FloatFormat {
    int precision;      // significand bits including the implicit one
    int min_exponent;   // exponent of the smallest normal number
    double max_finite;  // largest finite value
    double epsilon;     // 2^(1 - precision)
    double denorm_min;  // smallest positive subnormal
};

inline FloatFormat FormatOf(aclDataType dtype) {
    switch (dtype) {
        case ACL_FLOAT16:
            return {11, -14, 65504.0, std::ldexp(1.0, -10), std::ldexp(1.0, -24)};
        case ACL_BF16:
            return {8, -126, std::ldexp(255.0, 120), std::ldexp(1.0, -7), std::ldexp(1.0, -133)};
        case ACL_DOUBLE:
            return {53, -1022, std::numeric_limits<double>::max(), std::ldexp(1.0, -52), std::ldexp(1.0, -1074)};
        default:  // ACL_FLOAT
            return {24, -126, static_cast<double>(std::numeric_limits<float>::max()), std::ldexp(1.0, -23),
                    std::ldexp(1.0, -149)};
    }
}

// Rounds v to the nearest value of the format (ties to even); beyond the range, +-infinity; NaN stays NaN.
inline double RoundToFormat(double v, const FloatFormat &f) {
    if (std::isnan(v) || std::isinf(v) || v == 0.0) return v;
    const double a = std::fabs(v);
    int e = 0;
    std::frexp(a, &e);  // a = m * 2^e with m in [0.5, 1): leading bit has weight 2^(e-1)
    const int lead = e - 1 < f.min_exponent ? f.min_exponent : e - 1;
    const int shift = f.precision - 1 - lead;  // weight of the last kept bit is 2^-shift
    const double q = std::nearbyint(std::ldexp(a, shift));
    double r = std::ldexp(q, -shift);
    if (r > f.max_finite) r = std::numeric_limits<double>::infinity();
    return std::copysign(r, v);
}

inline uint32_t FloatToBits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}
inline float BitsToFloat32(uint32_t u) {
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

// Bits of a value already representable in fp16 (or inf/NaN).
inline uint16_t EncodeHalfExact(double r) {
    const uint16_t sign = std::signbit(r) ? 0x8000u : 0u;
    const double a = std::fabs(r);
    if (std::isnan(r)) return static_cast<uint16_t>(sign | 0x7e00u);
    if (std::isinf(r)) return static_cast<uint16_t>(sign | 0x7c00u);
    if (a < std::ldexp(1.0, -14)) return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(a, 24)));
    int e = 0;
    std::frexp(a, &e);
    const int exponent = e - 1;
    const uint16_t mant = static_cast<uint16_t>(std::ldexp(a, 10 - exponent) - 1024.0);
    return static_cast<uint16_t>(sign | ((exponent + 15) << 10) | mant);
}

inline double DecodeHalf(uint16_t h) {
    const double sign = (h & 0x8000u) ? -1.0 : 1.0;
    const int exp = (h >> 10) & 0x1f;
    const int mant = h & 0x3ff;
    if (exp == 0x1f) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
    if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), -24);
    return sign * std::ldexp(static_cast<double>(1024 + mant), exp - 25);
}

inline double DecodeBf16(uint16_t b) { return BitsToFloat32(static_cast<uint32_t>(b) << 16); }

inline uint16_t DoubleToHalfBits(double v) { return EncodeHalfExact(RoundToFormat(v, FormatOf(ACL_FLOAT16))); }
inline uint16_t DoubleToBf16Bits(double v) {
    if (std::isnan(v)) return std::signbit(v) ? 0xffc0u : 0x7fc0u;
    const float r = static_cast<float>(RoundToFormat(v, FormatOf(ACL_BF16)));  // exact: r is a bf16 value
    return static_cast<uint16_t>(FloatToBits(r) >> 16);
}

inline size_t ElementSize(aclDataType dtype) {
    switch (dtype) {
        case ACL_FLOAT16:
        case ACL_BF16:
            return 2;
        case ACL_INT64:
        case ACL_DOUBLE:
            return 8;
        default:
            return 4;
    }
}

// Reads element `index` of a buffer of dtype (fp32/fp16/bf16/double) as a double.
inline double LoadAsDouble(aclDataType dtype, const void *base, int64_t index) {
    switch (dtype) {
        case ACL_FLOAT16:
            return DecodeHalf(static_cast<const uint16_t *>(base)[index]);
        case ACL_BF16:
            return DecodeBf16(static_cast<const uint16_t *>(base)[index]);
        case ACL_DOUBLE:
            return static_cast<const double *>(base)[index];
        default:
            return static_cast<const float *>(base)[index];
    }
}

// Stores v rounded once to nearest even.
inline void StoreFromDouble(aclDataType dtype, void *base, int64_t index, double v) {
    switch (dtype) {
        case ACL_FLOAT16:
            static_cast<uint16_t *>(base)[index] = DoubleToHalfBits(v);
            break;
        case ACL_BF16:
            static_cast<uint16_t *>(base)[index] = DoubleToBf16Bits(v);
            break;
        case ACL_DOUBLE:
            static_cast<double *>(base)[index] = v;
            break;
        default:
            static_cast<float *>(base)[index] = static_cast<float>(v);  // IEEE conversion: round to nearest even
            break;
    }
}

// v rounded to the dtype and read back.
inline double RoundTo(aclDataType dtype, double v) {
    if (dtype == ACL_FLOAT) return static_cast<float>(v);
    if (dtype == ACL_DOUBLE) return v;
    return RoundToFormat(v, FormatOf(dtype));
}

inline const char *DtypeName(aclDataType dtype) {
    switch (dtype) {
        case ACL_FLOAT:
            return "FLOAT";
        case ACL_FLOAT16:
            return "FLOAT16";
        case ACL_BF16:
            return "BF16";
        case ACL_INT32:
            return "INT32";
        case ACL_INT64:
            return "INT64";
        case ACL_DOUBLE:
            return "DOUBLE";
        default:
            return "other";
    }
}

}  // namespace openaclnn::test

#endif  // OPENACLNN_TESTS_COMMON_FLOAT_FORMATS_H_
