// Vector copies on regular or streaming stores (copy_kinds.cpp), for the benchmarks' copy_kinds rows.
#ifndef OPENACLNN_BENCH_COPY_KINDS_H_
#define OPENACLNN_BENCH_COPY_KINDS_H_

#include <cstddef>

namespace openaclnn_bench {

// dst[0, bytes) <- src[0, bytes) in vectors of the best target this CPU has, on streaming (non-temporal) stores
// where `stream`, else on regular ones. dst and src aligned to 64 bytes.
void VectorCopy(void *dst, const void *src, size_t bytes, bool stream);

}  // namespace openaclnn_bench

#endif  // OPENACLNN_BENCH_COPY_KINDS_H_
