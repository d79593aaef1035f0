// The contract between the cross-entropy forward's plan and its kernels.
//
// Phase 2 of aclnnCrossEntropyLoss runs three steps (loss_rows.cpp holds the first and the last):
//   1. prologue, serial O(N): reads each row's target, classifies the row (counted, ignored, out of range) and
//      gathers the target's logit x[i][t_i] into the row table (before step 2, which may overwrite it in place);
//   2. the kernel, parallel over rows: for every row computes lse_i = log(sum_j exp(x_ij)), writes
//      logProb[i][j] = x_ij - lse_i, and, when label smoothing needs it, sum_j w_j * logProb[i][j];
//   3. epilogue, serial O(N) in double and a fixed order: per-row losses, the reductions, lossOut, zlossOut and
//      lseForZlossOut, and the out-of-range report.
// A kernel reads the input row, writes the logProb row and its own entry of the row table; it allocates nothing
// and reports nothing. Everything it needs was checked in phase 1.
#ifndef OPENACLNN_OPS_CROSS_ENTROPY_LOSS_KERNELS_LOSS_KERNEL_H_
#define OPENACLNN_OPS_CROSS_ENTROPY_LOSS_KERNELS_LOSS_KERNEL_H_

#include <atomic>
#include <cstdint>
#include <thread>

#include "acl/acl_base.h"

namespace openaclnn::cross_entropy_loss {

enum LossRowKind : int32_t {
    kLossRowCounted = 0,      // target in [0, C): contributes to the loss and to the mean's denominators
    kLossRowIgnored = 1,      // target == ignoreIndex: loss 0, left out of the denominators
    kLossRowOutOfRange = 2,   // target outside [0, C) and not ignoreIndex: loss NaN, reported at sync
};

// One row of the workspace table (40 bytes, so the workspace is N * 40 bytes plus alignment).
struct LossRowStats {
    double lse;                    // kernel: log(sum_j exp(x_ij)); NaN when the row holds NaN or +inf
    double weighted_log_prob_sum;  // kernel, only with smoothing: sum_j w_j * logProb_ij (w_j = 1 without weight)
    double target_logit;           // prologue: x[i][t_i] for a counted row, else 0
    double target_weight;          // prologue: w[t_i] (1 without weight) for a counted row, else 0
    int32_t kind;                  // prologue: LossRowKind
    int32_t reserved;
};
static_assert(sizeof(LossRowStats) == 40, "row table layout");

// Everything a kernel reads and writes. Pointers already include the view offsets; strides are in elements.
struct LossKernelArgs {
    int64_t n;
    int64_t c;
    aclDataType dtype;  // of input and logProb: ACL_FLOAT, ACL_FLOAT16 or ACL_BF16
    const void *input;
    int64_t input_row_stride;
    int64_t input_col_stride;
    void *log_prob;  // may be input itself (same layout): each element is read before it is written
    int64_t log_prob_row_stride;
    int64_t log_prob_col_stride;
    bool smoothing;       // compute weighted_log_prob_sum
    const float *weight;  // nullptr: all ones; read only when smoothing
    int64_t weight_stride;
    LossRowStats *rows;   // n entries; the kernel writes lse (and weighted_log_prob_sum) of rows it owns
    bool stream_stores;   // hint: the logProb output is far larger than the caches; non-temporal stores pay
};

// Whether the rows go through the contiguous loops (ContiguousRows, SplitRowOf): unit column strides and a contiguous
// weight where one is read (with smoothing); one column needs no column stride (only its first element is read).
// Other layouts are gathered in chunks.
inline bool LossRowsContiguous(const LossKernelArgs &args) {
    return args.c == 1 || (args.input_col_stride == 1 && args.log_prob_col_stride == 1 &&
                           (!args.smoothing || args.weight == nullptr || args.weight_stride == 1));
}

// Rows [row_begin, row_end), every column.
using LossKernelFn = void (*)(const LossKernelArgs &args, int64_t row_begin, int64_t row_end);

// Pass B cuts every row into pieces of LossPieceColumns(c) columns (the last one shorter): each piece's exps are
// summed per logical lane from zero, and a lane's row sum is the pieces' lane sums added in piece order. The pieces
// are a function of C alone, so a row gives the same bits whether one thread runs it whole or several threads share
// its pieces (few long rows, e.g. N = 1, C = 152064; see LossSplitRowFn). A row of at most 16384 columns is one
// piece. The size is a multiple of the 2048-column gather chunks (and so of the 128-element blocks), and there are
// at most kLossMaxPieces.
constexpr int64_t kLossMinPieceColumns = 16384;
constexpr int64_t kLossMaxPieces = 64;
constexpr int64_t kLossPieceAlign = 2048;
inline int64_t LossPieceColumns(int64_t c) {
    const int64_t even = (c + kLossMaxPieces - 1) / kLossMaxPieces;
    const int64_t aligned = (even + kLossPieceAlign - 1) / kLossPieceAlign * kLossPieceAlign;
    return aligned > kLossMinPieceColumns ? aligned : kLossMinPieceColumns;
}
inline int64_t LossPieceCount(int64_t c) {
    const int64_t piece = LossPieceColumns(c);
    return (c + piece - 1) / piece;
}

// Spins until ready() (with acquire ordering inside), yielding the core after a while in case the thread waited for
// is not running. The waits between the passes of a shared row are microseconds: libgomp's barrier put the waiting
// thread to sleep and woke it through the kernel, which on the development VM doubled the time of a 1 x 152064 row.
template <typename Ready>
inline void LossSpinUntil(const Ready &ready) {
    for (int spins = 0; !ready(); ++spins) {
        if (spins >= (1 << 14)) std::this_thread::yield();
    }
}

// A barrier for the threads of a region that share rows, between one row and the next: the last thread to arrive
// runs `last` (resetting the scratch) before any thread goes on.
class LossSpinBarrier {
public:
    explicit LossSpinBarrier(int threads) : threads_(threads) {}

    template <typename Last>
    void Wait(const Last &last) {
        const int generation = generation_.load(std::memory_order_acquire);
        if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads_) {
            last();
            arrived_.store(0, std::memory_order_relaxed);
            generation_.store(generation + 1, std::memory_order_release);
            return;
        }
        LossSpinUntil([&] { return generation_.load(std::memory_order_acquire) != generation; });
    }

private:
    std::atomic<int> arrived_{0};
    std::atomic<int> generation_{0};
    const int threads_;
};

// What the threads sharing one row exchange: each piece's max and per-lane sums (16 logical lanes), whether its
// logProb held a NaN, and per pass the next piece to take and the number done. On the caller's stack (about
// 25 KiB), reset before each row.
struct LossSplitScratch {
    float max[kLossMaxPieces];
    double sum[kLossMaxPieces][16];  // sum of exp(x - M)
    double wx[kLossMaxPieces][16];   // smoothing: sum of w x
    double w[kLossMaxPieces][16];    // smoothing with weight: sum of w
    bool nan[kLossMaxPieces];
    std::atomic<int64_t> next[3];
    std::atomic<int64_t> done[3];

    LossSplitScratch() { Reset(); }

    void Reset() {
        for (int pass = 0; pass < 3; ++pass) {
            next[pass].store(0, std::memory_order_relaxed);
            done[pass].store(0, std::memory_order_relaxed);
        }
    }
    // A piece of `pass` nobody has taken yet, or -1.
    int64_t Take(int pass, int64_t pieces) {
        const int64_t p = next[pass].fetch_add(1, std::memory_order_relaxed);
        return p < pieces ? p : -1;
    }
    // One piece of `pass` finished (its results written before); true for the call that finishes the pass.
    bool Finish(int pass, int64_t pieces) {
        return done[pass].fetch_add(1, std::memory_order_acq_rel) + 1 == pieces;
    }
    // Until every piece of `pass` is finished (and its results visible).
    void WaitFor(int pass, int64_t pieces) {
        LossSpinUntil([&] { return done[pass].load(std::memory_order_acquire) == pieces; });
    }
};

// One row shared by the threads of a parallel region: every thread of the region calls it for the same row. Each
// pass hands the row's pieces to whichever thread asks first (a thread woken late finds them taken and only waits),
// and the threads wait for all pieces of a pass before the next pass reads its results, so no value depends on who
// computed what. The caller resets the scratch between rows, once every thread has returned (LossSpinBarrier).
// Contiguous rows only (unit column strides, contiguous weight).
using LossSplitRowFn = void (*)(const LossKernelArgs &args, int64_t row, LossSplitScratch &scratch);

// One entry of the registry (loss_registry.cpp), walked in order: the first entry whose ISA the CPU has, within
// OPENACLNN_MAX_ISA, and whose `supports` accepts the arguments runs. The reference kernel, last, supports all.
struct LossKernelInfo {
    const char *name;  // "reference", "hwy:AVX3", ...
    int isa_rank;      // 0 scalar, 1 sse4, 2 avx2, 3 avx512 (compared with OPENACLNN_MAX_ISA)
    bool (*supports)(const LossKernelArgs &args);
    LossKernelFn run;
    LossSplitRowFn split_row;  // nullptr: rows are never shared (the reference kernel)
};

// The reference kernel: plain loops over any strides, all arithmetic in double, each output rounded once.
void ReferenceLossKernel(const LossKernelArgs &args, int64_t row_begin, int64_t row_end);

// The Highway kernels compiled into this build for the targets this CPU supports, best first (loss_hwy.cpp).
int HighwayLossKernels(const LossKernelInfo **out, int capacity);

// Every kernel this CPU can run, best first, the reference last (for tests and benchmarks).
int AvailableLossKernels(const LossKernelInfo **out, int capacity);

// Picks the kernel for args: honours OPENACLNN_MAX_ISA and logs the choice at OPENACLNN_LOG=info.
const LossKernelInfo &SelectLossKernel(const LossKernelArgs &args);

}  // namespace openaclnn::cross_entropy_loss

#endif  // OPENACLNN_OPS_CROSS_ENTROPY_LOSS_KERNELS_LOSS_KERNEL_H_
