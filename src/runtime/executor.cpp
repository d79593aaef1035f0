// aclOpExecutor: what phase 1 planned, waiting for phase 2. Single use unless made repeatable. Every live
// executor is registered, so that a spent, destroyed or invented handle is an error code, never a dereference.
#include <mutex>
#include <unordered_set>

#include "aclnn/aclnn_base.h"
#include "runtime/runtime.h"

struct aclOpExecutor {
    std::unique_ptr<openaclnn::OperatorState> state;
    bool repeatable = false;
};

namespace openaclnn {
namespace {

std::mutex g_executors_mutex;
std::unordered_set<aclOpExecutor *> &LiveExecutors() {
    static auto *executors = new std::unordered_set<aclOpExecutor *>();
    return *executors;
}

bool IsLiveExecutorLocked(aclOpExecutor *executor) { return executor && LiveExecutors().count(executor) != 0; }

aclnnStatus NotLive(const char *api, aclOpExecutor *executor) {
    if (!executor) return Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: executor is NULL, expected an aclOpExecutor", api);
    return Fail(ACLNN_ERR_PARAM_INVALID,
                "%s: executor %p is not a live aclOpExecutor (already run and not repeatable, destroyed, or never "
                "created)",
                api, static_cast<void *>(executor));
}

}  // namespace

aclOpExecutor *CreateExecutor(std::unique_ptr<OperatorState> state) {
    auto *executor = new aclOpExecutor();
    executor->state = std::move(state);
    std::lock_guard<std::mutex> lock(g_executors_mutex);
    LiveExecutors().insert(executor);
    return executor;
}

aclnnStatus RunExecutor(const char *op_name, void *workspace, uint64_t workspace_size, aclOpExecutor *executor,
                        aclrtStream stream) {
    // The look-up, the checks and the retirement of a single-use executor happen under one lock, so that two
    // threads racing to run the same single-use executor get one success and one error.
    std::unique_ptr<aclOpExecutor> retired;
    Task task;
    {
        std::lock_guard<std::mutex> lock(g_executors_mutex);
        if (!IsLiveExecutorLocked(executor)) return NotLive(op_name, executor);
        OperatorState &state = *executor->state;
        if (std::string(state.Name()) != op_name) {
            return Fail(ACLNN_ERR_PARAM_INVALID, "%s: executor %p was made by %sGetWorkspaceSize, expected one made by %sGetWorkspaceSize",
                        op_name, static_cast<void *>(executor), state.Name(), op_name);
        }
        const uint64_t needed = state.WorkspaceSize();
        if (workspace_size > 0 && !workspace) {
            return Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: workspace is NULL with workspaceSize %llu, expected a buffer",
                        op_name, static_cast<unsigned long long>(workspace_size));
        }
        if (workspace_size < needed) {
            return Fail(ACLNN_ERR_PARAM_INVALID,
                        "%s: workspaceSize is %llu bytes, expected at least %llu (as returned by %sGetWorkspaceSize)",
                        op_name, static_cast<unsigned long long>(workspace_size),
                        static_cast<unsigned long long>(needed), op_name);
        }
        if (!IsLiveStream(stream)) {
            return Fail(ACLNN_ERR_PARAM_INVALID, "%s: stream %p is not a live stream", op_name, stream);
        }
        task = state.MakeTask(workspace);
        if (!executor->repeatable) {
            LiveExecutors().erase(executor);
            retired.reset(executor);
        }
    }
    if (EnqueueTask(stream, std::move(task)) != ACL_SUCCESS) {
        // The stream was destroyed between the check and the enqueue.
        return Fail(ACLNN_ERR_PARAM_INVALID, "%s: stream %p is not a live stream", op_name, stream);
    }
    return ACLNN_SUCCESS;
}

}  // namespace openaclnn

using namespace openaclnn;

extern "C" {

aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor) {
    std::lock_guard<std::mutex> lock(g_executors_mutex);
    if (!IsLiveExecutorLocked(executor)) return NotLive("aclSetAclOpExecutorRepeatable", executor);
    executor->repeatable = true;
    return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor) {
    std::unique_ptr<aclOpExecutor> retired;
    {
        std::lock_guard<std::mutex> lock(g_executors_mutex);
        if (!IsLiveExecutorLocked(executor)) return NotLive("aclDestroyAclOpExecutor", executor);
        LiveExecutors().erase(executor);
        retired.reset(executor);
    }
    return ACLNN_SUCCESS;
}

aclnnStatus aclSetInputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr) {
    std::lock_guard<std::mutex> lock(g_executors_mutex);
    if (!IsLiveExecutorLocked(executor)) return NotLive("aclSetInputTensorAddr", executor);
    const aclnnStatus status = executor->state->SetInputAddr(index, addr);
    // Like CANN, the tensor handle (when given) follows the new address too.
    if (status == ACLNN_SUCCESS && tensor && IsLiveTensor(tensor)) tensor->data = addr;
    return status;
}

aclnnStatus aclSetOutputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr) {
    std::lock_guard<std::mutex> lock(g_executors_mutex);
    if (!IsLiveExecutorLocked(executor)) return NotLive("aclSetOutputTensorAddr", executor);
    const aclnnStatus status = executor->state->SetOutputAddr(index, addr);
    if (status == ACLNN_SUCCESS && tensor && IsLiveTensor(tensor)) tensor->data = addr;
    return status;
}

aclnnStatus aclnnInit(const char *configPath) {
    (void)configPath;
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnFinalize(void) { return ACLNN_SUCCESS; }

}  // extern "C"
