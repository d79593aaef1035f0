// What the per-target SIMD bodies (grad_hwy-inl.h) share, compiled once in grad_hwy.cpp.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_HWY_SHARED_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_HWY_SHARED_H_

#include "ops/cross_entropy/kernels/grad_kernel.h"

namespace openaclnn::cross_entropy {

// Whether the kernel writes with streaming (non-temporal) stores: when the output is larger than the last-level
// cache could keep anyway and its rows are long. The choice changes only speed, never a value.
bool UseStreamingStores(const GradKernelArgs &args);

// The same for fp32 rows with weights done in groups (RunWeightedRows): from the output threshold on, whatever the
// rows' length, the groups' peels and tails costing less than the single rows' do.
bool UseStreamingStoresForRowGroups(const GradKernelArgs &args);

// From which sizes streaming stores are used: the whole output's bytes and one row's (both must be reached).
struct StreamingThresholds {
    uint64_t output_bytes;
    uint64_t row_bytes;
};

// Sets the thresholds ({0, 0}: always stream; {UINT64_MAX, ...}: never); returns the old ones. For tests and
// measurements.
StreamingThresholds SetStreamingThresholds(StreamingThresholds thresholds);

// The target column's element, computed exactly as the reference kernel computes every element (double, one
// rounding): *out = round(exp(x) * a - b * weight - g). x points to one element of the storage type.
void StoreTargetElement(aclDataType dtype, const void *x, void *out, const GradRowCoefficients &row, double weight);

// Whether a row's coefficients are outside what the vector path's fp32 arithmetic represents exactly enough: |a|
// nonzero and finite but outside [2^-125, 2^76], or |b| outside [2^-125, 2^126] (a gradLoss near fp32's smallest or
// beyond 1e22, a total weight near fp32's limits). As floats they would be subnormal, zero or infinite, or exp(r) * a
// could leave the normal range before its scaling by 2^k. And the vector path clamps x to [-172, 176] before its
// exp, where exp(-172) * |a| < 2^-172 is zero in every output format only for |a| <= 2^76 (with |a| = 2^100, an
// input of -180 gave 2^-148 instead of 0). Such rows are computed element by element in double (StoreExactRow).
inline bool RowNeedsDouble(const GradRowCoefficients &row) {
    const auto outside = [](double v, double top) {
        const double m = std::fabs(v);
        return m != 0.0 && std::isfinite(m) && (m < 0x1p-125 || m > top);
    };
    return outside(row.a, 0x1p76) || outside(row.b, 0x1p126);
}

// out[j] = round(exp(in[j]) * a - b * w[j]) for j in [0, count), each in double as StoreExactElement; in and out
// are of dtype and may be the same; w is nullptr for weights of one.
void StoreExactRow(aclDataType dtype, const void *in, void *out, size_t count, const GradRowCoefficients &row,
                   const float *w);

// One element computed in double and rounded once to dtype: *out = round(exp(x) * a - b * weight) (no g).
void StoreExactElement(aclDataType dtype, float x, void *out, double a, double b, double weight);

}  // namespace openaclnn::cross_entropy

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_HWY_SHARED_H_
