// aclTensor: a view (dims, element strides, element offset) over a storage (dims) at an address. Creation checks
// only what makes a description meaningful; whether a view fits its storage is each operator's shape check.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_set>

#include "runtime/runtime.h"

namespace openaclnn {
namespace {

constexpr uint64_t kTensorMagic = 0x6f61636c6e6e5454ull;  // "oaclnnTT"
constexpr uint64_t kMaxRank = 8;

std::mutex g_tensors_mutex;
std::unordered_set<const aclTensor *> &LiveTensors() {
    static auto *tensors = new std::unordered_set<const aclTensor *>();
    return *tensors;
}

int64_t Product(const std::vector<int64_t> &dims) {
    int64_t product = 1;
    for (int64_t d : dims) {
        if (__builtin_mul_overflow(product, d, &product)) return -1;
    }
    return product;
}

aclnnStatus CopyDims(const aclTensor *tensor, const std::vector<int64_t> &values, int64_t **out, uint64_t *count,
                     const char *api) {
    if (!IsLiveTensor(tensor)) {
        return Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: tensor %p is not a live aclTensor", api,
                    static_cast<const void *>(tensor));
    }
    if (!out || !count) return Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: output pointer is NULL", api);
    int64_t *copy = new (std::nothrow) int64_t[values.empty() ? 1 : values.size()];
    if (!copy) return Fail(ACLNN_ERR_INNER, "%s: out of memory", api);
    if (!values.empty()) std::memcpy(copy, values.data(), values.size() * sizeof(int64_t));
    *out = copy;
    *count = values.size();
    return ACLNN_SUCCESS;
}

const aclTensor *LiveOrFail(const aclTensor *tensor, const char *api) {
    if (!IsLiveTensor(tensor)) {
        Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: tensor %p is not a live aclTensor", api, static_cast<const void *>(tensor));
        return nullptr;
    }
    return tensor;
}

}  // namespace

bool IsLiveTensor(const aclTensor *t) {
    if (!t) return false;
    std::lock_guard<std::mutex> lock(g_tensors_mutex);
    return LiveTensors().count(t) != 0;
}

}  // namespace openaclnn

int64_t aclTensor::NumElements() const { return openaclnn::Product(view_dims); }
int64_t aclTensor::StorageElements() const { return openaclnn::Product(storage_dims); }

using namespace openaclnn;

extern "C" {

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType, const int64_t *stride,
                           int64_t offset, aclFormat format, const int64_t *storageDims, uint64_t storageDimsNum,
                           void *tensorData) {
    if (viewDimsNum > kMaxRank || storageDimsNum > kMaxRank) {
        Fail(ACLNN_ERR_PARAM_INVALID, "aclCreateTensor: rank is %llu (storage rank %llu), expected at most %llu",
             static_cast<unsigned long long>(viewDimsNum), static_cast<unsigned long long>(storageDimsNum),
             static_cast<unsigned long long>(kMaxRank));
        return nullptr;
    }
    if (viewDimsNum > 0 && !viewDims) {
        Fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateTensor: viewDims is NULL with viewDimsNum %llu",
             static_cast<unsigned long long>(viewDimsNum));
        return nullptr;
    }
    if (storageDimsNum > 0 && !storageDims) {
        Fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateTensor: storageDims is NULL with storageDimsNum %llu",
             static_cast<unsigned long long>(storageDimsNum));
        return nullptr;
    }
    if (!IsKnownDataType(dataType)) {
        Fail(ACLNN_ERR_PARAM_INVALID, "aclCreateTensor: dataType is %d, expected an aclDataType",
             static_cast<int>(dataType));
        return nullptr;
    }
    if (offset < 0) {
        Fail(ACLNN_ERR_PARAM_INVALID, "aclCreateTensor: offset is %lld, expected >= 0",
             static_cast<long long>(offset));
        return nullptr;
    }
    for (uint64_t k = 0; k < viewDimsNum; ++k) {
        if (viewDims[k] < 0) {
            Fail(ACLNN_ERR_PARAM_INVALID, "aclCreateTensor: viewDims[%llu] is %lld, expected >= 0",
                 static_cast<unsigned long long>(k), static_cast<long long>(viewDims[k]));
            return nullptr;
        }
    }
    for (uint64_t k = 0; k < storageDimsNum; ++k) {
        if (storageDims[k] < 0) {
            Fail(ACLNN_ERR_PARAM_INVALID, "aclCreateTensor: storageDims[%llu] is %lld, expected >= 0",
                 static_cast<unsigned long long>(k), static_cast<long long>(storageDims[k]));
            return nullptr;
        }
    }
    auto *tensor = new (std::nothrow) aclTensor();
    if (!tensor) {
        Fail(ACLNN_ERR_INNER, "aclCreateTensor: out of memory");
        return nullptr;
    }
    tensor->magic = kTensorMagic;
    tensor->dtype = dataType;
    tensor->format = format;
    tensor->view_dims.assign(viewDims, viewDims + viewDimsNum);
    if (stride) {
        tensor->strides.assign(stride, stride + viewDimsNum);
    } else {
        // Contiguous (row-major); a stride past int64 is left to the operator's storage check to refuse.
        tensor->strides.assign(viewDimsNum, 1);
        for (int64_t k = static_cast<int64_t>(viewDimsNum) - 2; k >= 0; --k) {
            int64_t next = 0;
            if (__builtin_mul_overflow(tensor->strides[k + 1], std::max<int64_t>(viewDims[k + 1], 1), &next)) {
                next = INT64_MAX;
            }
            tensor->strides[k] = next;
        }
    }
    tensor->offset = offset;
    tensor->storage_dims.assign(storageDims, storageDims + storageDimsNum);
    tensor->data = tensorData;
    {
        std::lock_guard<std::mutex> lock(g_tensors_mutex);
        LiveTensors().insert(tensor);
    }
    return tensor;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor) {
    if (!tensor) return ACLNN_SUCCESS;
    {
        std::lock_guard<std::mutex> lock(g_tensors_mutex);
        if (LiveTensors().erase(tensor) == 0) {
            return Fail(ACLNN_ERR_PARAM_INVALID,
                        "aclDestroyTensor: tensor %p is not a live aclTensor (never created or already destroyed)",
                        static_cast<const void *>(tensor));
        }
    }
    delete tensor;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetViewShape(const aclTensor *tensor, int64_t **viewDims, uint64_t *viewDimsNum) {
    if (!LiveOrFail(tensor, "aclGetViewShape")) return ACLNN_ERR_PARAM_NULLPTR;
    return CopyDims(tensor, tensor->view_dims, viewDims, viewDimsNum, "aclGetViewShape");
}

aclnnStatus aclGetViewStrides(const aclTensor *tensor, int64_t **stridesValue, uint64_t *stridesNum) {
    if (!LiveOrFail(tensor, "aclGetViewStrides")) return ACLNN_ERR_PARAM_NULLPTR;
    return CopyDims(tensor, tensor->strides, stridesValue, stridesNum, "aclGetViewStrides");
}

aclnnStatus aclGetStorageShape(const aclTensor *tensor, int64_t **storageDims, uint64_t *storageDimsNum) {
    if (!LiveOrFail(tensor, "aclGetStorageShape")) return ACLNN_ERR_PARAM_NULLPTR;
    return CopyDims(tensor, tensor->storage_dims, storageDims, storageDimsNum, "aclGetStorageShape");
}

aclnnStatus aclGetViewOffset(const aclTensor *tensor, int64_t *offset) {
    if (!LiveOrFail(tensor, "aclGetViewOffset")) return ACLNN_ERR_PARAM_NULLPTR;
    if (!offset) return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetViewOffset: offset is NULL");
    *offset = tensor->offset;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetFormat(const aclTensor *tensor, aclFormat *format) {
    if (!LiveOrFail(tensor, "aclGetFormat")) return ACLNN_ERR_PARAM_NULLPTR;
    if (!format) return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetFormat: format is NULL");
    *format = tensor->format;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetDataType(const aclTensor *tensor, aclDataType *dataType) {
    if (!LiveOrFail(tensor, "aclGetDataType")) return ACLNN_ERR_PARAM_NULLPTR;
    if (!dataType) return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetDataType: dataType is NULL");
    *dataType = tensor->dtype;
    return ACLNN_SUCCESS;
}

}  // extern "C"
