// The tool's use of the public ACL/aclnn C API: one session (aclInit, device 0, a stream) and device tensors.
// Every failure becomes a CliError carrying the call, its status and aclGetRecentErrMsg().
#ifndef OPENACLNN_TOOLS_ACL_SESSION_H_
#define OPENACLNN_TOOLS_ACL_SESSION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"

namespace openaclnn_cli {

// "<call> failed with status N: <library message>"
std::string AclFailureText(const std::string &call, int status);

class AclSession {
public:
    AclSession();
    ~AclSession();
    AclSession(const AclSession &) = delete;
    AclSession &operator=(const AclSession &) = delete;

    aclrtStream stream() const { return stream_; }
    // aclrtSynchronizeStream; a failure is reported as `status_on_error` (2 when the inputs explain it).
    void Synchronize(const std::string &context, int status_on_error);

private:
    aclrtStream stream_ = nullptr;
    bool device_set_ = false;
    bool initialised_ = false;
};

// Memory from aclrtMalloc, freed on destruction.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes);  // at least one byte is allocated, so empty tensors have an address
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer &&other) noexcept;
    DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;

    void *get() const { return ptr_; }
    size_t bytes() const { return bytes_; }
    void CopyFromHost(const void *src, size_t bytes);
    void CopyToHost(void *dst, size_t bytes) const;
    void Fill(int byte_value);

private:
    void *ptr_ = nullptr;
    size_t bytes_ = 0;
};

// A contiguous ND tensor over its own device buffer.
class DeviceTensor {
public:
    DeviceTensor() = default;
    DeviceTensor(const std::vector<int64_t> &shape, aclDataType dtype, size_t element_size, const void *host_data);
    ~DeviceTensor();
    DeviceTensor(DeviceTensor &&other) noexcept;
    DeviceTensor &operator=(DeviceTensor &&other) noexcept;
    DeviceTensor(const DeviceTensor &) = delete;
    DeviceTensor &operator=(const DeviceTensor &) = delete;

    aclTensor *tensor() const { return tensor_; }
    DeviceBuffer &buffer() { return buffer_; }
    const DeviceBuffer &buffer() const { return buffer_; }
    size_t data_bytes() const { return data_bytes_; }
    std::vector<uint8_t> ToHost() const;

private:
    DeviceBuffer buffer_;
    aclTensor *tensor_ = nullptr;
    size_t data_bytes_ = 0;
};

}  // namespace openaclnn_cli

#endif  // OPENACLNN_TOOLS_ACL_SESSION_H_
