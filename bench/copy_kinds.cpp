// Copies of a buffer with Highway vectors on regular stores and on streaming (non-temporal) stores, for grad_bench's
// copy_kinds rows: which kind of copy is this machine's memory-speed floor, and whether streaming keeps its lead once
// the loop does arithmetic between the load and the store (the exp copies). Compiled for every target Highway builds
// and dispatched at run time, as the kernels are.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "copy_kinds.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "copy_kinds.h"

HWY_BEFORE_NAMESPACE();
namespace openaclnn_bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst[0, bytes) <- src[0, bytes); both aligned to the vector size (the callers split at 64-byte boundaries).
void CopyVectors(const uint8_t *src, uint8_t *dst, size_t bytes, bool stream) {
    const hn::ScalableTag<uint8_t> d;
    const size_t lanes = hn::Lanes(d);
    size_t i = 0;
    if (stream) {
        for (; i + 4 * lanes <= bytes; i += 4 * lanes) {
            hn::Stream(hn::Load(d, src + i), d, dst + i);
            hn::Stream(hn::Load(d, src + i + lanes), d, dst + i + lanes);
            hn::Stream(hn::Load(d, src + i + 2 * lanes), d, dst + i + 2 * lanes);
            hn::Stream(hn::Load(d, src + i + 3 * lanes), d, dst + i + 3 * lanes);
        }
        hwy::FlushStream();
    } else {
        for (; i + 4 * lanes <= bytes; i += 4 * lanes) {
            hn::Store(hn::Load(d, src + i), d, dst + i);
            hn::Store(hn::Load(d, src + i + lanes), d, dst + i + lanes);
            hn::Store(hn::Load(d, src + i + 2 * lanes), d, dst + i + 2 * lanes);
            hn::Store(hn::Load(d, src + i + 3 * lanes), d, dst + i + 3 * lanes);
        }
    }
    for (; i < bytes; ++i) dst[i] = src[i];
}

// dst[0, count) <- exp(src[0, count)), by Highway's vector Exp; both aligned to the vector size.
template <bool kStream>
void ExpVectorsOf(const float *src, float *dst, size_t count) {
    const hn::ScalableTag<float> d;
    const size_t lanes = hn::Lanes(d);
    size_t i = 0;
    for (; i + lanes <= count; i += lanes) {
        const auto v = hn::Exp(d, hn::Load(d, src + i));
        if constexpr (kStream) {
            hn::Stream(v, d, dst + i);
        } else {
            hn::Store(v, d, dst + i);
        }
    }
    if constexpr (kStream) hwy::FlushStream();
    for (; i < count; ++i) dst[i] = std::exp(src[i]);
}

void ExpVectors(const uint8_t *src, uint8_t *dst, size_t bytes, bool stream) {
    const auto *from = reinterpret_cast<const float *>(src);
    auto *to = reinterpret_cast<float *>(dst);
    if (stream) {
        ExpVectorsOf<true>(from, to, bytes / sizeof(float));
    } else {
        ExpVectorsOf<false>(from, to, bytes / sizeof(float));
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace openaclnn_bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace openaclnn_bench {

HWY_EXPORT(CopyVectors);
HWY_EXPORT(ExpVectors);

void RegularCopy(void *dst, const void *src, size_t bytes) {
    HWY_DYNAMIC_DISPATCH(CopyVectors)(static_cast<const uint8_t *>(src), static_cast<uint8_t *>(dst), bytes, false);
}

void StreamingCopy(void *dst, const void *src, size_t bytes) {
    HWY_DYNAMIC_DISPATCH(CopyVectors)(static_cast<const uint8_t *>(src), static_cast<uint8_t *>(dst), bytes, true);
}

void RegularExpCopy(void *dst, const void *src, size_t bytes) {
    HWY_DYNAMIC_DISPATCH(ExpVectors)(static_cast<const uint8_t *>(src), static_cast<uint8_t *>(dst), bytes, false);
}

void StreamingExpCopy(void *dst, const void *src, size_t bytes) {
    HWY_DYNAMIC_DISPATCH(ExpVectors)(static_cast<const uint8_t *>(src), static_cast<uint8_t *>(dst), bytes, true);
}

}  // namespace openaclnn_bench
#endif  // HWY_ONCE
