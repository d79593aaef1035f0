// `openaclnn forward`: aclnnCrossEntropyLoss on .npy files, writing loss, logProb, lse and zloss.
#include <cstdio>
#include <iostream>

#include "acl_session.h"
#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "cli_common.h"
#include "commands.h"
#include "inputs.h"
#include "npy.h"

// The forward operator arrived in the library after the tool: referencing it weakly lets the tool run against a
// library build without it (forward then says so) instead of failing to start.
#pragma weak aclnnCrossEntropyLossGetWorkspaceSize
#pragma weak aclnnCrossEntropyLoss

namespace openaclnn_cli {

namespace {

NpyType NpyTypeOf(ComputeType type) {
    return type == ComputeType::kBf16   ? NpyType{NpyKind::kUnsignedInt, 2}
           : type == ComputeType::kFloat16 ? NpyType{NpyKind::kFloat, 2}
                                          : NpyType{NpyKind::kFloat, 4};
}

}  // namespace

int ForwardCommand(int argc, char **argv) {
    const std::vector<OptionSpec> specs = {
        {"--input", "", true, "FILE", "logits, [N, C] (float32, float16; bf16 as uint16 bits with --dtype bf16)"},
        {"--target", "", true, "FILE", "class indices, [N] (int64 or int32; other integer types are widened)"},
        {"--weight", "", true, "FILE", "optional class weights, [C] float32"},
        {"--reduction", "", true, "R", "none, mean (default) or sum"},
        {"--ignore-index", "", true, "K", "rows whose target equals K are ignored (default -100)"},
        {"--label-smoothing", "", true, "S", "label smoothing in [0, 1] (default 0)"},
        {"--zloss-scale", "", true, "Z", "z-loss scale (lseSquareScaleForZloss, default 0)"},
        {"--return-zloss", "", false, "", "also compute the z-loss term alone (zlossOut); implied by --zloss-out"},
        {"--dtype", "", true, "T", "compute dtype: float32, float16 or bf16 (default: that of --input)"},
        {"--loss-out", "", true, "FILE", "write the loss: [N] for none, [] for mean/sum"},
        {"--log-prob-out", "", true, "FILE", "write logProb = input - lse, [N, C]"},
        {"--lse-out", "", true, "FILE", "write the row log-sum-exp (lseForZloss), [N]"},
        {"--zloss-out", "", true, "FILE", "write the z-loss term, shaped as the loss"},
        {"-o", "--output-prefix", true, "PREFIX",
         "write PREFIX.loss.npy, PREFIX.log_prob.npy, PREFIX.lse.npy (and PREFIX.zloss.npy with --return-zloss or "
         "a non-zero --zloss-scale)"},
    };
    const Options options("forward", specs, argc, argv);
    if (options.Help()) {
        std::cout << FormatHelp(
            "openaclnn forward --input FILE --target FILE [options] (-o PREFIX | --loss-out FILE ...)",
            "Computes aclnnCrossEntropyLoss through the library's public C API: the cross-entropy loss of logits\n"
            "(PyTorch's cross_entropy with weight, ignore_index and label_smoothing, plus scale * lse^2 when\n"
            "--zloss-scale is non-zero), and the logProb and lse that aclnnCrossEntropyLossGrad (`openaclnn grad`)\n"
            "consumes.",
            specs,
            "example:\n"
            "  openaclnn forward --input logits.npy --target t.npy -o fw\n"
            "  openaclnn grad --log-prob fw.log_prob.npy --target t.npy -o grad.npy\n\n"
            "bf16 travels as uint16 .npy files of bit patterns (NumPy has no bfloat16), with --dtype bf16.\n"
            "exit status: 0 success, 2 bad arguments or input files, 3 library or system failure. All outputs are\n"
            "written to temporary names and renamed together at the end: a failed run leaves none of them.\n");
        return kExitOk;
    }
    const auto input_path = options.Get("--input");
    if (!input_path) BadInput("--input is required (the logits)");
    const auto target_path = options.Get("--target");
    if (!target_path) BadInput("--target is required");
    const std::string reduction_text = ParseReduction(options.GetOr("--reduction", "mean"));
    const int64_t ignore_index = options.Int("--ignore-index", -100);
    const double label_smoothing = options.Double("--label-smoothing", 0.0);
    if (label_smoothing < 0.0 || label_smoothing > 1.0) {
        BadInput("--label-smoothing: " + FormatDouble(label_smoothing) + " is outside [0, 1]");
    }
    const double zloss_scale = options.Double("--zloss-scale", 0.0);

    // Outputs: explicit paths, or PREFIX.*.npy.
    std::string loss_path = options.GetOr("--loss-out", "");
    std::string log_prob_path = options.GetOr("--log-prob-out", "");
    std::string lse_path = options.GetOr("--lse-out", "");
    std::string zloss_path = options.GetOr("--zloss-out", "");
    bool return_zloss = options.Has("--return-zloss") || !zloss_path.empty();
    if (auto prefix = options.Get("-o")) {
        if (!loss_path.empty() || !log_prob_path.empty() || !lse_path.empty() || !zloss_path.empty()) {
            BadInput("-o PREFIX and the --*-out flags: give one or the other");
        }
        if (zloss_scale != 0.0) return_zloss = true;
        loss_path = *prefix + ".loss.npy";
        log_prob_path = *prefix + ".log_prob.npy";
        lse_path = *prefix + ".lse.npy";
        if (return_zloss) zloss_path = *prefix + ".zloss.npy";
    }
    if (loss_path.empty() && log_prob_path.empty() && lse_path.empty() && zloss_path.empty()) {
        BadInput("no output: give -o PREFIX or at least one of --loss-out, --log-prob-out, --lse-out, --zloss-out");
    }
    for (auto [path, flag] : {std::pair{loss_path, "--loss-out"}, {log_prob_path, "--log-prob-out"},
                              {lse_path, "--lse-out"}, {zloss_path, "--zloss-out"}}) {
        if (!path.empty()) AtomicOutputs::CheckWritable(path, options.Has("-o") ? "-o" : flag);
    }

    const std::string in_label = "--input " + *input_path;
    const NpyArray input = ReadNpy(*input_path, "--input");
    const ComputeType type = DecideComputeType(input, in_label, options.Get("--dtype"));
    if (input.shape.size() != 2) BadInput(in_label + ": shape " + ShapeString(input.shape) + " is not 2-D [N, C]");
    const int64_t n = input.shape[0];
    const int64_t c = input.shape[1];
    const std::vector<uint8_t> logits = ToComputeType(input, in_label, type);

    const std::string t_label = "--target " + *target_path;
    const NpyArray target_file = ReadNpy(*target_path, "--target");
    if (target_file.shape != std::vector<int64_t>{n}) {
        BadInput(t_label + ": shape " + ShapeString(target_file.shape) + " does not match (" + std::to_string(n) +
                 ",), the rows of --input");
    }
    const TargetData target = LoadTarget(target_file, t_label);
    CheckTargets(target, c, ignore_index, t_label);
    std::optional<std::vector<float>> weight;
    if (auto path = options.Get("--weight")) {
        const NpyArray w = ReadNpy(*path, "--weight");
        if (w.shape != std::vector<int64_t>{c}) {
            BadInput("--weight " + *path + ": shape " + ShapeString(w.shape) + " does not match (" +
                     std::to_string(c) + ",), the classes of --input");
        }
        weight = LoadWeight(w, "--weight " + *path);
    }

    if (aclnnCrossEntropyLossGetWorkspaceSize == nullptr || aclnnCrossEntropyLoss == nullptr) {
        Failure("this build of the library has no aclnnCrossEntropyLoss (the forward operator); `openaclnn info` "
                "shows which library was loaded");
    }

    AclSession session;
    const aclDataType dtype = ToAclDataType(type);
    const size_t esize = ComputeTypeSize(type);
    DeviceTensor input_t({n, c}, dtype, esize, logits.data());
    std::vector<int32_t> target32;
    DeviceTensor target_t;
    if (target.is_int32) {
        target32.assign(target.values.begin(), target.values.end());
        target_t = DeviceTensor({n}, ACL_INT32, 4, target32.data());
    } else {
        target_t = DeviceTensor({n}, ACL_INT64, 8, target.values.data());
    }
    DeviceTensor weight_t;
    if (weight) weight_t = DeviceTensor({c}, ACL_FLOAT, 4, weight->data());
    const std::vector<int64_t> loss_shape = reduction_text == "none" ? std::vector<int64_t>{n} : std::vector<int64_t>{};
    const bool want_lse = !lse_path.empty() || zloss_scale != 0.0;
    const std::vector<int64_t> lse_shape = want_lse ? std::vector<int64_t>{n} : std::vector<int64_t>{0};
    const std::vector<int64_t> zloss_shape = return_zloss ? loss_shape : std::vector<int64_t>{0};
    DeviceTensor loss_t(loss_shape, dtype, esize, nullptr);
    DeviceTensor log_prob_t({n, c}, dtype, esize, nullptr);
    DeviceTensor zloss_t(zloss_shape, dtype, esize, nullptr);
    DeviceTensor lse_t(lse_shape, dtype, esize, nullptr);
    for (DeviceTensor *t : {&loss_t, &log_prob_t, &zloss_t, &lse_t}) t->buffer().Fill(0xff);  // NaN: unwritten shows

    uint64_t workspace_size = 0;
    aclOpExecutor *executor = nullptr;
    std::string reduction = reduction_text;
    aclnnStatus status = aclnnCrossEntropyLossGetWorkspaceSize(
        input_t.tensor(), target_t.tensor(), weight_t.tensor(), reduction.data(), ignore_index, label_smoothing,
        zloss_scale, return_zloss, loss_t.tensor(), log_prob_t.tensor(), zloss_t.tensor(), lse_t.tensor(),
        &workspace_size, &executor);
    if (status != ACLNN_SUCCESS) {
        throw CliError(status == ACLNN_ERR_INNER ? kExitFailure : kExitBadInput,
                       AclFailureText("aclnnCrossEntropyLossGetWorkspaceSize", status));
    }
    DeviceBuffer workspace;
    if (workspace_size > 0) workspace = DeviceBuffer(workspace_size);
    status = aclnnCrossEntropyLoss(workspace_size > 0 ? workspace.get() : nullptr, workspace_size, executor,
                                   session.stream());
    if (status != ACLNN_SUCCESS) Failure(AclFailureText("aclnnCrossEntropyLoss", status));
    session.Synchronize("aclnnCrossEntropyLoss", kExitBadInput);

    if (loss_shape.empty()) {
        // A reduced loss is one number: show it too.
        const std::vector<uint8_t> loss = loss_t.ToHost();
        std::printf("loss %s\n", FormatDouble(LoadAsDouble(type, loss.data(), 0)).c_str());
        if (return_zloss) {
            const std::vector<uint8_t> zloss = zloss_t.ToHost();
            std::printf("zloss %s\n", FormatDouble(LoadAsDouble(type, zloss.data(), 0)).c_str());
        }
    }
    AtomicOutputs outputs;
    const NpyType out_type = NpyTypeOf(type);
    const char *flag_or_prefix = options.Has("-o") ? "-o" : nullptr;
    if (!loss_path.empty()) {
        outputs.Stage(loss_path, flag_or_prefix ? flag_or_prefix : "--loss-out", out_type, loss_shape,
                      loss_t.ToHost().data());
    }
    if (!log_prob_path.empty()) {
        outputs.Stage(log_prob_path, flag_or_prefix ? flag_or_prefix : "--log-prob-out", out_type, {n, c},
                      log_prob_t.ToHost().data());
    }
    if (!lse_path.empty()) {
        outputs.Stage(lse_path, flag_or_prefix ? flag_or_prefix : "--lse-out", out_type, lse_shape,
                      lse_t.ToHost().data());
    }
    if (!zloss_path.empty()) {
        outputs.Stage(zloss_path, flag_or_prefix ? flag_or_prefix : "--zloss-out", out_type, zloss_shape,
                      zloss_t.ToHost().data());
    }
    outputs.Commit();
    std::string written;
    for (const std::string *p : {&loss_path, &log_prob_path, &lse_path, &zloss_path}) {
        if (!p->empty()) written += " " + *p;
    }
    std::cerr << "openaclnn forward: wrote" << written << " (" << ComputeTypeName(type) << ", N=" << n << ", C=" << c
              << ", reduction=" << reduction_text << ")\n";
    return kExitOk;
}

}  // namespace openaclnn_cli
