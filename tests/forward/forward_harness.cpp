#include "forward_harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "float_formats.h"

namespace openaclnn::test {
namespace {

double Weight(const ForwardCase &fc, int64_t j) { return fc.weight.empty() ? 1.0 : fc.weight[static_cast<size_t>(j)]; }

bool IsFloat16Like(aclDataType dtype) { return dtype == ACL_FLOAT16 || dtype == ACL_BF16; }

}  // namespace

std::string ForwardCase::Describe() const {
    std::ostringstream s;
    s << "seed=" << seed << " N=" << n << " C=" << c << " dtype=" << dtype << " target_dtype=" << target_dtype
      << " reduction=" << ReductionName(reduction) << " weight=" << (weight.empty() ? "no" : "yes")
      << " ignore=" << ignore_index << " ls=" << label_smoothing << " scale=" << zloss_scale
      << " return_zloss=" << return_zloss << " input=" << input_layout.Describe()
      << " logProb=" << (placement == LogProbPlacement::kInPlace ? "in place" : log_prob_layout.Describe())
      << " strides(target/loss/lse)=" << target_stride << "/" << loss_stride << "/" << lse_stride
      << " lse_empty=" << lse_empty << " zloss_empty=" << zloss_empty;
    return s.str();
}

ForwardReference ReferenceForward(const ForwardCase &fc) {
    const int64_t n = fc.n, c = fc.c;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    ForwardReference r;
    r.log_prob.assign(static_cast<size_t>(n * c), 0.0);
    r.lse.assign(static_cast<size_t>(n), -std::numeric_limits<double>::infinity());
    if (c > 0) LogSoftmaxRows(fc.logits, n, c, &r.log_prob, &r.lse);
    const double ls = fc.label_smoothing;
    std::vector<double> ce(n, 0.0), z(n, 0.0), ce_mag(n, 0.0), z_mag(n, 0.0);
    double weight_total = 0.0, count = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t t = fc.target[i];
        if (t == fc.ignore_index) continue;
        if (t < 0 || t >= c) {
            r.bad_rows.push_back(i);
            ce[i] = z[i] = nan;
            continue;
        }
        const double *lp = &r.log_prob[static_cast<size_t>(i * c)];
        const double *x = &fc.logits[static_cast<size_t>(i * c)];
        const double lse = r.lse[i];
        const double nll = -Weight(fc, t) * lp[t];
        ce[i] = nll;
        ce_mag[i] = std::fabs(Weight(fc, t)) * (std::fabs(x[t]) + std::fabs(lse) + 1.0);
        if (ls > 0.0) {
            double smooth = 0.0, smooth_mag = 0.0;
            for (int64_t j = 0; j < c; ++j) {
                smooth -= Weight(fc, j) * lp[j];
                smooth_mag += std::fabs(Weight(fc, j)) * (std::fabs(x[j]) + std::fabs(lse) + 1.0);
            }
            ce[i] = (1.0 - ls) * nll + ls / static_cast<double>(c) * smooth;
            ce_mag[i] = (1.0 - ls) * ce_mag[i] + ls / static_cast<double>(c) * smooth_mag;
        }
        z[i] = fc.zloss_scale * lse * lse;
        z_mag[i] = std::fabs(fc.zloss_scale) * (lse * lse + 2.0 * std::fabs(lse) + 1.0);
        weight_total += Weight(fc, t);
        count += 1.0;
    }
    const bool zloss = fc.zloss_scale != 0.0;
    if (fc.reduction == Reduction::kNone) {
        for (int64_t i = 0; i < n; ++i) {
            r.loss.push_back(zloss ? ce[i] + z[i] : ce[i]);
            r.loss_magnitude.push_back(ce_mag[i] + (zloss ? z_mag[i] : 0.0));
            r.zloss.push_back(z[i]);
            r.zloss_magnitude.push_back(z_mag[i]);
        }
        return r;
    }
    double ce_total = 0.0, z_total = 0.0, ce_mag_total = 0.0, z_mag_total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        ce_total += ce[i];
        z_total += z[i];
        ce_mag_total += ce_mag[i];
        z_mag_total += z_mag[i];
    }
    if (fc.reduction == Reduction::kMean) {
        // PyTorch: a mean over zero total weight is 0/0 = NaN.
        ce_total /= weight_total;
        ce_mag_total /= std::fabs(weight_total);
        z_total /= count;
        z_mag_total /= count;
    }
    r.loss = {zloss ? ce_total + z_total : ce_total};
    r.loss_magnitude = {ce_mag_total + (zloss ? z_mag_total : 0.0)};
    r.zloss = {z_total};
    r.zloss_magnitude = {z_mag_total};
    return r;
}

ForwardOutcome RunForward(const ForwardCase &fc, aclrtStream stream) {
    ForwardOutcome out;
    const int64_t n = fc.n, c = fc.c;
    DeviceTensor input(fc.dtype, fc.input_layout);
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < c; ++j) input.Set(i, j, fc.logits[static_cast<size_t>(i * c + j)]);
    }
    input.Upload();
    DeviceTensor target(fc.target_dtype, StridedLayout({n}, {fc.target_stride}, 0));
    for (int64_t i = 0; i < n; ++i) target.SetInt(i, fc.target[static_cast<size_t>(i)]);
    target.Upload();
    std::unique_ptr<DeviceTensor> weight;
    if (!fc.weight.empty()) {
        weight = std::make_unique<DeviceTensor>(ACL_FLOAT, ContiguousLayout({c}));
        for (int64_t j = 0; j < c; ++j) weight->Set(j, 0, fc.weight[static_cast<size_t>(j)]);
        weight->Upload();
    }
    const bool per_row = fc.reduction == Reduction::kNone;
    // Mean/sum alternate between [] and [1] (both accepted) with the seed.
    const Layout scalar_layout = fc.seed % 2 ? ContiguousLayout({}) : ContiguousLayout({1});
    const Layout loss_layout = per_row ? StridedLayout({n}, {fc.loss_stride}, 0) : scalar_layout;
    DeviceTensor loss(fc.dtype, loss_layout);
    DeviceTensor zloss(fc.dtype, fc.zloss_empty ? ContiguousLayout({0}) : loss_layout);
    DeviceTensor lse(fc.dtype, fc.lse_empty ? ContiguousLayout({0}) : StridedLayout({n}, {fc.lse_stride}, 0));
    std::unique_ptr<DeviceTensor> log_prob;
    const aclTensor *log_prob_tensor = nullptr;
    if (fc.placement == LogProbPlacement::kInPlace) {
        log_prob_tensor = input.Alias();
    } else {
        log_prob = std::make_unique<DeviceTensor>(fc.dtype, fc.log_prob_layout);
        log_prob_tensor = log_prob->get();
    }
    const uint64_t input_checksum = input.DeviceChecksum();

    std::string reduction = ReductionName(fc.reduction);
    uint64_t workspace_size = 0;
    aclOpExecutor *executor = nullptr;
    out.phase1 = aclnnCrossEntropyLossGetWorkspaceSize(
        input.get(), target.get(), weight ? weight->get() : nullptr, reduction.data(), fc.ignore_index,
        fc.label_smoothing, fc.zloss_scale, fc.return_zloss, loss.get(), log_prob_tensor, zloss.get(), lse.get(),
        &workspace_size, &executor);
    if (out.phase1 != ACLNN_SUCCESS) {
        out.phase1_message = RecentError();
        return out;
    }
    void *workspace = nullptr;
    if (workspace_size > 0) aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST);
    out.phase2 = aclnnCrossEntropyLoss(workspace, workspace_size, executor, stream);
    out.sync = aclrtSynchronizeStream(stream);
    if (out.sync != ACL_SUCCESS) out.sync_message = RecentError();
    if (workspace) aclrtFree(workspace);

    loss.Download();
    zloss.Download();
    lse.Download();
    input.Download();
    if (log_prob) log_prob->Download();
    const auto check_written = [&](const DeviceTensor &t, int64_t storage_index, const char *what, int64_t i,
                                   int64_t j) {
        if (out.all_written && t.ElementIsPoison(storage_index)) {
            out.all_written = false;
            out.unwritten = std::string(what) + "[" + std::to_string(i) + "][" + std::to_string(j) + "]";
        }
    };
    const int64_t loss_count = per_row ? n : 1;
    for (int64_t i = 0; i < loss_count; ++i) {
        out.loss.push_back(loss.Get(i));
        check_written(loss, loss.layout().Index(i), "lossOut", i, 0);
        if (fc.return_zloss && !fc.zloss_empty) {
            out.zloss.push_back(zloss.Get(i));
            check_written(zloss, zloss.layout().Index(i), "zlossOut", i, 0);
        }
    }
    if (!fc.lse_empty) {
        for (int64_t i = 0; i < n; ++i) {
            out.lse.push_back(lse.Get(i));
            check_written(lse, lse.layout().Index(i), "lseForZlossOut", i, 0);
        }
    }
    const DeviceTensor &lp = log_prob ? *log_prob : input;
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < c; ++j) {
            out.log_prob.push_back(lp.Get(i, j));
            if (log_prob) check_written(lp, lp.layout().Index(i, j), "logProbOut", i, j);
        }
    }
    if (log_prob) out.input_unchanged = input.DeviceChecksum() == input_checksum;
    return out;
}

double ForwardTolerance(aclDataType dtype, double reference, double magnitude) {
    const double u32 = std::ldexp(1.0, -24);
    const FloatFormat f = FormatOf(dtype);
    const double compute = 32.0 * u32 * magnitude;
    return compute + 0.5 * f.epsilon * (std::fabs(reference) + compute) + 0.5 * f.denorm_min;
}

namespace {

int CompareValues(const ForwardCase &fc, const char *what, const std::vector<double> &got,
                  const std::vector<double> &want, const std::vector<double> &magnitude) {
    if (got.size() != want.size()) {
        ADD_FAILURE() << what << ": " << got.size() << " values, expected " << want.size() << "\n" << fc.Describe();
        return 1;
    }
    int failures = 0;
    for (size_t k = 0; k < got.size(); ++k) {
        bool ok;
        double tol = 0.0;
        if (std::isnan(want[k])) {
            ok = std::isnan(got[k]);
        } else if (std::isinf(want[k])) {
            ok = got[k] == want[k];
        } else {
            tol = ForwardTolerance(fc.dtype, want[k], magnitude[k]);
            ok = std::fabs(got[k] - want[k]) <= tol;
        }
        if (!ok && failures++ < 5) {
            ADD_FAILURE() << what << "[" << k << "] = " << got[k] << ", expected " << want[k] << " +- " << tol
                          << "\n" << fc.Describe();
        }
    }
    return failures;
}

}  // namespace

int CompareForward(const ForwardCase &fc, const ForwardReference &ref, const ForwardOutcome &got) {
    int failures = 0;
    if (!got.all_written) {
        ADD_FAILURE() << "not written: " << got.unwritten << "\n" << fc.Describe();
        ++failures;
    }
    if (!got.input_unchanged) {
        ADD_FAILURE() << "the input changed\n" << fc.Describe();
        ++failures;
    }
    failures += CompareValues(fc, "lossOut", got.loss, ref.loss, ref.loss_magnitude);
    if (fc.return_zloss && !fc.zloss_empty) {
        failures += CompareValues(fc, "zlossOut", got.zloss, ref.zloss, ref.zloss_magnitude);
    }
    // logProb and lse: |x| + |lse| bounds the terms; the 16-bit formats see only the store rounding beyond that.
    std::vector<double> lp_mag(ref.log_prob.size()), lse_mag(ref.lse.size());
    for (int64_t i = 0; i < fc.n; ++i) {
        lse_mag[i] = 0.25 * (std::fabs(ref.lse[i]) + 1.0);
        for (int64_t j = 0; j < fc.c; ++j) {
            const size_t k = static_cast<size_t>(i * fc.c + j);
            lp_mag[k] = 0.25 * (std::fabs(fc.logits[k]) + std::fabs(ref.lse[i]) + 1.0);
        }
    }
    failures += CompareValues(fc, "logProbOut", got.log_prob, ref.log_prob, lp_mag);
    if (!fc.lse_empty) failures += CompareValues(fc, "lseForZlossOut", got.lse, ref.lse, lse_mag);
    return failures;
}

ForwardCase RandomForwardCase(uint64_t seed, aclDataType dtype, int64_t n, int64_t c) {
    Rng rng(seed);
    ForwardCase fc;
    fc.seed = seed;
    fc.n = n;
    fc.c = c;
    fc.dtype = dtype;
    fc.target_dtype = rng.Chance(0.5) ? ACL_INT64 : ACL_INT32;
    fc.reduction = rng.Pick(std::vector<Reduction>{Reduction::kNone, Reduction::kMean, Reduction::kSum});
    fc.ignore_index = rng.Pick(std::vector<int64_t>{-100, -1, 0, c - 1, 1000});
    fc.label_smoothing = rng.Pick(std::vector<double>{0.0, 0.0, 0.1, 0.5, 1.0});
    fc.zloss_scale = rng.Pick(std::vector<double>{0.0, 0.0, 1e-4, 0.5});
    fc.return_zloss = rng.Chance(0.5);
    const FloatFormat format = FormatOf(dtype);
    fc.logits = RandomLogits(rng, n, c);
    for (double &v : fc.logits) v = RoundToFormat(v, format);
    fc.target.resize(static_cast<size_t>(n));
    for (auto &t : fc.target) t = rng.Chance(0.2) ? fc.ignore_index : (c > 0 ? rng.Int(0, c - 1) : fc.ignore_index);
    if (rng.Chance(0.5)) {
        fc.weight.resize(static_cast<size_t>(c));
        for (auto &w : fc.weight) w = static_cast<float>(rng.Chance(0.05) ? 0.0 : rng.Uniform(0.2, 2.0));
    }
    const auto pick_layout = [&](int kind) {
        switch (kind) {
            case 1:
                return StridedLayout({n, c}, {c + rng.Int(1, 5), 1}, rng.Int(0, 3));
            case 2:
                return TransposedLayout(n, c);
            default:
                return ContiguousLayout({n, c});
        }
    };
    fc.input_layout = pick_layout(static_cast<int>(rng.Pick(std::vector<int64_t>{0, 0, 1, 2})));
    const int64_t out_kind = rng.Pick(std::vector<int64_t>{0, 0, 1, 2, 3});
    if (out_kind == 3) {
        fc.placement = LogProbPlacement::kInPlace;
    } else {
        fc.log_prob_layout = pick_layout(static_cast<int>(out_kind));
    }
    fc.target_stride = rng.Pick(std::vector<int64_t>{1, 1, 2});
    fc.loss_stride = rng.Pick(std::vector<int64_t>{1, 1, 3});
    fc.lse_stride = rng.Pick(std::vector<int64_t>{1, 1, 2});
    fc.lse_empty = fc.zloss_scale == 0.0 && rng.Chance(0.3);
    fc.zloss_empty = !fc.return_zloss && rng.Chance(0.3);
    (void)IsFloat16Like;
    return fc;
}

}  // namespace openaclnn::test
