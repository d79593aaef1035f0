// What the per-target SIMD bodies (grad_hwy-inl.h) share, compiled once in grad_hwy.cpp.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_HWY_SHARED_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_HWY_SHARED_H_

#include "ops/cross_entropy/kernels/grad_kernel.h"

namespace openaclnn::cross_entropy {

// Whether the kernel writes with streaming (non-temporal) stores: when the output is larger than the last-level
// cache could keep anyway. The choice changes only speed, never a value.
bool UseStreamingStores(const GradKernelArgs &args);

// Sets the output size from which streaming stores are used (UINT64_MAX: never, the default); returns the old
// value. For tests and measurements.
uint64_t SetStreamingThreshold(uint64_t bytes);

// The target column's element, computed exactly as the reference kernel computes every element (double, one
// rounding): *out = round(exp(x) * a - b * weight - g). x points to one element of the storage type.
void StoreTargetElement(aclDataType dtype, const void *x, void *out, const GradRowCoefficients &row, double weight);

// One element computed in double and rounded once to dtype: *out = round(exp(x) * a - b * weight) (no g).
void StoreExactElement(aclDataType dtype, float x, void *out, double a, double b, double weight);

}  // namespace openaclnn::cross_entropy

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_HWY_SHARED_H_
