// The fast forward kernel, written once with Highway and compiled for every target this CPU may run (AVX-512,
// AVX2, SSE4 and the one-lane SCALAR target on x86; NEON elsewhere), all in this one file (foreach_target).
//
// Per row, three passes; the row is read once from memory (a 32000-class fp32 row is 125 KiB: it stays in L2):
//
//   pass A: the row max M (one Max per vector; exact, so any order gives the same M).
//   pass B: per logical lane, the sum of exp(x - M): the block's exps summed as a fixed tree in fp32, then added into
//           the lane's double accumulator, so the sum over C terms loses nothing to fp32 accumulation; a fp32 sum of
//           x - M per lane is the NaN probe (NaN, +inf as inf - inf, all -inf as -inf - -inf; otherwise x - M <= 0
//           and the sum never becomes NaN). With label smoothing also sum w x and sum w per lane. The 16 lanes are
//           combined in double in lane order: lse = M + log(S); sum_j w_j logProb_j = sum w x - lse sum w.
//   pass C: logProb = x - (float)lse, rounded once to the output type, element-wise.
// Row i + 1 is prefetched into L2 during pass B of row i, so its reads from memory overlap the exps.
//
// Bitwise identical on every target (DESIGN.md section 4), as the gradient's kernels (grad_hwy-inl.h):
//  * The 16 "logical lanes" are fixed: element j belongs to lane j % 16, whatever the vector width. AVX-512 holds
//    a group of 16 in one vector, AVX2 in two, SSE4 in four, SCALAR in sixteen; each logical lane sees the same
//    operations on the same values in the same order on every target. A row's tail (C % 16 elements) is padded
//    to a full group with -inf (0 for the smoothing sums) through a small buffer, the same on every target.
//  * Only correctly rounded single operations: Mul, Add, Sub, Max, fused multiply-add (one rounding: the
//    instruction on AVX2/AVX-512, std::fmaf per lane on SSE4/SCALAR, see Fma), integer ops, exact conversions.
//    The file is compiled with -ffp-contract=off (sources.cmake) so the compiler fuses nothing on its own, in vector
//    or scalar code. The double combination uses the same libm log on every target.
//  * exp: Cody-Waite reduction with the 1.5 * 2^23 rounding trick and the gradient's degree-5 minimax polynomial
//    (ExpPoly<5>), fused Horner (see ExpNonPositive).
//  * Loads widen exactly with the same integer sequences where Highway 1.0 emulates fp16 (SSE4, SCALAR); stores
//    round to nearest even once.
//  Signed zeros never change a value: max(+0, -0) may be either, but exp(+-0) = 1 and x -+ 0 = x for x != 0.
//
// Error bound of lse: each exp is within 2^-23.2 relative (polynomial) plus a rounding or two, each block's tree sum
// adds <= 3 roundings; all terms are positive, so S is within ~2.5e-7 relative and lse within ~2.5e-7 absolute
// (below one fp32 ulp for |lse| >= 4). logProb = x - (float)lse then carries <= 1 ulp of |lse| plus the final
// rounding. The smoothing sum sum w x - lse sum w is within ~4 * 2^-24 * sum_j |w_j| (|x_j| + |lse|).
//
// Speed (fp32, AVX-512, one core, rows in cache): about 0.24 ns per element for the three passes.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
#define HWY_COMPILE_ALL_ATTAINABLE

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cross_entropy_loss/kernels/loss_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/cache_control.h"

#include "common/float_convert.h"
#include "ops/cross_entropy_loss/kernels/loss_kernel.h"

HWY_BEFORE_NAMESPACE();
namespace openaclnn::cross_entropy_loss::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kGroup = 16;       // logical lanes: element j belongs to lane j % 16 on every target
constexpr size_t kBlockGroups = 8;  // groups per pass-1 block: 128 elements, 8 exps per lane per rescale

using DF = hn::CappedTag<float, kGroup>;  // at most 16 lanes, so a group is a whole number of vectors
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using D16 = hn::Rebind<uint16_t, DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

// Targets whose Highway fp16 conversions are emulated (Highway 1.0: no inf/NaN, no round to nearest even) use
// exact integer sequences; the others have hardware conversions (F16C, NEON).
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
#define OPENACLNN_LOSS_SOFT_F16 1
#else
#define OPENACLNN_LOSS_SOFT_F16 0
#endif

// Streaming stores where Highway's Stream writes exactly one full vector (x86 AVX2/AVX-512).
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr bool kCanStream = true;
#else
constexpr bool kCanStream = false;
#endif

// ---- exp(y) for y <= 0 -------------------------------------------------------------------------------------------

// a * b + c with one rounding (fused multiply-add) on every target: the hardware instruction where Highway's MulAdd
// is one (AVX2 and AVX-512 require FMA), else std::fmaf per lane, which is correctly rounded by definition (libm
// uses the instruction where the CPU has it and an exact software sequence where not). So every target computes the
// same values; the lane-wise fallback makes the SSE4 and SCALAR levels slower, never different.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define OPENACLNN_LOSS_NATIVE_FMA 1
#else
#define OPENACLNN_LOSS_NATIVE_FMA 0
#endif

HWY_INLINE VF Fma(DF df, VF a, VF b, VF c) {
#if OPENACLNN_LOSS_NATIVE_FMA
    (void)df;
    return hn::MulAdd(a, b, c);
#else
    HWY_ALIGN float va[kGroup], vb[kGroup], vc[kGroup];
    hn::Store(a, df, va);
    hn::Store(b, df, vb);
    hn::Store(c, df, vc);
    for (size_t k = 0; k < hn::Lanes(df); ++k) va[k] = std::fmaf(va[k], vb[k], vc[k]);
    return hn::Load(df, va);
#endif
}

// exp(y), y <= 0 or NaN (the NaN probe of pass B decides such rows, whatever this returns). y is clamped at -86
// (exp(-86) = 4e-38, still normal): every row has a term exp(0) = 1, next to which the clamped terms vanish.
// y = k ln2 + r: k = round(y log2e) by the 1.5 * 2^23 trick (one fused rounding), r = y - k ln2_hi exactly (k
// ln2_hi is exact, the difference representable) then - k ln2_lo (one rounding), |r| <= ln2/2; exp(r) by the degree-5
// minimax polynomial of the gradient's kernels (grad_hwy-inl.h, ExpPoly<5>: relative error 2^-23.2), fused Horner;
// then k is added to the exponent field (p in [0.7, 1.42] and k >= -124 keep the result normal). The exps only enter
// a sum of positive terms, so S and lse carry the polynomial's 2^-23.2 at most (lse within ~1.2e-7 absolute).
HWY_INLINE VF ExpNonPositive(DF df, VF y) {
    const DI di;
    const VF magic = hn::Set(df, 12582912.0f);
    y = hn::Max(y, hn::Set(df, -86.0f));
    const VF t = Fma(df, y, hn::Set(df, 1.44269504088896341f), magic);
    const VF kf = hn::Sub(t, magic);
    VF r = Fma(df, kf, hn::Set(df, -0.693145751953125f), y);
    r = Fma(df, kf, hn::Set(df, -1.42860676533018708e-6f), r);
    VF s = hn::Set(df, 0x1.106256p-7f);
    s = Fma(df, s, r, hn::Set(df, 0x1.572a68p-5f));
    s = Fma(df, s, r, hn::Set(df, 0x1.5557bp-3f));
    s = Fma(df, s, r, hn::Set(df, 0x1.fffdfcp-2f));
    s = Fma(df, s, r, hn::Set(df, 1.0f));
    const VF p = Fma(df, s, r, hn::Set(df, 1.0f));
    // t's low bits hold k + 2^22 (t = 1.5 * 2^23 + k); shifted left by 23 only k survives mod 2^32 (the low 9 bits
    // of 1.5 * 2^23's representation are zero), so k's exponent increment comes from t's bits in one shift.
    return hn::BitCast(df, hn::Add(hn::BitCast(di, p), hn::ShiftLeft<23>(hn::BitCast(di, t))));
}

// ---- per-lane double accumulators --------------------------------------------------------------------------------

// The lanes of one float vector as doubles (two half-width vectors; one lane on SCALAR).
#if HWY_TARGET == HWY_SCALAR
using DD = hn::Rebind<double, DF>;
struct DoubleLanes {
    hn::Vec<DD> v;
};
HWY_INLINE DoubleLanes ZeroLanes() { return {hn::Zero(DD())}; }
HWY_INLINE void AddLanes(DoubleLanes &acc, VF add) { acc.v = hn::Add(acc.v, hn::PromoteTo(DD(), add)); }
HWY_INLINE void StoreLanes(const DoubleLanes &acc, double *out) { hn::StoreU(acc.v, DD(), out); }
#else
using DH = hn::Half<DF>;
using DD = hn::Rebind<double, DH>;
struct DoubleLanes {
    hn::Vec<DD> lo, hi;
};
HWY_INLINE DoubleLanes ZeroLanes() { return {hn::Zero(DD()), hn::Zero(DD())}; }
HWY_INLINE void AddLanes(DoubleLanes &acc, VF add) {
    const DD dd;
    const DH dh;
    acc.lo = hn::Add(acc.lo, hn::PromoteTo(dd, hn::LowerHalf(dh, add)));
    acc.hi = hn::Add(acc.hi, hn::PromoteTo(dd, hn::UpperHalf(dh, add)));
}
HWY_INLINE void StoreLanes(const DoubleLanes &acc, double *out) {
    hn::StoreU(acc.lo, DD(), out);
    hn::StoreU(acc.hi, DD(), out + hn::Lanes(DD()));
}
#endif

// ---- loads and stores of the three storage types, through fp32 lanes ---------------------------------------------

// fp16 bits -> fp32, exact, inf/NaN kept (the gradient's HalfToF32 sequence on the soft targets).
HWY_INLINE VF HalfToF32(DF df, hn::Vec<D16> h) {
#if OPENACLNN_LOSS_SOFT_F16
    const DU du;
    const DI di;
    const auto bits = hn::PromoteTo(du, h);
    const auto magnitude = hn::ShiftLeft<13>(hn::And(bits, hn::Set(du, 0x7fffu)));
    const VF scaled = hn::Mul(hn::BitCast(df, magnitude), hn::Set(df, 0x1p112f));
    const auto special = hn::Or(magnitude, hn::Set(du, 0x7f800000u));
    const auto is_special = hn::Gt(hn::BitCast(di, magnitude), hn::Set(di, 0x0f7fffff));
    const auto value = hn::IfThenElse(hn::RebindMask(du, is_special), special, hn::BitCast(du, scaled));
    return hn::BitCast(df, hn::Or(value, hn::ShiftLeft<16>(hn::And(bits, hn::Set(du, 0x8000u)))));
#else
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::BitCast(dh, h));
#endif
}

template <typename T>
HWY_INLINE VF LoadRow(DF df, const T *p) {
    if constexpr (std::is_same_v<T, float>) {
        return hn::LoadU(df, p);
    } else if constexpr (std::is_same_v<T, hwy::float16_t>) {
        return HalfToF32(df, hn::LoadU(D16(), reinterpret_cast<const uint16_t *>(p)));
    } else {
        const DU du;
        return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(D16(), reinterpret_cast<const uint16_t *>(p)))));
    }
}

template <typename T>
HWY_INLINE float LoadScalar(const T *p) {
    if constexpr (std::is_same_v<T, float>) {
        return *p;
    } else {
        uint16_t bits;
        std::memcpy(&bits, p, 2);
        return std::is_same_v<T, hwy::float16_t> ? HalfToFloat(bits) : Bf16ToFloat(bits);
    }
}

// fp32 -> bf16 bits (in i32 lanes), round to nearest even; NaN stays NaN (quiet). Highway 1.0's DemoteTo to bf16
// truncates, so the rounding increment is added to the bits here and the truncating shift comes after.
HWY_INLINE VI Bf16Bits(DF, VF v) {
    const DI di;
    const DU du;
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    const auto rounded = hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), lsb);
    const auto quiet_nan = hn::Or(u, hn::Set(du, 0x00400000u));
    const auto bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded);
    return hn::BitCast(di, hn::ShiftRight<16>(bits));
}

// fp32 -> fp16 bits (in i32 lanes), round to nearest even, subnormals, overflow to infinity, quiet NaN keeping the
// payload's top bits: the same results as FloatToHalf (common/float_convert.h) and F16C. Soft targets only.
HWY_INLINE VI HalfBits(DF df, VF v) {
    const DI di;
    const DU du;
    const auto u = hn::BitCast(du, v);
    const auto sign = hn::And(u, hn::Set(du, 0x80000000u));
    const auto abs = hn::Xor(u, sign);
    const VI abs_i = hn::BitCast(di, abs);
    const auto odd = hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 1u));
    const auto normal = hn::ShiftRight<13>(hn::Add(hn::Add(abs, hn::Set(du, 0xc8000fffu)), odd));
    const VF half_magic = hn::Set(df, 0.5f);
    const auto subnormal =
        hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, abs), half_magic)), hn::BitCast(du, half_magic));
    auto bits = hn::IfThenElse(hn::RebindMask(du, hn::Lt(abs_i, hn::Set(di, 0x38800000))), subnormal, normal);
    bits = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x477fefff))), hn::Set(du, 0x7c00u), bits);
    const auto nan = hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 0x1ffu)));
    bits = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x7f800000))), nan, bits);
    return hn::BitCast(di, hn::Or(bits, hn::ShiftRight<16>(sign)));
}

template <typename T>
HWY_INLINE void StoreRow(DF df, VF v, T *p) {
    if constexpr (std::is_same_v<T, float>) {
        hn::StoreU(v, df, p);
    } else if constexpr (std::is_same_v<T, hwy::float16_t>) {
#if OPENACLNN_LOSS_SOFT_F16
        hn::StoreU(hn::DemoteTo(D16(), HalfBits(df, v)), D16(), reinterpret_cast<uint16_t *>(p));
#else
        // F16C / NEON conversion: round to nearest even, subnormals, overflow to inf.
        const hn::Rebind<hwy::float16_t, DF> dh;
        hn::StoreU(hn::DemoteTo(dh, v), dh, p);
#endif
    } else {
        hn::StoreU(hn::DemoteTo(D16(), Bf16Bits(df, v)), D16(), reinterpret_cast<uint16_t *>(p));
    }
}

// The scalar twin of StoreRow for row heads and tails: the same fp32 value, the same round-to-nearest-even.
template <typename T>
HWY_INLINE void StoreScalar(float v, T *p) {
    if constexpr (std::is_same_v<T, float>) {
        *p = v;
    } else {
        const uint16_t bits = std::is_same_v<T, hwy::float16_t> ? FloatToHalf(v) : FloatToBf16(v);
        std::memcpy(p, &bits, 2);
    }
}

// ---- pass 2 ------------------------------------------------------------------------------------------------------

// Pass C: writes logProb = x - lse of one row in fp32, rounded once at the store (element-wise, so neither the vector
// width nor how the row is cut into Advance calls changes a value); the row is read from L2.
// kStream (fp32 on AVX2/AVX-512) writes whole aligned vectors with non-temporal stores: the output then does not
// displace the input rows from the caches nor cost a read-for-ownership of each destination line.
template <typename T, bool kStream>
struct LogProbWriter {
    const T *x = nullptr;
    T *out = nullptr;
    int64_t c = 0;  // 0: nothing to write
    int64_t j = 0;
    float lse = 0.0f;
    bool stream = false;

    HWY_INLINE void ScalarElement() {
        StoreScalar(LoadScalar(x + j) - lse, out + j);
        ++j;
    }

    void Start(const T *row_x, T *row_out, int64_t row_c, float row_lse) {
        x = row_x;
        out = row_out;
        c = row_c;
        j = 0;
        lse = row_lse;
        stream = false;
        if constexpr (kStream) {
            const uintptr_t vector_bytes = hn::Lanes(DF()) * sizeof(T);
            if (reinterpret_cast<uintptr_t>(out) % sizeof(T) == 0) {
                stream = true;
                while (j < c && reinterpret_cast<uintptr_t>(out + j) % vector_bytes != 0) ScalarElement();
            }
        }
    }

    // Whole vectors up to element `until` (and never past the row).
    HWY_INLINE void Advance(int64_t until) {
        const DF df;
        const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
        const int64_t end = HWY_MIN(until, c);
        if (j + lanes > end) return;
        const VF lse_v = hn::Set(df, lse);
        if constexpr (kStream) {
            if (stream) {
                for (; j + lanes <= end; j += lanes) hn::Stream(hn::Sub(LoadRow(df, x + j), lse_v), df, out + j);
                return;
            }
        }
        for (; j + lanes <= end; j += lanes) StoreRow(df, hn::Sub(LoadRow(df, x + j), lse_v), out + j);
    }

    void Finish() {
        Advance(c);
        while (j < c) ScalarElement();
        c = 0;
    }
};

// ---- passes A and B: the row's max, then its sum of exps --------------------------------------------------------

HWY_INLINE VF TreeSum(VF *v, size_t count) {
    for (size_t width = 1; width < count; width *= 2) {
        for (size_t k = 0; k + width < count; k += 2 * width) v[k] = hn::Add(v[k], v[k + width]);
    }
    return v[0];
}

// Pass A: the row's max M (an exact operation: any order, any vector width gives the same M, up to the sign of a
// zero, which changes no value). With a NaN in the row M may be anything; pass B then finds the NaN.
template <typename T>
HWY_INLINE float RowMax(const T *x, int64_t c) {
    const DF df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    const VF minus_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
    VF m0 = minus_inf, m1 = minus_inf, m2 = minus_inf, m3 = minus_inf;
    int64_t j = 0;
    for (; j + 4 * lanes <= c; j += 4 * lanes) {
        m0 = hn::Max(m0, LoadRow(df, x + j));
        m1 = hn::Max(m1, LoadRow(df, x + j + lanes));
        m2 = hn::Max(m2, LoadRow(df, x + j + 2 * lanes));
        m3 = hn::Max(m3, LoadRow(df, x + j + 3 * lanes));
    }
    for (; j + lanes <= c; j += lanes) m0 = hn::Max(m0, LoadRow(df, x + j));
    // The lanes are combined here, not by MaxOfLanes: Highway 1.0's EMU128 target (the scalar level when clang builds
    // this file; gcc < 12.3 gets SCALAR) starts MaxOfLanes from the lowest finite float, so a row of all -inf got
    // M = -FLT_MAX, and pass B's NaN probe (-inf - M = -inf) missed it.
    HWY_ALIGN float lane_max[kGroup];
    hn::Store(hn::Max(hn::Max(m0, m1), hn::Max(m2, m3)), df, lane_max);
    float m = lane_max[0];
    for (size_t k = 1; k < hn::Lanes(df); ++k) m = std::max(m, lane_max[k]);
    for (; j < c; ++j) m = std::max(m, LoadScalar(x + j));
    return m;
}

// The state of the logical lanes one vector covers, pass B.
struct LaneSums {
    VF y;           // sum of x - M in fp32: only to find NaN (x - M <= 0 otherwise, so it never becomes NaN)
    DoubleLanes s;  // sum of exp(x - M)
    DoubleLanes wx; // smoothing: sum of w x (x without weight)
    DoubleLanes w;  // smoothing with weight: sum of w
};

// One vector slot of B consecutive groups: x[b] the inputs (-inf padded), xs[b] the inputs for the smoothing sums
// (0 padded), w[b] their weights (0 padded). The operation order is a function of B and the lane only.
template <size_t B, bool kSmooth, bool kWeighted>
HWY_INLINE void AccumulateSlot(DF df, VF row_max, const VF *x, const VF *xs, const VF *w, LaneSums &st) {
    VF e[B];
    for (size_t b = 0; b < B; ++b) {
        const VF y = hn::Sub(x[b], row_max);
        st.y = hn::Add(st.y, y);
        e[b] = ExpNonPositive(df, y);
    }
    AddLanes(st.s, TreeSum(e, B));
    if constexpr (kSmooth) {
        VF prod[B];
        for (size_t b = 0; b < B; ++b) prod[b] = kWeighted ? hn::Mul(w[b], xs[b]) : xs[b];
        AddLanes(st.wx, TreeSum(prod, B));
        if constexpr (kWeighted) {
            VF ws[B];
            for (size_t b = 0; b < B; ++b) ws[b] = w[b];
            AddLanes(st.w, TreeSum(ws, B));
        }
    }
}

// B groups starting at x (and w): every vector slot of the group in turn.
template <size_t B, bool kSmooth, bool kWeighted, typename T>
HWY_INLINE void AccumulateGroups(DF df, VF row_max, const T *x, const T *xs, const float *w, LaneSums *st) {
    const size_t lanes = hn::Lanes(df);
    for (size_t slot = 0; slot * lanes < kGroup; ++slot) {
        VF v[B], vs[B], vw[B];
        for (size_t b = 0; b < B; ++b) {
            v[b] = LoadRow(df, x + b * kGroup + slot * lanes);
            if constexpr (kSmooth) vs[b] = xs == x ? v[b] : LoadRow(df, xs + b * kGroup + slot * lanes);
            if constexpr (kWeighted) vw[b] = hn::LoadU(df, w + b * kGroup + slot * lanes);
        }
        AccumulateSlot<B, kSmooth, kWeighted>(df, row_max, v, vs, vw, st[slot]);
    }
}

// Brings [p, p + bytes) towards L2 (the next row, while this one is computed from L2).
HWY_INLINE void PrefetchBytes(const void *p, size_t bytes) {
    const char *c = static_cast<const char *>(p);
    for (size_t k = 0; k < bytes; k += 64) __builtin_prefetch(c + k, 0, 2);
}

struct RowResult {
    double lse;
    double weighted_log_prob_sum;
};

// Pass A and B of one row; meanwhile the next row is prefetched into L2 (next_row, may be null).
template <typename T, bool kSmooth, bool kWeighted>
RowResult RowLogSumExp(const T *x, int64_t c, const float *weight, const T *next_row) {
    const DF df;
    constexpr size_t kMaxSlots = kGroup;  // SCALAR: 16 one-lane slots
    const size_t lanes = hn::Lanes(df);
    const size_t slots = kGroup / lanes;
    const float m = RowMax(x, c);
    const VF row_max = hn::Set(df, m);
    LaneSums st[kMaxSlots];
    for (size_t k = 0; k < slots; ++k) st[k] = {hn::Zero(df), ZeroLanes(), ZeroLanes(), ZeroLanes()};
    constexpr int64_t kBlock = static_cast<int64_t>(kGroup * kBlockGroups);
    int64_t j = 0;
    for (; j + kBlock <= c; j += kBlock) {
        AccumulateGroups<kBlockGroups, kSmooth, kWeighted>(df, row_max, x + j, x + j,
                                                           kWeighted ? weight + j : nullptr, st);
        if (next_row != nullptr) PrefetchBytes(next_row + j, kBlock * sizeof(T));
    }
    for (; j + static_cast<int64_t>(kGroup) <= c; j += kGroup) {
        AccumulateGroups<1, kSmooth, kWeighted>(df, row_max, x + j, x + j, kWeighted ? weight + j : nullptr, st);
        if (next_row != nullptr) PrefetchBytes(next_row + j, kGroup * sizeof(T));
    }
    if (j < c) {
        // The tail as one group, through buffers: -inf adds exp(-86) ~ 4e-38 (the clamp) to its lane, invisible
        // next to the row's exp(0) = 1, and -inf to the NaN probe; 0 with weight 0 adds nothing to the smoothing
        // sums.
        HWY_ALIGN T padded[kGroup];
        HWY_ALIGN T zero_padded[kGroup];
        HWY_ALIGN float w_padded[kGroup];
        const float minus_inf = -std::numeric_limits<float>::infinity();
        for (size_t k = 0; k < kGroup; ++k) {
            const bool inside = j + static_cast<int64_t>(k) < c;
            if constexpr (std::is_same_v<T, float>) {
                padded[k] = inside ? x[j + k] : minus_inf;
            } else {
                const uint16_t bits = std::is_same_v<T, hwy::float16_t> ? 0xfc00u : 0xff80u;  // -inf
                std::memcpy(&padded[k], inside ? static_cast<const void *>(x + j + k) : &bits, 2);
            }
            std::memset(&zero_padded[k], 0, sizeof(T));
            if (inside) std::memcpy(&zero_padded[k], x + j + k, sizeof(T));
            w_padded[k] = inside && kWeighted ? weight[j + k] : 0.0f;
        }
        AccumulateGroups<1, kSmooth, kWeighted>(df, row_max, padded, kSmooth ? zero_padded : padded, w_padded, st);
        if (next_row != nullptr) PrefetchBytes(next_row + j, static_cast<size_t>(c - j) * sizeof(T));
    }
    // NaN anywhere, +inf (inf - inf) or all -inf (-inf - -inf) leave a NaN in the probe: lse is NaN, as the
    // formula gives.
    RowResult result{std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
    auto nan = hn::IsNaN(st[0].y);
    for (size_t k = 1; k < slots; ++k) nan = hn::Or(nan, hn::IsNaN(st[k].y));
    if (!hn::AllFalse(df, nan)) return result;

    // S = sum of the 16 lanes in double, in logical lane order: the same on every target.
    HWY_ALIGN double lane_sum[kGroup];
    for (size_t k = 0; k < slots; ++k) StoreLanes(st[k].s, lane_sum + k * lanes);
    double sum = 0.0;
    for (size_t k = 0; k < kGroup; ++k) sum += lane_sum[k];
    const double lse = static_cast<double>(m) + std::log(sum);
    result.lse = lse;
    result.weighted_log_prob_sum = 0.0;
    if constexpr (kSmooth) {
        // sum_j w_j (x_j - lse) = sum w x - lse * sum w, each sum combined in lane order.
        HWY_ALIGN double lane_wx[kGroup];
        HWY_ALIGN double lane_w[kGroup];
        for (size_t k = 0; k < slots; ++k) {
            StoreLanes(st[k].wx, lane_wx + k * lanes);
            StoreLanes(st[k].w, lane_w + k * lanes);
        }
        double wx = 0.0, w = 0.0;
        for (size_t k = 0; k < kGroup; ++k) {
            wx += lane_wx[k];
            w += lane_w[k];
        }
        if constexpr (!kWeighted) w = static_cast<double>(c);
        result.weighted_log_prob_sum = wx - lse * w;
    }
    return result;
}

// Row i's passes A, B and C; row i + 1 is prefetched during pass B, so its reads overlap the exps. (Writing row
// i - 1's logProb during pass B as well, with LogProbWriter::Advance, measured slower: 14.8 against 13.4 ms for
// 1024 x 32000 on one core; the stores go out in one stretch in pass C instead.)
template <typename T, bool kSmooth, bool kWeighted, bool kStream>
void Rows(const LossKernelArgs &args, int64_t row_begin, int64_t row_end) {
    if (args.c == 0) {
        for (int64_t i = row_begin; i < row_end; ++i) {
            args.rows[i].lse = -std::numeric_limits<double>::infinity();
            args.rows[i].weighted_log_prob_sum = 0.0;
        }
        return;
    }
    LogProbWriter<T, kStream> writer;
    for (int64_t i = row_begin; i < row_end; ++i) {
        const T *x = static_cast<const T *>(args.input) + i * args.input_row_stride;
        T *out = static_cast<T *>(args.log_prob) + i * args.log_prob_row_stride;
        const T *next = i + 1 < row_end ? x + args.input_row_stride : nullptr;
        const RowResult r = RowLogSumExp<T, kSmooth, kWeighted>(x, args.c, args.weight, next);
        args.rows[i].lse = r.lse;
        args.rows[i].weighted_log_prob_sum = r.weighted_log_prob_sum;
        writer.Start(x, out, args.c, static_cast<float>(r.lse));
        writer.Finish();
    }
    if constexpr (kStream) hwy::FlushStream();
}

template <typename T, bool kStream>
void RowsOfKind(const LossKernelArgs &args, int64_t row_begin, int64_t row_end) {
    if (!args.smoothing) {
        Rows<T, false, false, kStream>(args, row_begin, row_end);
    } else if (args.weight == nullptr) {
        Rows<T, true, false, kStream>(args, row_begin, row_end);
    } else {
        Rows<T, true, true, kStream>(args, row_begin, row_end);
    }
}

template <typename T>
void RowsOfType(const LossKernelArgs &args, int64_t row_begin, int64_t row_end) {
    if constexpr (std::is_same_v<T, float> && kCanStream) {
        if (args.stream_stores) {
            RowsOfKind<T, true>(args, row_begin, row_end);
            return;
        }
    }
    RowsOfKind<T, false>(args, row_begin, row_end);
}

void LossRows(const LossKernelArgs &args, int64_t row_begin, int64_t row_end) {
    switch (args.dtype) {
        case ACL_FLOAT:
            RowsOfType<float>(args, row_begin, row_end);
            break;
        case ACL_FLOAT16:
            RowsOfType<hwy::float16_t>(args, row_begin, row_end);
            break;
        default:
            RowsOfType<hwy::bfloat16_t>(args, row_begin, row_end);
            break;
    }
}

#undef OPENACLNN_LOSS_SOFT_F16
#undef OPENACLNN_LOSS_NATIVE_FMA

}  // namespace openaclnn::cross_entropy_loss::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace openaclnn::cross_entropy_loss {
namespace {

// Unit column strides (rows may have any stride) and, when read, a contiguous weight.
bool SupportsHighway(const LossKernelArgs &args) {
    return args.input_col_stride == 1 && args.log_prob_col_stride == 1 &&
           (!args.smoothing || args.weight == nullptr || args.weight_stride == 1);
}

struct HighwayEntry {
    int64_t target;
    LossKernelInfo info;
};

// Best first. SCALAR (or EMU128) is the "scalar" ISA level: the same code, one lane at a time.
const HighwayEntry kHighwayEntries[] = {
#if HWY_TARGETS & HWY_AVX3
    {HWY_AVX3, {"hwy:AVX3", 3, SupportsHighway, N_AVX3::LossRows}},
#endif
#if HWY_TARGETS & HWY_AVX2
    {HWY_AVX2, {"hwy:AVX2", 2, SupportsHighway, N_AVX2::LossRows}},
#endif
#if HWY_TARGETS & HWY_SSE4
    {HWY_SSE4, {"hwy:SSE4", 1, SupportsHighway, N_SSE4::LossRows}},
#endif
#if HWY_TARGETS & HWY_NEON
    {HWY_NEON, {"hwy:NEON", 2, SupportsHighway, N_NEON::LossRows}},
#endif
#if HWY_TARGETS & HWY_EMU128
    {HWY_EMU128, {"hwy:EMU128", 0, SupportsHighway, N_EMU128::LossRows}},
#endif
#if HWY_TARGETS & HWY_SCALAR
    {HWY_SCALAR, {"hwy:SCALAR", 0, SupportsHighway, N_SCALAR::LossRows}},
#endif
    {0, {nullptr, 0, nullptr, nullptr}},
};

}  // namespace

int HighwayLossKernels(const LossKernelInfo **out, int capacity) {
    const int64_t supported = hwy::SupportedTargets();
    int count = 0;
    bool have_scalar_level = false;
    for (const HighwayEntry &entry : kHighwayEntries) {
        if (entry.info.name == nullptr || (supported & entry.target) == 0 || count >= capacity) continue;
        // One kernel per ISA level: EMU128 and SCALAR are both "scalar"; the first listed is kept.
        if (entry.info.isa_rank == 0) {
            if (have_scalar_level) continue;
            have_scalar_level = true;
        }
        out[count++] = &entry.info;
    }
    return count;
}

}  // namespace openaclnn::cross_entropy_loss
#endif  // HWY_ONCE
