// One randomised configuration of aclnnCrossEntropyLossGrad: how its inputs are drawn, how its tensors are laid
// out, and the check of the operator's output against the float64 reference.
#ifndef OPENACLNN_TESTS_CORE_GRAD_CASES_H_
#define OPENACLNN_TESTS_CORE_GRAD_CASES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "acl_helpers.h"
#include "reference.h"

namespace openaclnn::test {

enum class ViewKind {
    kContiguous,
    kStrided,          // every tensor strided with an element offset, gaps poisoned
    kTransposed,       // logProb and out are column-major storages viewed as [N, C]
    kInPlace,          // out is the logProb aclTensor itself
    kInPlaceAlias,     // out is a second aclTensor with logProb's address and (strided) layout
    kBroadcastInputs,  // logProb rows share one storage row (row stride 0), weight strided
};
constexpr int kViewKinds = 6;
const char *ViewKindName(ViewKind v);

enum class IgnoreKind { kNoneHit, kSomeHit, kAllHit };
enum class ZlossKind { kOff, kWithGradZloss, kWithoutGradZloss };

struct CaseConfig {
    uint64_t seed = 1;
    int64_t n = 4;
    int64_t c = 7;
    aclDataType dtype = ACL_FLOAT;
    aclDataType target_dtype = ACL_INT64;
    int reduction = 1;  // 0 none, 1 mean, 2 sum, 3 NULL (= mean)
    bool weight = false;
    IgnoreKind ignore = IgnoreKind::kNoneHit;
    int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    ZlossKind zloss = ZlossKind::kOff;
    double zloss_scale = 0.0;
    int lse_when_off = 0;       // scale 0: 0 NULL, 1 [0] tensor, 2 [N] tensor
    bool scalar_as_1d = false;  // mean/sum: gradLoss (and gradZloss) of shape [1] instead of []
    ViewKind view = ViewKind::kContiguous;
    double grad_scale = 1.0;           // gradLoss and gradZloss are drawn from [-2, 2] * grad_scale
    bool zero_weight_targets = false;  // every drawn target class gets weight 0 (mean total weight 0)
    std::optional<double> grad_value;  // every gradLoss element takes this value (an infinity, NaN) instead of a draw
    std::vector<int64_t> bad_targets;  // (row, value) pairs flattened: targets outside [0, C) to plant

    Reduction reduction_enum() const;
    std::string Describe() const;
};

// Draws the attributes a config leaves open (ignore index, smoothing and z-loss values) from its seed.
void DrawAttributes(CaseConfig *cfg);

// Builds the tensors, runs the operator on stream and checks every element against ReferenceGrad; returns what
// went wrong (empty: all good). *output_hash (if given) is the FNV-1a hash of the output view's bytes.
std::vector<std::string> RunCase(const CaseConfig &cfg, aclrtStream stream, uint64_t *output_hash = nullptr);
// RunCase reported through gtest (each failure with the config, seed included). Returns true when all passed.
bool RunAndCheckCase(const CaseConfig &cfg, aclrtStream stream, uint64_t *output_hash = nullptr);

}  // namespace openaclnn::test

#endif  // OPENACLNN_TESTS_CORE_GRAD_CASES_H_
