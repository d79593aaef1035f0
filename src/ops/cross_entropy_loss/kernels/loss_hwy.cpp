// The fast forward kernel, written once with Highway and compiled for every x86/Arm SIMD target (foreach_target).
//
// Per row, two passes, the second while the row is still in cache (a 32000-class fp32 row is 125 KiB: L2):
//
//   pass 1 reads the row once from memory and keeps, per lane, a running max m and a sum s of exp(x - m). It works
//          in blocks of kBlock vectors: the block's lane max is found first (the block sits in registers), the lane
//          max moves to it, the old sum is rescaled by exp(m_old - m_new) (exactly 1 when the max did not move),
//          and the block's exps are added. So each element costs one exp, and a rescale costs one per block.
//          The block's exps are summed in fp32 (a tree of kBlock terms, <= 3 roundings) and then added into
//          per-lane double accumulators, so the sum over C terms loses nothing to fp32 accumulation. At the end
//          the lanes are combined in double: M = max m_l, S = sum_l s_l * exp(m_l - M), lse = M + log(S).
//   pass 2 reads the row again (from L2) and writes logProb = x - lse in fp32, rounded once to the output type;
//          with label smoothing it also accumulates sum_j w_j * logProb_j (fp32 within a block, double across).
//
// Error bound of lse: each exp is within ~2 ulp of fp32 (the polynomial below), each block sum adds <= 3 ulp and
// each rescale factor ~2 ulp; all terms are positive, so S is within ~5 * 2^-24 relative and lse within ~3e-7
// absolute, i.e. below one ulp of fp32 for |lse| >= 4. logProb = x - (float)lse then carries <= 1 ulp of |lse|
// plus the final rounding: the tolerance the tests apply is a few eps of max(|x|, |lse|).
//
// Special values: the running max starts at the lowest finite float, so x - m is never inf - inf unless x is
// +inf; a lane mask records any NaN or +inf (their exp would be lost to the clamp below) and makes lse NaN, as
// the literal formula does. A row whose max is not above the lowest finite float (all -inf) is handed to the
// reference computation, which gives the formula's NaN.
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

// HWY_SCALAR (one lane, no halves) is the build's static target when compiled without -m flags; it is not a
// kernel here: the reference kernel is the scalar path.
#if HWY_TARGET != HWY_SCALAR
HWY_BEFORE_NAMESPACE();
namespace openaclnn::cross_entropy_loss::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr size_t kBlock = 8;  // vectors per pass-1 block: 8 registers of input, 128 floats with AVX-512

// exp(y) for y <= 0 (or NaN, whose result does not matter: the row is NaN anyway), relative error ~2 ulp.
// y is clamped at -86 (exp(-86) = 4e-38, still normal): every row has a term exp(0) = 1, next to which smaller
// terms vanish in fp32. Range reduction y = k ln2 + r with a two-part ln2 (k * kLn2Hi is exact for |k| < 256),
// |r| <= ln2/2, then a degree-7 Taylor polynomial (truncation error r^8/8! < 6e-9) and 2^k added to the exponent.
HWY_INLINE VF ExpNonPositive(DF d, VF y) {
    const hn::RebindToSigned<DF> di;
    y = hn::Max(y, hn::Set(d, -86.0f));
    const VF k = hn::Round(hn::Mul(y, hn::Set(d, 1.44269504088896341f)));
    VF r = hn::MulAdd(k, hn::Set(d, -0.693145751953125f), y);
    r = hn::MulAdd(k, hn::Set(d, -1.42860682030941723212e-6f), r);
    VF p = hn::Set(d, 1.0f / 5040.0f);
    p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 720.0f));
    p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 120.0f));
    p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 24.0f));
    p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 6.0f));
    p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
    p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
    p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
    // p in [0.7, 1.42] has biased exponent 126 or 127; k >= -124 keeps the result normal.
    const auto scaled = hn::Add(hn::BitCast(di, p), hn::ShiftLeft<23>(hn::ConvertTo(di, k)));
    return hn::BitCast(d, scaled);
}

// ---- loads and stores of the three storage types, through fp32 lanes ----

template <typename T>
HWY_INLINE VF LoadRow(DF d, const T *p) {
    if constexpr (std::is_same_v<T, float>) {
        return hn::LoadU(d, p);
    } else {
        const hn::Rebind<T, DF> dh;
        return hn::PromoteTo(d, hn::LoadU(dh, p));
    }
}

template <typename T>
HWY_INLINE float LoadScalar(const T *p) {
    if constexpr (std::is_same_v<T, float>) {
        return *p;
    } else if constexpr (std::is_same_v<T, hwy::float16_t>) {
        uint16_t bits;
        std::memcpy(&bits, p, 2);
        return HalfToFloat(bits);
    } else {
        uint16_t bits;
        std::memcpy(&bits, p, 2);
        return Bf16ToFloat(bits);
    }
}

// fp32 -> bf16 bits (in u32 lanes), round to nearest even; NaN stays NaN (quiet). Highway 1.0's DemoteTo to bf16
// truncates, so the rounding increment is added to the bits here and the truncating shift comes after.
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> Bf16Bits(DF, VF v) {
    const hn::RebindToSigned<DF> di;
    const hn::RebindToUnsigned<DF> du;
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    const auto rounded = hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), lsb);
    const auto quiet_nan = hn::Or(u, hn::Set(du, 0x00400000u));
    const auto bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded);
    return hn::BitCast(di, hn::ShiftRight<16>(bits));
}

// fp32 -> fp16 bits (in i32 lanes), round to nearest even, subnormals, overflow to infinity, quiet NaN. Used where
// the target has no F16C (SSE4 and below: Highway's emulation there truncates). The subnormal case rides on an
// fp32 addition: a + 0.5 puts the half's subnormal unit (2^-24) at fp32's last place, so the add rounds correctly.
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> HalfBits(DF d, VF v) {
    const hn::RebindToSigned<DF> di;
    const auto u = hn::BitCast(di, v);
    const auto sign = hn::And(u, hn::Set(di, static_cast<int32_t>(0x80000000u)));
    const auto a = hn::Xor(u, sign);  // |v| bits, a non-negative int32
    const auto inf_or_nan = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7f800000)), hn::Set(di, 0x7e00), hn::Set(di, 0x7c00));
    const auto sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(d, a), hn::Set(d, 0.5f))), hn::Set(di, 0x3f000000));
    const auto odd = hn::And(hn::ShiftRight<13>(a), hn::Set(di, 1));
    const auto normal = hn::ShiftRight<13>(hn::Add(hn::Add(a, hn::Set(di, static_cast<int32_t>(0xc8000fffu))), odd));
    auto bits = hn::IfThenElse(hn::Lt(a, hn::Set(di, 0x38800000)), sub, normal);
    bits = hn::IfThenElse(hn::Lt(a, hn::Set(di, 0x47800000)), bits, inf_or_nan);
    const hn::RebindToUnsigned<DF> du;
    return hn::Or(bits, hn::BitCast(di, hn::ShiftRight<16>(hn::BitCast(du, sign))));
}


template <typename T>
HWY_INLINE void StoreRow(DF d, VF v, T *p) {
    if constexpr (std::is_same_v<T, float>) {
        hn::StoreU(v, d, p);
    } else {
        const hn::Rebind<uint16_t, DF> du16;
        if constexpr (std::is_same_v<T, hwy::float16_t>) {
#if HWY_TARGET >= HWY_SSE4 || defined(HWY_DISABLE_F16C)
            hn::StoreU(hn::DemoteTo(du16, HalfBits(d, v)), du16, reinterpret_cast<uint16_t *>(p));
#else
            // F16C's conversion, immediate _MM_FROUND_NO_EXC: round to nearest even, subnormals, overflow to inf.
            const hn::Rebind<hwy::float16_t, DF> dh;
            hn::StoreU(hn::DemoteTo(dh, v), dh, p);
#endif
        } else {
            hn::StoreU(hn::DemoteTo(du16, Bf16Bits(d, v)), du16, reinterpret_cast<uint16_t *>(p));
        }
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

using DD = hn::Repartition<double, DF>;
using VD = hn::Vec<DD>;
using MF = hn::Mask<DF>;

// Adds the lanes of an fp32 vector into two double vectors (its lower and upper half), scaling the old sums first.
HWY_INLINE void AddScaledToDouble(DF d, VF scale, VF v, VD &lo, VD &hi) {
    const DD dd;
    const hn::Half<DF> dh;
    (void)d;
    lo = hn::MulAdd(lo, hn::PromoteTo(dd, hn::LowerHalf(dh, scale)), hn::PromoteTo(dd, hn::LowerHalf(dh, v)));
    hi = hn::MulAdd(hi, hn::PromoteTo(dd, hn::UpperHalf(dh, scale)), hn::PromoteTo(dd, hn::UpperHalf(dh, v)));
}

HWY_INLINE void AddToDouble(DF d, VF v, VD &lo, VD &hi) {
    const DD dd;
    const hn::Half<DF> dh;
    (void)d;
    lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(dh, v)));
    hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(dh, v)));
}

// Pass 1 over K vectors held in registers: lane max, rescale, K exps summed as a tree, into the double sums.
template <size_t K>
HWY_INLINE void AccumulateBlock(DF d, const VF *v, VF &m, VD &s_lo, VD &s_hi, MF &ordinary) {
    const VF inf = hn::Set(d, std::numeric_limits<float>::infinity());
    VF block_max = v[0];
    ordinary = hn::And(ordinary, hn::Lt(v[0], inf));  // false for NaN and +inf
    for (size_t k = 1; k < K; ++k) {
        block_max = hn::Max(block_max, v[k]);
        ordinary = hn::And(ordinary, hn::Lt(v[k], inf));
    }
    const VF new_max = hn::Max(m, block_max);
    const VF scale = ExpNonPositive(d, hn::Sub(m, new_max));  // exactly 1 where the max did not move
    m = new_max;
    VF e[K];
    for (size_t k = 0; k < K; ++k) e[k] = ExpNonPositive(d, hn::Sub(v[k], new_max));
    for (size_t width = 1; width < K; width *= 2) {
        for (size_t k = 0; k + width < K; k += 2 * width) e[k] = hn::Add(e[k], e[k + width]);
    }
    AddScaledToDouble(d, scale, e[0], s_lo, s_hi);
}

// The row's lse in double, plain and slow: only for rows whose max is -inf or the lowest float (see the top).
template <typename T>
double ScalarLogSumExp(const T *x, int64_t c) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < c; ++j) m = std::max(m, static_cast<double>(LoadScalar(x + j)));
    double s = 0.0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(static_cast<double>(LoadScalar(x + j)) - m);
    return m + std::log(s);
}

template <typename T>
double RowLogSumExp(const T *x, int64_t c) {
    const DF d;
    const DD dd;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    constexpr float kLowest = std::numeric_limits<float>::lowest();
    VF m = hn::Set(d, kLowest);
    VD s_lo = hn::Zero(dd), s_hi = hn::Zero(dd);
    MF ordinary = hn::Eq(m, m);  // all true
    int64_t j = 0;
    for (; j + static_cast<int64_t>(kBlock) * lanes <= c; j += static_cast<int64_t>(kBlock) * lanes) {
        VF v[kBlock];
        for (size_t k = 0; k < kBlock; ++k) v[k] = LoadRow(d, x + j + static_cast<int64_t>(k) * lanes);
        AccumulateBlock<kBlock>(d, v, m, s_lo, s_hi, ordinary);
    }
    for (; j + lanes <= c; j += lanes) {
        const VF v[1] = {LoadRow(d, x + j)};
        AccumulateBlock<1>(d, v, m, s_lo, s_hi, ordinary);
    }
    if (j < c) {
        // The tail, padded with -inf: it moves no max and adds exp(-86) ~ 4e-38 per lane, invisible next to 1.
        HWY_ALIGN float padded[HWY_MAX_BYTES / sizeof(float)];
        for (int64_t k = 0; k < lanes; ++k) {
            padded[k] = j + k < c ? LoadScalar(x + j + k) : -std::numeric_limits<float>::infinity();
        }
        const VF v[1] = {hn::Load(d, padded)};
        AccumulateBlock<1>(d, v, m, s_lo, s_hi, ordinary);
    }
    if (!hn::AllTrue(d, ordinary)) return std::numeric_limits<double>::quiet_NaN();

    // Combine the lanes in double, in lane order (fixed, so the result does not depend on anything but the row).
    HWY_ALIGN float lane_max[HWY_MAX_BYTES / sizeof(float)];
    HWY_ALIGN double lane_sum[HWY_MAX_BYTES / sizeof(float)];
    hn::Store(m, d, lane_max);
    hn::Store(s_lo, dd, lane_sum);
    hn::Store(s_hi, dd, lane_sum + lanes / 2);
    float row_max = kLowest;
    for (int64_t k = 0; k < lanes; ++k) row_max = std::max(row_max, lane_max[k]);
    if (!(row_max > kLowest)) return ScalarLogSumExp(x, c);
    double sum = 0.0;
    for (int64_t k = 0; k < lanes; ++k) {
        if (lane_sum[k] != 0.0) sum += lane_sum[k] * std::exp(static_cast<double>(lane_max[k]) - row_max);
    }
    return row_max + std::log(sum);
}

// Pass 2: logProb = x - lse in fp32, rounded once at the store; with kSmoothing also sum_j w_j * logProb_j.
// kStream (fp32 only) writes whole aligned vectors with non-temporal stores: the output then does not displace the
// input rows from the caches nor cost a read-for-ownership of each destination line.
template <typename T, bool kSmoothing, bool kStream>
double WriteLogProb(const T *x, T *out, int64_t c, float lse, const float *weight) {
    const DF d;
    const DD dd;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    const VF lse_v = hn::Set(d, lse);
    VD sum_lo = hn::Zero(dd), sum_hi = hn::Zero(dd);
    double scalar_sum = 0.0;
    auto scalar_element = [&](int64_t j) {
        const float log_prob = LoadScalar(x + j) - lse;
        if constexpr (kSmoothing) scalar_sum += static_cast<double>(weight ? weight[j] : 1.0f) * log_prob;
        StoreScalar(log_prob, out + j);
    };
    int64_t j = 0;
    if constexpr (kStream) {
        const uintptr_t vector_bytes = static_cast<uintptr_t>(lanes) * sizeof(T);
        while (j < c && reinterpret_cast<uintptr_t>(out + j) % vector_bytes != 0) scalar_element(j++);
    }
    auto vector_element = [&](int64_t at, VF &block_sum) {
        const VF log_prob = hn::Sub(LoadRow(d, x + at), lse_v);
        if constexpr (kSmoothing) {
            block_sum = weight ? hn::MulAdd(hn::LoadU(d, weight + at), log_prob, block_sum) : hn::Add(block_sum, log_prob);
        }
        if constexpr (kStream) {
            hn::Stream(log_prob, d, out + at);
        } else {
            StoreRow(d, log_prob, out + at);
        }
    };
    const int64_t block = static_cast<int64_t>(kBlock) * lanes;
    for (; j + block <= c; j += block) {
        VF block_sum = hn::Zero(d);
        for (int64_t k = 0; k < block; k += lanes) vector_element(j + k, block_sum);
        if constexpr (kSmoothing) AddToDouble(d, block_sum, sum_lo, sum_hi);
    }
    VF block_sum = hn::Zero(d);
    for (; j + lanes <= c; j += lanes) vector_element(j, block_sum);
    for (; j < c; ++j) scalar_element(j);
    if constexpr (!kSmoothing) return 0.0;
    AddToDouble(d, block_sum, sum_lo, sum_hi);
    HWY_ALIGN double lane_sum[HWY_MAX_BYTES / sizeof(float)];
    hn::Store(sum_lo, dd, lane_sum);
    hn::Store(sum_hi, dd, lane_sum + lanes / 2);
    double sum = 0.0;
    for (int64_t k = 0; k < lanes; ++k) sum += lane_sum[k];
    return sum + scalar_sum;
}

template <typename T, bool kSmoothing, bool kStream>
void Rows(const LossKernelArgs &args, int64_t row_begin, int64_t row_end) {
    const float *weight = kSmoothing ? args.weight : nullptr;
    for (int64_t i = row_begin; i < row_end; ++i) {
        const T *x = static_cast<const T *>(args.input) + i * args.input_row_stride;
        T *out = static_cast<T *>(args.log_prob) + i * args.log_prob_row_stride;
        LossRowStats &row = args.rows[i];
        if (args.c == 0) {
            row.lse = -std::numeric_limits<double>::infinity();
            row.weighted_log_prob_sum = 0.0;
            continue;
        }
        // Prefetching the next row is left to the hardware: both passes walk memory forward in unit steps.
        const double lse = RowLogSumExp(x, args.c);
        row.lse = lse;
        row.weighted_log_prob_sum = WriteLogProb<T, kSmoothing, kStream>(x, out, args.c, static_cast<float>(lse), weight);
    }
    if constexpr (kStream) hwy::FlushStream();
}

template <typename T>
void RowsOfType(const LossKernelArgs &args, int64_t row_begin, int64_t row_end) {
    if constexpr (std::is_same_v<T, float>) {
        if (args.stream_stores) {
            args.smoothing ? Rows<T, true, true>(args, row_begin, row_end) : Rows<T, false, true>(args, row_begin, row_end);
            return;
        }
    }
    args.smoothing ? Rows<T, true, false>(args, row_begin, row_end) : Rows<T, false, false>(args, row_begin, row_end);
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

}  // namespace openaclnn::cross_entropy_loss::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET != HWY_SCALAR

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
    {0, {nullptr, 0, nullptr, nullptr}},
};

}  // namespace

int HighwayLossKernels(const LossKernelInfo **out, int capacity) {
    const int64_t supported = hwy::SupportedTargets();
    int count = 0;
    for (const HighwayEntry &entry : kHighwayEntries) {
        if (entry.info.name != nullptr && (supported & entry.target) != 0 && count < capacity) out[count++] = &entry.info;
    }
    return count;
}

}  // namespace openaclnn::cross_entropy_loss
#endif  // HWY_ONCE
