// What the operator fuzzers share: tensor geometries drawn from the fuzzer's input (valid ones, and mutations that
// make them invalid), honest backing buffers (exactly as large as the storage the tensor claims, so ASan sees any
// access outside it) or aclrtMalloc blocks of arbitrary size (which the library must check views against), bulk data
// from a PRNG seeded by the input, and the guard check: after a call, every byte that is not an element of the
// output view is what it was before.
#ifndef OPENACLNN_FUZZ_FUZZ_COMMON_H_
#define OPENACLNN_FUZZ_FUZZ_COMMON_H_

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <numeric>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "grad_oracle.h"

namespace openaclnn::fuzz {

// What the current input built, printed with a violation.
inline std::string &CallDescription() {
    static std::string text;
    return text;
}

// A failed expectation is a crash, so that libFuzzer keeps the input.
[[noreturn]] inline void Violation(const char *what, const std::string &detail) {
    std::fprintf(stderr, "\nFUZZ VIOLATION: %s: %s\n%s", what, detail.c_str(), CallDescription().c_str());
    const char *message = aclGetRecentErrMsg();
    std::fprintf(stderr, "aclGetRecentErrMsg: %s\n", message ? message : "(none)");
    std::abort();
}

// splitmix64: bulk data (fills, values) from one seed the input chooses, so inputs stay small.
struct Random {
    uint64_t state;
    uint64_t Next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double Uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(Next() >> 11) * 0x1p-53; }
    int64_t Below(int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(Next() % static_cast<uint64_t>(n)); }
};

constexpr int64_t kMaxHonestBytes = int64_t{4} << 20;

// The bytes of a storage of `elements` elements of `size` bytes, or -1 where that is more than kMaxHonestBytes or
// not a size at all (no element size, a negative count, or a product that overflows: __builtin_mul_overflow leaves
// the wrapped product, which once passed for a tiny honest size).
inline int64_t HonestBytes(int64_t elements, int64_t size) {
    int64_t product = 0;
    if (size <= 0 || elements < 0 || __builtin_mul_overflow(elements, size, &product) || product > kMaxHonestBytes) {
        return -1;
    }
    return product;
}

// A view over a storage, as passed to aclCreateTensor, plus what the fuzzer knows about it.
struct Geometry {
    std::vector<int64_t> dims;
    std::vector<int64_t> strides;
    bool null_strides = false;  // pass NULL: contiguous
    int64_t offset = 0;
    std::vector<int64_t> storage;
    bool self_overlap = false;  // two view elements share an address (zero or colliding strides)

    int64_t Elements() const {
        int64_t n = 1;
        for (int64_t d : dims) {
            if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
        }
        return n;
    }
    int64_t StorageElements() const {
        int64_t n = 1;
        for (int64_t d : storage) {
            if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
        }
        return n;
    }
    std::vector<int64_t> EffectiveStrides() const {
        if (!null_strides) return strides;
        std::vector<int64_t> s(dims.size(), 1);
        for (int64_t k = static_cast<int64_t>(dims.size()) - 2; k >= 0; --k) {
            s[k] = s[k + 1] * std::max<int64_t>(dims[k + 1], 1);
        }
        return s;
    }
};

// True when a data address byte_shift bytes past an aligned buffer is not a multiple of dtype's size (161002).
inline bool MisalignedShift(int64_t byte_shift, aclDataType dtype) {
    return byte_shift % std::max<int64_t>(static_cast<int64_t>(oracle::ElementSize(dtype)), 1) != 0;
}

// The [N, C] of the 2-D tensor (logProb, input) that a successful phase 1 accepted: the problem that runs. It differs
// from the N and C the harness drew only where a broken geometry was copied to every tensor that must agree with it
// (out takes logProb's geometry when it aliases it, so a mutated C stays consistent), which phase 1 rightly accepts
// as a valid problem of another shape; the oracle must then judge that problem.
inline std::pair<int64_t, int64_t> AcceptedShape(const Geometry &g) {
    if (g.dims.size() != 2) Violation("phase 1 accepted a [N, C] tensor of rank", std::to_string(g.dims.size()));
    return {g.dims[0], g.dims[1]};
}

inline std::string Dims(const std::vector<int64_t> &dims) {
    std::string text = "[";
    for (size_t k = 0; k < dims.size(); ++k) text += (k ? ", " : "") + std::to_string(dims[k]);
    return text + "]";
}

inline std::vector<int64_t> ContiguousStrides(const std::vector<int64_t> &dims) {
    std::vector<int64_t> s(dims.size(), 1);
    for (int64_t k = static_cast<int64_t>(dims.size()) - 2; k >= 0; --k) s[k] = s[k + 1] * std::max<int64_t>(dims[k + 1], 1);
    return s;
}

// A valid view of dims (at most 2-D, small): contiguous, padded, transposed, reversed, broadcast (inputs only) or
// arbitrary small strides (inputs only), with a fitting one-dimensional storage and some slack.
inline Geometry ValidGeometry(FuzzedDataProvider &fdp, const std::vector<int64_t> &dims, bool output) {
    Geometry g;
    g.dims = dims;
    const int kind = fdp.ConsumeIntegralInRange<int>(0, output ? 4 : 6);
    std::vector<int64_t> s = ContiguousStrides(dims);
    const size_t rank = dims.size();
    switch (kind) {
        case 0: g.null_strides = true; break;
        case 1: break;
        case 2:  // transposed (column-major)
            if (rank == 2) s = {1, std::max<int64_t>(dims[0], 1)};
            break;
        case 3: {  // padded rows, or a strided vector
            const int64_t pad = fdp.ConsumeIntegralInRange<int64_t>(1, 5);
            if (rank == 2) s[0] = dims[1] + pad;
            if (rank == 1) s[0] = 1 + pad;
            break;
        }
        case 4:  // reversed along some dimensions
            for (size_t k = 0; k < rank; ++k) {
                if (fdp.ConsumeBool()) s[k] = -s[k];
            }
            break;
        case 5:  // broadcast along one dimension
            if (rank) s[fdp.ConsumeIntegralInRange<size_t>(0, rank - 1)] = 0;
            break;
        default:  // anything small, overlaps included
            for (size_t k = 0; k < rank; ++k) s[k] = fdp.ConsumeIntegralInRange<int64_t>(-4, 6);
            break;
    }
    int64_t low = 0, high = 0;  // footprint relative to the offset
    bool empty = false;
    for (size_t k = 0; k < rank; ++k) {
        if (dims[k] == 0) empty = true;
        const int64_t extent = (dims[k] - 1) * s[k];
        if (extent < 0) low += extent; else high += extent;
    }
    if (empty) low = high = 0;
    g.offset = -low + (fdp.ConsumeBool() ? 0 : fdp.ConsumeIntegralInRange<int64_t>(0, 7));
    const int64_t slack = fdp.ConsumeBool() ? 0 : fdp.ConsumeIntegralInRange<int64_t>(0, 9);
    if (!g.null_strides) g.strides = s;
    if (kind <= 1 && g.offset == 0 && slack == 0 && !empty) {
        g.storage = dims;  // the plain case, rank 0 included
    } else {
        g.storage = {g.offset + high + 1 + slack};
    }
    // Self-overlap: a broadcast or colliding pair of strides among dimensions longer than 1.
    if (rank == 2 && dims[0] > 1 && dims[1] > 1) {
        const int64_t a = std::llabs(s[0]), b = std::llabs(s[1]);
        if (a == 0 || b == 0) {
            g.self_overlap = true;
        } else {
            const int64_t d = std::gcd(a, b);
            g.self_overlap = (b / d) < dims[0] && (a / d) < dims[1];
        }
    } else {
        for (size_t k = 0; k < rank; ++k) {
            if (dims[k] > 1 && s[k] == 0) g.self_overlap = true;
        }
    }
    return g;
}

// One way of breaking a geometry; returns a short name of what was done.
inline const char *MutateGeometry(FuzzedDataProvider &fdp, Geometry *g) {
    static const int64_t kWild[] = {-1,
                                    0,
                                    1,
                                    2,
                                    3,
                                    1 << 20,
                                    int64_t{1} << 31,
                                    int64_t{1} << 32,
                                    int64_t{1} << 40,
                                    int64_t{1} << 62,
                                    -(int64_t{1} << 40),
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int64_t>::max() / 2 + 1};
    const auto wild = [&] {
        return fdp.ConsumeBool() ? kWild[fdp.ConsumeIntegralInRange<size_t>(0, std::size(kWild) - 1)]
                                 : fdp.ConsumeIntegral<int64_t>();
    };
    switch (fdp.ConsumeIntegralInRange<int>(0, 6)) {
        case 0:
            if (!g->dims.empty()) {
                g->dims[fdp.ConsumeIntegralInRange<size_t>(0, g->dims.size() - 1)] = wild();
                return "dim";
            }
            [[fallthrough]];
        case 1: {  // another rank (up to past the limit of 8)
            const size_t rank = fdp.ConsumeIntegralInRange<size_t>(0, 9);
            g->dims.resize(rank, fdp.ConsumeIntegralInRange<int64_t>(0, 3));
            g->strides.resize(rank, 1);
            return "rank";
        }
        case 2:
            if (!g->null_strides && !g->strides.empty()) {
                g->strides[fdp.ConsumeIntegralInRange<size_t>(0, g->strides.size() - 1)] = wild();
                return "stride";
            }
            [[fallthrough]];
        case 3: g->offset = wild(); return "offset";
        case 4:
            if (!g->storage.empty()) {
                int64_t &d = g->storage[fdp.ConsumeIntegralInRange<size_t>(0, g->storage.size() - 1)];
                d = fdp.ConsumeBool() ? d - fdp.ConsumeIntegralInRange<int64_t>(1, 3) : wild();
                return "storage";
            }
            [[fallthrough]];
        case 5: g->storage.resize(fdp.ConsumeIntegralInRange<size_t>(0, 9), fdp.ConsumeIntegralInRange<int64_t>(0, 5));
            return "storage rank";
        default:
            g->null_strides = !g->null_strides;
            if (!g->null_strides) g->strides = ContiguousStrides(g->dims);
            return "null strides";
    }
}

// Backing memory of one or more tensors.
struct Buffer {
    bool device = false;            // an aclrtMalloc block (else exact-size heap memory)
    std::vector<uint8_t> heap;      // heap: exactly the bytes asked for
    void *block = nullptr;          // device
    size_t bytes = 0;               // bytes the tensors may legitimately touch (device: CANN's usable size)
    std::vector<uint8_t> before;    // snapshot taken just before the call under test
    std::vector<uint8_t> written;   // per byte: 1 if it is an element of the output view

    uint8_t *data() { return device ? static_cast<uint8_t *>(block) : heap.data(); }

    bool Allocate(bool as_device, size_t size) {
        device = as_device;
        if (device) {
            if (aclrtMalloc(&block, size, ACL_MEM_MALLOC_NORMAL_ONLY) != ACL_SUCCESS) return false;
            bytes = (size + 31) / 32 * 32 + 32;
        } else {
            heap.assign(size, 0);
            bytes = size;
        }
        written.assign(bytes, 0);
        return true;
    }
    ~Buffer() {
        if (block) aclrtFree(block);
    }
    void Snapshot() { before.assign(data(), data() + bytes); }
};

// Every byte of every buffer is as it was, except the bytes of the output's elements.
inline void CheckUntouched(std::vector<std::unique_ptr<Buffer>> &buffers, const char *when) {
    for (size_t b = 0; b < buffers.size(); ++b) {
        Buffer &buffer = *buffers[b];
        const uint8_t *now = buffer.data();
        for (size_t k = 0; k < buffer.bytes; ++k) {
            if (!buffer.written[k] && now[k] != buffer.before[k]) {
                Violation("memory outside the output view changed",
                          std::string(when) + ": buffer " + std::to_string(b) + " byte " + std::to_string(k) + " of " +
                              std::to_string(buffer.bytes));
            }
        }
    }
}

// Writes value v into element `index` of a float/integer storage.
inline void StoreElement(uint8_t *base, aclDataType dtype, int64_t index, double v, int64_t iv) {
    uint8_t *p = base + index * static_cast<int64_t>(oracle::ElementSize(dtype));
    switch (dtype) {
        case ACL_FLOAT: {
            const float f = static_cast<float>(v);
            std::memcpy(p, &f, 4);
            break;
        }
        case ACL_FLOAT16: {
            const uint16_t h = oracle::FloatToHalfBits(static_cast<float>(v));
            std::memcpy(p, &h, 2);
            break;
        }
        case ACL_BF16: {
            const uint16_t h = oracle::FloatToBf16Bits(static_cast<float>(v));
            std::memcpy(p, &h, 2);
            break;
        }
        case ACL_INT32: {
            const int32_t i = static_cast<int32_t>(static_cast<uint64_t>(iv));
            std::memcpy(p, &i, 4);
            break;
        }
        case ACL_INT64: std::memcpy(p, &iv, 8); break;
        default: break;
    }
}

// A double attribute: ordinary values, edges, NaN, infinities, and arbitrary bit patterns.
inline double FuzzDouble(FuzzedDataProvider &fdp, double lo, double hi) {
    switch (fdp.ConsumeIntegralInRange<int>(0, 11)) {
        case 0: return 0.0;
        case 1: return -0.0;
        case 2: return lo;
        case 3: return hi;
        case 4: return std::numeric_limits<double>::quiet_NaN();
        case 5: return std::numeric_limits<double>::infinity();
        case 6: return -std::numeric_limits<double>::infinity();
        case 7: return std::nextafter(hi, 1e300);
        case 8: return std::nextafter(lo, -1e300);
        case 9: {
            double d;
            const uint64_t bits = fdp.ConsumeIntegral<uint64_t>();
            std::memcpy(&d, &bits, sizeof d);
            return d;
        }
        default: return fdp.ConsumeFloatingPointInRange<double>(lo, hi);
    }
}

}  // namespace openaclnn::fuzz

#endif  // OPENACLNN_FUZZ_FUZZ_COMMON_H_
