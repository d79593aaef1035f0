// Internal interface of the ACL runtime shim, shared by the runtime libraries and the operators.
// Nothing here is public ABI: programs see only include/.
#ifndef OPENACLNN_RUNTIME_RUNTIME_H_
#define OPENACLNN_RUNTIME_RUNTIME_H_

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"

namespace openaclnn {

// ---- errors (error.cpp) -------------------------------------------------------------------------------------
// Sets this thread's message for aclGetRecentErrMsg.
void SetErrorMessage(const std::string &message);
__attribute__((format(printf, 1, 2))) std::string Format(const char *fmt, ...);
// Sets the message and returns code, so checks read `return Fail(161002, "...", ...)`.
__attribute__((format(printf, 2, 3))) int Fail(int code, const char *fmt, ...);

// ---- environment (env.cpp) ----------------------------------------------------------------------------------
// OPENACLNN_NUM_THREADS, or the CPUs this process may use; at least 1.
int ConfiguredThreads();
// OPENACLNN_LOG: 0 = off, 1 = info, 2 = debug.
int LogLevel();
__attribute__((format(printf, 2, 3))) void Log(int level, const char *fmt, ...);

// ---- data types (dtype.cpp) ---------------------------------------------------------------------------------
const char *DataTypeName(aclDataType type);
bool IsKnownDataType(aclDataType type);
const char *FormatName(aclFormat format);

// ---- memory (memory.cpp) ------------------------------------------------------------------------------------
// If ptr lies inside a live aclrtMalloc/aclrtMallocHost block, stores the bytes usable from ptr to the block's end
// (request rounded up to 32 plus 32 bytes of padding) and returns true.
bool FindAllocation(const void *ptr, uint64_t *bytes_from_ptr);

// ---- streams (stream.cpp) -----------------------------------------------------------------------------------
// What a queued task may report: the first error recorded since the last synchronisation is what
// aclrtSynchronizeStream returns, with its message.
class TaskContext {
public:
    virtual ~TaskContext() = default;
    virtual void RecordError(int code, const std::string &message) = 0;
};
using Task = std::function<void(TaskContext &)>;

// Queues task on stream (nullptr = the default stream); it runs, after the tasks queued before it, on a thread that
// synchronises the stream (stream.cpp). Returns ACL_SUCCESS, or ACL_ERROR_INVALID_PARAM for a handle that is not a
// live stream.
aclError EnqueueTask(aclrtStream stream, Task task);
bool IsLiveStream(aclrtStream stream);
// Runs every stream's queued work (aclFinalize).
void SynchronizeAllStreams();

}  // namespace openaclnn

// ---- tensors (tensor.cpp) -----------------------------------------------------------------------------------
// A view of `data`: element (i0, i1, ...) lives at data + (offset + sum_k i_k * strides[k]) * element_size.
struct aclTensor {
    uint64_t magic;
    aclDataType dtype;
    aclFormat format;
    std::vector<int64_t> view_dims;
    std::vector<int64_t> strides;
    int64_t offset;
    std::vector<int64_t> storage_dims;
    void *data;

    int64_t Rank() const { return static_cast<int64_t>(view_dims.size()); }
    int64_t NumElements() const;     // product of view_dims (1 for rank 0)
    int64_t StorageElements() const; // product of storage_dims (1 for rank 0); -1 on overflow
};

namespace openaclnn {
// True when t was returned by aclCreateTensor and not yet destroyed.
bool IsLiveTensor(const aclTensor *t);
}  // namespace openaclnn

// ---- executors (executor.cpp) -------------------------------------------------------------------------------
namespace openaclnn {

// What an operator's phase 1 leaves in an executor. Run is called by phase 2 and must only queue work.
class OperatorState {
public:
    virtual ~OperatorState() = default;
    virtual const char *Name() const = 0;
    virtual uint64_t WorkspaceSize() const = 0;
    // Rebinds the base address of input/output `index` (prototype order). Returns an aclnn status (and message).
    virtual aclnnStatus SetInputAddr(size_t index, void *addr) = 0;
    virtual aclnnStatus SetOutputAddr(size_t index, void *addr) = 0;
    // Builds the task phase 2 queues: a self-contained copy of everything it needs, so that the executor may be
    // freed or rebound while the task waits in the queue.
    virtual Task MakeTask(void *workspace) const = 0;
};

// Wraps state in a live executor (registered, single use).
aclOpExecutor *CreateExecutor(std::unique_ptr<OperatorState> state);
// The common phase 2: checks executor, workspace and stream, queues the task, retires a single-use executor.
aclnnStatus RunExecutor(const char *op_name, void *workspace, uint64_t workspace_size, aclOpExecutor *executor,
                        aclrtStream stream);

}  // namespace openaclnn

#endif  // OPENACLNN_RUNTIME_RUNTIME_H_
