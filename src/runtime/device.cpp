// aclInit/aclFinalize and devices: device 0 is the host CPU.
#include <mutex>

#include "runtime/runtime.h"

namespace openaclnn {
namespace {

enum class InitState { kNever, kInitialized, kFinalized };

std::mutex g_init_mutex;
InitState g_init_state = InitState::kNever;
thread_local int32_t t_current_device = 0;

}  // namespace
}  // namespace openaclnn

using namespace openaclnn;

extern "C" {

aclError aclInit(const char *configPath) {
    (void)configPath;  // a JSON of dump/profiling options on the NPU; nothing to configure here
    std::lock_guard<std::mutex> lock(g_init_mutex);
    if (g_init_state == InitState::kInitialized) {
        return Fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialised; call aclFinalize first");
    }
    g_init_state = InitState::kInitialized;
    return ACL_SUCCESS;
}

aclError aclFinalize(void) {
    {
        std::lock_guard<std::mutex> lock(g_init_mutex);
        if (g_init_state == InitState::kFinalized) {
            return Fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: already finalised");
        }
        if (g_init_state == InitState::kNever) {
            return Fail(ACL_ERROR_UNINITIALIZE, "aclFinalize: aclInit was never called");
        }
        g_init_state = InitState::kFinalized;
    }
    // Work still queued runs to completion before the runtime says it is done.
    SynchronizeAllStreams();
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
    if (deviceId != 0) {
        return Fail(ACL_ERROR_RT_INVALID_DEVICEID,
                    "aclrtSetDevice: deviceId is %d, expected 0 (the host CPU is the only device)", deviceId);
    }
    t_current_device = deviceId;
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId) {
    if (deviceId != 0) {
        return Fail(ACL_ERROR_RT_INVALID_DEVICEID,
                    "aclrtResetDevice: deviceId is %d, expected 0 (the host CPU is the only device)", deviceId);
    }
    return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t *deviceId) {
    if (!deviceId) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is NULL, expected a pointer");
    *deviceId = t_current_device;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t *count) {
    if (!count) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is NULL, expected a pointer");
    *count = 1;
    return ACL_SUCCESS;
}

}  // extern "C"
