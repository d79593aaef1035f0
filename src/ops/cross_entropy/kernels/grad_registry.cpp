// The one place that decides which gradient kernel runs. Tests, benchmarks and the CLI all go through it.
//
// Order: the Highway kernels this CPU can run, best ISA first; the last (EMU128 or SCALAR, always built) is taken
// whatever the cap. All of them handle every layout and give the same bits. The double-precision reference kernel
// is not a run-time choice: it is the tests' yardstick (ReferenceGradKernelInfo). OPENACLNN_MAX_ISA caps the ISA;
// OPENACLNN_LOG=info names the kernel picked, debug also every kernel passed over and why.
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "kernels/grad_kernel.h"
#include "runtime/runtime.h"

namespace openaclnn::cross_entropy {
namespace {

bool SupportsAll(const GradKernelArgs &) { return true; }

const GradKernelInfo kReferenceKernel = {"reference", SupportsAll, ReferenceGradKernel, 0};

const char *IsaName(int isa) {
    switch (isa) {
        case kGradIsaScalar:
            return "scalar";
        case kGradIsaSse4:
            return "sse4";
        case kGradIsaAvx2:
            return "avx2";
        case kGradIsaAvx512:
            return "avx512";
        default:
            return "best";
    }
}

const char *DtypeName(aclDataType dtype) {
    switch (dtype) {
        case ACL_FLOAT:
            return "FLOAT";
        case ACL_FLOAT16:
            return "FLOAT16";
        case ACL_BF16:
            return "BF16";
        default:
            return "?";
    }
}

}  // namespace

const GradKernelInfo &ReferenceGradKernelInfo() { return kReferenceKernel; }

const std::vector<const GradKernelInfo *> &GradKernels() {
    static const std::vector<const GradKernelInfo *> kernels = HwyGradKernels();
    return kernels;
}

int GradIsaCapFromEnv() {
    const char *value = std::getenv("OPENACLNN_MAX_ISA");
    if (value == nullptr || *value == '\0') return kGradIsaBest;
    struct Name {
        const char *name;
        int isa;
    };
    static const Name kNames[] = {{"scalar", kGradIsaScalar}, {"emu128", kGradIsaScalar}, {"sse4", kGradIsaSse4},
                                  {"neon", kGradIsaSse4},     {"avx2", kGradIsaAvx2},     {"sve", kGradIsaAvx2},
                                  {"avx512", kGradIsaAvx512}, {"avx3", kGradIsaAvx512},   {"sve2", kGradIsaAvx512},
                                  {"best", kGradIsaBest},     {"native", kGradIsaBest}};
    for (const Name &name : kNames) {
        if (strcasecmp(value, name.name) == 0) return name.isa;
    }
    Log(1, "OPENACLNN_MAX_ISA=%s is not one of scalar, sse4, avx2, avx512, best: ignored", value);
    return kGradIsaBest;
}

const GradKernelInfo &SelectGradKernel(const GradKernelArgs &args, int max_isa) {
    const std::vector<const GradKernelInfo *> &kernels = GradKernels();
    for (const GradKernelInfo *kernel : kernels) {
        if (kernel->isa <= max_isa && kernel->supports(args)) return *kernel;
    }
    return *kernels.back();  // the portable target: every layout, any cap
}

const GradKernelInfo &SelectGradKernel(const GradKernelArgs &args) {
    const int cap = GradIsaCapFromEnv();
    const GradKernelInfo &chosen = SelectGradKernel(args, cap);
    if (LogLevel() >= 2) {
        for (const GradKernelInfo *kernel : GradKernels()) {
            if (kernel == &chosen) break;
            Log(2, "cross-entropy grad: skipped kernel %s: %s", kernel->name,
                kernel->isa > cap ? "above OPENACLNN_MAX_ISA" : "does not support these arguments");
        }
    }
    if (LogLevel() >= 1) {
        Log(1,
            "cross-entropy grad: kernel %s for %s N=%lld C=%lld (col strides %lld/%lld, weight %s, ISA cap %s)",
            chosen.name, DtypeName(args.dtype), static_cast<long long>(args.n), static_cast<long long>(args.c),
            static_cast<long long>(args.log_prob_col_stride), static_cast<long long>(args.out_col_stride),
            args.weight ? "yes" : "no", IsaName(cap));
    }
    return chosen;
}

}  // namespace openaclnn::cross_entropy
