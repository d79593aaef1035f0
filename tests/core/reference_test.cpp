// The float64 reference checked on its own: against central finite differences of the forward objective (PyTorch's
// cross_entropy + z-loss) with respect to the logits, and against the numbers of the operator's documentation.
#include "reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "random_inputs.h"

namespace openaclnn::test {
namespace {

// d objective / d x_ij by central differences with one Richardson step: error O(h^4) + O(eps * |f| / h).
double FiniteDifference(const GradProblem &p, std::vector<double> x, size_t k) {
    const double h = 1e-3;
    auto central = [&](double step) {
        const double x0 = x[k];
        x[k] = x0 + step;
        const double up = ForwardObjective(p, x);
        x[k] = x0 - step;
        const double down = ForwardObjective(p, x);
        x[k] = x0;
        return (up - down) / (2.0 * step);
    };
    const double coarse = central(h);
    const double fine = central(h / 2.0);
    return (4.0 * fine - coarse) / 3.0;
}

struct FdCase {
    uint64_t seed;
    Reduction reduction;
    bool weight;
    int ignore;  // 0 none, 1 some rows, 2 all rows
    double label_smoothing;
    double zloss_scale;
    bool grad_zloss;
};

std::string Describe(const FdCase &c) {
    std::ostringstream s;
    s << "seed=" << c.seed << " reduction=" << ReductionName(c.reduction) << " weight=" << c.weight
      << " ignore=" << c.ignore << " ls=" << c.label_smoothing << " scale=" << c.zloss_scale
      << " gradZloss=" << c.grad_zloss;
    return s.str();
}

void CheckAgainstFiniteDifferences(const FdCase &fc) {
    SCOPED_TRACE(Describe(fc));
    Rng rng(fc.seed);
    GradProblem p;
    p.n = rng.Int(1, 6);
    p.c = rng.Int(1, 9);
    p.reduction = fc.reduction;
    p.label_smoothing = fc.label_smoothing;
    p.zloss_scale = fc.zloss_scale;
    p.ignore_index = rng.Pick(std::vector<int64_t>{-100, -1, p.c + 2, rng.Int(0, p.c - 1)});
    std::vector<double> x(static_cast<size_t>(p.n * p.c));
    for (double &v : x) v = rng.Normal(0.0, 2.0) + 1.5;
    for (int64_t i = 0; i < p.n; ++i) {
        const bool hit = fc.ignore == 2 || (fc.ignore == 1 && (i == 0 || rng.Chance(0.4)));
        int64_t t = rng.Int(0, p.c - 1);
        if (t == p.ignore_index && p.c > 1) t = (t + 1) % p.c;
        p.target.push_back(hit ? p.ignore_index : t);
    }
    if (fc.weight) {
        for (int64_t j = 0; j < p.c; ++j) p.weight.push_back(rng.Uniform(0.1, 2.5));
    }
    const int64_t len = fc.reduction == Reduction::kNone ? p.n : 1;
    for (int64_t i = 0; i < len; ++i) p.grad_loss.push_back(rng.Uniform(-2.0, 2.0));
    if (fc.grad_zloss) {
        for (int64_t i = 0; i < len; ++i) p.grad_zloss.push_back(rng.Uniform(-2.0, 2.0));
    }
    LogSoftmaxRows(x, p.n, p.c, &p.log_prob, &p.lse);
    const GradReference ref = ReferenceGrad(p);
    ASSERT_TRUE(ref.bad_rows.empty());
    for (size_t k = 0; k < x.size(); ++k) {
        const double fd = FiniteDifference(p, x, k);
        EXPECT_NEAR(ref.out[k], fd, 1e-7 * (1.0 + std::fabs(fd))) << "element " << k / p.c << "," << k % p.c;
    }
}

TEST(ReferenceGrad, EqualsFiniteDifferencesOfForwardLoss) {
    uint64_t seed = 1;
    const Reduction reductions[] = {Reduction::kNone, Reduction::kMean, Reduction::kSum};
    for (Reduction r : reductions) {
        for (bool weight : {false, true}) {
            for (int ignore : {0, 1, 2}) {
                for (double ls : {0.0, 0.3, 1.0}) {
                    for (int z = 0; z < 3; ++z) {
                        const double scale = z == 0 ? 0.0 : (z == 1 ? 0.07 : -0.03);
                        CheckAgainstFiniteDifferences({seed++, r, weight, ignore, ls, scale, z == 2});
                        if (HasFailure()) return;
                    }
                }
            }
        }
    }
}

TEST(ReferenceGrad, MeanWithZeroTotalWeightKeepsOnlyZlossPart) {
    // Weights of the targeted classes are 0: the cross-entropy part vanishes (PyTorch gives zeros), the z-loss part
    // still divides by the count of unmasked rows, and that is the derivative of the forward objective.
    GradProblem p;
    p.n = 3;
    p.c = 4;
    p.reduction = Reduction::kMean;
    p.target = {1, 1, 3};
    p.weight = {0.5, 0.0, 2.0, 0.0};
    p.grad_loss = {0.7};
    p.grad_zloss = {0.2};
    p.zloss_scale = 0.1;
    p.label_smoothing = 0.2;
    std::vector<double> x = {0.1, -0.3, 1.2, 0.4, 2.0, 0.0, -1.0, 0.5, 0.3, 0.3, -0.2, 0.8};
    LogSoftmaxRows(x, p.n, p.c, &p.log_prob, &p.lse);
    const GradReference ref = ReferenceGrad(p);
    for (size_t k = 0; k < x.size(); ++k) {
        const double prob = std::exp(p.log_prob[k]);
        const double expected = prob * 2.0 * 0.1 * p.lse[k / 4] * (0.7 + 0.2) / 3.0;
        EXPECT_NEAR(ref.out[k], expected, 1e-15);
        EXPECT_NEAR(ref.out[k], FiniteDifference(p, x, k), 1e-8);
    }
    p.zloss_scale = 0.0;
    for (double v : ReferenceGrad(p).out) EXPECT_EQ(v, 0.0);
}

TEST(ReferenceGrad, AllIgnoredMeanIsZero) {
    GradProblem p;
    p.n = 2;
    p.c = 3;
    p.reduction = Reduction::kMean;
    p.ignore_index = 5;
    p.target = {5, 5};
    p.grad_loss = {1.0};
    p.grad_zloss = {1.0};
    p.zloss_scale = 0.5;
    p.lse = {3.0, 4.0};
    p.label_smoothing = 0.4;
    p.log_prob.assign(6, std::log(1.0 / 3.0));
    for (double v : ReferenceGrad(p).out) EXPECT_EQ(v, 0.0);
}

TEST(ReferenceGrad, OutOfRangeTargetRowIsNanAndLeftOutOfDenominators) {
    GradProblem p;
    p.n = 3;
    p.c = 2;
    p.reduction = Reduction::kMean;
    p.target = {0, 7, 1};
    p.grad_loss = {1.0};
    p.log_prob.assign(6, std::log(0.5));
    const GradReference ref = ReferenceGrad(p);
    ASSERT_EQ(ref.bad_rows, std::vector<int64_t>{1});
    EXPECT_TRUE(std::isnan(ref.out[2]) && std::isnan(ref.out[3]));
    // W = 2 (rows 0 and 2): out[0][0] = (0.5 - 1) / 2.
    EXPECT_DOUBLE_EQ(ref.out[0], -0.25);
    EXPECT_DOUBLE_EQ(ref.out[1], 0.25);
}

TEST(ReferenceGrad, MatchesDocumentedExample) {
    // The example of aclnnCrossEntropyLossGrad.md: mean, gradLoss 0.1, logProb -0.2, targets 0, weights 1.
    GradProblem p;
    p.n = 2;
    p.c = 3;
    p.reduction = Reduction::kMean;
    p.target = {0, 0};
    p.weight = {1.0, 1.0, 1.0};
    p.grad_loss = {0.1};
    p.log_prob.assign(6, -0.2);
    const GradReference ref = ReferenceGrad(p);
    const double expected[] = {-0.0091, 0.0409, 0.0409, -0.0091, 0.0409, 0.0409};
    for (int k = 0; k < 6; ++k) EXPECT_NEAR(ref.out[k], expected[k], 5e-5);
}

}  // namespace
}  // namespace openaclnn::test
