#include "ops/common/tensor_checks.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace openaclnn {

std::string DimsToString(const std::vector<int64_t> &dims) {
    std::string text = "[";
    for (size_t k = 0; k < dims.size(); ++k) {
        if (k) text += ", ";
        text += std::to_string(dims[k]);
    }
    return text + "]";
}

std::string DataTypeList(std::initializer_list<aclDataType> types) {
    std::string text;
    size_t k = 0;
    for (aclDataType type : types) {
        if (k) text += (k + 1 == types.size()) ? " or " : ", ";
        text += DataTypeName(type);
        ++k;
    }
    return text;
}

aclnnStatus CheckPhase1Outputs(const char *api, const uint64_t *workspaceSize, aclOpExecutor *const *executor) {
    if (!workspaceSize) {
        return Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: workspaceSize is NULL, expected a uint64_t pointer", api);
    }
    if (!executor) {
        return Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: executor is NULL, expected an aclOpExecutor * pointer", api);
    }
    return ACLNN_SUCCESS;
}

aclnnStatus CheckTensorPresent(const char *api, const char *name, const aclTensor *tensor, bool required) {
    if (!tensor) {
        if (!required) return ACLNN_SUCCESS;
        return Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is NULL, expected an aclTensor", api, name);
    }
    if (!IsLiveTensor(tensor)) {
        return Fail(ACLNN_ERR_PARAM_NULLPTR,
                    "%s: %s is %p, which is not a live aclTensor (never created or already destroyed)", api, name,
                    static_cast<const void *>(tensor));
    }
    if (!tensor->data && tensor->NumElements() != 0) {
        return Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s has a NULL data address, expected memory for its %s view", api,
                    name, DimsToString(tensor->view_dims).c_str());
    }
    return ACLNN_SUCCESS;
}

aclnnStatus CheckDataType(const char *api, const char *name, const aclTensor *tensor,
                          std::initializer_list<aclDataType> allowed) {
    if (std::find(allowed.begin(), allowed.end(), tensor->dtype) == allowed.end()) {
        return Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %s, expected %s", api, name,
                    DataTypeName(tensor->dtype), DataTypeList(allowed).c_str());
    }
    if (tensor->format == ACL_FORMAT_NC1HWC0 || tensor->format == ACL_FORMAT_FRACTAL_Z) {
        return Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has format %s, expected ACL_FORMAT_ND", api, name,
                    FormatName(tensor->format));
    }
    return CheckDataAligned(api, name, tensor->data, tensor->dtype);
}

aclnnStatus CheckDataAligned(const char *api, const char *name, const void *data, aclDataType dtype) {
    const uint64_t size = aclDataTypeSize(dtype);
    if (size > 1 && reinterpret_cast<uintptr_t>(data) % size != 0) {
        return Fail(ACLNN_ERR_PARAM_INVALID,
                    "%s: %s has data address %p, which is not a multiple of %llu bytes, expected an address aligned "
                    "to the size of its dtype %s",
                    api, name, data, static_cast<unsigned long long>(size), DataTypeName(dtype));
    }
    return ACLNN_SUCCESS;
}

aclnnStatus CheckShape(const char *api, const char *name, const aclTensor *tensor,
                       const std::vector<int64_t> &expected) {
    if (tensor->view_dims != expected) {
        return Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: %s has shape %s, expected %s", api, name,
                    DimsToString(tensor->view_dims).c_str(), DimsToString(expected).c_str());
    }
    return ACLNN_SUCCESS;
}

bool ComputeFootprint(const aclTensor *tensor, Footprint *footprint) {
    footprint->empty = tensor->NumElements() == 0;
    footprint->first = tensor->offset;
    footprint->last = tensor->offset;
    if (footprint->empty) return true;
    for (size_t k = 0; k < tensor->view_dims.size(); ++k) {
        int64_t extent = 0;
        if (__builtin_mul_overflow(tensor->view_dims[k] - 1, tensor->strides[k], &extent)) return false;
        int64_t *bound = extent >= 0 ? &footprint->last : &footprint->first;
        if (__builtin_add_overflow(*bound, extent, bound)) return false;
    }
    return true;
}

aclnnStatus CheckViewInStorage(const char *api, const char *name, const aclTensor *tensor) {
    Footprint footprint;
    if (!ComputeFootprint(tensor, &footprint)) {
        return Fail(ACLNN_ERR_INNER_TILING_ERROR,
                    "%s: %s view (shape %s, strides %s, offset %lld) overflows 64-bit element offsets", api, name,
                    DimsToString(tensor->view_dims).c_str(), DimsToString(tensor->strides).c_str(),
                    static_cast<long long>(tensor->offset));
    }
    if (footprint.empty) return ACLNN_SUCCESS;
    const int64_t storage = tensor->StorageElements();
    if (storage < 0 || footprint.first < 0 || footprint.last >= storage) {
        return Fail(ACLNN_ERR_INNER_TILING_ERROR,
                    "%s: %s view (shape %s, strides %s, offset %lld) reaches elements [%lld, %lld], outside its "
                    "storage of shape %s, expected a view inside the storage",
                    api, name, DimsToString(tensor->view_dims).c_str(), DimsToString(tensor->strides).c_str(),
                    static_cast<long long>(tensor->offset), static_cast<long long>(footprint.first),
                    static_cast<long long>(footprint.last), DimsToString(tensor->storage_dims).c_str());
    }
    // Byte offsets from the data address must be int64 too: a storage of more than 2^63 bytes cannot exist.
    const uint64_t element_size = aclDataTypeSize(tensor->dtype);
    int64_t storage_bytes = 0;
    if (__builtin_mul_overflow(storage, static_cast<int64_t>(element_size), &storage_bytes)) {
        return Fail(ACLNN_ERR_INNER_TILING_ERROR,
                    "%s: %s storage of shape %s holds %lld elements of %llu bytes, more than 2^63 bytes, expected a "
                    "storage that fits in memory",
                    api, name, DimsToString(tensor->storage_dims).c_str(), static_cast<long long>(storage),
                    static_cast<unsigned long long>(element_size));
    }
    // When the data lives in an aclrtMalloc block, the view must also fit the block.
    uint64_t available = 0;
    if (FindAllocation(tensor->data, &available)) {
        // footprint.last < storage, so this cannot overflow: the storage's byte count fits in int64.
        const uint64_t needed = (static_cast<uint64_t>(footprint.last) + 1) * element_size;
        if (needed > available) {
            return Fail(ACLNN_ERR_INNER_TILING_ERROR,
                        "%s: %s view needs %llu bytes from its data address, but its aclrtMalloc block has %llu "
                        "bytes there",
                        api, name, static_cast<unsigned long long>(needed),
                        static_cast<unsigned long long>(available));
        }
    }
    return ACLNN_SUCCESS;
}

bool SameView(const aclTensor *a, const aclTensor *b) {
    return a->data == b->data && a->dtype == b->dtype && a->offset == b->offset && a->view_dims == b->view_dims &&
           a->strides == b->strides;
}

bool MayOverlap(const aclTensor *a, const aclTensor *b) {
    Footprint fa, fb;
    if (!ComputeFootprint(a, &fa) || !ComputeFootprint(b, &fb)) return true;
    if (fa.empty || fb.empty) return false;
    const auto begin = [](const aclTensor *t, const Footprint &f) {
        return reinterpret_cast<uintptr_t>(t->data) + static_cast<uintptr_t>(f.first) * aclDataTypeSize(t->dtype);
    };
    const auto end = [](const aclTensor *t, const Footprint &f) {
        return reinterpret_cast<uintptr_t>(t->data) + static_cast<uintptr_t>(f.last + 1) * aclDataTypeSize(t->dtype);
    };
    return begin(a, fa) < end(b, fb) && begin(b, fb) < end(a, fa);
}

bool OverlapsItself(const aclTensor *t) {
    // Dimensions of length 1 never pair two elements; a view with no elements has nothing to collide.
    std::vector<std::pair<uint64_t, int64_t>> dims;  // (|stride|, length) of dimensions longer than 1
    for (size_t k = 0; k < t->view_dims.size(); ++k) {
        if (t->view_dims[k] == 0) return false;
        const int64_t s = t->strides[k];
        const uint64_t magnitude = s < 0 ? 0 - static_cast<uint64_t>(s) : static_cast<uint64_t>(s);
        if (t->view_dims[k] > 1) dims.emplace_back(magnitude, t->view_dims[k]);
    }
    for (const auto &d : dims) {
        if (d.first == 0) return true;
    }
    if (dims.size() <= 1) return false;
    if (dims.size() == 2) {
        // i*a == i'*a + j'*b ... two elements collide iff di*a == dj*b with |di| < len_a, |dj| < len_b, not both 0.
        // With g = gcd(a, b) the smallest such pair is di = b/g, dj = a/g.
        const uint64_t a = dims[0].first, b = dims[1].first, g = std::gcd(a, b);
        return b / g < static_cast<uint64_t>(dims[0].second) && a / g < static_cast<uint64_t>(dims[1].second);
    }
    // Higher ranks: sorted by stride, each stride must pass the span of all smaller ones (sufficient, not necessary).
    std::sort(dims.begin(), dims.end());
    uint64_t span = 0;  // largest offset reachable with the smaller dimensions
    for (const auto &d : dims) {
        if (d.first <= span) return true;
        uint64_t extent = 0;
        if (__builtin_mul_overflow(d.first, static_cast<uint64_t>(d.second - 1), &extent) ||
            __builtin_add_overflow(span, extent, &span)) {
            return true;
        }
    }
    return false;
}

}  // namespace openaclnn
