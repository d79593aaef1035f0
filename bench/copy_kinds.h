// Vector copies on regular or streaming stores (copy_kinds.cpp), for the benchmarks' copy_kinds rows.
#ifndef OPENACLNN_BENCH_COPY_KINDS_H_
#define OPENACLNN_BENCH_COPY_KINDS_H_

#include <cstddef>

namespace openaclnn_bench {

// dst[0, bytes) <- src[0, bytes) in vectors of the best target this CPU has, on regular or on streaming
// (non-temporal) stores; called as memcpy is. dst and src aligned to 64 bytes.
void RegularCopy(void *dst, const void *src, size_t bytes);
void StreamingCopy(void *dst, const void *src, size_t bytes);
// The same with exp applied to each element as a float (Highway's vector Exp): a loop with arithmetic between its
// loads and stores. bytes a multiple of 4.
void RegularExpCopy(void *dst, const void *src, size_t bytes);
void StreamingExpCopy(void *dst, const void *src, size_t bytes);

}  // namespace openaclnn_bench

#endif  // OPENACLNN_BENCH_COPY_KINDS_H_
