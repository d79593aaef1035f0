// Reading and writing one element of an operator's tensors in double, whatever their storage type. Loads are exact
// (every fp16, bf16 and fp32 value is a double); stores round once to nearest even (common/float_convert.h).
// memcpy, not a typed dereference: the addresses come from user views and need not be aligned.
#ifndef OPENACLNN_OPS_COMMON_ELEMENT_ACCESS_H_
#define OPENACLNN_OPS_COMMON_ELEMENT_ACCESS_H_

#include <cstdint>
#include <cstring>

#include "acl/acl_base.h"
#include "common/float_convert.h"

namespace openaclnn {

// A FLOAT, FLOAT16 or BF16 element (anything else is read as BF16: callers have checked the dtype).
inline double LoadFloatAt(const char *element, aclDataType dtype) {
    if (dtype == ACL_FLOAT) {
        float value;
        std::memcpy(&value, element, sizeof value);
        return value;
    }
    uint16_t bits;
    std::memcpy(&bits, element, sizeof bits);
    return dtype == ACL_FLOAT16 ? HalfToFloat(bits) : Bf16ToFloat(bits);
}

inline void StoreFloatAt(char *element, aclDataType dtype, double value) {
    if (dtype == ACL_FLOAT) {
        const float narrowed = static_cast<float>(value);
        std::memcpy(element, &narrowed, sizeof narrowed);
        return;
    }
    const uint16_t bits = dtype == ACL_FLOAT16 ? DoubleToHalf(value) : DoubleToBf16(value);
    std::memcpy(element, &bits, sizeof bits);
}

// An INT32 or INT64 class index.
inline int64_t LoadIndexAt(const char *element, aclDataType dtype) {
    if (dtype == ACL_INT32) {
        int32_t value;
        std::memcpy(&value, element, sizeof value);
        return value;
    }
    int64_t value;
    std::memcpy(&value, element, sizeof value);
    return value;
}

// The same for the reference kernels' inner loops, with the type fixed at compile time.
template <aclDataType kType>
double LoadElement(const void *base, int64_t index) {
    if constexpr (kType == ACL_FLOAT) {
        return static_cast<const float *>(base)[index];
    } else if constexpr (kType == ACL_FLOAT16) {
        return HalfToFloat(static_cast<const uint16_t *>(base)[index]);
    } else {
        return Bf16ToFloat(static_cast<const uint16_t *>(base)[index]);
    }
}

template <aclDataType kType>
void StoreElement(void *base, int64_t index, double value) {
    if constexpr (kType == ACL_FLOAT) {
        static_cast<float *>(base)[index] = static_cast<float>(value);
    } else if constexpr (kType == ACL_FLOAT16) {
        static_cast<uint16_t *>(base)[index] = DoubleToHalf(value);
    } else {
        static_cast<uint16_t *>(base)[index] = DoubleToBf16(value);
    }
}

}  // namespace openaclnn

#endif  // OPENACLNN_OPS_COMMON_ELEMENT_ACCESS_H_
