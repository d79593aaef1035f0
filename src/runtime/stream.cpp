// Streams: in-order asynchronous queues. Each stream has a worker thread that runs its tasks in order; a
// synchronising thread that finds the worker idle runs the queued tasks itself (still in order, still one at a
// time), and a small task enqueued on an idle stream runs at once on the enqueuing thread: both save a thread
// hand-off on the small calls where latency is all there is.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/runtime.h"

namespace openaclnn {
namespace {

class Stream final : public TaskContext {
public:
    Stream() : worker_([this] { WorkerLoop(); }) {}

    ~Stream() override {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        work_ready_.notify_all();
        worker_.join();
    }

    // A small task (see EnqueueTask) finding the stream idle runs here and now, on the calling thread: handing it to
    // the worker would cost more than running it (a wake-up, then a wait in Synchronize: 4-10 us a round trip on
    // the development machine, against about 1 us for N = 8, C = 10). Tasks queued meanwhile wait for it, then go
    // to the worker; a Synchronize meanwhile waits for it as for the worker.
    void Enqueue(Task task, bool small) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (small && !running_ && queue_.empty()) {
            running_ = true;
            lock.unlock();
            task(*this);
            task = nullptr;  // release captured state outside the lock
            lock.lock();
            running_ = false;
            if (queue_.empty()) {
                idle_.notify_all();
            } else {
                work_ready_.notify_one();
            }
            return;
        }
        queue_.push_back(std::move(task));
        const bool wake = !running_;
        lock.unlock();
        if (wake) work_ready_.notify_one();
    }

    // Waits until every queued task has run; returns the first error recorded since the last call.
    aclError Synchronize(std::string *message) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!running_ && !queue_.empty()) DrainLocked(lock);
        idle_.wait(lock, [this] { return queue_.empty() && !running_; });
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
    // Runs queued tasks until the queue is empty. Called with the lock held; releases it around each task.
    void DrainLocked(std::unique_lock<std::mutex> &lock) {
        running_ = true;
        while (!queue_.empty()) {
            Task task = std::move(queue_.front());
            queue_.pop_front();
            lock.unlock();
            task(*this);
            task = nullptr;  // release captured state outside the lock
            lock.lock();
        }
        running_ = false;
        idle_.notify_all();
    }

    void WorkerLoop() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            work_ready_.wait(lock, [this] { return stopping_ || (!queue_.empty() && !running_); });
            if (!queue_.empty() && !running_) {
                DrainLocked(lock);
                continue;
            }
            if (stopping_ && queue_.empty() && !running_) return;
        }
    }

    std::mutex mutex_;
    std::condition_variable work_ready_;
    std::condition_variable idle_;
    std::deque<Task> queue_;
    bool running_ = false;
    bool stopping_ = false;
    std::mutex error_mutex_;  // errors are recorded from inside tasks, with mutex_ released
    aclError first_error_ = ACL_SUCCESS;
    std::string first_error_message_;
    std::thread worker_;  // last: starts once everything above is constructed
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

aclError EnqueueTask(aclrtStream handle, Task task, bool small) {
    std::shared_ptr<Stream> stream = Resolve(handle);
    if (!stream) return Fail(ACL_ERROR_INVALID_PARAM, "stream %p is not a live stream", handle);
    stream->Enqueue(std::move(task), small);
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
        return Fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtCreateStream: cannot start a stream (%s)", e.what());
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
    // Queued work finishes first; its errors go with the stream. The worker stops when the last reference goes.
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
