// aclnnCrossEntropyLossGrad against the float64 reference over randomised configurations: dtypes x reductions x
// weight x ignore x label smoothing x z-loss x target dtype x views (strided, transposed, in place, broadcast) x
// shapes (C = 1, every C up to 70 around the vector widths, C = 131073, many rows). Every failure prints its config
// and seed; rerun one with the same seed to reproduce.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "acl_helpers.h"
#include "grad_cases.h"
#include "random_inputs.h"

namespace openaclnn::test {
namespace {

double LabelSmoothingOfKind(int kind, uint64_t seed) {
    if (kind == 0) return 0.0;
    if (kind == 2) return 1.0;
    return Rng(seed * 31 + 7).Uniform(0.01, 0.99);
}

CaseConfig RandomConfig(uint64_t seed, aclDataType dtype, int64_t n, int64_t c) {
    Rng rng(seed * 7919 + 3);
    CaseConfig cfg;
    cfg.seed = seed;
    cfg.n = n;
    cfg.c = c;
    cfg.dtype = dtype;
    cfg.target_dtype = rng.Chance(0.5) ? ACL_INT32 : ACL_INT64;
    cfg.reduction = static_cast<int>(rng.Int(0, 3));
    cfg.weight = rng.Chance(0.5);
    const double u = rng.Uniform(0.0, 1.0);
    cfg.ignore = u < 0.4 ? IgnoreKind::kNoneHit : (u < 0.9 ? IgnoreKind::kSomeHit : IgnoreKind::kAllHit);
    cfg.zloss = static_cast<ZlossKind>(rng.Int(0, 2));
    cfg.lse_when_off = static_cast<int>(rng.Int(0, 2));
    cfg.scalar_as_1d = rng.Chance(0.3);
    cfg.view = static_cast<ViewKind>(rng.Int(0, kViewKinds - 1));
    DrawAttributes(&cfg);
    cfg.label_smoothing = LabelSmoothingOfKind(static_cast<int>(rng.Int(0, 2)), seed);
    return cfg;
}

class GradRandomTest : public ::testing::TestWithParam<aclDataType> {
protected:
    // Runs cfg; after `limit` failing configs the test stops (the first ones say enough).
    bool Run(const CaseConfig &cfg) {
        if (!RunAndCheckCase(cfg, TestStream())) ++failed_configs_;
        return failed_configs_ < 4;
    }
    uint64_t SeedBase() const { return static_cast<uint64_t>(GetParam()) * 1000003ull; }
    int failed_configs_ = 0;
};

// Every combination of the options on small shapes: reduction(4) x weight(2) x ignore(3) x smoothing(3) x
// z-loss(3) x target dtype(2) x view(6).
TEST_P(GradRandomTest, EveryOptionCombination) {
    uint64_t k = 0;
    for (int reduction = 0; reduction < 4; ++reduction) {
        for (bool weight : {false, true}) {
            for (int ignore = 0; ignore < 3; ++ignore) {
                for (int ls = 0; ls < 3; ++ls) {
                    for (int z = 0; z < 3; ++z) {
                        for (aclDataType target : {ACL_INT32, ACL_INT64}) {
                            for (int view = 0; view < kViewKinds; ++view, ++k) {
                                CaseConfig cfg;
                                cfg.seed = SeedBase() + k;
                                cfg.n = 1 + static_cast<int64_t>(k % 7);
                                cfg.c = 13 + static_cast<int64_t>(k % 5);
                                cfg.dtype = GetParam();
                                cfg.target_dtype = target;
                                cfg.reduction = reduction;
                                cfg.weight = weight;
                                cfg.ignore = static_cast<IgnoreKind>(ignore);
                                cfg.zloss = static_cast<ZlossKind>(z);
                                cfg.lse_when_off = static_cast<int>(k % 3);
                                cfg.scalar_as_1d = (k / 3) % 2 == 1;
                                cfg.view = static_cast<ViewKind>(view);
                                DrawAttributes(&cfg);
                                cfg.label_smoothing = LabelSmoothingOfKind(ls, cfg.seed);
                                if (!Run(cfg)) return;
                            }
                        }
                    }
                }
            }
        }
    }
}

// C = 1 .. 70: every tail around SIMD widths of 4, 8, 16 and 32 lanes, with random options.
TEST_P(GradRandomTest, EveryClassCountUpTo70) {
    for (int64_t c = 1; c <= 70; ++c) {
        for (uint64_t rep = 0; rep < 5; ++rep) {
            const uint64_t seed = SeedBase() + 100000 + static_cast<uint64_t>(c) * 10 + rep;
            const int64_t n = Rng(seed).Int(1, 12);
            if (!Run(RandomConfig(seed, GetParam(), n, c))) return;
        }
    }
}

// C = 131073 (2^17 + 1) with few rows, and large C around other powers of two.
TEST_P(GradRandomTest, LargeClassCounts) {
    const int64_t sizes[] = {131073, 131073, 131073, 131073, 131072, 65537, 4099};
    uint64_t k = 0;
    for (int64_t c : sizes) {
        for (int64_t n = 1; n <= 3; ++n, ++k) {
            if (!Run(RandomConfig(SeedBase() + 200000 + k, GetParam(), n, c))) return;
        }
    }
}

// Many rows, so that the work is split over threads, rows straddle chunk boundaries and the mean denominator sums
// many terms.
TEST_P(GradRandomTest, ManyRows) {
    const int64_t shapes[][2] = {{257, 3}, {1000, 17}, {513, 64}, {4097, 5}, {129, 1}, {2000, 33}};
    uint64_t k = 0;
    for (const auto &s : shapes) {
        for (int rep = 0; rep < 3; ++rep, ++k) {
            if (!Run(RandomConfig(SeedBase() + 300000 + k, GetParam(), s[0], s[1]))) return;
        }
    }
}

// Targets outside [0, C) that are not ignoreIndex: that row is NaN, the others are exact with the row left out of
// the mean denominators, and the next synchronisation returns 507035 naming the row and the value.
TEST_P(GradRandomTest, OutOfRangeTargets) {
    struct Bad {
        int64_t n, c, row, value;
        aclDataType target;
    };
    const Bad cases[] = {{40, 9, 37, 1234567, ACL_INT64},
                         {6, 5, 3, -7, ACL_INT32},
                         {12, 70, 11, 70, ACL_INT32},
                         {3, 1, 0, 1, ACL_INT64},
                         {5, 8, 2, int64_t{1} << 40, ACL_INT64},
                         {9, 131073, 4, 131073, ACL_INT64}};
    uint64_t k = 0;
    for (const Bad &b : cases) {
        for (int reduction = 0; reduction < 3; ++reduction, ++k) {
            CaseConfig cfg = RandomConfig(SeedBase() + 400000 + k, GetParam(), b.n, b.c);
            cfg.target_dtype = b.target;
            cfg.reduction = reduction;
            cfg.ignore_index = -100;
            cfg.ignore = IgnoreKind::kSomeHit;
            cfg.bad_targets = {b.row, b.value};
            if (!Run(cfg)) return;
        }
    }
    // Several bad rows in different chunks of rows (1024 each here) and in both threads' parts of the output (from
    // 8192 rows the coefficients' first pass runs per chunk, in parallel): the message names the first of them.
    for (int reduction = 0; reduction < 3; ++reduction, ++k) {
        CaseConfig cfg = RandomConfig(SeedBase() + 400000 + k, GetParam(), 9000, 17);
        cfg.target_dtype = ACL_INT64;
        cfg.reduction = reduction;
        cfg.ignore_index = -100;
        cfg.ignore = IgnoreKind::kSomeHit;
        cfg.bad_targets = {8500, 99, 1500, -3, 2049, 17};
        if (!Run(cfg)) return;
    }
}

// All rows ignored with mean: every element +-0, z-loss or not.
TEST_P(GradRandomTest, AllIgnoredMeanIsZero) {
    for (uint64_t k = 0; k < 12; ++k) {
        CaseConfig cfg = RandomConfig(SeedBase() + 500000 + k, GetParam(), 1 + static_cast<int64_t>(k), 9);
        cfg.reduction = k % 2 ? 1 : 3;
        cfg.ignore = IgnoreKind::kAllHit;
        if (!Run(cfg)) return;
    }
}

// Mean whose total weight is 0 although rows are not ignored: the cross-entropy part is zero, the z-loss part
// (mean over the unmasked rows) remains; without z-loss everything is zero.
TEST_P(GradRandomTest, MeanWithZeroTotalWeight) {
    for (uint64_t k = 0; k < 12; ++k) {
        CaseConfig cfg = RandomConfig(SeedBase() + 600000 + k, GetParam(), 2 + static_cast<int64_t>(k), 11);
        cfg.reduction = 1;
        cfg.weight = true;
        cfg.zero_weight_targets = true;
        cfg.zloss = k % 2 ? ZlossKind::kOff : ZlossKind::kWithGradZloss;
        DrawAttributes(&cfg);
        if (!Run(cfg)) return;
    }
}

// The same with an infinite or NaN gradLoss: the cross-entropy terms are dropped, not multiplied by 0 (which would
// give NaN), so every element is still zero (DESIGN.md: a mean over zero total weight gives zeros).
TEST_P(GradRandomTest, MeanWithZeroTotalWeightAndNonFiniteGradLoss) {
    const double values[] = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN()};
    for (uint64_t k = 0; k < 12; ++k) {
        CaseConfig cfg = RandomConfig(SeedBase() + 650000 + k, GetParam(), 2 + static_cast<int64_t>(k), 11);
        cfg.reduction = k % 4 == 3 ? 3 : 1;  // mean, or NULL (= mean)
        cfg.weight = true;
        cfg.zero_weight_targets = true;
        cfg.zloss = ZlossKind::kOff;
        DrawAttributes(&cfg);
        cfg.label_smoothing = k % 2 ? 0.0 : 0.25;
        cfg.grad_value = values[k % 3];
        if (!Run(cfg)) return;
    }
}

std::string DtypeParamName(const ::testing::TestParamInfo<aclDataType> &info) {
    return info.param == ACL_FLOAT ? "FLOAT" : (info.param == ACL_FLOAT16 ? "FLOAT16" : "BF16");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GradRandomTest, ::testing::Values(ACL_FLOAT, ACL_FLOAT16, ACL_BF16), DtypeParamName);

// Results beyond FLOAT16's range (65520 and up) are stored as infinities of the right sign. (For FLOAT and BF16 the
// same inputs would overflow the fp32 arithmetic the contract allows, so there is nothing exact to expect.)
TEST(GradOverflow, Float16GoesToInfinity) {
    for (uint64_t k = 0; k < 12; ++k) {
        CaseConfig cfg = RandomConfig(800000 + k, ACL_FLOAT16, 3 + static_cast<int64_t>(k), 19);
        cfg.reduction = k % 2 ? 0 : 2;  // none or sum: no division by the total weight
        cfg.weight = true;
        cfg.grad_scale = 3e4;
        if (!RunAndCheckCase(cfg, TestStream())) return;
    }
}

// ---- determinism: one set of bits whatever OPENACLNN_MAX_ISA, OPENACLNN_NUM_THREADS and the views' layout ----
//
// DESIGN.md section 4 and the lead's decision: the output's bits do not depend on the ISA cap, on the thread count,
// or on the memory layout of the views (a transposed or column-strided logProb/out, a strided weight, out == logProb
// give exactly the bits of the contiguous layout for the same values). Each probe below runs the same configs in a
// child process under one environment and one layout, checks every element against the float64 reference (the
// accuracy contract), and prints one hash of the output's values (in logical [N, C] order) per config; the hashes
// must be identical across all probes.

std::vector<CaseConfig> DeterminismConfigs(ViewKind view) {
    std::vector<CaseConfig> configs;
    // 12000 x 14: enough elements for five threads, over twelve chunks of rows (the coefficients' first pass) that
    // the threads share differently at each count.
    const int64_t shapes[][2] = {{67, 1031}, {5, 131073}, {3001, 7}, {300, 50}, {12000, 14}};
    uint64_t k = 0;
    for (aclDataType dt : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}) {
        for (const auto &s : shapes) {
            CaseConfig cfg = RandomConfig(900000 + k++, dt, s[0], s[1]);
            cfg.reduction = static_cast<int>(k % 3);
            cfg.weight = true;
            cfg.label_smoothing = 0.1;
            cfg.zloss = ZlossKind::kWithGradZloss;
            DrawAttributes(&cfg);
            // The values a config draws do not depend on its layout (grad_cases.cpp draws them first), except for
            // kBroadcastInputs, which makes every row equal and is not used here.
            cfg.view = view;
            configs.push_back(cfg);
        }
    }
    return configs;
}

// The layouts compared: the contiguous baseline and every other one whose values equal it.
const ViewKind kDeterminismViews[] = {ViewKind::kContiguous, ViewKind::kStrided, ViewKind::kTransposed,
                                      ViewKind::kInPlace, ViewKind::kInPlaceAlias};

// Child process: args[0] (optional) is the ViewKind as an integer. Runs the configs (fully checked against the
// reference) and prints one hash per config.
int DeterminismProbe(const std::vector<std::string> &args) {
    const ViewKind view = args.empty() ? ViewKind::kContiguous : static_cast<ViewKind>(std::atoi(args[0].c_str()));
    if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 3;
    aclrtStream stream = nullptr;
    if (aclrtCreateStream(&stream) != ACL_SUCCESS) return 3;
    int status = 0;
    for (const CaseConfig &cfg : DeterminismConfigs(view)) {
        uint64_t hash = 0;
        const std::vector<std::string> failures = RunCase(cfg, stream, &hash);
        for (const std::string &f : failures) std::fprintf(stderr, "%s: %s\n", cfg.Describe().c_str(), f.c_str());
        if (!failures.empty()) status = 1;
        std::printf("%016llx\n", static_cast<unsigned long long>(hash));
    }
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    aclFinalize();
    return status;
}
const ProbeRegistrar kDeterminismProbe("determinism", DeterminismProbe);

std::string ProbeHashes(const std::vector<std::string> &env, ViewKind view = ViewKind::kContiguous) {
    std::string hashes;
    const int status = RunProbe("determinism", {std::to_string(static_cast<int>(view))}, env, &hashes);
    EXPECT_EQ(status, 0) << "the probe's own checks against the float64 reference failed under "
                         << ::testing::PrintToString(env) << " with layout " << ViewKindName(view);
    EXPECT_EQ(std::count(hashes.begin(), hashes.end(), '\n'),
              static_cast<long>(DeterminismConfigs(view).size()));
    return hashes;
}

// The baseline every other run must reproduce: contiguous views, one thread, no ISA cap.
const std::string &BaselineHashes() {
    static const std::string baseline = ProbeHashes({"OPENACLNN_NUM_THREADS=1"});
    return baseline;
}

TEST(GradDeterminism, BitwiseIdenticalAcrossThreadCounts) {
    const std::string &baseline = BaselineHashes();
    for (const char *threads : {"OPENACLNN_NUM_THREADS=2", "OPENACLNN_NUM_THREADS=3", "OPENACLNN_NUM_THREADS=5"}) {
        EXPECT_EQ(ProbeHashes({threads}), baseline) << "output differs between OPENACLNN_NUM_THREADS=1 and " << threads;
    }
    // And in this process, with the default thread count.
    std::ostringstream here;
    for (const CaseConfig &cfg : DeterminismConfigs(ViewKind::kContiguous)) {
        uint64_t hash = 0;
        RunAndCheckCase(cfg, TestStream(), &hash);
        char line[32];
        std::snprintf(line, sizeof line, "%016llx\n", static_cast<unsigned long long>(hash));
        here << line;
    }
    EXPECT_EQ(here.str(), baseline);
}

// Every value OPENACLNN_MAX_ISA takes (a cap above what this CPU has selects its best kernel, which must agree too).
TEST(GradDeterminism, BitwiseIdenticalAcrossEveryMaxIsa) {
    const std::string &baseline = BaselineHashes();
    for (const char *isa : {"OPENACLNN_MAX_ISA=scalar", "OPENACLNN_MAX_ISA=sse4", "OPENACLNN_MAX_ISA=avx2",
                            "OPENACLNN_MAX_ISA=avx512", "OPENACLNN_MAX_ISA=best"}) {
        for (const char *threads : {"OPENACLNN_NUM_THREADS=1", "OPENACLNN_NUM_THREADS=3"}) {
            EXPECT_EQ(ProbeHashes({threads, isa}), baseline) << "output differs under " << isa << " " << threads;
        }
    }
}

// Strided, transposed and in-place views of the same values give the contiguous bits, under every ISA cap and with
// one or several threads (the strided layouts take the kernel's gather path, split across threads differently).
TEST(GradDeterminism, BitwiseIdenticalAcrossLayouts) {
    const std::string &baseline = BaselineHashes();
    int k = 0;
    for (const char *isa : {"OPENACLNN_MAX_ISA=scalar", "OPENACLNN_MAX_ISA=sse4", "OPENACLNN_MAX_ISA=avx2",
                            "OPENACLNN_MAX_ISA=best"}) {
        for (ViewKind view : kDeterminismViews) {
            if (view == ViewKind::kContiguous) continue;
            const char *threads = ++k % 2 ? "OPENACLNN_NUM_THREADS=2" : "OPENACLNN_NUM_THREADS=1";
            EXPECT_EQ(ProbeHashes({threads, isa}, view), baseline)
                << "layout " << ViewKindName(view) << " under " << isa << " " << threads
                << " gives other bits than the contiguous layout";
        }
    }
}

}  // namespace
}  // namespace openaclnn::test
