// Which operator calls are small tasks in EnqueueTask's sense (runtime/runtime.h): they run at once on the enqueuing
// thread when their stream is idle.
#ifndef OPENACLNN_OPS_COMMON_SMALL_TASK_H_
#define OPENACLNN_OPS_COMMON_SMALL_TASK_H_

#include <cstdint>

namespace openaclnn {

// A call over N rows of C classes planned on `threads` threads: one thread, and N (C + 8) at most kSmallRowsTaskSize
// (a row's own work costs about as much as 8 elements). That is about a microsecond of work with AVX-512, against
// 4-10 us for the hand-off to the stream's thread and back.
constexpr int64_t kSmallRowsTaskSize = 4096;

inline bool SmallRowsTask(int threads, int64_t n, int64_t c) {
    return threads <= 1 && n <= kSmallRowsTaskSize && c <= kSmallRowsTaskSize && n * (c + 8) <= kSmallRowsTaskSize;
}

}  // namespace openaclnn

#endif  // OPENACLNN_OPS_COMMON_SMALL_TASK_H_
