// The fast forward kernel, written once with Highway and compiled for every target this CPU may run (AVX-512,
// AVX2, SSE4 and the one-lane SCALAR target on x86; NEON elsewhere), all in this one file (foreach_target).
//
// Per row, three passes; the row is read once from memory (a 32000-class fp32 row is 125 KiB: it stays in L2):
//
//   pass A: the row max M (one Max per vector; exact, so any order gives the same M).
//   pass B: per logical lane, the sum of exp(x - M): the block's exps summed as a fixed tree in fp32, then added into
//           the lane's double accumulator, so the sum over C terms loses nothing to fp32 accumulation. With label
//           smoothing also sum w x and sum w per lane. The accumulators restart from zero at every piece of
//           LossPieceColumns(C) columns (loss_kernel.h) and the pieces' lane sums are added in piece order, so that
//           threads sharing a long row (SplitRowOf) get the same bits as one thread running it whole. The 16 lanes
//           are combined in double in lane order: lse = M + log(S); sum_j w_j logProb_j = sum w x - lse sum w.
//   pass C: logProb = x - (float)lse, rounded once to the output type, element-wise; the fp32 values are also summed
//           per lane, the row's NaN probe (see below).
// The rows of a thread are software-pipelined (ContiguousRows): pass B of row i runs block by block together with pass
// C of row i - 1, pass A of row i + 1 and the prefetch of row i + 2 into L2, so the exps overlap the memory reads and
// writes.
//
// Special values. NaN in a row, +inf in a row and a row of all -inf make lse and the whole logProb row NaN, as the
// formula (and PyTorch's log_softmax) gives. M = +inf or -inf is seen after pass A (Max never loses an infinity to
// a finite value). A NaN is seen by pass C: with M finite every x - (float)lse is <= 0, -inf or NaN (the latter only
// for x = NaN, or x = +inf next to a NaN, where a target's Max may have dropped the +inf), so the lane sums of pass C
// are NaN exactly when the row holds a NaN; the row is then rewritten with NaN (rare; the stores of pass C need not
// care about NaN lanes). What Max does with NaN differs between targets, but only in rows that end up all NaN.
//
// Bitwise identical on every target (DESIGN.md section 4), as the gradient's kernels (grad_hwy-inl.h):
//  * The 16 "logical lanes" are fixed: element j belongs to lane j % 16, whatever the vector width. AVX-512 holds
//    a group of 16 in one vector, AVX2 in two, SSE4 in four, SCALAR in sixteen; each logical lane sees the same
//    operations on the same values in the same order on every target. A row's tail (C % 16 elements) is padded
//    to a full group with -inf (0 for the smoothing sums) through a small buffer, the same on every target.
//  * Only correctly rounded single operations: Mul, Add, Sub, Max, integer ops, exact conversions, and no fused
//    multiply-add anywhere (SSE4 and SCALAR have none, and emulating one lane by lane made them 50-100x slower). The
//    file is compiled with -ffp-contract=off (sources.cmake) so the compiler fuses nothing on its own, in vector or
//    scalar code. The double combination uses the same libm log on every target.
//  * Every layout gives the bits of the contiguous one: rows with a column stride other than 1 (a transposed input
//    or logProb) or a strided weight are gathered in chunks of kGatherColumns (a multiple of the 128-element block)
//    into stack buffers and run through the same passes, so pass B adds the same block sums in the same order; pass
//    C is element-wise.
//  * Loads widen exactly with the same integer sequences where Highway 1.0 emulates fp16 (SSE4, SCALAR); stores
//    round to nearest even once.
//  Signed zeros never change a value: max(+0, -0) may be either, but exp(+-0) = 1 and x -+ 0 = x for x != 0.
//
// Error bound of lse (u = 2^-24): exp(y) is computed from y = x - M, itself rounded (relative error of the term
// <= |y| u), z = y log2e rounded (<= |y| u more), r = f ln2 rounded (<= 0.35 u) and the gradient's degree-5 minimax
// polynomial (relative error 2^-23.2 = 1.7 u) evaluated in about 5 roundings; each block's tree sum adds <= 3
// roundings, the double sums nothing visible. All terms are positive, so S is within (10 + 2 E_p|y|) u relative,
// where E_p|y| = sum_j p_j (M - x_j) <= the row's entropy <= log C (p = softmax(x)), and lse = M + log S within
// as much absolute: (10 + 2 log C) u, about 1.8e-6 for C = 32000 at the very worst; measured at most 1.9 u (see
// ExpNonPositive). logProb = x - (float)lse then carries that plus half an ulp of |lse| and the final rounding. The
// smoothing sum sum w x - lse sum w is within ~4 u sum_j |w_j| (|x_j| + |lse|). (tests/forward: against float64,
// tolerance 8 u (|lse| + 1).)
//
// Speed (AVX-512, one core, rows in cache): see bench/forward_bench.cpp and bench/PERFORMANCE_LOG.md for measured
// figures.
//
// On Arm this kernel is built for NEON only, not SVE: its accumulators are vectors held in structs (DoubleLanes,
// RowMaxState), which SVE's sizeless vectors cannot be. A CPU with SVE runs the NEON code.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
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
#include "common/hwy_float_convert-inl.h"

#include "common/float_convert.h"
#include "ops/cross_entropy_loss/kernels/loss_kernel.h"

HWY_BEFORE_NAMESPACE();
namespace openaclnn::cross_entropy_loss::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kGroup = 16;       // logical lanes: element j belongs to lane j % 16 on every target
constexpr size_t kBlockGroups = 8;  // groups per pass-B block: 128 elements, 8 exps per lane per double addition
constexpr int64_t kBlock = static_cast<int64_t>(kGroup * kBlockGroups);
constexpr int64_t kGatherColumns = 16 * kBlock;  // strided rows: 2048 elements per chunk (8 KiB of fp32)

using DF = hn::CappedTag<float, kGroup>;  // at most 16 lanes, so a group is a whole number of vectors
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using D16 = hn::Rebind<uint16_t, DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

// The 16-bit conversions (exact integer sequences where Highway emulates fp16; OPENACLNN_HWY_SOFT_F16).
using openaclnn::HWY_NAMESPACE::Bf16RoundedHigh;
using openaclnn::HWY_NAMESPACE::HalfBitsToF32;
using openaclnn::HWY_NAMESPACE::SoftF32ToHalfBits;

// Streaming stores where Highway's Stream writes exactly one full vector (x86 AVX2/AVX-512).
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr bool kCanStream = true;
#else
constexpr bool kCanStream = false;
#endif

// ---- exp(y) for y <= 0 -------------------------------------------------------------------------------------------

// exp(r) on [-ln2/2, ln2/2]: the gradient's degree-5 minimax polynomial (grad_hwy-inl.h, ExpPolyMinusOne<5>,
// relative error 2^-23.2), in the order 1 + (r + r^2 q(r)) with q's halves in parallel; unfused Mul and Add.
HWY_INLINE VF ExpPoly5(DF df, VF r) {
    const VF r2 = hn::Mul(r, r);
    const VF q0 = hn::Add(hn::Mul(hn::Set(df, 0x1.5557bp-3f), r), hn::Set(df, 0x1.fffdfcp-2f));
    const VF q1 = hn::Add(hn::Mul(hn::Set(df, 0x1.106256p-7f), r), hn::Set(df, 0x1.572a68p-5f));
    const VF q = hn::Add(hn::Mul(q1, r2), q0);
    return hn::Add(hn::Add(hn::Mul(q, r2), r), hn::Set(df, 1.0f));
}

// exp(y), y <= 0 (NaN or y > 0 only in rows that end up NaN, see the file comment; any bits then). y is clamped at
// -86 (exp(-86) = 4e-38, still normal): every row has a term exp(0) = 1, next to which the clamped terms vanish.
// exp(y) = 2^z, z = y log2e (one rounding: the term's relative error grows by at most |y| u, u = 2^-24), z = k + f
// with k = round(z) by the 1.5 * 2^23 trick and f = z - k exact, |f| <= 1/2; exp(r) for r = f ln2 (one rounding,
// |r| <= 0.347) by the polynomial; then k is added to the exponent field (p in [0.7, 1.42] and k >= -124 keep the
// result normal). Against a two-step Cody-Waite reduction (r = y - k ln2_hi - k ln2_lo) this saves an addition and a
// multiplication per element, the floating-point adders being the bottleneck of pass B; measured lse errors
// against float64 (fp32 rows as the tests draw them, C = 16 to 32000): at most 1.9 u either way, mean 0.25 u -> 0.46 u.
HWY_INLINE VF ExpNonPositive(DF df, VF y) {
    const DI di;
    const DU du;
    const VF magic = hn::Set(df, 12582912.0f);
    // max(y, -86) on the bits, as unsigned integers (the integer units, not the floating-point adders, which are the
    // busiest here): +0 is 0 and y in [-86, -0] is 0x80000000..0xc2ac0000, all below -86's bits, while y < -86 and
    // -inf are above. (A NaN may go either way.)
    y = hn::BitCast(df, hn::Min(hn::BitCast(du, y), hn::Set(du, 0xc2ac0000u)));
    const VF z = hn::Mul(y, hn::Set(df, 1.44269504088896341f));
    const VF t = hn::Add(z, magic);
    const VF kf = hn::Sub(t, magic);
    const VF r = hn::Mul(hn::Sub(z, kf), hn::Set(df, 0.693147182464599609375f));
    const VF p = ExpPoly5(df, r);
    // t's low bits hold k + 2^22 (t = 1.5 * 2^23 + k); shifted left by 23 only k survives mod 2^32 (the low 9 bits
    // of 1.5 * 2^23's representation are zero), so k's exponent increment comes from t's bits in one shift.
    return hn::BitCast(df, hn::Add(hn::BitCast(di, p), hn::ShiftLeft<23>(hn::BitCast(di, t))));
}

// ---- per-lane double accumulators --------------------------------------------------------------------------------

// The lanes of one float vector as doubles (two half-width vectors; one lane on SCALAR).
#if HWY_TARGET == HWY_SCALAR
using DD = hn::Rebind<double, DF>;
struct DoubleLanes {
    HWY_INLINE DoubleLanes() : v(hn::Zero(DD())) {}  // (see below)
    hn::Vec<DD> v;
};
HWY_INLINE void AddLanes(DoubleLanes &acc, VF add) { acc.v = hn::Add(acc.v, hn::PromoteTo(DD(), add)); }
HWY_INLINE void StoreLanes(const DoubleLanes &acc, double *out) { hn::StoreU(acc.v, DD(), out); }
HWY_INLINE void AddLanes(DoubleLanes &acc, const DoubleLanes &add) { acc.v = hn::Add(acc.v, add.v); }
#else
using DH = hn::Half<DF>;
using DD = hn::Rebind<double, DH>;
// Its constructors are written out (the default one gives +0 lanes): NEON's vectors have a constructor of their own,
// which the struct's implicit one, compiled without the target's instruction set, could not inline.
struct DoubleLanes {
    HWY_INLINE DoubleLanes() : lo(hn::Zero(DD())), hi(hn::Zero(DD())) {}
    hn::Vec<DD> lo, hi;
};
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
HWY_INLINE void AddLanes(DoubleLanes &acc, const DoubleLanes &add) {
    acc.lo = hn::Add(acc.lo, add.lo);
    acc.hi = hn::Add(acc.hi, add.hi);
}
#endif

// ---- loads and stores of the three storage types, through fp32 lanes ---------------------------------------------

template <typename T>
HWY_INLINE VF LoadRow(DF df, const T *p) {
    if constexpr (std::is_same_v<T, float>) {
        return hn::LoadU(df, p);
    } else if constexpr (std::is_same_v<T, hwy::float16_t>) {
        return HalfBitsToF32(df, hn::LoadU(D16(), reinterpret_cast<const uint16_t *>(p)));
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

// fp32 -> bf16 bits (in i32 lanes), round to nearest even (Bf16RoundedHigh). kMayBeNaN false: the caller rewrites
// any row holding a NaN (see LogProbWriter), so NaN lanes may get any bits.
template <bool kMayBeNaN = true>
HWY_INLINE VI Bf16Bits(DF df, VF v) {
    return hn::BitCast(DI(), hn::ShiftRight<16>(Bf16RoundedHigh<kMayBeNaN>(df, v)));
}

template <typename T, bool kMayBeNaN = true>
HWY_INLINE void StoreRow(DF df, VF v, T *p) {
    if constexpr (std::is_same_v<T, float>) {
        hn::StoreU(v, df, p);
    } else if constexpr (std::is_same_v<T, hwy::float16_t>) {
#if OPENACLNN_HWY_SOFT_F16
        hn::StoreU(hn::DemoteTo(D16(), hn::BitCast(DI(), SoftF32ToHalfBits(df, v))), D16(),
                   reinterpret_cast<uint16_t *>(p));
#else
        // F16C / NEON conversion: round to nearest even, subnormals, overflow to inf.
        const hn::Rebind<hwy::float16_t, DF> dh;
        hn::StoreU(hn::DemoteTo(dh, v), dh, p);
#endif
    } else {
        hn::StoreU(hn::DemoteTo(D16(), Bf16Bits<kMayBeNaN>(df, v)), D16(), reinterpret_cast<uint16_t *>(p));
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

// A quiet NaN into count elements col_stride apart (the rows that end up NaN).
template <typename T>
HWY_NOINLINE void FillNaN(T *out, int64_t count, int64_t col_stride) {
    for (int64_t j = 0; j < count; ++j) StoreScalar(std::numeric_limits<float>::quiet_NaN(), out + j * col_stride);
}

// Brings the next row towards L2 (prefetcht1, one cache line at a time) as pass B advances over this one:
// To(bytes) issues the prefetches up to that many bytes of it.
struct NextRowPrefetch {
    const char *row = nullptr;
    size_t bytes = 0;
    size_t issued = 0;

    HWY_INLINE void To(size_t until) {
        until = HWY_MIN(until, bytes);
        for (; issued < until; issued += 64) __builtin_prefetch(row + issued, 0, 2);
    }
};

// Does nothing between blocks (gathered rows).
struct NoBlockHook {
    HWY_INLINE void operator()(int64_t) const {}
};

// ---- pass A: the row's max ---------------------------------------------------------------------------------------

// The row's max M (an exact operation: any order, any vector width gives the same M, up to the sign of a zero, which
// changes no value). With a NaN in the row M may be anything, NaN included; pass C then finds the NaN.
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
    // M = -FLT_MAX instead of -inf, and was not recognised.
    HWY_ALIGN float lane_max[kGroup];
    hn::Store(hn::Max(hn::Max(m0, m1), hn::Max(m2, m3)), df, lane_max);
    float m = lane_max[0];
    for (size_t k = 1; k < hn::Lanes(df); ++k) m = std::max(m, lane_max[k]);
    for (; j < c; ++j) m = std::max(m, LoadScalar(x + j));
    return m;
}

// RowMax in pieces, for the pipelined row loop: Advance(until) takes the whole vectors up to element `until`, Finish
// the rest; the same M (max is exact, so the pieces do not matter).
template <typename T>
struct RowMaxState {
    const T *x = nullptr;
    int64_t c = 0;
    int64_t j = 0;
    VF m0, m1;

    RowMaxState() : m0(hn::Zero(DF())), m1(hn::Zero(DF())) {}

    HWY_INLINE void Start(const T *row_x, int64_t row_c) {
        x = row_x;
        c = row_c;
        j = 0;
        m0 = m1 = hn::Set(DF(), -std::numeric_limits<float>::infinity());
    }

    HWY_INLINE void Advance(int64_t until) {
        const DF df;
        const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
        const int64_t end = HWY_MIN(until, c);
        for (; j + 2 * lanes <= end; j += 2 * lanes) {
            m0 = hn::Max(m0, LoadRow(df, x + j));
            m1 = hn::Max(m1, LoadRow(df, x + j + lanes));
        }
        for (; j + lanes <= end; j += lanes) m0 = hn::Max(m0, LoadRow(df, x + j));
    }

    HWY_INLINE float Finish() {
        Advance(c);
        // The lanes combined one by one, as in RowMax (not MaxOfLanes: see there).
        HWY_ALIGN float lane_max[kGroup];
        hn::Store(hn::Max(m0, m1), DF(), lane_max);
        float m = lane_max[0];
        for (size_t k = 1; k < hn::Lanes(DF()); ++k) m = std::max(m, lane_max[k]);
        for (; j < c; ++j) m = std::max(m, LoadScalar(x + j));
        return m;
    }
};

// ---- pass B: the row's sum of exps -------------------------------------------------------------------------------

// v[0] + ... + v[B - 1] as a fixed tree: ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)). Written out so that the
// compiler keeps every value in a register (a loop over the array went through the stack, store to load).
template <size_t B>
HWY_INLINE VF TreeSum(const VF *v) {
    if constexpr (B == 1) {
        return v[0];
    } else {
        static_assert(B % 2 == 0, "a power of two");
        return hn::Add(TreeSum<B / 2>(v), TreeSum<B / 2>(v + B / 2));
    }
}

// The state of the logical lanes one vector covers.
struct LaneSums {
    HWY_INLINE LaneSums() {}  // every sum +0; written out for the reason DoubleLanes' constructor is
    DoubleLanes s;            // sum of exp(x - M)
    DoubleLanes wx;  // smoothing: sum of w x (x without weight)
    DoubleLanes w;   // smoothing with weight: sum of w
};

// One vector slot of B consecutive groups: x[b] the inputs (-inf padded), xs[b] the inputs for the smoothing sums
// (0 padded), w[b] their weights (0 padded). The operation order is a function of B and the lane only.
template <size_t B, bool kSmooth, bool kWeighted>
HWY_INLINE void AccumulateSlot(DF df, VF row_max, const VF *x, const VF *xs, const VF *w, LaneSums &st) {
    VF e[B];
    for (size_t b = 0; b < B; ++b) e[b] = ExpNonPositive(df, hn::Sub(x[b], row_max));
    AddLanes(st.s, TreeSum<B>(e));
    if constexpr (kSmooth) {
        VF prod[B];
        for (size_t b = 0; b < B; ++b) prod[b] = kWeighted ? hn::Mul(w[b], xs[b]) : xs[b];
        AddLanes(st.wx, TreeSum<B>(prod));
        if constexpr (kWeighted) {
            AddLanes(st.w, TreeSum<B>(w));
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

struct RowResult {
    double lse;
    double weighted_log_prob_sum;
};

// lse = M + log(S) and the smoothing sum from the row's lane sums (s, wx, w: 16 doubles each, logical lane order),
// combined in double in lane order: the same on every target, and the same for a row run whole (RowSums::Finish) or
// shared by threads (SplitRowOf).
template <bool kSmooth, bool kWeighted>
RowResult CombineLanes(const double *s, const double *wx, const double *w, float m, int64_t c) {
    double sum = 0.0;
    for (size_t k = 0; k < kGroup; ++k) sum += s[k];
    const double lse = static_cast<double>(m) + std::log(sum);
    RowResult result{lse, 0.0};
    if constexpr (kSmooth) {
        // sum_j w_j (x_j - lse) = sum w x - lse * sum w, each sum combined in lane order.
        double wx_sum = 0.0, w_sum = 0.0;
        for (size_t k = 0; k < kGroup; ++k) {
            wx_sum += wx[k];
            w_sum += w[k];
        }
        if constexpr (!kWeighted) w_sum = static_cast<double>(c);
        result.weighted_log_prob_sum = wx_sum - lse * w_sum;
    }
    return result;
}

// Pass B of one row (or of a run of its pieces, see LossPieceColumns), fed in consecutive parts by Add: every part
// but the last is a whole number of blocks, so the blocks, the single groups after them and the padded tail are the
// same whatever the parts (contiguous rows: one part; gathered rows: kGatherColumns at a time). The lane sums of each
// piece (`piece` columns, a whole number of blocks) start from zero and are added to the row's totals when it ends.
template <typename T, bool kSmooth, bool kWeighted>
struct RowSums {
    static constexpr size_t kMaxSlots = kGroup;  // SCALAR: 16 one-lane slots
    LaneSums st[kMaxSlots];     // the current piece
    LaneSums total[kMaxSlots];  // the pieces before it, added in order
    VF row_max;
    int64_t piece;
    int64_t piece_left;    // columns of the current piece still to come
    bool pending = false;  // st holds something not yet in total

    RowSums(float m, int64_t piece_columns)
        : row_max(hn::Set(DF(), m)), piece(piece_columns), piece_left(piece_columns) {
        for (size_t k = 0; k < Slots(); ++k) {
            st[k] = LaneSums();
            total[k] = st[k];
        }
    }

    static size_t Slots() { return kGroup / hn::Lanes(DF()); }

    // total += st (per lane, in double), st = 0.
    HWY_INLINE void EndPiece() {
        for (size_t k = 0; k < Slots(); ++k) {
            AddLanes(total[k].s, st[k].s);
            if constexpr (kSmooth) {
                AddLanes(total[k].wx, st[k].wx);
                AddLanes(total[k].w, st[k].w);
            }
            st[k] = LaneSums();
        }
        pending = false;
        piece_left = piece;
    }

    // The totals (the last piece ended) into 16 doubles each, logical lane order.
    void StoreTotals(double *s, double *wx, double *w) {
        if (pending) EndPiece();
        const size_t lanes = hn::Lanes(DF());
        for (size_t k = 0; k < Slots(); ++k) {
            StoreLanes(total[k].s, s + k * lanes);
            StoreLanes(total[k].wx, wx + k * lanes);
            StoreLanes(total[k].w, w + k * lanes);
        }
    }

    // Elements [0, count) of the piece at x (weights at w). After each block, hook(end of the block) runs: the
    // pipelined row loop (ContiguousRows) writes the previous row's logProb that far and prefetches the next row.
    template <typename Hook>
    HWY_INLINE void Add(const T *x, const float *w, int64_t count, const Hook &hook) {
        const DF df;
        int64_t j = 0;
        for (; j + kBlock <= count; j += kBlock) {
            AccumulateGroups<kBlockGroups, kSmooth, kWeighted>(df, row_max, x + j, x + j,
                                                               kWeighted ? w + j : nullptr, st);
            pending = true;
            piece_left -= kBlock;
            if (piece_left == 0) EndPiece();
            hook(j + kBlock);
        }
        if (j < count) pending = true;
        for (; j + static_cast<int64_t>(kGroup) <= count; j += kGroup) {
            AccumulateGroups<1, kSmooth, kWeighted>(df, row_max, x + j, x + j, kWeighted ? w + j : nullptr, st);
        }
        if (j < count) {
            // The tail as one group, through buffers: -inf adds exp(-86) ~ 4e-38 (the clamp) to its lane, invisible
            // next to the row's exp(0) = 1; 0 with weight 0 adds nothing to the smoothing sums.
            HWY_ALIGN T padded[kGroup];
            HWY_ALIGN T zero_padded[kGroup];
            HWY_ALIGN float w_padded[kGroup];
            const float minus_inf = -std::numeric_limits<float>::infinity();
            for (size_t k = 0; k < kGroup; ++k) {
                const bool inside = j + static_cast<int64_t>(k) < count;
                if constexpr (std::is_same_v<T, float>) {
                    padded[k] = inside ? x[j + k] : minus_inf;
                } else {
                    const uint16_t bits = std::is_same_v<T, hwy::float16_t> ? 0xfc00u : 0xff80u;  // -inf
                    std::memcpy(&padded[k], inside ? static_cast<const void *>(x + j + k) : &bits, 2);
                }
                std::memset(&zero_padded[k], 0, sizeof(T));
                if (inside) std::memcpy(&zero_padded[k], x + j + k, sizeof(T));
                w_padded[k] = inside && kWeighted ? w[j + k] : 0.0f;
            }
            AccumulateGroups<1, kSmooth, kWeighted>(df, row_max, padded, kSmooth ? zero_padded : padded, w_padded,
                                                    st);
        }
    }

    // lse and the smoothing sum of the whole row (CombineLanes).
    RowResult Finish(float m, int64_t c) {
        HWY_ALIGN double s[kGroup], wx[kGroup], w[kGroup];
        StoreTotals(s, wx, w);
        return CombineLanes<kSmooth, kWeighted>(s, wx, w, m, c);
    }
};

// ---- pass C: logProb ---------------------------------------------------------------------------------------------

// Writes out[j] = x[j] - lse in fp32, rounded once at the store (element-wise, so neither the vector width nor how
// the row is cut into Advance calls changes a value); the row is read from L2. Finish tells whether some value was
// NaN (see the file comment), from the sums of the fp32 values per lane. kStream (fp32 on AVX2/AVX-512, output
// element-aligned) writes whole aligned vectors with non-temporal stores after a scalar head: the output then
// neither displaces the input rows from the caches nor costs a read-for-ownership of each destination line.
template <typename T, bool kStream>
struct LogProbWriter {
    const T *x = nullptr;
    T *out = nullptr;
    int64_t c = 0;  // 0: nothing to write
    int64_t j = 0;
    float lse = 0.0f;
    bool stream = false;
    VF probe0, probe1;
    float probe = 0.0f;

    LogProbWriter() : probe0(hn::Zero(DF())), probe1(hn::Zero(DF())) {}

    HWY_INLINE void ScalarElement() {
        const float v = LoadScalar(x + j) - lse;
        probe += v;
        StoreScalar(v, out + j);
        ++j;
    }

    HWY_INLINE void Start(const T *row_x, T *row_out, int64_t row_c, float row_lse) {
        x = row_x;
        out = row_out;
        c = row_c;
        j = 0;
        lse = row_lse;
        stream = false;
        probe0 = probe1 = hn::Zero(DF());
        probe = 0.0f;
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
        const VF lse_v = hn::Set(df, lse);
        if (kStream && stream) {
            for (; j + 2 * lanes <= end; j += 2 * lanes) {
                const VF v0 = hn::Sub(LoadRow(df, x + j), lse_v);
                const VF v1 = hn::Sub(LoadRow(df, x + j + lanes), lse_v);
                probe0 = hn::Add(probe0, v0);
                probe1 = hn::Add(probe1, v1);
                hn::Stream(v0, df, reinterpret_cast<float *>(out + j));
                hn::Stream(v1, df, reinterpret_cast<float *>(out + j + lanes));
            }
            for (; j + lanes <= end; j += lanes) {
                const VF v = hn::Sub(LoadRow(df, x + j), lse_v);
                probe0 = hn::Add(probe0, v);
                hn::Stream(v, df, reinterpret_cast<float *>(out + j));
            }
            return;
        }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
            // bf16 as 32-bit pairs: the even elements are the low halves (shifted up, they are the fp32 values), the
            // odd ones the high halves (masked); no widening or narrowing shuffles. Each result is rounded to nearest
            // even in its 32-bit lane (NaN lanes: see kMayBeNaN) and the pair is put back together.
            const DU du;
            const auto upper = hn::Set(du, 0xffff0000u);
            const auto round_bf16 = [&](VF v) {
                const auto u = hn::BitCast(du, v);
                return hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)));
            };
            for (; j + 2 * lanes <= end; j += 2 * lanes) {
                const auto pairs = hn::LoadU(du, reinterpret_cast<const uint32_t *>(x + j));
                const VF ve = hn::Sub(hn::BitCast(df, hn::ShiftLeft<16>(pairs)), lse_v);
                const VF vo = hn::Sub(hn::BitCast(df, hn::And(pairs, upper)), lse_v);
                probe0 = hn::Add(probe0, ve);
                probe1 = hn::Add(probe1, vo);
                hn::StoreU(hn::Or(hn::ShiftRight<16>(round_bf16(ve)), hn::And(round_bf16(vo), upper)), du,
                           reinterpret_cast<uint32_t *>(out + j));
            }
        }
#endif
        for (; j + 2 * lanes <= end; j += 2 * lanes) {
            const VF v0 = hn::Sub(LoadRow(df, x + j), lse_v);
            const VF v1 = hn::Sub(LoadRow(df, x + j + lanes), lse_v);
            probe0 = hn::Add(probe0, v0);
            probe1 = hn::Add(probe1, v1);
            StoreRow<T, false>(df, v0, out + j);
            StoreRow<T, false>(df, v1, out + j + lanes);
        }
        for (; j + lanes <= end; j += lanes) {
            const VF v = hn::Sub(LoadRow(df, x + j), lse_v);
            probe0 = hn::Add(probe0, v);
            StoreRow<T, false>(df, v, out + j);
        }
    }

    // The rest of the row; true when some value was NaN.
    HWY_INLINE bool Finish() {
        Advance(c);
        while (j < c) ScalarElement();
        c = 0;
        return !hn::AllFalse(DF(), hn::IsNaN(hn::Add(probe0, probe1))) || std::isnan(probe);
    }
};

// ---- rows --------------------------------------------------------------------------------------------------------

HWY_INLINE bool FiniteMax(float m) { return std::fabs(m) <= std::numeric_limits<float>::max(); }

HWY_INLINE void SetNaNRow(LossRowStats &stats) {
    stats.lse = stats.weighted_log_prob_sum = std::numeric_limits<double>::quiet_NaN();
}

// Rows with unit column strides (and a contiguous weight), software-pipelined: pass B of row i runs block by block
// together with pass C of row i - 1 (whose lse is known by then), pass A of row i + 1 (so its M is ready when its
// turn comes) and the prefetch of row i + 2 into L2; the first row's pass A runs before the loop, the last row's pass
// C after it. So the exps of one row overlap the stores of the previous ones and the reads of the next: memory reads,
// memory writes and arithmetic proceed together instead of in turn. L2 holds rows i - 1 to i + 2 (4 x 125 KiB for
// 32000 fp32 classes). Every value is still a function of its own row only.
template <typename T, bool kSmooth, bool kWeighted, bool kStream>
HWY_NOINLINE void ContiguousRows(const LossKernelArgs &args, int64_t row_begin, int64_t row_end) {
    const int64_t c = args.c;
    const float *w = kWeighted ? args.weight : nullptr;
    const auto row_in = [&](int64_t i) { return static_cast<const T *>(args.input) + i * args.input_row_stride; };
    LogProbWriter<T, kStream> writer;  // row i - 1's pass C
    LossRowStats *pending = nullptr;   // its row table entry, while its pass C is not finished
    RowResult pending_result{0.0, 0.0};
    const auto finish_pending = [&] {
        if (pending == nullptr) return;
        T *out = writer.out;
        if (writer.Finish()) {
            FillNaN(out, c, 1);
            SetNaNRow(*pending);
        } else {
            pending->lse = pending_result.lse;
            pending->weighted_log_prob_sum = pending_result.weighted_log_prob_sum;
        }
        pending = nullptr;
    };
    float m_next = RowMax(row_in(row_begin), c);
    RowMaxState<T> next_max;
    for (int64_t i = row_begin; i < row_end; ++i) {
        const T *x = row_in(i);
        T *out = static_cast<T *>(args.log_prob) + i * args.log_prob_row_stride;
        const float m = m_next;
        const bool has_next = i + 1 < row_end;
        if (has_next) next_max.Start(row_in(i + 1), c);
        NextRowPrefetch pf;
        if (i + 2 < row_end) {
            pf.row = reinterpret_cast<const char *>(row_in(i + 2));
            pf.bytes = static_cast<size_t>(c) * sizeof(T);
        }
        if (!FiniteMax(m)) {
            finish_pending();
            FillNaN(out, c, 1);
            SetNaNRow(args.rows[i]);
        } else {
            RowSums<T, kSmooth, kWeighted> sums(m, LossPieceColumns(c));
            const double pf_per_element = static_cast<double>(pf.bytes) / static_cast<double>(c);
            sums.Add(x, w, c, [&](int64_t end) {
                if (pending != nullptr) writer.Advance(end);
                if (has_next) next_max.Advance(end);
                pf.To(static_cast<size_t>(pf_per_element * static_cast<double>(end)));
            });
            finish_pending();
            pending_result = sums.Finish(m, c);
            writer.Start(x, out, c, static_cast<float>(pending_result.lse));
            pending = &args.rows[i];
        }
        pf.To(pf.bytes);
        if (has_next) m_next = next_max.Finish();
    }
    finish_pending();
    if constexpr (kStream) hwy::FlushStream();
}

// Any other layout (a column stride other than 1 for the input or logProb, e.g. a transposed view, or a strided
// weight): each pass gathers the row kGatherColumns elements at a time into a stack buffer and runs the contiguous
// code on it; pass C writes into a second buffer, scattered to logProb. Pass B gets the same pieces' block sums in
// the same order (kGatherColumns is a whole number of blocks), so every value has the bits of the contiguous layout.
// Each piece is read before it is written, so logProb == input works.
template <typename T, bool kSmooth, bool kWeighted>
HWY_NOINLINE void GatheredRow(const LossKernelArgs &args, int64_t i) {
    const int64_t c = args.c;
    const int64_t in_cs = args.input_col_stride, out_cs = args.log_prob_col_stride;
    const T *x = static_cast<const T *>(args.input) + i * args.input_row_stride;
    T *out = static_cast<T *>(args.log_prob) + i * args.log_prob_row_stride;
    HWY_ALIGN T in_buf[kGatherColumns];
    HWY_ALIGN T out_buf[kGatherColumns];
    HWY_ALIGN float w_buf[kGatherColumns];
    const auto gather = [&](int64_t j0, int64_t count) {
        for (int64_t k = 0; k < count; ++k) in_buf[k] = x[(j0 + k) * in_cs];
    };
    LossRowStats &stats = args.rows[i];
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j0 = 0; j0 < c; j0 += kGatherColumns) {
        const int64_t count = HWY_MIN(kGatherColumns, c - j0);
        gather(j0, count);
        m = std::max(m, RowMax(in_buf, count));
    }
    if (!FiniteMax(m)) {
        FillNaN(out, c, out_cs);
        SetNaNRow(stats);
        return;
    }
    RowSums<T, kSmooth, kWeighted> sums(m, LossPieceColumns(c));
    for (int64_t j0 = 0; j0 < c; j0 += kGatherColumns) {
        const int64_t count = HWY_MIN(kGatherColumns, c - j0);
        gather(j0, count);
        const float *w = nullptr;
        if constexpr (kWeighted) {
            for (int64_t k = 0; k < count; ++k) w_buf[k] = args.weight[(j0 + k) * args.weight_stride];
            w = w_buf;
        }
        sums.Add(in_buf, w, count, NoBlockHook());
    }
    const RowResult r = sums.Finish(m, c);
    bool has_nan = false;
    LogProbWriter<T, false> writer;
    for (int64_t j0 = 0; j0 < c; j0 += kGatherColumns) {
        const int64_t count = HWY_MIN(kGatherColumns, c - j0);
        gather(j0, count);
        writer.Start(in_buf, out_buf, count, static_cast<float>(r.lse));
        has_nan = writer.Finish() || has_nan;
        for (int64_t k = 0; k < count; ++k) out[(j0 + k) * out_cs] = out_buf[k];
    }
    if (has_nan) {
        FillNaN(out, c, out_cs);
        SetNaNRow(stats);
        return;
    }
    stats.lse = r.lse;
    stats.weighted_log_prob_sum = r.weighted_log_prob_sum;
}

// One contiguous row shared by the threads of a parallel region (LossSplitRowFn): pass A, pass B and pass C each go
// over the row's pieces, every piece taken by whichever thread asks first, and every thread waits for all pieces of
// a pass before the next pass reads their results (the maxima, the lane sums). Pass B's pieces are those of the
// whole-row loop (RowSums), combined in the same order (the pieces' lane sums added in piece order, as
// RowSums::EndPiece does, then CombineLanes), so every value has the bits of the row run whole by one thread. The
// max is exact in any order; with a NaN in the row M may differ, but the row then ends up NaN either way (M not
// finite, or the probe of pass C). The thread that finishes the last piece of pass A (M not finite) or of pass C
// writes the row table entry, and the NaN row if there is one.
template <typename T, bool kSmooth, bool kWeighted, bool kStream>
void SplitRowOf(const LossKernelArgs &args, int64_t i, LossSplitScratch &scratch) {
    const int64_t c = args.c;
    const int64_t piece = LossPieceColumns(c);
    const int64_t pieces = LossPieceCount(c);
    const T *x = static_cast<const T *>(args.input) + i * args.input_row_stride;
    T *out = static_cast<T *>(args.log_prob) + i * args.log_prob_row_stride;
    const float *w = kWeighted ? args.weight : nullptr;
    const auto columns = [&](int64_t p) { return HWY_MIN(piece, c - p * piece); };
    const auto nan_row = [&] {
        FillNaN(out, c, 1);
        SetNaNRow(args.rows[i]);
    };

    bool last = false;  // this thread finished the pass's last piece
    for (int64_t p; (p = scratch.Take(0, pieces)) >= 0;) {
        scratch.max[p] = RowMax(x + p * piece, columns(p));
        if (scratch.Finish(0, pieces)) last = true;
    }
    scratch.WaitFor(0, pieces);
    float m = scratch.max[0];
    for (int64_t p = 1; p < pieces; ++p) m = std::max(m, scratch.max[p]);
    if (!FiniteMax(m)) {  // the same m in every thread: all of them stop here
        if (last) nan_row();
        return;
    }

    for (int64_t p; (p = scratch.Take(1, pieces)) >= 0;) {
        RowSums<T, kSmooth, kWeighted> sums(m, piece);
        sums.Add(x + p * piece, kWeighted ? w + p * piece : nullptr, columns(p), NoBlockHook());
        sums.StoreTotals(scratch.sum[p], scratch.wx[p], scratch.w[p]);
        scratch.Finish(1, pieces);
    }
    scratch.WaitFor(1, pieces);
    // The row's lane sums: 0 + piece 0 + piece 1 + ..., lane by lane, as RowSums adds them.
    double s[kGroup], wx[kGroup], wsum[kGroup];
    for (size_t k = 0; k < kGroup; ++k) {
        s[k] = wx[k] = wsum[k] = 0.0;
        for (int64_t p = 0; p < pieces; ++p) {
            s[k] += scratch.sum[p][k];
            if constexpr (kSmooth) {
                wx[k] += scratch.wx[p][k];
                wsum[k] += scratch.w[p][k];
            }
        }
    }
    const RowResult r = CombineLanes<kSmooth, kWeighted>(s, wx, wsum, m, c);

    last = false;
    LogProbWriter<T, kStream> writer;
    for (int64_t p; (p = scratch.Take(2, pieces)) >= 0;) {
        writer.Start(x + p * piece, out + p * piece, columns(p), static_cast<float>(r.lse));
        scratch.nan[p] = writer.Finish();
        if constexpr (kStream) hwy::FlushStream();
        if (scratch.Finish(2, pieces)) last = true;
    }
    if (!last) return;  // the finishing thread (it sees every piece's flag) completes the row
    bool nan = false;
    for (int64_t p = 0; p < pieces; ++p) nan = nan || scratch.nan[p];
    if (nan) {
        nan_row();
    } else {
        args.rows[i].lse = r.lse;
        args.rows[i].weighted_log_prob_sum = r.weighted_log_prob_sum;
    }
}

template <typename T, bool kSmooth, bool kWeighted, bool kStream>
void Rows(const LossKernelArgs &args, int64_t row_begin, int64_t row_end) {
    if (args.c == 0) {
        // lse = log(0) = -inf over no classes; nothing to write.
        for (int64_t i = row_begin; i < row_end; ++i) {
            args.rows[i].lse = -std::numeric_limits<double>::infinity();
            args.rows[i].weighted_log_prob_sum = 0.0;
        }
        return;
    }
    if (LossRowsContiguous(args)) {
        ContiguousRows<T, kSmooth, kWeighted, kStream>(args, row_begin, row_end);
    } else {
        for (int64_t i = row_begin; i < row_end; ++i) GatheredRow<T, kSmooth, kWeighted>(args, i);
    }
}

// Calls run.template operator()<T, kSmooth, kWeighted, kStream>() for the storage type, the variant (no smoothing,
// smoothing, smoothing with weights) and the store kind (streaming only for fp32 where kCanStream) of args.
template <typename T, bool kStream, typename Run>
void ForVariant(const LossKernelArgs &args, const Run &run) {
    if (!args.smoothing) {
        run.template operator()<T, false, false, kStream>();
    } else if (args.weight == nullptr) {
        run.template operator()<T, true, false, kStream>();
    } else {
        run.template operator()<T, true, true, kStream>();
    }
}

template <typename T, typename Run>
void ForStores(const LossKernelArgs &args, const Run &run) {
    if constexpr (std::is_same_v<T, float> && kCanStream) {
        if (args.stream_stores) {
            ForVariant<T, true>(args, run);
            return;
        }
    }
    ForVariant<T, false>(args, run);
}

template <typename Run>
void ForKernelVariant(const LossKernelArgs &args, const Run &run) {
    switch (args.dtype) {
        case ACL_FLOAT:
            ForStores<float>(args, run);
            break;
        case ACL_FLOAT16:
            ForStores<hwy::float16_t>(args, run);
            break;
        default:
            ForStores<hwy::bfloat16_t>(args, run);
            break;
    }
}

void LossSplitRow(const LossKernelArgs &args, int64_t i, LossSplitScratch &scratch) {
    ForKernelVariant(args, [&]<typename T, bool kSmooth, bool kWeighted, bool kStream>() {
        SplitRowOf<T, kSmooth, kWeighted, kStream>(args, i, scratch);
    });
}

void LossRows(const LossKernelArgs &args, int64_t row_begin, int64_t row_end) {
    ForKernelVariant(args, [&]<typename T, bool kSmooth, bool kWeighted, bool kStream>() {
        Rows<T, kSmooth, kWeighted, kStream>(args, row_begin, row_end);
    });
}

}  // namespace openaclnn::cross_entropy_loss::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace openaclnn::cross_entropy_loss {
namespace {

// Every layout: strided ones are gathered (GatheredRow), giving the bits of the contiguous layout.
bool SupportsHighway(const LossKernelArgs &) { return true; }

struct HighwayEntry {
    int64_t target;
    LossKernelInfo info;
};

// Best first. SCALAR (or EMU128) is the "scalar" ISA level: the same code, one lane at a time.
const HighwayEntry kHighwayEntries[] = {
#if HWY_TARGETS & HWY_AVX3
    {HWY_AVX3, {"hwy:AVX3", 3, SupportsHighway, N_AVX3::LossRows, N_AVX3::LossSplitRow}},
#endif
#if HWY_TARGETS & HWY_AVX2
    {HWY_AVX2, {"hwy:AVX2", 2, SupportsHighway, N_AVX2::LossRows, N_AVX2::LossSplitRow}},
#endif
#if HWY_TARGETS & HWY_SSE4
    {HWY_SSE4, {"hwy:SSE4", 1, SupportsHighway, N_SSE4::LossRows, N_SSE4::LossSplitRow}},
#endif
#if HWY_TARGETS & HWY_NEON
    {HWY_NEON, {"hwy:NEON", 2, SupportsHighway, N_NEON::LossRows, N_NEON::LossSplitRow}},
#endif
#if HWY_TARGETS & HWY_EMU128
    {HWY_EMU128, {"hwy:EMU128", 0, SupportsHighway, N_EMU128::LossRows, N_EMU128::LossSplitRow}},
#endif
#if HWY_TARGETS & HWY_SCALAR
    {HWY_SCALAR, {"hwy:SCALAR", 0, SupportsHighway, N_SCALAR::LossRows, N_SCALAR::LossSplitRow}},
#endif
    {0, {nullptr, 0, nullptr, nullptr, nullptr}},
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
