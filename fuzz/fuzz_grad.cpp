// libFuzzer target: aclnnCrossEntropyLossGrad, phase 1 over arbitrary arguments and small phase-2 runs.
//
// Each input describes one call: N and C, the dtypes, every tensor's geometry (valid, or broken in one of many ways),
// its backing memory (exact-size heap memory or an aclrtMalloc block of any size), aliasing between tensors, stale
// handles, the attributes (NaN and infinities included), target values, and what phase 2 does with the executor
// (workspace sizes, streams, repeatable runs, rebinding, reuse of spent executors). The rules it enforces:
//   - phase 1 returns 0, 161001, 161002 or 561002, with a message for every failure; 0 whenever the fuzzer built
//     only valid arguments;
//   - a successful run gives the float64 oracle's answer within the dtype's tolerance (NaN rows for targets out of
//     range, reported as 507035 by the synchronisation), and is bitwise the same when a repeatable executor runs
//     again;
//   - no byte outside the output view changes, ever; nothing changes at all when a call fails;
//   - spent, destroyed and invented handles give error codes;
//   - no sanitizer report (the target is built with ASan + UBSan; LeakSanitizer runs at exit).
#include <algorithm>
#include <numeric>

#include "aclnnop/aclnn_cross_entropy_loss_grad.h"
#include "fuzz_common.h"

using namespace openaclnn;
using namespace openaclnn::fuzz;

namespace {

aclrtStream g_stream = nullptr;

enum Slot { kGradLoss, kLogProb, kTarget, kWeight, kGradZloss, kLse, kOut, kSlots };
const char *const kSlotNames[kSlots] = {"gradLoss", "logProb", "target", "weight", "gradZloss", "lse", "out"};

struct Spec {
    bool present = false;
    bool stale = false;  // pass a destroyed handle
    aclDataType dtype = ACL_FLOAT;
    aclFormat format = ACL_FORMAT_ND;
    Geometry geometry;
    int buffer = -1;        // index into buffers; -1: NULL data
    int64_t byte_shift = 0; // data = buffer + byte_shift
    bool wild_values = false;
    aclTensor *handle = nullptr;
};

bool Ok(aclnnStatus s) { return s == ACLNN_SUCCESS; }

void ExpectPhase1Status(aclnnStatus status) {
    if (status == ACLNN_SUCCESS || status == ACLNN_ERR_PARAM_NULLPTR || status == ACLNN_ERR_PARAM_INVALID ||
        status == ACLNN_ERR_INNER_TILING_ERROR) {
        if (status != ACLNN_SUCCESS) {
            const char *message = aclGetRecentErrMsg();
            if (!message || !*message) Violation("failure without a message", std::to_string(status));
        }
        return;
    }
    Violation("phase 1 returned an undocumented status", std::to_string(status));
}

// The whole input -> one call and its checks.
void RunOne(FuzzedDataProvider &fdp) {
    bool valid = true;  // the fuzzer only built valid arguments: phase 1 must succeed
    std::string broken;
    const auto invalidate = [&](const std::string &why) {
        valid = false;
        if (broken.empty()) broken = why;
    };

    // ---- sizes, dtypes, attributes ----
    const bool big = fdp.ConsumeIntegralInRange<int>(0, 63) == 0;  // enough elements for a multi-thread plan
    const int64_t n = big ? fdp.ConsumeIntegralInRange<int64_t>(1, 4) : fdp.ConsumeIntegralInRange<int64_t>(0, 40);
    const int64_t c = big ? fdp.ConsumeIntegralInRange<int64_t>(32768, 70000) : fdp.ConsumeIntegralInRange<int64_t>(0, 300);
    static const aclDataType kFloat[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
    const aclDataType dtype = kFloat[fdp.ConsumeIntegralInRange<int>(0, 2)];
    const aclDataType target_dtype = fdp.ConsumeBool() ? ACL_INT64 : ACL_INT32;

    static const char *const kReductions[] = {nullptr, "none", "mean", "sum"};
    std::string reduction_text;
    char *reduction = nullptr;
    const int reduction_kind = fdp.ConsumeIntegralInRange<int>(0, 8);
    oracle::Reduction reduction_mode = oracle::Reduction::kMean;
    if (reduction_kind < 4) {
        if (kReductions[reduction_kind]) {
            reduction_text = kReductions[reduction_kind];
            reduction = reduction_text.data();
        }
        reduction_mode = reduction_kind == 1 ? oracle::Reduction::kNone
                         : reduction_kind == 3 ? oracle::Reduction::kSum
                                               : oracle::Reduction::kMean;
    } else if (reduction_kind < 8) {
        reduction_text = kReductions[1 + reduction_kind % 3];
        reduction = reduction_text.data();
        reduction_mode = reduction_kind % 3 == 0 ? oracle::Reduction::kNone
                         : reduction_kind % 3 == 2 ? oracle::Reduction::kSum
                                                   : oracle::Reduction::kMean;
    } else {
        reduction_text = fdp.ConsumeRandomLengthString(12);
        reduction = reduction_text.data();
        if (reduction_text != "none" && reduction_text != "mean" && reduction_text != "sum") invalidate("reduction");
        reduction_mode = reduction_text == "none"  ? oracle::Reduction::kNone
                         : reduction_text == "sum" ? oracle::Reduction::kSum
                                                   : oracle::Reduction::kMean;
    }

    int64_t ignore_index = -100;
    switch (fdp.ConsumeIntegralInRange<int>(0, 6)) {
        case 0: break;
        case 1: ignore_index = -1; break;
        case 2: ignore_index = c > 0 ? fdp.ConsumeIntegralInRange<int64_t>(0, c - 1) : 0; break;
        case 3: ignore_index = c; break;
        case 4: ignore_index = std::numeric_limits<int64_t>::min(); break;
        case 5: ignore_index = std::numeric_limits<int64_t>::max(); break;
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

    // ---- tensors ----
    Spec specs[kSlots];
    const bool per_row = reduction_mode == oracle::Reduction::kNone;
    const std::vector<int64_t> scalar_shape = fdp.ConsumeBool() ? std::vector<int64_t>{} : std::vector<int64_t>{1};
    const std::vector<int64_t> expected_dims[kSlots] = {
        per_row ? std::vector<int64_t>{n} : scalar_shape,
        {n, c},
        {n},
        {c},
        per_row ? std::vector<int64_t>{n} : scalar_shape,
        (zscale == 0.0 && fdp.ConsumeIntegralInRange<int>(0, 3) == 0) ? std::vector<int64_t>{0} : std::vector<int64_t>{n},
        {n, c}};
    specs[kGradLoss].present = specs[kLogProb].present = specs[kTarget].present = specs[kOut].present = true;
    specs[kWeight].present = fdp.ConsumeBool();
    specs[kGradZloss].present = fdp.ConsumeIntegralInRange<int>(0, 3) == 0;
    specs[kLse].present = zscale != 0.0 || fdp.ConsumeIntegralInRange<int>(0, 3) == 0;

    // Optional inputs can go missing, required ones too (161001).
    if (fdp.ConsumeIntegralInRange<int>(0, 31) == 0) {
        const int slot = fdp.ConsumeIntegralInRange<int>(0, kSlots - 1);
        specs[slot].present = !specs[slot].present;
        if (slot != kWeight && slot != kGradZloss) invalidate(std::string("presence of ") + kSlotNames[slot]);
    }

    // In-place (out is logProb's handle), or out over logProb's memory with its own handle, or out over another
    // input's memory at some offset.
    const int alias = fdp.ConsumeIntegralInRange<int>(0, 15);
    for (int slot = 0; slot < kSlots; ++slot) {
        Spec &spec = specs[slot];
        if (!spec.present) continue;
        spec.dtype = slot == kTarget ? target_dtype : slot == kWeight ? ACL_FLOAT : dtype;
        spec.geometry = ValidGeometry(fdp, expected_dims[slot], false);  // out may overlap itself: 161002
        spec.wild_values = fdp.ConsumeIntegralInRange<int>(0, 7) == 0;
        if (fdp.ConsumeIntegralInRange<int>(0, 15) == 0) {
            const char *what = MutateGeometry(fdp, &spec.geometry);
            invalidate(std::string(kSlotNames[slot]) + " " + what);
        }
        if (fdp.ConsumeIntegralInRange<int>(0, 47) == 0) {
            spec.dtype = static_cast<aclDataType>(fdp.ConsumeIntegralInRange<int>(-1, 30));
            if (spec.dtype != (slot == kTarget ? target_dtype : slot == kWeight ? ACL_FLOAT : dtype)) {
                if (!(slot == kTarget && (spec.dtype == ACL_INT32 || spec.dtype == ACL_INT64))) {
                    invalidate(std::string(kSlotNames[slot]) + " dtype");
                }
            }
        }
        if (fdp.ConsumeIntegralInRange<int>(0, 47) == 0) {
            spec.format = static_cast<aclFormat>(fdp.ConsumeIntegralInRange<int>(-1, 50));
            invalidate(std::string(kSlotNames[slot]) + " format");
        }
        if (fdp.ConsumeIntegralInRange<int>(0, 63) == 0) {
            spec.stale = true;
            invalidate(std::string(kSlotNames[slot]) + " stale handle");
        }
    }
    if (specs[kOut].present && specs[kOut].geometry.self_overlap) invalidate("out overlaps itself");
    bool in_place_handle = false;
    if (alias == 1 && specs[kOut].present && specs[kLogProb].present) {
        in_place_handle = true;
        specs[kOut].geometry = specs[kLogProb].geometry;
        specs[kOut].dtype = specs[kLogProb].dtype;
        specs[kOut].format = specs[kLogProb].format;
        specs[kOut].stale = specs[kLogProb].stale;
        if (specs[kLogProb].geometry.self_overlap) invalidate("in-place over a self-overlapping logProb");
    } else if (alias == 2 && specs[kOut].present && specs[kLogProb].present) {
        specs[kOut].geometry = specs[kLogProb].geometry;
        specs[kOut].dtype = specs[kLogProb].dtype;
        specs[kOut].format = specs[kLogProb].format;
        if (specs[kLogProb].geometry.self_overlap) invalidate("in-place over a self-overlapping logProb");
    }

    // ---- memory ----
    std::vector<std::unique_ptr<Buffer>> buffers;
    std::vector<int64_t> need;  // honest bytes per buffer
    std::vector<bool> device_mode;
    Random random{fdp.ConsumeIntegral<uint64_t>()};
    for (int slot = 0; slot < kSlots; ++slot) {
        Spec &spec = specs[slot];
        if (!spec.present || (slot == kOut && in_place_handle)) continue;
        const int64_t size = static_cast<int64_t>(oracle::ElementSize(spec.dtype));
        int64_t elements = spec.geometry.StorageElements();
        const int64_t bytes = HonestBytes(elements, size);
        int share = -1;
        if (slot == kOut && alias == 2) share = specs[kLogProb].buffer;
        if (slot == kOut && alias == 3) {
            const int other = fdp.ConsumeIntegralInRange<int>(0, kOut - 1);
            share = specs[other].buffer;
            invalidate("out shares memory with an input");
        }
        if (slot != kOut && slot > 0 && fdp.ConsumeIntegralInRange<int>(0, 15) == 0) {
            share = specs[fdp.ConsumeIntegralInRange<int>(0, slot - 1)].buffer;  // inputs may share memory,
            if (alias == 1 || alias == 2) invalidate("an input shares memory written in place");  // unless in place
        }
        if (fdp.ConsumeIntegralInRange<int>(0, 63) == 0 || (bytes < 0 && fdp.ConsumeBool())) {
            spec.buffer = -1;  // NULL data
            if (spec.geometry.Elements() != 0) invalidate(std::string(kSlotNames[slot]) + " NULL data");
            continue;
        }
        if (share >= 0) {
            spec.buffer = share;
            if (bytes < 0) {
                invalidate(std::string(kSlotNames[slot]) + " storage larger than memory");
                // The library can check a storage against aclrtMalloc blocks only, not against heap memory.
                device_mode[share] = true;
            }
            need[share] = std::max(need[share], std::max<int64_t>(bytes, 1));
            continue;
        }
        spec.buffer = static_cast<int>(need.size());
        need.push_back(std::max<int64_t>(bytes, 1));
        const bool device = bytes < 0 || fdp.ConsumeIntegralInRange<int>(0, 3) == 0;
        device_mode.push_back(device);
        if (bytes < 0) invalidate(std::string(kSlotNames[slot]) + " storage larger than memory");
        if (device && fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {
            // A block smaller (or larger) than the storage claims: views must be checked against the block.
            need.back() = fdp.ConsumeIntegralInRange<int64_t>(1, std::max<int64_t>(bytes, 1) + 64);
            if (need.back() < bytes) invalidate(std::string(kSlotNames[slot]) + " block smaller than storage");
        }
        if (fdp.ConsumeIntegralInRange<int>(0, 31) == 0) {
            // The data address shifted by whole elements (valid: aligned to the element, not to a vector), or by
            // bytes (a float at an odd address): refused with 161002 (fuzz/README.md, "Misaligned data addresses").
            const bool misaligned = fdp.ConsumeBool();
            spec.byte_shift = fdp.ConsumeIntegralInRange<int64_t>(1, 8) * (misaligned ? 1 : std::max<int64_t>(size, 1));
            need.back() += spec.byte_shift;
            if (MisalignedShift(spec.byte_shift, spec.dtype)) {
                invalidate(std::string(kSlotNames[slot]) + " misaligned data");
            }
        }
    }
    for (size_t b = 0; b < need.size(); ++b) {
        auto buffer = std::make_unique<Buffer>();
        if (!buffer->Allocate(device_mode[b], static_cast<size_t>(std::min<int64_t>(need[b], kMaxHonestBytes + 64)))) {
            Violation("aclrtMalloc of a small block failed", std::to_string(need[b]));
        }
        // Garbage everywhere first: a kernel that reads outside its view reads noise, not zeros.
        uint8_t *data = buffer->data();
        for (size_t k = 0; k < buffer->bytes; ++k) data[k] = static_cast<uint8_t>(random.Next());
        buffers.push_back(std::move(buffer));
    }
    if (in_place_handle) specs[kOut].buffer = specs[kLogProb].buffer;
    if ((in_place_handle || (alias == 2 && specs[kOut].buffer == specs[kLogProb].buffer)) && specs[kOut].buffer >= 0) {
        specs[kOut].byte_shift = specs[kLogProb].byte_shift;  // the same view: the same address
    }

    // ---- values, through each view (only where the view is valid and inside its buffer) ----
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
        if (low < 0 || high == std::numeric_limits<int64_t>::max() || __builtin_mul_overflow(high + 1, size, &end) || __builtin_add_overflow(end, spec.byte_shift, &end)) {
            return false;
        }
        return end <= static_cast<int64_t>(buffers[spec.buffer]->bytes);
    };
    const auto view_of = [&](const Spec &spec, const uint8_t *base) {
        oracle::View v;
        v.data = base ? base + spec.byte_shift : nullptr;
        v.dtype = spec.dtype;
        v.offset = spec.geometry.offset;
        v.strides = spec.geometry.EffectiveStrides();
        return v;
    };
    const auto for_each_element = [&](const Spec &spec, auto &&fn) {
        const Geometry &g = spec.geometry;
        const int64_t rows = g.dims.empty() ? 1 : g.dims[0];
        const int64_t cols = g.dims.size() == 2 ? g.dims[1] : 1;
        for (int64_t i = 0; i < rows; ++i) {
            for (int64_t j = 0; j < cols; ++j) fn(i, j);
        }
    };
    // A broadcast view can name billions of elements over a few bytes: such views are not filled element by element.
    constexpr int64_t kMaxElementwiseFill = int64_t{1} << 22;
    for (int slot = 0; slot < kOut; ++slot) {
        const Spec &spec = specs[slot];
        // Inputs too large to fill element by element keep the random fill.
        if (!spec.present || !fits(spec) || spec.geometry.Elements() > kMaxElementwiseFill) continue;
        uint8_t *base = buffers[spec.buffer]->data() + spec.byte_shift;
        const oracle::View v = view_of(spec, base);
        for_each_element(spec, [&](int64_t i, int64_t j) {
            double value = 0;
            int64_t integer = 0;
            if (slot == kTarget) {
                const int64_t pick = random.Below(16);
                integer = pick < 11 ? random.Below(std::max<int64_t>(c, 1))
                          : pick < 13 ? ignore_index
                          : pick == 13 ? (spec.wild_values ? static_cast<int64_t>(random.Next()) : c)
                                       : (spec.wild_values ? -1 : random.Below(std::max<int64_t>(c, 1)));
            } else if (spec.wild_values) {
                uint32_t bits = static_cast<uint32_t>(random.Next());
                float f;
                std::memcpy(&f, &bits, 4);
                value = f;
            } else {
                switch (slot) {
                    case kLogProb: value = random.Uniform(-30.0, 0.5); break;
                    case kWeight: value = random.Below(8) == 0 ? 0.0 : random.Uniform(-1.0, 3.0); break;
                    case kLse: value = random.Uniform(-5.0, 40.0); break;
                    default: value = random.Uniform(-4.0, 4.0); break;
                }
            }
            StoreElement(base, spec.dtype, v.Index(i, j), value, integer);
        });
    }

    // ---- handles ----
    bool expect_nullptr = false;  // some required argument is NULL or not live: 161001 before anything else
    for (int slot = 0; slot < kSlots; ++slot) {
        Spec &spec = specs[slot];
        if (!spec.present) continue;
        if (slot == kOut && in_place_handle) {
            spec.handle = specs[kLogProb].handle;
            continue;
        }
        const Geometry &g = spec.geometry;
        void *data = spec.buffer >= 0 ? buffers[spec.buffer]->data() + spec.byte_shift : nullptr;
        spec.handle = aclCreateTensor(g.dims.data(), g.dims.size(), spec.dtype,
                                      g.null_strides ? nullptr : g.strides.data(), g.offset, spec.format,
                                      g.storage.data(), g.storage.size(), data);
        if (!spec.handle) {
            invalidate(std::string(kSlotNames[slot]) + " not created");
            if (slot != kWeight && slot != kGradZloss && slot != kLse) {
                expect_nullptr = true;
            } else {
                spec.present = false;  // phase 1 sees NULL: an optional input left out
            }
            continue;
        }
        if (spec.handle && spec.buffer < 0 && g.Elements() != 0) expect_nullptr = true;
    }
    // Stale handles die only now, so that no later aclCreateTensor can reuse their addresses.
    for (int slot = 0; slot < kSlots; ++slot) {
        Spec &spec = specs[slot];
        if (!spec.present || !spec.handle || !spec.stale || (slot == kOut && in_place_handle)) continue;
        if (!Ok(aclDestroyTensor(spec.handle))) Violation("aclDestroyTensor of a live tensor failed", "");
        if (aclDestroyTensor(spec.handle) != ACLNN_ERR_PARAM_INVALID) {
            Violation("aclDestroyTensor twice did not return 161002", kSlotNames[slot]);
        }
        expect_nullptr = true;
    }
    for (int slot : {kGradLoss, kLogProb, kTarget, kOut}) {
        if (!specs[slot].present) expect_nullptr = true;
    }
    if (!specs[kOut].present || !specs[kLogProb].present) invalidate("missing tensor");
    {
        std::string &d = CallDescription();
        d = "N=" + std::to_string(n) + " C=" + std::to_string(c) + " reduction=" + (reduction ? reduction : "NULL") +
            " ignore=" + std::to_string(ignore_index) + " smoothing=" + std::to_string(smoothing) +
            " zscale=" + std::to_string(zscale) + " in_place_handle=" + std::to_string(in_place_handle) +
            " alias=" + std::to_string(alias) + (valid ? " valid" : " invalid: " + broken) + "\n";
        for (int slot = 0; slot < kSlots; ++slot) {
            const Spec &s = specs[slot];
            if (!s.present) continue;
            d += std::string("  ") + kSlotNames[slot] + ": dtype " + std::to_string(s.dtype) + " dims " +
                 Dims(s.geometry.dims) + " strides " + (s.geometry.null_strides ? "NULL" : Dims(s.geometry.strides)) +
                 " offset " + std::to_string(s.geometry.offset) + " storage " + Dims(s.geometry.storage) + " buffer " +
                 std::to_string(s.buffer) + (s.buffer >= 0 && buffers[s.buffer]->device ? " (device)" : "") +
                 " shift " + std::to_string(s.byte_shift) + (s.stale ? " stale" : "") + "\n";
        }
    }
    // Out's memory: poisoned (where it is its own), then every buffer is remembered.
    const bool out_owns_buffer = [&] {
        if (!specs[kOut].present || specs[kOut].buffer < 0 || in_place_handle) return false;
        for (int slot = 0; slot < kOut; ++slot) {
            if (specs[slot].present && specs[slot].buffer == specs[kOut].buffer) return false;
        }
        return true;
    }();
    if (out_owns_buffer && fits(specs[kOut])) {
        const Spec &out = specs[kOut];
        uint8_t *base = buffers[out.buffer]->data() + out.byte_shift;
        const oracle::View v = view_of(out, base);
        const size_t size = oracle::ElementSize(out.dtype);
        if (out.geometry.Elements() > kMaxElementwiseFill) {
            // The buffer is out's own, so all of it is poisoned instead (CI's smoke run timed out here before:
            // regress-broadcast-out-poison-timeout).
            std::memset(buffers[out.buffer]->data(), 0x5a, buffers[out.buffer]->bytes);
        } else {
            for_each_element(out, [&](int64_t i, int64_t j) { std::memset(base + v.Index(i, j) * size, 0x5a, size); });
        }
    }
    for (auto &buffer : buffers) buffer->Snapshot();

    // ---- phase 1 ----
    uint64_t workspace_size = 0;
    aclOpExecutor *executor = nullptr;
    const bool null_size = fdp.ConsumeIntegralInRange<int>(0, 63) == 0;
    const bool null_executor = fdp.ConsumeIntegralInRange<int>(0, 63) == 0;
    if (null_size || null_executor) invalidate("NULL workspaceSize/executor");
    const auto handle = [&](int slot) { return specs[slot].present ? specs[slot].handle : nullptr; };
    const aclnnStatus status = aclnnCrossEntropyLossGradGetWorkspaceSize(
        handle(kGradLoss), handle(kLogProb), handle(kTarget), handle(kWeight), handle(kGradZloss), handle(kLse),
        reduction, ignore_index, smoothing, zscale, handle(kOut), null_size ? nullptr : &workspace_size,
        null_executor ? nullptr : &executor);
    ExpectPhase1Status(status);
    if (null_size || null_executor) expect_nullptr = true;
    if (expect_nullptr && status != ACLNN_ERR_PARAM_NULLPTR) {
        Violation("a NULL or dead argument was not refused with 161001", std::to_string(status));
    }
    if (valid && status != ACLNN_SUCCESS) {
        Violation("phase 1 refused valid arguments", aclGetRecentErrMsg() ? aclGetRecentErrMsg() : "");
    }
    CheckUntouched(buffers, "phase 1");

    // Only tensors phase 1 was given count: an optional input whose aclCreateTensor failed is passed as NULL
    // (regress-misaligned-weight-not-created).
    for (int slot = 0; slot < kSlots && status == ACLNN_SUCCESS; ++slot) {
        if (specs[slot].present && MisalignedShift(specs[slot].byte_shift, specs[slot].dtype)) {
            Violation("phase 1 accepted a data address not aligned to its element size", kSlotNames[slot]);
        }
    }
    if (status == ACLNN_SUCCESS) {
        if (!executor) Violation("phase 1 succeeded without an executor", "");
        // Everything phase 1 accepted fits its memory: the oracle can read it.
        for (int slot = 0; slot < kSlots; ++slot) {
            const Spec &spec = specs[slot];
            if (spec.present && spec.geometry.Elements() > 0 && !fits(spec)) {
                Violation("phase 1 accepted a view outside its memory", kSlotNames[slot]);
            }
        }
        // The oracle reads the snapshot, so that an in-place run does not change its inputs.
        oracle::GradInputs in;
        const std::pair<int64_t, int64_t> shape = AcceptedShape(specs[kLogProb].geometry);
        const int64_t run_n = shape.first, run_c = shape.second;
        in.n = run_n;
        in.c = run_c;
        in.reduction = reduction_mode;
        const auto snapshot_view = [&](int slot) {
            const Spec &spec = specs[slot];
            return view_of(spec, spec.buffer >= 0 ? buffers[spec.buffer]->before.data() : nullptr);
        };
        in.grad_loss = snapshot_view(kGradLoss);
        in.log_prob = snapshot_view(kLogProb);
        in.target = snapshot_view(kTarget);
        in.has_weight = specs[kWeight].present;
        if (in.has_weight) in.weight = snapshot_view(kWeight);
        in.has_grad_zloss = specs[kGradZloss].present;
        if (in.has_grad_zloss) in.grad_zloss = snapshot_view(kGradZloss);
        in.has_lse = specs[kLse].present;
        if (in.has_lse) in.lse = snapshot_view(kLse);
        in.ignore_index = ignore_index;
        in.label_smoothing = smoothing;
        in.zloss_scale = zscale;
        const bool empty = run_n == 0 || run_c == 0;
        if (empty && workspace_size != 0) Violation("N or C zero with a workspace", std::to_string(workspace_size));

        // Out's elements may change in a run; nothing else may.
        const Spec &out = specs[kOut];
        const size_t out_size = oracle::ElementSize(out.dtype);
        if (!empty) {
            const oracle::View v = view_of(out, nullptr);
            for_each_element(out, [&](int64_t i, int64_t j) {
                const int64_t byte = out.byte_shift + v.Index(i, j) * static_cast<int64_t>(out_size);
                std::memset(&buffers[out.buffer]->written[static_cast<size_t>(byte)], 1, out_size);
            });
        }

        // ---- phase 2 ----
        const bool repeatable = fdp.ConsumeBool();
        if (repeatable && !Ok(aclSetAclOpExecutorRepeatable(executor))) Violation("aclSetAclOpExecutorRepeatable failed", "");
        if (repeatable && fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {
            // Rebinding: an index past the end is refused; the same address again changes nothing.
            const size_t index = fdp.ConsumeIntegralInRange<size_t>(0, 8);
            const int slot = index < 6 ? static_cast<int>(index) : -1;
            void *same = (slot >= 0 && specs[slot].present && specs[slot].buffer >= 0)
                             ? buffers[specs[slot].buffer]->data() + specs[slot].byte_shift
                             : nullptr;
            const aclnnStatus rebind = aclSetInputTensorAddr(executor, index, nullptr, same);
            if (slot >= 0 && specs[slot].present && same) {
                if (!Ok(rebind)) Violation("rebinding an input to its own address failed", kSlotNames[slot]);
            } else if (Ok(rebind) && !(slot >= 0 && specs[slot].present && specs[slot].geometry.Elements() == 0)) {
                Violation("aclSetInputTensorAddr accepted a bad index or NULL", std::to_string(index));
            }
            if (aclSetOutputTensorAddr(executor, 1 + index, nullptr, nullptr) == ACLNN_SUCCESS) {
                Violation("aclSetOutputTensorAddr accepted index past 0", std::to_string(1 + index));
            }
        }
        std::vector<uint8_t> workspace;
        uint64_t passed_size = workspace_size;
        void *workspace_ptr = nullptr;
        aclnnStatus expected = ACLNN_SUCCESS;
        switch (fdp.ConsumeIntegralInRange<int>(0, 7)) {
            case 0:  // NULL with a size
                passed_size = workspace_size + fdp.ConsumeIntegralInRange<uint64_t>(0, 1);
                if (passed_size > 0) expected = ACLNN_ERR_PARAM_NULLPTR;
                break;
            case 1:  // too small
                if (workspace_size > 0) {
                    passed_size = workspace_size - fdp.ConsumeIntegralInRange<uint64_t>(1, workspace_size);
                    workspace.resize(passed_size + 1);
                    workspace_ptr = workspace.data();
                    expected = ACLNN_ERR_PARAM_INVALID;
                }
                break;
            case 2:  // larger than needed
                passed_size = workspace_size + fdp.ConsumeIntegralInRange<uint64_t>(1, 100);
                workspace.resize(passed_size);
                workspace_ptr = workspace.data();
                break;
            default:
                workspace.resize(workspace_size);
                workspace_ptr = workspace_size ? workspace.data() : nullptr;
                break;
        }
        if (expected == ACLNN_ERR_PARAM_INVALID && workspace_ptr == nullptr) expected = ACLNN_ERR_PARAM_NULLPTR;
        aclrtStream stream = g_stream;
        switch (fdp.ConsumeIntegralInRange<int>(0, 15)) {
            case 0: stream = nullptr; break;
            case 1: {  // a destroyed stream: an error code, and the executor stays usable
                aclrtStream dead = nullptr;
                if (aclrtCreateStream(&dead) != ACL_SUCCESS || aclrtDestroyStream(dead) != ACL_SUCCESS) {
                    Violation("stream create/destroy failed", "");
                }
                stream = dead;
                if (expected == ACLNN_SUCCESS) expected = ACLNN_ERR_PARAM_INVALID;
                break;
            }
            default: break;
        }
        aclnnStatus run = aclnnCrossEntropyLossGrad(workspace_ptr, passed_size, executor, stream);
        if (run != expected) {
            Violation("phase 2 status", "got " + std::to_string(run) + ", expected " + std::to_string(expected));
        }
        if (run != ACLNN_SUCCESS) {
            CheckUntouched(buffers, "failed phase 2");
            // A refused run leaves the executor live: it is the caller's to destroy.
            if (!Ok(aclDestroyAclOpExecutor(executor))) Violation("destroying a refused executor failed", "");
        } else {
            const aclError sync = aclrtSynchronizeStream(stream);
            int64_t bad_rows = 0;
            oracle::GradOracle reference(in);
            if (!empty) bad_rows = reference.bad_rows;
            const aclError expected_sync = bad_rows ? ACL_ERROR_RT_VECTOR_CORE_EXCEPTION : ACL_SUCCESS;
            if (sync != expected_sync) {
                Violation("synchronisation status",
                          "got " + std::to_string(sync) + ", expected " + std::to_string(expected_sync));
            }
            CheckUntouched(buffers, "phase 2");
            std::vector<uint8_t> first_result;
            if (!empty) {
                const oracle::View v = view_of(out, buffers[out.buffer]->data());  // view_of adds the shift
                for_each_element(out, [&](int64_t i, int64_t j) {
                    std::string why;
                    if (oracle::Judge(reference, out.dtype, i, j, v.Float(i, j), &why) == oracle::Verdict::kMismatch) {
                        char inputs[256];
                        std::snprintf(inputs, sizeof inputs,
                                      " [target %lld, logProb %.9g, weight %.9g, lse %.9g, bad rows %lld]",
                                      static_cast<long long>(in.target.Int(i)), in.log_prob.Float(i, j),
                                      in.has_weight ? in.weight.Float(j) : 1.0, in.has_lse ? in.lse.Float(i) : 0.0,
                                      static_cast<long long>(reference.bad_rows));
                        Violation("wrong result", "out[" + std::to_string(i) + "][" + std::to_string(j) + "] (N=" +
                                                      std::to_string(run_n) + ", C=" + std::to_string(run_c) + "): " + why +
                                                      inputs);
                    }
                });
                first_result.assign(buffers[out.buffer]->data(), buffers[out.buffer]->data() + buffers[out.buffer]->bytes);
            }
            if (repeatable) {
                // Again (in place, the input is now the first result: only for separate outputs), then destroy.
                if (out_owns_buffer && fdp.ConsumeBool()) {
                    if (!Ok(aclnnCrossEntropyLossGrad(workspace_ptr, passed_size, executor, stream))) {
                        Violation("second run of a repeatable executor failed", "");
                    }
                    if (aclrtSynchronizeStream(stream) != expected_sync) Violation("second synchronisation", "");
                    if (!empty && std::memcmp(first_result.data(), buffers[out.buffer]->data(), first_result.size())) {
                        Violation("a repeated run gave different bits", "");
                    }
                }
                if (!Ok(aclDestroyAclOpExecutor(executor))) Violation("aclDestroyAclOpExecutor failed", "");
            }
            // Spent or destroyed: an error code, nothing queued, nothing touched.
            for (auto &buffer : buffers) {
                buffer->Snapshot();
                std::fill(buffer->written.begin(), buffer->written.end(), 0);
            }
            if (aclnnCrossEntropyLossGrad(workspace_ptr, passed_size, executor, stream) != ACLNN_ERR_PARAM_INVALID) {
                Violation("a spent or destroyed executor was not refused with 161002", "");
            }
            if (aclDestroyAclOpExecutor(executor) != ACLNN_ERR_PARAM_INVALID) {
                Violation("destroying a spent executor was not refused with 161002", "");
            }
            if (aclrtSynchronizeStream(stream) != ACL_SUCCESS) Violation("synchronisation after a refused run", "");
            CheckUntouched(buffers, "spent executor");
        }
    }

    for (int slot = 0; slot < kSlots; ++slot) {
        const Spec &spec = specs[slot];
        if (!spec.present || !spec.handle || spec.stale || (slot == kOut && in_place_handle)) continue;
        if (!Ok(aclDestroyTensor(spec.handle))) Violation("aclDestroyTensor failed", kSlotNames[slot]);
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
