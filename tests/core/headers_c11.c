/* Every public header compiles as C11 and the libraries link from C. */
#include <stdio.h>

#include "acl/acl.h"
#include "acl/acl_base.h"
#include "acl/acl_rt.h"
#include "aclnn/acl_meta.h"
#include "aclnn/aclnn_base.h"
#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "aclnnop/aclnn_cross_entropy_loss_grad.h"

int main(void) {
    aclDataType dtype = ACL_BF16;
    aclFormat format = ACL_FORMAT_ND;
    aclrtMemcpyKind kind = ACL_MEMCPY_DEVICE_TO_HOST;
    aclrtMemMallocPolicy policy = ACL_MEM_MALLOC_HUGE_FIRST;
    aclnnStatus status = ACLNN_ERR_INNER_TILING_ERROR;
    aclError error = ACL_ERROR_RT_VECTOR_CORE_EXCEPTION;
    aclFloat16 half = aclFloatToFloat16(1.5f);
    int64_t dims[2] = {2, 3};
    float data[6] = {0};
    aclTensor *tensor = aclCreateTensor(dims, 2, ACL_FLOAT, NULL, 0, format, dims, 2, data);
    aclnnStatus (*phase1)(const aclTensor *, const aclTensor *, const aclTensor *, const aclTensor *, const aclTensor *,
                          const aclTensor *, char *, int64_t, double, double, const aclTensor *, uint64_t *,
                          aclOpExecutor **) = aclnnCrossEntropyLossGradGetWorkspaceSize;
    aclnnStatus (*phase2)(void *, uint64_t, aclOpExecutor *, aclrtStream) = aclnnCrossEntropyLossGrad;
    bool repeatable = false;
    if (dtype != 27 || format != 2 || kind != 2 || policy != 0 || status != 561002 || error != 507035 ||
        ACL_SUCCESS != 0 || ACLNN_SUCCESS != 0 || aclDataTypeSize(ACL_BF16) != 2 || half != 0x3e00 ||
        aclFloat16ToFloat(half) != 1.5f || tensor == NULL || phase1 == NULL || phase2 == NULL || repeatable) {
        printf("C11 header check failed\n");
        return 1;
    }
    aclDestroyTensor(tensor);
    printf("ok\n");
    return 0;
}
