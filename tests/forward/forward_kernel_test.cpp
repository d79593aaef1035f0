// The forward's kernels called directly through the registry (AvailableLossKernels): every Highway target this CPU
// can run (hwy:AVX3, hwy:AVX2, hwy:SSE4, hwy:SCALAR, ...) and the double-precision reference kernel.
//
//  * Bitwise: every Highway kernel gives the same bits as every other (lse, the smoothing sum, logProb) for every
//    dtype, row length (around the 16-lane groups and 128-element blocks, and long rows), weight and smoothing,
//    plain and streaming stores, misaligned rows and in place; and through the C ABI, every OPENACLNN_MAX_ISA cap
//    gives the same bits in every output (DESIGN.md section 4).
//  * Every layout gives the bits of the contiguous one: column-strided and transposed inputs and logProb, strided
//    weights and in place on a transposed view, for every kernel and through the C ABI.
//  * Special values (NaN, +inf, -inf anywhere in a row, in a block or in the tail): a NaN or +inf makes lse and
//    the whole logProb row NaN; a row of all -inf gives NaN (as PyTorch); some -inf entries give logProb -inf there
//    and the exact finite result elsewhere. For every kernel, the reference included.
//  * Every kernel against a float64 computation, tolerance in fp32 ulps of the terms.
// Outputs are poisoned before every run, so a kernel that skips an element fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/float_convert.h"
#include "float_formats.h"
#include "forward_harness.h"
#include "kernels/loss_kernel.h"

namespace openaclnn::cross_entropy_loss {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

size_t ElementSize(aclDataType dtype) { return dtype == ACL_FLOAT ? 4 : 2; }
const char *DtypeName(aclDataType dtype) {
    return dtype == ACL_FLOAT ? "fp32" : dtype == ACL_FLOAT16 ? "fp16" : "bf16";
}

double Load(aclDataType dtype, const std::vector<uint8_t> &buf, int64_t index) {
    if (dtype == ACL_FLOAT) {
        float v;
        std::memcpy(&v, buf.data() + 4 * index, 4);
        return v;
    }
    uint16_t h;
    std::memcpy(&h, buf.data() + 2 * index, 2);
    return dtype == ACL_FLOAT16 ? HalfToFloat(h) : Bf16ToFloat(h);
}

void Store(aclDataType dtype, std::vector<uint8_t> &buf, int64_t index, double v) {
    if (dtype == ACL_FLOAT) {
        const float f = static_cast<float>(v);
        std::memcpy(buf.data() + 4 * index, &f, 4);
    } else {
        const uint16_t h = dtype == ACL_FLOAT16 ? DoubleToHalf(v) : DoubleToBf16(v);
        std::memcpy(buf.data() + 2 * index, &h, 2);
    }
}

// NaN equals NaN (payloads aside); otherwise the bits must match (so +0 != -0).
bool SameBits(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    uint64_t ua, ub;
    std::memcpy(&ua, &a, 8);
    std::memcpy(&ub, &b, 8);
    return ua == ub;
}

// A problem in raw storage: input rows with a row stride (misalignment by an element offset), logProb separate or
// in place, weights, the row table.
struct KernelProblem {
    aclDataType dtype = ACL_FLOAT;
    int64_t n = 0, c = 0;
    int64_t stride = 0, offset = 0;
    std::vector<double> logits;  // n * c, representable in dtype
    std::vector<float> weight;   // c or empty
    bool smoothing = false;
    bool in_place = false;
    bool stream = false;
    int split_threads = 0;  // > 0: every row shared by this many threads (split_row), else the rows run whole
    bool late_threads = false;  // with split_threads: all but the first start a few milliseconds late

    struct Result {
        std::vector<double> lse, weighted, log_prob;
        bool all_written = true;
    };

    Result Run(const LossKernelInfo &kernel) const {
        const size_t elem = ElementSize(dtype);
        const int64_t storage = offset + n * stride + 64;
        std::vector<uint8_t> in(static_cast<size_t>(storage) * elem, 0);
        std::vector<uint8_t> out(static_cast<size_t>(storage) * elem, 0xa5);  // poison: NaN-like patterns
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t j = 0; j < c; ++j) Store(dtype, in, offset + i * stride + j, logits[i * c + j]);
        }
        std::vector<uint8_t> &lp = in_place ? in : out;
        if (in_place) {
            // The kernel must read every element before writing it: poison is not possible here.
        }
        std::vector<LossRowStats> rows(static_cast<size_t>(n));
        for (auto &r : rows) r = LossRowStats{kNaN, 12345.0, 0.0, 0.0, kLossRowCounted, 0};
        LossKernelArgs args{};
        args.n = n;
        args.c = c;
        args.dtype = dtype;
        args.input = in.data() + offset * elem;
        args.input_row_stride = stride;
        args.input_col_stride = 1;
        args.log_prob = lp.data() + offset * elem;
        args.log_prob_row_stride = stride;
        args.log_prob_col_stride = 1;
        args.smoothing = smoothing;
        args.weight = weight.empty() ? nullptr : weight.data();
        args.weight_stride = 1;
        args.rows = rows.data();
        args.stream_stores = stream;
        if (split_threads > 0) {
            LossSpinBarrier between_rows(split_threads);
            LossSplitScratch scratch;
            std::vector<std::thread> threads;
            for (int t = 0; t < split_threads; ++t) {
                threads.emplace_back([&, t] {
                    // Threads that start late (as a thread woken late would) find the first row's pieces taken.
                    if (late_threads && t > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2 * t));
                    for (int64_t i = 0; i < n; ++i) {
                        kernel.split_row(args, i, scratch);
                        if (i + 1 < n) between_rows.Wait([&] { scratch.Reset(); });
                    }
                });
            }
            for (std::thread &thread : threads) thread.join();
        } else {
            kernel.run(args, 0, n);
        }
        Result r;
        for (int64_t i = 0; i < n; ++i) {
            r.lse.push_back(rows[i].lse);
            r.weighted.push_back(rows[i].weighted_log_prob_sum);
            for (int64_t j = 0; j < c; ++j) {
                const int64_t at = offset + i * stride + j;
                if (!in_place) {
                    bool poison = true;
                    for (size_t b = 0; b < elem; ++b) poison = poison && lp[static_cast<size_t>(at) * elem + b] == 0xa5;
                    if (poison) r.all_written = false;
                }
                r.log_prob.push_back(Load(dtype, lp, at));
            }
        }
        return r;
    }

    std::string Describe() const {
        return std::string(DtypeName(dtype)) + " N=" + std::to_string(n) + " C=" + std::to_string(c) +
               " split_threads=" + std::to_string(split_threads) + (late_threads ? " (late)" : "") +
               " stride=" + std::to_string(stride) + " offset=" + std::to_string(offset) +
               " weight=" + (weight.empty() ? "no" : "yes") + " smoothing=" + (smoothing ? "yes" : "no") +
               " in_place=" + (in_place ? "yes" : "no") + " stream=" + (stream ? "yes" : "no");
    }
};

std::vector<const LossKernelInfo *> Kernels() {
    const LossKernelInfo *list[16];
    const int count = AvailableLossKernels(list, 16);
    return std::vector<const LossKernelInfo *>(list, list + count);
}

std::vector<const LossKernelInfo *> HighwayKernels() {
    std::vector<const LossKernelInfo *> all = Kernels();
    std::vector<const LossKernelInfo *> hwy;
    for (const LossKernelInfo *k : all) {
        if (std::strncmp(k->name, "hwy:", 4) == 0) hwy.push_back(k);
    }
    return hwy;
}

KernelProblem RandomProblem(std::mt19937_64 &rng, aclDataType dtype, int64_t n, int64_t c) {
    KernelProblem p;
    p.dtype = dtype;
    p.n = n;
    p.c = c;
    p.offset = static_cast<int64_t>(rng() % 7);
    p.stride = c + static_cast<int64_t>(rng() % 3) * 5;
    std::normal_distribution<double> normal(0.0, 1.0);
    const openaclnn::test::FloatFormat format = openaclnn::test::FormatOf(dtype);
    for (int64_t i = 0; i < n; ++i) {
        const double spread = std::vector<double>{0.1, 1.0, 3.0, 8.0}[rng() % 4];
        const double shift = std::uniform_real_distribution<double>(-30.0, 30.0)(rng);
        for (int64_t j = 0; j < c; ++j) {
            p.logits.push_back(openaclnn::test::RoundToFormat(shift + spread * normal(rng), format));
        }
    }
    p.smoothing = rng() % 2 == 0;
    if (rng() % 2 == 0) {
        for (int64_t j = 0; j < c; ++j) p.weight.push_back(static_cast<float>(0.2 + 1.8 * (rng() % 1000) / 1000.0));
    }
    p.in_place = rng() % 4 == 0;
    p.stream = dtype == ACL_FLOAT && rng() % 2 == 0;
    return p;
}

// ---- bitwise identity across the Highway targets ------------------------------------------------------------------

TEST(ForwardKernels, HighwayTargetsListed) {
    const auto hwy = HighwayKernels();
    ASSERT_GE(hwy.size(), 1u);
    std::string names;
    for (const LossKernelInfo *k : hwy) names += std::string(k->name) + " ";
    std::printf("Highway forward kernels on this CPU: %s\n", names.c_str());
    // The scalar level exists on every machine: OPENACLNN_MAX_ISA=scalar runs the same code one lane at a time.
    EXPECT_EQ(hwy.back()->isa_rank, 0) << names;
}

void ExpectSameBits(const KernelProblem &p, const char *name_a, const KernelProblem::Result &a, const char *name_b,
                    const KernelProblem::Result &b) {
    int failures = 0;
    auto compare = [&](const char *what, const std::vector<double> &x, const std::vector<double> &y) {
        ASSERT_EQ(x.size(), y.size());
        for (size_t k = 0; k < x.size(); ++k) {
            if (!SameBits(x[k], y[k]) && failures++ < 5) {
                ADD_FAILURE() << what << "[" << k << "]: " << name_a << " " << x[k] << " vs " << name_b << " "
                              << y[k] << " (diff " << x[k] - y[k] << ")\n" << p.Describe();
            }
        }
    };
    compare("lse", a.lse, b.lse);
    compare("logProb", a.log_prob, b.log_prob);
    if (p.smoothing) compare("weighted_log_prob_sum", a.weighted, b.weighted);
}

TEST(ForwardKernels, BitwiseIdenticalAcrossTargets) {
    const auto hwy = HighwayKernels();
    const std::vector<int64_t> lengths = {1,   2,   3,   7,   15,  16,  17,  31,  32,  33,  63,  64,  65,  127, 128,
                                          129, 143, 144, 145, 255, 256, 257, 300, 1000, 4099, 32000, 131073};
    for (const aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
        const uint64_t seed = 2024 + static_cast<uint64_t>(dtype);
        std::mt19937_64 rng(seed);
        for (const int64_t c : lengths) {
            const int64_t n = c > 10000 ? 2 : 3;
            const KernelProblem p = RandomProblem(rng, dtype, n, c);
            const KernelProblem::Result first = p.Run(*hwy[0]);
            EXPECT_TRUE(first.all_written) << hwy[0]->name << " " << p.Describe();
            for (size_t k = 1; k < hwy.size(); ++k) {
                const KernelProblem::Result other = p.Run(*hwy[k]);
                EXPECT_TRUE(other.all_written) << hwy[k]->name << " " << p.Describe();
                ExpectSameBits(p, hwy[0]->name, first, hwy[k]->name, other);
            }
            if (HasFailure()) {
                ADD_FAILURE() << "seed " << seed;
                return;
            }
        }
    }
}

// Rows shared by threads (split_row, for fewer rows than threads) give the bits of the same rows run whole, for every
// Highway kernel: lengths around the piece boundaries (LossPieceColumns: 16384 columns, and wider pieces past 64 of
// them), more threads than pieces, threads that start late (the others take every piece of the first row),
// smoothing and weights, in place and streaming stores (RandomProblem draws them), and rows with a NaN, a +inf or
// all -inf in a later piece.
TEST(ForwardKernels, RowsSharedByThreadsGiveWholeRowBits) {
    EXPECT_EQ(LossPieceColumns(1), 16384);
    EXPECT_EQ(LossPieceColumns(64 * 16384), 16384);
    EXPECT_EQ(LossPieceColumns(64 * 16384 + 1), 16384 + 2048);
    EXPECT_EQ(LossPieceCount(16385), 2);
    const auto hwy = HighwayKernels();
    struct Shape {
        aclDataType dtype;
        int64_t n, c;
    };
    const Shape shapes[] = {{ACL_FLOAT, 6, 16384},     {ACL_FLOAT, 6, 16385}, {ACL_FLOAT16, 6, 20000},
                            {ACL_BF16, 6, 32768 + 17}, {ACL_FLOAT, 6, 40000}, {ACL_BF16, 2, 152064},
                            {ACL_FLOAT, 1, 64 * 16384 + 2049}};
    const uint64_t seed = 31337;
    std::mt19937_64 rng(seed);
    for (const Shape &shape : shapes) {
        KernelProblem p = RandomProblem(rng, shape.dtype, shape.n, shape.c);
        // Rows whose double lane sums round, so that adding the pieces in another order or grouping shows in lse:
        // logits spread over 70 (terms from 1 down to e^-70), and in the last row one 0 among values in [-60, -20],
        // so lse = log(1 + d) with d about C e^-20: its ulp is far below that of the lane sum holding the 1.
        std::uniform_real_distribution<double> wide(-60.0, 10.0), low(-60.0, -20.0);
        const openaclnn::test::FloatFormat format = openaclnn::test::FormatOf(shape.dtype);
        for (int64_t i = 0; i < shape.n; ++i) {
            if (i >= 1 && i <= 3 && i != shape.n - 1) continue;
            for (int64_t j = 0; j < shape.c; ++j) {
                const double v = i == shape.n - 1 ? (j == shape.c / 2 ? 0.0 : low(rng)) : wide(rng);
                p.logits[i * shape.c + j] = openaclnn::test::RoundToFormat(v, format);
            }
        }
        if (shape.n >= 4) {
            p.logits[1 * shape.c + shape.c - 3] = kNaN;  // a NaN in the last piece
            p.logits[2 * shape.c + std::min<int64_t>(16384 + 5, shape.c - 1)] = kInf;  // +inf in the last piece
            for (int64_t j = 0; j < shape.c; ++j) p.logits[3 * shape.c + j] = -kInf;  // all -inf
        }
        for (const LossKernelInfo *kernel : hwy) {
            if (shape.c > 1000000 && kernel->isa_rank < 2) continue;  // a million-column row on one lane: slow
            p.split_threads = 0;
            const KernelProblem::Result whole = p.Run(*kernel);
            ASSERT_TRUE(whole.all_written) << kernel->name << " " << p.Describe();
            for (const int threads : {2, 3, 5, -2}) {
                p.split_threads = std::abs(threads);
                p.late_threads = threads < 0;
                const KernelProblem::Result shared = p.Run(*kernel);
                EXPECT_TRUE(shared.all_written) << kernel->name << " " << p.Describe();
                const std::string name = std::string(kernel->name) + " shared by " + std::to_string(threads) +
                                         (p.late_threads ? " (late)" : "");
                ExpectSameBits(p, kernel->name, whole, name.c_str(), shared);
                if (HasFailure()) {
                    ADD_FAILURE() << "seed " << seed;
                    return;
                }
            }
            if (shape.n >= 4) {
                EXPECT_TRUE(std::isnan(whole.lse[1]) && std::isnan(whole.lse[2]) && std::isnan(whole.lse[3]))
                    << p.Describe();
                EXPECT_TRUE(std::isfinite(whole.lse[0])) << p.Describe();
            }
        }
    }
}

// Through the C ABI: every OPENACLNN_MAX_ISA cap gives the same bits in loss, zloss, logProb and lse.
TEST(ForwardKernels, BitwiseIdenticalAcrossIsaCaps) {
    using openaclnn::test::ForwardCase;
    using openaclnn::test::ForwardOutcome;
    const char *old = std::getenv("OPENACLNN_MAX_ISA");
    const std::string saved = old ? old : "";
    const std::vector<std::string> caps = {"avx512", "avx2", "sse4", "scalar", "reference"};
    for (const aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
        for (const auto &[n, c] : std::vector<std::pair<int64_t, int64_t>>{{5, 17}, {4, 130}, {3, 1000}, {2, 32000}}) {
            const uint64_t seed = 99 + static_cast<uint64_t>(c) + 7 * static_cast<uint64_t>(dtype);
            ForwardCase fc = openaclnn::test::RandomForwardCase(seed, dtype, n, c);
            // Contiguous views (strided ones give the same bits: StridedViewsGiveContiguousBitsThroughTheApi).
            fc.input_layout = openaclnn::test::ContiguousLayout({n, c});
            fc.log_prob_layout = openaclnn::test::ContiguousLayout({n, c});
            fc.label_smoothing = 0.1;
            fc.zloss_scale = 1e-3;
            fc.return_zloss = true;
            fc.lse_empty = fc.zloss_empty = false;
            std::vector<ForwardOutcome> outcomes;
            for (const std::string &cap : caps) {
                setenv("OPENACLNN_MAX_ISA", cap.c_str(), 1);
                outcomes.push_back(openaclnn::test::RunForward(fc, openaclnn::test::TestStream()));
                ASSERT_EQ(outcomes.back().sync, ACL_SUCCESS) << outcomes.back().sync_message;
            }
            for (size_t k = 1; k < outcomes.size(); ++k) {
                const auto same = [&](const char *what, const std::vector<double> &a, const std::vector<double> &b) {
                    ASSERT_EQ(a.size(), b.size());
                    for (size_t e = 0; e < a.size(); ++e) {
                        ASSERT_TRUE(SameBits(a[e], b[e]))
                            << what << "[" << e << "]: " << caps[0] << " " << a[e] << " vs " << caps[k] << " "
                            << b[e] << "\n" << fc.Describe();
                    }
                };
                same("loss", outcomes[0].loss, outcomes[k].loss);
                same("zloss", outcomes[0].zloss, outcomes[k].zloss);
                same("lse", outcomes[0].lse, outcomes[k].lse);
                same("logProb", outcomes[0].log_prob, outcomes[k].log_prob);
            }
        }
    }
    saved.empty() && !old ? unsetenv("OPENACLNN_MAX_ISA") : setenv("OPENACLNN_MAX_ISA", saved.c_str(), 1);
}

// ---- strided layouts give the contiguous bits ----------------------------------------------------------------------

// p's problem with input element (i, j) at i * in_rs + j * in_cs, logProb at i * out_rs + j * out_cs (or in place on
// the input), weight j at j * w_stride. Outputs poisoned as in KernelProblem::Run.
KernelProblem::Result RunStrided(const KernelProblem &p, const LossKernelInfo &kernel, int64_t in_rs, int64_t in_cs,
                                 int64_t out_rs, int64_t out_cs, int64_t w_stride, bool in_place) {
    const size_t elem = ElementSize(p.dtype);
    const auto span = [&](int64_t rs, int64_t cs) { return (p.n - 1) * rs + (p.c - 1) * cs + 1; };
    std::vector<uint8_t> in(static_cast<size_t>(span(in_rs, in_cs)) * elem, 0);
    std::vector<uint8_t> out(static_cast<size_t>(span(out_rs, out_cs)) * elem, 0xa5);
    for (int64_t i = 0; i < p.n; ++i) {
        for (int64_t j = 0; j < p.c; ++j) Store(p.dtype, in, i * in_rs + j * in_cs, p.logits[i * p.c + j]);
    }
    std::vector<float> weight;
    for (size_t j = 0; j < p.weight.size(); ++j) {
        for (int64_t k = 0; k < w_stride; ++k) weight.push_back(k == 0 ? p.weight[j] : std::nanf(""));
    }
    std::vector<LossRowStats> rows(static_cast<size_t>(p.n));
    for (auto &r : rows) r = LossRowStats{kNaN, 12345.0, 0.0, 0.0, kLossRowCounted, 0};
    LossKernelArgs args{};
    args.n = p.n;
    args.c = p.c;
    args.dtype = p.dtype;
    args.input = in.data();
    args.input_row_stride = in_rs;
    args.input_col_stride = in_cs;
    args.log_prob = in_place ? in.data() : out.data();
    args.log_prob_row_stride = in_place ? in_rs : out_rs;
    args.log_prob_col_stride = in_place ? in_cs : out_cs;
    args.smoothing = p.smoothing;
    args.weight = weight.empty() ? nullptr : weight.data();
    args.weight_stride = w_stride;
    args.rows = rows.data();
    args.stream_stores = false;
    kernel.run(args, 0, p.n);
    KernelProblem::Result r;
    const std::vector<uint8_t> &lp = in_place ? in : out;
    const int64_t rs = in_place ? in_rs : out_rs, cs = in_place ? in_cs : out_cs;
    for (int64_t i = 0; i < p.n; ++i) {
        r.lse.push_back(rows[i].lse);
        r.weighted.push_back(rows[i].weighted_log_prob_sum);
        for (int64_t j = 0; j < p.c; ++j) {
            const int64_t at = i * rs + j * cs;
            bool poison = !in_place;
            for (size_t b = 0; b < elem && poison; ++b) poison = lp[static_cast<size_t>(at) * elem + b] == 0xa5;
            if (poison) r.all_written = false;
            r.log_prob.push_back(Load(p.dtype, lp, at));
        }
    }
    return r;
}

TEST(ForwardKernels, StridedLayoutsGiveContiguousBits) {
    const auto hwy = HighwayKernels();
    // Around the 16-lane groups, the 128-element blocks and the 2048-element gather chunks.
    const std::vector<int64_t> lengths = {1, 2, 17, 130, 2047, 2048, 2049, 4099, 5000};
    for (const aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
        const uint64_t seed = 77 + static_cast<uint64_t>(dtype);
        std::mt19937_64 rng(seed);
        for (const int64_t c : lengths) {
            KernelProblem p = RandomProblem(rng, dtype, 3, c);
            p.in_place = false;
            p.stream = false;
            if (c > 2) p.logits[1 * c + c / 2] = kNaN;  // one NaN row among finite ones
            const KernelProblem::Result want = p.Run(*hwy[0]);
            ASSERT_TRUE(want.all_written) << p.Describe();
            const int64_t n = p.n;
            struct Variant {
                const char *what;
                int64_t in_rs, in_cs, out_rs, out_cs, w_stride;
                bool in_place;
            };
            const Variant variants[] = {
                {"transposed input and logProb", 1, n, 1, n, 1, false},
                {"transposed input, column stride 2 logProb", 1, n, 2 * c + 1, 2, 1, false},
                {"contiguous input and logProb, weight stride 3", c, 1, c, 1, 3, false},
                {"column stride 3 input, transposed logProb, weight stride 2", 3 * c, 3, 1, n, 2, false},
                {"in place on a transposed view", 1, n, 1, n, 1, true},
            };
            for (const LossKernelInfo *kernel : hwy) {
                for (const Variant &v : variants) {
                    const KernelProblem::Result got =
                        RunStrided(p, *kernel, v.in_rs, v.in_cs, v.out_rs, v.out_cs, v.w_stride, v.in_place);
                    EXPECT_TRUE(got.all_written) << kernel->name << " " << v.what << " " << p.Describe();
                    const std::string name = std::string(kernel->name) + " " + v.what;
                    ExpectSameBits(p, "contiguous", want, name.c_str(), got);
                    if (HasFailure()) {
                        ADD_FAILURE() << "seed " << seed;
                        return;
                    }
                }
            }
        }
    }
}

// Through the C ABI, every ISA cap: transposed and column-strided views (and in place on a transposed input) give
// the bits of the contiguous call in every output.
TEST(ForwardKernels, StridedViewsGiveContiguousBitsThroughTheApi) {
    using openaclnn::test::ForwardCase;
    using openaclnn::test::ForwardOutcome;
    const char *old = std::getenv("OPENACLNN_MAX_ISA");
    const std::string saved = old ? old : "";
    for (const std::string cap : {"avx512", "scalar"}) {
        setenv("OPENACLNN_MAX_ISA", cap.c_str(), 1);
        for (const aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
            for (const auto &[n, c] : std::vector<std::pair<int64_t, int64_t>>{{5, 17}, {3, 300}, {2, 2049}}) {
                const uint64_t seed = 313 + static_cast<uint64_t>(c) + 5 * static_cast<uint64_t>(dtype);
                ForwardCase fc = openaclnn::test::RandomForwardCase(seed, dtype, n, c);
                fc.input_layout = openaclnn::test::ContiguousLayout({n, c});
                fc.log_prob_layout = openaclnn::test::ContiguousLayout({n, c});
                fc.placement = openaclnn::test::LogProbPlacement::kSeparate;
                fc.label_smoothing = 0.1;
                fc.zloss_scale = 1e-3;
                fc.return_zloss = true;
                fc.lse_empty = fc.zloss_empty = false;
                const ForwardOutcome want = openaclnn::test::RunForward(fc, openaclnn::test::TestStream());
                ASSERT_EQ(want.sync, ACL_SUCCESS) << want.sync_message;
                for (int variant = 0; variant < 3; ++variant) {
                    ForwardCase strided = fc;
                    strided.input_layout = openaclnn::test::TransposedLayout(n, c);
                    if (variant == 0) strided.log_prob_layout = openaclnn::test::TransposedLayout(n, c);
                    if (variant == 1) {
                        strided.log_prob_layout = openaclnn::test::StridedLayout({n, c}, {1, n + 2}, 1);
                    }
                    if (variant == 2) strided.placement = openaclnn::test::LogProbPlacement::kInPlace;
                    const ForwardOutcome got = openaclnn::test::RunForward(strided, openaclnn::test::TestStream());
                    ASSERT_EQ(got.sync, ACL_SUCCESS) << got.sync_message;
                    EXPECT_TRUE(got.all_written) << got.unwritten << "\n" << strided.Describe();
                    const auto same = [&](const char *what, const std::vector<double> &a,
                                          const std::vector<double> &b) {
                        ASSERT_EQ(a.size(), b.size()) << what;
                        for (size_t e = 0; e < a.size(); ++e) {
                            ASSERT_TRUE(SameBits(a[e], b[e]))
                                << cap << " " << what << "[" << e << "]: contiguous " << a[e] << " vs strided "
                                << b[e] << "\n" << strided.Describe();
                        }
                    };
                    same("loss", want.loss, got.loss);
                    same("zloss", want.zloss, got.zloss);
                    same("lse", want.lse, got.lse);
                    same("logProb", want.log_prob, got.log_prob);
                }
            }
        }
    }
    saved.empty() && !old ? unsetenv("OPENACLNN_MAX_ISA") : setenv("OPENACLNN_MAX_ISA", saved.c_str(), 1);
}

// ---- every kernel against float64 ---------------------------------------------------------------------------------

TEST(ForwardKernels, EveryKernelMatchesFloat64) {
    std::mt19937_64 rng(7);
    for (const LossKernelInfo *kernel : Kernels()) {
        for (const aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
            for (const int64_t c : {int64_t{1}, int64_t{5}, int64_t{16}, int64_t{129}, int64_t{1000}, int64_t{32000}}) {
                const KernelProblem p = RandomProblem(rng, dtype, 2, c);
                const KernelProblem::Result got = p.Run(*kernel);
                EXPECT_TRUE(got.all_written) << kernel->name << " " << p.Describe();
                const double eps = openaclnn::test::FormatOf(dtype).epsilon;
                for (int64_t i = 0; i < p.n; ++i) {
                    const double *x = &p.logits[i * c];
                    double m = -kInf;
                    for (int64_t j = 0; j < c; ++j) m = std::max(m, x[j]);
                    double s = 0.0;
                    for (int64_t j = 0; j < c; ++j) s += std::exp(x[j] - m);
                    const double lse = m + std::log(s);
                    double weighted = 0.0, magnitude = 0.0;
                    for (int64_t j = 0; j < c; ++j) {
                        const double w = p.weight.empty() ? 1.0 : p.weight[j];
                        weighted += w * (x[j] - lse);
                        magnitude += std::fabs(w) * (std::fabs(x[j]) + std::fabs(lse));
                    }
                    const double u = std::ldexp(1.0, -24);
                    EXPECT_NEAR(got.lse[i], lse, 8 * u * (std::fabs(lse) + 1.0)) << kernel->name << " " << p.Describe();
                    if (p.smoothing) {
                        EXPECT_NEAR(got.weighted[i], weighted, 8 * u * magnitude + 1e-30)
                            << kernel->name << " " << p.Describe();
                    }
                    for (int64_t j = 0; j < c; ++j) {
                        const double want = x[j] - lse;
                        const double tol = 4 * u * (std::fabs(x[j]) + std::fabs(lse) + 1.0) + eps * std::fabs(want);
                        const double gotv = got.log_prob[i * c + j];
                        if (!(std::fabs(gotv - want) <= tol)) {
                            ADD_FAILURE() << kernel->name << " logProb[" << i << "][" << j << "] = " << gotv
                                          << ", expected " << want << " +- " << tol << "\n" << p.Describe();
                            return;
                        }
                    }
                }
            }
        }
    }
}

// ---- special values -----------------------------------------------------------------------------------------------

struct SpecialRow {
    const char *what;
    std::vector<std::pair<int64_t, double>> values;  // (column, value) placed into a finite random row
    bool all_minus_inf = false;
    bool expect_nan;
};

TEST(ForwardKernels, NanAndInfinityRows) {
    // Columns in the first 128-element block, in a later block, in the 16-groups after the blocks and in the tail.
    const int64_t c = 300;  // 2 blocks of 128, 2 groups of 16, a tail of 12
    const std::vector<SpecialRow> cases = {
        {"NaN in a block", {{5, kNaN}}, false, true},
        {"NaN in the second block", {{200, kNaN}}, false, true},
        {"NaN in a group after the blocks", {{260, kNaN}}, false, true},
        {"NaN in the tail", {{299, kNaN}}, false, true},
        // A NaN with its sign bit set: pass B's clamp (an unsigned minimum on the bits) turns it into -86, so only
        // pass C's probe sees it.
        {"negative NaN in a block", {{5, -kNaN}}, false, true},
        {"negative NaN in the tail", {{299, -kNaN}}, false, true},
        {"+inf in a block", {{0, kInf}}, false, true},
        {"+inf in the tail", {{290, kInf}}, false, true},
        {"+inf and -inf", {{3, kInf}, {4, -kInf}}, false, true},
        {"NaN and +inf", {{100, kNaN}, {101, kInf}}, false, true},
        {"all -inf", {}, true, true},
        {"some -inf", {{0, -kInf}, {130, -kInf}, {298, -kInf}}, false, false},
        {"-inf in every lane of the tail", {{288, -kInf}, {289, -kInf}, {290, -kInf}, {291, -kInf}}, false, false},
    };
    for (const LossKernelInfo *kernel : Kernels()) {
        for (const aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
            for (const SpecialRow &sr : cases) {
                std::mt19937_64 rng(11);
                KernelProblem p = RandomProblem(rng, dtype, 3, c);
                p.smoothing = true;
                const int64_t row = 1;  // rows 0 and 2 stay finite: they must not be affected
                for (int64_t j = 0; j < c; ++j) {
                    if (sr.all_minus_inf) p.logits[row * c + j] = -kInf;
                }
                for (const auto &[col, v] : sr.values) p.logits[row * c + col] = v;
                const KernelProblem::Result got = p.Run(*kernel);
                const std::string where = std::string(kernel->name) + " " + sr.what + " " + p.Describe();
                EXPECT_TRUE(got.all_written) << where;
                if (sr.expect_nan) {
                    EXPECT_TRUE(std::isnan(got.lse[row])) << where << ": lse " << got.lse[row];
                    for (int64_t j = 0; j < c; ++j) {
                        ASSERT_TRUE(std::isnan(got.log_prob[row * c + j])) << where << ": logProb[" << j << "]";
                    }
                } else {
                    // The finite entries alone, in double.
                    const double *x = &p.logits[row * c];
                    double m = -kInf;
                    for (int64_t j = 0; j < c; ++j) m = std::max(m, x[j]);
                    double s = 0.0;
                    for (int64_t j = 0; j < c; ++j) s += std::exp(x[j] - m);
                    const double lse = m + std::log(s);
                    EXPECT_NEAR(got.lse[row], lse, 1e-5 * (std::fabs(lse) + 1.0)) << where;
                    for (int64_t j = 0; j < c; ++j) {
                        if (std::isinf(x[j])) {
                            EXPECT_EQ(got.log_prob[row * c + j], -kInf) << where << ": logProb[" << j << "]";
                        } else {
                            EXPECT_TRUE(std::isfinite(got.log_prob[row * c + j])) << where << ": logProb[" << j << "]";
                        }
                    }
                    // The smoothing sum over a -inf entry is -inf, as sum_j w_j logProb_j is.
                    EXPECT_EQ(got.weighted[row], -kInf) << where;
                }
                for (const int64_t other : {int64_t{0}, int64_t{2}}) {
                    EXPECT_TRUE(std::isfinite(got.lse[other])) << where << ": row " << other;
                    for (int64_t j = 0; j < c; ++j) {
                        ASSERT_TRUE(std::isfinite(got.log_prob[other * c + j])) << where << ": row " << other;
                    }
                }
                if (HasFailure()) return;
            }
        }
    }
}

// A few special rows through every Highway target: the bits agree there too (NaN as NaN).
TEST(ForwardKernels, SpecialValuesBitwiseAcrossTargets) {
    const auto hwy = HighwayKernels();
    for (const aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
        std::mt19937_64 rng(5);
        KernelProblem p = RandomProblem(rng, dtype, 6, 147);
        p.smoothing = true;
        p.logits[0 * 147 + 3] = kNaN;
        p.logits[1 * 147 + 146] = kInf;
        for (int64_t j = 0; j < 147; ++j) p.logits[2 * 147 + j] = -kInf;
        p.logits[3 * 147 + 140] = -kInf;
        for (int64_t j = 0; j < 147; ++j) p.logits[4 * 147 + j] = j % 2 ? -kInf : 0.0;  // max 0 among -inf
        const KernelProblem::Result first = p.Run(*hwy[0]);
        for (size_t k = 1; k < hwy.size(); ++k) ExpectSameBits(p, hwy[0]->name, first, hwy[k]->name, p.Run(*hwy[k]));
    }
}

}  // namespace
}  // namespace openaclnn::cross_entropy_loss
