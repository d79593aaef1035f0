#include "acl_helpers.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>

#include "float_formats.h"

namespace openaclnn::test {

int64_t Layout::NumElements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
}

int64_t Layout::StorageElements() const {
    int64_t n = 1;
    for (int64_t d : storage_dims) n *= d;
    return n;
}

int64_t Layout::Index(int64_t i0, int64_t i1) const {
    int64_t index = offset;
    if (Rank() >= 1) index += i0 * strides[0];
    if (Rank() >= 2) index += i1 * strides[1];
    return index;
}

std::string Layout::Describe() const {
    std::ostringstream s;
    auto list = [&s](const std::vector<int64_t> &v) {
        s << "[";
        for (size_t k = 0; k < v.size(); ++k) s << (k ? "," : "") << v[k];
        s << "]";
    };
    list(dims);
    s << " strides ";
    list(strides);
    s << " offset " << offset << " storage ";
    list(storage_dims);
    return s.str();
}

Layout ContiguousLayout(const std::vector<int64_t> &dims) {
    Layout l;
    l.dims = dims;
    l.strides.assign(dims.size(), 1);
    for (int64_t k = static_cast<int64_t>(dims.size()) - 2; k >= 0; --k) l.strides[k] = l.strides[k + 1] * dims[k + 1];
    l.storage_dims = dims;
    return l;
}

Layout StridedLayout(const std::vector<int64_t> &dims, const std::vector<int64_t> &strides, int64_t offset,
                     int64_t slack) {
    Layout l;
    l.dims = dims;
    l.strides = strides;
    l.offset = offset;
    int64_t reach = offset;  // last element index
    bool empty = false;
    for (size_t k = 0; k < dims.size(); ++k) {
        if (dims[k] == 0)
            empty = true;
        else
            reach += (dims[k] - 1) * std::max<int64_t>(strides[k], 0);
    }
    l.storage_dims = {(empty ? offset : reach + 1) + slack};
    return l;
}

Layout TransposedLayout(int64_t rows, int64_t cols) {
    Layout l;
    l.dims = {rows, cols};
    l.strides = {1, rows};
    l.offset = 0;
    l.storage_dims = {cols, rows};
    return l;
}

void FillPoison(aclDataType dtype, void *base, int64_t elements) {
    if (!base || elements <= 0) return;
    auto *bytes = static_cast<uint8_t *>(base);
    switch (dtype) {
        case ACL_FLOAT: {
            const uint32_t v = 0x7fa5a5a5u;
            for (int64_t k = 0; k < elements; ++k) std::memcpy(bytes + 4 * k, &v, 4);
            break;
        }
        case ACL_FLOAT16: {
            const uint16_t v = 0x7d5au;
            for (int64_t k = 0; k < elements; ++k) std::memcpy(bytes + 2 * k, &v, 2);
            break;
        }
        case ACL_BF16: {
            const uint16_t v = 0x7fa5u;
            for (int64_t k = 0; k < elements; ++k) std::memcpy(bytes + 2 * k, &v, 2);
            break;
        }
        default:
            std::memset(bytes, 0xa5, static_cast<size_t>(elements) * ElementSize(dtype));
            break;
    }
}

bool IsPoison(aclDataType dtype, const void *base, int64_t index) {
    const size_t size = ElementSize(dtype);
    uint8_t expected[8];
    FillPoison(dtype, expected, 1);
    return std::memcmp(static_cast<const uint8_t *>(base) + index * size, expected, size) == 0;
}

aclTensor *CreateTensor(const Layout &layout, aclDataType dtype, void *data) {
    static const int64_t kNoDims[1] = {0};
    return aclCreateTensor(layout.dims.empty() ? kNoDims : layout.dims.data(), layout.dims.size(), dtype,
                           layout.strides.empty() ? kNoDims : layout.strides.data(), layout.offset, ACL_FORMAT_ND,
                           layout.storage_dims.empty() ? kNoDims : layout.storage_dims.data(),
                           layout.storage_dims.size(), data);
}

DeviceTensor::DeviceTensor(aclDataType dtype, Layout layout) : dtype_(dtype), layout_(std::move(layout)) {
    const int64_t elements = layout_.StorageElements();
    bytes_ = static_cast<size_t>(std::max<int64_t>(elements, 0)) * ElementSize(dtype_);
    host_.assign(bytes_, 0);
    FillPoison(dtype_, host_.data(), elements);
    if (aclrtMalloc(&device_, std::max<size_t>(bytes_, 1), ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        throw std::runtime_error("aclrtMalloc failed for " + std::to_string(bytes_) + " bytes");
    }
    Upload();
    tensor_ = CreateTensor(layout_, dtype_, device_);
    if (tensor_ == nullptr) throw std::runtime_error("aclCreateTensor failed for " + layout_.Describe());
}

DeviceTensor::~DeviceTensor() {
    for (aclTensor *t : extra_) aclDestroyTensor(t);
    aclDestroyTensor(tensor_);
    aclrtFree(device_);
}

void DeviceTensor::Set(int64_t i0, int64_t i1, double v) {
    const int64_t index = layout_.Index(i0, i1);
    switch (dtype_) {
        case ACL_INT32: {
            const int32_t x = static_cast<int32_t>(v);
            std::memcpy(host_.data() + 4 * index, &x, 4);
            break;
        }
        case ACL_INT64: {
            const int64_t x = static_cast<int64_t>(v);
            std::memcpy(host_.data() + 8 * index, &x, 8);
            break;
        }
        default:
            StoreFromDouble(dtype_, host_.data(), index, v);
            break;
    }
}

void DeviceTensor::SetInt(int64_t i0, int64_t v) {
    const int64_t index = layout_.Index(i0);
    if (dtype_ == ACL_INT32) {
        const int32_t x = static_cast<int32_t>(v);
        std::memcpy(host_.data() + 4 * index, &x, 4);
    } else {
        std::memcpy(host_.data() + 8 * index, &v, 8);
    }
}

double DeviceTensor::Get(int64_t i0, int64_t i1) const {
    return LoadAsDouble(dtype_, host_.data(), layout_.Index(i0, i1));
}

bool DeviceTensor::ElementIsPoison(int64_t storage_index) const {
    return IsPoison(dtype_, host_.data(), storage_index);
}

void DeviceTensor::Upload() {
    if (bytes_ == 0) return;
    if (aclrtMemcpy(device_, bytes_, host_.data(), bytes_, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS) {
        throw std::runtime_error("aclrtMemcpy host to device failed");
    }
}

void DeviceTensor::Download() {
    if (bytes_ == 0) return;
    if (aclrtMemcpy(host_.data(), bytes_, device_, bytes_, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS) {
        throw std::runtime_error("aclrtMemcpy device to host failed");
    }
}

uint64_t DeviceTensor::DeviceChecksum() const {
    std::vector<uint8_t> copy(bytes_);
    if (bytes_ != 0) aclrtMemcpy(copy.data(), bytes_, device_, bytes_, ACL_MEMCPY_DEVICE_TO_HOST);
    return Fnv1a(copy.data(), copy.size());
}

aclTensor *DeviceTensor::Alias() { return View(layout_, dtype_); }

aclTensor *DeviceTensor::View(const Layout &layout, aclDataType dtype) {
    aclTensor *t = CreateTensor(layout, dtype, device_);
    if (t == nullptr) throw std::runtime_error("aclCreateTensor failed for " + layout.Describe());
    extra_.push_back(t);
    return t;
}

aclnnStatus GradPhase1(const GradCall &call, uint64_t *workspace_size, aclOpExecutor **executor) {
    return aclnnCrossEntropyLossGradGetWorkspaceSize(call.grad_loss, call.log_prob, call.target, call.weight,
                                                     call.grad_zloss, call.lse, const_cast<char *>(call.reduction),
                                                     call.ignore_index, call.label_smoothing, call.zloss_scale,
                                                     call.out, workspace_size, executor);
}

GradOutcome RunGrad(const GradCall &call, aclrtStream stream) {
    GradOutcome r;
    aclOpExecutor *executor = nullptr;
    r.phase1 = GradPhase1(call, &r.workspace_size, &executor);
    if (r.phase1 != ACLNN_SUCCESS) {
        r.phase1_message = RecentError();
        return r;
    }
    void *workspace = nullptr;
    if (r.workspace_size > 0 && aclrtMalloc(&workspace, r.workspace_size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        throw std::runtime_error("workspace allocation failed");
    }
    r.phase2 = aclnnCrossEntropyLossGrad(workspace, r.workspace_size, executor, stream);
    if (r.phase2 == ACLNN_SUCCESS) {
        r.sync = aclrtSynchronizeStream(stream);
        if (r.sync != ACL_SUCCESS) r.sync_message = RecentError();
    }
    if (workspace != nullptr) aclrtFree(workspace);
    return r;
}

std::string RecentError() {
    const char *m = aclGetRecentErrMsg();
    return m ? std::string(m) : std::string();
}

uint64_t Fnv1a(const void *data, size_t bytes, uint64_t hash) {
    const auto *p = static_cast<const uint8_t *>(data);
    for (size_t k = 0; k < bytes; ++k) {
        hash ^= p[k];
        hash *= 1099511628211ull;
    }
    return hash;
}

namespace {
std::map<std::string, ProbeFunction> &Probes() {
    static std::map<std::string, ProbeFunction> probes;
    return probes;
}

std::string SelfPath() {
    char buf[4096];
    const ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (len <= 0) return std::string();
    buf[len] = '\0';
    return buf;
}

std::string ShellQuote(const std::string &s) {
    std::string q = "'";
    for (char ch : s) {
        if (ch == '\'')
            q += "'\\''";
        else
            q += ch;
    }
    return q + "'";
}
}  // namespace

ProbeRegistrar::ProbeRegistrar(const char *name, ProbeFunction fn) { Probes()[name] = fn; }

int RunProbe(const std::string &name, const std::vector<std::string> &args, const std::vector<std::string> &env,
             std::string *output) {
    std::vector<std::string> words = {"env"};
    for (const std::string &e : env) words.push_back(ShellQuote(e));
#ifdef OPENACLNN_TEST_EMULATOR
    words.push_back(OPENACLNN_TEST_EMULATOR);  // a cross build's: the program and its options, as the shell splits them
#endif
    words.push_back(ShellQuote(SelfPath()));
    words.push_back("--probe");
    words.push_back(ShellQuote(name));
    for (const std::string &a : args) words.push_back(ShellQuote(a));
    std::string cmd;
    for (const std::string &w : words) {
        cmd.append(w);
        cmd.push_back(' ');
    }
    FILE *pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) return -1;
    output->clear();
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, pipe)) > 0) output->append(buf, got);
    const int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Used by test_main.cpp.
int RunRegisteredProbe(const std::string &name, const std::vector<std::string> &args) {
    auto it = Probes().find(name);
    if (it == Probes().end()) {
        std::fprintf(stderr, "unknown probe %s\n", name.c_str());
        return 2;
    }
    return it->second(args);
}

}  // namespace openaclnn::test
