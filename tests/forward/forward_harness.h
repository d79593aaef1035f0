// aclnnCrossEntropyLoss under test: a case description, its float64 reference, the run through the C ABI and the
// comparison with the tolerance table.
#ifndef OPENACLNN_TESTS_FORWARD_FORWARD_HARNESS_H_
#define OPENACLNN_TESTS_FORWARD_FORWARD_HARNESS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "acl_helpers.h"
#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "random_inputs.h"
#include "reference.h"

namespace openaclnn::test {

enum class LogProbPlacement { kSeparate, kInPlace };

struct ForwardCase {
    int64_t n = 0;
    int64_t c = 0;
    aclDataType dtype = ACL_FLOAT;
    aclDataType target_dtype = ACL_INT64;
    Reduction reduction = Reduction::kMean;
    int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    double zloss_scale = 0.0;
    bool return_zloss = false;
    std::vector<double> logits;   // n * c row-major, already representable in dtype
    std::vector<int64_t> target;  // n
    std::vector<double> weight;   // c, or empty: no weight tensor
    Layout input_layout;
    Layout log_prob_layout;       // ignored when in place
    LogProbPlacement placement = LogProbPlacement::kSeparate;
    int64_t target_stride = 1;
    int64_t loss_stride = 1;      // reduction none
    int64_t lse_stride = 1;
    bool lse_empty = false;       // pass lseForZlossOut as [0] (scale must be 0)
    bool zloss_empty = false;     // pass zlossOut as [0] (return_zloss must be false)
    uint64_t seed = 0;

    std::string Describe() const;
};

struct ForwardReference {
    std::vector<double> loss;            // n for none, else 1
    std::vector<double> loss_magnitude;  // error scale of each loss element (sum of |terms|)
    std::vector<double> zloss;
    std::vector<double> zloss_magnitude;
    std::vector<double> log_prob;        // n * c
    std::vector<double> lse;             // n
    std::vector<int64_t> bad_rows;
};

// Literal PyTorch semantics in double: log_softmax, nll with weight and ignore_index, label smoothing, z-loss.
ForwardReference ReferenceForward(const ForwardCase &fc);

struct ForwardOutcome {
    aclnnStatus phase1 = -1;
    aclnnStatus phase2 = -1;
    aclError sync = -1;
    std::string phase1_message;
    std::string sync_message;
    std::vector<double> loss, zloss, log_prob, lse;
    bool all_written = true;  // every element the op must write is no longer poison
    std::string unwritten;    // the first one that is
    bool input_unchanged = true;
};

ForwardOutcome RunForward(const ForwardCase &fc, aclrtStream stream);

// A random case (shapes, dtypes, options, layouts) from the seed.
ForwardCase RandomForwardCase(uint64_t seed, aclDataType dtype, int64_t n, int64_t c);

// Adds gtest failures for every element outside the tolerance; returns the count.
int CompareForward(const ForwardCase &fc, const ForwardReference &ref, const ForwardOutcome &got);

// Tolerances (see tolerance.h): all arithmetic in fp32 or wider, then one rounding at the store.
double ForwardTolerance(aclDataType dtype, double reference, double magnitude);

}  // namespace openaclnn::test

#endif  // OPENACLNN_TESTS_FORWARD_FORWARD_HARNESS_H_
