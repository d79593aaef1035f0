// Every public header compiles as C++11, with enumerators written the way CANN samples write them.
#include <cstdio>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "aclnn/aclnn_base.h"
#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "aclnnop/aclnn_cross_entropy_loss_grad.h"

int main() {
    const aclDataType dtype = aclDataType::ACL_FLOAT;
    const aclFormat format = aclFormat::ACL_FORMAT_ND;
    const aclrtMemcpyKind kind = aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_DEVICE;
    const aclrtMemMallocPolicy policy = aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_FIRST;
    static_assert(sizeof(aclFloat16) == 2, "aclFloat16 is 16 bits");
    static_assert(sizeof(aclnnStatus) == 4, "aclnnStatus is int32_t");
    if (dtype != 0 || format != 2 || kind != 1 || policy != 0 || aclDataTypeSize(aclDataType::ACL_INT64) != 8) {
        std::printf("C++11 header check failed\n");
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
