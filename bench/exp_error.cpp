// Relative error of exp(x) a / 2^k as the 16-bit gradient kernels form it (grad_hwy-inl.h: ExpShifted, the reduction
// of ScaledExp, ScaledPoly with the coefficients scaled by a), for degree 5 with the two-step reduction (fp16 rows with
// a guarded bias term), degree 5 with the one-step one (other fp16 rows, bf16 rows with a bias term) and degree 4
// (one step, bf16 rows without), against the earlier form (Estrin's scheme for p - 1, then (p - 1) a + a), over
// every fp16 and bf16 input with -86 <= x <= 88 and 2048 mantissas of a, at the exponents 0 and -119, -122, -125
// (the least a of the vector path, RowNeedsDouble), where the a_i of the highest degrees are subnormal: m = p(r) a is
// normal at every one of them. The operations are the kernels' one for one, each a correctly rounded fp32 operation
// (std::fmaf for the fused ones), so they give the kernels' values on every target; the exact value is taken in long
// double.
//
//   build/bench/exp_error   (built with the benchmarks, -ffp-contract=off; under a minute)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

float Bf16Value(uint16_t bits) {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
}

float HalfValue(uint16_t bits) {
    const int exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff;
    const float magnitude = exponent == 0    ? std::ldexp(static_cast<float>(fraction), -24)
                            : exponent == 31 ? (fraction ? NAN : INFINITY)
                                             : std::ldexp(static_cast<float>(1024 + fraction), exponent - 25);
    return bits & 0x8000 ? -magnitude : magnitude;
}

constexpr float kC5[4] = {0x1.fffdfcp-2f, 0x1.5557bp-3f, 0x1.572a68p-5f, 0x1.106256p-7f};
constexpr float kC4[3] = {0x1.0006b8p-1f, 0x1.571d2p-3f, 0x1.5224e4p-5f};

}  // namespace

int main() {
    std::vector<float> inputs;
    for (uint32_t bits = 0; bits < 65536; ++bits) {
        for (const float x : {Bf16Value(static_cast<uint16_t>(bits)), HalfValue(static_cast<uint16_t>(bits))}) {
            if (std::isfinite(x) && x >= -86.0f && x <= 88.0f) inputs.push_back(x);
        }
    }
    std::vector<float> scales;
    for (int j = 0; j < 1024; ++j) scales.push_back(1.0f + static_cast<float>(j) / 1024.0f);
    std::mt19937 rng(7);
    for (int j = 0; j < 1024; ++j) {
        const uint32_t u = 0x3f800000u | (rng() & 0x7fffffu);
        float a;
        std::memcpy(&a, &u, sizeof(a));
        scales.push_back(a);
    }
    struct Variant {
        int degree;
        bool two_step;
    };
    for (const Variant variant : {Variant{5, true}, Variant{5, false}, Variant{4, false}}) {
        const int degree = variant.degree;
        double worst_horner = 0.0, worst_estrin = 0.0;
        for (const float x : inputs) {
            const float t = std::fmaf(x, 1.44269504088896341f, 12582912.0f);
            const float kf = t - 12582912.0f;
            float r;
            if (variant.two_step) {
                r = std::fmaf(kf, -0.693145751953125f, x);
                r = std::fmaf(kf, -1.42860676533018708e-6f, r);
            } else {
                r = std::fmaf(kf, -0.693147182464599609375f, x);
            }
            const long double exact = std::exp(static_cast<long double>(x)) / std::ldexp(1.0L, static_cast<int>(kf));
            for (const float mantissa : scales) {
                for (const int exponent : {0, -119, -122, -125}) {
                    const float a = std::ldexp(mantissa, exponent);
                    float horner, estrin;
                    const float r2 = r * r;
                    if (degree == 5) {
                        float q = std::fmaf(a * kC5[3], r, a * kC5[2]);
                        q = std::fmaf(q, r, a * kC5[1]);
                        q = std::fmaf(q, r, a * kC5[0]);
                        q = std::fmaf(q, r, a);
                        horner = std::fmaf(q, r, a);
                        const float c23 = std::fmaf(kC5[1], r, kC5[0]), c45 = std::fmaf(kC5[3], r, kC5[2]);
                        estrin = std::fmaf(std::fmaf(std::fmaf(c45, r2, c23), r2, r), a, a);
                    } else {
                        float q = std::fmaf(a * kC4[2], r, a * kC4[1]);
                        q = std::fmaf(q, r, a * kC4[0]);
                        q = std::fmaf(q, r, a);
                        horner = std::fmaf(q, r, a);
                        const float c23 = std::fmaf(kC4[1], r, kC4[0]);
                        estrin = std::fmaf(std::fmaf(std::fmaf(kC4[2], r2, c23), r2, r), a, a);
                    }
                    const long double want = exact * a;
                    worst_horner = std::fmax(worst_horner, static_cast<double>(std::fabs((horner - want) / want)));
                    worst_estrin = std::fmax(worst_estrin, static_cast<double>(std::fabs((estrin - want) / want)));
                }
            }
        }
        std::printf(
            "degree %d, %s reduction: max relative error, scaled Horner 2^%.3f, Estrin 2^%.3f (%zu inputs x %zu a)\n",
            degree, variant.two_step ? "two-step" : "one-step", std::log2(worst_horner), std::log2(worst_estrin),
            inputs.size(), 4 * scales.size());
    }
}
