#include "grad_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "float_formats.h"
#include "random_inputs.h"
#include "tolerance.h"

namespace openaclnn::test {

const char *ViewKindName(ViewKind v) {
    switch (v) {
        case ViewKind::kContiguous:
            return "contiguous";
        case ViewKind::kStrided:
            return "strided";
        case ViewKind::kTransposed:
            return "transposed";
        case ViewKind::kInPlace:
            return "in-place";
        case ViewKind::kInPlaceAlias:
            return "in-place-alias";
        default:
            return "broadcast-inputs";
    }
}

Reduction CaseConfig::reduction_enum() const {
    if (reduction == 0) return Reduction::kNone;
    if (reduction == 2) return Reduction::kSum;
    return Reduction::kMean;
}

std::string CaseConfig::Describe() const {
    static const char *kReductions[] = {"none", "mean", "sum", "NULL(mean)"};
    static const char *kIgnore[] = {"none-hit", "some-hit", "all-hit"};
    static const char *kZloss[] = {"off", "with-gradZloss", "without-gradZloss"};
    std::ostringstream s;
    s.precision(17);
    s << "seed=" << seed << " N=" << n << " C=" << c << " dtype=" << DtypeName(dtype)
      << " target=" << DtypeName(target_dtype) << " reduction=" << kReductions[reduction]
      << " weight=" << (weight ? "yes" : "no") << " ignore=" << kIgnore[static_cast<int>(ignore)] << "(" << ignore_index
      << ") labelSmoothing=" << label_smoothing << " zloss=" << kZloss[static_cast<int>(zloss)]
      << " scale=" << zloss_scale << " lseWhenOff=" << lse_when_off << " scalarAs1d=" << scalar_as_1d
      << " view=" << ViewKindName(view);
    if (zero_weight_targets) s << " zeroWeightTargets";
    if (grad_scale != 1.0) s << " gradScale=" << grad_scale;
    if (grad_value) s << " gradValue=" << *grad_value;
    for (size_t k = 0; k + 1 < bad_targets.size(); k += 2) {
        s << " badTarget[" << bad_targets[k] << "]=" << bad_targets[k + 1];
    }
    return s.str();
}

void DrawAttributes(CaseConfig *cfg) {
    Rng rng(cfg->seed * 0x9e3779b97f4a7c15ull + 17);
    std::vector<int64_t> ignore_choices = {-100, -1, cfg->c + 3};
    if (cfg->c > 0) ignore_choices.push_back(rng.Int(0, cfg->c - 1));
    if (cfg->ignore == IgnoreKind::kNoneHit && cfg->target_dtype == ACL_INT64) {
        ignore_choices.push_back(int64_t{1} << 33);
    }
    cfg->ignore_index = rng.Pick(ignore_choices);
    if (cfg->zloss != ZlossKind::kOff) {
        cfg->zloss_scale = rng.Pick(std::vector<double>{1e-4, 0.05, -0.02, rng.Uniform(1e-3, 0.5)});
    } else {
        cfg->zloss_scale = 0.0;
    }
}

namespace {

using TensorPtr = std::unique_ptr<DeviceTensor>;

Layout Layout1d(ViewKind view, Rng &rng, int64_t len) {
    if (view == ViewKind::kStrided) return StridedLayout({len}, {rng.Int(2, 3)}, rng.Int(1, 5), rng.Int(0, 3));
    return ContiguousLayout({len});
}

// gradLoss / gradZloss: [N] for none, [] or [1] for mean and sum.
Layout GradLayout(const CaseConfig &cfg, Rng &rng) {
    if (cfg.reduction == 0) {
        if (cfg.view == ViewKind::kBroadcastInputs) return StridedLayout({cfg.n}, {0}, 1);
        return Layout1d(cfg.view, rng, cfg.n);
    }
    std::vector<int64_t> dims;
    if (cfg.scalar_as_1d) dims = {1};
    if (cfg.view == ViewKind::kStrided) return StridedLayout(dims, std::vector<int64_t>(dims.size(), 1), 2, 1);
    return ContiguousLayout(dims);
}

std::vector<uint8_t> ViewBytes(const DeviceTensor &t, const Layout &l, int64_t n, int64_t c) {
    const size_t size = ElementSize(t.dtype());
    std::vector<uint8_t> bytes;
    bytes.reserve(static_cast<size_t>(n * c) * size);
    auto &host = const_cast<DeviceTensor &>(t).host();
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < c; ++j) {
            const uint8_t *p = host.data() + l.Index(i, j) * size;
            bytes.insert(bytes.end(), p, p + size);
        }
    }
    return bytes;
}

}  // namespace

namespace {

// Runs one case; every broken expectation is appended to *failures (at most a handful per kind).
void RunCaseInto(const CaseConfig &cfg, aclrtStream stream, std::vector<std::string> *failures, uint64_t *output_hash) {
    auto fail = [failures](const std::string &what) { failures->push_back(what); };
    Rng rng(cfg.seed);
    const int64_t n = cfg.n;
    const int64_t c = cfg.c;
    const aclDataType dt = cfg.dtype;
    const bool in_place = cfg.view == ViewKind::kInPlace || cfg.view == ViewKind::kInPlaceAlias;

    // ---- the problem in double, inputs already rounded to their dtypes ----
    GradProblem p;
    p.n = n;
    p.c = c;
    p.reduction = cfg.reduction_enum();
    p.ignore_index = cfg.ignore_index;
    p.label_smoothing = cfg.label_smoothing;
    p.zloss_scale = cfg.zloss_scale;
    std::vector<double> logits = RandomLogits(rng, n, c);
    if (cfg.view == ViewKind::kBroadcastInputs) {
        for (int64_t i = 1; i < n; ++i) std::copy(logits.begin(), logits.begin() + c, logits.begin() + i * c);
    }
    std::vector<double> lse;
    LogSoftmaxRows(logits, n, c, &p.log_prob, &lse);
    for (double &v : p.log_prob) v = RoundTo(dt, v);

    p.target.resize(n);
    for (int64_t i = 0; i < n; ++i) {
        const bool hit =
            cfg.ignore == IgnoreKind::kAllHit || (cfg.ignore == IgnoreKind::kSomeHit && (i == 0 || rng.Chance(0.35)));
        if (hit) {
            p.target[i] = cfg.ignore_index;
            continue;
        }
        int64_t t = rng.Int(0, c - 1);
        if (t == cfg.ignore_index && c > 1) t = (t + 1) % c;
        p.target[i] = t;
    }
    for (size_t k = 0; k + 1 < cfg.bad_targets.size(); k += 2) p.target[cfg.bad_targets[k]] = cfg.bad_targets[k + 1];

    if (cfg.weight) {
        p.weight.resize(c);
        for (int64_t j = 0; j < c; ++j)
            p.weight[j] = rng.Chance(0.1) ? 0.0 : static_cast<float>(rng.Uniform(0.05, 3.0));
        if (cfg.zero_weight_targets) {
            for (int64_t t : p.target) {
                if (t >= 0 && t < c) p.weight[t] = 0.0;
            }
        }
    }
    const int64_t grad_len = cfg.reduction == 0 ? n : 1;
    p.grad_loss.resize(grad_len);
    for (double &g : p.grad_loss) g = RoundTo(dt, cfg.grad_scale * rng.Uniform(-2.0, 2.0));
    if (cfg.grad_value) std::fill(p.grad_loss.begin(), p.grad_loss.end(), *cfg.grad_value);
    if (cfg.view == ViewKind::kBroadcastInputs && cfg.reduction == 0) {
        for (double &g : p.grad_loss) g = p.grad_loss[0];
    }
    if (cfg.zloss == ZlossKind::kWithGradZloss) {
        p.grad_zloss.resize(grad_len);
        for (double &g : p.grad_zloss) g = RoundTo(dt, cfg.grad_scale * rng.Uniform(-2.0, 2.0));
        if (cfg.view == ViewKind::kBroadcastInputs && cfg.reduction == 0) {
            for (double &g : p.grad_zloss) g = p.grad_zloss[0];
        }
    }
    p.lse.resize(n);
    for (int64_t i = 0; i < n; ++i) p.lse[i] = RoundTo(dt, lse[i]);

    // ---- layouts and tensors ----
    Layout lp_layout = ContiguousLayout({n, c});
    Layout out_layout = ContiguousLayout({n, c});
    switch (cfg.view) {
        case ViewKind::kStrided:
            lp_layout = StridedLayout({n, c}, {2 * c + rng.Int(0, 3), 2}, rng.Int(1, 9), rng.Int(0, 5));
            out_layout = StridedLayout({n, c}, {c + rng.Int(1, 4), 1}, rng.Int(1, 9), rng.Int(0, 5));
            break;
        case ViewKind::kTransposed:
            lp_layout = TransposedLayout(n, c);
            out_layout = TransposedLayout(n, c);
            break;
        case ViewKind::kInPlaceAlias:
            lp_layout = StridedLayout({n, c}, {c + 2, 1}, 3, 2);
            break;
        case ViewKind::kBroadcastInputs:
            lp_layout = StridedLayout({n, c}, {0, 1}, 2, 1);
            break;
        default:
            break;
    }
    Rng layout_rng(cfg.seed + 99);
    TensorPtr grad_loss = std::make_unique<DeviceTensor>(dt, GradLayout(cfg, layout_rng));
    TensorPtr log_prob = std::make_unique<DeviceTensor>(dt, lp_layout);
    TensorPtr target = std::make_unique<DeviceTensor>(cfg.target_dtype, Layout1d(cfg.view, layout_rng, n));
    TensorPtr weight;
    TensorPtr grad_zloss;
    TensorPtr lse_t;
    TensorPtr out;
    for (int64_t i = 0; i < grad_len; ++i) grad_loss->Set(i, 0, p.grad_loss[i]);
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < c; ++j) log_prob->Set(i, j, p.log_prob[static_cast<size_t>(i * c + j)]);
    }
    for (int64_t i = 0; i < n; ++i) target->SetInt(i, p.target[i]);
    if (cfg.weight) {
        Layout wl =
            cfg.view == ViewKind::kBroadcastInputs ? StridedLayout({c}, {2}, 1) : Layout1d(cfg.view, layout_rng, c);
        weight = std::make_unique<DeviceTensor>(ACL_FLOAT, wl);
        for (int64_t j = 0; j < c; ++j) weight->Set(j, 0, p.weight[j]);
    }
    if (!p.grad_zloss.empty()) {
        grad_zloss = std::make_unique<DeviceTensor>(dt, GradLayout(cfg, layout_rng));
        for (int64_t i = 0; i < grad_len; ++i) grad_zloss->Set(i, 0, p.grad_zloss[i]);
    }
    if (cfg.zloss_scale != 0.0 || cfg.lse_when_off == 2) {
        lse_t = std::make_unique<DeviceTensor>(dt, Layout1d(cfg.view, layout_rng, n));
        if (cfg.zloss_scale == 0.0) {
            for (int64_t i = 0; i < n; ++i) p.lse[i] = RoundTo(dt, rng.Uniform(-50.0, 50.0));  // must not matter
        }
        for (int64_t i = 0; i < n; ++i) lse_t->Set(i, 0, p.lse[i]);
    } else if (cfg.lse_when_off == 1) {
        lse_t = std::make_unique<DeviceTensor>(dt, ContiguousLayout({0}));
    }
    if (!in_place) out = std::make_unique<DeviceTensor>(dt, out_layout);

    std::vector<DeviceTensor *> inputs = {grad_loss.get(), target.get(), weight.get(), grad_zloss.get(), lse_t.get()};
    if (!in_place) inputs.push_back(log_prob.get());
    std::vector<uint64_t> checksums;
    for (DeviceTensor *t : inputs) {
        if (t == nullptr) continue;
        t->Upload();
        checksums.push_back(t->DeviceChecksum());
    }
    if (in_place) log_prob->Upload();
    if (out) out->Upload();  // poison
    const std::vector<uint8_t> lp_storage_before = log_prob->host();

    GradCall call;
    call.grad_loss = grad_loss->get();
    call.log_prob = log_prob->get();
    call.target = target->get();
    call.weight = weight ? weight->get() : nullptr;
    call.grad_zloss = grad_zloss ? grad_zloss->get() : nullptr;
    call.lse = lse_t ? lse_t->get() : nullptr;
    static const char *kReductionStrings[] = {"none", "mean", "sum", nullptr};
    call.reduction = kReductionStrings[cfg.reduction];
    call.ignore_index = cfg.ignore_index;
    call.label_smoothing = cfg.label_smoothing;
    call.zloss_scale = cfg.zloss_scale;
    if (cfg.view == ViewKind::kInPlace)
        call.out = log_prob->get();
    else if (cfg.view == ViewKind::kInPlaceAlias)
        call.out = log_prob->Alias();
    else
        call.out = out->get();

    const GradOutcome r = RunGrad(call, stream);
    if (r.phase1 != ACLNN_SUCCESS) {
        return fail("phase 1 returned " + std::to_string(r.phase1) + ": " + r.phase1_message);
    }
    if (r.phase2 != ACLNN_SUCCESS) return fail("phase 2 returned " + std::to_string(r.phase2) + ": " + RecentError());
    const GradReference ref = ReferenceGrad(p);
    if (ref.bad_rows.empty()) {
        if (r.sync != ACL_SUCCESS) {
            return fail("aclrtSynchronizeStream returned " + std::to_string(r.sync) + ": " + r.sync_message);
        }
    } else {
        if (r.sync != ACL_ERROR_RT_VECTOR_CORE_EXCEPTION) {
            fail("aclrtSynchronizeStream returned " + std::to_string(r.sync) +
                 ", expected 507035 for an out-of-range target");
        }
        const int64_t row = ref.bad_rows.front();
        if (r.sync_message.find(std::to_string(row)) == std::string::npos) {
            fail("message should name row " + std::to_string(row) + ": '" + r.sync_message + "'");
        }
        if (r.sync_message.find(std::to_string(p.target[row])) == std::string::npos) {
            fail("message should name value " + std::to_string(p.target[row]) + ": '" + r.sync_message + "'");
        }
        const aclError again = aclrtSynchronizeStream(stream);
        if (again != ACL_SUCCESS)
            fail("the error must be reported once; second sync returned " + std::to_string(again));
    }

    DeviceTensor &result = in_place ? *log_prob : *out;
    const Layout &rl = in_place ? lp_layout : out_layout;
    result.Download();

    // Every element of the view: written, and within the tolerance of the reference.
    int64_t element_failures = 0;
    auto report = [&element_failures, &fail](const std::string &what) {
        if (++element_failures <= 8) fail(what);
    };
    std::vector<char> in_view(static_cast<size_t>(rl.StorageElements()), 0);
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < c; ++j) {
            const int64_t idx = rl.Index(i, j);
            in_view[static_cast<size_t>(idx)] = 1;
            const size_t k = static_cast<size_t>(i * c + j);
            if (!in_place && result.ElementIsPoison(idx)) {
                report("out[" + std::to_string(i) + "][" + std::to_string(j) + "] was never written");
                continue;
            }
            const double got = result.Get(i, j);
            const double want = ref.out[k];
            if (std::isnan(want)) {
                if (!std::isnan(got)) {
                    report("out[" + std::to_string(i) + "][" + std::to_string(j) + "] = " + std::to_string(got) +
                           ", expected NaN (row with an out-of-range target)");
                }
                continue;
            }
            const double tol = GradTolerance(dt, want, ref.magnitude[k], ref.row_scale[i], n, c);
            // Beyond the dtype's range the store gives infinity of the value's sign (when even the smallest value
            // the arithmetic error allows is out of range).
            const double low_end = std::fabs(want) - (tol - std::fabs(want) * FormatOf(dt).epsilon);
            const bool must_overflow = std::isinf(RoundTo(dt, std::copysign(low_end, want)));
            const bool overflow_ok = std::isinf(got) && std::signbit(got) == std::signbit(want) &&
                                     std::isinf(RoundTo(dt, want + std::copysign(tol, want)));
            if (must_overflow ? !(std::isinf(got) && std::signbit(got) == std::signbit(want))
                              : !(std::fabs(got - want) <= tol || overflow_ok)) {
                std::ostringstream s;
                s.precision(17);
                s << "out[" << i << "][" << j << "] = " << got << ", reference " << want << ", |diff| "
                  << std::fabs(got - want) << " > tol " << tol << " (target " << p.target[i] << ", logProb "
                  << p.log_prob[k] << ")";
                report(s.str());
            }
        }
    }
    // Storage outside the view: untouched (poison for a separate out, the original bytes in place).
    const size_t esize = ElementSize(dt);
    for (size_t idx = 0; idx < in_view.size(); ++idx) {
        if (in_view[idx]) continue;
        const bool untouched = in_place ? std::memcmp(result.host().data() + idx * esize,
                                                      lp_storage_before.data() + idx * esize, esize) == 0
                                        : result.ElementIsPoison(static_cast<int64_t>(idx));
        if (!untouched) report("storage element " + std::to_string(idx) + " outside the out view was written");
    }
    if (element_failures > 0) fail(std::to_string(element_failures) + " element failures in total");

    // Inputs unchanged.
    size_t k = 0;
    for (DeviceTensor *t : inputs) {
        if (t == nullptr) continue;
        if (t->DeviceChecksum() != checksums[k]) fail("input storage changed: " + t->layout().Describe());
        ++k;
    }
    if (output_hash != nullptr) {
        const std::vector<uint8_t> bytes = ViewBytes(result, rl, n, c);
        *output_hash = Fnv1a(bytes.data(), bytes.size());
    }
}

}  // namespace

std::vector<std::string> RunCase(const CaseConfig &cfg, aclrtStream stream, uint64_t *output_hash) {
    std::vector<std::string> failures;
    try {
        RunCaseInto(cfg, stream, &failures, output_hash);
    } catch (const std::exception &e) {
        failures.push_back(std::string("exception: ") + e.what());
    }
    return failures;
}

bool RunAndCheckCase(const CaseConfig &cfg, aclrtStream stream, uint64_t *output_hash) {
    const std::vector<std::string> failures = RunCase(cfg, stream, output_hash);
    for (const std::string &f : failures) ADD_FAILURE() << f << "\n  config: " << cfg.Describe();
    return failures.empty();
}

}  // namespace openaclnn::test
