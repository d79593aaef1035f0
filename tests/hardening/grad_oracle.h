// A small, self-contained float64 oracle for aclnnCrossEntropyLossGrad, shared by the fuzzer (fuzz/), the
// concurrency stress test (tests/stress/) and the hardening tests. It reads tensors through their views exactly as
// aclCreateTensor describes them (element offset, element strides), computes each term of the spec's formula in
// double, and judges an output element with a tolerance built from the magnitudes of those terms:
//
//   out_ij = p_ij * nll_i - [j == t_i] nll_i                        (predictionsGradLossOut)
//          + p_ij * smooth_i * sum_k w_k - smooth_i * w_j           (predictionsGradSmoothLoss)
//          + p_ij * lseGrad_i                                       (zlossOutputGrad)
//
// with p = exp(logProb), nll_i = grad * (1 - ls) * w[t_i] * mask_i (/ sum_i mask_i w[t_i] for mean),
// smooth_i = grad * ls / C * mask_i (same denominator), lseGrad_i = 2 scale lse_i mask_i (grad + gradZloss)
// (/ sum_i mask_i for mean). DESIGN.md decides the open cases: a zero denominator gives zeros; a row whose target is
// outside [0, C) and not ignoreIndex is NaN and counts in neither denominator.
//
// It is deliberately independent of the library: no shared headers, its own fp16/bf16 decoding.
#ifndef OPENACLNN_TESTS_HARDENING_GRAD_ORACLE_H_
#define OPENACLNN_TESTS_HARDENING_GRAD_ORACLE_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "acl/acl.h"

namespace openaclnn::oracle {

inline double HalfBitsToDouble(uint16_t h) {
    const int sign = (h >> 15) & 1;
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    double value;
    if (exponent == 0) {
        value = std::ldexp(static_cast<double>(mantissa), -24);
    } else if (exponent == 31) {
        value = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    } else {
        value = std::ldexp(static_cast<double>(mantissa + 1024), exponent - 25);
    }
    return sign ? -value : value;
}

inline double Bf16BitsToDouble(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// Round to nearest even from float (inputs are generated as floats; NaN stays NaN, overflow to infinity).
inline uint16_t FloatToHalfBits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00u;
    if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
    if (abs < 0x33000001u) return sign;            // below half the smallest subnormal: zero
    const int exponent = static_cast<int>(abs >> 23);
    uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    if (exponent < 113) {  // a subnormal half: count units of 2^-24, rounding to nearest even
        const double units = std::ldexp(static_cast<double>(mantissa), exponent - 150) * 16777216.0;
        return sign | static_cast<uint16_t>(std::nearbyint(units));
    }
    uint32_t half = ((static_cast<uint32_t>(exponent) - 112) << 10) | ((mantissa >> 13) & 0x3ffu);
    const uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
    return sign | static_cast<uint16_t>(half);
}

inline uint16_t FloatToBf16Bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

inline size_t ElementSize(aclDataType dtype) {
    switch (dtype) {
        case ACL_FLOAT: case ACL_INT32: return 4;
        case ACL_FLOAT16: case ACL_BF16: return 2;
        case ACL_INT64: return 8;
        default: return 0;
    }
}

// A view as aclCreateTensor describes it: element k of dimension d is `strides[d]` elements further.
struct View {
    const void *data = nullptr;
    aclDataType dtype = ACL_FLOAT;
    int64_t offset = 0;
    std::vector<int64_t> strides;

    int64_t Index(int64_t i0, int64_t i1 = 0) const {
        int64_t index = offset;
        if (!strides.empty()) index += i0 * strides[0];
        if (strides.size() > 1) index += i1 * strides[1];
        return index;
    }
    double Float(int64_t i0, int64_t i1 = 0) const {
        const char *p = static_cast<const char *>(data) + Index(i0, i1) * static_cast<int64_t>(ElementSize(dtype));
        if (dtype == ACL_FLOAT) {
            float f;
            std::memcpy(&f, p, 4);
            return f;
        }
        uint16_t h;
        std::memcpy(&h, p, 2);
        return dtype == ACL_FLOAT16 ? HalfBitsToDouble(h) : Bf16BitsToDouble(h);
    }
    int64_t Int(int64_t i0) const {
        const char *p = static_cast<const char *>(data) + Index(i0) * static_cast<int64_t>(ElementSize(dtype));
        if (dtype == ACL_INT32) {
            int32_t v;
            std::memcpy(&v, p, 4);
            return v;
        }
        int64_t v;
        std::memcpy(&v, p, 8);
        return v;
    }
};

enum class Reduction { kNone, kMean, kSum };

// Everything the operator reads, as views (gradLoss/gradZloss: element 0 for mean and sum).
struct GradInputs {
    int64_t n = 0;
    int64_t c = 0;
    Reduction reduction = Reduction::kMean;
    View grad_loss, log_prob, target;
    bool has_weight = false, has_grad_zloss = false, has_lse = false;
    View weight, grad_zloss, lse;
    int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    double zloss_scale = 0.0;
};

// The per-row terms; the element value and its tolerance follow from them and p_ij, w_j.
struct GradRowTerms {
    bool masked = false;  // ignored (or all-zero mean): the row is +0 everywhere
    bool bad = false;     // target out of range: NaN row
    int64_t target = 0;
    double nll = 0, smooth = 0, lse_grad = 0;
};

struct GradOracle {
    GradInputs in;
    std::vector<GradRowTerms> rows;
    double weight_sum = 0;  // sum_k w_k
    int64_t bad_rows = 0;

    double WeightAt(int64_t j) const { return in.has_weight ? in.weight.Float(j) : 1.0; }

    explicit GradOracle(const GradInputs &inputs) : in(inputs) {
        rows.resize(static_cast<size_t>(in.n));
        if (in.n == 0 || in.c == 0) return;
        double denominator = 0;  // sum of w[t_i] over unmasked rows, in row order
        int64_t unmasked = 0;
        for (int64_t i = 0; i < in.n; ++i) {
            GradRowTerms &r = rows[static_cast<size_t>(i)];
            r.target = in.target.Int(i);
            if (r.target == in.ignore_index) {
                r.masked = true;
            } else if (r.target < 0 || r.target >= in.c) {
                r.bad = true;
                ++bad_rows;
            } else {
                denominator += WeightAt(r.target);
                ++unmasked;
            }
        }
        for (int64_t j = 0; j < in.c; ++j) weight_sum += WeightAt(j);
        const bool mean = in.reduction == Reduction::kMean;
        const bool per_row = in.reduction == Reduction::kNone;
        for (int64_t i = 0; i < in.n; ++i) {
            GradRowTerms &r = rows[static_cast<size_t>(i)];
            if (r.masked || r.bad) continue;
            const double grad = in.grad_loss.Float(per_row ? i : 0);
            // lossOutGrad, nllLossGrad and smoothLossGrad of the spec; D == 0 gives zeros (DESIGN).
            double loss_out = grad * (1.0 - in.label_smoothing);
            double smooth = grad * in.label_smoothing / static_cast<double>(in.c);
            if (mean) {
                if (denominator == 0.0) {
                    loss_out = 0.0;
                    smooth = 0.0;
                } else {
                    loss_out /= denominator;
                    smooth /= denominator;
                }
            }
            r.nll = loss_out * WeightAt(r.target);
            r.smooth = smooth;
            if (in.zloss_scale != 0.0) {
                const double grad_z = grad + (in.has_grad_zloss ? in.grad_zloss.Float(per_row ? i : 0) : 0.0);
                double zloss_grad = grad_z;
                if (mean) zloss_grad = unmasked ? grad_z / static_cast<double>(unmasked) : 0.0;
                r.lse_grad = 2.0 * in.zloss_scale * in.lse.Float(i) * zloss_grad;
            }
        }
    }

    // The exact value and the sum of the magnitudes of the terms added into it.
    void Element(int64_t i, int64_t j, double *value, double *magnitude) const {
        const GradRowTerms &r = rows[static_cast<size_t>(i)];
        if (r.masked) {
            *value = 0.0;
            *magnitude = 0.0;
            return;
        }
        if (r.bad) {
            *value = std::numeric_limits<double>::quiet_NaN();
            *magnitude = 0.0;
            return;
        }
        const double p = std::exp(in.log_prob.Float(i, j));
        const double w = WeightAt(j);
        const double t1 = p * r.nll, t2 = (j == r.target) ? r.nll : 0.0;
        const double t3 = p * r.smooth * weight_sum, t4 = r.smooth * w, t5 = p * r.lse_grad;
        *value = t1 - t2 + t3 - t4 + t5;
        *magnitude = std::fabs(t1) + std::fabs(t2) + std::fabs(t3) + std::fabs(t4) + std::fabs(t5);
    }

    // The row's coefficient of p: an error in p (an exp that flushes a tiny result to zero) costs this much.
    double RowScale(int64_t i) const {
        const GradRowTerms &r = rows[static_cast<size_t>(i)];
        return std::fabs(r.nll) + std::fabs(r.smooth * weight_sum) + std::fabs(r.lse_grad);
    }
};

struct DtypeLimits {
    double epsilon;        // unit roundoff of the stored format (half an ulp at 1)
    double tiny;           // smallest subnormal
    double max_finite;
};

inline DtypeLimits LimitsOf(aclDataType dtype) {
    switch (dtype) {
        case ACL_FLOAT16: return {std::ldexp(1.0, -11), std::ldexp(1.0, -24), 65504.0};
        case ACL_BF16: return {std::ldexp(1.0, -8), std::ldexp(1.0, -133), 3.3895313892515355e38};
        default: return {std::ldexp(1.0, -24), std::ldexp(1.0, -149), 3.4028234663852886e38};
    }
}

enum class Verdict { kOk, kMismatch, kSkipped };

// Judges one stored output element. Arithmetic is fp32 (each operation within a few fp32 ulps of its operands'
// magnitudes, exp included), then one rounding to the stored format. Elements whose terms leave fp32's range
// (where fp32 and float64 legitimately part ways: inf * 0 and the like) are skipped, not judged.
inline Verdict Judge(const GradOracle &oracle, aclDataType dtype, int64_t i, int64_t j, double got,
                     std::string *why) {
    double want, magnitude;
    oracle.Element(i, j, &want, &magnitude);
    if (oracle.rows[static_cast<size_t>(i)].bad) {
        if (std::isnan(got)) return Verdict::kOk;
        if (why) *why = "expected NaN (target out of range), got " + std::to_string(got);
        return Verdict::kMismatch;
    }
    // Past fp32's range (or NaN/infinite inputs): fp32 and float64 legitimately part ways (inf * 0 and the like).
    const double x = oracle.in.log_prob.Float(i, j);
    // A row coefficient beyond fp32's range is infinite in fp32 arithmetic, whatever p it multiplies.
    if (std::isnan(want) || !std::isfinite(magnitude) || magnitude > 1e36 || std::isnan(x) || x > 80.0 ||
        !(oracle.RowScale(i) <= 1e36)) {
        return Verdict::kSkipped;
    }
    const DtypeLimits limits = LimitsOf(dtype);
    const double f32 = std::ldexp(1.0, -24);
    const double tolerance = magnitude * (2.0 * limits.epsilon + 64.0 * f32) + 2.0 * limits.tiny +
                             oracle.RowScale(i) * std::ldexp(1.0, -125);
    if (std::fabs(want) > limits.max_finite - tolerance) {
        // At or past the format's overflow: infinity of the right sign, or the largest finite values.
        if (std::isinf(got) && (got > 0) == (want > 0)) return Verdict::kOk;
        if (std::isfinite(got) && std::fabs(got - want) <= tolerance) return Verdict::kOk;
        if (why) *why = "expected about " + std::to_string(want) + " (overflow range), got " + std::to_string(got);
        return Verdict::kMismatch;
    }
    if (std::isfinite(got) && std::fabs(got - want) <= tolerance) return Verdict::kOk;
    if (why) {
        char text[256];
        std::snprintf(text, sizeof text, "expected %.9g (tolerance %.3g), got %.9g", want, tolerance, got);
        *why = text;
    }
    return Verdict::kMismatch;
}

}  // namespace openaclnn::oracle

#endif  // OPENACLNN_TESTS_HARDENING_GRAD_ORACLE_H_
