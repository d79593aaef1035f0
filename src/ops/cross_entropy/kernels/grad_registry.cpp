// The one place that decides which gradient kernel runs. Tests, benchmarks and the CLI all go through it.
#include <cstdlib>
#include <cstring>

#include "kernels/grad_kernel.h"
#include "runtime/runtime.h"

namespace openaclnn::cross_entropy {
namespace {

bool SupportsAll(const GradKernelArgs &) { return true; }

const GradKernelInfo kReferenceKernel = {"reference", SupportsAll, ReferenceGradKernel};

}  // namespace

const GradKernelInfo &SelectGradKernel(const GradKernelArgs &args) {
    (void)args;
    return kReferenceKernel;
}

}  // namespace openaclnn::cross_entropy
