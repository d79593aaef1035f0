// The round trip: aclnnCrossEntropyLossGrad applied to aclnnCrossEntropyLoss's own outputs (logProb, lse) equals
// the finite-difference gradient of the forward loss, computed in double on the float64 reference path.
//
// For random configurations (reductions, weight, ignore index, label smoothing, z-loss, int32/int64 targets, every
// ISA cap) with fp32 tensors:
//   1. the forward runs through the C ABI and gives logProb [N, C] and lse [N];
//   2. the gradient runs through the C ABI on those outputs with a random gradLoss (the loss's cotangent: [N] for
//      none, one value for mean/sum) and gradZloss = 0;
//   3. the objective F(x) = sum_k gradLoss_k * loss_k(x), with loss(x) the float64 reference forward
//      (ReferenceForward: PyTorch's cross_entropy plus the z-loss, both in lossOut), is differentiated by central
//      differences in double: dF/dx_ij ~ (F(x + h e_ij) - F(x - h e_ij)) / 2h.
// The two must agree within the error the fp32 logProb and lse carry into the gradient (p = exp(logProb) is off by
// ~2^-24 (|x| + |lse|) relative) plus the finite difference's own error (truncation ~h^2 |F'''|, rounding
// ~2^-53 |F| / h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "forward_harness.h"

namespace openaclnn::test {
namespace {

struct EnvGuard {
    EnvGuard(const char *name, const std::string &value) : name_(name) {
        if (const char *old = std::getenv(name)) old_ = old, had_ = true;
        setenv(name, value.c_str(), 1);
    }
    ~EnvGuard() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }
    const char *name_;
    std::string old_;
    bool had_ = false;
};

// F(x) = sum_k g_k loss_k(x) on the float64 reference path.
double Objective(ForwardCase fc, const std::vector<double> &logits, const std::vector<double> &grad_loss) {
    fc.logits = logits;
    const ForwardReference ref = ReferenceForward(fc);
    double f = 0.0;
    for (size_t k = 0; k < ref.loss.size(); ++k) f += grad_loss[k] * ref.loss[k];
    return f;
}

// A configuration whose loss is differentiable: every target in range, and for mean at least one counted row
// with non-zero weight (a mean over zero total weight is NaN in the forward, zeros in the gradient).
ForwardCase RoundTripCase(uint64_t seed, int64_t n, int64_t c) {
    ForwardCase fc = RandomForwardCase(seed, ACL_FLOAT, n, c);
    Rng rng(seed * 31 + 7);
    for (int64_t i = 0; i < n; ++i) {
        int64_t &t = fc.target[static_cast<size_t>(i)];
        if (t != fc.ignore_index && (t < 0 || t >= c)) t = fc.ignore_index;
    }
    // Row 0 is always counted with a non-zero weight.
    int64_t t0 = rng.Int(0, c - 1);
    if (t0 == fc.ignore_index) t0 = (t0 + 1) % c;
    if (t0 == fc.ignore_index) t0 = fc.ignore_index == 0 ? 1 % c : 0;
    if (t0 != fc.ignore_index) {
        fc.target[0] = t0;
        if (!fc.weight.empty() && fc.weight[static_cast<size_t>(t0)] == 0.0) fc.weight[static_cast<size_t>(t0)] = 0.75;
    }
    // Every row ignored (C == 1 with ignoreIndex 0): a mean would be 0/0; use the sum there.
    bool counted = false;
    for (int64_t i = 0; i < n; ++i) counted = counted || fc.target[static_cast<size_t>(i)] != fc.ignore_index;
    if (!counted && fc.reduction == Reduction::kMean) fc.reduction = Reduction::kSum;
    // Logits of moderate size, so that h = 1e-5 resolves the curvature (values already fp32-representable).
    for (double &v : fc.logits) v = static_cast<float>(std::fmod(v, 12.0));
    fc.input_layout = ContiguousLayout({n, c});
    fc.log_prob_layout = ContiguousLayout({n, c});
    fc.placement = LogProbPlacement::kSeparate;
    fc.lse_empty = false;
    fc.lse_stride = 1;
    return fc;
}

struct GradRun {
    std::vector<double> out;
    aclError sync = -1;
    std::string message;
};

// The gradient op on the forward's outputs (as the forward stored them: fp32 values).
GradRun RunGradOnForward(const ForwardCase &fc, const ForwardOutcome &fw, const std::vector<double> &grad_loss) {
    const int64_t n = fc.n, c = fc.c;
    const bool per_row = fc.reduction == Reduction::kNone;
    DeviceTensor log_prob(ACL_FLOAT, ContiguousLayout({n, c}));
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < c; ++j) log_prob.Set(i, j, fw.log_prob[static_cast<size_t>(i * c + j)]);
    }
    log_prob.Upload();
    DeviceTensor target(fc.target_dtype, ContiguousLayout({n}));
    for (int64_t i = 0; i < n; ++i) target.SetInt(i, fc.target[static_cast<size_t>(i)]);
    target.Upload();
    std::unique_ptr<DeviceTensor> weight;
    if (!fc.weight.empty()) {
        weight = std::make_unique<DeviceTensor>(ACL_FLOAT, ContiguousLayout({c}));
        for (int64_t j = 0; j < c; ++j) weight->Set(j, 0, fc.weight[static_cast<size_t>(j)]);
        weight->Upload();
    }
    const Layout loss_layout = per_row ? ContiguousLayout({n}) : ContiguousLayout({});
    DeviceTensor g(ACL_FLOAT, loss_layout);
    for (size_t k = 0; k < grad_loss.size(); ++k) g.Set(static_cast<int64_t>(k), 0, grad_loss[k]);
    g.Upload();
    DeviceTensor gz(ACL_FLOAT, loss_layout);
    for (size_t k = 0; k < grad_loss.size(); ++k) gz.Set(static_cast<int64_t>(k), 0, 0.0);
    gz.Upload();
    DeviceTensor lse(ACL_FLOAT, ContiguousLayout({n}));
    for (int64_t i = 0; i < n; ++i) lse.Set(i, 0, fw.lse[static_cast<size_t>(i)]);
    lse.Upload();
    DeviceTensor out(ACL_FLOAT, ContiguousLayout({n, c}));  // poison
    out.Upload();

    const std::string reduction = ReductionName(fc.reduction);
    GradCall call;
    call.grad_loss = g.get();
    call.log_prob = log_prob.get();
    call.target = target.get();
    call.weight = weight ? weight->get() : nullptr;
    const bool zloss = fc.zloss_scale != 0.0;
    call.grad_zloss = zloss ? gz.get() : nullptr;
    call.lse = zloss ? lse.get() : nullptr;
    call.reduction = reduction.c_str();
    call.ignore_index = fc.ignore_index;
    call.label_smoothing = fc.label_smoothing;
    call.zloss_scale = fc.zloss_scale;
    call.out = out.get();
    const GradOutcome outcome = RunGrad(call, TestStream());
    GradRun run;
    run.sync = outcome.phase1 != ACLNN_SUCCESS ? outcome.phase1 : outcome.sync;
    run.message = outcome.phase1 != ACLNN_SUCCESS ? outcome.phase1_message : outcome.sync_message;
    out.Download();
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < c; ++j) run.out.push_back(out.Get(i, j));
    }
    return run;
}

TEST(ForwardRoundTrip, GradOfForwardOutputsEqualsFiniteDifferences) {
    const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {3, 2}, {4, 5}, {3, 16}, {2, 17},
                                                             {5, 33}, {2, 129}, {3, 40}, {1, 300}};
    const double h = 1e-5;
    int cases = 0;
    for (const char *isa : {"avx512", "avx2", "sse4", "scalar"}) {
        EnvGuard cap("OPENACLNN_MAX_ISA", isa);
        uint64_t seed = 5000 + 100 * static_cast<uint64_t>(isa[0]);
        for (int repeat = 0; repeat < 3; ++repeat) {
            for (const auto &[n, c] : shapes) {
                const ForwardCase fc = RoundTripCase(++seed, n, c);
                const ForwardOutcome fw = RunForward(fc, TestStream());
                ASSERT_EQ(fw.sync, ACL_SUCCESS) << fw.sync_message << "\n" << fc.Describe();
                ASSERT_EQ(fw.lse.size(), static_cast<size_t>(n));

                Rng rng(seed);
                std::vector<double> grad_loss(fc.reduction == Reduction::kNone ? static_cast<size_t>(n) : 1);
                for (double &g : grad_loss) g = static_cast<float>(rng.Uniform(-2.0, 2.0));
                const GradRun grad = RunGradOnForward(fc, fw, grad_loss);
                ASSERT_EQ(grad.sync, ACL_SUCCESS) << grad.message << "\n" << fc.Describe();

                // Central differences of the float64 reference loss, one logit at a time.
                const ForwardReference ref = ReferenceForward(fc);
                double objective_scale = 0.0;
                for (size_t k = 0; k < ref.loss.size(); ++k) {
                    objective_scale += std::fabs(grad_loss[k]) * (ref.loss_magnitude[k] + std::fabs(ref.loss[k]));
                }
                std::vector<double> x = fc.logits;
                int failures = 0;
                for (int64_t i = 0; i < n; ++i) {
                    // The size of row i's gradient terms: |g| * (weights and coefficients), bounded crudely by the
                    // sum over the row's |gradient| plus the coefficients the fp32 logProb error multiplies.
                    const double lse = ref.lse[static_cast<size_t>(i)];
                    double row_terms = 0.0;
                    for (int64_t j = 0; j < c; ++j) row_terms += std::fabs(grad.out[static_cast<size_t>(i * c + j)]);
                    for (int64_t j = 0; j < c; ++j) {
                        const size_t k = static_cast<size_t>(i * c + j);
                        const double saved = x[k];
                        x[k] = saved + h;
                        const double up = Objective(fc, x, grad_loss);
                        x[k] = saved - h;
                        const double down = Objective(fc, x, grad_loss);
                        x[k] = saved;
                        const double fd = (up - down) / (2.0 * h);
                        // fp32 logProb/lse error (relative 2^-24 (|x| + |lse| + 1) on p, a few roundings more in
                        // the gradient's fp32 arithmetic) times the row's term size, plus the difference's error.
                        const double u = std::ldexp(1.0, -24);
                        const double tol = 16.0 * u * (std::fabs(saved) + std::fabs(lse) + 1.0) *
                                               (row_terms + std::fabs(fd) + 1e-3) +
                                           1e-15 * objective_scale / h + 1e-7;
                        const double got = grad.out[k];
                        if (!(std::fabs(got - fd) <= tol) && failures++ < 5) {
                            ADD_FAILURE() << "grad[" << i << "][" << j << "] = " << got << ", finite difference "
                                          << fd << " +- " << tol << " (ISA cap " << isa << ")\n" << fc.Describe();
                        }
                    }
                }
                if (failures > 0) return;
                ++cases;
            }
        }
    }
    EXPECT_GT(cases, 0);
}

}  // namespace
}  // namespace openaclnn::test
