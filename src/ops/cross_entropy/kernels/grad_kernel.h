// The contract between the cross-entropy gradient's plan and its kernels.
//
// Phase 2 first runs the prologue (grad_rows.cpp), two O(N) passes (shared by the threads from 8192 rows, with the
// same bits whatever their number) that turn gradLoss, target, weight, the z-loss inputs and the attributes into
// per-row coefficients stored in the workspace. Every output element is then
//
//     out[i][j] = exp(logProb[i][j]) * a_i  -  b_i * w_j  -  (j == col_i ? g_i : 0)
//
// with w_j the class weight (1 without weights). A kernel is a pure streaming map over a tile of rows x columns:
// it reads logProb once, writes out once, allocates nothing and reports nothing. Rows the prologue masked
// (ignored, or all-zero mean) have kind kRowZero and are written as +0.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_KERNEL_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_KERNEL_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "acl/acl_base.h"

namespace openaclnn::cross_entropy {

enum RowKind : int32_t {
    kRowCompute = 0,  // the formula above
    kRowZero = 1,     // ignored row, or a mean whose denominator is zero: all +0
};

// Facts about a row that let a kernel skip work, set by the prologue; 0 (no flag) is always correct.
enum RowFlag : int32_t {
    // |b| * max_j |w_j| <= kSmallBiasLimit, the maximum over all C classes (w_j = 1 without weights; no flag if a
    // weight is infinite or NaN). An fp16 value near the cancellation exp(x) a = b w_j then has an absolute error far
    // below fp16's smallest spacing 2^-24, so its rows need no cancellation guard (grad_hwy-inl.h, kCancellationBound).
    kRowSmallBias = 1,
};
constexpr double kSmallBiasLimit = 0x1p-10;

// The RowFlag bits of a row with bias coefficient b, where max_abs_weight is the greatest |w_j| over all C classes
// (1 without weights, +inf or NaN if a weight is not finite).
inline int32_t GradRowFlags(double b, double max_abs_weight) {
    // NaN in either operand compares false: no flag.
    return (b < 0 ? -b : b) * max_abs_weight <= kSmallBiasLimit ? kRowSmallBias : 0;
}

// One row's coefficients, computed in double by the prologue (40 bytes, so a table of N rows is N * 40 bytes of
// workspace). a and b are NaN for a row whose target is out of range (the row becomes NaN); col is then -1.
struct GradRowCoefficients {
    double a;      // multiplies exp(logProb): nll + smoothing * sum(w) + z-loss
    double b;      // multiplies w_j: the smoothing term
    double g;      // subtracted at the target column: the nll term
    int64_t col;   // target column, or -1 when no column gets g
    int32_t kind;  // RowKind
    int32_t flags;  // RowFlag bits
};
static_assert(sizeof(GradRowCoefficients) == 40, "coefficient table layout");

// What the weights allow the kernels (GradWeightTraits, found with W in the prologue's pass over the weights):
//  finite:   every w_j is finite, so b * w_j is finite for finite b (the fast path of the exp needs no NaN case);
//  positive: every w_j is finite with its sign bit clear (+0 included), so b * w_j is exactly +0 for b == +0 and
//            m - b * w_j is m, bit for bit (-0 included), which lets a row with b == +0 drop the bias term. A negative
//            weight would make b * w_j = -0, and -0 - (-0) = +0 differs from -0.
//  min_nonzero, max: the least nonzero and the greatest |w_j| (meaningful when finite).
// Every tile of a call decides by the traits of all C weights: without its bias term a bf16 row runs a polynomial of
// another degree (grad_hwy-inl.h, kRowDegree), so tiles that decided by their own columns gave other bits where only
// some of them held a negative or an infinite weight.
struct GradWeightTraits {
    bool finite = true;
    bool positive = true;
    float min_nonzero = HUGE_VALF;
    float max = 0.0f;
};

// The traits of two sets of weights together.
inline GradWeightTraits MergeWeightTraits(const GradWeightTraits &x, const GradWeightTraits &y) {
    return GradWeightTraits{x.finite && y.finite, x.positive && y.positive,
                            x.min_nonzero < y.min_nonzero ? x.min_nonzero : y.min_nonzero,
                            x.max > y.max ? x.max : y.max};
}

// Everything a kernel reads and writes. Pointers already include the view offsets; strides are in elements.
struct GradKernelArgs {
    int64_t n;
    int64_t c;
    aclDataType dtype;  // of logProb and out: ACL_FLOAT, ACL_FLOAT16 or ACL_BF16
    const void *log_prob;
    int64_t log_prob_row_stride;
    int64_t log_prob_col_stride;
    void *out;
    int64_t out_row_stride;
    int64_t out_col_stride;
    const float *weight;  // nullptr: all ones
    int64_t weight_stride;
    // The weights de-interleaved (SplitWeightPairs), or nullptr. bf16 rows with contiguous weights read them from
    // here in their main loop, where they would otherwise de-interleave w with shuffles (the same bits, more slowly).
    const float *weight_pairs;
    const GradRowCoefficients *rows;  // n entries
    // The traits of all C weights (GradWeightTraits), or nullptr: each tile then finds them itself, over all C.
    const GradWeightTraits *weight_traits;
    // Whether rows that reach the streaming thresholds stream, where the store kind is measured per call
    // (StoreKinds::kMeasured, grad_hwy_shared.h; RunGradPlan sets it). Only speed depends on it.
    bool stream_measured;
    // Whether the call has label smoothing and z-loss (nonzero attributes). Only the store kind's key reads them
    // (StoreKindKey): calls that differ in them take other paths, whose fastest store kind may differ.
    bool label_smoothing;
    bool z_loss;
};

// The number of floats SplitWeightPairs writes for c classes.
inline int64_t WeightPairsSize(int64_t c) { return c; }

// pairs[k] = w_{2k} for k < (c + 1) / 2, then pairs[(c + 1) / 2 + k] = w_{2k + 1} for k < c / 2: the even- and the
// odd-indexed weights, each contiguous. The weights are contiguous too (the kernels read weight_pairs only then).
inline void SplitWeightPairs(const float *weight, int64_t c, float *pairs) {
    float *even = pairs;
    float *odd = pairs + (c + 1) / 2;
    for (int64_t k = 0; k < c / 2; ++k) {  // (vectorised by the compiler)
        even[k] = weight[2 * k];
        odd[k] = weight[2 * k + 1];
    }
    if (c % 2 != 0) even[c / 2] = weight[c - 1];
}

// A rectangle of the output: rows [row_begin, row_end) x columns [col_begin, col_end).
struct GradTile {
    int64_t row_begin;
    int64_t row_end;
    int64_t col_begin;
    int64_t col_end;
};

using GradKernelFn = void (*)(const GradKernelArgs &args, const GradTile &tile);

// Instruction-set levels, for OPENACLNN_MAX_ISA. A kernel runs only when its level is at most the cap. Every level
// runs the same operations in the same order (grad_hwy-inl.h), so the cap changes speed, never a bit of the output.
enum GradIsa : int {
    kGradIsaScalar = 1,     // Highway EMU128/SCALAR: portable C++ ("scalar"), the lowest cap
    kGradIsaSse4 = 2,       // SSE4 (NEON on Arm)
    kGradIsaAvx2 = 3,       // AVX2 + FMA + F16C (SVE)
    kGradIsaAvx512 = 4,     // AVX-512 F/VL/DQ/BW (SVE2)
    kGradIsaBest = 100,     // no cap
};

// W = sum_j w_j over C FLOAT weights, in the one order every path uses (grad_rows.cpp, GradKernelInfo::weigh): 64
// partial sums in double, part k taking the w_j with j mod 64 == k in increasing j, combined as a fixed tree (part k
// plus part k + width, for width = 32, 16, ..., 1). The parts fall into kWeightSlices slices of 16 consecutive parts
// (one 64-byte line of each 256 bytes of weights), which threads may sum apart: a part's order does not change.
constexpr int kWeightSumParts = 64;
constexpr int kWeightSliceParts = 16;
constexpr int kWeightSlices = kWeightSumParts / kWeightSliceParts;

// W from its parts (the tree above; part is overwritten).
inline double WeightSumOfParts(double *part) {
    for (int width = kWeightSumParts / 2; width >= 1; width /= 2) {
        for (int k = 0; k < width; ++k) part[k] += part[k + width];
    }
    return part[0];
}

using GradWeighFn = GradWeightTraits (*)(const float *w, int64_t c, int first_slice, int slices, double *part);

// One entry of the kernel registry (grad_registry.cpp). The registry walks its list in order and takes the first
// kernel whose `supports` accepts the arguments and whose ISA is within OPENACLNN_MAX_ISA; the last one (the
// portable Highway target) supports every layout and is taken whatever the cap.
struct GradKernelInfo {
    const char *name;  // e.g. "hwy:AVX3", "hwy:EMU128"
    bool (*supports)(const GradKernelArgs &args);
    GradKernelFn run;
    int isa;  // GradIsa
    // out[i] = a[i] * b[i] + c[i] by the kernel's own fused multiply-add (one rounding, as std::fmaf), for the tests
    // that check it against std::fmaf on every target; null for the reference kernel.
    void (*fma)(const float *a, const float *b, const float *c, float *out, size_t count) = nullptr;
    // out[i] = ExpDouble(x[i]) (common/exp_double.h) by the kernel's vector code, for the tests that check it against
    // the scalar function on every target; null for the reference kernel.
    void (*exp_double)(const double *x, double *out, size_t count) = nullptr;
    // The prologue's pass over contiguous weights w[0, c) by the kernel's vector code, for the columns j whose part
    // j mod kWeightSumParts lies in slices [first_slice, first_slice + slices): W's parts of those slices into part
    // (unless part is null: the traits only), and the traits of those weights. Null for the reference kernel, whose
    // callers do it as the scalar code does.
    GradWeighFn weigh = nullptr;
    // exp(x[i]) a as the kernel's rows compute it (grad_hwy-inl.h, ScaledExp), with the exp of `degree` (4 or 5: the
    // 16-bit rows' Horner form with a's factors; 6: fp32's, whose reduction is always two-step) and the reduction in
    // one step or two: on the general path from a row's factors of a (by_row) and from a vector of a (by_lane), and
    // on the fast path from the row's factors (fast; meaningful only where every result is a normal float). For the
    // tests that hold every target to the same bits; null for the reference kernel.
    void (*scaled_exp)(int degree, bool one_step, float a, const float *x, size_t count, float *by_row, float *by_lane,
                       float *fast) = nullptr;
};

// The reference kernel: every element computed in double from the exact fp32 value of logProb, rounded once to
// the output type. Any strides. Slow and exact: the yardstick the kernel tests measure every registered kernel
// against. It is not in the registry and never runs inside the operator (its bits differ from the SIMD kernels',
// which all agree with each other); tests call it directly, or through ReferenceGradKernelInfo().
void ReferenceGradKernel(const GradKernelArgs &args, const GradTile &tile);

// The reference kernel as a registry entry (isa 0), for tests that drive a kernel through a GradPlan.
const GradKernelInfo &ReferenceGradKernelInfo();

// Picks the kernel for args (honours OPENACLNN_MAX_ISA and logs the choice at OPENACLNN_LOG=info).
const GradKernelInfo &SelectGradKernel(const GradKernelArgs &args);

// The same with an explicit cap (a GradIsa) instead of OPENACLNN_MAX_ISA; logs nothing.
const GradKernelInfo &SelectGradKernel(const GradKernelArgs &args, int max_isa);

// OPENACLNN_MAX_ISA as a GradIsa: unset or empty gives kGradIsaBest; "scalar" (or "emu128"), "sse4", "avx2",
// "avx512" (or "avx3"), "best"; anything else gives kGradIsaBest and a warning in the log.
int GradIsaCapFromEnv();

// Every kernel this CPU can run, best first, the portable one last (tests and benchmarks iterate over it).
const std::vector<const GradKernelInfo *> &GradKernels();

// The SIMD kernels this CPU can run, best first (grad_hwy.cpp).
std::vector<const GradKernelInfo *> HwyGradKernels();

}  // namespace openaclnn::cross_entropy

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_KERNELS_GRAD_KERNEL_H_
