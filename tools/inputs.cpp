#include "inputs.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "acl_session.h"
#include "aclnnop/aclnn_cross_entropy_loss_grad.h"

namespace openaclnn_cli {

namespace {

double FileElement(const NpyArray &array, size_t i) {
    const uint8_t *p = array.data.data() + i * static_cast<size_t>(array.type.size);
    switch (array.type.size) {
        case 2: {
            uint16_t h;
            std::memcpy(&h, p, 2);
            return HalfBitsToFloat(h);
        }
        case 4: {
            float f;
            std::memcpy(&f, p, 4);
            return f;
        }
        default: {
            double d;
            std::memcpy(&d, p, 8);
            return d;
        }
    }
}

}  // namespace

ComputeType DecideComputeType(const NpyArray &main_input, const std::string &main_label,
                              const std::optional<std::string> &dtype_flag) {
    if (dtype_flag) return ParseComputeType("--dtype", *dtype_flag);
    const NpyType t = main_input.type;
    if (t == NpyType{NpyKind::kFloat, 4}) return ComputeType::kFloat32;
    if (t == NpyType{NpyKind::kFloat, 2}) return ComputeType::kFloat16;
    if (t == NpyType{NpyKind::kUnsignedInt, 2}) {
        BadInput(main_label + ": uint16 data; if these are bf16 bit patterns, pass --dtype bf16");
    }
    if (t == NpyType{NpyKind::kFloat, 8}) {
        BadInput(main_label + ": float64 data; the operators compute in float32, float16 or bf16: pass --dtype to "
                              "choose one (values are rounded to it)");
    }
    BadInput(main_label + ": dtype " + NpyTypeName(t) + " is not a floating type (expected float32, float16, or " +
             "uint16 bf16 bit patterns with --dtype bf16)");
}

std::vector<uint8_t> ToComputeType(const NpyArray &array, const std::string &label, ComputeType type) {
    const size_t count = static_cast<size_t>(array.NumElements());
    const NpyType t = array.type;
    const bool bf16_bits = t == NpyType{NpyKind::kUnsignedInt, 2};
    if (bf16_bits) {
        if (type != ComputeType::kBf16) {
            BadInput(label + ": uint16 data is read as bf16 bit patterns only with --dtype bf16 (compute dtype is " +
                     std::string(ComputeTypeName(type)) + ")");
        }
        return array.data;
    }
    if (t.kind != NpyKind::kFloat) {
        BadInput(label + ": dtype " + NpyTypeName(t) + " is not a floating type (expected float32, float16" +
                 (type == ComputeType::kBf16 ? ", or uint16 bf16 bit patterns)" : ")"));
    }
    if ((type == ComputeType::kFloat32 && t.size == 4) || (type == ComputeType::kFloat16 && t.size == 2)) {
        return array.data;
    }
    std::vector<uint8_t> out(count * ComputeTypeSize(type));
    for (size_t i = 0; i < count; ++i) StoreFromDouble(type, out.data(), i, FileElement(array, i));
    return out;
}

TargetData LoadTarget(const NpyArray &array, const std::string &label) {
    TargetData target;
    const size_t count = static_cast<size_t>(array.NumElements());
    const NpyType t = array.type;
    if (t.kind != NpyKind::kSignedInt && t.kind != NpyKind::kUnsignedInt) {
        BadInput(label + ": class indices must be integers (int64 or int32), got " + NpyTypeName(t));
    }
    target.is_int32 = t == NpyType{NpyKind::kSignedInt, 4};
    target.values.resize(count);
    for (size_t i = 0; i < count; ++i) {
        const uint8_t *p = array.data.data() + i * static_cast<size_t>(t.size);
        int64_t v = 0;
        if (t.kind == NpyKind::kSignedInt) {
            switch (t.size) {
                case 1: v = static_cast<int8_t>(*p); break;
                case 2: { int16_t x; std::memcpy(&x, p, 2); v = x; break; }
                case 4: { int32_t x; std::memcpy(&x, p, 4); v = x; break; }
                default: std::memcpy(&v, p, 8); break;
            }
        } else {
            uint64_t u = 0;
            switch (t.size) {
                case 1: u = *p; break;
                case 2: { uint16_t x; std::memcpy(&x, p, 2); u = x; break; }
                case 4: { uint32_t x; std::memcpy(&x, p, 4); u = x; break; }
                default: std::memcpy(&u, p, 8); break;
            }
            if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                BadInput(label + ": element " + std::to_string(i) + " (" + std::to_string(u) +
                         ") does not fit in int64");
            }
            v = static_cast<int64_t>(u);
        }
        target.values[i] = v;
    }
    return target;
}

std::vector<float> LoadWeight(const NpyArray &array, const std::string &label) {
    if (array.type.kind != NpyKind::kFloat) {
        BadInput(label + ": class weights must be float32 (float16/float64 are converted), got " +
                 NpyTypeName(array.type));
    }
    std::vector<float> weight(static_cast<size_t>(array.NumElements()));
    for (size_t i = 0; i < weight.size(); ++i) weight[i] = static_cast<float>(FileElement(array, i));
    return weight;
}

std::string ParseReduction(const std::string &text) {
    if (text == "none" || text == "mean" || text == "sum") return text;
    BadInput("--reduction: '" + text + "' is not one of none, mean, sum");
}

void CheckTargets(const TargetData &target, int64_t classes, int64_t ignore_index, const std::string &label) {
    for (size_t i = 0; i < target.values.size(); ++i) {
        const int64_t v = target.values[i];
        if (v == ignore_index) continue;
        if (v < 0 || v >= classes) {
            BadInput(label + ": row " + std::to_string(i) + " has class " + std::to_string(v) + ", outside [0, " +
                     std::to_string(classes) + ") and not the ignore index " + std::to_string(ignore_index));
        }
        if (target.is_int32 && (v < INT32_MIN || v > INT32_MAX)) BadInput(label + ": value out of int32 range");
    }
}

std::string GradProblem::Describe() const {
    std::string s = std::string(ComputeTypeName(type)) + ", N=" + std::to_string(n) + ", C=" + std::to_string(c) +
                    ", reduction=" + reduction + ", ignore_index=" + std::to_string(ignore_index);
    if (weight) s += ", weighted";
    if (label_smoothing != 0.0) s += ", label_smoothing=" + FormatDouble(label_smoothing);
    if (zloss_scale != 0.0) s += ", zloss_scale=" + FormatDouble(zloss_scale);
    return s;
}

std::vector<OptionSpec> GradInputOptions() {
    return {
        {"--log-prob", "", true, "FILE", "log-softmax of the logits, [N, C] (float32, float16; bf16 as uint16 bits)"},
        {"--target", "", true, "FILE", "class indices, [N] (int64 or int32; other integer types are widened)"},
        {"--weight", "", true, "FILE", "optional class weights, [C] float32"},
        {"--grad", "", true, "FILE", "gradient of the loss: [N] for --reduction none, [] or [1] for mean/sum"},
        {"--grad-value", "", true, "X", "the gradient of the loss as a number instead of --grad (default 1; for "
                                        "reduction none every row gets X)"},
        {"--reduction", "", true, "R", "none, mean (default) or sum"},
        {"--ignore-index", "", true, "K", "rows whose target equals K are ignored (default -100)"},
        {"--label-smoothing", "", true, "S", "label smoothing in [0, 1] (default 0)"},
        {"--zloss-scale", "", true, "Z", "z-loss scale (lseSquareScaleForZloss, default 0); non-zero needs --lse"},
        {"--lse", "", true, "FILE", "row log-sum-exp from the forward, [N] (lseForZloss)"},
        {"--grad-zloss", "", true, "FILE", "optional gradient of the z-loss output, shaped as the loss gradient"},
        {"--grad-zloss-value", "", true, "X", "the z-loss gradient as a number instead of --grad-zloss"},
        {"--dtype", "", true, "T", "compute dtype: float32, float16 or bf16 (default: that of --log-prob; bf16 "
                                   "files hold uint16 bit patterns; other float inputs are rounded to it)"},
    };
}

GradProblem LoadGradProblem(const Options &options) {
    GradProblem p;
    const auto log_prob_path = options.Get("--log-prob");
    if (!log_prob_path) BadInput("--log-prob is required");
    const auto target_path = options.Get("--target");
    if (!target_path) BadInput("--target is required");
    p.reduction = ParseReduction(options.GetOr("--reduction", "mean"));
    p.ignore_index = options.Int("--ignore-index", -100);
    p.label_smoothing = options.Double("--label-smoothing", 0.0);
    if (p.label_smoothing < 0.0 || p.label_smoothing > 1.0) {
        BadInput("--label-smoothing: " + FormatDouble(p.label_smoothing) + " is outside [0, 1]");
    }
    p.zloss_scale = options.Double("--zloss-scale", 0.0);
    if (options.Has("--grad") && options.Has("--grad-value")) BadInput("--grad and --grad-value: give only one");
    if (options.Has("--grad-zloss") && options.Has("--grad-zloss-value")) {
        BadInput("--grad-zloss and --grad-zloss-value: give only one");
    }

    const std::string lp_label = "--log-prob " + *log_prob_path;
    const NpyArray log_prob = ReadNpy(*log_prob_path, "--log-prob");
    p.type = DecideComputeType(log_prob, lp_label, options.Get("--dtype"));
    if (log_prob.shape.size() != 2) {
        BadInput(lp_label + ": shape " + ShapeString(log_prob.shape) + " is not 2-D [N, C]");
    }
    p.n = log_prob.shape[0];
    p.c = log_prob.shape[1];
    p.log_prob = ToComputeType(log_prob, lp_label, p.type);

    const std::string t_label = "--target " + *target_path;
    const NpyArray target = ReadNpy(*target_path, "--target");
    if (target.shape != std::vector<int64_t>{p.n}) {
        BadInput(t_label + ": shape " + ShapeString(target.shape) + " does not match (" + std::to_string(p.n) +
                 ",), the rows of --log-prob");
    }
    p.target = LoadTarget(target, t_label);
    CheckTargets(p.target, p.c, p.ignore_index, t_label);

    if (auto path = options.Get("--weight")) {
        const std::string label = "--weight " + *path;
        const NpyArray weight = ReadNpy(*path, "--weight");
        if (weight.shape != std::vector<int64_t>{p.c}) {
            BadInput(label + ": shape " + ShapeString(weight.shape) + " does not match (" + std::to_string(p.c) +
                     ",), the classes of --log-prob");
        }
        p.weight = LoadWeight(weight, label);
    }

    // The loss gradient: a file, or a number broadcast to the shape the reduction needs.
    const std::vector<int64_t> scalar_shape = {};
    const std::vector<int64_t> row_shape = {p.n};
    auto load_loss_shaped = [&](const std::string &flag, const std::string &value_flag,
                                double fallback) -> std::pair<std::vector<int64_t>, std::vector<uint8_t>> {
        if (auto path = options.Get(flag)) {
            const std::string label = flag + " " + *path;
            const NpyArray a = ReadNpy(*path, flag);
            const bool ok = p.reduction == "none" ? a.shape == row_shape
                                                  : (a.shape.empty() || a.shape == std::vector<int64_t>{1});
            if (!ok) {
                BadInput(label + ": shape " + ShapeString(a.shape) + " does not fit reduction " + p.reduction +
                         (p.reduction == "none" ? " (expected (" + std::to_string(p.n) + ",))"
                                                : std::string(" (expected () or (1,))")));
            }
            return {a.shape, ToComputeType(a, label, p.type)};
        }
        const double value = options.Double(value_flag, fallback);
        std::vector<int64_t> shape = p.reduction == "none" ? row_shape : scalar_shape;
        const size_t count = p.reduction == "none" ? static_cast<size_t>(p.n) : 1;
        std::vector<uint8_t> data(count * ComputeTypeSize(p.type));
        for (size_t i = 0; i < count; ++i) StoreFromDouble(p.type, data.data(), i, value);
        return {shape, data};
    };
    auto [grad_shape, grad] = load_loss_shaped("--grad", "--grad-value", 1.0);
    p.grad_shape = grad_shape;
    p.grad = std::move(grad);

    if (options.Has("--grad-zloss") || options.Has("--grad-zloss-value")) {
        auto [shape, data] = load_loss_shaped("--grad-zloss", "--grad-zloss-value", 0.0);
        if (shape != p.grad_shape) {
            // [] vs [1] for mean/sum: the operator wants both the same; reshape the number-made one.
            shape = p.grad_shape;
        }
        p.grad_zloss = std::move(data);
    }

    if (auto path = options.Get("--lse")) {
        const std::string label = "--lse " + *path;
        const NpyArray lse = ReadNpy(*path, "--lse");
        if (lse.shape != row_shape) {
            BadInput(label + ": shape " + ShapeString(lse.shape) + " does not match (" + std::to_string(p.n) +
                     ",), the rows of --log-prob");
        }
        p.lse = ToComputeType(lse, label, p.type);
    } else if (p.zloss_scale != 0.0) {
        BadInput("--zloss-scale " + FormatDouble(p.zloss_scale) + " needs --lse (the forward's row log-sum-exp)");
    }
    return p;
}

std::vector<uint8_t> RunGrad(const GradProblem &p) {
    AclSession session;
    const aclDataType dtype = ToAclDataType(p.type);
    const size_t esize = ComputeTypeSize(p.type);
    DeviceTensor log_prob({p.n, p.c}, dtype, esize, p.log_prob.data());
    std::vector<int32_t> target32;
    DeviceTensor target;
    if (p.target.is_int32) {
        target32.assign(p.target.values.begin(), p.target.values.end());
        target = DeviceTensor({p.n}, ACL_INT32, 4, target32.data());
    } else {
        target = DeviceTensor({p.n}, ACL_INT64, 8, p.target.values.data());
    }
    DeviceTensor weight;
    if (p.weight) weight = DeviceTensor({p.c}, ACL_FLOAT, 4, p.weight->data());
    DeviceTensor grad(p.grad_shape, dtype, esize, p.grad.data());
    DeviceTensor grad_zloss;
    if (p.grad_zloss) grad_zloss = DeviceTensor(p.grad_shape, dtype, esize, p.grad_zloss->data());
    DeviceTensor lse;
    if (p.lse) lse = DeviceTensor({p.n}, dtype, esize, p.lse->data());
    DeviceTensor out({p.n, p.c}, dtype, esize, nullptr);
    out.buffer().Fill(0xff);  // NaN in every float format: unwritten elements cannot pass for results

    uint64_t workspace_size = 0;
    aclOpExecutor *executor = nullptr;
    std::string reduction = p.reduction;
    aclnnStatus status = aclnnCrossEntropyLossGradGetWorkspaceSize(
        grad.tensor(), log_prob.tensor(), target.tensor(), weight.tensor(), grad_zloss.tensor(), lse.tensor(),
        reduction.data(), p.ignore_index, p.label_smoothing, p.zloss_scale, out.tensor(), &workspace_size, &executor);
    if (status != ACLNN_SUCCESS) {
        // The tool checked shapes and dtypes already; what is left is an input the operator's rules refuse.
        throw CliError(status == ACLNN_ERR_INNER ? kExitFailure : kExitBadInput,
                       AclFailureText("aclnnCrossEntropyLossGradGetWorkspaceSize", status));
    }
    DeviceBuffer workspace;
    if (workspace_size > 0) workspace = DeviceBuffer(workspace_size);
    status = aclnnCrossEntropyLossGrad(workspace_size > 0 ? workspace.get() : nullptr, workspace_size, executor,
                                       session.stream());
    if (status != ACLNN_SUCCESS) Failure(AclFailureText("aclnnCrossEntropyLossGrad", status));
    session.Synchronize("aclnnCrossEntropyLossGrad", kExitBadInput);
    return out.ToHost();
}

}  // namespace openaclnn_cli
