// Turning .npy files and flags into the operators' inputs, with every mismatch reported against its flag.
#ifndef OPENACLNN_TOOLS_INPUTS_H_
#define OPENACLNN_TOOLS_INPUTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"
#include "npy.h"

namespace openaclnn_cli {

// The compute dtype a command runs in: --dtype when given, else the main input file's own (float32 or float16).
// A uint16 file is accepted only with --dtype bf16 (bit patterns); float64 only with an explicit --dtype.
ComputeType DecideComputeType(const NpyArray &main_input, const std::string &main_label,
                              const std::optional<std::string> &dtype_flag);

// The values of a float file in the compute dtype: exact when the file already has that type (or holds bf16 bit
// patterns for bf16), otherwise each value is rounded once to nearest even.
std::vector<uint8_t> ToComputeType(const NpyArray &array, const std::string &label, ComputeType type);

// A class-index file as int64 values (any integer dtype; int32 files keep their type for the operator).
struct TargetData {
    std::vector<int64_t> values;
    bool is_int32 = false;
};
TargetData LoadTarget(const NpyArray &array, const std::string &label);

// A weight file as float32 (float16 widens exactly, float64 rounds to nearest).
std::vector<float> LoadWeight(const NpyArray &array, const std::string &label);

// "none", "mean" or "sum" (case-sensitive, as the operator takes them).
std::string ParseReduction(const std::string &text);

// Checks that every target is in [0, C) or equals ignore_index; names the row otherwise.
void CheckTargets(const TargetData &target, int64_t classes, int64_t ignore_index, const std::string &label);

// Everything aclnnCrossEntropyLossGrad takes, loaded and checked.
struct GradProblem {
    ComputeType type = ComputeType::kFloat32;
    int64_t n = 0;
    int64_t c = 0;
    std::vector<uint8_t> log_prob;  // n * c elements of `type`
    TargetData target;
    std::optional<std::vector<float>> weight;
    std::vector<int64_t> grad_shape;  // [n] for none; [] (or [1] as the file had it) for mean/sum
    std::vector<uint8_t> grad;
    std::optional<std::vector<uint8_t>> grad_zloss;  // shaped as grad
    std::optional<std::vector<uint8_t>> lse;         // [n]
    std::string reduction = "mean";
    int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    double zloss_scale = 0.0;

    std::string Describe() const;  // "float32, N=4, C=10, reduction=mean, ..."
};

// The flags grad and check share.
std::vector<OptionSpec> GradInputOptions();
GradProblem LoadGradProblem(const Options &options);

// Runs aclnnCrossEntropyLossGrad through the public API and returns `out` (n * c elements of problem.type).
// The output buffer is filled with NaN bit patterns first, so elements the operator failed to write show up.
std::vector<uint8_t> RunGrad(const GradProblem &problem);

}  // namespace openaclnn_cli

#endif  // OPENACLNN_TOOLS_INPUTS_H_
