// Streams: in-order asynchronous queues, run by the threads that synchronise them. Enqueueing only queues a task;
// aclrtSynchronizeStream (and aclrtDestroyStream, aclFinalize) runs the stream's queued tasks on the calling thread,
// one at a time, in order, then returns. A stream has no thread of its own: handing each task to one and waiting for
// it cost more than the whole of many calls (a thread wake-up, then a wait in Synchronize, each a hypervisor round
// trip on a virtual machine), and a second thread opening the operators' OpenMP regions made libgomp put every
// team's threads to sleep between calls (more threads in teams than CPUs). 1 x 152064 fp32 took 0.042 ms a call that
// way in grad_bench, 0.015 ms here; 16384 x 10 0.80-0.90x the time.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/runtime.h"

namespace openaclnn {
namespace {

class Stream final : public TaskContext {
public:
    // Work queued on a stream runs before it goes: a task that raced with aclrtDestroyStream (queued after the
    // destroying thread's synchronisation) runs on the thread that drops the last reference.
    ~Stream() override {
        std::string ignored;
        Synchronize(&ignored);
    }

    void Enqueue(Task task) {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(std::move(task));
        ++enqueued_;
    }

    // Runs (or, where another thread is running one, waits for) every task enqueued before the call; returns the
    // first error recorded since the last call. Threads synchronising the same stream at once share its tasks, still
    // one at a time and in order; tasks enqueued after the call began are left to a later one.
    aclError Synchronize(std::string *message) {
        std::unique_lock<std::mutex> lock(mutex_);
        const uint64_t target = enqueued_;
        while (finished_ < target) {
            if (running_) {
                done_.wait(lock);
                continue;
            }
            Task task = std::move(queue_.front());
            queue_.pop_front();
            running_ = true;
            lock.unlock();
            task(*this);
            task = nullptr;  // release captured state outside the lock
            lock.lock();
            running_ = false;
            ++finished_;
            done_.notify_all();
        }
        const aclError error = first_error_;
        *message = std::move(first_error_message_);
        first_error_ = ACL_SUCCESS;
        first_error_message_.clear();
        return error;
    }

    void RecordError(int code, const std::string &message) override {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (first_error_ == ACL_SUCCESS) {
            first_error_ = code;
            first_error_message_ = message;
        }
    }

private:
    std::mutex mutex_;
    std::condition_variable done_;  // a task finished
    std::deque<Task> queue_;
    uint64_t enqueued_ = 0;  // tasks ever enqueued
    uint64_t finished_ = 0;  // tasks ever run to their end (the queue's front is task number finished_ + running_)
    bool running_ = false;
    std::mutex error_mutex_;  // errors are recorded from inside tasks, with mutex_ released
    aclError first_error_ = ACL_SUCCESS;
    std::string first_error_message_;
};

// Live streams, by handle. Shared ownership lets a synchronisation or an enqueue that raced with
// aclrtDestroyStream finish on a stream that is no longer listed, instead of touching freed memory.
std::mutex g_streams_mutex;
std::unordered_map<Stream *, std::shared_ptr<Stream>> &LiveStreams() {
    static auto *streams = new std::unordered_map<Stream *, std::shared_ptr<Stream>>();
    return *streams;
}

// The default stream is created on first use and never destroyed: tasks may still be queued at exit.
Stream *DefaultStream() {
    static Stream *stream = new Stream();
    return stream;
}

// A reference to the stream behind handle (NULL = the default stream), or nullptr when it is not live.
std::shared_ptr<Stream> Resolve(aclrtStream handle) {
    if (!handle) return std::shared_ptr<Stream>(std::shared_ptr<Stream>(), DefaultStream());  // non-owning
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    auto it = LiveStreams().find(static_cast<Stream *>(handle));
    return it == LiveStreams().end() ? nullptr : it->second;
}

}  // namespace

bool IsLiveStream(aclrtStream stream) { return Resolve(stream) != nullptr; }

aclError EnqueueTask(aclrtStream handle, Task task) {
    std::shared_ptr<Stream> stream = Resolve(handle);
    if (!stream) return Fail(ACL_ERROR_INVALID_PARAM, "stream %p is not a live stream", handle);
    stream->Enqueue(std::move(task));
    return ACL_SUCCESS;
}

void SynchronizeAllStreams() {
    std::vector<std::shared_ptr<Stream>> streams;
    {
        std::lock_guard<std::mutex> lock(g_streams_mutex);
        for (auto &entry : LiveStreams()) streams.push_back(entry.second);
    }
    streams.push_back(Resolve(nullptr));
    for (auto &stream : streams) {
        std::string ignored;
        stream->Synchronize(&ignored);
    }
}

}  // namespace openaclnn

using namespace openaclnn;

extern "C" {

aclError aclrtCreateStream(aclrtStream *stream) {
    if (!stream) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL, expected a pointer");
    std::shared_ptr<Stream> created;
    try {
        created = std::make_shared<Stream>();
    } catch (const std::exception &e) {
        return Fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtCreateStream: cannot create a stream (%s)", e.what());
    }
    {
        std::lock_guard<std::mutex> lock(g_streams_mutex);
        LiveStreams()[created.get()] = created;
    }
    *stream = created.get();
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
    if (!stream) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: stream is NULL, expected a stream");
    std::shared_ptr<Stream> target;
    {
        std::lock_guard<std::mutex> lock(g_streams_mutex);
        auto it = LiveStreams().find(static_cast<Stream *>(stream));
        if (it == LiveStreams().end()) {
            return Fail(ACL_ERROR_INVALID_PARAM,
                        "aclrtDestroyStream: stream %p is not a live stream (never created or already destroyed)",
                        stream);
        }
        target = std::move(it->second);
        LiveStreams().erase(it);
    }
    // Queued work runs first, here; its errors go with the stream.
    std::string ignored;
    target->Synchronize(&ignored);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
    std::shared_ptr<Stream> target = Resolve(stream);
    if (!target) {
        return Fail(ACL_ERROR_INVALID_PARAM,
                    "aclrtSynchronizeStream: stream %p is not a live stream (never created or already destroyed)",
                    stream);
    }
    std::string message;
    const aclError error = target->Synchronize(&message);
    if (error != ACL_SUCCESS) SetErrorMessage(message);
    return error;
}

}  // extern "C"
