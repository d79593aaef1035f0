// Helpers that drive openaclnn the way an application does: aclrtMalloc'd storage, aclrtMemcpy in and out,
// aclCreateTensor over any view, the two phases and aclrtSynchronizeStream.
#ifndef OPENACLNN_TESTS_COMMON_ACL_HELPERS_H_
#define OPENACLNN_TESTS_COMMON_ACL_HELPERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_cross_entropy_loss_grad.h"

namespace openaclnn::test {

// A view: element (i0, i1) is at storage index offset + i0 * strides[0] + i1 * strides[1].
struct Layout {
    std::vector<int64_t> dims;
    std::vector<int64_t> strides;
    int64_t offset = 0;
    std::vector<int64_t> storage_dims;

    int64_t Rank() const { return static_cast<int64_t>(dims.size()); }
    int64_t NumElements() const;
    int64_t StorageElements() const;
    int64_t Index(int64_t i0, int64_t i1 = 0) const;
    std::string Describe() const;
};

Layout ContiguousLayout(const std::vector<int64_t> &dims);
// Given strides and offset; the storage is one-dimensional and just large enough (plus `slack` elements).
Layout StridedLayout(const std::vector<int64_t> &dims, const std::vector<int64_t> &strides, int64_t offset,
                     int64_t slack = 0);
// A [rows, cols] view of a column-major [cols, rows] storage.
Layout TransposedLayout(int64_t rows, int64_t cols);

// Bit patterns that mark "never written": signalling NaNs with a payload for float types, 0xA5 bytes otherwise.
void FillPoison(aclDataType dtype, void *base, int64_t elements);
bool IsPoison(aclDataType dtype, const void *base, int64_t index);

// Storage allocated with aclrtMalloc, a host mirror of the whole storage (initially poison) and the aclTensor.
class DeviceTensor {
public:
    DeviceTensor(aclDataType dtype, Layout layout);
    ~DeviceTensor();
    DeviceTensor(const DeviceTensor &) = delete;
    DeviceTensor &operator=(const DeviceTensor &) = delete;

    aclTensor *get() const { return tensor_; }
    void *device() const { return device_; }
    size_t bytes() const { return bytes_; }
    aclDataType dtype() const { return dtype_; }
    const Layout &layout() const { return layout_; }
    std::vector<uint8_t> &host() { return host_; }

    // Float dtypes: v rounded to nearest even; integer dtypes: v converted.
    void Set(int64_t i0, int64_t i1, double v);
    void SetInt(int64_t i0, int64_t v);
    double Get(int64_t i0, int64_t i1 = 0) const;
    bool ElementIsPoison(int64_t storage_index) const;

    void Upload();                    // host mirror -> device (aclrtMemcpy)
    void Download();                  // device -> host mirror
    uint64_t DeviceChecksum() const;  // FNV-1a of the device storage bytes

    // A second aclTensor with the same layout over the same storage (owned by this object).
    aclTensor *Alias();
    // A second aclTensor over the same storage with another layout (owned by this object).
    aclTensor *View(const Layout &layout, aclDataType dtype);

private:
    aclDataType dtype_;
    Layout layout_;
    size_t bytes_ = 0;
    void *device_ = nullptr;
    aclTensor *tensor_ = nullptr;
    std::vector<aclTensor *> extra_;
    std::vector<uint8_t> host_;
};

aclTensor *CreateTensor(const Layout &layout, aclDataType dtype, void *data);

struct GradCall {
    const aclTensor *grad_loss = nullptr;
    const aclTensor *log_prob = nullptr;
    const aclTensor *target = nullptr;
    const aclTensor *weight = nullptr;
    const aclTensor *grad_zloss = nullptr;
    const aclTensor *lse = nullptr;
    const char *reduction = "mean";
    int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    double zloss_scale = 0.0;
    const aclTensor *out = nullptr;
};

aclnnStatus GradPhase1(const GradCall &call, uint64_t *workspace_size, aclOpExecutor **executor);

struct GradOutcome {
    aclnnStatus phase1 = -1;
    aclnnStatus phase2 = -1;
    aclError sync = -1;
    uint64_t workspace_size = 0;
    std::string phase1_message;
    std::string sync_message;
};
// Phase 1, workspace, phase 2, synchronize. Stops after the first failing step.
GradOutcome RunGrad(const GradCall &call, aclrtStream stream);

// aclGetRecentErrMsg(), or "" for NULL.
std::string RecentError();

// The stream the test process created after aclInit + aclrtSetDevice(0).
aclrtStream TestStream();

uint64_t Fnv1a(const void *data, size_t bytes, uint64_t hash = 1469598103934665603ull);

// Runs this test executable again as `exe --probe name args...` with extra environment assignments
// ("NAME=value"); returns the exit status and fills *output with its stdout.
int RunProbe(const std::string &name, const std::vector<std::string> &args, const std::vector<std::string> &env,
             std::string *output);

using ProbeFunction = int (*)(const std::vector<std::string> &args);
struct ProbeRegistrar {
    ProbeRegistrar(const char *name, ProbeFunction fn);
};

}  // namespace openaclnn::test

#endif  // OPENACLNN_TESTS_COMMON_ACL_HELPERS_H_
