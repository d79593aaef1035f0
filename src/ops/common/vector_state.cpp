#include "ops/common/vector_state.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace openaclnn {

#if defined(__x86_64__) || defined(__i386__)
namespace {

__attribute__((target("avx"))) void ZeroUpper() { _mm256_zeroupper(); }

}  // namespace

void ClearUpperVectorState() {
    // __builtin_cpu_supports reads what the compiler's runtime found at start-up (no CPUID here).
    static const bool has_avx = __builtin_cpu_supports("avx");
    if (has_avx) ZeroUpper();
}
#else
void ClearUpperVectorState() {}
#endif

}  // namespace openaclnn
