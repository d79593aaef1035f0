// The SIMD body of the cross-entropy gradient kernel, written once and compiled for every Highway target by
// grad_hwy.cpp (foreach_target.h re-includes this file once per target).
//
// Per element (grad_kernel.h): out = exp(x) * a - b * w_j, and at the row's target column also - g.
//
// Exactness and determinism, in one place:
//  * Only correctly rounded single operations: Mul, Add, Sub, fused multiply-add (Fma: one rounding; the instruction
//    on AVX2/AVX-512/NEON/SVE, an exact emulation in double on SSE4, std::fmaf per lane on EMU128/SCALAR), Min, Max,
//    compares, blends, integer ops and exact conversions. The file is compiled with -ffp-contract=off so the compiler
//    fuses nothing on its own. Every target therefore performs the same operations in the same order on the same
//    values, and the outputs are bitwise identical across targets (NaN payloads aside) and, since no element depends
//    on its neighbours, across any tiling or thread count.
//  * exp: Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2 (k rounded with the 1.5 * 2^23 trick, which needs only
//    a multiply-add), a polynomial p(r) for exp(r) times a (fp32: Estrin's scheme with p a = (p - 1) a + a in one
//    multiply-add; fp16/bf16: Horner's rule with the coefficients scaled by a, see ScaledPoly), all fused, and the
//    scale 2^k applied in two exact halves after the multiplication by a, so that p * a is right even where exp(x)
//    alone would underflow (x down to -172) or overflow (up to 176). The polynomial's degree depends on the output type
//    (Storage::kExpDegree):
//      fp32: degree 6, polynomial error 2^-28.0, measured max error of exp 1 ulp (tests/kernels: exhaustive)
//      fp16: degree 5, polynomial error 2^-23.2 (relative), output ulp is >= 2^-11 relative; one-step reduction
//            in rows without a bias term or with a small one (kRowOneStep), two-step in rows the cancellation guard
//            checks (its bound)
//      bf16: degree 4, polynomial error 2^-17.5 (relative), output ulp is >= 2^-8 relative; one-step reduction.
//            Rows with a bias term run fp16's degree 5 instead, still one-step, for the cancellation guard
//            (kRowDegree, kCancellationBound).
//    The 16-bit outputs need far fewer bits than fp32: with the error 2^-9.3 (bf16) and 2^-9.5 (fp16, one-step;
//    2^-11.3 two-step) of an output ulp at worst (where a bias term cancels more: fp16 rows with a small one 2^-5.1,
//    bf16 rows 0.84 just above the guard's bound, see kCancellationBound), a result can only be misrounded when the
//    exact value lies that close to a rounding midpoint (measured: < 0.2% of elements for bf16, < 0.01% for fp16),
//    and never by more than one ulp.
//    The 16-bit kernels are bound by their operation count, not by memory: fusing the polynomial's steps, the
//    reduction and the bias subtraction (out = exp(x) a - b w_j in one rounding) took fp16 and bf16 on 4096 x 32000
//    from about 2.0x and 1.65x the copy's time to about 1.3x (AVX-512, AMD Zen 4). The fp32 kernel runs at the copy's
//    pace when memory is slow, but is bound by its arithmetic when memory is fast (2 threads on Zen 4 read and stream
//    fp32 at up to about 75 GB/s): its fused exp takes 0.77-0.87x the time of the unfused one (4096 x 32000, 8192 x
//    50257 and 2048 x 128256, every variant, median of 5 paired rounds across both states), 0.97-0.99x in a slow
//    stretch, and in cache one thread 0.77x (plain) and 0.75x (smoothed+weighted); AVX2 0.68-0.72x in cache. The
//    price is on targets without the instruction: fp32 on SSE4 takes 8.6x its unfused time (FmaSse4), SCALAR 4x
//    (std::fmaf). (On an AVX2 Zen 1, whose 256-bit operations are split in two, every kernel was bound by its
//    arithmetic: about 1.75x fp32 and 3.2x fp16/bf16, unfused fp32.)
//  * The target column's element, where p * a - g can cancel catastrophically (p near 1), is recomputed in double
//    exactly as the reference kernel does (GradTargetElement), so it is correctly rounded.
//  * 16-bit loads widen exactly; stores round to nearest even once (fp16: F16C where the target has it, else the
//    integer sequence SoftF32ToHalfBits; bf16: integer rounding on every target, since Highway 1.0's DemoteTo
//    truncates; both in common/hwy_float_convert-inl.h). The kernel hwy:AVX3_BF16 rounds bf16 with the AVX-512 BF16
//    instruction instead, which flushes subnormals, only where no value can be subnormal (StoreBf16PairsNative).
//
// Memory: one read of logProb and one write of out per element. Outputs larger than the caches, with long rows, may
// be written with streaming (non-temporal) stores, which skip the read-for-ownership of the output lines
// (UseStreamingStores, grad_hwy.cpp: where a call's measured time says they pay); they store
// whole aligned vectors (bf16: whole pairs) after a peel of the row's first elements, and give the same bits as
// regular stores.

#if defined(OPENACLNN_GRAD_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef OPENACLNN_GRAD_HWY_INL_H_
#undef OPENACLNN_GRAD_HWY_INL_H_
#else
#define OPENACLNN_GRAD_HWY_INL_H_
#endif

#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "hwy/cache_control.h"
#include "common/hwy_float_convert-inl.h"
#include "hwy/highway.h"
#include "common/exp_double.h"
#include "kernels/grad_hwy_shared.h"
#include "ops/common/element_access.h"

HWY_BEFORE_NAMESPACE();
namespace openaclnn::cross_entropy::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using D16 = hn::Rebind<uint16_t, DF>;  // half-width vector of the 16-bit storage lanes
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
using V16 = hn::Vec<D16>;

// The 16-bit conversions (exact integer sequences where Highway emulates fp16; OPENACLNN_HWY_SOFT_F16).
using openaclnn::HWY_NAMESPACE::Bf16RoundedHigh;
using openaclnn::HWY_NAMESPACE::HalfBitsToF32;
using openaclnn::HWY_NAMESPACE::SoftF32ToHalfBits;

// Streaming stores only where Highway's Stream writes exactly the vector it is given (full 128/256/512-bit
// vectors on x86): the 16-bit half-width vectors of the 128-bit targets are not full vectors.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr bool kCanStream = true;
#else
constexpr bool kCanStream = false;
#endif

// ---- exp(x) * a ------------------------------------------------------------------------------------------------

#if HWY_TARGET == HWY_SSE4
// fmaf on SSE4 (no fused instruction), exactly, in double. The product p = a b of two floats is exact in double (24 +
// 24 significant bits, exponents far inside double's range), so the only rounding before the final one to float is
// that of the sum s = p + c to nearest double. Rounding s to float gives fmaf's result unless s is a float midpoint
// (rounding to nearest is monotonic and every float midpoint is a double, so a sum that is not one lies on the same
// side of every midpoint as the exact sum): where the low 29 bits of s's significand are 1 and zeros, or where s lies
// in float's subnormal range (fewer float bits there: other midpoints), FmaRoundedToOdd replaces s by the exact sum
// rounded to odd, which rounds to nearest float as the exact sum does. Those lanes are rare; a vector with one takes
// that branch for all its lanes (the same values either way).
HWY_INLINE __m128d FmaRoundedToOdd(__m128d p, __m128d c, __m128d s) {
    const __m128d p_part = _mm_sub_pd(s, c);  // TwoSum: s + e == p + c exactly
    const __m128d c_part = _mm_sub_pd(s, p_part);
    const __m128d e = _mm_add_pd(_mm_sub_pd(p, p_part), _mm_sub_pd(c, c_part));
    const __m128d zero = _mm_setzero_pd();
    // Inexact, and s finite (infinite or NaN operands pass unchanged).
    const __m128i inexact = _mm_castpd_si128(_mm_and_pd(_mm_cmpneq_pd(e, zero), _mm_cmpeq_pd(_mm_sub_pd(s, s), zero)));
    // All ones where e and s differ in sign (the exact sum lies between 0 and s): the sign bit of each 64-bit lane's
    // xor, spread over the lane from its upper 32-bit half. There the truncated sum is s's neighbour toward zero.
    const __m128i opposite = _mm_srai_epi32(_mm_shuffle_epi32(_mm_castpd_si128(_mm_xor_pd(e, s)), 0xF5), 31);
    __m128i bits = _mm_add_epi64(_mm_castpd_si128(s), _mm_and_si128(opposite, inexact));
    bits = _mm_or_si128(bits, _mm_and_si128(inexact, _mm_set1_epi64x(1)));  // the last bit set where inexact
    return _mm_castsi128_pd(bits);
}

// Lanes of s (as 64-bit masks) that may need FmaRoundedToOdd: float midpoints and float's subnormal range.
HWY_INLINE __m128i FmaMidpointRisk(__m128d s) {
    const __m128i low_bits = _mm_and_si128(_mm_castpd_si128(s), _mm_set1_epi64x(0x1FFFFFFF));
    const __m128i midpoint = _mm_cmpeq_epi64(low_bits, _mm_set1_epi64x(0x10000000));
    const __m128d magnitude = _mm_andnot_pd(_mm_set1_pd(-0.0), s);
    return _mm_or_si128(midpoint, _mm_castpd_si128(_mm_cmplt_pd(magnitude, _mm_set1_pd(0x1p-126))));
}

HWY_INLINE __m128 FmaSse4(__m128 a, __m128 b, __m128 c) {
    const auto upper = [](__m128 v) { return _mm_cvtps_pd(_mm_movehl_ps(v, v)); };
    const __m128d p_lo = _mm_mul_pd(_mm_cvtps_pd(a), _mm_cvtps_pd(b)), c_lo = _mm_cvtps_pd(c);
    const __m128d p_hi = _mm_mul_pd(upper(a), upper(b)), c_hi = upper(c);
    __m128d s_lo = _mm_add_pd(p_lo, c_lo), s_hi = _mm_add_pd(p_hi, c_hi);
    const __m128i risk = _mm_or_si128(FmaMidpointRisk(s_lo), FmaMidpointRisk(s_hi));
    if (HWY_UNLIKELY(!_mm_testz_si128(risk, risk))) {
        s_lo = FmaRoundedToOdd(p_lo, c_lo, s_lo);
        s_hi = FmaRoundedToOdd(p_hi, c_hi, s_hi);
    }
    return _mm_movelh_ps(_mm_cvtpd_ps(s_lo), _mm_cvtpd_ps(s_hi));
}
#endif

// a * b + c with one rounding (fused multiply-add) on every target: the instruction where the target has it
// (AVX2, AVX-512, NEON on AArch64, SVE: HWY_NATIVE_FMA); on SSE4 an exact emulation in double (FmaSse4); elsewhere
// (EMU128/SCALAR) std::fmaf per lane, which is correctly rounded by definition. Every target therefore computes the
// same values (test FusedMultiplyAddIsFmaf checks each target against std::fmaf); the emulations make SSE4 and
// EMU128/SCALAR slower, never different.
HWY_INLINE VF Fma(DF df, VF a, VF b, VF c) {
#if HWY_NATIVE_FMA
    (void)df;
    return hn::MulAdd(a, b, c);
#elif HWY_TARGET == HWY_SSE4
    (void)df;
    return VF{FmaSse4(a.raw, b.raw, c.raw)};
#else
    constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
    alignas(HWY_MAX_BYTES) float va[kMax], vb[kMax], vc[kMax];
    hn::Store(a, df, va);
    hn::Store(b, df, vb);
    hn::Store(c, df, vc);
    for (size_t k = 0; k < hn::Lanes(df); ++k) va[k] = std::fmaf(va[k], vb[k], vc[k]);
    return hn::Load(df, va);
#endif
}

// Minimax coefficients for exp(r) = 1 + r + r^2 (c2 + c3 r + ...) on [-ln2/2, ln2/2], relative error, c0 = c1 = 1
// exact (bench/exp_poly_error.py measures their errors on that range). For fp32 (degree 6; the 16-bit degrees take
// ScaledPoly below), ExpPolyMinusOne returns p(r) - 1 =
// r + r^2 S(r), S = c2 + c3 r + ..., and the caller forms exp(r) a = (p - 1) a + a in one multiply-add: one rounding
// fewer than rounding p first, and one operation fewer where fused. S is evaluated by Estrin's scheme (pairs of
// terms combined by r^2), whose dependency chain is about half Horner's for the same number of operations or one
// more: cores that run out of reordering room before they run out of arithmetic units gain (AMD Zen 1, in cache:
// 4096 x 32000 plain fp32 10.9 -> 9.3 ns per 8 elements). The pairs are combined by Horner's rule in r^2
// (c23 + r^2 (c45 + r^2 c6) for degree 6), which needs no r^4: one multiplication fewer, and the fp32 kernel
// is bound by its multiplications on AVX-512 (AMD Zen 4 issues one 512-bit multiplication per cycle). Against the
// sum c23 r^2 + c46 r^4: fp32 smoothed+weighted 0.96x the time (64 x 32000, one thread, in L3), the same errors (at
// most 1 ulp, 9.2% of a dense sample of [-104, 89] misrounded either way).
template <int kDegree>
HWY_INLINE VF ExpPolyMinusOne(DF df, VF r);

template <>
HWY_INLINE VF ExpPolyMinusOne<6>(DF df, VF r) {
    const VF r2 = hn::Mul(r, r);
    const VF c23 = Fma(df, hn::Set(df, 0x1.555492p-3f), r, hn::Set(df, 0x1.fffffcp-2f));
    const VF c45 = Fma(df, hn::Set(df, 0x1.123a2p-7f), r, hn::Set(df, 0x1.5558f2p-5f));
    const VF c46 = Fma(df, hn::Set(df, 0x1.6a23ccp-10f), r2, c45);
    return Fma(df, Fma(df, c46, r2, c23), r2, r);
}

// The 16-bit degrees evaluate exp(r) a by Horner's rule with the coefficients scaled by a: with a_i = a c_i rounded
// to float (a_0 = a_1 = a),
//   exp(r) a = a + r (a + r (a_2 + r (a_3 + r (a_4 + r a_5))))      (degree 5; degree 4 from a_4 down)
// one multiply-add per degree, against Estrin's r^2, the multiply-adds of p - 1 and the final (p - 1) a + a: one
// operation fewer per vector, on the pipes of the multiplications, which bound the 16-bit kernels on AMD Zen 4 (one
// 512-bit multiply-add or multiplication per cycle; 4096 x 32000 fp16 0.91-0.94x and bf16 smoothed+weighted 0.94x
// the time, ab_libs 3 rounds). The a_i are a row's constants (ExpFactors, formed once per row by the block loop, per
// vector elsewhere: the same rounded products either way). The errors of exp(r) a stay those of the Estrin form
// (bench/exp_error.cpp: every fp16 and bf16 input, 2048 mantissas of a at exponents 0 down to -125; degree 5
// 2^-22.290 against 2^-22.288, degree 4 2^-17.441 against 2^-17.442), which the cancellation guard's bounds use.
template <int kDegree>
struct ExpCoefficients;  // c_2, c_3, ..., c_kDegree (minimax, as ExpPolyMinusOne's)
template <>
struct ExpCoefficients<5> {
    static constexpr float kC[4] = {0x1.fffdfcp-2f, 0x1.5557bp-3f, 0x1.572a68p-5f, 0x1.106256p-7f};
};
template <>
struct ExpCoefficients<4> {
    static constexpr float kC[3] = {0x1.0006b8p-1f, 0x1.571d2p-3f, 0x1.5224e4p-5f};
};

// a and a_2 .. a_5 (those of the degree; the others unused), formed once per row by the block loops. SVE's vectors
// have no size at compile time and cannot be members of a struct: there the factors are kept as floats (a row's a is
// the same in every lane) and broadcast where used. A float product rounds as the lanes of a vector product do, so
// both forms give the same factors.
#if HWY_HAVE_SCALABLE
struct ExpFactors {
    float a, a2, a3, a4, a5;
};
#else
struct ExpFactors {
    VF a, a2, a3, a4, a5;
};
#endif

// Of a row whose a is the same in every lane.
template <int kDegree>
HWY_INLINE ExpFactors MakeExpFactors(DF df, VF a) {
#if HWY_HAVE_SCALABLE
    (void)df;
    const float s = hn::GetLane(a);
    ExpFactors f{s, s, s, s, s};
    const auto times = [s](float c) { return s * c; };
#else
    ExpFactors f{a, a, a, a, a};
    const auto times = [df, a](float c) { return hn::Mul(a, hn::Set(df, c)); };
#endif
    if constexpr (kDegree < 6) {
        constexpr auto &c = ExpCoefficients<kDegree>::kC;
        f.a2 = times(c[0]);
        f.a3 = times(c[1]);
        f.a4 = times(c[2]);
        if constexpr (kDegree == 5) f.a5 = times(c[3]);
    }
    return f;
}

// Factor a_k (k = 0 for a itself): from a row's ExpFactors, or formed from a vector of a, whose lanes may differ (rows
// packed side by side).
template <int kDegree, int kK>
HWY_INLINE VF ExpFactor(DF df, VF a) {
    if constexpr (kK == 0) {
        (void)df;
        return a;
    } else {
        return hn::Mul(a, hn::Set(df, ExpCoefficients<kDegree>::kC[kK - 2]));
    }
}
template <int kDegree, int kK>
HWY_INLINE VF ExpFactor(DF df, const ExpFactors &f) {
    const auto pick = [&f]() {
        if constexpr (kK == 0) return f.a;
        if constexpr (kK == 2) return f.a2;
        if constexpr (kK == 3) return f.a3;
        if constexpr (kK == 4) return f.a4;
        if constexpr (kK == 5) return f.a5;
    };
#if HWY_HAVE_SCALABLE
    return hn::Set(df, pick());
#else
    (void)df;
    return pick();
#endif
}

template <int kDegree, class A>
HWY_INLINE VF ScaledPoly(DF df, VF r, const A &a) {
    VF q = ExpFactor<kDegree, 4>(df, a);
    if constexpr (kDegree == 5) q = Fma(df, ExpFactor<kDegree, 5>(df, a), r, q);
    q = Fma(df, q, r, ExpFactor<kDegree, 3>(df, a));
    q = Fma(df, q, r, ExpFactor<kDegree, 2>(df, a));
    const VF a0 = ExpFactor<kDegree, 0>(df, a);
    q = Fma(df, q, r, a0);
    return Fma(df, q, r, a0);
}

constexpr float kExpMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer (nearest even)

// t = x / ln2 + 1.5 * 2^23, fused. For |x| < 2^21 its bits are those of 1.5 * 2^23 (0x4b400000) plus
// k = round(x / ln2): the exp's scale is 2^k.
HWY_INLINE VF ExpShifted(DF df, VF x) { return Fma(df, x, hn::Set(df, 1.44269504088896341f), hn::Set(df, kExpMagic)); }

// exp(x) * a, without forming exp(x) alone (which would underflow/overflow before the multiplication by a).
// General path (kFast false): x is clamped to [-172, 176] (beyond that exp(x) * a is 0 or infinite for any a in
// [2^-125, 2^76]; rows with other a are computed in double, RowNeedsDouble), NaN x gives NaN, and 2^k is applied as
// two exact multiplications, right also where the result is subnormal or overflows; t_fast is not used. Fast path
// (kFast true), for vectors whose every t_fast = ExpShifted(x) lies in the row's FastWindow: the result is known to
// be a normal float, so 2^k is applied by adding k to the exponent field, which gives exactly the bits of the
// general path; no clamp and no NaN check are needed.
// Which path a vector takes therefore never changes a value. kOneStep: the reduction's form, as kRowOneStep gives
// it for the row (every caller asks it there, so that all paths of a row reduce alike).
template <int kDegree, bool kOneStep, bool kFast, class A>
HWY_INLINE VF ScaledExp(DF df, VF x, VF t_fast, const A &a) {
    const DI di;
    const VF magic = hn::Set(df, kExpMagic);
    const VF xc = kFast ? x : hn::Min(hn::Max(x, hn::Set(df, -172.0f)), hn::Set(df, 176.0f));
    const VF t = kFast ? t_fast : ExpShifted(df, xc);
    const VF kf = hn::Sub(t, magic);  // k, exact, in [-248, 254]
    VF r;
    if constexpr (kOneStep) {
        // r = x - k ln2 in one step with ln2 rounded to fp32 (off by 1.905e-9): the extra error in r is at most
        // 254 * 1.905e-9 = 2^-20.98 (2^-24.7 for the |k| <= 30 of ordinary log-probabilities). Only rows where no
        // cancellation can magnify it past what the output allows (kRowOneStep; for fp16 rows with a small bias
        // term and bf16 rows with a bias term, kCancellationBound says why). bf16, against the degree-4
        // polynomial's 2^-17.5: together under 2^-17.3 relative, 2^-9.3 of a bf16 ulp at worst. Degree 5, against
        // its 2^-22.29 two-step (bench/exp_error): under 2^-22.29 + 2^-20.98 <= 2^-20.49 relative, 2^-9.5 of an
        // fp16 ulp (bench/exp_error: 2^-21.2 measured for -86 <= x <= 88). One multiply-add fewer per vector, in
        // kernels bound by their multiply-adds: fp16 rows without a bias term took 0.88-0.91x the time,
        // smoothed+weighted ones (kRowSmallBias) 0.92x (64 x 32000, one thread, in cache; ab_libs, 5 rounds); bf16
        // smoothed+weighted rows (degree 5, guarded) 0.93x.
        r = Fma(df, kf, hn::Set(df, -0.693147182464599609375f), xc);
    } else {
        // r = x - k ln2 in two steps: ln2_hi has 15 significant bits, so k * ln2_hi is exact and so is the first
        // difference (Sterbenz); the second step rounds once.
        r = Fma(df, kf, hn::Set(df, -0.693145751953125f), xc);
        r = Fma(df, kf, hn::Set(df, -1.42860676533018708e-6f), r);
    }
    VF m;
    if constexpr (kDegree < 6) {
        m = ScaledPoly<kDegree>(df, r, a);
    } else {
        const VF a0 = ExpFactor<kDegree, 0>(df, a);
        m = Fma(df, ExpPolyMinusOne<kDegree>(df, r), a0, a0);
    }
    // Fast path: t's bits are those of magic plus k, and magic's bits (0x4b400000) shifted left by 23 are 0 modulo
    // 2^32, so ShiftLeft<23>(bits(t)) is k << 23 without first subtracting magic's bits.
    if constexpr (kFast) return hn::BitCast(df, hn::Add(hn::BitCast(di, m), hn::ShiftLeft<23>(hn::BitCast(di, t))));
    const VI k = hn::Sub(hn::BitCast(di, t), hn::BitCast(di, magic));  // the same k as an integer
    // 2^k = 2^k1 * 2^k2 with both halves normal floats; each multiplication is exact unless the result is
    // subnormal or infinite, where it rounds once, correctly.
    const VI k1 = hn::ShiftRight<1>(k);
    const VI k2 = hn::Sub(k, k1);
    const VI bias = hn::Set(di, 127);
    m = hn::Mul(m, hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(k1, bias))));
    m = hn::Mul(m, hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(k2, bias))));
    return hn::IfThenElse(hn::IsNaN(x), x, m);
}

// ---- loads and stores per storage type ----------------------------------------------------------------------

// fp32 -> fp16 bits, round to nearest even; the same results as FloatToHalf in common/float_convert.h.
HWY_INLINE V16 F32ToHalf(DF df, VF v) {
    const D16 d16;
#if OPENACLNN_HWY_SOFT_F16
    return hn::DemoteTo(d16, hn::BitCast(DI(), SoftF32ToHalfBits(df, v)));
#else
    (void)df;
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::BitCast(d16, hn::DemoteTo(dh, v));
#endif
}

// fp32 -> bf16 bits, round to nearest even (Bf16RoundedHigh); kMayBeNaN false: the caller knows no lane is NaN
// (the fast path).
template <bool kMayBeNaN = true>
HWY_INLINE V16 F32ToBf16(DF /*df*/, VF v) {
    const D16 d16;
    const DI di;
    return hn::DemoteTo(d16, hn::BitCast(di, hn::ShiftRight<16>(Bf16RoundedHigh<kMayBeNaN>(DF(), v))));
}

template <aclDataType kType>
struct Storage;

template <>
struct Storage<ACL_FLOAT> {
    using T = float;
    static constexpr int kExpDegree = 6;
    static HWY_INLINE VF Load(DF df, const T *p) { return hn::LoadU(df, p); }
    template <bool kMayBeNaN = true>
    static HWY_INLINE void Store(DF df, VF v, T *p) { hn::StoreU(v, df, p); }
    template <bool kMayBeNaN = true>
    static HWY_INLINE void Stream(DF df, VF v, T *p) { hn::Stream(v, df, p); }
};

template <>
struct Storage<ACL_FLOAT16> {
    using T = uint16_t;
    static constexpr int kExpDegree = 5;
    static HWY_INLINE VF Load(DF df, const T *p) { return HalfBitsToF32(df, hn::LoadU(D16(), p)); }
    template <bool kMayBeNaN = true>
    static HWY_INLINE void Store(DF df, VF v, T *p) { hn::StoreU(F32ToHalf(df, v), D16(), p); }
    template <bool kMayBeNaN = true>
    static HWY_INLINE void Stream(DF df, VF v, T *p) { hn::Stream(F32ToHalf(df, v), D16(), p); }
};

template <>
struct Storage<ACL_BF16> {
    using T = uint16_t;
    static constexpr int kExpDegree = 4;
    static HWY_INLINE VF Load(DF df, const T *p) {
        const DU du;
        return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(D16(), p))));
    }
    template <bool kMayBeNaN = true>
    static HWY_INLINE void Store(DF df, VF v, T *p) { hn::StoreU(F32ToBf16<kMayBeNaN>(df, v), D16(), p); }
    template <bool kMayBeNaN = true>
    static HWY_INLINE void Stream(DF df, VF v, T *p) { hn::Stream(F32ToBf16<kMayBeNaN>(df, v), D16(), p); }
};

// ---- one row segment -------------------------------------------------------------------------------------------

// Which bias term the row has: none (b == +0 and weights finite, so b * w_j is +0 everywhere), the constant b
// (no weights), or b * w_j.
enum BiasKind { kNoBias, kConstBias, kWeightBias };

// m - b * w_j, or m - b; w: the weights (kWeightBias only). Fused (one rounding) for the 16-bit types, as every exp
// is; fp32 rounds the product first, so that rows sharing b can form it once (RowSegmentsWeighted).
template <aclDataType kType, BiasKind kBias>
HWY_INLINE VF SubBiasW(DF df, VF m, VF b, VF w) {
    if constexpr (kBias == kWeightBias && kType != ACL_FLOAT) return Fma(df, hn::Neg(b), w, m);
    if constexpr (kBias == kWeightBias) return hn::Add(hn::Mul(hn::Neg(b), w), m);
    (void)w;
    (void)df;
    return hn::Sub(m, b);
}

// The same with the weights read at w.
template <aclDataType kType, BiasKind kBias>
HWY_INLINE VF SubBias(DF df, VF m, VF b, const float *w) {
    if constexpr (kBias == kWeightBias) return SubBiasW<kType, kBias>(df, m, b, hn::LoadU(df, w));
    (void)w;
    return SubBiasW<kType, kBias>(df, m, b, b);
}

// The exp's degree in a row: its output type's (Storage::kExpDegree), except bf16 rows with a bias term, which run
// fp16's degree 5 (with the one-step reduction). There the cancellation guard below flags the lanes whose error the
// bias term could magnify, and degree 5's 2^3 times smaller error lets it flag 2^3 times fewer: with degree 4 (and
// the two-step reduction's bound), 5% of the four-vector blocks of the benchmark's label-smoothed bf16 rows had a
// flagged lane, and each such block cost a mispredicted branch and a second pass, more than the multiply-add per
// vector that degree 5 adds.
template <aclDataType kType, BiasKind kBias>
constexpr int kRowDegree = (kType == ACL_BF16 && kBias != kNoBias) ? 5 : Storage<kType>::kExpDegree;
// Whether a row's exp reduces x in one step (ScaledExp): every bf16 row, the fp16 rows without a bias term, and fp16
// rows whose bias term is small enough to skip the cancellation guard (kGuard false; kRowSmallBias). fp16 rows with
// the guard keep the two-step reduction, whose smaller error the guard's bound takes (kCancellationBound); bf16's
// bound takes the one-step error instead (one multiply-add fewer per vector; the guard flags twice as many lanes).
template <aclDataType kType, BiasKind kBias, bool kGuard>
constexpr bool kRowOneStep = kType == ACL_BF16 || (kType == ACL_FLOAT16 && (kBias == kNoBias || !kGuard));

// exp(x) a, minus the bias term, with the exp of degree kDegree.
// a: the row's a, or its ExpFactors.
template <aclDataType kType, BiasKind kBias, bool kGuard, bool kFast, int kDegree = kRowDegree<kType, kBias>,
          class A = VF>
HWY_INLINE VF RowValue(DF df, VF x, VF t, const A &a, VF b, const float *w) {
    const VF m = ScaledExp<kDegree, kRowOneStep<kType, kBias, kGuard>, kFast>(df, x, t, a);
    if constexpr (kBias == kNoBias) {
        (void)b;
        (void)w;
        return m;
    } else {
        return SubBias<kType, kBias>(df, m, b, w);
    }
}

// Cancellation guard for the 16-bit outputs. Where m = exp(x) a and b w_j nearly cancel, the fp32 value's
// absolute error (a fixed fraction of |m|, and |m| is about |b w_j| there) is no longer small against the result's
// ulp. Lanes with |out| < |b w_j| * kCancellationBound are therefore recomputed in double (StoreExactElement).
// Above the bound, a value's error is under 0.66 ulp of the output (below), so no output is further than one ulp from
// the correctly rounded value. The guard is a function of each lane's own values, so every target flags the same
// lanes and no lane's value depends on its neighbours (determinism holds). fp32 outputs keep the fp32 value: their
// error bound is stated relative to the terms (a few ulps of max(|exp(x) a|, |b w_j|)). A value's error is at most
// e |m| + 2^-24 |m| (a rounded to fp32) + 2^-24 |b w_j| (b rounded; w_j is exact) + 2^-24 |out| (the result's
// rounding), e being m's error with the fp32 a: for degree 5, 2^-22.29 with the two-step reduction, measured over
// every fp16 and bf16 input and a dense sample of a (bound 2^-22.3; bench/exp_error.cpp), and 2^-20.49 with the
// one-step one (ScaledExp). Above the bound, |b w_j| <= |out| / bound and |m| <= |out| (1 + 1 / bound). Both 16-bit
// types' bias rows run degree 5 (kRowDegree), fp16's two-step and bf16's one-step (kRowOneStep):
//   fp16: error <= (2^-22.29 + 2^-24) (1 + 2^10) |out| + 2^-14 |out| + 2^-24 |out| <= 2^-11.60 |out|, ulp >= 2^-11
//         |out|: 0.66 ulp.
//   bf16: error <= (2^-20.49 + 2^-24) (1 + 2^12) |out| + 2^-12 |out| + 2^-24 |out| <= 2^-8.25 |out|, ulp >= 2^-8
//         |out|: 0.84 ulp. (With the two-step reduction the bound was 2^-13, for 0.66 ulp. Now the guard flags
//         lanes within twice the distance of the cancellation: 0.50% of the four-vector blocks of the benchmark's
//         smoothed+weighted rows fail the block loop's screen, against 0.25%; and each vector runs one multiply-add
//         fewer. Correctly rounded elements: 99.8171% against 99.8089% in GuardScreenGivesTheGuardsBits (inputs
//         near the cancellation), 95.09% against 98.33% in Bf16GuardCoversTheOneStepReduction (every input at the
//         cancellation, |k| about 178), the other tests' figures unchanged or up.)
// fp16 rows flagged kRowSmallBias (|b| max_j |w_j| <= 2^-10, grad_kernel.h) skip the guard (RowSegmentBiased) and
// reduce x in one step (kRowOneStep): m's error is at most 2^-20.49 relative (ScaledExp), 2^-20.37 with the rounding
// of a to fp32, and |b w_j| <= 2^-10 bounds what a cancellation can do. Where |out| >= 2^-14 (a normal fp16),
// |m| <= |out| + 2^-10 <= 17 |out|, so the error, with b's rounding (2^-24 |b w_j|) and the result's (2^-24 |out|),
// is under 2^-20.37 * 17 |out| + 2^-24 * 17 |out| < 2^-16.1 |out|, 2^-5.1 of an ulp. Below, |m| <= 2^-14 + 2^-10
// and the error is under 2^-20.37 (2^-14 + 2^-10) + 2^-34 + 2^-38 < 2^-30.1, under 1/70 of fp16's smallest spacing
// 2^-24. So never more than one ulp off, and rarely misrounded (test SmallBiasFp16RowsSkipTheGuard: 0.04% of
// elements where every input sits near the cancellation; with the two-step reduction the same; a limit of 2^-4
// instead of 2^-10 still kept one ulp there with the two-step reduction, but misrounded 3%). Mean-reduced gradients
// have |b| about gradLoss * smoothing / (C N), so nearly every fp16 training row qualifies; the guard's tests were a
// quarter of their time (4096 x 32000, smoothed+weighted).
template <aclDataType kType>
constexpr float kCancellationBound = kType == ACL_BF16 ? 0x1p-12f : 0x1p-10f;

// |b| * bound: the guard's bound for a constant bias term, and its factor for b * w_j.
template <aclDataType kType>
HWY_INLINE VF ScaledBias(DF df, VF b) {
    return hn::Mul(hn::Abs(b), hn::Set(df, kCancellationBound<kType>));
}

// w: the weights (kWeightBias only).
template <aclDataType kType, BiasKind kBias>
HWY_INLINE auto CancelledW(DF df, VF value, VF b, VF w) {
    // |b w_j| * bound, formed as (|b| * bound) * |w_j|: the bound is a power of two, so this is the same value
    // (barring subnormals, where either form flags the same way on every target), and |b| * bound is invariant in
    // the row loop, which leaves one multiplication per vector.
    const VF scaled_b = ScaledBias<kType>(df, b);
    if constexpr (kBias == kWeightBias) {
        return hn::Lt(hn::Abs(value), hn::Mul(scaled_b, hn::Abs(w)));
    } else {
        (void)w;
        return hn::Lt(hn::Abs(value), scaled_b);
    }
}

// The same with the weights read at w.
template <aclDataType kType, BiasKind kBias>
HWY_INLINE auto Cancelled(DF df, VF value, VF b, const float *w) {
    if constexpr (kBias == kWeightBias) return CancelledW<kType, kBias>(df, value, b, hn::LoadU(df, w));
    (void)w;
    return CancelledW<kType, kBias>(df, value, b, b);
}

// Rounds and stores the first `count` lanes of a vector of results, whose lanes `cancelled` are recomputed in double
// from x (the input, widened exactly) with the double coefficients of their row, row_of(lane); w: the vector's
// weights (kWeightBias only).
template <aclDataType kType, BiasKind kBias, class RowOf>
HWY_INLINE void StorePatchedLanes(DF df, VF x, VF value, hn::Mask<DF> cancelled, size_t count, const RowOf &row_of,
                                  const float *w, typename Storage<kType>::T *out) {
    using T = typename Storage<kType>::T;
    constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
    alignas(HWY_MAX_BYTES) float x_buf[kMax];
    alignas(HWY_MAX_BYTES) float flag_buf[kMax];
    alignas(HWY_MAX_BYTES) T out_buf[kMax];
    hn::Store(x, df, x_buf);
    hn::Store(hn::IfThenElseZero(cancelled, hn::Set(df, 1.0f)), df, flag_buf);
    Storage<kType>::Store(df, value, out_buf);
    const size_t used = HWY_MIN(count, hn::Lanes(df));  // count, never more than the lanes
    for (size_t lane = 0; lane < used; ++lane) {
        if (flag_buf[lane] != 0.0f) {
            const GradRowCoefficients &row = row_of(lane);
            const double weight = kBias == kWeightBias ? static_cast<double>(w[lane]) : 1.0;
            StoreExactElement(kType, x_buf[lane], &out_buf[lane], row.a, row.b, weight);
        }
    }
    std::memcpy(out, out_buf, used * sizeof(T));
}

// The same for a whole vector of one row.
template <aclDataType kType, BiasKind kBias>
HWY_NOINLINE void StorePatched(DF df, VF x, VF value, hn::Mask<DF> cancelled, const GradRowCoefficients &row,
                               const float *w, typename Storage<kType>::T *out) {
    const auto row_of = [&](size_t) -> const GradRowCoefficients & { return row; };
    StorePatchedLanes<kType, kBias>(df, x, value, cancelled, hn::Lanes(df), row_of, w, out);
}

// Computes and stores one vector (count = lanes, or fewer into a buffer by the caller).
// kFast: t = ExpShifted(x) is in the row's fast window, and a, b and the weights are finite, so no lane is NaN
// (t is not used otherwise).
template <aclDataType kType, BiasKind kBias, bool kGuard, bool kStream, bool kFast>
HWY_INLINE void StoreVector(DF df, VF x, VF t, VF a, VF b, const float *w, const GradRowCoefficients &row,
                            typename Storage<kType>::T *out) {
    const VF value = RowValue<kType, kBias, kGuard, kFast>(df, x, t, a, b, w);
    if constexpr (kType != ACL_FLOAT && kBias != kNoBias && kGuard) {
        const auto cancelled = Cancelled<kType, kBias>(df, value, b, w);
        if (HWY_UNLIKELY(!hn::AllFalse(df, cancelled))) {
            StorePatched<kType, kBias>(df, x, value, cancelled, row, w, out);
            return;
        }
    }
    if constexpr (kStream) {
        Storage<kType>::template Stream<!kFast>(df, value, out);
    } else {
        Storage<kType>::template Store<!kFast>(df, value, out);
    }
}

// Two vectors at once (the row loop's body): one test of both vectors' cancellation masks, so that the common case
// (nothing cancelled) costs one branch per pair. The values are StoreVector's, bit for bit.
template <aclDataType kType, BiasKind kBias, bool kGuard, bool kStream, bool kFast>
HWY_INLINE void StorePair(DF df, VF x0, VF x1, VF t0, VF t1, VF a, VF b, const float *w0, const float *w1,
                          const GradRowCoefficients &row, typename Storage<kType>::T *out0,
                          typename Storage<kType>::T *out1) {
    const VF value0 = RowValue<kType, kBias, kGuard, kFast>(df, x0, t0, a, b, w0);
    const VF value1 = RowValue<kType, kBias, kGuard, kFast>(df, x1, t1, a, b, w1);
    if constexpr (kType != ACL_FLOAT && kBias != kNoBias && kGuard) {
        const auto cancelled0 = Cancelled<kType, kBias>(df, value0, b, w0);
        const auto cancelled1 = Cancelled<kType, kBias>(df, value1, b, w1);
        if (HWY_UNLIKELY(!hn::AllFalse(df, hn::Or(cancelled0, cancelled1)))) {
            StorePatched<kType, kBias>(df, x0, value0, cancelled0, row, w0, out0);
            StorePatched<kType, kBias>(df, x1, value1, cancelled1, row, w1, out1);
            return;
        }
    }
    if constexpr (kStream) {
        Storage<kType>::template Stream<!kFast>(df, value0, out0);
        Storage<kType>::template Stream<!kFast>(df, value1, out1);
    } else {
        Storage<kType>::template Store<!kFast>(df, value0, out0);
        Storage<kType>::template Store<!kFast>(df, value1, out1);
    }
}

// Whether Highway's MaskedLoad and BlendedStore of lanes of type T leave the masked-off lanes' memory untouched (so
// they never fault and never write there): AVX-512 for every lane size, AVX2 for 4-byte lanes (vmaskmov). Elsewhere
// Highway emulates them with full-width accesses.
template <typename T>
constexpr bool kMaskedIsExact =
    HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || (HWY_TARGET == HWY_AVX2 && sizeof(T) == 4);

// buf[0, count) = src[0, count), buf[count, lanes) = 0, reading nothing outside src[0, count).
template <class D, typename T>
HWY_INLINE void CopyInPartial(D d, const T *src, T *buf, size_t count) {
    if constexpr (kMaskedIsExact<T>) {
        hn::Store(hn::MaskedLoad(hn::FirstN(d, count), d, src), d, buf);
    } else {
        std::memcpy(buf, src, count * sizeof(T));  // buf is zero-initialised
    }
}

// dst[0, count) = buf[0, count), writing nothing outside dst[0, count).
template <class D, typename T>
HWY_INLINE void CopyOutPartial(D d, const T *buf, T *dst, size_t count) {
    if constexpr (kMaskedIsExact<T>) {
        hn::BlendedStore(hn::Load(d, buf), hn::FirstN(d, count), d, dst);
    } else {
        std::memcpy(dst, buf, count * sizeof(T));
    }
}

// Fewer than a vector's lanes: through a stack buffer, so that nothing outside [0, count) is read or written, on
// every target (masked loads are exact only on some: kMaskedIsExact, where they replace the copies, which cost more
// than the arithmetic in rows of a few classes). The values are the vector path's, bit for bit.
template <aclDataType kType, BiasKind kBias, bool kGuard>
HWY_NOINLINE void RowPartial(DF df, const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t count,
                             VF a, VF b, const float *w, const GradRowCoefficients &row) {
    using T = typename Storage<kType>::T;
    using DT = hn::Rebind<T, DF>;  // the storage lanes of one vector
    constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
    alignas(HWY_MAX_BYTES) T in_buf[kMax] = {};
    alignas(HWY_MAX_BYTES) T out_buf[kMax];
    alignas(HWY_MAX_BYTES) float w_buf[kMax] = {};
    CopyInPartial(DT(), in, in_buf, count);
    if constexpr (kBias == kWeightBias) CopyInPartial(df, w, w_buf, count);
    const VF x = Storage<kType>::Load(df, in_buf);
    StoreVector<kType, kBias, kGuard, false, false>(df, x, x, a, b, w_buf, row, out_buf);
    CopyOutPartial(DT(), out_buf, out, count);
}

// The vectors for which the fast path of ScaledExp is exact for this row: those whose every k = round(x / ln2)
// keeps exp(x) * a a normal float. With e = ilogb(a), exp(r) a lies in [2^(e-1/2), 2^(e+3/2)), so p * a has the
// exponent e - 1, e or e + 1, and k in [-124 - e, 125 - e] keeps the result's exponent within [-125, 126]. The test
// is one window of 128 consecutive k, so that it costs integer operations only (InFastWindow): the window's bits
// `base` are those of t = ExpShifted(x) for its lowest k, and t is in the window when bits(t) - base, as an unsigned
// integer, is below 128. The window's top is k = 8 (x up to about 5.5: log-probabilities are <= 0) or lower where
// the range above ends lower; for ordinary coefficients it covers x from about -77 to 5.5. t outside
// [2^23, 2^24), infinite or NaN, never has bits within 2^22 of base, so such lanes always take the general path.
// Rows whose a is zero, subnormal, infinite or NaN, or whose b or a weight is not finite, get base = 0x80000000,
// which no t can reach (t is never -0 or a negative subnormal: the sum of 1.5 * 2^23 and a multiple of 2^-46 is 0 or
// at least 2^-46 in magnitude, and only +0 when 0), so such rows take the general path throughout.
constexpr int kFastWindowBits = 7;

//
// The 16-bit blocks (QuadFast, QuadFastBf16Pairs) test their inputs instead, before widening (InputsInWindow): every
// input in [-X, -0], which FastInputLimit (grad_hwy_shared.h) chooses so that every such x has k in [-124 - e, 0].
// The storage bits of such inputs, read as int16_t, are those from INT16_MIN (-0) to input_limit (-X), and those
// of every other input are greater (positive inputs, +0, the negative ones beyond -X, infinities and NaNs), so one
// signed maximum over the block and one comparison decide: about a third of the operations of the test on t.
// Log-probabilities are <= 0, and a block with a positive one (or +0) takes the general path, with the same bits.
// input_fast is false where the row has no window or e is outside [-124, 125] (there the blocks test nothing and
// every vector goes by RowPairs).
struct FastWindow {
    uint32_t base = 0x80000000u;
    bool input_fast = false;
    int16_t input_limit = 0;
};

// The k for which the fast path is exact for a normal a whose magnitude has the bits a_bits: [-124 - e, 125 - e],
// e = ilogb(a) (read from the exponent field, without a libm call).
struct FastRange {
    int exponent;  // e
    int bottom;
    int top;
};
HWY_INLINE FastRange FastRangeOf(uint32_t a_bits) {
    const int e = static_cast<int>((a_bits >> 23) & 0xff) - 127;
    return FastRange{e, -124 - e, 125 - e};
}

// The bits of t = ExpShifted(x) for a given k.
HWY_INLINE uint32_t ShiftedBitsOf(int k) { return static_cast<uint32_t>(0x4b400000 + k); }

template <aclDataType kType = ACL_FLOAT>
HWY_INLINE FastWindow RowFastWindow(float a, float b, bool weights_finite) {
    FastWindow window;
    if (!std::isnormal(a) || !std::isfinite(b) || !weights_finite) return window;
    uint32_t a_bits;
    std::memcpy(&a_bits, &a, sizeof(a_bits));
    const FastRange range = FastRangeOf(a_bits);
    const int e = range.exponent;
    const int top = HWY_MIN(range.top, 8);
    const int bottom = HWY_MAX(range.bottom, top - ((1 << kFastWindowBits) - 1));
    if (bottom > top) return window;
    window.base = ShiftedBitsOf(bottom);
    if (kType != ACL_FLOAT && e >= FastInputLimits::kLowest && e <= FastInputLimits::kHighest) {
        window.input_fast = true;
        window.input_limit = FastInputLimit(kType, e);
    }
    return window;
}

// Whether every one of the `count` 16-bit inputs at p is in the row's input window (see FastWindow); count is a
// multiple of the lanes of a full vector of int16_t.
HWY_INLINE bool InputsInWindow(const uint16_t *p, size_t count, int16_t input_limit) {
    const hn::ScalableTag<int16_t> d;
    const int16_t *q = reinterpret_cast<const int16_t *>(p);
    auto greatest = hn::LoadU(d, q);
    for (size_t k = hn::Lanes(d); k < count; k += hn::Lanes(d)) greatest = hn::Max(greatest, hn::LoadU(d, q + k));
    return hn::AllFalse(d, hn::Gt(greatest, hn::Set(d, input_limit)));
}

// Whether every lane of t0 and t1 is in the window (see FastWindow): a subtraction per vector, then an or and one
// test for both: no lane of the or may have a bit above the window's 7. On AVX2 and AVX-512 that test is one
// instruction (vptest, vptestmd), which Highway 1.0 does not offer for a multi-bit mask; elsewhere an and and a
// comparison. The three forms decide alike, and either path gives the same bits anyway (ScaledExp).
HWY_INLINE bool InFastWindowOr(hn::Vec<DU> d) {
    const DU du;
    const auto above = hn::Set(du, ~((1u << kFastWindowBits) - 1));
#if HWY_TARGET == HWY_AVX2
    return _mm256_testz_si256(d.raw, above.raw) != 0;
#elif HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    return _mm512_test_epi32_mask(d.raw, above.raw) == 0;
#else
    return hn::AllTrue(du, hn::Eq(hn::And(d, above), hn::Zero(du)));
#endif
}

HWY_INLINE hn::Vec<DU> WindowOffset(VF t, hn::Vec<DU> base) { return hn::Sub(hn::BitCast(DU(), t), base); }

HWY_INLINE bool InFastWindow(VF t0, VF t1, hn::Vec<DU> base) {
    return InFastWindowOr(hn::Or(WindowOffset(t0, base), WindowOffset(t1, base)));
}

// Software prefetch of the input kPrefetchBytes<kBias> ahead. It only changes when lines arrive, never a value.
// Measured, 4096 x 32000, 2 threads, interleaved runs against builds without it (x copy, medians):
//  * AVX2 machine (AMD Zen 1): 4 KiB ahead takes fp32 plain rows from about 2.1x to 1.6-1.75x (2, 4 and 8 KiB ahead
//    alike; the 16-bit rows, bound by their arithmetic there, do not change). Every row prefetches.
//  * AVX-512 machine (AMD Zen 4): rows with a bias term (label smoothing) gain, 2 KiB ahead taking fp32
//    smoothed+weighted from 1.51-1.61x to 1.22-1.35x and bf16 from 2.21-2.30x to 1.83-1.86x; rows without one do not
//    (fp32 plain unchanged, bf16 plain 1.08-1.14x -> 1.16-1.26x), so only bias rows prefetch there. 1 and 4 KiB
//    ahead gained less on the bias rows. With streaming stores the 16-bit rows with a bias term keep it (without it,
//    smoothed+weighted took 1.15x the time, fp16 and bf16 alike), but the fp32 rows done in groups
//    (RowSegmentsWeighted) drop it (with it, two rows at a time took 1.25x). The fp32 rows with weights run as one
//    (FlatRows) drop it on either kind of store (FlatPairsOf).
template <BiasKind kBias, bool kStream, bool kRowGroup>
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr size_t kPrefetchBytes = (kBias == kNoBias || (kStream && kRowGroup)) ? 0 : 2048;
#else
constexpr size_t kPrefetchBytes = 4096;
#endif

// A hint, which never faults; the address may lie past the row's end, so it is formed as an integer.
template <BiasKind kBias, bool kStream, bool kRowGroup = false, typename T>
HWY_INLINE void PrefetchAhead(const T *p) {
    constexpr size_t kAhead = kPrefetchBytes<kBias, kStream, kRowGroup>;
    if constexpr (kAhead != 0) {
        hwy::Prefetch(reinterpret_cast<const uint8_t *>(reinterpret_cast<uintptr_t>(p) + kAhead));
    }
}

// The AVX-512 BF16 instruction vcvtne2ps2bf16 (AMD Zen 4 and later, Intel Cooper Lake and Sapphire Rapids): two
// vectors of fp32 rounded to bf16 in one instruction. It rounds to nearest even exactly as Bf16RoundedHigh does,
// NaN included (the quiet bit set, the payload truncated), but flushes subnormal inputs and results to zero: the
// callers use it only for pairs whose every value is a normal number or infinite (NativeBf16Safe). It runs in the
// kernel "hwy:AVX3_BF16", a second compilation of this target's code, listed where the CPU has the instruction; so
// the same bits come from both kernels, and the tests compare them on such CPUs.
#undef OPENACLNN_GRAD_NATIVE_BF16
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define OPENACLNN_GRAD_NATIVE_BF16 1
#ifndef OPENACLNN_NATIVE_BF16_ATTR
#define OPENACLNN_NATIVE_BF16_ATTR __attribute__((target(HWY_TARGET_STR ",avx512bf16")))
#endif

// out[2i] = even[i], out[2i + 1] = odd[i], rounded to bf16: the instruction packs `even` into the lower and `odd`
// into the upper 16 lanes, and one 16-bit permute interleaves them. Not always_inline: the loops that call it are
// inlined into RowLoopNativeBf16 and RowPairsNativeBf16, which have the instruction set to inline this too (GCC
// refuses an always_inline call from the loops' own bodies, which lack it).
template <bool kStream>
OPENACLNN_NATIVE_BF16_ATTR inline void StoreBf16PairsNative(VF even, VF odd, uint16_t *out) {
    alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                             8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512bh packed = _mm512_cvtne2ps_pbh(odd.raw, even.raw);
    __m512i bits;
    static_assert(sizeof(bits) == sizeof(packed), "512-bit vectors");
    std::memcpy(&bits, &packed, sizeof(bits));
    const __m512i interleaved = _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), bits);
    if constexpr (kStream) {
        _mm512_stream_si512(reinterpret_cast<__m512i *>(out), interleaved);  // out is 64-byte aligned (RowSegment)
    } else {
        _mm512_storeu_si512(out, interleaved);
    }
}
#else
#define OPENACLNN_GRAD_NATIVE_BF16 0
#endif

// Even- and odd-indexed elements of the 2 * lanes bf16 values at p, as exact floats (see RowLoopBf16Pairs).
HWY_INLINE void SplitBf16Pairs(DF df, const uint16_t *p, VF &even, VF &odd) {
    const DU du;
    const auto pairs = hn::LoadU(du, reinterpret_cast<const uint32_t *>(p));
    even = hn::BitCast(df, hn::ShiftLeft<16>(pairs));
    odd = hn::BitCast(df, hn::And(pairs, hn::Set(du, 0xffff0000u)));
}

// exp(x) a of both halves of a pair (the fast or the general path of ScaledExp), with the row's degree.
template <BiasKind kBias, bool kFast, class A>
HWY_INLINE void PairExp(DF df, VF xe, VF xo, VF te, VF to, const A &a, VF &ve, VF &vo) {
    constexpr int kDegree = kRowDegree<ACL_BF16, kBias>;
    constexpr bool kOneStep = kRowOneStep<ACL_BF16, kBias, true>;  // (bf16 rows with a bias term are guarded)
    ve = ScaledExp<kDegree, kOneStep, kFast>(df, xe, kFast ? te : xe, a);
    vo = ScaledExp<kDegree, kOneStep, kFast>(df, xo, kFast ? to : xo, a);
}

// Subtracts the bias term from both halves of a pair (we, wo: the weights of its even and odd elements, for rows
// with weights) and flags their cancelled lanes, exactly as SubBias and Cancelled do.
template <BiasKind kBias>
HWY_INLINE void PairBias(DF df, VF b, VF we, VF wo, VF &ve, VF &vo, hn::Mask<DF> &cancelled_e,
                         hn::Mask<DF> &cancelled_o) {
    ve = SubBiasW<ACL_BF16, kBias>(df, ve, b, we);
    vo = SubBiasW<ACL_BF16, kBias>(df, vo, b, wo);
    cancelled_e = CancelledW<ACL_BF16, kBias>(df, ve, b, we);
    cancelled_o = CancelledW<ACL_BF16, kBias>(df, vo, b, wo);
}

// A pair with a flagged lane (rare: 0.5% of the four-vector blocks of the benchmark's label-smoothed bf16 rows fail
// the block loop's screen, and fewer of their pairs have a flagged lane): redone and stored by the one-vector path,
// which patches the flagged lanes in double. The input is read again there, which is safe for out == in because
// nothing of the pair has been written yet.
template <BiasKind kBias>
HWY_NOINLINE void PairFlagged(DF df, const uint16_t *in, uint16_t *out, VF a, VF b, const float *wj,
                              const GradRowCoefficients &row) {
    const size_t lanes = hn::Lanes(df);
    const VF x0 = Storage<ACL_BF16>::Load(df, in);
    const VF x1 = Storage<ACL_BF16>::Load(df, in + lanes);
    StoreVector<ACL_BF16, kBias, true, false, false>(df, x0, x0, a, b, wj, row, out);
    StoreVector<ACL_BF16, kBias, true, false, false>(df, x1, x1, a, b, kBias == kWeightBias ? wj + lanes : wj, row,
                                                     out + lanes);
}

// Rounds a pair's two halves to bf16 and stores them interleaved: with the native instruction where `native` (the
// fast path of a row where it is safe, see NativeBf16Safe), else by the integer rounding.
template <bool kNative, bool kStream>
HWY_INLINE void StoreBf16Pair(DF df, VF ve, VF vo, bool fast, bool native, uint16_t *out) {
#if OPENACLNN_GRAD_NATIVE_BF16
    if constexpr (kNative) {
        if (HWY_LIKELY(native)) {
            StoreBf16PairsNative<kStream>(ve, vo, out);
            return;
        }
    }
#endif
    (void)native;
    hn::Vec<DU> re, ro;
    if (HWY_LIKELY(fast)) {
        re = Bf16RoundedHigh<false>(df, ve);
        ro = Bf16RoundedHigh<false>(df, vo);
    } else {
        re = Bf16RoundedHigh<true>(df, ve);
        ro = Bf16RoundedHigh<true>(df, vo);
    }
    // Each 32-bit lane's upper half from ro, its lower half the upper half of re: one blend of 16-bit lanes (the
    // one-lane SCALAR target has no 16-bit view of a 32-bit lane: a mask and an or there).
#if HWY_TARGET == HWY_SCALAR
    const DU du;
    hn::StoreU(hn::Or(hn::ShiftRight<16>(re), hn::And(ro, hn::Set(du, 0xffff0000u))), du,
               reinterpret_cast<uint32_t *>(out));
#else
    const hn::Repartition<uint16_t, DU> dh;
    const auto pairs = hn::OddEven(hn::BitCast(dh, ro), hn::BitCast(dh, hn::ShiftRight<16>(re)));
    if constexpr (kStream) {
        hn::Stream(pairs, dh, out);  // a whole vector, aligned (RowSegment)
    } else {
        hn::StoreU(pairs, dh, out);
    }
#endif
}

// bf16 without widening or narrowing shuffles: a vector of 2 * lanes bf16 values is loaded as `lanes` 32-bit
// lanes, each holding an even-indexed element in its lower half and the next (odd) element in its upper half
// (little-endian). A shift and a mask give the even and the odd elements as exact floats, each computed exactly
// as the one-vector path computes it (same operations on the same values: no element depends on where it sits in
// a vector), and the two rounded results are merged back into pairs by a shift and a 16-bit blend, replacing the
// zero-extensions, packs and lane permutes of Storage<ACL_BF16>. The weights are de-interleaved the same way
// (LoadInterleaved2). Pairs with a flagged lane go through PairFlagged. Returns the first column not done.
template <BiasKind kBias, bool kNative, bool kStream>
HWY_INLINE size_t RowLoopBf16Pairs(DF df, const uint16_t *in, uint16_t *out, size_t j, size_t count, VF a, VF b,
                                   const float *w, const GradRowCoefficients &row, FastWindow window) {
    const size_t lanes = hn::Lanes(df);
    const auto base = hn::Set(DU(), window.base);
    for (; j + 2 * lanes <= count; j += 2 * lanes) {
        PrefetchAhead<kBias, kStream>(in + j);
        VF xe, xo;
        SplitBf16Pairs(df, in + j, xe, xo);
        const VF te = ExpShifted(df, xe);
        const VF to = ExpShifted(df, xo);
        const bool fast = InFastWindow(te, to, base);
        VF ve, vo;
        if (HWY_LIKELY(fast)) {
            PairExp<kBias, true>(df, xe, xo, te, to, a, ve, vo);
        } else {
            PairExp<kBias, false>(df, xe, xo, te, to, a, ve, vo);
        }
        if constexpr (kBias != kNoBias) {
            const float *wj = kBias == kWeightBias ? w + j : w;
            VF we = b, wo = b;  // the pair's weights, de-interleaved (kWeightBias only)
            if constexpr (kBias == kWeightBias) hn::LoadInterleaved2(df, wj, we, wo);
            hn::Mask<DF> ce, co;
            PairBias<kBias>(df, b, we, wo, ve, vo, ce, co);
            if (HWY_UNLIKELY(!hn::AllFalse(df, hn::Or(ce, co)))) {
                PairFlagged<kBias>(df, in + j, out + j, a, b, wj, row);
                continue;
            }
        }
        StoreBf16Pair<kNative, kStream>(df, ve, vo, fast, fast, out + j);
    }
    return j;
}

// The pair loop and the vector tail: out[j, end) from in[j, end), every vector by StorePair or StoreVector (bf16 by
// RowLoopBf16Pairs); w is the weight of column 0 (kWeightBias only). Reads each input vector before writing the
// output vector at the same place, so out == in works. Returns end rounded down to whole vectors. kPrefetch: whether
// the pair loop prefetches (PrefetchAhead; FlatPairsOf does not).
template <aclDataType kType, BiasKind kBias, bool kGuard, bool kStream, bool kNative, bool kPrefetch = true>
HWY_INLINE size_t RowPairs(DF df, const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t j,
                           size_t end, VF a, VF b, const float *w, const GradRowCoefficients &row, FastWindow window) {
    const size_t lanes = hn::Lanes(df);
    const auto base = hn::Set(DU(), window.base);
    const float *wj = w;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if constexpr (kType == ACL_BF16) {
        j = RowLoopBf16Pairs<kBias, kNative, kStream>(df, in, out, j, end, a, b, w, row, window);
    }
#endif
    for (; j + 2 * lanes <= end; j += 2 * lanes) {
        if constexpr (kBias == kWeightBias) wj = w + j;
        if constexpr (kPrefetch) PrefetchAhead<kBias, kStream>(in + j);
        const VF x0 = Storage<kType>::Load(df, in + j);
        const VF x1 = Storage<kType>::Load(df, in + j + lanes);
        // A NaN lane's t is NaN, outside the window, so it sends its vectors down the general path.
        const VF t0 = ExpShifted(df, x0);
        const VF t1 = ExpShifted(df, x1);
        const float *wj1 = kBias == kWeightBias ? wj + lanes : w;
        if (HWY_LIKELY(InFastWindow(t0, t1, base))) {
            StorePair<kType, kBias, kGuard, kStream, true>(df, x0, x1, t0, t1, a, b, wj, wj1, row, out + j,
                                                           out + j + lanes);
        } else {
            StorePair<kType, kBias, kGuard, kStream, false>(df, x0, x1, x0, x1, a, b, wj, wj1, row, out + j,
                                                            out + j + lanes);
        }
    }
    for (; j + lanes <= end; j += lanes) {
        if constexpr (kBias == kWeightBias) wj = w + j;
        const VF x = Storage<kType>::Load(df, in + j);
        StoreVector<kType, kBias, kGuard, kStream, false>(df, x, x, a, b, wj, row, out + j);
    }
    return j;
}

// RowPairs out of line, once per type, bias kind, guard (kGuard false: fp16 rows flagged kRowSmallBias only) and
// store kind (and with the AVX-512 BF16 instructions for the kernel that has them): the rare blocks of RowLoop and
// every row's tail call it.
template <aclDataType kType, BiasKind kBias, bool kGuard, bool kStream>
HWY_NOINLINE size_t RowPairsOf(DF df, const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t j,
                               size_t end, VF a, VF b, const float *w, const GradRowCoefficients &row,
                               FastWindow window) {
    return RowPairs<kType, kBias, kGuard, kStream, false>(df, in, out, j, end, a, b, w, row, window);
}

// The fp32 pair loop of FlatRows' rows with a weighted bias term, without the software prefetch on AVX-512 (one
// stream in and one out, which the hardware prefetcher follows; the other targets keep it, unmeasured there). AMD Zen
// 5, every AVX-512 prefetch left out, each store kind forced (ab_libs, 4 rounds): 65536 x 1000 smoothed+weighted took
// 0.880x (0.858-0.901x) the time on regular stores and 0.933x (0.915-1.275x) on streaming ones, while the rows of 2048
// x 128256, in groups of four streams, took 1.136x. Only the flat run's, with the kind measured: 0.941x (0.825-1.063x).
template <bool kStream>
HWY_NOINLINE size_t FlatPairsOf(DF df, const float *in, float *out, size_t j, size_t end, VF a, VF b, const float *w,
                                const GradRowCoefficients &row, FastWindow window) {
    constexpr bool kPrefetch = !(HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL);
    return RowPairs<ACL_FLOAT, kWeightBias, true, kStream, false, kPrefetch>(df, in, out, j, end, a, b, w, row, window);
}

#if OPENACLNN_GRAD_NATIVE_BF16
template <BiasKind kBias, bool kStream>
OPENACLNN_NATIVE_BF16_ATTR HWY_NOINLINE size_t RowPairsNativeBf16(DF df, const uint16_t *in, uint16_t *out, size_t j,
                                                                  size_t end, VF a, VF b, const float *w,
                                                                  const GradRowCoefficients &row, FastWindow window) {
    return RowPairs<ACL_BF16, kBias, true, kStream, true>(df, in, out, j, end, a, b, w, row, window);
}
#endif

template <aclDataType kType, BiasKind kBias, bool kGuard, bool kStream, bool kNative>
HWY_INLINE size_t RowPairsOutOfLine(DF df, const typename Storage<kType>::T *in, typename Storage<kType>::T *out,
                                    size_t j, size_t end, VF a, VF b, const float *w, const GradRowCoefficients &row,
                                    FastWindow window) {
#if OPENACLNN_GRAD_NATIVE_BF16
    if constexpr (kNative && kType == ACL_BF16) {
        return RowPairsNativeBf16<kBias, kStream>(df, in, out, j, end, a, b, w, row, window);
    }
#endif
    return RowPairsOf<kType, kBias, kGuard, kStream>(df, in, out, j, end, a, b, w, row, window);
}

// Whether any lane of v0..v3 has |v| < bound (one bound for every lane; no lane NaN, which the fast path never has).
// On AVX-512, vrangeps takes the smaller magnitude of two vectors with the sign cleared in one instruction, so the four
// vectors cost three of them and a comparison, against four absolute values, four comparisons and three mask ors
// (4096 x 32000 bf16 smoothed+weighted, AVX-512: 0.93x the time, ab_libs 3 rounds). Both forms decide alike.
HWY_INLINE bool AnyAbsBelow(DF df, VF v0, VF v1, VF v2, VF v3, VF bound) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    constexpr int kMinMagnitude = 0x0A;  // imm8: bits 1:0 = 10 (smaller magnitude), bits 3:2 = 10 (sign cleared)
    const __m512 m01 = _mm512_range_ps(v0.raw, v1.raw, kMinMagnitude);
    const __m512 m23 = _mm512_range_ps(v2.raw, v3.raw, kMinMagnitude);
    return !hn::AllFalse(df, hn::Lt(VF{_mm512_range_ps(m01, m23, kMinMagnitude)}, bound));
#else
    const auto below = [&](VF v) { return hn::Lt(hn::Abs(v), bound); };
    return !hn::AllFalse(df, hn::Or(hn::Or(below(v0), below(v1)), hn::Or(below(v2), below(v3))));
#endif
}

// One block of four fp16 vectors (or bf16 ones in the layout of Storage, for streaming stores) if every lane is on
// the fast path and none is flagged by the cancellation guard: the values of StoreVector, bit for bit, with one
// branch for the block: the test of its inputs against the window, taken together with the guard's where the block
// has the guard (the values of a block outside the window are then computed and discarded, never stored). Returns
// false, having written nothing, otherwise. Every value-dependent branch in flight costs on AMD Zen 4 even when
// predicted: blocks of four instead of pairs took fp16 rows with a bias term from about 0.18 to 0.155 ns per element
// in cache, and one branch instead of two per guarded block took bf16 smoothed+weighted rows 0.98x the time.
template <aclDataType kType, BiasKind kBias, bool kGuard, bool kStream>
HWY_INLINE bool QuadFast(DF df, const typename Storage<kType>::T *in, typename Storage<kType>::T *out,
                         const ExpFactors &a, VF b, const float *w, int16_t limit) {
    using S = Storage<kType>;
    const size_t lanes = hn::Lanes(df);
    PrefetchAhead<kBias, kStream>(in);
    PrefetchAhead<kBias, kStream>(in + 2 * lanes);
    const VF x0 = S::Load(df, in), x1 = S::Load(df, in + lanes);
    const VF x2 = S::Load(df, in + 2 * lanes), x3 = S::Load(df, in + 3 * lanes);
    const VF t0 = ExpShifted(df, x0), t1 = ExpShifted(df, x1);
    const VF t2 = ExpShifted(df, x2), t3 = ExpShifted(df, x3);
    constexpr bool kGuarded = kBias != kNoBias && kGuard;
    const bool outside = !InputsInWindow(in, 4 * lanes, limit);  // tested with the guard where there is one
    if (!kGuarded && HWY_UNLIKELY(outside)) return false;
    const float *w1 = kBias == kWeightBias ? w + lanes : w;
    const float *w2 = kBias == kWeightBias ? w + 2 * lanes : w;
    const float *w3 = kBias == kWeightBias ? w + 3 * lanes : w;
    const VF v0 = RowValue<kType, kBias, kGuard, true>(df, x0, t0, a, b, w);
    const VF v1 = RowValue<kType, kBias, kGuard, true>(df, x1, t1, a, b, w1);
    const VF v2 = RowValue<kType, kBias, kGuard, true>(df, x2, t2, a, b, w2);
    const VF v3 = RowValue<kType, kBias, kGuard, true>(df, x3, t3, a, b, w3);
    if constexpr (kBias == kConstBias && kGuard) {
        // as Cancelled
        if (HWY_UNLIKELY(outside | AnyAbsBelow(df, v0, v1, v2, v3, ScaledBias<kType>(df, b)))) return false;
    } else if constexpr (kGuarded) {
        const auto c01 = hn::Or(Cancelled<kType, kBias>(df, v0, b, w), Cancelled<kType, kBias>(df, v1, b, w1));
        const auto c23 = hn::Or(Cancelled<kType, kBias>(df, v2, b, w2), Cancelled<kType, kBias>(df, v3, b, w3));
        if (HWY_UNLIKELY(outside | !hn::AllFalse(df, hn::Or(c01, c23)))) return false;
    }
    if constexpr (kStream) {
        S::template Stream<false>(df, v0, out);
        S::template Stream<false>(df, v1, out + lanes);
        S::template Stream<false>(df, v2, out + 2 * lanes);
        S::template Stream<false>(df, v3, out + 3 * lanes);
    } else {
        S::template Store<false>(df, v0, out);
        S::template Store<false>(df, v1, out + lanes);
        S::template Store<false>(df, v2, out + 2 * lanes);
        S::template Store<false>(df, v3, out + 3 * lanes);
    }
    return true;
}

// The weights of a row segment de-interleaved (SplitWeightPairs) for the bf16 pair loop: even[k] = w_{2k} and
// odd[k] = w_{2k + 1}, columns counted from an origin at which the segment's column 0 is column `first`. Loading a
// pair's weights from them takes two plain loads, against two loads and two shuffles to de-interleave w itself
// (4096 x 32000 bf16 smoothed+weighted: 0.92x the time).
//
// screen_weight: where nonzero, the greatest |w_j| of the segment, with which the pair loop screens its blocks for
// the cancellation guard: |v| < (|b| 2^-12) screen_weight for no lane implies |v| < (|b| 2^-12) |w_j| for none (the
// guard's test, CancelledW, rounds the same product of a smaller |w_j| no higher), so a block that passes the screen
// is one the guard passes, and one that fails it is redone by the exact guard (RowPairs): the bits do not change.
// The screen costs an absolute value and a comparison per vector against the guard's four operations
// (4096 x 32000 bf16 smoothed+weighted: 0.9x the time). It flags more lanes the smaller |w_j| is against
// screen_weight, so the segment's weights must lie within a factor kScreenWeightRange of each other (zeros aside:
// their bias term is 0); else screen_weight is 0 and every lane is tested with its own weight.
struct PairWeights {
    const float *even = nullptr;  // null: not de-interleaved (the pair loop de-interleaves w itself)
    const float *odd = nullptr;
    size_t first = 0;
    float screen_weight = 0.0f;
};
constexpr float kScreenWeightRange = 8.0f;

// The weights of the even- and the odd-indexed elements of the pairs from segment column j on.
HWY_INLINE void PairWeightsAt(const PairWeights &pairs, size_t j, const float *&we, const float *&wo) {
    const size_t col = pairs.first + j;
    const size_t k = col / 2;
    if (col % 2 == 0) {
        we = pairs.even + k;
        wo = pairs.odd + k;
    } else {
        we = pairs.odd + k;       // w_col = w_{2k + 1}
        wo = pairs.even + k + 1;  // w_{col + 1} = w_{2k + 2}
    }
}

// QuadFast for bf16 in the layout of RowLoopBf16Pairs: two pairs (4 * lanes elements). w: the block's weights
// (kWeightBias only), or where we is not null, we and wo: the weights of its even- and odd-indexed elements, each
// contiguous (PairWeights). screened: the guard is screened with `screen`, (|b| 2^-12) screen_weight (PairWeights).
template <BiasKind kBias, bool kNative, bool kStream>
HWY_INLINE bool QuadFastBf16Pairs(DF df, const uint16_t *in, uint16_t *out, const ExpFactors &a, VF b, const float *w,
                                  const float *we, const float *wo, bool screened, VF screen, int16_t limit) {
    const size_t lanes = hn::Lanes(df);
    PrefetchAhead<kBias, kStream>(in);
    PrefetchAhead<kBias, kStream>(in + 2 * lanes);
    VF xe0, xo0, xe1, xo1;
    SplitBf16Pairs(df, in, xe0, xo0);
    SplitBf16Pairs(df, in + 2 * lanes, xe1, xo1);
    const VF te0 = ExpShifted(df, xe0), to0 = ExpShifted(df, xo0);
    const VF te1 = ExpShifted(df, xe1), to1 = ExpShifted(df, xo1);
    const bool outside = !InputsInWindow(in, 4 * lanes, limit);  // tested with the guard where there is one
    if (kBias == kNoBias && HWY_UNLIKELY(outside)) return false;
    VF ve0, vo0, ve1, vo1;
    PairExp<kBias, true>(df, xe0, xo0, te0, to0, a, ve0, vo0);
    PairExp<kBias, true>(df, xe1, xo1, te1, to1, a, ve1, vo1);
    if constexpr (kBias != kNoBias) {
        VF we0 = b, wo0 = b, we1 = b, wo1 = b;
        if constexpr (kBias == kWeightBias) {
            if (we != nullptr) {
                we0 = hn::LoadU(df, we), wo0 = hn::LoadU(df, wo);
                we1 = hn::LoadU(df, we + lanes), wo1 = hn::LoadU(df, wo + lanes);
            } else {
                hn::LoadInterleaved2(df, w, we0, wo0);
                hn::LoadInterleaved2(df, w + 2 * lanes, we1, wo1);
            }
        }
        (void)w;
        (void)we;
        (void)wo;
        if (kBias == kConstBias || screened) {
            // One bound for every lane: the guard's own for a constant bias term (CancelledW), else the screen.
            ve0 = SubBiasW<ACL_BF16, kBias>(df, ve0, b, we0), vo0 = SubBiasW<ACL_BF16, kBias>(df, vo0, b, wo0);
            ve1 = SubBiasW<ACL_BF16, kBias>(df, ve1, b, we1), vo1 = SubBiasW<ACL_BF16, kBias>(df, vo1, b, wo1);
            if (HWY_UNLIKELY(outside | AnyAbsBelow(df, ve0, vo0, ve1, vo1, screen))) return false;
        } else {
            hn::Mask<DF> ce0, co0, ce1, co1;
            PairBias<kBias>(df, b, we0, wo0, ve0, vo0, ce0, co0);
            PairBias<kBias>(df, b, we1, wo1, ve1, vo1, ce1, co1);
            if (HWY_UNLIKELY(outside | !hn::AllFalse(df, hn::Or(hn::Or(ce0, co0), hn::Or(ce1, co1))))) return false;
        }
    }
    (void)screened;
    (void)screen;
    StoreBf16Pair<kNative, kStream>(df, ve0, vo0, true, true, out);
    StoreBf16Pair<kNative, kStream>(df, ve1, vo1, true, true, out + 2 * lanes);
    return true;
}

// out[j, count) from in[j, count) (see RowPairs). The 16-bit types, bound by their arithmetic, go in blocks of four
// vectors (QuadFast); a block that leaves the fast path, or has a flagged lane, is done again from its input by
// RowPairs, out of line, as is the row's tail: the same bits either way. fp32 rows, bound by memory and without the
// guard, keep the pairs (blocks of four gained nothing measurable there). pairs: bf16 rows with weights only.
template <aclDataType kType, BiasKind kBias, bool kGuard, bool kStream, bool kNative = false>
HWY_INLINE void RowLoop(DF df, const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t j,
                        size_t count, VF a, VF b, const float *w, const PairWeights &pairs,
                        const GradRowCoefficients &row, FastWindow window, size_t *done) {
    if constexpr (kType != ACL_FLOAT) {
        const size_t block = 4 * hn::Lanes(df);
        const size_t blocks_end = window.input_fast ? count : j;  // else every block would go by RowPairs
        const ExpFactors factors = MakeExpFactors<kRowDegree<kType, kBias>>(df, a);
        const float *we = nullptr, *wo = nullptr;  // at column j (bf16 with weights, where de-interleaved)
        if (kType == ACL_BF16 && kBias == kWeightBias && pairs.even != nullptr) PairWeightsAt(pairs, j, we, wo);
        const bool screened = pairs.screen_weight != 0.0f;
        const VF scaled_b = ScaledBias<kType>(df, b);
        const VF screen = kBias == kConstBias ? scaled_b : hn::Mul(scaled_b, hn::Set(df, pairs.screen_weight));
        const size_t pair_step = we != nullptr ? block / 2 : 0;
        for (; j + block <= blocks_end; j += block, we += pair_step, wo += pair_step) {
            const float *wj = kBias == kWeightBias ? w + j : w;
            bool done_fast;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            if constexpr (kType == ACL_BF16) {
                done_fast = QuadFastBf16Pairs<kBias, kNative, kStream>(df, in + j, out + j, factors, b, wj, we, wo,
                                                                       screened, screen, window.input_limit);
            } else
#endif
            {
                done_fast =
                    QuadFast<kType, kBias, kGuard, kStream>(df, in + j, out + j, factors, b, wj, window.input_limit);
            }
            if (HWY_UNLIKELY(!done_fast)) {
                RowPairsOutOfLine<kType, kBias, kGuard, kStream, kNative>(df, in, out, j, j + block, a, b, w, row,
                                                                          window);
            }
        }
    }
    *done = RowPairsOutOfLine<kType, kBias, kGuard, kStream, kNative>(df, in, out, j, count, a, b, w, row, window);
}

// The row loops out of line: one function per type, bias kind, guard and store kind, each called from RowSegment.
// Inlined, every kernel held some twenty copies of them, and the sanitizer builds of this file took minutes per
// target.
template <aclDataType kType, BiasKind kBias, bool kGuard, bool kStream>
HWY_NOINLINE void RowLoopOf(DF df, const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t j,
                            size_t count, VF a, VF b, const float *w, const PairWeights &pairs,
                            const GradRowCoefficients &row, FastWindow window, size_t *done) {
    RowLoop<kType, kBias, kGuard, kStream>(df, in, out, j, count, a, b, w, pairs, row, window, done);
}

#if OPENACLNN_GRAD_NATIVE_BF16
template <BiasKind kBias, bool kStream>
OPENACLNN_NATIVE_BF16_ATTR HWY_NOINLINE void RowLoopNativeBf16(DF df, const uint16_t *in, uint16_t *out, size_t j,
                                                               size_t count, VF a, VF b, const float *w,
                                                               const PairWeights &pairs, const GradRowCoefficients &row,
                                                               FastWindow window, size_t *done) {
    RowLoop<ACL_BF16, kBias, true, kStream, true>(df, in, out, j, count, a, b, w, pairs, row, window, done);
}
#endif

// RowLoopOf, or RowLoopNativeBf16 for kNative bf16 rows (as RowPairsOutOfLine chooses for the pair loop).
template <aclDataType kType, BiasKind kBias, bool kGuard, bool kStream, bool kNative>
HWY_INLINE void RowLoopOutOfLine(DF df, const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t j,
                                 size_t count, VF a, VF b, const float *w, const PairWeights &pairs,
                                 const GradRowCoefficients &row, FastWindow window, size_t *done) {
#if OPENACLNN_GRAD_NATIVE_BF16
    if constexpr (kNative && kType == ACL_BF16) {
        RowLoopNativeBf16<kBias, kStream>(df, in, out, j, count, a, b, w, pairs, row, window, done);
        return;
    }
#endif
    RowLoopOf<kType, kBias, kGuard, kStream>(df, in, out, j, count, a, b, w, pairs, row, window, done);
}

// Streaming stores write whole vectors of fp32's width (one vector of fp32; two of fp16 or bf16, the bf16 pair
// loop's unit) at addresses aligned to that width. StreamPeel(out): the number of elements before the first such
// boundary at out (at most lanes - 1 for fp32, 2 lanes - 1 for 16-bit types), or kNotElementAligned where out is not
// even aligned to its element size (nothing streams then).
constexpr size_t kNotElementAligned = ~size_t{0};

template <typename T>
HWY_INLINE size_t StreamPeel(const T *out) {
    const size_t align = hn::Lanes(DF()) * sizeof(float);
    const size_t misalign = reinterpret_cast<uintptr_t>(out) % align;
    if (misalign % sizeof(T) != 0) return kNotElementAligned;
    return misalign == 0 ? 0 : (align - misalign) / sizeof(T);
}

// native: the row may use the native bf16 conversion (only ever true in kNative kernels, see NativeBf16Safe).
// pairs: the weights de-interleaved (bf16 rows with weights only).
template <aclDataType kType, BiasKind kBias, bool kGuard, bool kNative>
HWY_NOINLINE void RowSegment(const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t count,
                             const GradRowCoefficients &row, const float *w, const PairWeights &pairs,
                             bool weights_finite, bool stream, bool native) {
    if (HWY_UNLIKELY(RowNeedsDouble(row))) {
        StoreExactRow(kType, in, out, count, row, w);
        return;
    }
    const DF df;
    const size_t lanes = hn::Lanes(df);
    const VF a = hn::Set(df, static_cast<float>(row.a));
    const VF b = hn::Set(df, static_cast<float>(row.b));
    const FastWindow window =
        RowFastWindow<kType>(static_cast<float>(row.a), static_cast<float>(row.b), weights_finite);
    size_t j = 0;
    if (stream) {
        // The elements before the first aligned store (StreamPeel), by at most two partial vectors.
        const size_t peel = StreamPeel(out);
        if (peel == kNotElementAligned) {
            stream = false;  // plain stores
        } else {
            j = HWY_MIN(count, peel);
            for (size_t k = 0; k < j; k += lanes) {
                RowPartial<kType, kBias, kGuard>(df, in + k, out + k, HWY_MIN(lanes, j - k), a, b, w + (w ? k : 0),
                                                 row);
            }
        }
    }
    if (count < lanes) {
        // Less than a vector (rows of a few classes): straight to the tail.
    } else if (stream && native) {
        RowLoopOutOfLine<kType, kBias, kGuard, true, kNative>(df, in, out, j, count, a, b, w, pairs, row, window, &j);
    } else if (stream) {
        RowLoopOutOfLine<kType, kBias, kGuard, true, false>(df, in, out, j, count, a, b, w, pairs, row, window, &j);
    } else if (native) {
        RowLoopOutOfLine<kType, kBias, kGuard, false, kNative>(df, in, out, j, count, a, b, w, pairs, row, window, &j);
    } else {
        RowLoopOutOfLine<kType, kBias, kGuard, false, false>(df, in, out, j, count, a, b, w, pairs, row, window, &j);
    }
    if (j < count) RowPartial<kType, kBias, kGuard>(df, in + j, out + j, count - j, a, b, w + (w ? j : 0), row);
}

// kRows fp32 rows with weights at once (2 or 4), over the same columns: each weight vector is loaded once for all of
// them. The weights are a third stream beside logProb and out, read from the L2 cache, and out of cache it costs more
// than its operations: in a bare loop of loads and stores (2 threads, 4096 x 32000), adding a weight load per vector
// took the time from 1.17x to 1.45x a memcpy's, one per two rows' vectors back to 1.09x; with the exp's arithmetic
// and streaming stores, one per two rows' vectors 0.88x, per four rows' 0.85x, against 0.83x without weights. Here:
// two rows at a time took fp32 smoothed+weighted to 0.917x the time of one row at a time (x copy 1.48 -> 1.39, before
// streaming stores). Rows whose b is the same (kSharedBias: every row of a mean or sum reduction) also share the bias
// term b w_j, one multiplication per weight vector instead of one per row; four rows at a time with it took
// smoothed+weighted to 0.90x the time of two (64 x 32000, one thread, in L3: 604-616 against 675-700 us). Each row
// keeps its prefetch, except with streaming stores (kStream: the rows start at the same peel, see kPrefetchBytes).
// Every element gets RowSegment's bits (the same operations on the same values); a block of vectors off the fast
// path in any row is redone for every row by the one-row loop, out of line, as is each row's tail.
// Not on SVE, whose vectors cannot be array elements: there the rows go one at a time (kRowGroups).
constexpr bool kRowGroups = !HWY_HAVE_SCALABLE;
#if !HWY_HAVE_SCALABLE
template <size_t kRows, bool kSharedBias, bool kStream>
HWY_NOINLINE void RowSegmentsWeighted(const float *const *in, float *const *out, size_t count,
                                      const GradRowCoefficients *const *rows, const float *w, bool weights_finite) {
    static_assert(kRows == 2 || kRows == 4, "row groups of two or four");
    constexpr int kDegree = Storage<ACL_FLOAT>::kExpDegree;
    constexpr size_t kVectors = 4 / kRows;  // per row and iteration
    const DF df;
    const size_t lanes = hn::Lanes(df);
    VF a[kRows], b[kRows];
    FastWindow window[kRows];
    hn::Vec<DU> base[kRows];
    for (size_t q = 0; q < kRows; ++q) {
        a[q] = hn::Set(df, static_cast<float>(rows[q]->a));
        b[q] = hn::Set(df, static_cast<float>(rows[q]->b));
        window[q] = RowFastWindow(static_cast<float>(rows[q]->a), static_cast<float>(rows[q]->b), weights_finite);
        base[q] = hn::Set(DU(), window[q].base);
    }
    size_t j = 0;
    if constexpr (kStream) {
        // The columns before the rows' first aligned store (the caller checked that the rows share their peel).
        j = HWY_MIN(count, StreamPeel(out[0]));
        if (j != 0) {
            for (size_t q = 0; q < kRows; ++q) {
                RowPartial<ACL_FLOAT, kWeightBias, true>(df, in[q], out[q], j, a[q], b[q], w, *rows[q]);
            }
        }
    }
    const auto store = [&](VF v, float *p) {
        if constexpr (kStream) {
            hn::Stream(v, df, p);
        } else {
            hn::StoreU(v, df, p);
        }
    };
    const size_t step = kVectors * lanes;
    for (; j + step <= count; j += step) {
        VF x[kRows][kVectors], t[kRows][kVectors];
        hn::Vec<DU> offsets = hn::Zero(DU());
        for (size_t q = 0; q < kRows; ++q) {
            PrefetchAhead<kWeightBias, kStream, true>(in[q] + j);
            for (size_t v = 0; v < kVectors; ++v) {
                x[q][v] = hn::LoadU(df, in[q] + j + v * lanes);
                t[q][v] = ExpShifted(df, x[q][v]);
                offsets = hn::Or(offsets, WindowOffset(t[q][v], base[q]));
            }
        }
        if (HWY_UNLIKELY(!InFastWindowOr(offsets))) {
            for (size_t q = 0; q < kRows; ++q) {
                RowPairsOf<ACL_FLOAT, kWeightBias, true, kStream>(df, in[q], out[q], j, j + step, a[q], b[q], w,
                                                                  *rows[q], window[q]);
            }
            continue;
        }
        for (size_t v = 0; v < kVectors; ++v) {
            const VF wv = hn::LoadU(df, w + j + v * lanes);
            // RowValue's operations: m + (-b) w_j (SubBiasW), with (-b) w_j formed once where every row has the same b.
            const VF shared_bias = kSharedBias ? hn::Mul(hn::Neg(b[0]), wv) : wv;
            for (size_t q = 0; q < kRows; ++q) {
                const VF m =
                    ScaledExp<kDegree, kRowOneStep<ACL_FLOAT, kWeightBias, true>, true>(df, x[q][v], t[q][v], a[q]);
                store(kSharedBias ? hn::Add(shared_bias, m) : SubBiasW<ACL_FLOAT, kWeightBias>(df, m, b[q], wv),
                      out[q] + j + v * lanes);
            }
        }
    }
    for (size_t q = 0; q < kRows; ++q) {
        const size_t done = RowPairsOf<ACL_FLOAT, kWeightBias, true, kStream>(df, in[q], out[q], j, count, a[q], b[q],
                                                                              w, *rows[q], window[q]);
        if (done < count) {
            RowPartial<ACL_FLOAT, kWeightBias, true>(df, in[q] + done, out[q] + done, count - done, a[q], b[q],
                                                     w + done, *rows[q]);
        }
    }
}

#endif  // !HWY_HAVE_SCALABLE

template <typename T>
HWY_INLINE void ZeroSegment(T *out, size_t count) {
    std::memset(out, 0, count * sizeof(T));  // +0 in every format
}

// What the weights allow (grad_kernel.h).
using WeightTraits = GradWeightTraits;

// GradKernelInfo::weigh. The traits from the weights' bit patterns as unsigned integers, whose order is the floats'
// for non-negative finite ones: u = |w|'s bits; finite where max u is below infinity's; positive where besides no
// sign bit is set (their OR); min_nonzero from min (u - 1), in which +0 wraps to the greatest value. Kept in the same
// form for the elements one at a time.
struct WeightBits {
    uint32_t max_abs = 0;
    uint32_t any = 0;  // OR of the bit patterns
    uint32_t min_abs_less_one = ~0u;

    HWY_INLINE void Add(float x) {
        uint32_t bits;
        std::memcpy(&bits, &x, sizeof bits);
        const uint32_t abs = bits & 0x7fffffffu;
        max_abs = HWY_MAX(max_abs, abs);
        any |= bits;
        min_abs_less_one = HWY_MIN(min_abs_less_one, abs - 1u);
    }
    HWY_INLINE WeightTraits Traits() const {
        WeightTraits traits;
        traits.finite = max_abs < 0x7f800000u;
        traits.positive = traits.finite && (any & 0x80000000u) == 0;
        const uint32_t min_bits = min_abs_less_one + 1u;  // 0 where every weight is +-0
        std::memcpy(&traits.max, &max_abs, sizeof traits.max);
        if (min_bits != 0) std::memcpy(&traits.min_nonzero, &min_bits, sizeof traits.min_nonzero);
        return traits;
    }
};

// kSlices slices from first_slice on (grad_kernel.h), each lane one of W's parts (where kSum), in the order of their
// definition, the weights widened to double as they are loaded. Where vectors have a fixed size the sums stay in
// registers (in memory they waited on each store: 3x the time), and so do the traits, one accumulator of each per
// vector (one for all was a chain that every vector waited on: 1 x 152064, perf, the samples on the instruction after
// each vmaxps).
// The float tag of the pass: as many lanes as the sums' doubles where it sums, else a slice's worth at most (the
// traits alone: the lanes of a whole vector, four times fewer operations than one lane per double).
template <bool kSum>
using WeighFloats = std::conditional_t<kSum, hn::Rebind<float, hn::CappedTag<double, kWeightSliceParts>>,
                                       hn::CappedTag<float, kWeightSliceParts>>;

template <size_t kSlices, bool kSum>
HWY_INLINE WeightTraits WeighSlices(const float *w, int64_t c, int first_slice, double *part) {
    const WeighFloats<kSum> df;
    const std::conditional_t<kSum, hn::Rebind<double, decltype(df)>, hn::CappedTag<double, 1>> dd;  // (unused alone)
    const hn::RebindToUnsigned<decltype(df)> du;
    using VU = hn::Vec<decltype(du)>;
    const VU abs_mask = hn::Set(du, 0x7fffffffu);
    const VU one = hn::Set(du, 1u);
    const int64_t first = static_cast<int64_t>(first_slice) * kWeightSliceParts;
    const int64_t count = static_cast<int64_t>(kSlices) * kWeightSliceParts;
    const int64_t whole = c / kWeightSumParts * kWeightSumParts;
    WeightBits bits;
#if HWY_HAVE_SCALABLE
    const size_t lanes = hn::Lanes(df);
    VU max_abs = hn::Zero(du), any = hn::Zero(du), min_less_one = hn::Set(du, ~0u);
    for (int64_t j = 0; j < whole; j += kWeightSumParts) {
        for (int64_t k = first; k < first + count; k += static_cast<int64_t>(lanes)) {
            const auto x = hn::LoadU(df, w + j + k);
            if constexpr (kSum) hn::StoreU(hn::Add(hn::LoadU(dd, part + k), hn::PromoteTo(dd, x)), dd, part + k);
            const VU u = hn::BitCast(du, x);
            const VU abs = hn::And(u, abs_mask);
            max_abs = hn::Max(max_abs, abs);
            any = hn::Or(any, u);
            min_less_one = hn::Min(min_less_one, hn::Sub(abs, one));
        }
    }
#else
    constexpr size_t kLanes = hn::MaxLanes(df);
    constexpr size_t kVectors = kSlices * kWeightSliceParts / kLanes;
    hn::Vec<decltype(dd)> sums[kSum ? kVectors : 1];
    VU max_of[kVectors], any_of[kVectors], min_of[kVectors];
    for (size_t v = 0; v < kVectors; ++v) {
        if constexpr (kSum) sums[v] = hn::LoadU(dd, part + first + static_cast<int64_t>(v * kLanes));
        max_of[v] = any_of[v] = hn::Zero(du);
        min_of[v] = hn::Set(du, ~0u);
    }
    for (int64_t j = 0; j < whole; j += kWeightSumParts) {
        HWY_UNROLL(64)
        for (size_t v = 0; v < kVectors; ++v) {
            const auto x = hn::LoadU(df, w + j + first + static_cast<int64_t>(v * kLanes));
            if constexpr (kSum) sums[v] = hn::Add(sums[v], hn::PromoteTo(dd, x));
            const VU u = hn::BitCast(du, x);
            const VU abs = hn::And(u, abs_mask);
            max_of[v] = hn::Max(max_of[v], abs);
            any_of[v] = hn::Or(any_of[v], u);
            min_of[v] = hn::Min(min_of[v], hn::Sub(abs, one));
        }
    }
    VU max_abs = max_of[0], any = any_of[0], min_less_one = min_of[0];
    for (size_t v = 0; v < kVectors; ++v) {
        if constexpr (kSum) hn::StoreU(sums[v], dd, part + first + static_cast<int64_t>(v * kLanes));
        max_abs = hn::Max(max_abs, max_of[v]);
        any = hn::Or(any, any_of[v]);
        min_less_one = hn::Min(min_less_one, min_of[v]);
    }
#endif
    alignas(HWY_MAX_BYTES) uint32_t lanes_of[3][HWY_MAX_BYTES / sizeof(uint32_t)];
    hn::StoreU(max_abs, du, lanes_of[0]);
    hn::StoreU(any, du, lanes_of[1]);
    hn::StoreU(min_less_one, du, lanes_of[2]);
    for (size_t i = 0; i < hn::Lanes(du); ++i) {
        bits.max_abs = HWY_MAX(bits.max_abs, lanes_of[0][i]);
        bits.any |= lanes_of[1][i];
        bits.min_abs_less_one = HWY_MIN(bits.min_abs_less_one, lanes_of[2][i]);
    }
    // The last, partial group of kWeightSumParts: element whole + k belongs to part k.
    for (int64_t k = first; k < first + count && whole + k < c; ++k) {
        if constexpr (kSum) part[k] += static_cast<double>(w[whole + k]);
        bits.Add(w[whole + k]);
    }
    return bits.Traits();
}

template <bool kSum>
HWY_INLINE WeightTraits WeighOf(const float *w, int64_t c, int first_slice, int slices, double *part) {
    switch (slices) {
        case 1: return WeighSlices<1, kSum>(w, c, first_slice, part);
        case 2: return WeighSlices<2, kSum>(w, c, first_slice, part);
        case 3: return WeighSlices<3, kSum>(w, c, first_slice, part);
        default: return WeighSlices<kWeightSlices, kSum>(w, c, first_slice, part);
    }
}

WeightTraits Weigh(const float *w, int64_t c, int first_slice, int slices, double *part) {
    if (slices <= 0) return WeightTraits{};
    return part != nullptr ? WeighOf<true>(w, c, first_slice, slices, part)
                           : WeighOf<false>(w, c, first_slice, slices, part);
}

// The traits every tile of a call decides by: those of all C weights (grad_kernel.h), from the prologue where it
// found them, else found here.
HWY_INLINE WeightTraits AllWeightTraits(const GradKernelArgs &args) {
    if (args.weight_traits != nullptr) return *args.weight_traits;
    if (args.weight == nullptr) return WeightTraits{};
    if (args.weight_stride == 1) return Weigh(args.weight, args.c, 0, kWeightSlices, nullptr);
    WeightBits bits;
    for (int64_t j = 0; j < args.c; ++j) bits.Add(args.weight[j * args.weight_stride]);
    return bits.Traits();
}

// PairWeights::screen_weight for a segment's weights: their greatest magnitude where they lie within
// kScreenWeightRange of each other, else 0 (no screen).
HWY_INLINE float ScreenWeight(const WeightTraits &weights) {
    return weights.finite && weights.max <= kScreenWeightRange * weights.min_nonzero ? weights.max : 0.0f;
}

// Whether the native bf16 conversion (StoreBf16PairsNative, which flushes subnormals) may round the pair loop's
// fast-path values of a row whose bias term is b w_j, for |b| = b_abs and the nonzero |w_j| within [w_min_nonzero,
// w_max]. Those values are v = exp(x) a - b w_j with |exp(x) a| >= 2^-125 (a normal number: FastWindow) that the
// cancellation guard of the row's degree 5 lets through, so |v| >= (|b| 2^-12) |w_j|, rounded once (|b| 2^-12 is
// exact for |b| >= 2^-114). Hence v is normal where |b w_j| >= 2^-111 (2^-123 and the rounding: well above 2^-126),
// and also where |b w_j| < 2^-126 (|v| > 2^-125 - 2^-126); w_j = 0 gives v = exp(x) a. A row without weights has
// w_j = 1. (Test LanesPastTheGuardNearSubnormal fails with the bound of degree 4's guard, 2^-116, here.)
HWY_INLINE bool NativeBf16Safe(double b_abs, double w_min_nonzero, double w_max) {
    return (b_abs >= 0x1p-110 && b_abs * w_min_nonzero >= 0x1p-111) || b_abs * w_max < 0x1p-126;
}

// RowSegment for a row with a bias term: without the cancellation guard for fp16 rows flagged kRowSmallBias
// (kCancellationBound says why they may skip it), with it otherwise.
template <aclDataType kType, BiasKind kBias, bool kNative>
HWY_INLINE void RowSegmentBiased(const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t count,
                                 const GradRowCoefficients &row, const float *w, const PairWeights &pairs,
                                 bool weights_finite, bool stream, bool native) {
    if constexpr (kType == ACL_FLOAT16) {
        if ((row.flags & kRowSmallBias) != 0) {
            RowSegment<kType, kBias, false, kNative>(in, out, count, row, w, pairs, weights_finite, stream, native);
            return;
        }
    }
    RowSegment<kType, kBias, true, kNative>(in, out, count, row, w, pairs, weights_finite, stream, native);
}

// Whether a row has no bias term (kNoBias): b == +0 and every weight finite and non-negative (WeightTraits).
HWY_INLINE bool RowWithoutBias(const GradRowCoefficients &row, const WeightTraits &weights) {
    return row.b == 0.0 && !std::signbit(row.b) && weights.positive;
}

// One row's segment with the bias kind the row needs (see BiasKind); w is the weight of column 0 or nullptr.
template <aclDataType kType, bool kNative>
HWY_INLINE void RowSegmentAnyBias(const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t count,
                                  const GradRowCoefficients &row, const float *w, const PairWeights &pairs,
                                  WeightTraits weights, bool stream) {
    const double b_abs = std::fabs(static_cast<double>(static_cast<float>(row.b)));
    if (RowWithoutBias(row, weights)) {
        RowSegment<kType, kNoBias, true, kNative>(in, out, count, row, nullptr, pairs, weights.finite, stream, kNative);
    } else if (w == nullptr) {
        RowSegmentBiased<kType, kConstBias, kNative>(in, out, count, row, nullptr, pairs, weights.finite, stream,
                                                     kNative && NativeBf16Safe(b_abs, 1.0, 1.0));
    } else {
        RowSegmentBiased<kType, kWeightBias, kNative>(
            in, out, count, row, w, pairs, weights.finite, stream,
            kNative && NativeBf16Safe(b_abs, weights.min_nonzero, weights.max));
    }
}

// Whether a row takes RowSegmentAnyBias's weighted path (a bias term b w_j, coefficients the vector path
// represents), so that RowSegmentsWeighted may do it together with others.
HWY_INLINE bool RowWeighted(const GradRowCoefficients &row, const WeightTraits &weights) {
    return row.kind != kRowZero && !RowWithoutBias(row, weights) && !RowNeedsDouble(row);
}

// A group of kRows fp32 rows with weights (RowSegmentsWeighted), with the store kind and bias sharing they allow:
// streaming stores where the caller streams and one peel aligns every row (GradTileContiguous groups rows aligned
// alike where it can; a group whose starts differ in alignment takes regular stores, which measured faster than
// streaming its rows one at a time: 4096 x 32000 smoothed+weighted, one row at a time 1.47x the time of regular
// stores, two at a time 0.70x), and a shared bias term where every row's b rounds to the same float.
#if !HWY_HAVE_SCALABLE
template <size_t kRows>
HWY_INLINE void RunWeightedRows(const float *const *in, float *const *out, size_t count,
                                const GradRowCoefficients *const *rows, const float *w, bool weights_finite,
                                bool stream) {
    const auto float_bits = [](double value) {
        const float f = static_cast<float>(value);
        uint32_t bits;
        std::memcpy(&bits, &f, sizeof(bits));
        return bits;
    };
    const size_t peel = StreamPeel(out[0]);
    bool shared = true;
    for (size_t q = 1; q < kRows; ++q) {
        stream = stream && peel != kNotElementAligned && StreamPeel(out[q]) == peel;
        shared = shared && float_bits(rows[q]->b) == float_bits(rows[0]->b);
    }
    if (stream && shared) {
        RowSegmentsWeighted<kRows, true, kCanStream>(in, out, count, rows, w, weights_finite);
    } else if (stream) {
        RowSegmentsWeighted<kRows, false, kCanStream>(in, out, count, rows, w, weights_finite);
    } else if (shared) {
        RowSegmentsWeighted<kRows, true, false>(in, out, count, rows, w, weights_finite);
    } else {
        RowSegmentsWeighted<kRows, false, false>(in, out, count, rows, w, weights_finite);
    }
}
#endif  // !HWY_HAVE_SCALABLE

// ---- target elements ------------------------------------------------------------------------------------------------

// The target column's element, computed exactly as the reference kernel computes every element (double, one
// rounding): *out = round(exp(x) a - b weight - g), exp being ExpDouble (common/exp_double.h). Compiled for each
// target: as baseline code called from the vector code it ran with the upper halves of the vector registers dirty
// (vector_state.h), and 16384 x 10 bf16 spent 23% of its time in it (fp32: 5%). Its double operations and conversions
// are exact IEEE ones, so every target stores the same bits.
HWY_INLINE double TargetValue(double x, const GradRowCoefficients &row, double weight) {
    double value = ExpDouble(x) * row.a - row.b * weight;
    return value - row.g;
}

// The weight of the row's target column (1 without weights).
HWY_INLINE double TargetWeight(const GradKernelArgs &args, const GradRowCoefficients &row) {
    return args.weight ? static_cast<double>(args.weight[row.col * args.weight_stride]) : 1.0;
}

template <aclDataType kType>
HWY_INLINE void StoreTarget(const typename Storage<kType>::T *x, typename Storage<kType>::T *out,
                            const GradRowCoefficients &row, double weight) {
    StoreElement<kType>(out, 0, TargetValue(LoadElement<kType>(x, 0), row, weight));
}

using DD = hn::ScalableTag<double>;
using VD = hn::Vec<DD>;

// ExpDouble over a vector of doubles: the same steps in the same order, so every lane gets the scalar function's bits,
// on every target.
HWY_INLINE VD ExpDoubleV(DD dd, VD x) {
    namespace ed = exp_double;
    const hn::RebindToSigned<DD> di;
    const VD round = hn::Set(dd, ed::kRound);
    const VD xc = hn::Min(hn::Max(x, hn::Set(dd, ed::kLowest)), hn::Set(dd, ed::kHighest));  // NaN: see the end
    const VD t = hn::Add(hn::Mul(xc, hn::Set(dd, ed::kLog2e)), round);
    const VD kd = hn::Sub(t, round);
    const auto k = hn::Sub(hn::BitCast(di, t), hn::BitCast(di, round));
    const VD r_hi = hn::Sub(xc, hn::Mul(kd, hn::Set(dd, ed::kLn2Hi)));
    const VD r_lo = hn::Mul(kd, hn::Set(dd, ed::kLn2Lo));
    const VD r = hn::Sub(r_hi, r_lo);
    VD p = hn::Set(dd, ed::kTaylor[0]);
    for (int i = 1; i < 12; ++i) p = hn::Add(hn::Mul(p, r), hn::Set(dd, ed::kTaylor[i]));
    const VD small = hn::Sub(hn::Mul(hn::Mul(r, r), p), r_lo);
    const VD s_hi = hn::Add(r_hi, small);
    const VD s_b = hn::Sub(s_hi, r_hi);
    const VD s_lo = hn::Add(hn::Sub(r_hi, hn::Sub(s_hi, s_b)), hn::Sub(small, s_b));
    const VD one = hn::Set(dd, 1.0);
    const VD m_hi = hn::Add(one, s_hi);
    const VD m_lo = hn::Add(hn::Sub(one, m_hi), s_hi);
    const VD m = hn::Add(m_hi, hn::Add(m_lo, s_lo));
    const auto k1 = hn::ShiftRight<1>(k);
    const auto k2 = hn::Sub(k, k1);
    const auto bias = hn::Set(di, int64_t{1023});
    const VD scale1 = hn::BitCast(dd, hn::ShiftLeft<52>(hn::Add(k1, bias)));
    const VD scale2 = hn::BitCast(dd, hn::ShiftLeft<52>(hn::Add(k2, bias)));
    const VD e = hn::Mul(hn::Mul(m, scale1), scale2);
    return hn::IfThenElse(hn::IsNaN(x), hn::Add(x, x), e);
}

// Target elements computed together, kCapacity at most, over vectors of doubles: StoreTarget's expression,
// operation for operation, so the same bits. The packed rows (GradRowsPacked) gather a chunk's while its rows'
// coefficients are laid out (their inputs read then, before the chunk's run may overwrite them where out is logProb)
// and store them after the run: one at a time, the library exp and the call around it were a quarter of 16384 x 10's
// time. The longer rows gather kRowTargets rows' (GradTileContiguous, DeferredTargets): one at a time, ExpDouble's
// chain of dependent operations was 30% of the kernel's perf samples at 65536 x 1000 bf16 and 13% in fp32.
constexpr size_t kPackedMaxChunkRows = 256;
constexpr size_t kRowTargets = 16;

template <aclDataType kType, size_t kCapacity = kPackedMaxChunkRows>
class TargetBatch {
public:
    using T = typename Storage<kType>::T;

    HWY_INLINE void Add(T x, const GradRowCoefficients &row, double weight, T *out) {
        x_[count_] = LoadElement<kType>(&x, 0);
        a_[count_] = row.a;
        b_[count_] = row.b;
        g_[count_] = row.g;
        w_[count_] = weight;
        out_[count_] = out;
        ++count_;
    }

    HWY_INLINE void Clear() { count_ = 0; }
    HWY_INLINE size_t Size() const { return count_; }
    HWY_INLINE bool Full() const { return count_ == kCapacity; }

    // Computes the elements added since Clear and returns their values in the order added (before their rounding to
    // kType); the batch is then empty.
    HWY_INLINE const double *Compute() {
        const DD dd;
        const size_t lanes = hn::Lanes(dd);
        for (size_t i = count_; i % lanes != 0; ++i) x_[i] = a_[i] = b_[i] = g_[i] = w_[i] = 0.0;
        for (size_t i = 0; i < count_; i += lanes) {
            const VD e = ExpDoubleV(dd, hn::Load(dd, x_ + i));
            VD value = hn::Sub(hn::Mul(e, hn::Load(dd, a_ + i)), hn::Mul(hn::Load(dd, b_ + i), hn::Load(dd, w_ + i)));
            value = hn::Sub(value, hn::Load(dd, g_ + i));
            hn::Store(value, dd, x_ + i);
        }
        count_ = 0;
        return x_;
    }

    // Computes and stores the elements added since Clear.
    HWY_INLINE void Flush() {
        const size_t count = count_;
        const double *values = Compute();
        for (size_t i = 0; i < count; ++i) StoreElement<kType>(out_[i], 0, values[i]);
    }

private:
    static constexpr size_t kPadded = kCapacity + HWY_MAX_BYTES / sizeof(double);
    alignas(HWY_MAX_BYTES) double x_[kPadded];
    alignas(HWY_MAX_BYTES) double a_[kPadded];
    alignas(HWY_MAX_BYTES) double b_[kPadded];
    alignas(HWY_MAX_BYTES) double g_[kPadded];
    alignas(HWY_MAX_BYTES) double w_[kPadded];
    T *out_[kCapacity];
    size_t count_ = 0;
};

// ---- packed rows of a few classes ------------------------------------------------------------------------------

// Rows of at most kPackedMaxColumns classes, stored back to back (row stride C in logProb and out), are computed as
// one flat run of elements instead of row by row: each vector may span several rows, and takes every lane's a and b
// from its row's (PackedCoefficients). Row by row, a row of 10 classes was one partial vector through stack buffers,
// about 21 ns (16384 x 10 fp32, 2 threads: 9x the copy's time). Every element
// gets the row path's bits: the same operations (ScaledExp's general path, or its fast path, which equals it, where
// the vector's every t lies in the window of all the chunk's rows: PackedCoefficients::FindWindow) on the same values,
// whichever lanes of a vector belong to which row. The fast path where it applies took 16384 x 10 to 0.94-0.99x the
// time (one thread, fp32 and bf16, every variant; ab_libs, medians of 7 rounds). Measured against rows one by one (fp32
// plain, 2^20 elements, 2 threads, AVX-512): C = 4 0.49-0.74x the time, 8 0.70-0.75x, 16 0.77-0.81x, 32 0.93-0.96x, 48
// 0.87-0.89x, 63 0.61-0.83x, but 64 (four whole vectors per row) 1.20-1.23x: up to 63 classes.
constexpr size_t kPackedMaxColumns = 63;
// Elements per chunk (at most; and kPackedMaxChunkRows rows): the weights repeated per row take 4 KiB (fp32) on the
// stack.
constexpr size_t kPackedChunk = 1024;
constexpr size_t kPackedLanesMax = HWY_MAX_BYTES / sizeof(float);

// The coefficients of a chunk of rows: each row's a and b as floats, and which row each lane of a vector takes them
// from. The rows' layout repeats every period of lcm(C, lanes) elements, and a chunk begins at a period's start (its
// rows a multiple of lanes / gcd(C, lanes)): lane l of the period's vector v belongs to its row first[v] + index[v][l]
// (rows counted from the period's first), so a vector's a is a permutation of the lanes of a load at its first lane's
// row. Before, each row's a and b were stored as whole vectors at each of its elements, two unaligned stores per row
// (about 9% of the perf samples at 16384 x 10 fp32 smoothed+weighted, one thread) that the run's loads then overlapped;
// the two permutes per vector cost less: 16384 x 10 took 0.95-0.99x the time (one thread, fp32 and bf16, plain and
// smoothed+weighted; ab_libs, medians of 9 rounds, which ranged widely on this machine).
struct PackedCoefficients {
    alignas(HWY_MAX_BYTES) float a[kPackedMaxChunkRows + kPackedLanesMax];
    alignas(HWY_MAX_BYTES) float b[kPackedMaxChunkRows + kPackedLanesMax];
    size_t period = 0;       // vectors per period: lcm(C, lanes) / lanes, at most C
    size_t period_rows = 0;  // rows per period: lcm(C, lanes) / C
    uint32_t first[kPackedMaxColumns];
    alignas(HWY_MAX_BYTES) int32_t index[kPackedMaxColumns][kPackedLanesMax];
    // The chunk's window for the fast path of ScaledExp (FindWindow): a vector whose every t = ExpShifted(x) has
    // bits in [window_base, window_base + window_width) takes it (none where window_width is 0).
    uint32_t window_base = 0;
    uint32_t window_width = 0;

    // The layout of the first `vectors` vectors of a period (at most the period: those a chunk reaches).
    HWY_INLINE void LayOut(size_t c, size_t lanes, size_t vectors) {
        const size_t lcm = c / std::gcd(c, lanes) * lanes;
        period = lcm / lanes;
        period_rows = lcm / c;
        size_t row = 0, col = 0;  // of each element in turn
        for (size_t v = 0; v < HWY_MIN(vectors, period); ++v) {
            first[v] = static_cast<uint32_t>(row);
            for (size_t lane = 0; lane < lanes; ++lane) {
                index[v][lane] = static_cast<int32_t>(row - first[v]);
                if (++col == c) {
                    col = 0;
                    ++row;
                }
            }
        }
    }

    // The window of k in which the fast path is exact for every row of the chunk ([0, rows) of a and b; rows of kind
    // kRowZero hold a = 1 and b = 0 there, their values being replaced anyway): each row's FastRangeOf,
    // intersected, from the least and the greatest |a|. None where an a is zero,
    // subnormal, infinite or NaN, or a b or a weight not finite (found from the bits of |a| and |b|, integer min
    // and max over vectors).
    HWY_INLINE void FindWindow(size_t rows, bool weights_finite) {
        const DU du;
        const size_t lanes = hn::Lanes(du);
        const auto magnitude = hn::Set(du, 0x7fffffffu);
        auto least = hn::Set(du, 0x7f800000u), greatest = hn::Zero(du), greatest_b = hn::Zero(du);
        for (size_t r = 0; r < rows; r += lanes) {
            const auto valid = hn::FirstN(du, rows - r);
            const auto a_bits = hn::And(hn::LoadU(du, reinterpret_cast<const uint32_t *>(a + r)), magnitude);
            const auto b_bits = hn::And(hn::LoadU(du, reinterpret_cast<const uint32_t *>(b + r)), magnitude);
            least = hn::Min(least, hn::IfThenElse(valid, a_bits, least));
            greatest = hn::Max(greatest, hn::IfThenZeroElse(hn::Not(valid), a_bits));
            greatest_b = hn::Max(greatest_b, hn::IfThenZeroElse(hn::Not(valid), b_bits));
        }
        const uint32_t low = hn::GetLane(hn::MinOfLanes(du, least));
        const uint32_t high = hn::GetLane(hn::MaxOfLanes(du, greatest));
        const uint32_t high_b = hn::GetLane(hn::MaxOfLanes(du, greatest_b));
        window_width = 0;
        if (!weights_finite || low < 0x00800000u || high >= 0x7f800000u || high_b >= 0x7f800000u) return;
        const int bottom = FastRangeOf(low).bottom;
        const int top = FastRangeOf(high).top;
        if (bottom > top) return;
        window_base = ShiftedBitsOf(bottom);
        window_width = static_cast<uint32_t>(top - bottom + 1);
    }
};

// The same for the lanes of one vector of a chunk of rows, its elements e0 .. e0 + count (rows[0] the chunk's first
// row): each lane with its own row.
template <aclDataType kType, BiasKind kBias>
HWY_NOINLINE void StorePatchedPacked(DF df, VF x, VF value, hn::Mask<DF> cancelled, size_t e0, size_t count,
                                     const GradRowCoefficients *rows, size_t c, const float *w,
                                     typename Storage<kType>::T *out) {
    const auto row_of = [&](size_t lane) -> const GradRowCoefficients & { return rows[(e0 + lane) / c]; };
    StorePatchedLanes<kType, kBias>(df, x, value, cancelled, count, row_of, w, out);
}

// One vector of a chunk (count lanes, fewer only at the chunk's end, through stack buffers as in RowPartial): the
// vector v of its period, whose first lane is in the chunk's row `row`.
template <aclDataType kType, BiasKind kBias, bool kGuard>
HWY_INLINE void PackedVector(DF df, const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t e0,
                             size_t count, const PackedCoefficients &coef, size_t v, size_t row, const float *w_run,
                             const GradRowCoefficients *rows, size_t c) {
    using T = typename Storage<kType>::T;
    using DT = hn::Rebind<T, DF>;
    const size_t lanes = hn::Lanes(df);
    alignas(HWY_MAX_BYTES) T in_buf[kPackedLanesMax] = {};
    alignas(HWY_MAX_BYTES) T out_buf[kPackedLanesMax];
    const bool partial = count < lanes;
    if (partial) CopyInPartial(DT(), in + e0, in_buf, count);
    const VF x = Storage<kType>::Load(df, partial ? in_buf : in + e0);
    const auto lane_rows = hn::IndicesFromVec(df, hn::Load(hn::RebindToSigned<DF>(), coef.index[v]));
    const VF a = hn::TableLookupLanes(hn::LoadU(df, coef.a + row), lane_rows);
    const VF b = hn::TableLookupLanes(hn::LoadU(df, coef.b + row), lane_rows);
    const float *w = w_run != nullptr ? w_run + e0 : nullptr;
    const VF t = ExpShifted(df, x);  // (NaN, infinite or far outside: bits outside the window)
    const auto offset = WindowOffset(t, hn::Set(DU(), coef.window_base));
    const bool fast = hn::AllTrue(DU(), hn::Lt(offset, hn::Set(DU(), coef.window_width)));
    const VF value = fast ? RowValue<kType, kBias, kGuard, true>(df, x, t, a, b, w)
                          : RowValue<kType, kBias, kGuard, false>(df, x, x, a, b, w);
    T *dst = partial ? out_buf : out + e0;
    if constexpr (kType != ACL_FLOAT && kBias != kNoBias && kGuard) {
        const auto cancelled = Cancelled<kType, kBias>(df, value, b, w);
        if (HWY_UNLIKELY(!hn::AllFalse(df, cancelled))) {
            StorePatchedPacked<kType, kBias>(df, x, value, cancelled, e0, count, rows, c, w, dst);
            if (partial) CopyOutPartial(DT(), out_buf, out + e0, count);
            return;
        }
    }
    Storage<kType>::template Store<true>(df, value, dst);
    if (partial) CopyOutPartial(DT(), out_buf, out + e0, count);
}

// The elements [0, count) of a chunk of rows (rows[0] is the chunk's first row), all of one bias kind and guard.
template <aclDataType kType, BiasKind kBias, bool kGuard>
HWY_NOINLINE void PackedRun(const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t count,
                            const PackedCoefficients &coef, const float *w_run, const GradRowCoefficients *rows,
                            size_t c) {
    const DF df;
    const size_t lanes = hn::Lanes(df);
    size_t e = 0;
    size_t v = 0, period_row = 0;  // the vector's place in its period, and the period's first row
    for (; e + lanes <= count; e += lanes) {
        PackedVector<kType, kBias, kGuard>(df, in, out, e, lanes, coef, v, period_row + coef.first[v], w_run, rows, c);
        if (++v == coef.period) {
            v = 0;
            period_row += coef.period_rows;
        }
    }
    if (e < count) {
        PackedVector<kType, kBias, kGuard>(df, in, out, e, count - e, coef, v, period_row + coef.first[v], w_run, rows,
                                           c);
    }
}

// Which of PackedRun's variants a row needs; rows of kind kRowZero have none (any variant leaves them to a memset).
struct PackedKind {
    bool biased;  // a bias term (else kNoBias)
    bool guard;   // the cancellation guard (16-bit rows with a bias term, but fp16 rows flagged kRowSmallBias)
};

template <aclDataType kType>
HWY_INLINE PackedKind PackedKindOf(const GradRowCoefficients &row, const WeightTraits &weights) {
    const bool biased = !RowWithoutBias(row, weights);
    const bool small_bias = kType == ACL_FLOAT16 && (row.flags & kRowSmallBias) != 0;
    return PackedKind{biased, biased && kType != ACL_FLOAT && !small_bias};
}

template <aclDataType kType, BiasKind kBias>
HWY_INLINE void PackedRunGuarded(const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t count,
                                 const PackedCoefficients &coef, const float *w_run, const GradRowCoefficients *rows,
                                 size_t c, bool guard) {
    if (guard) {
        PackedRun<kType, kBias, true>(in, out, count, coef, w_run, rows, c);
    } else {
        PackedRun<kType, kBias, false>(in, out, count, coef, w_run, rows, c);
    }
}

// PackedRun with the variant of the chunk's rows.
template <aclDataType kType>
HWY_INLINE void PackedRunOfKind(const typename Storage<kType>::T *in, typename Storage<kType>::T *out, size_t count,
                                const PackedCoefficients &coef, const float *w_run, const GradRowCoefficients *rows,
                                size_t c, PackedKind kind) {
    if (!kind.biased) {
        PackedRun<kType, kNoBias, false>(in, out, count, coef, nullptr, rows, c);
    } else if (w_run == nullptr) {
        PackedRunGuarded<kType, kConstBias>(in, out, count, coef, nullptr, rows, c, kind.guard);
    } else {
        PackedRunGuarded<kType, kWeightBias>(in, out, count, coef, w_run, rows, c, kind.guard);
    }
}

// A tile of whole rows of C <= kPackedMaxColumns classes stored back to back, in chunks of rows (PackedRun). A chunk
// whose rows need different variants, or one row the double path (RowNeedsDouble), goes row by row (single_row)
// instead; rows of kind kRowZero are zeroed after the run, and the target columns recomputed after that, together
// (TargetBatch). One pass over a chunk's rows lays out their coefficients, finds their variants and gathers their
// target elements' inputs (read before the run, so also where out is logProb), without a branch per row on the
// variant: the chunk is uniform when the variants' bits and-ed over its rows equal them or-ed. Against a second pass
// over the rows for the targets (and a branch per row on the variant), 16384 x 10 took 0.85-0.96x the time (one
// thread, bench/ab_libs.sh 5 rounds, fp32 and bf16, every variant). The loops index the chunk directly: through
// GradTileContiguous's general accessors they reloaded the arguments every row. With pass 2 of the coefficients
// specialised as well (grad_rows.cpp), 16384 x 10 took 0.77-0.84x the time (bench/ab_libs.sh, 3 rounds, fp32 and
// bf16, every variant).
template <aclDataType kType, class SingleRow>
HWY_INLINE void GradRowsPacked(const GradKernelArgs &args, const GradTile &tile, const WeightTraits &weights,
                               const SingleRow &single_row) {
    using T = typename Storage<kType>::T;
    const DF df;
    const size_t lanes = hn::Lanes(df);
    const size_t c = static_cast<size_t>(args.c);
    const T *in = static_cast<const T *>(args.log_prob) + tile.row_begin * args.c;
    T *out = static_cast<T *>(args.out) + tile.row_begin * args.c;
    const float *const weight = args.weight;
    const int64_t weight_stride = args.weight_stride;
    // Rows per chunk: as many as kPackedChunk elements and the target batch hold, a whole number of vectors where the
    // lane count allows it, so that only the tile's last chunk ends in a partial vector.
    const size_t whole = lanes / std::gcd(c, lanes);
    size_t chunk_rows = HWY_MIN(kPackedChunk / c, kPackedMaxChunkRows);
    if (chunk_rows >= whole) chunk_rows -= chunk_rows % whole;
    const size_t tile_rows = static_cast<size_t>(tile.row_end - tile.row_begin);
    // The weights repeated row after row, as far as a chunk reaches (its last vector included).
    alignas(HWY_MAX_BYTES) float w_run_buf[kPackedChunk + kPackedLanesMax];
    const float *w_run = nullptr;
    if (weight != nullptr) {
        const size_t reach = HWY_MIN(chunk_rows, tile_rows) * c + lanes;
        // (Each row's from the one before, without a division per element: 1.2% of the op's perf samples at
        // 16384 x 10 fp32 smoothed+weighted.)
        for (size_t e = 0; e < HWY_MIN(c, reach); ++e) w_run_buf[e] = weight[static_cast<int64_t>(e) * weight_stride];
        for (size_t e = c; e < reach; ++e) w_run_buf[e] = w_run_buf[e - c];
        w_run = w_run_buf;
    }
    // A row's variant as bits, with the double path's.
    constexpr unsigned kBiased = 1, kGuarded = 2, kDouble = 4;
    PackedCoefficients coef;
    coef.LayOut(c, lanes, (HWY_MIN(chunk_rows, tile_rows) * c + lanes - 1) / lanes);
    TargetBatch<kType> batch;
    uint32_t zero_rows[kPackedMaxChunkRows];
    for (size_t r0 = 0; r0 < tile_rows; r0 += chunk_rows) {
        const size_t rows = HWY_MIN(chunk_rows, tile_rows - r0);
        const GradRowCoefficients *chunk = args.rows + tile.row_begin + static_cast<int64_t>(r0);
        const T *chunk_in = in + r0 * c;
        T *chunk_out = out + r0 * c;
        unsigned any = 0, all = ~0u;  // the bits of the rows computed, or-ed and and-ed
        size_t zeros = 0;
        batch.Clear();
        for (size_t r = 0; r < rows; ++r) {
            const GradRowCoefficients &row = chunk[r];
            if (row.kind == kRowZero) {
                coef.a[r] = 1.0f;  // (see FindWindow)
                coef.b[r] = 0.0f;
                zero_rows[zeros++] = static_cast<uint32_t>(r);
                continue;
            }
            coef.a[r] = static_cast<float>(row.a);
            coef.b[r] = static_cast<float>(row.b);
            const PackedKind kind = PackedKindOf<kType>(row, weights);
            const unsigned bits =
                (kind.biased ? kBiased : 0u) | (kind.guard ? kGuarded : 0u) | (RowNeedsDouble(row) ? kDouble : 0u);
            any |= bits;
            all &= bits;
            const uint64_t col = static_cast<uint64_t>(row.col);
            if (col >= c) continue;  // no target column (-1)
            const double w = weight != nullptr ? static_cast<double>(weight[row.col * weight_stride]) : 1.0;
            batch.Add(chunk_in[r * c + col], row, w, chunk_out + r * c + col);
        }
        const bool computed = zeros < rows;
        if (computed && (any != all || (any & kDouble) != 0)) {
            const int64_t first = tile.row_begin + static_cast<int64_t>(r0);
            for (size_t r = 0; r < rows; ++r) single_row(first + static_cast<int64_t>(r));
            continue;
        }
        if (computed) {
            coef.FindWindow(rows, weights.finite);
            hn::StoreU(hn::Zero(df), df, coef.a + rows);  // the rows past the chunk's end
            hn::StoreU(hn::Zero(df), df, coef.b + rows);
            const PackedKind kind{(any & kBiased) != 0, (any & kGuarded) != 0};
            PackedRunOfKind<kType>(chunk_in, chunk_out, rows * c, coef, w_run, chunk, c, kind);
        }
        for (size_t z = 0; z < zeros; ++z) ZeroSegment(chunk_out + zero_rows[z] * c, c);
        batch.Flush();  // the chunk's target elements while its rows are in the cache
    }
}

// ---- long packed fp32 rows, streamed as one run --------------------------------------------------------------

// fp32 rows stored back to back whose output streams, and whose rows have no weighted bias term (plain, weights without
// smoothing, z-loss, smoothing without weights) or one over at most kFlatWeightedMaxColumns weights (PlanFlatRows), run
// as one sequence of aligned vectors over the whole tile (FlatRows; on regular stores too, for the rows with a weighted
// bias term of a large output: GradTileContiguous) instead of row by row: a row's interior goes through the row loop,
// and the vector where one row ends and the next begins takes each lane's coefficients from its own row
// (FlatBoundaryVector). Row by row, every row whose length is not a whole number of vectors began and ended with
// partial vectors through stack buffers, and the output lines at row boundaries were written partly by regular, partly
// by streaming stores. In fp32 every such row gives the same bits with the constant bias term b (b == +0 gives exp(x) a
// itself), so one bias kind serves the tile; rows for the double path, or with weights and a bias term (done in groups
// instead), keep the row path. 65536 x 1000 plain against row by row (whose rows of 4000 bytes did not stream):
// 0.82-0.91x the time (with the target element stored after its row); 16384 x 4000 0.75x. The same run for fp16 and
// bf16 rows (a unit of two vectors per streaming store) took 1.2x and 1.5x the time of their regular stores on 65536 x
// 1000: fp32 only. Consecutive rows with the same coefficients (SameRowScale: every row of a mean or sum without
// weights) go through the row loop as one range, kFlatRunRows at a time, with no boundary vector between them: 65536 x
// 1000 plain 0.79x and z-loss 0.85x the time of a call of the row loop per row (ab_libs, 5 rounds). Rows with a
// weighted bias term, in groups of four before (RowSegmentsWeighted: four short streams in and out at once, each row's
// first and last vectors partial), took 0.80x the time this way (65536 x 1000 smoothed+weighted, 1.40x the copy's time
// -> 1.13x; ab_libs, 7 rounds).

// The whole vectors of FlatRows that hold a target element, kRowTargets at most, kept aside until their
// target elements are computed together (TargetBatch: StoreTarget's bits), then streamed, out of order (each a whole
// aligned vector; where a vector is half a cache line, AVX2, the line's other half reaches memory apart). A target
// element's input is read when its vector is computed, before anything is stored there, so also where out is logProb.
// One target at a time, the exp in double, a chain of dependent operations that held up the vector's store, was 13% of
// the kernel's perf samples at 65536 x 1000 fp32 plain; computed ahead for the next rows, its inputs' loads missed the
// caches and held up the loop instead (1.10-1.17x the time).
class DeferredTargets {
public:
    // A vector's values, to be stored at out (a whole aligned vector) once its targets are in: the caller stores them
    // at the pointer returned, then adds the vector's targets (AddTarget).
    HWY_INLINE float *Reserve(float *out) {
        out_[vectors_] = out;
        return values_[vectors_++];
    }
    // The last reserved vector's lane holds the target element of row, input x.
    HWY_INLINE void AddTarget(size_t lane, float x, const GradRowCoefficients &row, double weight) {
        slot_[batch_.Size()] = &values_[vectors_ - 1][lane];
        batch_.Add(x, row, weight, nullptr);
    }
    HWY_INLINE bool Full() const { return vectors_ == kRowTargets; }

    // Computes the targets and stores every reserved vector.
    HWY_NOINLINE void Flush() {
        const DF df;
        const size_t targets = batch_.Size();
        const double *values = batch_.Compute();
        for (size_t t = 0; t < targets; ++t) *slot_[t] = static_cast<float>(values[t]);
        for (size_t v = 0; v < vectors_; ++v) hn::Stream(hn::Load(df, values_[v]), df, out_[v]);
        vectors_ = 0;
    }

private:
    alignas(HWY_MAX_BYTES) float values_[kRowTargets][kPackedLanesMax];
    float *out_[kRowTargets];
    float *slot_[2 * kRowTargets];  // where each target's value goes (a vector may hold two)
    size_t vectors_ = 0;
    TargetBatch<ACL_FLOAT, 2 * kRowTargets> batch_;
};

// count <= lanes elements at in/out, the first k of them in row0 (columns col0 on) and the others in row1 (columns 0
// on): the general path of the exp, each lane with its row's a and b (and its column's weight, kWeightBias); lanes of
// rows of kind kRowZero +0, and a row's target element, where it lies in the vector, StoreTarget's value (its input
// read before the vector is stored, so also where out is logProb). Whole aligned vectors stream where `stream`; those
// with a target element go through deferred.
template <BiasKind kBias>
HWY_NOINLINE void FlatBoundaryVector(const GradKernelArgs &args, const float *in, float *out, size_t count, size_t k,
                                     const GradRowCoefficients &row0, size_t col0, const GradRowCoefficients &row1,
                                     DeferredTargets &deferred, bool stream) {
    const DF df;
    const size_t lanes = hn::Lanes(df);
    const auto first = hn::FirstN(df, k);
    const VF a =
        hn::IfThenElse(first, hn::Set(df, static_cast<float>(row0.a)), hn::Set(df, static_cast<float>(row1.a)));
    const VF b =
        hn::IfThenElse(first, hn::Set(df, static_cast<float>(row0.b)), hn::Set(df, static_cast<float>(row1.b)));
    alignas(HWY_MAX_BYTES) float in_buf[kPackedLanesMax] = {};
    alignas(HWY_MAX_BYTES) float out_buf[kPackedLanesMax];
    alignas(HWY_MAX_BYTES) float w_buf[kPackedLanesMax];  // kWeightBias: each lane's weight (0 past count)
    if constexpr (kBias == kWeightBias) {
        for (size_t lane = 0; lane < lanes; ++lane) {
            w_buf[lane] = lane >= count ? 0.0f : args.weight[lane < k ? col0 + lane : lane - k];
        }
    }
    const bool whole = count == lanes;
    if (!whole) CopyInPartial(df, in, in_buf, count);
    const VF x = hn::LoadU(df, whole ? in : in_buf);
    VF value = RowValue<ACL_FLOAT, kBias, false, false>(df, x, x, a, b, w_buf);
    const auto none = hn::FirstN(df, 0);
    const auto zero0 = row0.kind == kRowZero ? first : none;
    const auto zero1 = row1.kind == kRowZero ? hn::Not(first) : none;
    value = hn::IfThenZeroElse(hn::Or(zero0, zero1), value);
    // The lane of the row's target element, if among its lanes [lane, lane + n) (columns col on); else lanes.
    const auto target_lane = [&](const GradRowCoefficients &row, size_t lane, size_t col, size_t n) {
        if (row.kind == kRowZero || row.col < static_cast<int64_t>(col) || row.col >= static_cast<int64_t>(col + n)) {
            return lanes;
        }
        return lane + static_cast<size_t>(row.col) - col;
    };
    const size_t at0 = target_lane(row0, 0, col0, HWY_MIN(k, count));
    const size_t at1 = k < count ? target_lane(row1, k, 0, count - k) : lanes;
    if (whole && stream && (at0 < lanes || at1 < lanes)) {
        hn::Store(value, df, deferred.Reserve(out));
        if (at0 < lanes) deferred.AddTarget(at0, in[at0], row0, TargetWeight(args, row0));
        if (at1 < lanes) deferred.AddTarget(at1, in[at1], row1, TargetWeight(args, row1));
        if (deferred.Full()) deferred.Flush();
        return;
    }
    const auto insert = [&](size_t at, const GradRowCoefficients &row) {
        if (at < lanes) {
            value = hn::InsertLane(value, at, static_cast<float>(TargetValue(in[at], row, TargetWeight(args, row))));
        }
    };
    insert(at0, row0);
    insert(at1, row1);
    if (whole && stream) {
        hn::Stream(value, df, out);
    } else if (whole) {
        hn::StoreU(value, df, out);
    } else {
        hn::Store(value, df, out_buf);
        CopyOutPartial(df, out_buf, out, count);
    }
}

// Streams +0 to out[j, end) in whole vectors (out + j aligned); returns end rounded down to whole vectors.
HWY_INLINE size_t StreamZeros(float *out, size_t j, size_t end) {
    const DF df;
    const size_t lanes = hn::Lanes(df);
    for (; j + lanes <= end; j += lanes) hn::Stream(hn::Zero(df), df, out + j);
    return j;
}

// Whether a tile of whole rows may run as FlatRows, and with which bias kind: kNoBias where no row has a bias
// term, else kConstBias without weights, or kWeightBias where the weights are contiguous, finite and few enough to
// stay in the L1 cache beside the streams (kFlatWeightedMaxColumns: 16 KiB; longer rows of weights go in groups,
// RowSegmentsWeighted, which load each weight vector once for four rows). A row without a bias term gets the same bits
// with kWeightBias: its b is +0 and every weight finite and non-negative, so (-b) w_j is -0 and m + -0 is m.
struct FlatPlan {
    bool usable = false;
    BiasKind bias = kNoBias;
};
constexpr int64_t kFlatWeightedMaxColumns = 4096;

HWY_INLINE FlatPlan PlanFlatRows(const GradKernelArgs &args, const GradTile &tile, const WeightTraits &weights) {
    FlatPlan plan{true, kNoBias};
    const bool weights_flat =
        args.weight == nullptr || (args.weight_stride == 1 && weights.finite && args.c <= kFlatWeightedMaxColumns);
    for (int64_t i = tile.row_begin; i < tile.row_end && plan.usable; ++i) {
        const GradRowCoefficients &row = args.rows[i];
        if (row.kind == kRowZero) continue;
        plan.usable = !RowNeedsDouble(row);
        if (RowWithoutBias(row, weights)) continue;
        plan.bias = args.weight == nullptr ? kConstBias : kWeightBias;
        plan.usable = plan.usable && weights_flat;
    }
    return plan;
}

// Rows that the row loop computes alike: the same a, b, kind and flags (g and the target column may differ: the
// target element is patched into its vector, FlatBoundaryVector).
HWY_INLINE bool SameRowScale(const GradRowCoefficients &x, const GradRowCoefficients &y) {
    return std::memcmp(&x.a, &y.a, sizeof(x.a)) == 0 && std::memcmp(&x.b, &y.b, sizeof(x.b)) == 0 && x.kind == y.kind &&
           x.flags == y.flags;  // bitwise: +0 and -0 scale differently
}
constexpr size_t kFlatRunRows = 16;

// How many of rows[0, count), at most `most`, have rows[0]'s coefficients (SameRowScale), from rows[0] on.
HWY_INLINE size_t SameScaleRun(const GradRowCoefficients *rows, size_t count, size_t most) {
    size_t run = 1;
    while (run < HWY_MIN(count, most) && SameRowScale(rows[run], rows[0])) ++run;
    return run;
}

// The tile's rows as one run (see above), on streaming stores where kStream, else regular ones. Each row's target
// element goes into the vector that holds it (FlatBoundaryVector), which streams with the others. Stored after its row
// instead, by a regular store into a line just streamed, it cost more: here 65536 x 1000 fp32 plain, weighted and
// z-loss take 0.86-0.89x the time (ab_libs, 3 rounds; without the target stores at all, plain ran at 1.20x the copy's
// time against 1.33x with them).
template <BiasKind kBias, bool kStream>
HWY_NOINLINE void FlatRows(const GradKernelArgs &args, const GradTile &tile) {
    const DF df;
    const size_t lanes = hn::Lanes(df);
    const size_t c = static_cast<size_t>(args.c);
    const float *in = static_cast<const float *>(args.log_prob) + tile.row_begin * args.c;
    float *out = static_cast<float *>(args.out) + tile.row_begin * args.c;
    const size_t tile_rows = static_cast<size_t>(tile.row_end - tile.row_begin);
    const size_t end = tile_rows * c;
    const GradRowCoefficients *rows = args.rows + tile.row_begin;
    const PairWeights no_pairs{nullptr, nullptr, 0, 0.0f};
    const GradRowCoefficients none{0.0, 0.0, 0.0, -1, kRowZero, 0};
    // The elements before the first aligned vector (StreamPeel: fewer than a vector, all in the first row, C being at
    // least two vectors).
    DeferredTargets deferred;
    size_t e = HWY_MIN(StreamPeel(out), end);
    if (e > 0) FlatBoundaryVector<kBias>(args, in, out, e, e, rows[0], 0, none, deferred, false);
    size_t r = 0;  // the row of element e
    while (e < end) {
        const size_t row_start = r * c;
        const GradRowCoefficients &row = rows[r];
        // The rows from r on with this row's coefficients (every row of a mean or sum without weights or smoothing
        // has them), up to kFlatRunRows, run as one range through the row loop.
        // (Not with weights: the row loop reads them from the run's first column on.)
        const size_t run =
            row.kind != kRowZero && kBias != kWeightBias ? SameScaleRun(rows + r, tile_rows - r, kFlatRunRows) : 1;
        const size_t run_end = row_start + run * c;
        // The run's whole vectors (from e, aligned, to the last one that ends within the run).
        size_t j = e - row_start;
        if (row.kind == kRowZero) {
            j = StreamZeros(out + row_start, j, c);
        } else if (j + lanes <= run * c) {
            const float a = static_cast<float>(row.a);
            const float b = static_cast<float>(row.b);
            const FastWindow window = RowFastWindow(a, b, true);
            const auto loop = [&](size_t to) {
                if (j >= to) return;
                if constexpr (kBias == kWeightBias) {
                    j = FlatPairsOf<kStream>(df, in + row_start, out + row_start, j, to, hn::Set(df, a), hn::Set(df, b),
                                             args.weight, row, window);
                } else {
                    RowLoopOutOfLine<ACL_FLOAT, kBias, true, kStream, false>(df, in + row_start, out + row_start, j, to,
                                                                             hn::Set(df, a), hn::Set(df, b), nullptr,
                                                                             no_pairs, row, window, &j);
                }
            };
            const size_t whole_end = j + (run * c - j) / lanes * lanes;
            // The vectors that hold a target element in between (one before j is in a vector already stored, one
            // from whole_end on in the boundary vector below).
            for (size_t q = 0; q < run; ++q) {
                const int64_t col = rows[r + q].col;
                if (col < 0 || col >= args.c) continue;
                const size_t at = q * c + static_cast<size_t>(col);
                if (at < j || at >= whole_end) continue;
                const size_t v = j + (at - j) / lanes * lanes;
                loop(v);
                // The vector may begin in the row before (whose target, if in it too, was row q0's turn).
                const size_t q0 = v / c;
                const size_t in_row = HWY_MIN(lanes, (q0 + 1) * c - v);  // lanes in row q0; the rest in row q0 + 1
                FlatBoundaryVector<kBias>(args, in + row_start + v, out + row_start + v, lanes, in_row, rows[r + q0],
                                          v - q0 * c, in_row < lanes ? rows[r + q0 + 1] : none, deferred, kStream);
                j = v + lanes;
            }
            loop(whole_end);
        }
        e = row_start + j;
        // The vector that ends the run and begins the next row (or the tile's last, partial vector).
        const size_t last_row = r + run - 1;
        if (e < run_end) {
            const size_t count = HWY_MIN(lanes, end - e);
            const bool last = last_row + 1 == tile_rows;
            FlatBoundaryVector<kBias>(args, in + e, out + e, count, run_end - e, rows[last_row], e - last_row * c,
                                      last ? none : rows[last_row + 1], deferred, kStream);
            e += count;
        }
        r += run;
    }
    deferred.Flush();
}

// FlatRows on streaming stores, with the tile's bias kind (PlanFlatRows).
HWY_INLINE void StreamFlatRows(const GradKernelArgs &args, const GradTile &tile, BiasKind bias) {
    if (bias == kNoBias) {
        FlatRows<kNoBias, true>(args, tile);
    } else if (bias == kConstBias) {
        FlatRows<kConstBias, true>(args, tile);
    } else {
        FlatRows<kWeightBias, true>(args, tile);
    }
}

// Contiguous rows (column strides 1, weight contiguous): the kernel streams straight from logProb to out.
template <aclDataType kType, bool kNative>
HWY_INLINE void GradTileContiguous(const GradKernelArgs &args, const GradTile &tile) {
    using T = typename Storage<kType>::T;
    const T *in_base = static_cast<const T *>(args.log_prob);
    T *out_base = static_cast<T *>(args.out);
    const size_t count = static_cast<size_t>(tile.col_end - tile.col_begin);
    const bool stream = kCanStream && UseStreamingStores(args);
    const bool stream_groups = kCanStream && kType == ACL_FLOAT && UseStreamingStoresForRowGroups(args);
    const float *w = args.weight ? args.weight + tile.col_begin * args.weight_stride : nullptr;
    const WeightTraits weights = AllWeightTraits(args);
    PairWeights pairs{nullptr, nullptr, 0, ScreenWeight(weights)};
    if (args.weight_pairs != nullptr) {
        pairs.even = args.weight_pairs;
        pairs.odd = args.weight_pairs + (args.c + 1) / 2;
        pairs.first = static_cast<size_t>(tile.col_begin);
    }
    const auto in_row = [&](int64_t i) {
        // (A one-column tile may have any column stride: only its first element is addressed.)
        return in_base + i * args.log_prob_row_stride + tile.col_begin * args.log_prob_col_stride;
    };
    const auto out_row = [&](int64_t i) {
        return out_base + i * args.out_row_stride + tile.col_begin * args.out_col_stride;
    };
    // The target column is recomputed in double after its row, kRowTargets rows' together (store_target, targets;
    // FlatRows puts it into its vector instead). Its input is read after the row too, from the cache
    // (target_before, target_after), except where out is logProb: there it is read before the row overwrites it. Read
    // before, it was a cache miss ahead of the row's loads (65536 x 1000 fp32: about 0.1 us a row).
    struct TargetInput {
        bool present;
        T x;
    };
    const auto read_target = [&](int64_t i) {
        const int64_t col = args.rows[i].col;
        const bool present = col >= tile.col_begin && col < tile.col_end;
        return TargetInput{present, present ? in_row(i)[col - tile.col_begin] : T{}};
    };
    TargetBatch<kType, kRowTargets> targets;  // flushed when full and at the tile's end
    const auto store_target = [&](int64_t i, const TargetInput &target) {
        if (!target.present) return;
        const GradRowCoefficients &row = args.rows[i];
        targets.Add(target.x, row, TargetWeight(args, row), out_row(i) + (row.col - tile.col_begin));
        if (targets.Full()) targets.Flush();
    };
    const bool in_place = args.out == args.log_prob;
    const auto target_before = [&](int64_t i) { return in_place ? read_target(i) : TargetInput{false, T{}}; };
    const auto target_after = [&](int64_t i, const TargetInput &before) {
        store_target(i, in_place ? before : read_target(i));
    };
    // One row by itself.
    const auto single_row = [&](int64_t i) {
        const GradRowCoefficients &row = args.rows[i];
        if (row.kind == kRowZero) {
            ZeroSegment(out_row(i), count);
            return;
        }
        const TargetInput target = target_before(i);
        RowSegmentAnyBias<kType, kNative>(in_row(i), out_row(i), count, row, w, pairs, weights, stream);
        target_after(i, target);
    };
    if (count == static_cast<size_t>(args.c) && count <= kPackedMaxColumns && args.log_prob_row_stride == args.c &&
        args.out_row_stride == args.c) {
        GradRowsPacked<kType>(args, tile, weights, single_row);
        targets.Flush();
        return;  // (no streaming stores: rows this short never stream one by one)
    }
    // A large fp32 output whose groups do not stream (their kind measured regular) runs its rows with a weighted
    // bias term as one on regular stores too: in groups of four on regular stores they took 1.25x (1.17-1.30x) the
    // time of streaming ones at 65536 x 1000 smoothed+weighted, and 1.01x (1.00-1.06x) run as one (ab_libs, 3
    // rounds, every fp32 store regular against the streaming build). The other variants keep the row path there
    // (run as one on regular stores: plain alike, weighted 1.13x and z-loss 1.05x the time of the row path).
    const bool flat_regular = !stream_groups && args.weight != nullptr && ReachesOutputThreshold(args);
    if constexpr (kType == ACL_FLOAT && kCanStream) {
        if ((stream_groups || flat_regular) && count == static_cast<size_t>(args.c) && count >= 2 * hn::Lanes(DF()) &&
            args.log_prob_row_stride == args.c && args.out_row_stride == args.c &&
            StreamPeel(out_row(tile.row_begin)) != kNotElementAligned) {
            const FlatPlan flat = PlanFlatRows(args, tile, weights);
            if (flat.usable && stream_groups) {
                StreamFlatRows(args, tile, flat.bias);
                hwy::FlushStream();
                return;
            }
            if (flat.usable && flat.bias == kWeightBias) {
                FlatRows<kWeightBias, false>(args, tile);
                return;
            }
        }
    }
    // fp32 rows with weights done together (RunWeightedRows): group (2 or 4) rows, members[0] to members[group - 1].
    const auto weighted_rows = [&](const int64_t *members, size_t group) {
        TargetInput targets[4];
        const T *ins[4];
        T *outs[4];
        const GradRowCoefficients *rows[4];
        for (size_t q = 0; q < group; ++q) {
            targets[q] = target_before(members[q]);
            ins[q] = in_row(members[q]);
            outs[q] = out_row(members[q]);
            rows[q] = &args.rows[members[q]];
        }
#if !HWY_HAVE_SCALABLE  // (kRowGroups)
        if constexpr (kType == ACL_FLOAT) {
            if (group == 4) {
                RunWeightedRows<4>(ins, outs, count, rows, w, weights.finite, stream_groups);
            } else {
                RunWeightedRows<2>(ins, outs, count, rows, w, weights.finite, stream_groups);
            }
        }
#endif
        for (size_t q = 0; q < group; ++q) target_after(members[q], targets[q]);
    };
    // fp32 rows with weights go in groups of four, else two (rows shorter than a pair of vectors gain nothing: they
    // are all tail). Streaming groups need rows whose starts share their alignment (one peel for all): consecutive
    // rows do when the row stride is a whole number of 64-byte lines; otherwise (an odd C, say) the groups are taken
    // from blocks of 4 * period rows, period being the distance between rows aligned alike (16 for an odd C), as
    // the rows k, k + period, k + 2 period and k + 3 period of the block: with regular stores, rows of 50257 classes
    // took 1.45x the time of streamed ones (8192 x 50257 smoothed+weighted, 2 threads). A block starts only at a
    // weighted row: rows without a bias term (weights without label smoothing) stay in order, one at a time (taken
    // in the block's order, 65536 x 1000 weighted took 1.68x the time).
    // Consecutive whole rows with the same coefficients (SameRowScale) and no weighted bias term, up to kRowTargets,
    // as one segment (rows_as_one), with regular stores: every row of a mean or sum without weights or z-loss has
    // them (z-loss rows where their lse agree). One row at a time each paid the segment's setup, the pair loop's
    // remainder and a partial tail: 30-35 ns a row in the L1 cache (one thread, bf16 plain: 256 x 1000 29.2 us against
    // 8 x 32000 20.8 us). Together, one thread in cache (`openaclnn bench --threads 1`, 2 rounds): 256 x 1000 bf16
    // plain 0.90x the time, fp16 0.95x, fp32 0.96x; 512 x 500 0.77x, 0.84x, 0.88x. From memory, 2 threads (ab_libs, 4
    // rounds): 65536 x 1000 fp16 and bf16 plain 0.87x and 0.85x, z-loss 0.91x and 0.88x (with a benchmark whose lse
    // was the same in every row; since, each row has its own, as in training).
    // fp32 rows merge only below the output threshold (ReachesOutputThreshold): from memory, one at a time took
    // 0.909x (0.78-1.15x) the time of sixteen together with one thread, 0.967x (0.950-0.978x) with two (65536 x 1000
    // plain, every store regular; ab_libs, 6 rounds).
    const bool merge_rows = !stream && (kType != ACL_FLOAT || !ReachesOutputThreshold(args)) &&
                            count == static_cast<size_t>(args.c) && args.log_prob_row_stride == args.c &&
                            args.out_row_stride == args.c;
    const auto same_scale_run = [&](int64_t i) -> size_t {
        const GradRowCoefficients &row = args.rows[i];
        if (row.kind == kRowZero || RowNeedsDouble(row) || (w != nullptr && !RowWithoutBias(row, weights))) return 1;
        return SameScaleRun(&row, static_cast<size_t>(tile.row_end - i), kRowTargets);
    };
    const auto rows_as_one = [&](int64_t i, size_t run) {
        TargetInput before[kRowTargets];
        for (size_t q = 0; q < run; ++q) before[q] = target_before(i + static_cast<int64_t>(q));
        RowSegmentAnyBias<kType, kNative>(in_row(i), out_row(i), count * run, args.rows[i], w, pairs, weights, false);
        for (size_t q = 0; q < run; ++q) target_after(i + static_cast<int64_t>(q), before[q]);
    };
    const bool grouped = kRowGroups && kType == ACL_FLOAT && w != nullptr && count >= 2 * hn::Lanes(DF());
    const int64_t stride_bytes = args.out_row_stride * static_cast<int64_t>(sizeof(T));
    const int64_t period = 64 / std::gcd<int64_t, int64_t>((stride_bytes % 64 + 64) % 64, 64);
    const bool aligned_blocks = grouped && stream_groups && period > 1;
    for (int64_t i = tile.row_begin; i < tile.row_end; ++i) {
        if (aligned_blocks && i + 4 * period <= tile.row_end && RowWeighted(args.rows[i], weights)) {
            for (int64_t k = 0; k < period; ++k) {
                int64_t members[4];
                size_t weighted = 0;
                for (int64_t q = 0; q < 4; ++q) {
                    const int64_t r = i + k + q * period;
                    if (RowWeighted(args.rows[r], weights)) {
                        members[weighted++] = r;
                    } else {
                        single_row(r);
                    }
                }
                const size_t together = weighted == 4 ? 4 : weighted >= 2 ? 2 : 0;
                if (together > 0) weighted_rows(members, together);
                for (size_t q = together; q < weighted; ++q) single_row(members[q]);
            }
            i += 4 * period - 1;
            continue;
        }
        if (grouped) {
            int64_t members[4];
            size_t group = 0;
            while (group < 4 && i + static_cast<int64_t>(group) < tile.row_end &&
                   RowWeighted(args.rows[i + static_cast<int64_t>(group)], weights)) {
                members[group] = i + static_cast<int64_t>(group);
                ++group;
            }
            if (group == 3) group = 2;
            if (group >= 2) {
                weighted_rows(members, group);
                i += static_cast<int64_t>(group) - 1;
                continue;
            }
        }
        if (merge_rows) {
            const size_t run = same_scale_run(i);
            if (run >= 2) {
                rows_as_one(i, run);
                i += static_cast<int64_t>(run) - 1;
                continue;
            }
        }
        single_row(i);
    }
    targets.Flush();
    if (stream || stream_groups) hwy::FlushStream();
}

// Any other layout (a column stride other than 1 for logProb or out, e.g. a transposed view, or a strided weight):
// the tile is cut into chunks of kGatherColumns columns; for each chunk the weights are gathered once into a stack
// buffer, then for each row the chunk of logProb is gathered, run through exactly the contiguous code above
// (RowSegmentAnyBias, StoreTarget) into a second buffer, and scattered to out. Every element therefore gets
// the bits the contiguous layout gives it: no element depends on its neighbours, on where a vector starts or on
// which path (fast or general exp, vector or partial tail) its vector took (see ScaledExp and RowPartial).
// Chunk-outer, row-inner order keeps a column-major view cache-friendly: consecutive rows of one chunk lie in the
// same cache lines. The row is gathered before anything of it is written, so out == logProb works.
constexpr size_t kGatherColumns = 512;  // 2 KiB of fp32 per buffer; a multiple of every vector's lane count

template <aclDataType kType, bool kNative>
HWY_INLINE void GradTileGathered(const GradKernelArgs &args, const GradTile &tile) {
    using T = typename Storage<kType>::T;
    const T *in_base = static_cast<const T *>(args.log_prob);
    T *out_base = static_cast<T *>(args.out);
    alignas(HWY_MAX_BYTES) T in_buf[kGatherColumns];
    alignas(HWY_MAX_BYTES) T out_buf[kGatherColumns];
    alignas(HWY_MAX_BYTES) float w_buf[kGatherColumns];
    const int64_t in_cs = args.log_prob_col_stride;
    const int64_t out_cs = args.out_col_stride;
    const WeightTraits weights = AllWeightTraits(args);
    for (int64_t j0 = tile.col_begin; j0 < tile.col_end; j0 += static_cast<int64_t>(kGatherColumns)) {
        const size_t count = static_cast<size_t>(HWY_MIN(tile.col_end - j0, static_cast<int64_t>(kGatherColumns)));
        const float *w = nullptr;
        if (args.weight != nullptr) {
            for (size_t k = 0; k < count; ++k) {
                w_buf[k] = args.weight[(j0 + static_cast<int64_t>(k)) * args.weight_stride];
            }
            w = w_buf;
        }
        const PairWeights pairs{nullptr, nullptr, 0, ScreenWeight(weights)};
        for (int64_t i = tile.row_begin; i < tile.row_end; ++i) {
            const GradRowCoefficients &row = args.rows[i];
            T *out = out_base + i * args.out_row_stride + j0 * out_cs;
            if (row.kind == kRowZero) {
                for (size_t k = 0; k < count; ++k) out[static_cast<int64_t>(k) * out_cs] = T{};  // +0
                continue;
            }
            const T *in = in_base + i * args.log_prob_row_stride + j0 * in_cs;
            for (size_t k = 0; k < count; ++k) in_buf[k] = in[static_cast<int64_t>(k) * in_cs];
            RowSegmentAnyBias<kType, kNative>(in_buf, out_buf, count, row, w, pairs, weights, /*stream=*/false);
            if (row.col >= j0 && row.col < j0 + static_cast<int64_t>(count)) {
                const size_t k = static_cast<size_t>(row.col - j0);
                StoreTarget<kType>(&in_buf[k], &out_buf[k], row, w ? static_cast<double>(w[k]) : 1.0);
            }
            for (size_t k = 0; k < count; ++k) out[static_cast<int64_t>(k) * out_cs] = out_buf[k];
        }
    }
}

// kNative: the pair loop of bf16 rows uses the native conversion (GradKernelNativeBf16).
template <aclDataType kType, bool kNative>
HWY_INLINE void GradTileTyped(const GradKernelArgs &args, const GradTile &tile) {
    const int64_t count = tile.col_end - tile.col_begin;
    if (count <= 0 || tile.row_end <= tile.row_begin) return;
    // One column needs no column stride at all (the weight is read at its own index).
    const bool contiguous = count == 1 || (args.log_prob_col_stride == 1 && args.out_col_stride == 1 &&
                                           (args.weight == nullptr || args.weight_stride == 1));
    if (contiguous) {
        GradTileContiguous<kType, kNative>(args, tile);
    } else {
        GradTileGathered<kType, kNative>(args, tile);
    }
}

template <aclDataType kType>
HWY_NOINLINE void GradTileOf(const GradKernelArgs &args, const GradTile &tile) {
    GradTileTyped<kType, false>(args, tile);
}

// Fma over arrays (GradKernelInfo::fma): whole vectors, then the rest through a zero-padded vector.
void FmaArrays(const float *a, const float *b, const float *c, float *out, size_t count) {
    const DF df;
    const size_t lanes = hn::Lanes(df);
    size_t i = 0;
    for (; i + lanes <= count; i += lanes) {
        hn::StoreU(Fma(df, hn::LoadU(df, a + i), hn::LoadU(df, b + i), hn::LoadU(df, c + i)), df, out + i);
    }
    if (i < count) {
        constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
        alignas(HWY_MAX_BYTES) float va[kMax] = {}, vb[kMax] = {}, vc[kMax] = {};
        CopyInPartial(df, a + i, va, count - i);
        CopyInPartial(df, b + i, vb, count - i);
        CopyInPartial(df, c + i, vc, count - i);
        hn::Store(Fma(df, hn::Load(df, va), hn::Load(df, vb), hn::Load(df, vc)), df, va);
        CopyOutPartial(df, va, out + i, count - i);
    }
}

// ExpDoubleV over arrays (GradKernelInfo::exp_double): whole vectors, then the rest through a zero-padded vector.
void ExpDoubleArrays(const double *x, double *out, size_t count) {
    const DD dd;
    const size_t lanes = hn::Lanes(dd);
    size_t i = 0;
    for (; i + lanes <= count; i += lanes) hn::StoreU(ExpDoubleV(dd, hn::LoadU(dd, x + i)), dd, out + i);
    if (i < count) {
        alignas(HWY_MAX_BYTES) double buf[HWY_MAX_BYTES / sizeof(double)] = {};
        std::memcpy(buf, x + i, (count - i) * sizeof(double));
        hn::Store(ExpDoubleV(dd, hn::Load(dd, buf)), dd, buf);
        std::memcpy(out + i, buf, (count - i) * sizeof(double));
    }
}

// ScaledExp over arrays (GradKernelInfo::scaled_exp), one degree and reduction: exp(x[i]) a on the general path
// with the row's ExpFactors (by_row) and with a vector of a (by_lane), and on the fast path with the row's factors
// (fast; the caller keeps every result a normal float). Whole vectors, then the rest through a zero-padded vector.
template <int kDegree, bool kOneStep>
void ScaledExpArraysOf(float a, const float *x, size_t count, float *by_row, float *by_lane, float *fast) {
    const DF df;
    const size_t lanes = hn::Lanes(df);
    const VF va = hn::Set(df, a);
    const ExpFactors factors = MakeExpFactors<kDegree>(df, va);
    const auto one = [&](VF vx, float *row_out, float *lane_out, float *fast_out) {
        const VF t = ExpShifted(df, vx);
        hn::StoreU(ScaledExp<kDegree, kOneStep, false>(df, vx, t, factors), df, row_out);
        hn::StoreU(ScaledExp<kDegree, kOneStep, false>(df, vx, t, va), df, lane_out);
        hn::StoreU(ScaledExp<kDegree, kOneStep, true>(df, vx, t, factors), df, fast_out);
    };
    size_t i = 0;
    for (; i + lanes <= count; i += lanes) one(hn::LoadU(df, x + i), by_row + i, by_lane + i, fast + i);
    if (i < count) {
        constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
        alignas(HWY_MAX_BYTES) float vx[kMax] = {}, row_out[kMax], lane_out[kMax], fast_out[kMax];
        CopyInPartial(df, x + i, vx, count - i);
        one(hn::Load(df, vx), row_out, lane_out, fast_out);
        CopyOutPartial(df, row_out, by_row + i, count - i);
        CopyOutPartial(df, lane_out, by_lane + i, count - i);
        CopyOutPartial(df, fast_out, fast + i, count - i);
    }
}

void ScaledExpArrays(int degree, bool one_step, float a, const float *x, size_t count, float *by_row, float *by_lane,
                     float *fast) {
    using Fn = void (*)(float, const float *, size_t, float *, float *, float *);
    Fn run = ScaledExpArraysOf<6, false>;  // fp32's exp, whose reduction is two-step only
    if (degree == 4) run = one_step ? ScaledExpArraysOf<4, true> : ScaledExpArraysOf<4, false>;
    if (degree == 5) run = one_step ? ScaledExpArraysOf<5, true> : ScaledExpArraysOf<5, false>;
    run(a, x, count, by_row, by_lane, fast);
}

void GradKernel(const GradKernelArgs &args, const GradTile &tile) {
    switch (args.dtype) {
        case ACL_FLOAT:
            GradTileOf<ACL_FLOAT>(args, tile);
            break;
        case ACL_FLOAT16:
            GradTileOf<ACL_FLOAT16>(args, tile);
            break;
        default:
            GradTileOf<ACL_BF16>(args, tile);
            break;
    }
}

#if OPENACLNN_GRAD_NATIVE_BF16
OPENACLNN_NATIVE_BF16_ATTR HWY_NOINLINE void GradTileNativeBf16(const GradKernelArgs &args, const GradTile &tile) {
    GradTileTyped<ACL_BF16, true>(args, tile);
}

// GradKernel with the native bf16 conversion: the same bits, for CPUs with AVX-512 BF16 (grad_hwy.cpp lists it).
void GradKernelNativeBf16(const GradKernelArgs &args, const GradTile &tile) {
    if (args.dtype == ACL_BF16) {
        GradTileNativeBf16(args, tile);
    } else {
        GradKernel(args, tile);
    }
}
#endif

}  // namespace openaclnn::cross_entropy::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // OPENACLNN_GRAD_HWY_INL_H_ toggle
