// `openaclnn grad` (compute the gradient into a .npy file) and `openaclnn check` (compare an NPU's output with it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <queue>

#include "cli_common.h"
#include "commands.h"
#include "inputs.h"
#include "npy.h"

namespace openaclnn_cli {

namespace {

NpyType OutputNpyType(ComputeType type) {
    switch (type) {
        case ComputeType::kFloat32: return {NpyKind::kFloat, 4};
        case ComputeType::kFloat16: return {NpyKind::kFloat, 2};
        case ComputeType::kBf16: return {NpyKind::kUnsignedInt, 2};  // bit patterns
    }
    return {NpyKind::kFloat, 4};
}

const char *kDtypeNote =
    "dtypes: the computation runs in the dtype of --log-prob (float32 or float16) or in --dtype. NumPy has no\n"
    "bfloat16, so bf16 tensors travel as uint16 .npy files holding the bit patterns (the upper half of the\n"
    "float32 bits): make them with (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16) (truncating)\n"
    "or any round-to-nearest conversion, pass --dtype bf16, and read bf16 outputs back with\n"
    "(y.astype(np.uint32) << 16).view(np.float32).\n";

const char *kExitNote =
    "exit status: 0 success, 2 bad arguments or input files (one line names the flag or file), 3 library or\n"
    "system failure. Outputs are written to a temporary name and renamed, so a failed run leaves none behind.\n";

}  // namespace

int GradCommand(int argc, char **argv) {
    std::vector<OptionSpec> specs = GradInputOptions();
    specs.push_back({"-o", "--output", true, "FILE", "where to write the gradient, [N, C] in the compute dtype"});
    const Options options("grad", specs, argc, argv);
    if (options.Help()) {
        std::cout << FormatHelp(
            "openaclnn grad --log-prob FILE --target FILE [options] -o OUT.npy",
            "Computes aclnnCrossEntropyLossGrad: the gradient of the cross-entropy loss with respect to the logits,\n"
            "given the forward's log-probabilities, through the library's public C API, and writes it to OUT.npy.",
            specs,
            std::string("example:\n  openaclnn grad --log-prob lp.npy --target t.npy --reduction mean -o grad.npy\n\n") +
                kDtypeNote + "\n" + kExitNote);
        return kExitOk;
    }
    const auto out_path = options.Get("-o");
    if (!out_path) BadInput("-o OUT.npy is required (where to write the gradient)");
    AtomicOutputs::CheckWritable(*out_path, "-o");
    const GradProblem problem = LoadGradProblem(options);
    const std::vector<uint8_t> out = RunGrad(problem);
    AtomicOutputs outputs;
    outputs.Stage(*out_path, "-o", OutputNpyType(problem.type), {problem.n, problem.c}, out.data());
    outputs.Commit();
    std::cerr << "openaclnn grad: wrote " << *out_path << " " << ShapeString({problem.n, problem.c}) << " "
              << (problem.type == ComputeType::kBf16 ? "bf16 (uint16 bits)" : ComputeTypeName(problem.type)) << " ("
              << problem.Describe() << ")\n";
    return kExitOk;
}

// ---- check ----------------------------------------------------------------------------------------------------

namespace {

// The size of the terms that make up each output row (see the spec's formula): an implementation computing in
// fp32 makes errors of a few fp32 epsilons of this, whatever the size of the result itself (at the target column
// p * A - G cancels). Computed in double from the inputs, independently of the library:
//   nll = g (1 - ls) w[t] / D,  smooth = g ls / (C D),  z = 2 scale lse (g + gz) / D_z
//   scale_i = 2 |nll| + |smooth| (sum |w| + max |w|) + |z|
// with D the mean's total weight (1 for sum/none) and D_z the count of unmasked rows. Ignored rows get 0.
std::vector<double> RowScales(const GradProblem &p) {
    std::vector<double> scales(static_cast<size_t>(p.n), 0.0);
    auto weight_of = [&](int64_t cls) { return p.weight ? static_cast<double>((*p.weight)[cls]) : 1.0; };
    double sum_abs_w = p.weight ? 0.0 : static_cast<double>(p.c);
    double max_abs_w = p.weight ? 0.0 : 1.0;
    if (p.weight) {
        for (float w : *p.weight) {
            sum_abs_w += std::fabs(w);
            max_abs_w = std::max(max_abs_w, static_cast<double>(std::fabs(w)));
        }
    }
    double total_weight = 0.0;
    double unmasked = 0.0;
    for (int64_t i = 0; i < p.n; ++i) {
        const int64_t t = p.target.values[i];
        if (t == p.ignore_index) continue;
        total_weight += weight_of(t);
        unmasked += 1.0;
    }
    const bool mean = p.reduction == "mean";
    auto grad_at = [&](const std::vector<uint8_t> &data, int64_t i) {
        return LoadAsDouble(p.type, data.data(), p.reduction == "none" ? static_cast<size_t>(i) : 0);
    };
    for (int64_t i = 0; i < p.n; ++i) {
        const int64_t t = p.target.values[i];
        if (t == p.ignore_index) continue;
        const double g = grad_at(p.grad, i);
        double scale = 0.0;
        if (!mean || total_weight != 0.0) {
            const double d = mean ? total_weight : 1.0;
            const double nll = g * (1.0 - p.label_smoothing) * weight_of(t) / d;
            const double smooth = g * p.label_smoothing / static_cast<double>(p.c) / d;
            scale += 2.0 * std::fabs(nll) + std::fabs(smooth) * (sum_abs_w + max_abs_w);
        }
        if (p.zloss_scale != 0.0 && p.lse) {
            const double gz = g + (p.grad_zloss ? grad_at(*p.grad_zloss, i) : 0.0);
            const double dz = mean ? unmasked : 1.0;
            scale += std::fabs(2.0 * p.zloss_scale * LoadAsDouble(p.type, p.lse->data(), i) * gz / dz);
        }
        scales[static_cast<size_t>(i)] = std::isfinite(scale) ? scale : 0.0;
    }
    return scales;
}

struct Tolerance {
    double rtol;
    double row_factor;  // atol = row_factor * row scale + floor, unless --atol is given
    double floor;
    bool absolute;      // --atol given: atol = floor for every element
    std::string rtol_why;
};

// One entry per dtype. The golden result is correctly rounded (fp32 arithmetic or wider, one rounding). An NPU
// computing in fp32 and rounding once can land one unit in the last place away in fp16/bf16 (its fp32 value may
// sit on the other side of a rounding boundary), so rtol is one ulp of the format: 2^-10 <= 1e-3 for fp16,
// 2^-7 <= 8e-3 for bf16. fp32 results carry the NPU's own exp and multiply errors; rtol 1e-5 (~84 ulp) allows an
// approximate vector exp while a formula error (a missed weight, smoothing or mean denominator) is far larger.
// Independently of the format, 16 fp32 epsilons (1.9e-6) of the row's term size bound the fp32 cancellation error
// at the target column; the floor is one subnormal step of the format so that tiny results may round either way.
Tolerance DefaultTolerance(ComputeType type) {
    switch (type) {
        case ComputeType::kFloat32: return {1e-5, 16 * 1.1920928955078125e-07, 1.401298464324817e-45, false,
                                            "float32: allows ~84 ulp of an approximate NPU exp"};
        case ComputeType::kFloat16: return {1e-3, 16 * 1.1920928955078125e-07, 5.960464477539063e-08, false,
                                            "float16: one unit in the last place (2^-10)"};
        case ComputeType::kBf16: return {8e-3, 16 * 1.1920928955078125e-07, 9.183549615799121e-41, false,
                                         "bf16: one unit in the last place (2^-7)"};
    }
    return {};
}

double ExpectedElement(const NpyArray &a, ComputeType type, size_t i) {
    const uint8_t *ptr = a.data.data() + i * static_cast<size_t>(a.type.size);
    if (a.type == NpyType{NpyKind::kUnsignedInt, 2}) {
        uint16_t h;
        std::memcpy(&h, ptr, 2);
        (void)type;
        return Bf16BitsToFloat(h);
    }
    if (a.type.size == 2) {
        uint16_t h;
        std::memcpy(&h, ptr, 2);
        return HalfBitsToFloat(h);
    }
    if (a.type.size == 4) {
        float f;
        std::memcpy(&f, ptr, 4);
        return f;
    }
    double d;
    std::memcpy(&d, ptr, 8);
    return d;
}

struct Worst {
    double badness;  // error / allowed; infinity for NaN/Inf disagreements
    int64_t row, col;
    double expected, golden, abs_err, allowed;
    bool operator<(const Worst &o) const { return badness > o.badness; }  // min-heap on badness
};

std::string Fixed(double v, int width = 13) {
    char buf[64];
    if (std::isnan(v)) std::snprintf(buf, sizeof buf, "%*s", width, "nan");
    else if (std::isinf(v)) std::snprintf(buf, sizeof buf, "%*s", width, v > 0 ? "inf" : "-inf");
    else std::snprintf(buf, sizeof buf, "%*.6g", width, v);
    return buf;
}

}  // namespace

int CheckCommand(int argc, char **argv) {
    std::vector<OptionSpec> specs = GradInputOptions();
    specs.insert(specs.begin(), {"--expected", "", true, "FILE",
                                 "the result to check (e.g. an NPU's output dump), [N, C]: float32, float16, float64, "
                                 "or uint16 bf16 bits with --dtype bf16"});
    specs.push_back({"--rtol", "", true, "R", "relative tolerance (default per dtype, see below)"});
    specs.push_back({"--atol", "", true, "A", "absolute tolerance for every element (default: scaled per row, see "
                                              "below)"});
    specs.push_back({"--worst", "", true, "K", "how many of the worst elements to list (default 10)"});
    specs.push_back({"-o", "--output", true, "FILE", "also write the golden result here"});
    const Options options("check", specs, argc, argv);
    if (options.Help()) {
        std::cout << FormatHelp(
            "openaclnn check --expected NPU_OUT.npy --log-prob FILE --target FILE [options]",
            "Computes the golden aclnnCrossEntropyLossGrad result for the given inputs (exact: fp32 arithmetic or\n"
            "wider, one correct rounding) and compares --expected with it element by element.",
            specs,
            std::string(
                "tolerance: an element matches when |expected - golden| <= atol + rtol * |golden|, or when both are\n"
                "NaN, or both the same infinity. Defaults (override with --rtol / --atol):\n"
                "  float32  rtol 1e-5  (allows ~84 ulp: an NPU's approximate exp; formula errors are far larger)\n"
                "  float16  rtol 1e-3  (one unit in the last place: an fp32 result rounded once may land 1 ulp away)\n"
                "  bf16     rtol 8e-3  (one unit in the last place, 2^-7)\n"
                "  atol, every dtype: 1.9e-6 (16 fp32 epsilons) x the row's term size + one subnormal step of the\n"
                "  dtype. The row's term size is 2|nll| + |smooth|(sum|w| + max|w|) + |zloss| from the spec's formula:\n"
                "  fp32 cancellation at the target column makes errors of that size, not of the result's.\n"
                "--atol A replaces it by A for every element.\n\n"
                "output: elements compared, mismatches, max absolute and relative error, NaN/Inf counts on both\n"
                "sides, and the worst elements by (error / allowed) with their (row, col).\n\n") +
                kDtypeNote +
                "\nexit status: 0 match, 1 mismatch, 2 bad arguments or input files, 3 library or system failure.\n");
        return kExitOk;
    }
    const auto expected_path = options.Get("--expected");
    if (!expected_path) BadInput("--expected FILE is required (the result to check)");
    const auto out_path = options.Get("-o");
    if (out_path) AtomicOutputs::CheckWritable(*out_path, "-o");
    const int64_t worst_count = options.Int("--worst", 10);
    if (worst_count < 0) BadInput("--worst: must be >= 0");

    const GradProblem problem = LoadGradProblem(options);
    const std::string e_label = "--expected " + *expected_path;
    const NpyArray expected = ReadNpy(*expected_path, "--expected");
    if (expected.shape != std::vector<int64_t>{problem.n, problem.c}) {
        BadInput(e_label + ": shape " + ShapeString(expected.shape) + " does not match " +
                 ShapeString({problem.n, problem.c}) + ", the shape of --log-prob");
    }
    const bool bits = expected.type == NpyType{NpyKind::kUnsignedInt, 2};
    if (bits && problem.type != ComputeType::kBf16) {
        BadInput(e_label + ": uint16 data is read as bf16 bit patterns only with --dtype bf16");
    }
    if (expected.type.kind != NpyKind::kFloat && !bits) {
        BadInput(e_label + ": dtype " + NpyTypeName(expected.type) + " is not a floating type");
    }

    Tolerance tol = DefaultTolerance(problem.type);
    if (options.Has("--rtol")) {
        tol.rtol = options.Double("--rtol", tol.rtol);
        if (tol.rtol < 0) BadInput("--rtol: must be >= 0");
        tol.rtol_why = "from --rtol";
    }
    if (options.Has("--atol")) {
        tol.floor = options.Double("--atol", 0.0);
        if (tol.floor < 0) BadInput("--atol: must be >= 0");
        tol.absolute = true;
    }

    const std::vector<uint8_t> golden = RunGrad(problem);
    const std::vector<double> row_scale = RowScales(problem);

    int64_t compared = 0, mismatches = 0;
    int64_t nan_expected = 0, nan_golden = 0, inf_expected = 0, inf_golden = 0;
    double max_abs = 0.0, max_rel = 0.0;
    int64_t max_abs_row = -1, max_abs_col = -1, max_rel_row = -1, max_rel_col = -1;
    std::priority_queue<Worst> worst;  // the worst_count largest badness values
    for (int64_t i = 0; i < problem.n; ++i) {
        const double atol = tol.absolute ? tol.floor : tol.row_factor * row_scale[static_cast<size_t>(i)] + tol.floor;
        for (int64_t j = 0; j < problem.c; ++j) {
            const size_t k = static_cast<size_t>(i * problem.c + j);
            const double e = ExpectedElement(expected, problem.type, k);
            const double g = LoadAsDouble(problem.type, golden.data(), k);
            ++compared;
            nan_expected += std::isnan(e);
            nan_golden += std::isnan(g);
            inf_expected += std::isinf(e);
            inf_golden += std::isinf(g);
            const double allowed = atol + tol.rtol * std::fabs(g);
            double abs_err, badness;
            bool match;
            if (std::isnan(e) || std::isnan(g) || std::isinf(e) || std::isinf(g)) {
                match = (std::isnan(e) && std::isnan(g)) || e == g;
                abs_err = match ? 0.0 : std::numeric_limits<double>::infinity();
                badness = match ? 0.0 : std::numeric_limits<double>::infinity();
            } else {
                abs_err = std::fabs(e - g);
                match = abs_err <= allowed;
                badness = allowed > 0 ? abs_err / allowed : (abs_err > 0 ? std::numeric_limits<double>::infinity() : 0);
                if (abs_err > max_abs) {
                    max_abs = abs_err;
                    max_abs_row = i;
                    max_abs_col = j;
                }
                const double rel = g != 0.0 ? abs_err / std::fabs(g) : (abs_err > 0 ? INFINITY : 0.0);
                if (rel > max_rel) {
                    max_rel = rel;
                    max_rel_row = i;
                    max_rel_col = j;
                }
            }
            if (!match) ++mismatches;
            if (worst_count > 0 && (badness > 0 || !match)) {
                if (static_cast<int64_t>(worst.size()) < worst_count) {
                    worst.push({badness, i, j, e, g, abs_err, allowed});
                } else if (badness > worst.top().badness) {
                    worst.pop();
                    worst.push({badness, i, j, e, g, abs_err, allowed});
                }
            }
        }
    }

    if (out_path) {
        AtomicOutputs outputs;
        outputs.Stage(*out_path, "-o", OutputNpyType(problem.type), {problem.n, problem.c}, golden.data());
        outputs.Commit();
    }

    std::printf("golden:     aclnnCrossEntropyLossGrad (%s)\n", problem.Describe().c_str());
    std::printf("expected:   %s (%s%s%s)\n", expected_path->c_str(),
                bits ? "bf16 as uint16 bits" : NpyTypeName(expected.type).c_str(),
                expected.was_fortran_order ? ", Fortran order" : "", expected.was_big_endian ? ", big-endian" : "");
    if (tol.absolute) {
        std::printf("tolerance:  |expected - golden| <= atol + rtol*|golden|, rtol %s (%s), atol %s (from --atol)\n",
                    FormatDouble(tol.rtol).c_str(), tol.rtol_why.c_str(), FormatDouble(tol.floor).c_str());
    } else {
        std::printf("tolerance:  |expected - golden| <= atol + rtol*|golden|, rtol %s (%s),\n"
                    "            atol %.3g x row term size + %.3g (fp32 cancellation; one subnormal step)\n",
                    FormatDouble(tol.rtol).c_str(), tol.rtol_why.c_str(), tol.row_factor, tol.floor);
    }
    std::printf("compared:   %lld elements\n", static_cast<long long>(compared));
    std::printf("mismatches: %lld (%.4g%%)\n", static_cast<long long>(mismatches),
                compared ? 100.0 * static_cast<double>(mismatches) / static_cast<double>(compared) : 0.0);
    if (max_abs_row >= 0) {
        std::printf("max abs error: %s at (%lld, %lld)\n", FormatDouble(max_abs).c_str(),
                    static_cast<long long>(max_abs_row), static_cast<long long>(max_abs_col));
    } else {
        std::printf("max abs error: 0\n");
    }
    if (max_rel_row >= 0) {
        std::printf("max rel error: %s at (%lld, %lld)\n", FormatDouble(max_rel).c_str(),
                    static_cast<long long>(max_rel_row), static_cast<long long>(max_rel_col));
    } else {
        std::printf("max rel error: 0\n");
    }
    std::printf("NaN:        expected %lld, golden %lld\n", static_cast<long long>(nan_expected),
                static_cast<long long>(nan_golden));
    std::printf("Inf:        expected %lld, golden %lld\n", static_cast<long long>(inf_expected),
                static_cast<long long>(inf_golden));
    if (!worst.empty()) {
        std::vector<Worst> list;
        while (!worst.empty()) {
            list.push_back(worst.top());
            worst.pop();
        }
        std::reverse(list.begin(), list.end());
        std::printf("worst elements (error / allowed, largest first):\n");
        std::printf("  %8s %8s %13s %13s %13s %13s %9s\n", "row", "col", "expected", "golden", "abs err", "allowed",
                    "err/allow");
        for (const Worst &w : list) {
            std::printf("  %8lld %8lld %s %s %s %s %9.3g%s\n", static_cast<long long>(w.row),
                        static_cast<long long>(w.col), Fixed(w.expected).c_str(), Fixed(w.golden).c_str(),
                        Fixed(w.abs_err).c_str(), Fixed(w.allowed).c_str(), w.badness,
                        w.badness > 1 ? "  MISMATCH" : "");
        }
    }
    if (mismatches == 0) {
        std::printf("result:     MATCH\n");
        return kExitOk;
    }
    std::printf("result:     MISMATCH (%lld of %lld elements)\n", static_cast<long long>(mismatches),
                static_cast<long long>(compared));
    return kExitMismatch;
}

}  // namespace openaclnn_cli
