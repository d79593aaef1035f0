// libFuzzer target: aclnnCrossEntropyLoss (the forward), phase 1 over arbitrary arguments and small phase-2 runs.
//
// The same machinery as fuzz_grad.cpp (geometries, honest or aclrtMalloc'd memory, aliasing, stale handles, NaN and
// infinite attributes, wild values and targets). The rules it enforces:
//   - phase 1 returns 0, 161001, 161002 or 561002, with a message; 0 whenever only valid arguments were built; 161001
//     whenever a required argument is NULL or dead;
//   - no byte outside the four output views changes; nothing at all when a call fails;
//   - logProbOut is log_softmax(input) row by row (float64 reference, the dtype's tolerance) wherever the row's
//     inputs are finite; a synchronisation without out-of-range targets reports success;
//   - no sanitizer report.
// Outputs whose elements share an address (a zero stride in logProbOut, say) and data addresses that are not a
// multiple of the element size are generated too: both are refused with 161002.
#include <algorithm>
#include <numeric>

#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "fuzz_common.h"

using namespace openaclnn;
using namespace openaclnn::fuzz;

namespace {

aclrtStream g_stream = nullptr;

enum Slot { kInput, kTarget, kWeight, kLoss, kLogProbOut, kZloss, kLse, kSlots };
const char *const kSlotNames[kSlots] = {"input", "target", "weight", "lossOut", "logProbOut", "zlossOut", "lseOut"};
bool IsOutput(int slot) { return slot >= kLoss; }

struct Spec {
    bool present = false;
    bool stale = false;
    aclDataType dtype = ACL_FLOAT;
    aclFormat format = ACL_FORMAT_ND;
    Geometry geometry;
    int buffer = -1;
    int64_t byte_shift = 0;  // data = buffer + byte_shift
    bool wild_values = false;
    aclTensor *handle = nullptr;
};

void RunOne(FuzzedDataProvider &fdp) {
    bool valid = true;
    const auto invalidate = [&](const std::string &) { valid = false; };

    const bool big = fdp.ConsumeIntegralInRange<int>(0, 63) == 0;
    const int64_t n = big ? fdp.ConsumeIntegralInRange<int64_t>(1, 4) : fdp.ConsumeIntegralInRange<int64_t>(0, 40);
    const int64_t c = big ? fdp.ConsumeIntegralInRange<int64_t>(32768, 70000) : fdp.ConsumeIntegralInRange<int64_t>(0, 300);
    static const aclDataType kFloat[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
    const aclDataType dtype = kFloat[fdp.ConsumeIntegralInRange<int>(0, 2)];
    const aclDataType target_dtype = fdp.ConsumeBool() ? ACL_INT64 : ACL_INT32;
    static const char *const kReductions[] = {nullptr, "none", "mean", "sum"};
    std::string reduction_text;
    char *reduction = nullptr;
    int mode = fdp.ConsumeIntegralInRange<int>(0, 4);  // 0 NULL (mean), 1 none, 2 mean, 3 sum, 4 arbitrary
    if (mode >= 1 && mode <= 3) {
        reduction_text = kReductions[mode];
        reduction = reduction_text.data();
    } else if (mode == 4) {
        reduction_text = fdp.ConsumeRandomLengthString(12);
        reduction = reduction_text.data();
        mode = reduction_text == "none" ? 1 : reduction_text == "sum" ? 3 : 2;
        if (reduction_text != "none" && reduction_text != "mean" && reduction_text != "sum") invalidate("reduction");
    }
    const bool per_row = mode == 1;
    int64_t ignore_index = -100;
    switch (fdp.ConsumeIntegralInRange<int>(0, 4)) {
        case 0: break;
        case 1: ignore_index = c > 0 ? fdp.ConsumeIntegralInRange<int64_t>(0, c - 1) : 0; break;
        case 2: ignore_index = std::numeric_limits<int64_t>::min(); break;
        default: ignore_index = fdp.ConsumeIntegral<int64_t>(); break;
    }
    double smoothing = 0.0;
    if (fdp.ConsumeBool()) {
        smoothing = FuzzDouble(fdp, 0.0, 1.0);
        if (!(smoothing >= 0.0 && smoothing <= 1.0)) invalidate("labelSmoothing");
    }
    double zscale = 0.0;
    if (fdp.ConsumeBool()) {
        zscale = FuzzDouble(fdp, -2.0, 2.0);
        if (!std::isfinite(zscale)) invalidate("lseSquareScaleForZloss");
    }
    const bool return_zloss = fdp.ConsumeBool();

    Spec specs[kSlots];
    const std::vector<int64_t> scalar = fdp.ConsumeBool() ? std::vector<int64_t>{} : std::vector<int64_t>{1};
    const std::vector<int64_t> loss_shape = per_row ? std::vector<int64_t>{n} : scalar;
    const std::vector<int64_t> expected[kSlots] = {
        {n, c}, {n}, {c}, loss_shape, {n, c},
        return_zloss ? loss_shape : std::vector<int64_t>{0},
        zscale != 0.0 ? std::vector<int64_t>{n} : (fdp.ConsumeBool() ? std::vector<int64_t>{0} : std::vector<int64_t>{n})};
    for (int slot = 0; slot < kSlots; ++slot) specs[slot].present = slot != kWeight || fdp.ConsumeBool();
    if (fdp.ConsumeIntegralInRange<int>(0, 31) == 0) {
        const int slot = fdp.ConsumeIntegralInRange<int>(0, kSlots - 1);
        specs[slot].present = !specs[slot].present;
        if (slot != kWeight) invalidate("presence");
    }
    const int alias = fdp.ConsumeIntegralInRange<int>(0, 15);
    for (int slot = 0; slot < kSlots; ++slot) {
        Spec &spec = specs[slot];
        if (!spec.present) continue;
        spec.dtype = slot == kTarget ? target_dtype : slot == kWeight ? ACL_FLOAT : dtype;
        spec.geometry = ValidGeometry(fdp, expected[slot], false);
        spec.wild_values = fdp.ConsumeIntegralInRange<int>(0, 7) == 0;
        if (fdp.ConsumeIntegralInRange<int>(0, 15) == 0) {
            MutateGeometry(fdp, &spec.geometry);
            invalidate("geometry");
        }
        if (fdp.ConsumeIntegralInRange<int>(0, 47) == 0) {
            spec.dtype = static_cast<aclDataType>(fdp.ConsumeIntegralInRange<int>(-1, 30));
            invalidate("dtype");
        }
        if (fdp.ConsumeIntegralInRange<int>(0, 47) == 0) {
            spec.format = static_cast<aclFormat>(fdp.ConsumeIntegralInRange<int>(-1, 50));
            invalidate("format");
        }
        if (fdp.ConsumeIntegralInRange<int>(0, 63) == 0) {
            spec.stale = true;
            invalidate("stale");
        }
        if (IsOutput(slot) && spec.geometry.self_overlap) invalidate("output overlaps itself");
    }
    bool in_place_handle = false;
    if (alias == 1 && specs[kInput].present && specs[kLogProbOut].present) {
        in_place_handle = true;
        specs[kLogProbOut].geometry = specs[kInput].geometry;
        specs[kLogProbOut].dtype = specs[kInput].dtype;
        specs[kLogProbOut].format = specs[kInput].format;
        specs[kLogProbOut].stale = specs[kInput].stale;
        if (specs[kInput].geometry.self_overlap) invalidate("in place over a self-overlapping input");
    }

    std::vector<std::unique_ptr<Buffer>> buffers;
    std::vector<int64_t> need;
    std::vector<bool> device_mode;
    Random random{fdp.ConsumeIntegral<uint64_t>()};
    for (int slot = 0; slot < kSlots; ++slot) {
        Spec &spec = specs[slot];
        if (!spec.present || (slot == kLogProbOut && in_place_handle)) continue;
        const int64_t size = static_cast<int64_t>(oracle::ElementSize(spec.dtype));
        const int64_t elements = spec.geometry.StorageElements();
        const int64_t bytes = HonestBytes(elements, size);
        int share = -1;
        if (slot > 0 && fdp.ConsumeIntegralInRange<int>(0, 15) == 0) {
            share = specs[fdp.ConsumeIntegralInRange<int>(0, slot - 1)].buffer;
            // Inputs may share memory, unless one of them is also written in place.
            if (IsOutput(slot) || in_place_handle) invalidate("shared memory with an output");
        }
        if (fdp.ConsumeIntegralInRange<int>(0, 63) == 0 || (bytes < 0 && fdp.ConsumeBool())) {
            spec.buffer = -1;
            if (spec.geometry.Elements() != 0) invalidate("NULL data");
            continue;
        }
        if (bytes < 0) invalidate("storage larger than memory");
        if (share >= 0) {
            spec.buffer = share;
            // The library can check a storage against aclrtMalloc blocks only, not against heap memory.
            if (bytes < 0) device_mode[share] = true;
            need[share] = std::max(need[share], std::max<int64_t>(bytes, 1));
            continue;
        }
        spec.buffer = static_cast<int>(need.size());
        need.push_back(std::max<int64_t>(bytes, 1));
        const bool device = bytes < 0 || fdp.ConsumeIntegralInRange<int>(0, 3) == 0;
        device_mode.push_back(device);
        if (device && fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {
            need.back() = fdp.ConsumeIntegralInRange<int64_t>(1, std::max<int64_t>(bytes, 1) + 64);
            if (need.back() < bytes) invalidate("block smaller than storage");
        }
        if (fdp.ConsumeIntegralInRange<int>(0, 31) == 0) {
            // The data address shifted by whole elements (valid), or by bytes (refused with 161002).
            const int64_t unit = fdp.ConsumeBool() ? 1 : std::max<int64_t>(size, 1);
            spec.byte_shift = fdp.ConsumeIntegralInRange<int64_t>(1, 8) * unit;
            need.back() += spec.byte_shift;
            if (MisalignedShift(spec.byte_shift, spec.dtype)) {
                invalidate("misaligned data");
            }
        }
    }
    for (size_t b = 0; b < need.size(); ++b) {
        auto buffer = std::make_unique<Buffer>();
        if (!buffer->Allocate(device_mode[b], static_cast<size_t>(std::min<int64_t>(need[b], kMaxHonestBytes + 64)))) {
            Violation("aclrtMalloc of a small block failed", std::to_string(need[b]));
        }
        uint8_t *data = buffer->data();
        for (size_t k = 0; k < buffer->bytes; ++k) data[k] = static_cast<uint8_t>(random.Next());
        buffers.push_back(std::move(buffer));
    }
    if (in_place_handle) {
        specs[kLogProbOut].buffer = specs[kInput].buffer;
        specs[kLogProbOut].byte_shift = specs[kInput].byte_shift;
    }

    const auto fits = [&](const Spec &spec) {
        if (spec.buffer < 0) return false;
        const Geometry &g = spec.geometry;
        const int64_t size = static_cast<int64_t>(oracle::ElementSize(spec.dtype));
        if (size == 0 || g.Elements() <= 0 || g.dims.size() > 2) return false;
        const std::vector<int64_t> s = g.EffectiveStrides();
        int64_t low = g.offset, high = g.offset;
        for (size_t k = 0; k < g.dims.size(); ++k) {
            int64_t extent;
            if (__builtin_mul_overflow(g.dims[k] - 1, s[k], &extent)) return false;
            if (__builtin_add_overflow(extent < 0 ? low : high, extent, extent < 0 ? &low : &high)) return false;
        }
        int64_t end;
        if (low < 0 || high == std::numeric_limits<int64_t>::max() || __builtin_mul_overflow(high + 1, size, &end) ||
            __builtin_add_overflow(end, spec.byte_shift, &end)) {
            return false;
        }
        return end <= static_cast<int64_t>(buffers[spec.buffer]->bytes);
    };
    // base: the buffer's start (the view adds the spec's shift), or NULL for index arithmetic only.
    const auto view_of = [&](const Spec &spec, const uint8_t *base) {
        return oracle::View{base ? base + spec.byte_shift : nullptr, spec.dtype, spec.geometry.offset,
                            spec.geometry.EffectiveStrides()};
    };
    const auto for_each_element = [&](const Spec &spec, auto &&fn) {
        const Geometry &g = spec.geometry;
        const int64_t rows = g.dims.empty() ? 1 : g.dims[0];
        const int64_t cols = g.dims.size() == 2 ? g.dims[1] : 1;
        for (int64_t i = 0; i < rows; ++i) {
            for (int64_t j = 0; j < cols; ++j) fn(i, j);
        }
    };
    for (int slot : {kInput, kTarget, kWeight}) {
        const Spec &spec = specs[slot];
        // A broadcast view can name billions of elements over a few bytes: those keep the random fill.
        if (!spec.present || !fits(spec) || spec.geometry.Elements() > (int64_t{1} << 22)) continue;
        uint8_t *base = buffers[spec.buffer]->data() + spec.byte_shift;
        const oracle::View v = view_of(spec, nullptr);  // index arithmetic only
        for_each_element(spec, [&](int64_t i, int64_t j) {
            double value = 0;
            int64_t integer = 0;
            if (slot == kTarget) {
                const int64_t pick = random.Below(16);
                integer = pick < 12 ? random.Below(std::max<int64_t>(c, 1)) : pick < 14 ? ignore_index
                          : spec.wild_values ? static_cast<int64_t>(random.Next()) : c;
            } else if (spec.wild_values) {
                uint32_t bits = static_cast<uint32_t>(random.Next());
                float f;
                std::memcpy(&f, &bits, 4);
                value = f;
            } else {
                value = slot == kInput ? random.Uniform(-20.0, 20.0) : random.Uniform(0.0, 3.0);
            }
            StoreElement(base, spec.dtype, v.Index(i, j), value, integer);
        });
    }

    bool expect_nullptr = false;
    for (int slot = 0; slot < kSlots; ++slot) {
        Spec &spec = specs[slot];
        if (!spec.present) {
            if (slot != kWeight) expect_nullptr = true;
            continue;
        }
        if (slot == kLogProbOut && in_place_handle) {
            spec.handle = specs[kInput].handle;
            if (!spec.handle) expect_nullptr = true;
            continue;
        }
        const Geometry &g = spec.geometry;
        spec.handle = aclCreateTensor(g.dims.data(), g.dims.size(), spec.dtype, g.null_strides ? nullptr : g.strides.data(),
                                      g.offset, spec.format, g.storage.data(), g.storage.size(),
                                      spec.buffer >= 0 ? buffers[spec.buffer]->data() + spec.byte_shift : nullptr);
        if (!spec.handle) {
            invalidate("not created");
            if (slot != kWeight) expect_nullptr = true; else spec.present = false;
            continue;
        }
        if (spec.buffer < 0 && g.Elements() != 0) expect_nullptr = true;
    }
    for (int slot = 0; slot < kSlots; ++slot) {
        Spec &spec = specs[slot];
        if (!spec.present || !spec.handle || !spec.stale || (slot == kLogProbOut && in_place_handle)) continue;
        if (aclDestroyTensor(spec.handle) != ACLNN_SUCCESS) Violation("aclDestroyTensor failed", "");
        expect_nullptr = true;
    }
    {
        std::string &d = CallDescription();
        d = "N=" + std::to_string(n) + " C=" + std::to_string(c) + " reduction=" + (reduction ? reduction : "NULL") +
            " ignore=" + std::to_string(ignore_index) + " smoothing=" + std::to_string(smoothing) +
            " zscale=" + std::to_string(zscale) + " returnZloss=" + std::to_string(return_zloss) +
            " in_place=" + std::to_string(in_place_handle) + (valid ? " valid\n" : " invalid\n");
        for (int slot = 0; slot < kSlots; ++slot) {
            const Spec &s = specs[slot];
            if (!s.present) continue;
            d += std::string("  ") + kSlotNames[slot] + ": dtype " + std::to_string(s.dtype) + " dims " +
                 Dims(s.geometry.dims) + " strides " + (s.geometry.null_strides ? "NULL" : Dims(s.geometry.strides)) +
                 " offset " + std::to_string(s.geometry.offset) + " storage " + Dims(s.geometry.storage) + " buffer " +
                 std::to_string(s.buffer) + " shift " + std::to_string(s.byte_shift) + (s.stale ? " stale" : "") +
                 "\n";
        }
    }
    for (auto &buffer : buffers) buffer->Snapshot();

    uint64_t workspace_size = 0;
    aclOpExecutor *executor = nullptr;
    const bool null_out = fdp.ConsumeIntegralInRange<int>(0, 63) == 0;
    if (null_out) {
        expect_nullptr = true;
        invalidate("NULL workspaceSize");
    }
    const auto handle = [&](int slot) { return specs[slot].present ? specs[slot].handle : nullptr; };
    const aclnnStatus status = aclnnCrossEntropyLossGetWorkspaceSize(
        handle(kInput), handle(kTarget), handle(kWeight), reduction, ignore_index, smoothing, zscale, return_zloss,
        handle(kLoss), handle(kLogProbOut), handle(kZloss), handle(kLse), null_out ? nullptr : &workspace_size,
        &executor);
    if (status != ACLNN_SUCCESS && status != ACLNN_ERR_PARAM_NULLPTR && status != ACLNN_ERR_PARAM_INVALID &&
        status != ACLNN_ERR_INNER_TILING_ERROR) {
        Violation("phase 1 returned an undocumented status", std::to_string(status));
    }
    if (status != ACLNN_SUCCESS && (!aclGetRecentErrMsg() || !*aclGetRecentErrMsg())) Violation("no message", "");
    if (expect_nullptr && status != ACLNN_ERR_PARAM_NULLPTR) Violation("NULL or dead argument not refused with 161001", std::to_string(status));
    if (valid && status != ACLNN_SUCCESS) Violation("phase 1 refused valid arguments", aclGetRecentErrMsg());
    CheckUntouched(buffers, "phase 1");
    // Only tensors phase 1 was given count: an optional input whose aclCreateTensor failed is passed as NULL
    // (regress-misaligned-weight-not-created).
    for (int slot = 0; slot < kSlots && status == ACLNN_SUCCESS; ++slot) {
        if (specs[slot].present && MisalignedShift(specs[slot].byte_shift, specs[slot].dtype)) {
            Violation("phase 1 accepted a data address not aligned to its element size", kSlotNames[slot]);
        }
    }
    if (status == ACLNN_SUCCESS) {
        const std::pair<int64_t, int64_t> shape = AcceptedShape(specs[kInput].geometry);
        const int64_t run_n = shape.first, run_c = shape.second;  // the problem that runs
        for (int slot = 0; slot < kSlots; ++slot) {
            const Spec &spec = specs[slot];
            if (spec.present && spec.geometry.Elements() > 0 && !fits(spec)) {
                Violation("phase 1 accepted a view outside its memory", kSlotNames[slot]);
            }
        }
        for (int slot = kLoss; slot < kSlots; ++slot) {
            const Spec &spec = specs[slot];
            if (!spec.present || spec.geometry.Elements() <= 0) continue;
            const oracle::View v = view_of(spec, nullptr);
            const size_t size = oracle::ElementSize(spec.dtype);
            for_each_element(spec, [&](int64_t i, int64_t j) {
                const size_t byte = static_cast<size_t>(v.Index(i, j)) * size + static_cast<size_t>(spec.byte_shift);
                std::memset(&buffers[spec.buffer]->written[byte], 1, size);
            });
        }
        std::vector<uint8_t> workspace(workspace_size);
        const aclrtStream stream = fdp.ConsumeBool() ? g_stream : nullptr;
        if (aclnnCrossEntropyLoss(workspace_size ? workspace.data() : nullptr, workspace_size, executor, stream) !=
            ACLNN_SUCCESS) {
            Violation("phase 2 refused an executor phase 1 made", aclGetRecentErrMsg());
        }
        const aclError sync = aclrtSynchronizeStream(stream);
        const bool empty = run_n == 0 || run_c == 0;
        const auto snapshot_of = [&](int slot) {
            return view_of(specs[slot], specs[slot].buffer >= 0 ? buffers[specs[slot].buffer]->before.data() : nullptr);
        };
        bool bad_targets = false;
        const oracle::View target = snapshot_of(kTarget);
        for (int64_t i = 0; i < run_n && !empty; ++i) {
            const int64_t t = target.Int(i);
            if (t != ignore_index && (t < 0 || t >= run_c)) bad_targets = true;
        }
        // C == 0 with rows: every target is out of range for the forward (its loss rows are NaN), also an error.
        if (run_n > 0 && run_c == 0) bad_targets = true;
        if (sync != ACL_SUCCESS && !(bad_targets && sync == ACL_ERROR_RT_VECTOR_CORE_EXCEPTION)) {
            Violation("synchronisation status", std::to_string(sync));
        }
        CheckUntouched(buffers, "phase 2");
        // logProbOut against log_softmax in float64, where the row's inputs are finite.
        const Spec &lp = specs[kLogProbOut];
        const oracle::View input = snapshot_of(kInput);
        const oracle::View got = view_of(lp, lp.buffer >= 0 ? buffers[lp.buffer]->data() : nullptr);
        const oracle::DtypeLimits limits = oracle::LimitsOf(lp.dtype);
        for (int64_t i = 0; i < run_n && !empty; ++i) {
            double m = -INFINITY;
            bool finite = true;
            for (int64_t j = 0; j < run_c; ++j) {
                const double x = input.Float(i, j);
                finite = finite && std::isfinite(x) && std::fabs(x) < 1e30;
                m = std::max(m, x);
            }
            if (!finite) continue;
            double sum = 0;
            for (int64_t j = 0; j < run_c; ++j) sum += std::exp(input.Float(i, j) - m);
            const double lse = m + std::log(sum);
            for (int64_t j = 0; j < run_c; ++j) {
                const double want = input.Float(i, j) - lse;
                const double tolerance = std::fabs(want) * 2 * limits.epsilon +
                                         (std::fabs(input.Float(i, j)) + std::fabs(lse)) * 64 * std::ldexp(1.0, -24) +
                                         2 * limits.tiny;
                const double value = got.Float(i, j);
                // Past the format's range: infinity of the right sign (or the largest finite values).
                if (std::fabs(want) > limits.max_finite - tolerance && std::isinf(value) && (value > 0) == (want > 0)) {
                    continue;
                }
                if (!(std::fabs(value - want) <= tolerance)) {
                    Violation("wrong logProbOut", "[" + std::to_string(i) + "][" + std::to_string(j) + "]: expected " +
                                                      std::to_string(want) + ", got " + std::to_string(value));
                }
            }
        }
        for (auto &buffer : buffers) {
            buffer->Snapshot();
            std::fill(buffer->written.begin(), buffer->written.end(), 0);
        }
        if (aclnnCrossEntropyLoss(workspace.data(), workspace_size, executor, stream) != ACLNN_ERR_PARAM_INVALID) {
            Violation("a spent executor was not refused with 161002", "");
        }
        CheckUntouched(buffers, "spent executor");
    }
    for (int slot = 0; slot < kSlots; ++slot) {
        const Spec &spec = specs[slot];
        if (!spec.present || !spec.handle || spec.stale || (slot == kLogProbOut && in_place_handle)) continue;
        if (aclDestroyTensor(spec.handle) != ACLNN_SUCCESS) Violation("aclDestroyTensor failed", kSlotNames[slot]);
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS || aclrtCreateStream(&g_stream) != ACL_SUCCESS) {
        std::fprintf(stderr, "ACL initialisation failed\n");
        std::abort();
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider fdp(data, size);
    RunOne(fdp);
    return 0;
}
