#include "acl_session.h"

#include <utility>

#include "cli_common.h"

namespace openaclnn_cli {

std::string AclFailureText(const std::string &call, int status) {
    std::string text = call + " failed with status " + std::to_string(status);
    const char *message = aclGetRecentErrMsg();
    if (message != nullptr && message[0] != '\0') text += ": " + std::string(message);
    return text;
}

AclSession::AclSession() {
    aclError status = aclInit(nullptr);
    if (status != ACL_SUCCESS) Failure(AclFailureText("aclInit", status));
    initialised_ = true;
    status = aclrtSetDevice(0);
    if (status != ACL_SUCCESS) Failure(AclFailureText("aclrtSetDevice(0)", status));
    device_set_ = true;
    status = aclrtCreateStream(&stream_);
    if (status != ACL_SUCCESS) Failure(AclFailureText("aclrtCreateStream", status));
}

AclSession::~AclSession() {
    if (stream_ != nullptr) {
        aclrtSynchronizeStream(stream_);
        aclrtDestroyStream(stream_);
    }
    if (device_set_) aclrtResetDevice(0);
    if (initialised_) aclFinalize();
}

void AclSession::Synchronize(const std::string &context, int status_on_error) {
    const aclError status = aclrtSynchronizeStream(stream_);
    if (status != ACL_SUCCESS) {
        throw CliError(status_on_error, context + ": " + AclFailureText("aclrtSynchronizeStream", status));
    }
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
    const aclError status = aclrtMalloc(&ptr_, bytes == 0 ? 1 : bytes, ACL_MEM_MALLOC_HUGE_FIRST);
    if (status != ACL_SUCCESS) {
        ptr_ = nullptr;
        Failure(AclFailureText("aclrtMalloc(" + std::to_string(bytes) + " bytes)", status));
    }
}

DeviceBuffer::~DeviceBuffer() {
    if (ptr_ != nullptr) aclrtFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
    if (this != &other) {
        if (ptr_ != nullptr) aclrtFree(ptr_);
        ptr_ = std::exchange(other.ptr_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

void DeviceBuffer::CopyFromHost(const void *src, size_t bytes) {
    if (bytes == 0) return;
    const aclError status = aclrtMemcpy(ptr_, bytes_, src, bytes, ACL_MEMCPY_HOST_TO_DEVICE);
    if (status != ACL_SUCCESS) Failure(AclFailureText("aclrtMemcpy (host to device)", status));
}

void DeviceBuffer::CopyToHost(void *dst, size_t bytes) const {
    if (bytes == 0) return;
    const aclError status = aclrtMemcpy(dst, bytes, ptr_, bytes, ACL_MEMCPY_DEVICE_TO_HOST);
    if (status != ACL_SUCCESS) Failure(AclFailureText("aclrtMemcpy (device to host)", status));
}

void DeviceBuffer::Fill(int byte_value) {
    if (bytes_ == 0) return;
    const aclError status = aclrtMemset(ptr_, bytes_, byte_value, bytes_);
    if (status != ACL_SUCCESS) Failure(AclFailureText("aclrtMemset", status));
}

DeviceTensor::DeviceTensor(const std::vector<int64_t> &shape, aclDataType dtype, size_t element_size,
                           const void *host_data) {
    size_t count = 1;
    for (int64_t d : shape) count *= static_cast<size_t>(d);
    data_bytes_ = count * element_size;
    buffer_ = DeviceBuffer(data_bytes_);
    if (host_data != nullptr) buffer_.CopyFromHost(host_data, data_bytes_);
    tensor_ = aclCreateTensor(shape.data(), shape.size(), dtype, nullptr, 0, ACL_FORMAT_ND, shape.data(), shape.size(),
                              buffer_.get());
    if (tensor_ == nullptr) Failure(AclFailureText("aclCreateTensor", -1));
}

DeviceTensor::~DeviceTensor() { aclDestroyTensor(tensor_); }

DeviceTensor::DeviceTensor(DeviceTensor &&other) noexcept
    : buffer_(std::move(other.buffer_)),
      tensor_(std::exchange(other.tensor_, nullptr)),
      data_bytes_(std::exchange(other.data_bytes_, 0)) {}

DeviceTensor &DeviceTensor::operator=(DeviceTensor &&other) noexcept {
    if (this != &other) {
        aclDestroyTensor(tensor_);
        buffer_ = std::move(other.buffer_);
        tensor_ = std::exchange(other.tensor_, nullptr);
        data_bytes_ = std::exchange(other.data_bytes_, 0);
    }
    return *this;
}

std::vector<uint8_t> DeviceTensor::ToHost() const {
    std::vector<uint8_t> host(data_bytes_);
    buffer_.CopyToHost(host.data(), data_bytes_);
    return host;
}

}  // namespace openaclnn_cli
