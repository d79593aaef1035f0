// Checks shared by every operator's phase 1: liveness, dtypes, view geometry, storage bounds and aliasing.
// Each failing check sets the thread's error message (naming the parameter, what it got and what it expects)
// and returns the status code; ACLNN_SUCCESS otherwise.
#ifndef OPENACLNN_OPS_COMMON_TENSOR_CHECKS_H_
#define OPENACLNN_OPS_COMMON_TENSOR_CHECKS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "aclnn/aclnn_base.h"
#include "runtime/runtime.h"

namespace openaclnn {

// "[2, 3]" for messages.
std::string DimsToString(const std::vector<int64_t> &dims);
std::string DataTypeList(std::initializer_list<aclDataType> types);

// Returns from the enclosing function with the status of `expr` when it is not ACLNN_SUCCESS.
#define OPENACLNN_RETURN_IF_ERROR(expr)                                  \
    do {                                                                 \
        const aclnnStatus openaclnn_status_ = (expr);                    \
        if (openaclnn_status_ != ACLNN_SUCCESS) return openaclnn_status_; \
    } while (0)

// Null stage (161001): the two out-parameters of every GetWorkspaceSize call are non-NULL.
aclnnStatus CheckPhase1Outputs(const char *api, const uint64_t *workspaceSize, aclOpExecutor *const *executor);

// Null stage (161001): a required tensor is NULL, a handle is not a live aclTensor, or a non-empty tensor has no
// data address. `tensor` may be NULL when !required.
aclnnStatus CheckTensorPresent(const char *api, const char *name, const aclTensor *tensor, bool required);

// Dtype stage (161002): tensor's dtype is one of `allowed`, its format is not a private (5-D/fractal) one, and its
// data address is aligned to the dtype's size (CheckDataAligned).
aclnnStatus CheckDataType(const char *api, const char *name, const aclTensor *tensor,
                          std::initializer_list<aclDataType> allowed);

// 161002 when `data` is not a multiple of the size of `dtype` (a float at an odd address, say). Such an address is
// refused rather than served: no aclrtMalloc block, no CANN device address and no framework tensor is ever placed
// so, and the kernels may then read elements through typed, vector-width loads. NULL passes (see
// CheckTensorPresent). Used by phase 1 for every tensor and by aclSetInputTensorAddr/aclSetOutputTensorAddr.
aclnnStatus CheckDataAligned(const char *api, const char *name, const void *data, aclDataType dtype);

// Shape stage (561002): the view's dims equal `expected`.
aclnnStatus CheckShape(const char *api, const char *name, const aclTensor *tensor, const std::vector<int64_t> &expected);

// The range of element offsets (relative to data, offset included) that a non-empty view touches.
struct Footprint {
    bool empty;
    int64_t first;  // smallest element offset
    int64_t last;   // largest element offset
};
// False when the arithmetic overflows int64.
bool ComputeFootprint(const aclTensor *tensor, Footprint *footprint);

// Shape stage (561002): every element of the view lies inside its storage (storageDims, and the allocation when
// data points into an aclrtMalloc block), with no int64 overflow in any offset, in elements or in bytes (the storage
// holds at most 2^63 - 1 bytes). An empty view passes whatever its offset.
aclnnStatus CheckViewInStorage(const char *api, const char *name, const aclTensor *tensor);

// True when both are the same view: same data, dtype, dims, strides and offset.
bool SameView(const aclTensor *a, const aclTensor *b);
// True when the byte ranges the two views span intersect (conservative: interleaved views count as overlapping).
bool MayOverlap(const aclTensor *a, const aclTensor *b);
// True when two elements of the view share an address (a zero stride, or strides that collide), so that writing
// the view would write some element twice. Exact for rank <= 2; for higher ranks, conservative.
bool OverlapsItself(const aclTensor *t);

// The address of element 0 of the view (data + offset * element size).
inline const char *ViewBase(const aclTensor *t) {
    return static_cast<const char *>(t->data) + t->offset * static_cast<int64_t>(aclDataTypeSize(t->dtype));
}

}  // namespace openaclnn

#endif  // OPENACLNN_OPS_COMMON_TENSOR_CHECKS_H_
