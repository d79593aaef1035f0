// Every gradient kernel this CPU can run (hwy:AVX3, hwy:AVX2, hwy:SSE4, hwy:EMU128, ...) against the reference
// kernel (the float64 yardstick, not in the registry), called directly through the registry; and every layout
// (column strides, transposed views, strided weights, in place) bitwise equal to the contiguous one.
//
// Tolerances (one table, from the dtype's epsilon):
//   fp32:      |kernel - reference| <= 4 * 2^-24 * (|exp(x) a| + |b w|)  + 2^-149   (a few ulps of the terms)
//   fp16/bf16: at least 99.5% of the elements bitwise equal to the reference (correctly rounded), none further
//              than one unit in the last place; the target column and zero rows always exact.
// Outputs are poisoned before every run, so a kernel that skips an element fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/exp_double.h"
#include "common/float_convert.h"
#include "ops/cross_entropy/grad_plan.h"
#include "ops/cross_entropy/grad_rows.h"
#include "ops/cross_entropy/kernels/grad_hwy_shared.h"
#include "ops/cross_entropy/kernels/grad_kernel.h"

namespace openaclnn::cross_entropy {
namespace {

constexpr uint64_t kPoison = 0x7fa5a5a5a5a5a5a5ull;  // a signalling-NaN-like pattern no kernel produces

size_t ElementSize(aclDataType dtype) { return dtype == ACL_FLOAT ? 4 : 2; }
const char *DtypeName(aclDataType dtype) {
    return dtype == ACL_FLOAT ? "fp32" : dtype == ACL_FLOAT16 ? "fp16" : "bf16";
}

double ToDouble(aclDataType dtype, const void *base, int64_t index) {
    if (dtype == ACL_FLOAT) return static_cast<const float *>(base)[index];
    const uint16_t h = static_cast<const uint16_t *>(base)[index];
    return dtype == ACL_FLOAT16 ? HalfToFloat(h) : Bf16ToFloat(h);
}

uint32_t Bits(aclDataType dtype, const void *base, int64_t index) {
    if (dtype == ACL_FLOAT) return FloatBits(static_cast<const float *>(base)[index]);
    return static_cast<const uint16_t *>(base)[index];
}

void StoreFromDouble(aclDataType dtype, void *base, int64_t index, double v) {
    if (dtype == ACL_FLOAT) {
        static_cast<float *>(base)[index] = static_cast<float>(v);
    } else if (dtype == ACL_FLOAT16) {
        static_cast<uint16_t *>(base)[index] = DoubleToHalf(v);
    } else {
        static_cast<uint16_t *>(base)[index] = DoubleToBf16(v);
    }
}

// Ordered integer for ulp distances (sign-magnitude to two's complement).
int64_t Ordered(aclDataType dtype, uint32_t bits) {
    const int shift = dtype == ACL_FLOAT ? 31 : 15;
    const int64_t magnitude = bits & ((1u << shift) - 1u);
    return (bits >> shift) ? -magnitude : magnitude;
}

bool IsNanBits(aclDataType dtype, uint32_t bits) {
    if (dtype == ACL_FLOAT) return (bits & 0x7fffffffu) > 0x7f800000u;
    if (dtype == ACL_FLOAT16) return (bits & 0x7fffu) > 0x7c00u;
    return (bits & 0x7fffu) > 0x7f80u;
}

// A problem: storage for logProb/out with row strides (padding), weights and row coefficients.
struct Problem {
    aclDataType dtype = ACL_FLOAT;
    int64_t n = 0, c = 0;
    int64_t in_stride = 0, out_stride = 0;  // row strides in elements
    int64_t in_offset = 0, out_offset = 0;  // element offsets of the views (misalignment)
    std::vector<uint8_t> in, out;
    std::vector<float> weight;
    std::vector<float> weight_pairs;  // weight de-interleaved (made by Args)
    std::vector<GradRowCoefficients> rows;
    bool in_place = false;

    GradKernelArgs Args() {
        GradKernelArgs args{};
        args.n = n;
        args.c = c;
        args.dtype = dtype;
        const size_t es = ElementSize(dtype);
        args.log_prob = in.data() + in_offset * es;
        args.log_prob_row_stride = in_stride;
        args.log_prob_col_stride = 1;
        args.out = in_place ? in.data() + in_offset * es : out.data() + out_offset * es;
        args.out_row_stride = in_place ? in_stride : out_stride;
        args.out_col_stride = 1;
        args.weight = weight.empty() ? nullptr : weight.data();
        args.weight_stride = 1;
        if (!weight.empty()) {
            weight_pairs.assign(WeightPairsSize(c), std::nanf(""));
            SplitWeightPairs(weight.data(), c, weight_pairs.data());
            args.weight_pairs = weight_pairs.data();
        }
        args.rows = rows.data();
        return args;
    }
};

enum Variant { kPlain, kWeighted, kSmoothedWeighted, kZloss, kSmoothed };

// Realistic inputs: log-softmax rows of random logits (spread `spread`), coefficients as the prologue makes them.
Problem MakeProblem(aclDataType dtype, int64_t n, int64_t c, Variant variant, uint32_t seed, int64_t pad = 0,
                    int64_t offset = 0, double spread = 4.0) {
    Problem p;
    p.dtype = dtype;
    p.n = n;
    p.c = c;
    p.in_stride = c + pad;
    p.out_stride = c + pad + 3 * (pad > 0);
    p.in_offset = offset;
    p.out_offset = offset ? offset + 1 : 0;
    const size_t es = ElementSize(dtype);
    p.in.assign((p.in_offset + n * p.in_stride + 8) * es, 0);
    p.out.assign((p.out_offset + n * p.out_stride + 8) * es, 0);
    std::mt19937 rng(seed);
    std::normal_distribution<double> logit(0.0, spread);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<double> z(c);
    for (int64_t i = 0; i < n; ++i) {
        double mx = -INFINITY;
        for (auto &v : z) mx = std::max(mx, v = logit(rng));
        // One dominant class in some rows: probabilities near 1 (logProb near 0).
        if (i % 5 == 1) z[rng() % c] = mx += 20.0;
        double s = 0;
        for (double v : z) s += std::exp(v - mx);
        const double lse = mx + std::log(s);
        for (int64_t j = 0; j < c; ++j) StoreFromDouble(dtype, p.in.data() + p.in_offset * es, i * p.in_stride + j,
                                                        z[j] - lse);
    }
    const bool weighted = variant == kWeighted || variant == kSmoothedWeighted;
    double weight_sum = c;
    if (weighted) {
        p.weight.resize(c);
        weight_sum = 0;
        for (auto &w : p.weight) weight_sum += w = static_cast<float>(0.25 + 2.0 * unit(rng));
    }
    const double smoothing = (variant == kSmoothedWeighted || variant == kSmoothed) ? 0.1 : 0.0;
    double max_abs_weight = 1.0;
    if (weighted) max_abs_weight = *std::max_element(p.weight.begin(), p.weight.end());
    p.rows.resize(n);
    for (int64_t i = 0; i < n; ++i) {
        GradRowCoefficients &row = p.rows[i];
        row = {};
        row.col = static_cast<int64_t>(rng() % c);
        const double scale = std::exp(-8.0 * unit(rng));  // gradLoss / denominator
        const double wt = weighted ? p.weight[row.col] : 1.0;
        const double nll = scale * (1.0 - smoothing) * wt;
        const double smooth = scale * smoothing / c;
        const double zl = variant == kZloss ? 2.0 * 1e-4 * (3.0 + unit(rng)) * scale : 0.0;
        row.a = nll + smooth * weight_sum + zl;
        row.b = smooth;
        row.g = nll;
        row.kind = kRowCompute;
        row.flags = GradRowFlags(smooth, max_abs_weight);
        if (i % 7 == 3) row = GradRowCoefficients{0, 0, 0, -1, kRowZero, 0};  // ignored row
    }
    return p;
}

struct Stats {
    int64_t total = 0, exact = 0, max_ulp = 0, bad = 0;
    std::string first_bad;
};

// Compares the kernel output with the reference output element by element.
Stats Compare(const Problem &p, const void *got_base, int64_t got_stride, const void *ref_base, int64_t ref_stride) {
    Stats s;
    const size_t es = ElementSize(p.dtype);
    const void *in_base = p.in.data() + p.in_offset * es;
    (void)in_base;
    for (int64_t i = 0; i < p.n; ++i) {
        const GradRowCoefficients &row = p.rows[i];
        for (int64_t j = 0; j < p.c; ++j) {
            const uint32_t got = Bits(p.dtype, got_base, i * got_stride + j);
            const uint32_t ref = Bits(p.dtype, ref_base, i * ref_stride + j);
            ++s.total;
            bool ok;
            int64_t ulp = 0;
            if (IsNanBits(p.dtype, ref) || IsNanBits(p.dtype, got)) {
                ok = IsNanBits(p.dtype, ref) && IsNanBits(p.dtype, got);
                if (ok) ++s.exact;
            } else if (got == ref) {
                ok = true;
                ++s.exact;
            } else {
                ulp = std::llabs(Ordered(p.dtype, got) - Ordered(p.dtype, ref));
                s.max_ulp = std::max(s.max_ulp, ulp);
                if (row.kind == kRowZero || j == row.col) {
                    ok = false;  // exact by construction
                } else if (p.dtype == ACL_FLOAT) {
                    const double gv = ToDouble(p.dtype, got_base, i * got_stride + j);
                    const double rv = ToDouble(p.dtype, ref_base, i * ref_stride + j);
                    // Size of the row's terms at this element, from the reference value and the bias term.
                    const double w = p.weight.empty() ? 1.0 : p.weight[j];
                    const double terms = std::fabs(rv) + 2.0 * std::fabs(row.b * w);
                    ok = std::fabs(gv - rv) <= 4.0 * std::ldexp(terms, -24) + 0x1p-149;
                } else {
                    ok = ulp <= 1;
                }
            }
            if (!ok && s.bad++ == 0) {
                char buf[256];
                std::snprintf(buf, sizeof buf, "row %lld col %lld: got 0x%x (%.9g) want 0x%x (%.9g), a=%g b=%g col=%lld",
                              static_cast<long long>(i), static_cast<long long>(j), got,
                              ToDouble(p.dtype, got_base, i * got_stride + j), ref,
                              ToDouble(p.dtype, ref_base, i * ref_stride + j), row.a, row.b,
                              static_cast<long long>(row.col));
                s.first_bad = buf;
            }
        }
    }
    return s;
}

// An n x c problem with contiguous rows and zeroed buffers, for tests that fill in inputs, weights and rows.
Problem DenseProblem(aclDataType dtype, int64_t n, int64_t c) {
    Problem p;
    p.dtype = dtype;
    p.n = n;
    p.c = p.in_stride = p.out_stride = c;
    p.in.assign((n * c + 8) * ElementSize(dtype), 0);
    p.out.assign((n * c + 8) * ElementSize(dtype), 0);
    return p;
}

void Poison(std::vector<uint8_t> &buffer) {
    for (size_t k = 0; k + 8 <= buffer.size(); k += 8) std::memcpy(&buffer[k], &kPoison, 8);
}

// Reference output for p (out-of-place, contiguous rows of c).
std::vector<uint8_t> ReferenceOutput(Problem p) {
    p.in_place = false;
    p.out_stride = p.c;
    p.out_offset = 0;
    p.out.assign(p.n * p.c * ElementSize(p.dtype) + 8, 0);
    Poison(p.out);
    GradKernelArgs args = p.Args();
    ReferenceGradKernel(args, GradTile{0, p.n, 0, p.c});
    return p.out;
}

// Checks the per-element tolerances; the share of correctly rounded 16-bit elements is checked over a whole test
// (ExpectCorrectlyRounded), since a small problem may hold one misrounded element in a hundred by chance.
Stats ExpectMatches(const Problem &p, const void *got, int64_t got_stride, const std::vector<uint8_t> &ref,
                    const std::string &what) {
    const Stats s = Compare(p, got, got_stride, ref.data(), p.c);
    EXPECT_EQ(s.bad, 0) << what << ": " << s.bad << " of " << s.total << " elements out of tolerance; first: "
                        << s.first_bad;
    return s;
}

void Accumulate(Stats &sum, const Stats &s) {
    sum.total += s.total;
    sum.exact += s.exact;
    sum.max_ulp = std::max(sum.max_ulp, s.max_ulp);
    sum.bad += s.bad;
}

// The cancellation guard's bound for the 16-bit types' rows with a bias term, as a power of two (kCancellationBound in
// grad_hwy-inl.h): lanes with |out| < |b w_j| 2^GuardExponent are recomputed in double.
int GuardExponent(aclDataType dtype) { return dtype == ACL_BF16 ? -12 : -10; }

void PrintStats(const Stats &s, aclDataType dtype, const std::string &what) {
    std::printf("[ stats    ] %s %s: %.4f%% of %lld elements bitwise equal to the reference, max %lld ulp\n",
                what.c_str(), DtypeName(dtype), 100.0 * s.exact / std::max<int64_t>(1, s.total),
                static_cast<long long>(s.total), static_cast<long long>(s.max_ulp));
}

void ExpectCorrectlyRounded(const Stats &s, aclDataType dtype, const std::string &what) {
    PrintStats(s, dtype, what);
    if (dtype != ACL_FLOAT) {
        EXPECT_GE(static_cast<double>(s.exact), 0.995 * s.total) << what << " " << DtypeName(dtype);
    }
}

class GradKernelTest : public ::testing::TestWithParam<const GradKernelInfo *> {};

std::string KernelName(const ::testing::TestParamInfo<const GradKernelInfo *> &info) {
    std::string name = info.param->name;
    for (char &ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    return name;
}

INSTANTIATE_TEST_SUITE_P(AllKernels, GradKernelTest, ::testing::ValuesIn(GradKernels()), KernelName);

const aclDataType kDtypes[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};

Stats RunAndCheck(const GradKernelInfo &kernel, Problem &p, const std::string &what, int64_t col_split = 0) {
    const std::vector<uint8_t> ref = ReferenceOutput(p);
    Poison(p.out);
    GradKernelArgs args = p.Args();
    EXPECT_TRUE(kernel.supports(args)) << kernel.name;
    if (col_split > 0 && col_split < p.c) {
        kernel.run(args, GradTile{0, p.n, 0, col_split});
        kernel.run(args, GradTile{0, p.n, col_split, p.c});
    } else {
        kernel.run(args, GradTile{0, p.n, 0, p.c});
    }
    return ExpectMatches(p, args.out, args.out_row_stride, ref, what);
}

TEST_P(GradKernelTest, TailsAndVariants) {
    const GradKernelInfo &kernel = *GetParam();
    uint32_t seed = 1000;
    for (aclDataType dtype : kDtypes) {
        Stats sum;
        for (int64_t c = 1; c <= 70; ++c) {
            for (Variant v : {kPlain, kWeighted, kSmoothedWeighted, kZloss, kSmoothed}) {
                Problem p = MakeProblem(dtype, 9, c, v, ++seed, /*pad=*/c % 3, /*offset=*/c % 5);
                Accumulate(sum, RunAndCheck(kernel, p,
                                            std::string(kernel.name) + " " + DtypeName(dtype) + " C=" +
                                                std::to_string(c) + " variant=" + std::to_string(v) +
                                                " seed=" + std::to_string(seed)));
            }
        }
        ExpectCorrectlyRounded(sum, dtype, std::string(kernel.name) + " tails");
    }
}

TEST_P(GradKernelTest, LongRowsAndColumnTiles) {
    const GradKernelInfo &kernel = *GetParam();
    uint32_t seed = 2000;
    for (aclDataType dtype : kDtypes) {
        Stats sum;
        for (int64_t c : {4093, 32000, 131073}) {
            for (Variant v : {kPlain, kSmoothedWeighted, kZloss}) {
                Problem p = MakeProblem(dtype, 6, c, v, ++seed, c % 2, 1);
                Accumulate(sum, RunAndCheck(kernel, p,
                                            std::string(kernel.name) + " " + DtypeName(dtype) + " C=" +
                                                std::to_string(c) + " seed=" + std::to_string(seed),
                                            /*col_split=*/c / 3 + 1));
            }
        }
        ExpectCorrectlyRounded(sum, dtype, std::string(kernel.name) + " long rows");
    }
}

// The streaming-store path (aligned and misaligned rows), with the output threshold lowered to 16 MiB for the test.
TEST_P(GradKernelTest, StreamingStores) {
    const GradKernelInfo &kernel = *GetParam();
    struct Restore {
        StreamingThresholds old = SetStreamingThresholds({16ull << 20, 0, StoreKinds::kStreaming});
        ~Restore() { SetStreamingThresholds(old); }
    } restore;
    uint32_t seed = 3000;
    for (aclDataType dtype : kDtypes) {
        for (int64_t c : {131073, 131072}) {
            const int64_t n = dtype == ACL_FLOAT ? 33 : 65;
            Problem p = MakeProblem(dtype, n, c, kSmoothedWeighted, ++seed, 0, c % 2);
            ExpectCorrectlyRounded(RunAndCheck(kernel, p, std::string(kernel.name) + " streaming " +
                                                              DtypeName(dtype) + " C=" + std::to_string(c) +
                                                              " seed=" + std::to_string(seed)),
                                   dtype, std::string(kernel.name) + " streaming");
        }
    }
}

// Restores the streaming thresholds when a test ends.
struct StreamingThresholdsRestore {
    StreamingThresholds old = SetStreamingThresholds({UINT64_MAX, 0, StoreKinds::kRegular});
    ~StreamingThresholdsRestore() { SetStreamingThresholds(old); }
};

// Runs p from `input` (poisoned output) with the given streaming thresholds: the rows of the output, C elements each.
std::vector<uint8_t> RunWithStreaming(const GradKernelInfo &kernel, Problem &p, const std::vector<uint8_t> &input,
                                      StreamingThresholds thresholds) {
    const size_t es = ElementSize(p.dtype);
    p.in = input;
    Poison(p.out);
    SetStreamingThresholds(thresholds);
    GradKernelArgs args = p.Args();
    kernel.run(args, GradTile{0, p.n, 0, p.c});
    const uint8_t *out = static_cast<const uint8_t *>(args.out);
    std::vector<uint8_t> rows;
    for (int64_t i = 0; i < p.n; ++i) {
        const uint8_t *row = out + i * args.out_row_stride * static_cast<int64_t>(es);
        rows.insert(rows.end(), row, row + p.c * es);
    }
    return rows;
}

// p run from its current input with regular stores and with streaming stores (threshold 0), in place where asked:
// both outputs bit for bit equal, and the streamed one checked against the reference (its statistics in *stats).
void ExpectStreamingGivesRegularBits(const GradKernelInfo &kernel, Problem &p, bool in_place, const std::string &what,
                                     Stats *stats) {
    const std::vector<uint8_t> ref = ReferenceOutput(p);
    const std::vector<uint8_t> input = p.in;
    p.in_place = in_place;
    const std::vector<uint8_t> regular = RunWithStreaming(kernel, p, input, {UINT64_MAX, 0, StoreKinds::kRegular});
    const std::vector<uint8_t> streamed = RunWithStreaming(kernel, p, input, {0, 0, StoreKinds::kStreaming});
    ASSERT_EQ(regular.size(), streamed.size());
    EXPECT_EQ(0, std::memcmp(regular.data(), streamed.data(), regular.size())) << what;
    *stats = ExpectMatches(p, streamed.data(), p.c, ref, what);
}

// Streaming stores give the bits of regular stores. Threshold 0 (every call streams) against no streaming, on the
// same problem: every variant; output offsets that put the first 64-byte boundary at each element position (the
// peel before the aligned stores: up to a vector of fp32, a pair of vectors of fp16/bf16); rows whose starts share
// their alignment (C = 1024: the fp32 rows with weights go two at a time) or do not (C = 1031); an ignored row; a
// few extreme inputs (vectors off the fast path) and, with label smoothing and weights, columns whose weights make
// row 2 cancel (lanes the 16-bit guard flags); and in place.
TEST_P(GradKernelTest, StreamingGivesRegularBits) {
    const GradKernelInfo &kernel = *GetParam();
    StreamingThresholdsRestore restore;
    uint32_t seed = 3100;
    for (aclDataType dtype : kDtypes) {
        const size_t es = ElementSize(dtype);
        const int64_t per_line = 64 / static_cast<int64_t>(es);
        for (int64_t c : {1031, 1024}) {
            for (Variant v : {kPlain, kWeighted, kSmoothedWeighted, kZloss, kSmoothed}) {
                for (int64_t offset = 0; offset < per_line; offset += v == kSmoothedWeighted ? 1 : 5) {
                    const bool in_place = offset % 3 == 2;
                    Problem p = MakeProblem(dtype, 6, c, v, ++seed, 0, offset);
                    const double extremes[] = {-200.0, -100.0, -90.0, -INFINITY, NAN, 0.0};
                    for (int64_t k = 0; k < 12; ++k) {
                        StoreFromDouble(dtype, p.in.data() + p.in_offset * es, (k % 6) * p.in_stride + (k * 331) % c,
                                        extremes[k % 6]);
                    }
                    if (v == kSmoothedWeighted && p.rows[2].b != 0.0) {
                        for (int64_t j = 5; j < c; j += 97) {
                            const double x = ToDouble(dtype, p.in.data() + p.in_offset * es, 2 * p.in_stride + j);
                            const double w = std::exp(x) * p.rows[2].a / p.rows[2].b;
                            if (std::isfinite(w) && w > 1e-3 && w < 1e3) p.weight[j] = static_cast<float>(w);
                        }
                    }
                    const std::string what = std::string(kernel.name) + " " + DtypeName(dtype) + " C=" +
                                             std::to_string(c) + " variant=" + std::to_string(v) + " offset=" +
                                             std::to_string(offset) + (in_place ? " in place" : "");
                    Stats stats;
                    ExpectStreamingGivesRegularBits(kernel, p, in_place, what, &stats);
                    if (HasFatalFailure()) return;
                }
            }
        }
    }
}

// bf16 rows with weights that lie within the screen's range (PairWeights::screen_weight; [0.5, 1.5], as the
// benchmark's) take the screened block loop, which streams where the output is large (4096 x 32000 smoothed+weighted).
// Streamed (threshold 0) against regular stores, bit for bit, and against the reference: output offsets that put the
// first 64-byte boundary at many element positions (the peel), rows whose starts share their alignment or do not, in
// place, with row 2's inputs set at its cancellation point in every 29th column (blocks the screen and the guard send
// to the exact path) and a few inputs off the fast path. (MakeProblem's weights, 0.25 to 2.25, are never screened.)
TEST_P(GradKernelTest, StreamingScreenedBf16Weights) {
    const GradKernelInfo &kernel = *GetParam();
    StreamingThresholdsRestore restore;
    uint32_t seed = 3300;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    int64_t cancelling = 0;
    for (int64_t c : {1031, 1024}) {
        for (int64_t offset = 0; offset < 32; offset += 3) {
            Problem p = MakeProblem(ACL_BF16, 6, c, kSmoothedWeighted, ++seed, 0, offset);
            for (auto &w : p.weight) w = static_cast<float>(0.5 + unit(rng));
            uint8_t *in = p.in.data() + p.in_offset * ElementSize(ACL_BF16);
            const GradRowCoefficients &row = p.rows[2];
            for (int64_t j = 3; j < c && row.b != 0.0; j += 29) {
                const double x = std::log(row.b * p.weight[j] / row.a);
                if (std::isfinite(x) && x <= 0.0) {
                    StoreFromDouble(ACL_BF16, in, 2 * p.in_stride + j, x);
                    ++cancelling;
                }
            }
            const double extremes[] = {-200.0, -100.0, -INFINITY, NAN};
            const int64_t extreme_rows[] = {1, 3, 4, 5};  // rows of the 6, row 2 aside
            for (int64_t k = 0; k < 4; ++k) {
                StoreFromDouble(ACL_BF16, in, extreme_rows[k] * p.in_stride + (k * 331) % c, extremes[k]);
            }
            const std::string what = std::string(kernel.name) + " C=" + std::to_string(c) +
                                     " offset=" + std::to_string(offset) + (offset % 2 ? " in place" : "");
            Stats stats;
            ExpectStreamingGivesRegularBits(kernel, p, offset % 2 == 1, what, &stats);
            if (HasFatalFailure()) return;
            ExpectCorrectlyRounded(stats, ACL_BF16, what);
        }
    }
    EXPECT_GT(cancelling, 100);
}

// fp32 rows with weights stream in groups of rows aligned alike: consecutive rows where a row is a whole number of
// 64-byte lines (C = 1024), else rows 2, 4, 8 or 16 apart (C = 1032, 1028, 1026, 1031), taken from blocks of four
// times that many rows; MakeProblem's ignored rows (every seventh) leave some of those groups with fewer rows, done in
// pairs or alone. Two blocks and a few rows after them; also in place and at an output offset that moves the peel.
// Against regular stores bit for bit (also with only the groups streaming), and against the reference.
TEST_P(GradKernelTest, StreamingGroupsOfRowsAlignedAlike) {
    const GradKernelInfo &kernel = *GetParam();
    StreamingThresholdsRestore restore;
    uint32_t seed = 3200;
    for (int64_t c : {1031, 1026, 1028, 1032, 1024}) {
        const int64_t period = c % 16 == 0 ? 1 : 16 / std::gcd<int64_t, int64_t>(c % 16, 16);
        for (int64_t offset : {0, 5}) {
            Problem p = MakeProblem(ACL_FLOAT, 8 * period + 3, c, kSmoothedWeighted, ++seed, 0, offset);
            const std::string what =
                std::string(kernel.name) + " C=" + std::to_string(c) + " offset=" + std::to_string(offset);
            const std::vector<uint8_t> ref = ReferenceOutput(p);
            const std::vector<uint8_t> input = p.in;
            p.in_place = offset == 5;
            const std::vector<uint8_t> regular =
                RunWithStreaming(kernel, p, input, {UINT64_MAX, 0, StoreKinds::kRegular});
            const std::vector<uint8_t> streamed = RunWithStreaming(kernel, p, input, {0, 0, StoreKinds::kStreaming});
            // The groups streamed, the other rows not (UseStreamingStoresForRowGroups).
            const std::vector<uint8_t> groups_streamed =
                RunWithStreaming(kernel, p, input, {0, UINT64_MAX, StoreKinds::kStreaming});
            EXPECT_EQ(0, std::memcmp(regular.data(), streamed.data(), regular.size())) << what;
            EXPECT_EQ(0, std::memcmp(regular.data(), groups_streamed.data(), regular.size())) << what;
            ExpectMatches(p, streamed.data(), c, ref, what);
        }
    }
}

// Elements of two equally laid out outputs whose bits differ, any NaN equal to any NaN (NaN payloads and signs are
// not part of the kernels' bitwise agreement, grad_hwy-inl.h).
int64_t BitMismatches(aclDataType dtype, const std::vector<uint8_t> &want, const uint8_t *got) {
    int64_t mismatches = 0;
    const int64_t elements = static_cast<int64_t>(want.size() / ElementSize(dtype));
    for (int64_t k = 0; k < elements; ++k) {
        const uint32_t a = Bits(dtype, want.data(), k);
        const uint32_t b = Bits(dtype, got, k);
        mismatches += a != b && !(IsNanBits(dtype, a) && IsNanBits(dtype, b));
    }
    return mismatches;
}

// The traits of weights by their definition (grad_kernel.h), one element at a time.
GradWeightTraits TraitsOf(const std::vector<float> &weights) {
    GradWeightTraits traits;
    for (float w : weights) {
        const GradWeightTraits one{std::isfinite(w), std::isfinite(w) && !std::signbit(w),
                                   w != 0.0f ? std::fabs(w) : HUGE_VALF, std::fabs(w)};
        traits = MergeWeightTraits(traits, one);
    }
    return traits;
}

// Long fp32 rows stored back to back, with a streamed output, run as one sequence of aligned vectors over the tile
// (FlatRows): the vector across each row boundary takes each lane's coefficients (and weights) from its own
// row. Against regular stores (the row path) bit for bit (NaN for NaN), and the reference: rows ending on a vector
// boundary (C = 64, 1024) or not (100, 1000, 1031); every variant (smoothed+weighted too: C <=
// kFlatWeightedMaxColumns); ignored first and last rows, a NaN row, a row without a bias term among rows with one;
// output offsets that move the peel; in place; tiles of whole rows split at a row; a row for the double path (the tile
// keeps the row path). Also on regular stores from the output threshold on, where rows with a weighted bias term run as
// one (smoothed+weighted), in place or not.
TEST_P(GradKernelTest, FlatRowsGiveRowBits) {
    const GradKernelInfo &kernel = *GetParam();
    StreamingThresholdsRestore restore;
    uint32_t seed = 5300;
    for (int64_t c : {64, 100, 1000, 1024, 1031}) {
        for (Variant v : {kPlain, kWeighted, kSmoothedWeighted, kZloss, kSmoothed}) {
            for (int64_t offset : {0, 1, 3, 6}) {
                for (int shape = 0; shape < 4; ++shape) {
                    const bool double_row = shape % 2 == 1;
                    // shape >= 2: 40 rows, those from 7 on with row 7's a and b (as a mean without weights gives
                    // every row), their own g and target column: runs of rows through the row loop at once.
                    const int64_t n = shape >= 2 ? 40 : 9;
                    Problem p = MakeProblem(ACL_FLOAT, n, c, v, ++seed, 0, offset);
                    if (shape >= 2) {
                        for (int64_t i = 8; i < n - 1; ++i) {
                            p.rows[i].a = p.rows[7].a;
                            p.rows[i].b = p.rows[7].b;
                            p.rows[i].kind = p.rows[7].kind;
                            p.rows[i].flags = p.rows[7].flags;
                        }
                    }
                    p.rows[0] = p.rows[n - 1] = GradRowCoefficients{0, 0, 0, -1, kRowZero, 0};
                    p.rows[2] = GradRowCoefficients{NAN, NAN, 0.0, -1, kRowCompute, 0};
                    // Targets at a row's last column and the next row's first: both in one vector where rows
                    // straddle vectors.
                    p.rows[3].col = c - 1;
                    p.rows[4].col = 0;
                    if (shape >= 2) {
                        p.rows[10].col = c - 1;
                        p.rows[11].col = 0;
                    }
                    p.rows[5].b = 0.0;
                    if (double_row) p.rows[6].a = 0x1p-130;
                    const double extremes[] = {-200.0, -100.0, -INFINITY, NAN, 100.0};
                    for (int64_t k = 0; k < 10; ++k) {
                        StoreFromDouble(ACL_FLOAT, p.in.data() + p.in_offset * 4, (k * 7919 + 3) % (n * c),
                                        extremes[k % 5]);
                    }
                    for (int64_t j = 0; j < c; ++j) {  // the ignored first row's inputs: still +0
                        StoreFromDouble(ACL_FLOAT, p.in.data() + p.in_offset * 4, j, j % 2 ? NAN : INFINITY);
                    }
                    const std::string what = std::string(kernel.name) + " C=" + std::to_string(c) +
                                             " variant=" + std::to_string(v) + " offset=" + std::to_string(offset) +
                                             " n=" + std::to_string(n) + (double_row ? " with a double row" : "");
                    const std::vector<uint8_t> ref = ReferenceOutput(p);
                    const std::vector<uint8_t> input = p.in;
                    const std::vector<uint8_t> regular =
                        RunWithStreaming(kernel, p, input, {UINT64_MAX, 0, StoreKinds::kRegular});
                    const std::vector<uint8_t> streamed =
                        RunWithStreaming(kernel, p, input, {0, 0, StoreKinds::kStreaming});
                    EXPECT_EQ(0, BitMismatches(ACL_FLOAT, regular, streamed.data())) << what;
                    ExpectMatches(p, streamed.data(), c, ref, what);
                    p.in_place = true;
                    const std::vector<uint8_t> in_place =
                        RunWithStreaming(kernel, p, input, {0, 0, StoreKinds::kStreaming});
                    EXPECT_EQ(0, BitMismatches(ACL_FLOAT, regular, in_place.data())) << what << " in place";
                    // Regular stores from the output threshold on: rows with a weighted bias term run as one there.
                    for (bool in_place_regular : {true, false}) {
                        p.in_place = in_place_regular;
                        const std::vector<uint8_t> flat_regular =
                            RunWithStreaming(kernel, p, input, {0, 0, StoreKinds::kRegular});
                        EXPECT_EQ(0, BitMismatches(ACL_FLOAT, regular, flat_regular.data()))
                            << what << " regular from the output threshold" << (in_place_regular ? ", in place" : "");
                    }
                    p.in = input;
                    Poison(p.out);
                    GradKernelArgs args = p.Args();
                    kernel.run(args, GradTile{0, 4, 0, c});
                    kernel.run(args, GradTile{4, n, 0, c});
                    EXPECT_EQ(0, BitMismatches(ACL_FLOAT, regular, static_cast<const uint8_t *>(args.out)))
                        << what << " split at row 4";
                }
            }
        }
    }
}
// Whole rows with regular stores whose coefficients agree (SameRowScale: every row of a mean without weights) go
// through the row loop together, up to kRowTargets of them. Against the same rows one tile per row, bit for bit (NaN
// for NaN), and the reference: every dtype, rows ending on a vector boundary or not, runs broken by an ignored row,
// a NaN row, a row of other coefficients and a row for the double path, more rows alike than one run takes, targets at
// a row's last column and the next row's first, in place, and from the output threshold on (fp32 rows unmerged there).
TEST_P(GradKernelTest, RowsOfOneScaleGiveRowBits) {
    const GradKernelInfo &kernel = *GetParam();
    StreamingThresholdsRestore restore;  // regular stores
    uint32_t seed = 7100;
    for (aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
        for (int64_t c : {64, 100, 1000, 1031}) {
            for (Variant v : {kPlain, kWeighted, kSmoothedWeighted, kZloss, kSmoothed}) {
                const int64_t n = 45;
                Problem p = MakeProblem(dtype, n, c, v, ++seed, 0, v == kZloss ? 3 : 0);
                // Rows 1 to 40 with row 1's coefficients (their own g and target column), but for the ones below.
                for (int64_t i = 2; i <= 40; ++i) {
                    p.rows[i].a = p.rows[1].a;
                    p.rows[i].b = p.rows[1].b;
                    p.rows[i].kind = p.rows[1].kind;
                    p.rows[i].flags = p.rows[1].flags;
                }
                p.rows[9] = GradRowCoefficients{0, 0, 0, -1, kRowZero, 0};
                p.rows[12].a = p.rows[12].a * 3.0;
                p.rows[30] = GradRowCoefficients{NAN, NAN, 0.0, -1, kRowCompute, 0};
                p.rows[33].a = 0x1p-130;
                p.rows[4].col = c - 1;
                p.rows[5].col = 0;
                p.rows[20].col = c - 1;
                p.rows[21].col = 0;
                const double extremes[] = {-200.0, -100.0, -INFINITY, NAN, 100.0};
                const size_t es = ElementSize(dtype);
                for (int64_t k = 0; k < 10; ++k) {
                    StoreFromDouble(dtype, p.in.data() + p.in_offset * es, (k * 7919 + 3) % (n * c), extremes[k % 5]);
                }
                const std::string what = std::string(kernel.name) + " dtype=" + std::to_string(dtype) +
                                         " C=" + std::to_string(c) + " variant=" + std::to_string(v);
                const std::vector<uint8_t> ref = ReferenceOutput(p);
                const std::vector<uint8_t> input = p.in;
                const std::vector<uint8_t> together =
                    RunWithStreaming(kernel, p, input, {UINT64_MAX, 0, StoreKinds::kRegular});
                ExpectMatches(p, together.data(), c, ref, what);
                p.in = input;
                Poison(p.out);
                GradKernelArgs args = p.Args();
                for (int64_t i = 0; i < n; ++i) kernel.run(args, GradTile{i, i + 1, 0, c});
                EXPECT_EQ(0, BitMismatches(dtype, together, static_cast<const uint8_t *>(args.out)))
                    << what << " one row at a time";
                p.in_place = true;
                const std::vector<uint8_t> in_place =
                    RunWithStreaming(kernel, p, input, {UINT64_MAX, 0, StoreKinds::kRegular});
                EXPECT_EQ(0, BitMismatches(dtype, together, in_place.data())) << what << " in place";
                p.in_place = false;
                // From the output threshold on, fp32 rows go one at a time on regular stores: the same bits.
                const std::vector<uint8_t> large =
                    RunWithStreaming(kernel, p, input, {0, UINT64_MAX, StoreKinds::kRegular});
                EXPECT_EQ(0, BitMismatches(dtype, together, large.data())) << what << " at the output threshold";
                p.in = input;
            }
        }
    }
}

// Which calls stream: single rows from both thresholds on, the fp32 groups of weighted rows from the output's alone.
TEST(GradStreamingChoice, RowGroupsIgnoreTheRowThreshold) {
    StreamingThresholdsRestore restore;
    SetStreamingThresholds({1000 * 4000, 16 << 10, StoreKinds::kStreaming});
    GradKernelArgs args{};
    args.dtype = ACL_FLOAT;
    args.n = 1000;
    args.c = 1000;  // 4000-byte rows: at the output threshold, below the row threshold
    EXPECT_FALSE(UseStreamingStores(args));
    EXPECT_TRUE(UseStreamingStoresForRowGroups(args));
    args.c = 4096;  // 16 KiB rows
    EXPECT_TRUE(UseStreamingStores(args));
    EXPECT_TRUE(UseStreamingStoresForRowGroups(args));
    args.n = 100;
    args.c = 1000;  // below the output threshold
    EXPECT_FALSE(UseStreamingStores(args));
    EXPECT_FALSE(UseStreamingStoresForRowGroups(args));
    args.dtype = ACL_BF16;
    args.n = 2000;  // the same bytes in bf16
    EXPECT_TRUE(UseStreamingStoresForRowGroups(args));
}

// Rows at both thresholds stream as store_kinds says (kMeasured: as the call's args say), every dtype; so do fp32's
// groups of weighted rows and packed rows run as one, from the output threshold on whatever the rows' length (the
// 16-bit calls do not use them).
TEST(GradStreamingChoice, StoreKindsDecideEveryDtype) {
    StreamingThresholdsRestore restore;
    GradKernelArgs args{};
    args.n = 100;
    for (StoreKinds mode : {StoreKinds::kRegular, StoreKinds::kStreaming, StoreKinds::kMeasured}) {
        SetStreamingThresholds({1000000, 16 << 10, mode});
        for (bool stream_measured : {false, true}) {
            args.stream_measured = stream_measured;
            const bool expected = mode == StoreKinds::kStreaming || (mode == StoreKinds::kMeasured && stream_measured);
            for (aclDataType dtype : kDtypes) {
                SCOPED_TRACE(testing::Message()
                             << DtypeName(dtype) << " mode " << static_cast<int>(mode) << " args " << stream_measured);
                args.dtype = dtype;
                args.c = 10000;  // 20 KiB rows in 16 bits, 40 KiB in fp32
                EXPECT_EQ(expected, UseStreamingStores(args));
                EXPECT_EQ(expected, UseStreamingStoresForRowGroups(args));
                args.c = 5000;  // below the row threshold in 16 bits (20000 bytes in fp32 reach it)
                const bool long_rows = dtype == ACL_FLOAT;
                EXPECT_EQ(long_rows && expected, UseStreamingStores(args));
                EXPECT_EQ(expected, UseStreamingStoresForRowGroups(args));
                args.c = dtype == ACL_FLOAT ? 2500 : 5000;  // 10000-byte rows, a 1000000-byte output
                EXPECT_FALSE(UseStreamingStores(args));
                EXPECT_EQ(expected, UseStreamingStoresForRowGroups(args));
                args.c = dtype == ACL_FLOAT ? 2499 : 4999;  // below the output threshold
                EXPECT_FALSE(UseStreamingStores(args));
                EXPECT_FALSE(UseStreamingStoresForRowGroups(args));
            }
        }
    }
}

// Only large calls are measured, and only in StoreKinds::kMeasured: those at both thresholds, and fp32 ones from the
// output threshold on.
TEST(GradStreamingChoice, OnlyLargeCallsAreMeasured) {
    StreamingThresholdsRestore restore;
    GradKernelArgs args{};
    for (StoreKinds mode : {StoreKinds::kRegular, StoreKinds::kStreaming, StoreKinds::kMeasured}) {
        SetStreamingThresholds({1000000, 16 << 10, mode});
        for (aclDataType dtype : kDtypes) {
            SCOPED_TRACE(testing::Message() << DtypeName(dtype) << " mode " << static_cast<int>(mode));
            const bool measured = mode == StoreKinds::kMeasured;
            args.dtype = dtype;
            args.n = 100;
            args.c = 10000;
            EXPECT_EQ(measured, BeginStoreKindCall(args).measured);
            args.n = dtype == ACL_FLOAT ? 24 : 49;  // 960000 or 980000 bytes: below the output threshold
            EXPECT_FALSE(BeginStoreKindCall(args).measured);
            args.n = 100;
            args.c = dtype == ACL_FLOAT ? 4000 : 8000;  // 16000-byte rows: below the row threshold
            EXPECT_EQ(measured && dtype == ACL_FLOAT, BeginStoreKindCall(args).measured);
        }
    }
}

// Each shape and variant has a chooser of its own: driving the calls of one to each kind (reporting clearly faster
// times for it) leaves the kinds of the others as they were. The calls differ in dtype (fp16 and bf16 too), shape,
// weights, label smoothing and z-loss; one has short fp32 rows (measured from the output threshold on).
TEST(GradStreamingChoice, KindsAreChosenPerShapeAndVariant) {
    StreamingThresholdsRestore restore;
    SetStreamingThresholds({1000000, 16 << 10, StoreKinds::kMeasured});
    static const float kWeight = 1.0f;  // (only its address: the chooser reads no weight)
    const auto call = [](aclDataType dtype, int64_t n, int64_t c, bool weighted, bool smoothed, bool z_loss) {
        GradKernelArgs args{};
        args.dtype = dtype;
        args.n = n;
        args.c = c;
        args.weight = weighted ? &kWeight : nullptr;
        args.label_smoothing = smoothed;
        args.z_loss = z_loss;
        return args;
    };
    const std::vector<GradKernelArgs> calls = {
        call(ACL_FLOAT, 100, 10000, false, false, false), call(ACL_FLOAT16, 100, 10000, false, false, false),
        call(ACL_BF16, 100, 10000, false, false, false),  call(ACL_FLOAT, 200, 10000, false, false, false),
        call(ACL_FLOAT, 100, 10000, true, false, false),  call(ACL_FLOAT, 100, 10000, true, true, false),
        call(ACL_FLOAT, 100, 10000, false, false, true),  call(ACL_FLOAT, 1000, 1000, true, true, false)};
    for (size_t x = 0; x < calls.size(); ++x) {
        ASSERT_TRUE(BeginStoreKindCall(calls[x]).measured) << "call " << x;
        for (size_t y = 0; y < x; ++y) {
            EXPECT_NE(StoreKindKey(calls[x]), StoreKindKey(calls[y])) << "calls " << x << ", " << y;
            EXPECT_NE(&StoreKindChooserFor(calls[x]), &StoreKindChooserFor(calls[y])) << "calls " << x << ", " << y;
        }
    }
    // Runs calls like args, each reported as taking 1 s where it ran `fast` and 2 s otherwise, until that kind is
    // current (at most a few rounds of trials); returns whether it became current.
    const auto drive = [](const GradKernelArgs &args, bool fast) {
        for (uint64_t k = 0; k < 4 * StoreKindChooser::kExploreEvery; ++k) {
            if (StoreKindChooserFor(args).Streaming() == fast) return true;
            const StoreKindCall stores = BeginStoreKindCall(args);
            EXPECT_TRUE(stores.measured);
            EndStoreKindCall(stores, args, stores.trial.stream == fast ? 1.0 : 2.0);
        }
        return StoreKindChooserFor(args).Streaming() == fast;
    };
    std::vector<bool> kinds_before;
    for (const GradKernelArgs &args : calls) kinds_before.push_back(StoreKindChooserFor(args).Streaming());
    for (size_t x = 0; x < calls.size(); ++x) {
        for (bool kind : {false, true, false, true}) {
            ASSERT_TRUE(drive(calls[x], kind)) << "call " << x << " to " << kind;
            for (size_t y = 0; y < calls.size(); ++y) {
                EXPECT_EQ(y == x ? kind : kinds_before[y], StoreKindChooserFor(calls[y]).Streaming())
                    << "call " << x << " to " << kind << ", call " << y;
            }
        }
        ASSERT_TRUE(drive(calls[x], kinds_before[x]));  // as it was
    }
}

// More keys than choosers: a new key takes the least recently used chooser, which starts afresh (streaming); a key
// looked up since keeps its own, and its kind.
TEST(GradStreamingChoice, NewKeysTakeTheLeastRecentlyUsedChooser) {
    StreamingThresholdsRestore restore;
    SetStreamingThresholds({1000000, 16 << 10, StoreKinds::kMeasured});
    GradKernelArgs args{};
    args.dtype = ACL_FLOAT;
    args.n = 100;
    args.c = 10000;
    // Calls of args reported as 1 s on regular stores and 2 s on streaming ones until regular stores are current.
    for (uint64_t k = 0; k < 4 * StoreKindChooser::kExploreEvery && StoreKindChooserFor(args).Streaming(); ++k) {
        const StoreKindCall stores = BeginStoreKindCall(args);
        EndStoreKindCall(stores, args, stores.trial.stream ? 2.0 : 1.0);
    }
    ASSERT_FALSE(StoreKindChooserFor(args).Streaming());
    StoreKindChooser *const own = &StoreKindChooserFor(args);
    int64_t fresh = 1000;  // shapes of no other test
    const auto new_keys = [&](size_t count) {
        std::vector<StoreKindChooser *> taken;
        for (size_t k = 0; k < count; ++k) {
            GradKernelArgs other = args;
            other.n = ++fresh;
            taken.push_back(&StoreKindChooserFor(other));
            EXPECT_TRUE(taken.back()->Streaming()) << "new key " << fresh;
            EXPECT_NE(own, taken.back()) << "new key " << fresh;
        }
        return taken;
    };
    // args' chooser is the least recently used after these, but looked up again it is the most recent.
    new_keys(kStoreKindChoosers - 1);
    EXPECT_EQ(own, &StoreKindChooserFor(args));
    EXPECT_FALSE(StoreKindChooserFor(args).Streaming());
    const std::vector<StoreKindChooser *> taken = new_keys(kStoreKindChoosers - 1);  // the other 15 choosers
    EXPECT_EQ(kStoreKindChoosers - 1, std::set<StoreKindChooser *>(taken.begin(), taken.end()).size());
    EXPECT_FALSE(StoreKindChooserFor(args).Streaming());
    // Now 16 new keys: the 16th takes args' chooser (the least recently used then), afresh.
    new_keys(kStoreKindChoosers - 1);
    GradKernelArgs last = args;
    last.n = ++fresh;
    StoreKindChooser &taken_over = StoreKindChooserFor(last);
    EXPECT_EQ(own, &taken_over);
    EXPECT_TRUE(taken_over.Streaming());                 // afresh
    EXPECT_TRUE(StoreKindChooserFor(args).Streaming());  // args again: another chooser, afresh
}

// The chooser's rule: kTrialCalls calls in a row every kExploreEvery (from the second call on) try the other kind,
// which takes over where each of them beat the faster of the current kind's last two calls by more than the margin.
TEST(GradStreamingChoice, StoreKindChooserFollowsTheFasterKind) {
    constexpr uint64_t kEvery = StoreKindChooser::kExploreEvery;
    constexpr uint64_t kTrials = StoreKindChooser::kTrialCalls;
    constexpr double kMargin = StoreKindChooser::kMargin;
    const auto on_trial = [](uint64_t call) { return call % kEvery >= 1 && call % kEvery <= kTrials; };
    // Runs `calls` calls of shape key with the given costs per kind; returns the kinds they ran.
    const auto run = [](StoreKindChooser &chooser, uint64_t calls, uint64_t key, double regular, double stream) {
        std::vector<bool> kinds;
        for (uint64_t k = 0; k < calls; ++k) {
            const StoreKindChooser::Trial trial = chooser.Choose();
            kinds.push_back(trial.stream);
            chooser.Record(trial, key, trial.stream ? stream : regular);
        }
        return kinds;
    };
    // Runs the kTrials trial calls that come next, each of shape key and the given cost; returns what Record said.
    const auto trials = [](StoreKindChooser &chooser, uint64_t key, double cost) {
        std::vector<bool> switched;
        for (uint64_t k = 0; k < kTrials; ++k) {
            const StoreKindChooser::Trial trial = chooser.Choose();
            EXPECT_TRUE(trial.explore) << "trial " << k;
            switched.push_back(chooser.Record(trial, key, cost));
        }
        return switched;
    };
    const std::vector<bool> no_switch(kTrials, false);
    std::vector<bool> switch_on_last = no_switch;
    switch_on_last.back() = true;
    {
        StoreKindChooser chooser;  // streaming first; regular clearly faster: it takes over after its first trials
        const std::vector<bool> kinds = run(chooser, 3 * kEvery, 7, 1.0, 1.25);
        for (uint64_t k = 0; k < kinds.size(); ++k) {
            EXPECT_EQ(k == 0 || (k > kEvery && on_trial(k)), kinds[k]) << "call " << k;
        }
        EXPECT_FALSE(chooser.Streaming());
        // The machine changes: streaming becomes clearly faster. The first trials still compare with a regular call
        // from before the change (the faster of the last two); the next ones switch.
        const std::vector<bool> later = run(chooser, 2 * kEvery, 7, 1.25, 1.0);
        for (uint64_t k = 0; k < later.size(); ++k) {
            EXPECT_EQ(on_trial(k) || k > kEvery + kTrials, later[k]) << "later call " << k;
        }
        EXPECT_TRUE(chooser.Streaming());
    }
    {
        StoreKindChooser chooser;  // regular faster, but within the margin: streaming stays
        const std::vector<bool> kinds = run(chooser, 2 * kEvery, 7, 1.0 - kMargin / 2, 1.0);
        for (uint64_t k = 0; k < kinds.size(); ++k) EXPECT_EQ(!on_trial(k), kinds[k]) << "call " << k;
        EXPECT_TRUE(chooser.Streaming());
    }
    {
        StoreKindChooser chooser;  // single outliers do not switch
        StoreKindChooser::Trial trial = chooser.Choose();
        EXPECT_FALSE(chooser.Record(trial, 7, 1.0));
        trial = chooser.Choose();  // trial 1: much faster
        ASSERT_TRUE(trial.explore);
        ASSERT_FALSE(trial.stream);
        EXPECT_FALSE(chooser.Record(trial, 7, 0.5));
        trial = chooser.Choose();  // trial 2: no faster
        ASSERT_TRUE(trial.explore);
        EXPECT_FALSE(chooser.Record(trial, 7, 1.0));
        EXPECT_TRUE(chooser.Streaming());
        // One slow call of the current kind before the trials: the one before it is the comparison.
        run(chooser, kEvery - kTrials - 1, 7, 0.5, 1.0);  // up to the last call but one before the next trials
        run(chooser, 1, 7, 0.5, 2.0);                     // the last: slow
        EXPECT_EQ(no_switch, trials(chooser, 7, 1.0));
        EXPECT_TRUE(chooser.Streaming());
        // Trials of another shape than the calls before them: no comparison, no switch.
        run(chooser, kEvery - kTrials, 7, 0.5, 1.0);
        EXPECT_EQ(no_switch, trials(chooser, 8, 0.5));
        EXPECT_TRUE(chooser.Streaming());
        // And trials of the same shape that win every time do switch, on the last of them.
        run(chooser, kEvery - kTrials, 7, 0.5, 1.0);
        EXPECT_EQ(switch_on_last, trials(chooser, 7, 0.5));
        EXPECT_FALSE(chooser.Streaming());
    }
}

// The measured store kind changes no bit: calls of every dtype through the plan (thresholds lowered so that they are
// measured), kExploreEvery of them in a row, so that both kinds run (any kExploreEvery calls in a row hold the other
// kind's trials), against regular stores throughout, on every kernel. Rows at both thresholds, and fp32 rows at the
// output threshold alone (with smoothing and weights, on regular stores they run as one, FlatRows).
TEST(GradStreamingChoice, MeasuredCallsGiveRegularBits) {
    StreamingThresholdsRestore restore;
    uint32_t seed = 4100;
    struct Case {
        int64_t c;
        uint64_t row_threshold;
    };
    for (const GradKernelInfo *kernel : GradKernels()) {
        for (aclDataType dtype : kDtypes) {
            for (const Case &t : {Case{4099, 0}, Case{1031, UINT64_MAX}}) {
                if (t.row_threshold != 0 && dtype != ACL_FLOAT) continue;  // (not measured)
                Problem p = MakeProblem(dtype, 8, t.c, kSmoothedWeighted, ++seed, 0, 1);
                const std::string what =
                    std::string(kernel->name) + " " + DtypeName(dtype) + " C=" + std::to_string(t.c);
                const std::vector<uint8_t> input = p.in;
                const std::vector<uint8_t> regular =
                    RunWithStreaming(*kernel, p, input, {UINT64_MAX, 0, StoreKinds::kRegular});
                SetStreamingThresholds({0, t.row_threshold, StoreKinds::kMeasured});
                ASSERT_TRUE(BeginStoreKindCall(p.Args()).measured) << what;  // (a call of the chooser's too)
                for (uint64_t call = 0; call < StoreKindChooser::kExploreEvery; ++call) {
                    p.in = input;
                    Poison(p.out);
                    GradKernelArgs args = p.Args();
                    GradPlan plan = MakeGradPlan(args, 2);
                    plan.kernel = kernel;
                    RunGradPlan(plan, args);
                    const uint8_t *out = static_cast<const uint8_t *>(args.out);
                    std::vector<uint8_t> rows;
                    for (int64_t i = 0; i < p.n; ++i) {
                        const uint8_t *row = out + i * args.out_row_stride * static_cast<int64_t>(ElementSize(dtype));
                        rows.insert(rows.end(), row, row + p.c * ElementSize(dtype));
                    }
                    EXPECT_EQ(0, BitMismatches(dtype, regular, rows.data())) << what << " call " << call;
                }
            }
        }
    }
}

// Every 16-bit input value, with a few coefficient sets: the exhaustive accuracy check of the 16-bit exps.
TEST_P(GradKernelTest, Every16BitInput) {
    const GradKernelInfo &kernel = *GetParam();
    for (aclDataType dtype : {ACL_FLOAT16, ACL_BF16}) {
        Problem p;
        p.dtype = dtype;
        p.n = 6;
        p.c = 65536;
        p.in_stride = p.out_stride = p.c;
        p.in.resize(p.n * p.c * 2);
        p.out.resize(p.n * p.c * 2);
        for (int64_t i = 0; i < p.n; ++i) {
            for (int64_t j = 0; j < p.c; ++j) reinterpret_cast<uint16_t *>(p.in.data())[i * p.c + j] = j;
        }
        const double as[] = {1.0, 0.37, 1.0 / 4096, 3e-7, 1.0, 0.61};
        const double bs[] = {0.0, 0.0, 0.0, 0.0, 1e-5, 0.61 * 0.1 / 65536};
        for (int64_t i = 0; i < p.n; ++i) p.rows.push_back({as[i], bs[i], 0.0, -1, kRowCompute, 0});
        const std::vector<uint8_t> ref = ReferenceOutput(p);
        Poison(p.out);
        GradKernelArgs args = p.Args();
        kernel.run(args, GradTile{0, p.n, 0, p.c});
        const Stats s = ExpectMatches(p, args.out, p.c, ref, std::string(kernel.name) + " every input");
        ExpectCorrectlyRounded(s, dtype, std::string(kernel.name) + " every 16-bit input");
    }
}

// Every 16-bit input against weights (b * w_j with w_j in [0.5, 1.5]), with a and b such that exp(x) a crosses
// b w_j inside the input range, so that some lanes cancel and are patched (in bf16, inside the two-vector pair
// loop, which then redoes its pair through the one-vector path). Every kernel: within one ulp of the reference,
// correctly rounded in >= 99.5%, and the SIMD kernels' bits equal to each other and to their own bits with other
// column tilings.
TEST(GradKernelEvery16BitInput, WeightedBitwiseAcrossKernels) {
    for (aclDataType dtype : {ACL_FLOAT16, ACL_BF16}) {
        Problem p;
        p.dtype = dtype;
        p.n = 3;
        p.c = 65536 + 37;  // a tail after the vector loops
        p.in_stride = p.out_stride = p.c;
        p.in.resize(p.n * p.c * 2);
        p.out.resize(p.n * p.c * 2);
        for (int64_t i = 0; i < p.n; ++i) {
            for (int64_t j = 0; j < p.c; ++j) {
                reinterpret_cast<uint16_t *>(p.in.data())[i * p.c + j] = static_cast<uint16_t>((j * (2 * i + 1)) & 0xffff);
            }
        }
        const double as[] = {1.0 / 4096, 0.61, 1.0};
        const double bs[] = {0.1 / 32000 / 4096, 0.61 * 0.1 / 65536, -0.25};
        // Row 0 cancels on purpose wherever it can: w_j = exp(x_j) a / b (1 + k 2^-10), k in [-3, 3].
        for (int64_t j = 0; j < p.c; ++j) {
            const double x = ToDouble(dtype, p.in.data(), j);
            const double ratio = std::exp(x) * as[0] / bs[0];
            const bool near = std::isfinite(ratio) && ratio > 1e-6 && ratio < 1e6;
            p.weight.push_back(near ? static_cast<float>(ratio * (1.0 + std::ldexp(static_cast<double>(j % 7) - 3.0, -10)))
                                    : 0.5f + static_cast<float>(j % 1001) / 1000.0f);
        }
        // Row 0's elements that the guard must flag: for bf16, some only in its first test (redone with the degree-5
        // exp), some in both (redone in double).
        int64_t cancelling = 0, deeply_cancelling = 0;
        for (int64_t j = 0; j < p.c; ++j) {
            const double bw = bs[0] * p.weight[j];
            const double gap = std::fabs(std::exp(ToDouble(dtype, p.in.data(), j)) * as[0] - bw);
            cancelling += gap < 0x1p-9 * bw && gap > 0x1p-12 * bw;
            deeply_cancelling += gap < 0x1p-14 * bw;
        }
        EXPECT_GT(cancelling, 100) << DtypeName(dtype);
        EXPECT_GT(deeply_cancelling, 100) << DtypeName(dtype);
        for (int64_t i = 0; i < p.n; ++i) p.rows.push_back({as[i], bs[i], 0.0, -1, kRowCompute, 0});
        const std::vector<uint8_t> ref = ReferenceOutput(p);
        std::vector<uint8_t> first;
        std::string first_name;
        for (const GradKernelInfo *kernel : GradKernels()) {
            Poison(p.out);
            GradKernelArgs args = p.Args();
            kernel->run(args, GradTile{0, p.n, 0, p.c});
            const std::string what = std::string(kernel->name) + " " + DtypeName(dtype) + " weighted every input";
            const Stats s = ExpectMatches(p, args.out, p.c, ref, what);
            ExpectCorrectlyRounded(s, dtype, what);
            if (std::string(kernel->name).rfind("hwy:", 0) != 0) continue;
            if (first.empty()) {
                first = p.out;
                first_name = kernel->name;
            } else {
                EXPECT_EQ(0, std::memcmp(first.data(), p.out.data(), first.size())) << what << " vs " << first_name;
            }
            // No element's bits depend on its neighbours (which vector or pair it shares, whether a neighbour was
            // flagged): one-column tiles, and tiles cut at odd columns, give the same bits. The weights' traits given
            // once, as the operator gives them (found by each call, they made the one-column tiles quadratic in C).
            const GradWeightTraits traits = TraitsOf(p.weight);
            args.weight_traits = &traits;
            Poison(p.out);
            for (int64_t j = 0; j < p.c; ++j) kernel->run(args, GradTile{0, p.n, j, j + 1});
            EXPECT_EQ(0, std::memcmp(first.data(), p.out.data(), first.size())) << what << " one-column tiles";
            Poison(p.out);
            for (int64_t j = 0; j < p.c; j += 997) kernel->run(args, GradTile{0, p.n, j, std::min(p.c, j + 997)});
            EXPECT_EQ(0, std::memcmp(first.data(), p.out.data(), first.size())) << what << " 997-column tiles";
        }
    }
}

// The kernel's fused multiply-add (one rounding: the instruction, or on SSE4 the exact emulation in double, or
// std::fmaf per lane) gives std::fmaf's bits: on random bit patterns (every class of float), on products near a
// cancellation, and on products that are halfway between two floats plus or minus a tiny c, where rounding the sum to
// double first and then to float would round the wrong way (double rounding).
TEST_P(GradKernelTest, FusedMultiplyAddIsFmaf) {
    const GradKernelInfo &kernel = *GetParam();
    ASSERT_NE(kernel.fma, nullptr);
    std::mt19937 rng(20261205);
    std::vector<float> a, b, c;
    const auto add = [&](float x, float y, float z) {
        a.push_back(x);
        b.push_back(y);
        c.push_back(z);
    };
    const auto bits = [&]() { return BitsToFloat(static_cast<uint32_t>(rng())); };
    for (int k = 0; k < 200000; ++k) add(bits(), bits(), bits());
    std::uniform_real_distribution<float> unit(-2.0f, 2.0f);
    for (int k = 0; k < 100000; ++k) {  // c cancels most of a * b
        const float x = unit(rng), y = unit(rng);
        const uint32_t near_product = FloatBits(x * y) + static_cast<uint32_t>(static_cast<int>(rng() % 7) - 3);
        add(x, y, -BitsToFloat(near_product));
    }
    int halfway = 0;
    for (int k = 0; k < 100000; ++k) {  // 13-bit significands: the product has 25 or 26 bits, exact in double
        const float x = std::ldexp(static_cast<float>(4096 + rng() % 4096), static_cast<int>(rng() % 40) - 30);
        const float y = std::ldexp(static_cast<float>(4096 + rng() % 4096), static_cast<int>(rng() % 40) - 30);
        const double p = static_cast<double>(x) * y;
        const float near = static_cast<float>(p);
        const double gap = p - near;  // p > 0: a midpoint lies half a float spacing from its rounding
        if (gap != 0.0 && 2.0 * std::fabs(gap) ==
                              (gap > 0 ? std::nextafter(near, INFINITY) - near : near - std::nextafter(near, 0.0f))) {
            ++halfway;
        }
        const int sign = static_cast<int>(rng() % 3) - 1;  // c = -tiny, 0 or +tiny relative to the product
        add(x, y, static_cast<float>(sign * std::ldexp(std::fabs(p), -40 - static_cast<int>(rng() % 40))));
    }
    EXPECT_GT(halfway, 15000);
    std::vector<float> got(a.size(), std::nanf("7"));
    kernel.fma(a.data(), b.data(), c.data(), got.data(), a.size());
    int64_t mismatches = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const float want = std::fmaf(a[i], b[i], c[i]);
        const bool same = std::isnan(want) ? std::isnan(got[i]) : FloatBits(got[i]) == FloatBits(want);
        if (!same && ++mismatches <= 5) {
            ADD_FAILURE() << kernel.name << ": fma(" << a[i] << ", " << b[i] << ", " << c[i] << ") = " << got[i]
                          << ", std::fmaf " << want;
        }
    }
    EXPECT_EQ(mismatches, 0) << kernel.name << " of " << a.size();
}

// ExpDouble against a long double exp (64 significant bits): within one ulp of double over float inputs whose exp is a
// normal double (a dense grid of [-708, 709] and random floats), its claim in common/exp_double.h; at least 95% of
// them correctly rounded (measured: 98.7%). Beyond: +inf, +0 and NaN where exp gives them.
TEST(ExpDouble, WithinOneUlpOfDouble) {
    std::mt19937 rng(7);
    std::vector<float> inputs;
    for (int k = 0; k < 2000000; ++k) inputs.push_back(static_cast<float>(-708.0 + 1417.0 * (k + 0.5) / 2000000));
    for (int k = 0; k < 1000000; ++k) {
        const float f = BitsToFloat(static_cast<uint32_t>(rng()));
        if (std::fabs(f) < 708.0f) inputs.push_back(f);
    }
    double worst = 0.0;
    int64_t rounded = 0;
    for (float f : inputs) {
        const long double want = std::exp(static_cast<long double>(f));
        const double got = ExpDouble(f);
        int exponent = 0;
        std::frexp(static_cast<double>(want), &exponent);
        const long double ulp = std::ldexp(1.0L, exponent - 53);
        const double error = static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
        worst = std::max(worst, error);
        if (error <= 0.5) ++rounded;
        ASSERT_LE(error, 1.0) << std::hexfloat << f;
    }
    EXPECT_GE(static_cast<double>(rounded), 0.95 * static_cast<double>(inputs.size()));
    std::printf("ExpDouble over %zu floats: worst %.3f ulp, %.2f%% correctly rounded\n", inputs.size(), worst,
                100.0 * static_cast<double>(rounded) / static_cast<double>(inputs.size()));
    EXPECT_EQ(ExpDouble(710.0), INFINITY);
    EXPECT_EQ(ExpDouble(INFINITY), INFINITY);
    EXPECT_EQ(ExpDouble(-746.0), 0.0);
    EXPECT_EQ(ExpDouble(-INFINITY), 0.0);
    EXPECT_EQ(ExpDouble(0.0), 1.0);
    EXPECT_TRUE(std::isnan(ExpDouble(std::nan(""))));
    EXPECT_EQ(ExpDouble(-745.0), 0x1p-1074);  // e^-745 = 0.571 x 2^-1074, rounded once
}

// The vector ExpDouble of every target against the scalar one (common/exp_double.h), bit for bit: the target
// elements of packed rows take the vector one, every other target element and the reference kernel the scalar one.
// Random doubles (every class), floats widened (the kernels' inputs), the ends of the range and beyond, and values
// near multiples of ln2 / 2 (where k changes).
TEST_P(GradKernelTest, VectorExpDoubleIsScalarExpDouble) {
    const GradKernelInfo &kernel = *GetParam();
    ASSERT_NE(kernel.exp_double, nullptr);
    std::mt19937_64 rng(20261205);
    std::vector<double> x;
    for (int k = 0; k < 100000; ++k) {
        x.push_back(BitsToDouble(rng()));
    }
    for (int k = 0; k < 200000; ++k) x.push_back(BitsToFloat(static_cast<uint32_t>(rng())));
    std::uniform_real_distribution<double> range(-760.0, 720.0);
    for (int k = 0; k < 200000; ++k) x.push_back(static_cast<float>(range(rng)));
    for (int k = -2200; k <= 2100; ++k) {
        const double edge = k * 0.34657359027997264;  // ln2 / 2
        x.push_back(edge);
        x.push_back(std::nextafter(edge, -INFINITY));
        x.push_back(std::nextafter(edge, INFINITY));
    }
    for (double d :
         {0.0, -0.0, 709.782712893384, 709.7827128933841, -745.1332191019411, -745.1332191019412, -746.0, 710.0, 1e300,
          -1e300, double{INFINITY}, -double{INFINITY}, std::nan(""), -std::nan("3"), 0x1p-1074, -0x1p-1074}) {
        x.push_back(d);
    }
    x.push_back(1.0);  // an odd count: the last vector is partial on every target but the scalar one
    std::vector<double> got(x.size(), std::nan("7"));
    kernel.exp_double(x.data(), got.data(), x.size());
    int64_t mismatches = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double want = ExpDouble(x[i]);
        if (DoubleBits(got[i]) != DoubleBits(want) && ++mismatches <= 5) {
            ADD_FAILURE() << kernel.name << ": ExpDouble(" << std::hexfloat << x[i] << ") = " << got[i] << ", scalar "
                          << want;
        }
    }
    EXPECT_EQ(mismatches, 0) << kernel.name << " of " << x.size();
}

// exp(x) a as the rows compute it (GradKernelInfo::scaled_exp), at every degree and reduction the rows use, before
// the 16-bit rounding hides most differences (a factor of a planted two ulps off on one target passed this file's
// 16-bit tests): a row's factors of a, a vector of a and the fast path give the same bits; every kernel gives the
// first kernel's bits; and each result lies within its degree's error bound of exp(x) a in double (grad_hwy-inl.h:
// degree 4 2^-17.44 measured, 2^-17.3 with the one-step reduction; degree 5 2^-22.29, 2^-20.49 one-step; degree 6,
// fp32's, at most one ulp). x over [-60, 60] and a at exponents 0 down to -30: every result is a normal float.
TEST(GradKernelScaledExp, SameBitsOnEveryKernelAndPath) {
    std::mt19937_64 rng(20261207);
    std::uniform_real_distribution<float> range(-60.0f, 60.0f);
    std::vector<float> x;
    for (int k = 0; k < 40000; ++k) x.push_back(range(rng));
    for (int k = -87; k <= 86; ++k) {  // the reduction's edges, x = (k + 1/2) ln2, and just either side
        const float edge = static_cast<float>((k + 0.5) * 0.6931471805599453);
        x.push_back(edge);
        x.push_back(std::nextafter(edge, -INFINITY));
        x.push_back(std::nextafter(edge, INFINITY));
    }
    for (float d : {0.0f, -0.0f, 1e-30f, -1e-30f, 60.0f, -60.0f}) x.push_back(d);
    x.push_back(1.0f);  // an odd count: a partial last vector on every target but the scalar one
    std::vector<float> as = {1.0f, 0x1.fffffep-1f, 0x1p-30f};
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    for (int e : {0, -1, -7, -13, -20, -30}) as.push_back(std::ldexp(mantissa(rng), e));
    struct Form {
        int degree;
        bool one_step;
        double bound;  // relative, against exp(x) a in double
    };
    const Form forms[] = {{4, true, std::exp2(-17.3)},
                          {4, false, std::exp2(-17.4)},
                          {5, true, std::exp2(-20.49)},
                          {5, false, std::exp2(-22.29)},
                          {6, false, 0x1p-23}};
    const auto hex = [](float v) {
        char text[32];
        std::snprintf(text, sizeof text, "%a", static_cast<double>(v));
        return std::string(text);
    };
    const size_t count = x.size();
    std::vector<float> by_row(count), by_lane(count), fast(count);
    for (const Form &form : forms) {
        for (float a : as) {
            std::vector<float> first;
            std::string first_name;
            for (const GradKernelInfo *kernel : GradKernels()) {
                ASSERT_NE(kernel->scaled_exp, nullptr) << kernel->name;
                const std::string what = std::string(kernel->name) + " degree " + std::to_string(form.degree) +
                                         (form.one_step ? " one-step" : " two-step") + " a=" + hex(a);
                for (std::vector<float> *v : {&by_row, &by_lane, &fast}) std::fill(v->begin(), v->end(), NAN);
                kernel->scaled_exp(form.degree, form.one_step, a, x.data(), count, by_row.data(), by_lane.data(),
                                   fast.data());
                int64_t other_paths = 0, outside = 0;
                double worst = 0.0;
                for (size_t i = 0; i < count; ++i) {
                    other_paths +=
                        FloatBits(by_lane[i]) != FloatBits(by_row[i]) || FloatBits(fast[i]) != FloatBits(by_row[i]);
                    const double want = std::exp(static_cast<double>(x[i])) * a;
                    const double error = std::fabs(by_row[i] - want) / want;
                    worst = std::max(worst, error);
                    outside += !(error <= form.bound);
                }
                EXPECT_EQ(other_paths, 0) << what << ": a vector of a or the fast path gave other bits";
                EXPECT_EQ(outside, 0) << what << ": worst relative error 2^" << std::log2(worst);
                if (first.empty()) {
                    first = by_row;
                    first_name = kernel->name;
                    continue;
                }
                int64_t differ = 0;
                for (size_t i = 0; i < count; ++i) differ += FloatBits(by_row[i]) != FloatBits(first[i]);
                EXPECT_EQ(differ, 0) << what << ": other bits than " << first_name << " in " << differ << " of "
                                     << count;
            }
        }
    }
}

// The vector pass over the weights (GradKernelInfo::weigh, the prologue's W and traits) against their definitions in
// grad_kernel.h, computed here one element at a time: kWeightSumParts sums in double, part k taking j mod
// kWeightSumParts == k in increasing j, then the fixed tree; the traits. Weights of mixed sign spanning 2^-40 ..
// 2^40, so that any other order rounds differently; lengths around the parts' multiples; infinities, NaN, all -0,
// all positive with zeros among them. The slices weighed in one call and in 2, 3 and 4 (as threads share them), and
// the traits alone.
TEST_P(GradKernelTest, VectorWeightPassKeepsItsOrder) {
    const GradKernelInfo &kernel = *GetParam();
    ASSERT_NE(kernel.weigh, nullptr);
    std::mt19937_64 rng(20261206);
    std::uniform_real_distribution<double> exponent(-40.0, 40.0);
    for (int64_t c : {0, 1, 5, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 4099, 152064}) {
        for (int special = 0; special < 5; ++special) {
            std::vector<float> w(static_cast<size_t>(c));
            for (float &x : w) x = static_cast<float>((rng() % 2 ? 1.0 : -1.0) * std::exp2(exponent(rng)));
            if (c > 0 && special == 1) w[static_cast<size_t>(rng() % c)] = INFINITY;
            if (c > 0 && special == 2) w[static_cast<size_t>(rng() % c)] = std::nanf("");
            if (special == 3) {
                for (float &x : w) x = -0.0f;
            }
            if (special == 4) {
                for (float &x : w) x = std::fabs(x);
                if (c > 2) w[static_cast<size_t>(rng() % c)] = 0.0f;
            }
            double part[kWeightSumParts] = {};
            GradWeightTraits want;
            for (int64_t j = 0; j < c; ++j) {
                const float x = w[static_cast<size_t>(j)];
                part[j % kWeightSumParts] += static_cast<double>(x);
                want.finite = want.finite && std::isfinite(x);
                want.positive = want.positive && std::isfinite(x) && !std::signbit(x);
                if (x != 0.0f) want.min_nonzero = std::min(want.min_nonzero, std::fabs(x));
                want.max = std::max(want.max, std::fabs(x));
            }
            const double sum = WeightSumOfParts(part);
            for (int parts = 1; parts <= kWeightSlices; ++parts) {
                for (bool with_sum : {true, false}) {
                    double got_part[kWeightSumParts] = {};
                    GradWeightTraits got;
                    for (int k = 0; k < parts; ++k) {
                        const int first = kWeightSlices * k / parts;
                        const int slices = kWeightSlices * (k + 1) / parts - first;
                        got = MergeWeightTraits(
                            got, kernel.weigh(w.data(), c, first, slices, with_sum ? got_part : nullptr));
                    }
                    const std::string what = std::string(kernel.name) + " C = " + std::to_string(c) + " case " +
                                             std::to_string(special) + " in " + std::to_string(parts) + " part(s)" +
                                             (with_sum ? "" : ", traits alone");
                    EXPECT_EQ(got.finite, want.finite) << what;
                    EXPECT_EQ(got.positive, want.positive) << what;
                    if (want.finite) {  // (the extremes mean something only then)
                        EXPECT_EQ(got.min_nonzero, want.min_nonzero) << what;
                        EXPECT_EQ(got.max, want.max) << what;
                    }
                    if (!with_sum) continue;
                    const double got_sum = WeightSumOfParts(got_part);
                    if (std::isnan(sum)) {
                        EXPECT_TRUE(std::isnan(got_sum)) << what << ": " << got_sum;
                    } else {
                        EXPECT_EQ(DoubleBits(got_sum), DoubleBits(sum))
                            << what << ": " << std::hexfloat << got_sum << ", want " << sum;
                    }
                }
            }
        }
    }
}

// exp accuracy in fp32 over a dense sample of [-104, 89]: a = 1, b = 0, so out = exp(x) rounded once by the
// reference. Reports the max ulp error (the claim in grad_hwy-inl.h).
TEST_P(GradKernelTest, Fp32ExpUlp) {
    const GradKernelInfo &kernel = *GetParam();
    Problem p;
    p.dtype = ACL_FLOAT;
    const int64_t count = 1 << 22;
    p.n = 1;
    p.c = count;
    p.in_stride = p.out_stride = count;
    p.in.resize(count * 4);
    p.out.resize(count * 4);
    float *x = reinterpret_cast<float *>(p.in.data());
    for (int64_t j = 0; j < count; ++j) x[j] = static_cast<float>(-104.0 + 193.0 * (j + 0.5) / count);
    x[0] = -INFINITY;
    x[1] = 0.0f;
    x[2] = -0.0f;
    x[3] = NAN;
    x[4] = INFINITY;
    p.rows.push_back({1.0, 0.0, 0.0, -1, kRowCompute, 0});
    const std::vector<uint8_t> ref = ReferenceOutput(p);
    Poison(p.out);
    GradKernelArgs args = p.Args();
    kernel.run(args, GradTile{0, 1, 0, count});
    int64_t max_ulp = 0;
    const float *got = reinterpret_cast<const float *>(p.out.data());
    const float *want = reinterpret_cast<const float *>(ref.data());
    for (int64_t j = 0; j < count; ++j) {
        if (std::isnan(want[j])) {
            EXPECT_TRUE(std::isnan(got[j])) << j;
            continue;
        }
        max_ulp = std::max<int64_t>(max_ulp, std::llabs(Ordered(ACL_FLOAT, FloatBits(got[j])) -
                                                        Ordered(ACL_FLOAT, FloatBits(want[j]))));
    }
    std::printf("[ stats    ] %s fp32 exp max error %lld ulp\n", kernel.name, static_cast<long long>(max_ulp));
    EXPECT_LE(max_ulp, 2);
    EXPECT_EQ(got[0], 0.0f);
    EXPECT_EQ(got[1], 1.0f);
    EXPECT_EQ(got[2], 1.0f);
    EXPECT_EQ(got[4], INFINITY);
}

// The sign of a zero where the bias term is +0 times a negative weight: b = +0 (no smoothing), w_j < 0, so
// b w_j = -0, and exp(x) a = -0 (a < 0, exp(x) = 0) gives -0 - (-0) = +0, where leaving the bias term out would
// give -0. Every dtype, rows of 64 (whole vectors) and 67 (a tail), weights all negative or one negative among
// positive ones; against the reference bit for bit.
TEST_P(GradKernelTest, NegativeWeightsKeepTheSignOfZero) {
    const GradKernelInfo &kernel = *GetParam();
    for (aclDataType dtype : kDtypes) {
        for (int64_t c : {64, 67}) {
            for (int negative_only = 0; negative_only < 2; ++negative_only) {
                Problem p = DenseProblem(dtype, 3, c);
                p.weight.assign(static_cast<size_t>(c), negative_only ? -2.0f : 0.5f);
                p.weight[static_cast<size_t>(c / 2)] = -2.0f;
                for (int64_t k = 0; k < p.n * c; ++k) StoreFromDouble(dtype, p.in.data(), k, -INFINITY);
                p.rows.assign(static_cast<size_t>(p.n), GradRowCoefficients{-1.0, 0.0, 0.5, 3, kRowCompute, 0});
                const std::vector<uint8_t> ref = ReferenceOutput(p);
                Poison(p.out);
                GradKernelArgs args = p.Args();
                kernel.run(args, GradTile{0, p.n, 0, c});
                int64_t first = 0;
                while (first < p.n * c && Bits(dtype, p.out.data(), first) == Bits(dtype, ref.data(), first)) ++first;
                EXPECT_EQ(first, p.n * c)
                    << kernel.name << " " << DtypeName(dtype) << " C=" << c << (negative_only ? " all" : " one")
                    << " negative; element " << first << ": 0x" << std::hex << Bits(dtype, p.out.data(), first)
                    << ", reference 0x" << Bits(dtype, ref.data(), first);
            }
        }
    }
}

// Every tile decides by the traits of all C weights (GradKernelArgs::weight_traits, or found over all C): rows with
// b = +0 and one negative or infinite weight keep their bias term in every tile, also in those whose columns hold
// only positive weights (without it, bf16 rows run an exp of another degree, and other bits). Whole rows against
// tiles split along the columns and against the traits given by the caller, bit for bit (NaN for NaN); every dtype.
TEST_P(GradKernelTest, TilesDecideByAllTheWeights) {
    const GradKernelInfo &kernel = *GetParam();
    for (aclDataType dtype : kDtypes) {
        for (float planted : {-0.5f, INFINITY}) {
            const int64_t n = 5, c = 131073;
            Problem p = MakeProblem(dtype, n, c, kWeighted, 7700);
            p.weight[c * 3 / 4] = planted;
            const std::string what =
                std::string(kernel.name) + " " + DtypeName(dtype) + " w = " + std::to_string(planted);
            GradKernelArgs args = p.Args();
            Poison(p.out);
            kernel.run(args, GradTile{0, n, 0, c});
            const std::vector<uint8_t> whole = p.out;
            Poison(p.out);
            const int64_t bounds[] = {0, c / 3, c / 2, c};  // the planted weight in the last tile only
            for (int t = 0; t < 3; ++t) kernel.run(args, GradTile{0, n, bounds[t], bounds[t + 1]});
            EXPECT_EQ(0, BitMismatches(dtype, whole, p.out.data())) << what << ": column tiles";
            const GradWeightTraits traits = TraitsOf(p.weight);
            args.weight_traits = &traits;
            Poison(p.out);
            kernel.run(args, GradTile{0, n, 0, c / 2});
            kernel.run(args, GradTile{0, n, c / 2, c});
            EXPECT_EQ(0, BitMismatches(dtype, whole, p.out.data())) << what << ": traits given";
        }
    }
}

// Rows whose coefficients are NaN (target out of range) are NaN everywhere; kRowZero rows are +0 everywhere.
TEST_P(GradKernelTest, NanAndZeroRows) {
    const GradKernelInfo &kernel = *GetParam();
    for (aclDataType dtype : kDtypes) {
        Problem p = MakeProblem(dtype, 8, 37, kSmoothedWeighted, 77);
        p.rows[2] = {NAN, NAN, 0.0, -1, kRowCompute, 0};
        p.rows[5] = {0, 0, 0, -1, kRowZero, 0};
        RunAndCheck(kernel, p, std::string(kernel.name) + " nan/zero rows " + DtypeName(dtype));
        for (int64_t j = 0; j < p.c; ++j) {
            EXPECT_TRUE(IsNanBits(dtype, Bits(dtype, p.out.data(), 2 * p.out_stride + j)));
            EXPECT_EQ(Bits(dtype, p.out.data(), 5 * p.out_stride + j), 0u);
        }
    }
}

// Rows whose coefficients fp32 cannot carry (|a| or |b| below 2^-125, |a| above 2^76 or |b| above 2^126: a gradLoss
// of 1e-45, a total weight near fp32's limits) are computed in double, element by element: every element equals the reference's bits,
// also where exp(x) * a is an ordinary or subnormal number reached from a subnormal a. (Found by fuzz_grad: a
// subnormal a rounded to fp32 before its scaling by 2^k gave -2^-127 instead of -6.53e-39.)
TEST_P(GradKernelTest, ExtremeCoefficientsAreExact) {
    const GradKernelInfo &kernel = *GetParam();
    const double cases[][2] = {{1.5e-45, 0.0},  {-1.5e-45, 3e-46}, {3.6e-41, 1e-42}, {1e-50, 1e-52},
                               {2.5e40, 1e39},  {-1e60, 0.0},      {0.5, 1e-45},     {1e-3, 2e40},
                               {0x1p-125, 0.0}, {0x1p-126, 0.0},   {0x1p126, 0.0},   {0x1p127, 0.0}};
    for (aclDataType dtype : kDtypes) {
        Problem p = MakeProblem(dtype, 12, 300, kSmoothedWeighted, 4242, 0, 0, 12.0);
        std::mt19937 rng(17);
        std::uniform_real_distribution<double> wild(-40.0, 40.0);
        const size_t es = ElementSize(dtype);
        for (int64_t i = 0; i < p.n; ++i) {
            // Inputs where exp(x) * a lands anywhere from below the subnormals to above the largest float.
            for (int64_t j = 0; j < p.c; j += 3) StoreFromDouble(dtype, p.in.data() + p.in_offset * es,
                                                                 i * p.in_stride + j, wild(rng));
            p.rows[i].a = cases[i][0];
            p.rows[i].b = cases[i][1];
        }
        const std::vector<uint8_t> ref = ReferenceOutput(p);
        Poison(p.out);
        GradKernelArgs args = p.Args();
        kernel.run(args, GradTile{0, p.n, 0, p.c});
        for (int64_t i = 0; i < p.n; ++i) {
            if (!RowNeedsDouble(p.rows[i])) continue;
            int64_t mismatches = 0;
            for (int64_t j = 0; j < p.c; ++j) {
                mismatches += Bits(dtype, args.out, i * args.out_row_stride + j) != Bits(dtype, ref.data(), i * p.c + j);
            }
            EXPECT_EQ(mismatches, 0) << kernel.name << " " << DtypeName(dtype) << " row " << i << " a " << cases[i][0]
                                     << " b " << cases[i][1];
        }
        // The other rows within the usual bounds.
        ExpectMatches(p, args.out, args.out_row_stride, ref, std::string(kernel.name) + " extreme coefficients " +
                                                                 DtypeName(dtype));
    }
}

// Large |a| (a gradLoss beyond 1e22) with inputs far below -172, where exp(x) * a is tiny, subnormal or zero: the
// vector path clamps x at -172, exact only for |a| <= 2^76, so rows with larger |a| must be computed in double.
// Every element of every row must be within the usual tolerances of the reference (with |a| = 2^100 and x = -180 the
// clamp gave 2^-148 where the reference gives 0).
TEST_P(GradKernelTest, LargeScaleWithVeryNegativeInputs) {
    const GradKernelInfo &kernel = *GetParam();
    const double scales[] = {0x1p70, 0x1p76, 0x1.0002p76, 0x1p77, 0x1p90, -0x1p100, 0x1p110, 0x1p120, -0x1p126};
    const int64_t n = static_cast<int64_t>(sizeof scales / sizeof scales[0]);
    for (aclDataType dtype : kDtypes) {
        for (Variant v : {kPlain, kSmoothedWeighted}) {
            Problem p = MakeProblem(dtype, n, 200, v, 5150 + v, 0, 0);
            std::mt19937 rng(23 + v);
            std::uniform_real_distribution<double> deep(-260.0, -120.0);
            const size_t es = ElementSize(dtype);
            for (int64_t i = 0; i < n; ++i) {
                for (int64_t j = 0; j < p.c; ++j) {
                    StoreFromDouble(dtype, p.in.data() + p.in_offset * es, i * p.in_stride + j, deep(rng));
                }
                p.rows[i].a = scales[i];
                // A bias far below the exp term where there is one, so that the exp term's underflow shows.
                p.rows[i].b = p.rows[i].b == 0.0 ? 0.0 : std::ldexp(scales[i], -200);
            }
            RunAndCheck(kernel, p, std::string(kernel.name) + " large scale " + DtypeName(dtype) + " variant " +
                                       std::to_string(v));
        }
    }
}

// Which path of the exp a vector takes (the fast one, which adds k to the exponent field when every lane's k lies
// in the row's window, or the general one) never changes a value. Rows of inputs swept densely across and beyond
// every window, for coefficients a from near fp32's smallest normal to near its largest, with and without a bias
// term: the whole row (its vectors mostly take the fast path, those at the windows' edges and beyond the general
// one) must give the bits of the same row computed one column at a time (a one-column tile always takes the
// general path).
TEST_P(GradKernelTest, FastAndGeneralPathsAgree) {
    const GradKernelInfo &kernel = *GetParam();
    std::mt19937 rng(2718);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const int exponents[] = {-124, -100, -70, -40, -20, -12, -3, 0, 5, 20, 50, 90, 125};
    for (aclDataType dtype : kDtypes) {
        const int64_t c = dtype == ACL_FLOAT ? 20011 : 4099;
        Problem p;
        p.dtype = dtype;
        p.n = 2 * static_cast<int64_t>(std::size(exponents));
        p.c = p.in_stride = p.out_stride = c;
        const size_t es = ElementSize(dtype);
        p.in.assign(p.n * c * es + 8, 0);
        p.out.assign(p.n * c * es + 8, 0);
        p.weight.resize(c);
        for (auto &w : p.weight) w = static_cast<float>(0.25 + 2.0 * unit(rng));
        for (int64_t i = 0; i < p.n; ++i) {
            const int e = exponents[i / 2];
            const double a = std::ldexp(1.0 + unit(rng), e) * (i % 4 == 3 ? -1.0 : 1.0);
            // Odd rows: a bias term whose size meets exp(x) a somewhere in the row.
            const double b = i % 2 ? a * std::exp(-40.0 * unit(rng)) : 0.0;
            p.rows.push_back({a, b, 0.0, -1, kRowCompute, 0});
            for (int64_t j = 0; j < c; ++j) {
                // x from -185 to 185, ascending, with a little jitter: whole vectors inside a window, whole vectors
                // outside, and vectors across each edge.
                const double x = -185.0 + 370.0 * (static_cast<double>(j) + 0.5 * unit(rng)) / static_cast<double>(c);
                StoreFromDouble(dtype, p.in.data(), i * c + j, x);
            }
        }
        Poison(p.out);
        GradKernelArgs args = p.Args();
        kernel.run(args, GradTile{0, p.n, 0, c});
        const std::vector<uint8_t> whole = p.out;
        const GradWeightTraits traits = TraitsOf(p.weight);
        args.weight_traits = &traits;  // given once (found by each call: quadratic in C)
        Poison(p.out);
        for (int64_t j = 0; j < c; ++j) kernel.run(args, GradTile{0, p.n, j, j + 1});
        for (int64_t i = 0; i < p.n; ++i) {
            int64_t mismatches = 0;
            std::string first;
            for (int64_t j = 0; j < c; ++j) {
                const uint32_t got = Bits(dtype, whole.data(), i * c + j);
                const uint32_t want = Bits(dtype, p.out.data(), i * c + j);
                if (got == want || (IsNanBits(dtype, got) && IsNanBits(dtype, want))) continue;
                if (mismatches++ == 0) {
                    first = "col " + std::to_string(j) + " x " + std::to_string(ToDouble(dtype, p.in.data(), i * c + j));
                }
            }
            EXPECT_EQ(mismatches, 0) << kernel.name << " " << DtypeName(dtype) << " row " << i << " a "
                                     << p.rows[i].a << " b " << p.rows[i].b << ", first at " << first;
        }
    }
}

// Consecutive rows with a bias term b w_j may be done together, sharing their weight loads (fp32 kernels do, four
// or two rows at a time, and then also the product b w_j where every row has the same b). Every row here has a bias
// term, with its own a and either its own b or one b for all, and inputs from -185 to 185 in a different order per
// row, so that one row of a group is on the fast path where another is not; one row in five holds a NaN, and the row
// count (11: groups of four, four, two and a single row) is odd. The whole tile must give, bit for bit, what one-row
// tiles give (where no row has a neighbour) and what one-column tiles give (the general path), and stay within the
// tolerances of the reference.
TEST_P(GradKernelTest, RowsDoneTogetherGiveOneRowBits) {
    const GradKernelInfo &kernel = *GetParam();
    std::mt19937 rng(4242);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (int shared_b = 0; shared_b < 2; ++shared_b)
        for (aclDataType dtype : kDtypes) {
            const int64_t n = 11, c = dtype == ACL_FLOAT ? 4133 : 1031;
            Problem p = DenseProblem(dtype, n, c);
            p.weight.resize(c);
            for (auto &w : p.weight) w = static_cast<float>(0.25 + 2.0 * unit(rng));
            for (int64_t i = 0; i < n; ++i) {
                const double a = std::ldexp(1.0 + unit(rng), static_cast<int>(i) * 9 - 40);
                const double b =
                    shared_b && i > 0 ? p.rows[0].b : a * std::exp(-30.0 * unit(rng)) * (i % 3 == 2 ? -1.0 : 1.0);
                p.rows.push_back({a, b, 0.0, -1, kRowCompute, 0});
                for (int64_t j = 0; j < c; ++j) {
                    // Ascending in even rows, descending in odd ones, so that the window's edges fall apart.
                    const int64_t k = i % 2 ? c - 1 - j : j;
                    const double x =
                        -185.0 + 370.0 * (static_cast<double>(k) + 0.5 * unit(rng)) / static_cast<double>(c);
                    StoreFromDouble(dtype, p.in.data(), i * c + j, i % 5 == 1 && j == 77 ? std::nan("") : x);
                }
            }
            const std::vector<uint8_t> ref = ReferenceOutput(p);
            GradKernelArgs args = p.Args();
            Poison(p.out);
            kernel.run(args, GradTile{0, n, 0, c});
            const std::vector<uint8_t> whole = p.out;
            ExpectMatches(p, whole.data(), c, ref, std::string(kernel.name) + " " + DtypeName(dtype) + " whole tile");
            Poison(p.out);
            for (int64_t i = 0; i < n; ++i) kernel.run(args, GradTile{i, i + 1, 0, c});
            const std::vector<uint8_t> by_row = p.out;
            Poison(p.out);
            for (int64_t j = 0; j < c; ++j) kernel.run(args, GradTile{0, n, j, j + 1});
            for (int64_t i = 0; i < n; ++i) {
                int64_t by_row_mismatches = 0, by_column_mismatches = 0;
                for (int64_t j = 0; j < c; ++j) {
                    const uint32_t got = Bits(dtype, whole.data(), i * c + j);
                    const auto differs = [&](const std::vector<uint8_t> &other) {
                        const uint32_t want = Bits(dtype, other.data(), i * c + j);
                        return got != want && !(IsNanBits(dtype, got) && IsNanBits(dtype, want));
                    };
                    by_row_mismatches += differs(by_row);
                    by_column_mismatches += differs(p.out);
                }
                EXPECT_EQ(by_row_mismatches, 0) << kernel.name << " " << DtypeName(dtype) << " row " << i;
                EXPECT_EQ(by_column_mismatches, 0) << kernel.name << " " << DtypeName(dtype) << " row " << i;
            }
        }
}

// bf16 results near and below fp32's smallest normal (2^-126), where a bias term b w_j meets exp(x) a of the same
// tiny size: the cancellation leaves subnormal results on the pair loop's fast path. The native bf16 conversion of
// hwy:AVX3_BF16 flushes those to zero, so such rows must keep the integer rounding (NativeBf16Safe); rows whose
// bias is large enough or small enough for every result to stay normal may use the instruction. Whole rows must
// give the bits of one-column tiles (the general path, always the integer rounding) and lie within one ulp of the
// reference, on every kernel.
TEST_P(GradKernelTest, TinyBiasNearSubnormalResults) {
    const GradKernelInfo &kernel = *GetParam();
    std::mt19937 rng(1618);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const int bias_exponents[] = {-131, -127, -125, -124, -123, -122, -121, -119, -117, -115, -112, -108};
    Problem p = DenseProblem(ACL_BF16, 4 * static_cast<int64_t>(std::size(bias_exponents)), 1024 + 9);
    // Two passes over the same rows: a constant bias b (no weights), then a bias b w_j (weights, which apply to
    // every row of a problem).
    for (int with_weights = 0; with_weights < 2; ++with_weights) {
        p.weight.clear();
        if (with_weights) {
            p.weight.resize(p.c);
            for (auto &w : p.weight) w = static_cast<float>(0.25 + 2.0 * unit(rng));
        }
        p.rows.clear();
        for (int64_t i = 0; i < p.n; ++i) {
            const double a = std::ldexp(1.0 + unit(rng), -110);
            const double b = std::ldexp(1.0 + unit(rng), bias_exponents[i / 4]) * (i % 4 == 3 ? -1.0 : 1.0);
            p.rows.push_back({a, b, 0.0, -1, kRowCompute, 0});
            // x around log(|b| / a), where exp(x) a meets |b|, with jitter: 32 bf16 steps either side.
            const double x0 = std::log(std::fabs(b) / a);
            for (int64_t j = 0; j < p.c; ++j) {
                const double x = x0 - 2.0 + 4.0 * (static_cast<double>(j) + unit(rng)) / static_cast<double>(p.c);
                StoreFromDouble(ACL_BF16, p.in.data(), i * p.c + j, std::min(x, 0.0));
            }
        }
        const std::string what = std::string(kernel.name) + (with_weights ? " weighted" : " constant bias");
        Poison(p.out);
        GradKernelArgs args = p.Args();
        kernel.run(args, GradTile{0, p.n, 0, p.c});
        const std::vector<uint8_t> whole = p.out;
        ExpectMatches(p, whole.data(), p.c, ReferenceOutput(p), what);
        int64_t subnormal = 0;
        for (int64_t k = 0; k < p.n * p.c; ++k) {
            const uint32_t bits = Bits(ACL_BF16, whole.data(), k);
            subnormal += (bits & 0x7f80u) == 0 && (bits & 0x7fu) != 0;
        }
        EXPECT_GT(subnormal, 100) << what;
        const GradWeightTraits traits = TraitsOf(p.weight);
        args.weight_traits = &traits;  // given once (found by each call: quadratic in C)
        Poison(p.out);
        for (int64_t j = 0; j < p.c; ++j) kernel.run(args, GradTile{0, p.n, j, j + 1});
        for (int64_t i = 0; i < p.n; ++i) {
            int64_t mismatches = 0;
            std::string first;
            for (int64_t j = 0; j < p.c; ++j) {
                const uint32_t got = Bits(ACL_BF16, whole.data(), i * p.c + j);
                const uint32_t want = Bits(ACL_BF16, p.out.data(), i * p.c + j);
                if (got != want && mismatches++ == 0) {
                    first = "col " + std::to_string(j) + " got " + std::to_string(got) + " want " + std::to_string(want);
                }
            }
            EXPECT_EQ(mismatches, 0) << what << " row " << i << " a " << p.rows[i].a << " b " << p.rows[i].b
                                     << ", first at " << first;
        }
    }
}

// Runs p (packed rows) again in tiles of one column and expects the bits of `whole`, its output as one tile.
void ExpectColumnTilesGiveBits(const GradKernelInfo &kernel, Problem &p, const std::vector<uint8_t> &whole) {
    GradKernelArgs args = p.Args();
    const GradWeightTraits traits = TraitsOf(p.weight);
    args.weight_traits = &traits;  // given once (found by each call: quadratic in C)
    Poison(p.out);
    for (int64_t j = 0; j < p.c; ++j) kernel.run(args, GradTile{0, p.n, j, j + 1});
    int64_t mismatches = 0;
    for (int64_t k = 0; k < p.n * p.c; ++k) {
        mismatches += Bits(p.dtype, whole.data(), k) != Bits(p.dtype, p.out.data(), k);
    }
    EXPECT_EQ(mismatches, 0) << kernel.name << ": whole rows differ from one-column tiles";
}

// Lanes just past the cancellation guard of bf16's bias rows (degree 5: |v| between 2^-12 and 2^-8 of |b w_j|),
// with |b| >= 2^-110 and |b w_j| about 2^-115, where such a v falls below 2^-126: NativeBf16Safe must keep these
// rows on the integer rounding, as the one-vector path does, not the instruction that flushes subnormals (with
// degree 4's guard bound, |b w_j| >= 2^-116 was enough, and that bound here fails this test). The weights are chosen
// so that exp(x_j) a = b w_j (1 + delta_j) with |delta_j| in [2^-12, 3 2^-12] in most columns; whole rows must give
// the bits of one-column tiles and lie within one ulp of the reference, on every kernel.
TEST_P(GradKernelTest, LanesPastTheGuardNearSubnormal) {
    const GradKernelInfo &kernel = *GetParam();
    std::mt19937 rng(2718);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    Problem p = DenseProblem(ACL_BF16, 3, 2048 + 13);
    const double a = std::ldexp(1.0 + unit(rng), -110);
    const double b = std::ldexp(1.0 + unit(rng), -100);
    for (int64_t i = 0; i < p.n; ++i) p.rows.push_back({a, b, 0.0, -1, kRowCompute, 0});
    for (int64_t j = 0; j < p.c; ++j) {
        const double x = -4.0 + static_cast<double>(j) / static_cast<double>(p.c);
        for (int64_t i = 0; i < p.n; ++i) StoreFromDouble(ACL_BF16, p.in.data(), i * p.c + j, x);
        const double xb = ToDouble(ACL_BF16, p.in.data(), j);
        const double delta = j % 7 == 6 ? 0.0625 : std::ldexp(1.0 + static_cast<double>(j % 3), -12) * (j % 2 ? 1 : -1);
        p.weight.push_back(static_cast<float>(std::exp(xb) * a / (b * (1.0 + delta))));
    }
    Poison(p.out);
    GradKernelArgs args = p.Args();
    kernel.run(args, GradTile{0, p.n, 0, p.c});
    const std::vector<uint8_t> whole = p.out;
    ExpectMatches(p, whole.data(), p.c, ReferenceOutput(p),
                  std::string(kernel.name) + " past the guard near subnormal");
    int64_t subnormal = 0;
    for (int64_t k = 0; k < p.n * p.c; ++k) {
        const uint32_t bits = Bits(ACL_BF16, whole.data(), k);
        subnormal += (bits & 0x7f80u) == 0 && (bits & 0x7fu) != 0;
    }
    EXPECT_GT(subnormal, p.n * p.c / 8) << kernel.name;
    ExpectColumnTilesGiveBits(kernel, p, whole);
}

// bf16 rows with a bias term reduce x in one step (kRowOneStep), whose error grows with |k| = |round(x / ln2)| (up
// to 254 * 1.9e-9 with ln2 rounded to fp32), and the cancellation guard's bound, 2^-12, is chosen for it
// (kCancellationBound). Rows with a large a (2^70 to 2^74) and b = exp(x0) |a|, so that exp(x) a = b w_j at x near
// x0, -122 to -125 (k about -178; on the fast path), with inputs x0 + offset_j, offset_j a multiple of 1/2 in
// [-1, 1] (bf16's spacing there: every row's inputs are exact) and weights w_j = exp(offset_j) / (1 + delta_j),
// |delta_j| from 2^-16 to 2^-9, uniform in its logarithm: lanes on both sides of the bound, within the screen's
// range of weights. Every element within one ulp of the reference (with the bound 2^-14 some are two ulps off), the
// whole rows' bits those of one-column tiles. Not a test of the correctly rounded rate: every input cancels.
TEST_P(GradKernelTest, Bf16GuardCoversTheOneStepReduction) {
    const GradKernelInfo &kernel = *GetParam();
    std::mt19937 rng(5772);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const int64_t n = 4, c = 4096 + 5;
    Problem p = DenseProblem(ACL_BF16, n, c);
    for (int64_t i = 0; i < n; ++i) {
        const double sign = i % 2 ? -1.0 : 1.0;
        const double a = std::ldexp(1.0 + unit(rng), 70 + static_cast<int>(i));
        p.rows.push_back({sign * a, sign * std::exp(-122.0 - static_cast<double>(i)) * a, 0.0, -1, kRowCompute, 0});
    }
    int64_t below = 0, above = 0;
    for (int64_t j = 0; j < c; ++j) {
        const double offset = 0.5 * static_cast<double>(static_cast<int>(rng() % 5) - 2);
        const double delta = (j % 2 ? 1.0 : -1.0) * std::exp2(-9.0 - 7.0 * unit(rng));
        for (int64_t i = 0; i < n; ++i) {
            StoreFromDouble(ACL_BF16, p.in.data(), i * c + j, -122.0 - static_cast<double>(i) + offset);
        }
        p.weight.push_back(static_cast<float>(std::exp(offset) / (1.0 + delta)));
        (std::fabs(delta) < std::ldexp(1.0, GuardExponent(ACL_BF16)) ? below : above) += 1;
    }
    EXPECT_GT(below, c / 4);
    EXPECT_GT(above, c / 4);
    Poison(p.out);
    GradKernelArgs args = p.Args();
    kernel.run(args, GradTile{0, p.n, 0, p.c});
    const std::vector<uint8_t> whole = p.out;
    const std::string what = std::string(kernel.name) + " one-step guard";
    PrintStats(ExpectMatches(p, whole.data(), p.c, ReferenceOutput(p), what), ACL_BF16, what);
    ExpectColumnTilesGiveBits(kernel, p, whole);
}

// fp16 rows whose bias term is small (kRowSmallBias: |b| max_j |w_j| <= kSmallBiasLimit, as the prologue flags
// them) skip the cancellation guard. Rows at that limit, with inputs around the cancellation point exp(x) a = b w_j,
// must still lie within one ulp of the reference. The same inputs with |b| 2^16 times larger, flagged anyway (the
// prologue never would), must miss it somewhere: that shows the flag does skip the guard and the inputs do cancel.
TEST_P(GradKernelTest, SmallBiasFp16RowsSkipTheGuard) {
    const GradKernelInfo &kernel = *GetParam();
    std::mt19937 rng(3141);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    Problem p = DenseProblem(ACL_FLOAT16, 16, 4096 + 7);
    for (int64_t j = 0; j < p.c; ++j) p.weight.push_back(static_cast<float>(0.5 + unit(rng)));
    const double max_w = *std::max_element(p.weight.begin(), p.weight.end());
    for (const double excess : {1.0, 65536.0}) {
        p.rows.clear();
        int64_t near_cancellation = 0;
        for (int64_t i = 0; i < p.n; ++i) {
            // |b| max_w from half the limit up to the limit itself (row 0), both signs; a of b's sign, so that
            // exp(x) a = b w_j at x_j = log(w_j) - 1.5 - u, in [-3.2, -1.1], where fp16 steps are 2^-10 or 2^-9.
            const double b =
                kSmallBiasLimit * excess / max_w * (i == 0 ? 1.0 : 1.0 - 0.5 * unit(rng)) * (i % 2 ? -1.0 : 1.0);
            const double a = b * std::exp(1.5 + unit(rng));
            GradRowCoefficients row{a, b, 0.0, -1, kRowCompute, kRowSmallBias};
            if (excess == 1.0) {
                EXPECT_EQ(GradRowFlags(b, max_w), kRowSmallBias) << "row " << i;
            }
            p.rows.push_back(row);
            for (int64_t j = 0; j < p.c; ++j) {
                const double x = std::log(b * p.weight[j] / a) + std::ldexp(2.0 * unit(rng) - 1.0, -8);
                StoreFromDouble(ACL_FLOAT16, p.in.data(), i * p.c + j, x);
                const double m = std::exp(ToDouble(ACL_FLOAT16, p.in.data(), i * p.c + j)) * a;
                near_cancellation += std::fabs(m - b * p.weight[j]) < std::ldexp(std::fabs(b * p.weight[j]), -10);
            }
        }
        // Lanes the guard would flag: about a quarter of the elements.
        EXPECT_GT(near_cancellation, p.n * p.c / 8);
        Poison(p.out);
        GradKernelArgs args = p.Args();
        kernel.run(args, GradTile{0, p.n, 0, p.c});
        const std::vector<uint8_t> ref = ReferenceOutput(p);
        const std::string what = std::string(kernel.name) + " |b| max|w| = " + std::to_string(excess) + " limit";
        if (excess == 1.0) {
            ExpectCorrectlyRounded(ExpectMatches(p, p.out.data(), p.c, ref, what), ACL_FLOAT16, what);
        } else {
            const Stats s = Compare(p, p.out.data(), p.c, ref.data(), p.c);
            EXPECT_GT(s.bad, 0) << what << ": every element within one ulp, max " << s.max_ulp;
        }
    }
}

// bf16 rows with weights screen their blocks for the cancellation guard with the segment's greatest |w_j| when the
// weights lie within a factor 8 of each other (PairWeights::screen_weight); the screen only sends blocks to the exact
// guard. Rows around the cancellation point exp(x) a = b w_j, weights in [0.5, 1.5] (screened), against the same rows
// with one more column of weight 100 (not screened): the first C columns' bits must be equal, within one ulp of the
// reference. Some lanes must be flagged by the guard, and some only by the screen.
TEST_P(GradKernelTest, GuardScreenGivesTheGuardsBits) {
    const GradKernelInfo &kernel = *GetParam();
    std::mt19937 rng(2718);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const int64_t n = 6, c = 4099;
    std::vector<float> weight(c);
    for (auto &w : weight) w = static_cast<float>(0.5 + unit(rng));
    const double max_w = *std::max_element(weight.begin(), weight.end());
    std::vector<GradRowCoefficients> rows;
    std::vector<double> x(n * c);
    int64_t guarded = 0, screened_only = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double b = (i % 2 ? -1.0 : 1.0) * 0x1p-14 * (1.0 + unit(rng));
        const double a = b * std::exp(9.0 + unit(rng));
        rows.push_back({a, b, 0.0, -1, kRowCompute, 0});
        for (int64_t j = 0; j < c; ++j) {
            // Within 2^-7 of the cancellation point in x: bf16 steps there are 2^-5 to 2^-4, so most rounded inputs
            // sit one or more steps away, and some land on it.
            const double want = std::log(b * weight[j] / a) + std::ldexp(2.0 * unit(rng) - 1.0, -7);
            uint8_t bits[2];
            StoreFromDouble(ACL_BF16, bits, 0, want);
            x[i * c + j] = ToDouble(ACL_BF16, bits, 0);
            const double gap = std::fabs(std::exp(x[i * c + j]) * a - b * weight[j]);
            const int guard = GuardExponent(ACL_BF16);
            guarded += gap < std::ldexp(std::fabs(b * weight[j]), guard);
            screened_only +=
                gap >= std::ldexp(std::fabs(b * weight[j]), guard) && gap < std::ldexp(std::fabs(b) * max_w, guard);
        }
    }
    EXPECT_GT(guarded, 10);
    EXPECT_GT(screened_only, 10);
    std::vector<uint8_t> outputs[2];
    for (int wide = 0; wide < 2; ++wide) {
        Problem p = DenseProblem(ACL_BF16, n, c + wide);
        p.weight = weight;
        if (wide) p.weight.push_back(100.0f);  // outside the screen's range
        p.rows = rows;
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t j = 0; j < p.c; ++j)
                StoreFromDouble(ACL_BF16, p.in.data(), i * p.c + j, j < c ? x[i * c + j] : -3.0);
        }
        Poison(p.out);
        GradKernelArgs args = p.Args();
        kernel.run(args, GradTile{0, p.n, 0, p.c});
        const std::string what = std::string(kernel.name) + (wide ? " not screened" : " screened");
        ExpectCorrectlyRounded(ExpectMatches(p, p.out.data(), p.c, ReferenceOutput(p), what), ACL_BF16, what);
        for (int64_t i = 0; i < n; ++i) {
            outputs[wide].insert(outputs[wide].end(), p.out.begin() + i * p.c * 2, p.out.begin() + (i * p.c + c) * 2);
        }
    }
    EXPECT_EQ(0, std::memcmp(outputs[0].data(), outputs[1].data(), outputs[0].size())) << kernel.name;
}

// Rows with a constant bias term (label smoothing without weights) whose exp(x) a and b cancel to within 2^-15 or less
// at an input x0 that both 16-bit types represent: the guard (one bound for the whole row) must flag those lanes and
// redo them in double, in the blocks of four vectors as on the pair and one-vector paths. A third of the inputs are
// x0, a third its neighbours, the rest spread over [-6, 0]. fp16 rows are not flagged kRowSmallBias (|b| is 2^3 to
// 2^4), so they are guarded too.
TEST_P(GradKernelTest, ConstantBiasGuardNearCancellation) {
    const GradKernelInfo &kernel = *GetParam();
    std::mt19937 rng(1618);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const int64_t n = 6, c = 2053;
    for (const aclDataType dtype : {ACL_BF16, ACL_FLOAT16}) {
        Problem p = DenseProblem(dtype, n, c);
        int64_t guarded = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double x0 = -2.0 - static_cast<double>(rng() % 64) / 64.0;  // a bf16 and an fp16 value
            // fp16 needs a large b: there an error of 2^-22 |b| must be many ulps of the cancelled value.
            const double scale = dtype == ACL_BF16 ? 0x1p-6 : 0x1p3;
            const double b = (i % 2 ? -1.0 : 1.0) * scale * (1.0 + unit(rng));
            const double cancel = std::ldexp(rng() % 2 ? 1.0 : -1.0, -15 - static_cast<int>(rng() % 4));
            const double a = b * std::exp(-x0) * (1.0 + cancel);
            p.rows.push_back({a, b, 0.0, -1, kRowCompute, 0});
            for (int64_t j = 0; j < c; ++j) {
                const double x = j % 3 == 0 ? x0 : j % 3 == 1 ? x0 + (rng() % 2 ? 1.0 : -1.0) / 64.0 : -6.0 * unit(rng);
                StoreFromDouble(dtype, p.in.data(), i * c + j, x);
                const double gap = std::fabs(std::exp(ToDouble(dtype, p.in.data(), i * c + j)) * a - b);
                guarded += gap < std::ldexp(std::fabs(b), GuardExponent(dtype));
            }
        }
        const std::string what = std::string(kernel.name) + (dtype == ACL_BF16 ? " bf16" : " fp16");
        EXPECT_GT(guarded, c) << what;
        Poison(p.out);
        GradKernelArgs args = p.Args();
        kernel.run(args, GradTile{0, p.n, 0, p.c});
        ExpectCorrectlyRounded(ExpectMatches(p, p.out.data(), p.c, ReferenceOutput(p), what), dtype, what);
    }
}

// FastInputLimit's edge, for every exponent of a and both 16-bit types: the limit is a negative input whose k (formed
// as the kernels form it, one fused multiply-add with 1.5 * 2^23) is at least -124 - e, and the next input of greater
// magnitude has a k below that (so the limit is the greatest such input, and every input between it and -0 has a k
// in between, k growing with x).
TEST(GradKernelWindow, FastInputLimitIsTheWindowsEdge) {
    const auto k_of = [](float x) { return std::fmaf(x, 1.44269504088896341f, 12582912.0f) - 12582912.0f; };
    for (const aclDataType dtype : {ACL_BF16, ACL_FLOAT16}) {
        const auto value = [&](uint16_t bits) { return dtype == ACL_BF16 ? Bf16ToFloat(bits) : HalfToFloat(bits); };
        for (int e = -124; e <= 125; ++e) {
            const auto bits = static_cast<uint16_t>(FastInputLimit(dtype, e));
            const std::string what = std::string(dtype == ACL_BF16 ? "bf16" : "fp16") + " e " + std::to_string(e);
            ASSERT_NE(0, bits & 0x8000) << what;
            EXPECT_GE(k_of(value(bits)), -124 - e) << what;
            EXPECT_LT(k_of(value(static_cast<uint16_t>(bits + 1))), -124 - e) << what;
            EXPECT_GE(k_of(-0.0f), -124 - e) << what;
        }
    }
}

// The prologue flags an fp16 row kRowSmallBias exactly when |b| max_j |w_j| <= kSmallBiasLimit, with the maximum over
// all C weights (here the largest sits in the tail after the prologue's blocks of sixteen), and never where a weight
// is infinite or NaN. Each case scales gradLoss so that |b| max|w| is just below or just above the limit. The flag is
// read by the fp16 kernels only: fp32 and bf16 rows never carry it (their prologue skips the maximum).
class RecordingContext final : public TaskContext {
public:
    void RecordError(int, const std::string &) override { ++errors; }
    int errors = 0;
};

TEST(GradPrologue, SmallBiasFlag) {
    const int64_t n = 5, c = 19;
    const double smoothing = 0.1;
    std::vector<int64_t> target = {0, 3, 18, 7, 11};
    for (const aclDataType dtype : {ACL_FLOAT16, ACL_FLOAT, ACL_BF16}) {
        for (const double where : {0.9, 1.1}) {  // |b| max|w| as a multiple of the limit
            for (const float odd_weight : {1.75f, INFINITY, NAN}) {
                std::vector<float> weight(c, 1.0f);
                weight[5] = -1.25f;          // negative weights count by magnitude
                weight[c - 1] = odd_weight;  // the largest, in the tail
                // Sum reduction: b = gradLoss * smoothing / C on every row.
                const float max_w = std::isfinite(odd_weight) ? odd_weight : 1.25f;
                const float grad_loss = static_cast<float>(where * kSmallBiasLimit * c / (smoothing * max_w));
                CrossEntropyGradProblem p;
                p.n = n;
                p.c = c;
                p.dtype = dtype;
                p.reduction = Reduction::kSum;
                p.label_smoothing = smoothing;
                const auto operand = [](void *data, int64_t elements, int64_t element_size) {
                    Operand o;
                    o.present = true;
                    o.data = data;
                    o.elements = elements;
                    o.stride0 = elements > 1 ? 1 : 0;
                    o.element_size = element_size;
                    return o;
                };
                float grad = grad_loss;
                uint16_t grad16 = dtype == ACL_FLOAT16 ? FloatToHalf(grad_loss) : FloatToBf16(grad_loss);
                p.inputs[kGradLoss] = dtype == ACL_FLOAT ? operand(&grad, 1, 4) : operand(&grad16, 1, 2);
                p.inputs[kTarget] = operand(target.data(), n, 8);
                p.inputs[kWeight] = operand(weight.data(), c, 4);
                std::vector<GradRowCoefficients> rows(n);
                RecordingContext context;
                ComputeGradRows(p, rows.data(), context);
                EXPECT_EQ(context.errors, 0);
                const bool want = dtype == ACL_FLOAT16 && where < 1.0 && std::isfinite(odd_weight);
                for (int64_t i = 0; i < n; ++i) {
                    EXPECT_EQ(rows[i].flags, want ? kRowSmallBias : 0)
                        << "dtype " << dtype << " row " << i << " b " << rows[i].b << " odd weight " << odd_weight
                        << " at " << where << " of the limit";
                }
            }
        }
    }
}

// out == logProb: the same bits as out of place.
TEST_P(GradKernelTest, InPlace) {
    const GradKernelInfo &kernel = *GetParam();
    for (aclDataType dtype : kDtypes) {
        for (int64_t c : {5, 67, 4099}) {
            Problem p = MakeProblem(dtype, 11, c, kSmoothedWeighted, 500 + c, 2, 3);
            const std::vector<uint8_t> ref = ReferenceOutput(p);
            Poison(p.out);
            GradKernelArgs args = p.Args();
            kernel.run(args, GradTile{0, p.n, 0, p.c});
            const std::vector<uint8_t> out_of_place = p.out;
            const int64_t stride = p.out_stride;
            p.in_place = true;
            args = p.Args();
            kernel.run(args, GradTile{0, p.n, 0, p.c});
            const size_t es = ElementSize(dtype);
            for (int64_t i = 0; i < p.n; ++i) {
                ASSERT_EQ(0, std::memcmp(p.in.data() + (p.in_offset + i * p.in_stride) * es,
                                         out_of_place.data() + (p.out_offset + i * stride) * es, c * es))
                    << kernel.name << " " << DtypeName(dtype) << " C=" << c << " row " << i;
            }
        }
    }
}

// The same problem with rows `pad` elements apart beyond C (in and out), the input copied row by row.
Problem WithPaddedRows(const Problem &p, int64_t pad) {
    Problem q = p;
    const size_t es = ElementSize(p.dtype);
    q.in_stride = q.out_stride = p.c + pad;
    q.in_offset = q.out_offset = 0;
    q.in.assign((p.n * q.in_stride + 8) * es, 0);
    q.out.assign((p.n * q.out_stride + 8) * es, 0);
    for (int64_t i = 0; i < p.n; ++i) {
        std::memcpy(q.in.data() + i * q.in_stride * es, p.in.data() + (p.in_offset + i * p.in_stride) * es, p.c * es);
    }
    return q;
}

// Rows of a few classes stored back to back run as flat runs of elements, vectors spanning rows (PackedRun), in
// chunks of rows; a chunk whose rows need different paths goes row by row. Against rows one element apart (the row
// path) bit for bit, and against the reference: C from 1 to 63 and 64 (past the packed limit), every variant, three
// chunks and more of rows, with ignored rows (MakeProblem), a row the double path takes, a row whose target was out
// of range (NaN), a row without a bias term among rows with one, fp16 rows with and without the small-bias flag,
// 16-bit lanes the cancellation guard flags, extreme inputs; the whole tile, two tiles split inside a chunk, and in
// place.
TEST_P(GradKernelTest, PackedRowsGiveRowBits) {
    const GradKernelInfo &kernel = *GetParam();
    uint32_t seed = 5100;
    for (aclDataType dtype : kDtypes) {
        const size_t es = ElementSize(dtype);
        for (int64_t c : {1, 2, 3, 7, 10, 16, 17, 33, 63, 64}) {
            for (Variant v : {kPlain, kWeighted, kSmoothedWeighted, kZloss, kSmoothed}) {
                const int64_t n = 3 * 1024 / c + 7;
                Problem p = MakeProblem(dtype, n, c, v, ++seed);
                const bool smoothed = v == kSmoothedWeighted || v == kSmoothed;
                // fp16 rows guarded (no small-bias flag) where the weights below make lanes cancel; the flagged rows
                // of kSmoothed skip the guard.
                if (v == kSmoothedWeighted) {
                    for (GradRowCoefficients &row : p.rows) row.flags = 0;
                }
                // The special rows: in the first chunk (and the rows after the last full one), which go row by row,
                // so that the chunks between them are flat.
                for (int64_t base : {int64_t{0}, n - 6}) {
                    p.rows[base + 1].a = 0x1p-130;  // the double path (RowNeedsDouble)
                    p.rows[base + 2] = GradRowCoefficients{NAN, NAN, 0.0, -1, kRowCompute, 0};
                    if (smoothed) p.rows[base + 4].b = 0.0;  // no bias term among rows with one
                    p.rows[base + 5].flags ^= kRowSmallBias;
                }
                // Rows of another variant alone in their chunks (no row there takes the double path): every third row
                // of a stretch in the middle.
                for (int64_t i = n / 3; i < n / 3 + 60 && i < n - 8; i += 3) {
                    if (smoothed) p.rows[i].b = 0.0;
                    p.rows[i + 1].flags ^= kRowSmallBias;
                }
                if (dtype != ACL_FLOAT && v == kSmoothedWeighted) {
                    // Lanes the guard flags: weights that make row r's terms cancel at column j (a few rows, each
                    // its own columns).
                    for (int64_t j = 0; j < c; ++j) {
                        const int64_t r = 8 + (j % 5) * 131 % (n - 8);
                        const double x = ToDouble(dtype, p.in.data() + p.in_offset * es, r * p.in_stride + j);
                        const double w = std::exp(x) * p.rows[r].a / p.rows[r].b;
                        if (p.rows[r].kind != kRowZero && std::isfinite(w) && w > 1e-3 && w < 1e3) {
                            p.weight[j] = static_cast<float>(w);
                        }
                    }
                }
                const double extremes[] = {-200.0, -100.0, -INFINITY, NAN, 100.0};
                for (int64_t k = 0; k < 10; ++k) {
                    const int64_t index = (k * 7919 + 3) % (n * c);
                    StoreFromDouble(dtype, p.in.data() + p.in_offset * es, index, extremes[k % 5]);
                }
                // An ignored row in a flat chunk whose inputs are not finite: still +0.
                int64_t ignored = n / 2;
                while (p.rows[ignored].kind != kRowZero) ++ignored;
                for (int64_t j = 0; j < c; ++j) {
                    StoreFromDouble(dtype, p.in.data() + p.in_offset * es, ignored * c + j, j % 2 ? NAN : INFINITY);
                }
                const std::string what = std::string(kernel.name) + " " + DtypeName(dtype) + " C=" + std::to_string(c) +
                                         " variant=" + std::to_string(v);
                const std::vector<uint8_t> ref = ReferenceOutput(p);
                Problem rows = WithPaddedRows(p, 1);
                Poison(rows.out);
                GradKernelArgs args = rows.Args();
                kernel.run(args, GradTile{0, n, 0, c});
                ExpectMatches(rows, rows.out.data(), rows.out_stride, ref, what + " row by row");
                const std::vector<uint8_t> input = p.in;
                const auto expect_row_bits = [&](const uint8_t *got, const std::string &how) {
                    int64_t mismatches = 0;
                    for (int64_t i = 0; i < n; ++i) {
                        for (int64_t j = 0; j < c; ++j) {
                            const uint32_t want = Bits(dtype, rows.out.data(), i * rows.out_stride + j);
                            const uint32_t bits = Bits(dtype, got, i * c + j);
                            mismatches += bits != want && !(IsNanBits(dtype, bits) && IsNanBits(dtype, want));
                        }
                    }
                    EXPECT_EQ(mismatches, 0) << what << " " << how;
                };
                for (int64_t split : {n, n / 2 + 1}) {
                    Poison(p.out);
                    args = p.Args();
                    kernel.run(args, GradTile{0, split, 0, c});
                    kernel.run(args, GradTile{split, n, 0, c});
                    expect_row_bits(static_cast<const uint8_t *>(args.out),
                                    "tiles split at row " + std::to_string(split));
                }
                p.in_place = true;
                args = p.Args();
                kernel.run(args, GradTile{0, n, 0, c});
                expect_row_bits(static_cast<const uint8_t *>(args.out), "in place");
                p.in = input;
                p.in_place = false;
            }
        }
    }
}
// Bitwise the same whatever the partition into tiles (the plan's threads) and whatever the ISA: every kernel with
// each of the thread counts, against the first kernel's bits with the first count.
void ExpectBitsAcrossKernels(std::initializer_list<int> thread_counts) {
    for (aclDataType dtype : kDtypes) {
        for (auto [n, c] : {std::pair<int64_t, int64_t>{1, 152064}, {3, 70001}, {300, 1000}, {4096, 10}}) {
            Problem p = MakeProblem(dtype, n, c, kSmoothedWeighted, 9000 + n);
            // A few extreme inputs, so that some vectors take the general path of the exp and others the fast
            // one, at different places for different vector widths.
            const double extremes[] = {-200.0, -100.0, -90.0, -INFINITY, NAN, 0.0, 100.0};
            for (int64_t k = 0; k < 64; ++k) {
                const int64_t index = (k * 7919) % (n * c);
                StoreFromDouble(dtype, p.in.data(), (index / c) * p.in_stride + index % c, extremes[k % 7]);
            }
            std::vector<uint8_t> first;
            std::string first_name;
            for (const GradKernelInfo *kernel : GradKernels()) {
                for (int threads : thread_counts) {
                    Poison(p.out);
                    GradKernelArgs args = p.Args();
                    GradPlan plan = MakeGradPlan(args, threads);
                    plan.kernel = kernel;
                    RunGradPlan(plan, args);
                    // On one thread, also an uneven hand-made split: rows and columns at odd places.
                    if (threads == 1) {
                        Poison(p.out);
                        kernel->run(args, GradTile{0, n / 2, 0, c / 3});
                        kernel->run(args, GradTile{0, n / 2, c / 3, c});
                        kernel->run(args, GradTile{n / 2, n, 0, c});
                    }
                    if (first.empty()) {
                        first = p.out;
                        first_name = kernel->name;
                        continue;
                    }
                    ASSERT_EQ(first.size(), p.out.size());
                    ASSERT_EQ(0, std::memcmp(first.data(), p.out.data(), first.size()))
                        << kernel->name << " with " << threads << " threads differs from " << first_name << " ("
                        << DtypeName(dtype) << " " << n << "x" << c << ")";
                }
            }
        }
    }
}

// One thread: the ISAs alone (the 64-bit Arm tests run here, under an emulator that runs one thread only).
TEST(GradKernelDeterminism, AcrossIsasOnOneThread) { ExpectBitsAcrossKernels({1}); }

TEST(GradKernelDeterminism, AcrossTilesThreadsAndIsas) { ExpectBitsAcrossKernels({1, 2, 3, 5, 8}); }

// The plan's ranges cover every element exactly once, balanced to one element, for any N, C and thread count.
TEST(GradPlanTest, TilesCoverOutputOnce) {
    for (auto [n, c] : {std::pair<int64_t, int64_t>{1, 152064}, {3, 7}, {7, 3}, {5, 1}, {1, 1}, {64, 1000}}) {
        for (int threads : {1, 2, 3, 4, 7, 16}) {
            GradPlan plan{GradKernels().back(), threads, 1, 1};
            std::vector<int> hits(n * c, 0);
            for (int k = 0; k < threads; ++k) {
                GradTile tiles[3];
                const int count = PlanTiles(plan, n, c, k, tiles);
                int64_t elements = 0;
                for (int t = 0; t < count; ++t) {
                    for (int64_t i = tiles[t].row_begin; i < tiles[t].row_end; ++i) {
                        for (int64_t j = tiles[t].col_begin; j < tiles[t].col_end; ++j) ++hits[i * c + j];
                    }
                    elements += (tiles[t].row_end - tiles[t].row_begin) * (tiles[t].col_end - tiles[t].col_begin);
                }
                EXPECT_LE(std::llabs(elements - n * c / threads), 1) << n << "x" << c << " k=" << k;
            }
            for (int h : hits) ASSERT_EQ(h, 1) << n << "x" << c << " threads " << threads;
        }
    }
}

// The registry holds only the SIMD kernels, every one of them takes every layout, and it honours the ISA cap; the
// reference kernel is reachable for tests only, and OPENACLNN_MAX_ISA=reference is no longer a value.
TEST(GradKernelRegistry, SelectionAndCap) {
    Problem p = MakeProblem(ACL_FLOAT, 4, 16, kPlain, 5);
    GradKernelArgs args = p.Args();
    ASSERT_FALSE(GradKernels().empty());
    EXPECT_EQ(&SelectGradKernel(args, kGradIsaBest), GradKernels().front());
    EXPECT_EQ(SelectGradKernel(args, kGradIsaScalar).isa, kGradIsaScalar);
    EXPECT_EQ(&SelectGradKernel(args, 0), GradKernels().back());  // below every level: still the portable one
    for (const GradKernelInfo *kernel : GradKernels()) EXPECT_STRNE(kernel->name, "reference");
    EXPECT_EQ(GradKernels().back()->isa, kGradIsaScalar);
    args.log_prob_col_stride = 2;
    args.out_col_stride = -3;
    args.weight_stride = 5;
    EXPECT_EQ(&SelectGradKernel(args, kGradIsaBest), GradKernels().front());
    EXPECT_STREQ(ReferenceGradKernelInfo().name, "reference");
    ASSERT_EQ(setenv("OPENACLNN_MAX_ISA", "sse4", 1), 0);
    EXPECT_EQ(GradIsaCapFromEnv(), kGradIsaSse4);
    ASSERT_EQ(setenv("OPENACLNN_MAX_ISA", "scalar", 1), 0);
    EXPECT_EQ(GradIsaCapFromEnv(), kGradIsaScalar);
    EXPECT_EQ(SelectGradKernel(p.Args()).isa, kGradIsaScalar);
    ASSERT_EQ(setenv("OPENACLNN_MAX_ISA", "reference", 1), 0);
    EXPECT_EQ(GradIsaCapFromEnv(), kGradIsaBest);  // unknown value: ignored (and logged)
    EXPECT_EQ(&SelectGradKernel(p.Args()), GradKernels().front());
    unsetenv("OPENACLNN_MAX_ISA");
}

// ---- layouts: any column strides give the contiguous layout's bits ---------------------------------------------

// A strided copy of p's logProb, out and weight: element (i, j) of a view at offset + i * row + j * col.
struct StridedViews {
    int64_t in_row = 0, in_col = 1, in_offset = 0;
    int64_t out_row = 0, out_col = 1, out_offset = 0;
    int64_t w_stride = 1;
    bool in_place = false;     // out is the logProb view itself
    bool weight_pairs = true;  // contiguous weights also de-interleaved (GradKernelArgs::weight_pairs)
};

// Runs kernel on p laid out as v (tiles from a plan of `threads`, or the whole output), and returns the output
// gathered back into contiguous rows of c; also checks that storage outside the out view is untouched.
std::vector<uint8_t> RunStrided(const GradKernelInfo &kernel, const Problem &p, const StridedViews &v, int threads) {
    const size_t es = ElementSize(p.dtype);
    auto span = [&](int64_t offset, int64_t row, int64_t col) {
        int64_t lo = offset, hi = offset;
        for (int64_t corner : {row * (p.n - 1), col * (p.c - 1), row * (p.n - 1) + col * (p.c - 1)}) {
            lo = std::min(lo, offset + corner);
            hi = std::max(hi, offset + corner);
        }
        EXPECT_GE(lo, 0);
        return hi + 1;
    };
    std::vector<uint8_t> in(span(v.in_offset, v.in_row, v.in_col) * es + 8);
    std::vector<uint8_t> out(span(v.out_offset, v.out_row, v.out_col) * es + 8);
    Poison(in);
    Poison(out);
    const std::vector<uint8_t> out_poison = out;
    const uint8_t *src = p.in.data() + p.in_offset * ElementSize(p.dtype);
    for (int64_t i = 0; i < p.n; ++i) {
        for (int64_t j = 0; j < p.c; ++j) {
            std::memcpy(&in[(v.in_offset + i * v.in_row + j * v.in_col) * es], src + (i * p.in_stride + j) * es, es);
        }
    }
    std::vector<float> weight;
    if (!p.weight.empty()) {
        weight.assign(p.c * v.w_stride, std::nanf(""));
        for (int64_t j = 0; j < p.c; ++j) weight[j * v.w_stride] = p.weight[j];
    }
    GradKernelArgs args{};
    args.n = p.n;
    args.c = p.c;
    args.dtype = p.dtype;
    args.log_prob = in.data() + v.in_offset * es;
    args.log_prob_row_stride = v.in_row;
    args.log_prob_col_stride = v.in_col;
    args.out = v.in_place ? in.data() + v.in_offset * es : out.data() + v.out_offset * es;
    args.out_row_stride = v.in_place ? v.in_row : v.out_row;
    args.out_col_stride = v.in_place ? v.in_col : v.out_col;
    args.weight = weight.empty() ? nullptr : weight.data();
    args.weight_stride = v.w_stride;
    std::vector<float> weight_pairs;
    if (!weight.empty() && v.weight_pairs && v.w_stride == 1) {
        weight_pairs.assign(WeightPairsSize(p.c), std::nanf(""));
        SplitWeightPairs(weight.data(), p.c, weight_pairs.data());
        args.weight_pairs = weight_pairs.data();
    }
    args.rows = p.rows.data();
    EXPECT_TRUE(kernel.supports(args));
    GradPlan plan = MakeGradPlan(args, threads);
    plan.kernel = &kernel;
    RunGradPlan(plan, args);
    std::vector<uint8_t> result(p.n * p.c * es + 8, 0);
    const uint8_t *res = static_cast<const uint8_t *>(args.out);
    std::vector<char> in_view(v.in_place ? 0 : out.size() / es, 0);
    for (int64_t i = 0; i < p.n; ++i) {
        for (int64_t j = 0; j < p.c; ++j) {
            const int64_t index = i * args.out_row_stride + j * args.out_col_stride;
            std::memcpy(&result[(i * p.c + j) * es], res + index * es, es);
            if (!v.in_place) in_view[v.out_offset + index] = 1;
        }
    }
    for (size_t k = 0; k < in_view.size(); ++k) {
        if (!in_view[k] && std::memcmp(&out[k * es], &out_poison[k * es], es) != 0) {
            ADD_FAILURE() << kernel.name << ": storage element " << k << " outside the out view was written";
            break;
        }
    }
    return result;
}

TEST_P(GradKernelTest, EveryLayoutGivesTheContiguousBits) {
    const GradKernelInfo &kernel = *GetParam();
    uint32_t seed = 7000;
    for (aclDataType dtype : kDtypes) {
        for (int64_t c : {1, 2, 5, 17, 67, 511, 512, 513, 1031, 4099}) {
            for (Variant variant : {kPlain, kWeighted, kSmoothedWeighted, kZloss, kSmoothed}) {
                const int64_t n = c > 1000 ? 5 : 13;
                Problem p = MakeProblem(dtype, n, c, variant, ++seed);
                // Extreme inputs too, so that vectors take the general exp path at layout-dependent places.
                const double extremes[] = {-200.0, -100.0, -90.0, -INFINITY, NAN, 0.0, 100.0};
                for (int64_t k = 0; k < 9; ++k) {
                    const int64_t index = (k * 7919 + seed) % (n * c);
                    StoreFromDouble(dtype, p.in.data(), (index / c) * p.in_stride + index % c, extremes[k % 7]);
                }
                if (!p.weight.empty() && c > 3) p.weight[c / 2] = -p.weight[c / 2];  // a negative weight
                const std::string what = std::string(kernel.name) + " " + DtypeName(dtype) + " " +
                                         std::to_string(n) + "x" + std::to_string(c) + " variant " +
                                         std::to_string(variant) + " seed " + std::to_string(seed);
                const StridedViews contiguous{c, 1, 0, c, 1, 0, 1, false};
                const std::vector<uint8_t> want = RunStrided(kernel, p, contiguous, 1);
                ExpectMatches(p, want.data(), c, ReferenceOutput(p), what + " contiguous");
                const StridedViews layouts[] = {
                    {2 * c + 3, 2, 5, c + 1, 1, 2, 1, false},  // logProb column stride 2
                    {c, 1, 0, 3 * c, 3, 1, 3, false},          // out column stride 3, weight stride 3
                    {1, n, 0, 1, n, 0, 2, false},              // both transposed (column-major)
                    {1, n, 0, 1, n, 0, 1, true},               // transposed, in place
                    {2 * c + 1, 2, 3, 0, 0, 0, 1, true},       // column stride 2, in place
                    {c, 1, 0, -1, n, n - 1, 1, false},         // out column-major, rows reversed (stride -1)
                    {c, 1, 0, c, 1, 0, 4, false},              // only the weight strided
                    {c, 1, 0, c, 1, 0, 1, false},              // contiguous (3 threads: tiles at odd columns)
                    {c, 1, 0, c, 1, 0, 1, false, false},       // contiguous, weights not de-interleaved
                };
                int k = 0;
                for (const StridedViews &v : layouts) {
                    ++k;
                    for (int threads : {1, 3}) {
                        const std::vector<uint8_t> got = RunStrided(kernel, p, v, threads);
                        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), n * c * ElementSize(dtype)))
                            << what << ": layout " << k << " with " << threads << " threads differs from contiguous";
                    }
                }
            }
        }
    }
}

}  // namespace
}  // namespace openaclnn::cross_entropy
