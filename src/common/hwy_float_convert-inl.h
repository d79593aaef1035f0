// 16-bit float conversions in Highway vectors of fp32 lanes, shared by the operators' SIMD kernels. Included once
// per target from inside a foreach_target pass (the toggle guard below), like Highway's own -inl.h headers.
//
// Every function gives the bits of the scalar conversions in common/float_convert.h on every target:
//  * fp16 -> fp32 is exact (subnormals, inf and NaN payloads kept);
//  * fp32 -> fp16 and fp32 -> bf16 round to nearest even once; fp16 overflows to infinity; NaN stays NaN (quiet).
// Highway 1.0 emulates fp16 on some targets without inf/NaN or round-to-nearest-even, and its bf16 DemoteTo
// truncates (the AVX-512 BF16 instruction flushes subnormals), so these are integer sequences where needed.
//
// OPENACLNN_HWY_SOFT_F16 is 1 on the targets whose fp16 conversions are emulated (then the integer sequences
// below are used), 0 where the hardware converts (F16C, NEON, SVE). It is defined for the current pass.

#if defined(OPENACLNN_COMMON_HWY_FLOAT_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef OPENACLNN_COMMON_HWY_FLOAT_CONVERT_INL_H_
#undef OPENACLNN_COMMON_HWY_FLOAT_CONVERT_INL_H_
#else
#define OPENACLNN_COMMON_HWY_FLOAT_CONVERT_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

#undef OPENACLNN_HWY_SOFT_F16
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
#define OPENACLNN_HWY_SOFT_F16 1
#else
#define OPENACLNN_HWY_SOFT_F16 0
#endif

HWY_BEFORE_NAMESPACE();
namespace openaclnn::HWY_NAMESPACE {
namespace hwy_convert = hwy::HWY_NAMESPACE;

// fp16 bits (one per lane of a half-width vector) -> fp32, exact.
template <class DF>
HWY_INLINE hwy_convert::Vec<DF> HalfBitsToF32(DF df, hwy_convert::Vec<hwy_convert::Rebind<uint16_t, DF>> h) {
    namespace hn = hwy_convert;
#if OPENACLNN_HWY_SOFT_F16
    // Shifting the exponent/mantissa bits into place gives a float 2^-112 times the value (subnormal halves become
    // subnormal floats), and the multiplication by 2^112 is exact. inf/NaN get the float's all-ones exponent,
    // keeping the payload.
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const auto bits = hn::PromoteTo(du, h);
    const auto magnitude = hn::ShiftLeft<13>(hn::And(bits, hn::Set(du, 0x7fffu)));
    const auto scaled = hn::Mul(hn::BitCast(df, magnitude), hn::Set(df, 0x1p112f));
    const auto special = hn::Or(magnitude, hn::Set(du, 0x7f800000u));
    const auto is_special = hn::Gt(hn::BitCast(di, magnitude), hn::Set(di, 0x0f7fffff));
    const auto value = hn::IfThenElse(hn::RebindMask(du, is_special), special, hn::BitCast(du, scaled));
    return hn::BitCast(df, hn::Or(value, hn::ShiftLeft<16>(hn::And(bits, hn::Set(du, 0x8000u)))));
#else
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::BitCast(dh, h));
#endif
}

// fp32 -> fp16 bits in the lower 16 bits of each 32-bit lane (the upper 16 are zero), by integer operations: round
// to nearest even, subnormals, overflow to infinity, quiet NaN keeping the payload's top bits; the results of
// FloatToHalf and of F16C. For the targets without hardware conversions (OPENACLNN_HWY_SOFT_F16).
template <class DF>
HWY_INLINE hwy_convert::Vec<hwy_convert::RebindToUnsigned<DF>> SoftF32ToHalfBits(DF df, hwy_convert::Vec<DF> v) {
    namespace hn = hwy_convert;
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const auto u = hn::BitCast(du, v);
    const auto sign = hn::And(u, hn::Set(du, 0x80000000u));
    const auto abs = hn::Xor(u, sign);
    const auto abs_i = hn::BitCast(di, abs);
    // Normal halves: rebias the exponent and round the 13 dropped bits to nearest even.
    const auto odd = hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 1u));
    const auto normal =
        hn::ShiftRight<13>(hn::Add(hn::Add(abs, hn::Set(du, 0xc8000fffu)), odd));  // - (112 << 23) + 0xfff
    // Subnormal halves (and zero): adding 0.5f puts the half's unit 2^-24 at the float's last place, and the
    // addition rounds to nearest even there.
    const auto half_magic = hn::Set(df, 0.5f);
    const auto subnormal =
        hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, abs), half_magic)), hn::BitCast(du, half_magic));
    auto bits = hn::IfThenElse(hn::RebindMask(du, hn::Lt(abs_i, hn::Set(di, 0x38800000))), subnormal, normal);
    bits = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x477fefff))), hn::Set(du, 0x7c00u), bits);
    const auto nan = hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 0x1ffu)));
    bits = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x7f800000))), nan, bits);
    return hn::Or(bits, hn::ShiftRight<16>(sign));
}

// fp32 -> bf16 bits in the upper 16 bits of each 32-bit lane (the lower 16 are garbage), round to nearest even;
// NaN stays NaN (quiet), as FloatToBf16. kMayBeNaN false: the caller knows no lane is NaN or does not need its
// bits, and the NaN case is skipped.
template <bool kMayBeNaN, class DF>
HWY_INLINE hwy_convert::Vec<hwy_convert::RebindToUnsigned<DF>> Bf16RoundedHigh(DF /*df*/, hwy_convert::Vec<DF> v) {
    namespace hn = hwy_convert;
    const hn::RebindToUnsigned<DF> du;
    const auto u = hn::BitCast(du, v);
    const auto rounded = hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)));
    if constexpr (!kMayBeNaN) return rounded;
    return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Or(u, hn::Set(du, 0x00400000u)), rounded);
}

}  // namespace openaclnn::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // OPENACLNN_COMMON_HWY_FLOAT_CONVERT_INL_H_ toggle
