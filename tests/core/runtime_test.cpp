// The ACL runtime emulation (DESIGN.md section 3): init/finalize, devices, memory, copies, streams, per-thread
// error messages, data type sizes and the fp16 conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "acl_helpers.h"
#include "common/float_convert.h"
#include "float_formats.h"
#include "runtime/runtime.h"

namespace openaclnn::test {
namespace {

TEST(Runtime, InitTwiceIsRepeatInitialize) { EXPECT_EQ(aclInit(nullptr), ACL_ERROR_REPEAT_INITIALIZE); }

int FinalizeProbe(const std::vector<std::string> &) {
    int bad = 0;
    auto check = [&bad](const char *what, int got, int want) {
        if (got != want) {
            std::printf("%s returned %d, expected %d\n", what, got, want);
            bad = 1;
        }
    };
    check("aclInit", aclInit(nullptr), ACL_SUCCESS);
    check("second aclInit", aclInit(nullptr), ACL_ERROR_REPEAT_INITIALIZE);
    check("aclrtSetDevice(0)", aclrtSetDevice(0), ACL_SUCCESS);
    check("aclFinalize", aclFinalize(), ACL_SUCCESS);
    check("second aclFinalize", aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    std::printf("done\n");
    return bad;
}
const ProbeRegistrar kFinalizeProbe("finalize", FinalizeProbe);

TEST(Runtime, FinalizeTwiceIsRepeatFinalize) {
    std::string output;
    EXPECT_EQ(RunProbe("finalize", {}, {}, &output), 0) << output;
    EXPECT_NE(output.find("done"), std::string::npos) << output;
}

// aclFinalize runs the work still queued on every stream (the default one and a created one) before it returns.
int FinalizeRunsQueuedWorkProbe(const std::vector<std::string> &) {
    if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 2;
    aclrtStream stream = nullptr;
    if (aclrtCreateStream(&stream) != ACL_SUCCESS) return 2;
    std::vector<uint8_t> src(4096), a(4096, 0), b(4096, 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
    if (aclrtMemcpyAsync(a.data(), a.size(), src.data(), src.size(), ACL_MEMCPY_HOST_TO_HOST, stream) != ACL_SUCCESS ||
        aclrtMemcpyAsync(b.data(), b.size(), src.data(), src.size(), ACL_MEMCPY_HOST_TO_HOST, nullptr) != ACL_SUCCESS) {
        return 2;
    }
    if (aclFinalize() != ACL_SUCCESS) return 2;
    std::printf("created stream %s, default stream %s\n", a == src ? "ran" : "did not run",
                b == src ? "ran" : "did not run");
    return a == src && b == src ? 0 : 1;
}
const ProbeRegistrar kFinalizeRunsQueuedWorkProbe("finalize_runs_queued_work", FinalizeRunsQueuedWorkProbe);

TEST(Runtime, FinalizeRunsQueuedWork) {
    std::string output;
    EXPECT_EQ(RunProbe("finalize_runs_queued_work", {}, {}, &output), 0) << output;
}

TEST(Runtime, Devices) {
    EXPECT_EQ(aclrtSetDevice(1), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_EQ(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    int32_t device = -5;
    EXPECT_EQ(aclrtGetDevice(&device), ACL_SUCCESS);
    EXPECT_EQ(device, 0);
    uint32_t count = 0;
    EXPECT_EQ(aclrtGetDeviceCount(&count), ACL_SUCCESS);
    EXPECT_EQ(count, 1u);
}

TEST(Runtime, MallocRoundsPadsAlignsAndZeroFills) {
    for (aclrtMemMallocPolicy policy :
         {ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_HUGE_ONLY, ACL_MEM_MALLOC_NORMAL_ONLY}) {
        for (size_t size : {size_t{1}, size_t{31}, size_t{32}, size_t{33}, size_t{4096}, size_t{3} << 21}) {
            void *p = nullptr;
            ASSERT_EQ(aclrtMalloc(&p, size, policy), ACL_SUCCESS) << size;
            ASSERT_NE(p, nullptr);
            EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << size;
            // Zero-filled through the rounded size plus 32 bytes of padding.
            const size_t usable = (size + 31) / 32 * 32 + 32;
            const auto *bytes = static_cast<const uint8_t *>(p);
            size_t nonzero = 0;
            for (size_t k = 0; k < usable; ++k) nonzero += bytes[k] != 0;
            EXPECT_EQ(nonzero, 0u) << size;
            std::memset(p, 0x5a, usable);  // and all of it is writable
            EXPECT_EQ(aclrtFree(p), ACL_SUCCESS);
        }
    }
    void *host = nullptr;
    ASSERT_EQ(aclrtMallocHost(&host, 100), ACL_SUCCESS);
    std::memset(host, 1, 100);
    EXPECT_EQ(aclrtFreeHost(host), ACL_SUCCESS);
}

TEST(Runtime, MallocErrors) {
    void *p = reinterpret_cast<void *>(0x1);
    EXPECT_EQ(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    EXPECT_NE(aclGetRecentErrMsg(), nullptr);
    EXPECT_EQ(aclrtMalloc(nullptr, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    p = nullptr;
    EXPECT_EQ(aclrtMalloc(&p, size_t{1} << 62, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION);
    EXPECT_EQ(aclrtMalloc(&p, size_t{1} << 62, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_ERROR_RT_MEMORY_ALLOCATION);
    // Sizes whose rounding would overflow are refused, not wrapped around to a small block.
    EXPECT_NE(aclrtMalloc(&p, std::numeric_limits<size_t>::max() - 8, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
}

TEST(Runtime, FreeErrorsNeverCrash) {
    EXPECT_EQ(aclrtFree(nullptr), ACL_ERROR_INVALID_PARAM);
    int on_stack = 0;
    EXPECT_EQ(aclrtFree(&on_stack), ACL_ERROR_INVALID_PARAM);
    void *p = nullptr;
    ASSERT_EQ(aclrtMalloc(&p, 256, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(static_cast<uint8_t *>(p) + 64), ACL_ERROR_INVALID_PARAM) << "interior pointer";
    EXPECT_EQ(aclrtFree(p), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(p), ACL_ERROR_INVALID_PARAM) << "double free";
}

TEST(Runtime, Memcpy) {
    std::vector<uint8_t> src(1000), dst(1000, 0);
    for (size_t k = 0; k < src.size(); ++k) src[k] = static_cast<uint8_t>(k * 7);
    void *dev = nullptr;
    ASSERT_EQ(aclrtMalloc(&dev, 1000, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    void *dev2 = nullptr;
    ASSERT_EQ(aclrtMalloc(&dev2, 1000, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
    EXPECT_EQ(aclrtMemcpy(dev, 1000, src.data(), 1000, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    EXPECT_EQ(aclrtMemcpy(dev2, 1000, dev, 1000, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_SUCCESS);
    EXPECT_EQ(aclrtMemcpy(dst.data(), 1000, dev2, 1000, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    EXPECT_EQ(dst, src);
    std::vector<uint8_t> dst2(1000, 0);
    EXPECT_EQ(aclrtMemcpy(dst2.data(), 1000, src.data(), 1000, ACL_MEMCPY_HOST_TO_HOST), ACL_SUCCESS);
    EXPECT_EQ(dst2, src);
    std::vector<uint8_t> dst3(1000, 0);
    EXPECT_EQ(aclrtMemcpy(dst3.data(), 1000, dev, 1000, ACL_MEMCPY_DEFAULT), ACL_SUCCESS);
    EXPECT_EQ(dst3, src);

    EXPECT_EQ(aclrtMemcpy(nullptr, 1000, src.data(), 10, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    EXPECT_EQ(aclrtMemcpy(dev, 1000, nullptr, 10, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    EXPECT_EQ(aclrtMemcpy(dev, 10, src.data(), 11, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    std::vector<uint8_t> before = dst;
    EXPECT_EQ(aclrtMemcpy(dst.data(), 1000, dev, 0, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS) << "count 0";
    EXPECT_EQ(dst, before);

    EXPECT_EQ(aclrtMemset(dev, 1000, 0x3c, 500), ACL_SUCCESS);
    EXPECT_EQ(aclrtMemcpy(dst.data(), 1000, dev, 1000, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    for (size_t k = 0; k < 1000; ++k) ASSERT_EQ(dst[k], k < 500 ? 0x3c : src[k]) << k;
    EXPECT_NE(aclrtMemset(dev, 10, 0, 11), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(dev), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(dev2), ACL_SUCCESS);
}

TEST(Runtime, StreamsAreInOrderAsyncQueues) {
    constexpr size_t kBytes = size_t{8} << 20;
    constexpr int kHops = 8;
    std::vector<uint8_t> src(kBytes);
    std::mt19937_64 rng(3);
    for (auto &b : src) b = static_cast<uint8_t>(rng());
    std::vector<void *> buffers(kHops + 1);
    for (void *&b : buffers) ASSERT_EQ(aclrtMalloc(&b, kBytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    aclrtStream s1 = nullptr, s2 = nullptr;
    ASSERT_EQ(aclrtCreateStream(&s1), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&s2), ACL_SUCCESS);
    // A chain where each copy reads what the previous one wrote: correct only if they run in order.
    ASSERT_EQ(aclrtMemcpyAsync(buffers[0], kBytes, src.data(), kBytes, ACL_MEMCPY_HOST_TO_DEVICE, s1), ACL_SUCCESS);
    for (int k = 0; k < kHops; ++k) {
        ASSERT_EQ(aclrtMemcpyAsync(buffers[k + 1], kBytes, buffers[k], kBytes, ACL_MEMCPY_DEVICE_TO_DEVICE, s1),
                  ACL_SUCCESS);
    }
    std::vector<uint8_t> back(kBytes, 0);
    ASSERT_EQ(aclrtMemcpyAsync(back.data(), kBytes, buffers[kHops], kBytes, ACL_MEMCPY_DEVICE_TO_HOST, s1),
              ACL_SUCCESS);
    // Meanwhile another stream works on its own.
    std::vector<uint8_t> other(1 << 16, 7), other_back(1 << 16, 0);
    ASSERT_EQ(
        aclrtMemcpyAsync(other_back.data(), other.size(), other.data(), other.size(), ACL_MEMCPY_HOST_TO_HOST, s2),
        ACL_SUCCESS);
    EXPECT_EQ(aclrtSynchronizeStream(s1), ACL_SUCCESS);
    EXPECT_EQ(back, src);
    EXPECT_EQ(aclrtSynchronizeStream(s2), ACL_SUCCESS);
    EXPECT_EQ(other_back, other);
    // The default stream (NULL) works the same way.
    std::vector<uint8_t> via_default(kBytes, 0);
    ASSERT_EQ(aclrtMemcpyAsync(via_default.data(), kBytes, buffers[3], kBytes, ACL_MEMCPY_DEVICE_TO_HOST, nullptr),
              ACL_SUCCESS);
    EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
    EXPECT_EQ(via_default, src);
    // Bad arguments to an async copy are refused at once.
    EXPECT_EQ(aclrtMemcpyAsync(nullptr, 10, src.data(), 10, ACL_MEMCPY_HOST_TO_DEVICE, s1), ACL_ERROR_INVALID_PARAM);
    EXPECT_EQ(aclrtMemcpyAsync(buffers[0], 10, src.data(), 11, ACL_MEMCPY_HOST_TO_DEVICE, s1),
              ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_EQ(aclrtSynchronizeStream(s1), ACL_SUCCESS);
    EXPECT_EQ(aclrtDestroyStream(s1), ACL_SUCCESS);
    EXPECT_EQ(aclrtDestroyStream(s2), ACL_SUCCESS);
    EXPECT_NE(aclrtCreateStream(nullptr), ACL_SUCCESS);
    for (void *b : buffers) EXPECT_EQ(aclrtFree(b), ACL_SUCCESS);
}

// A stream's tasks run on the threads that synchronise it: several synchronising at once share them, each task once,
// one at a time (TSan would see two at once: the log below has no lock) and in the order queued; a task queued while
// they run is left to a later synchronisation or runs with them, never out of order.
TEST(Runtime, SynchronisingThreadsRunTheQueueInOrder) {
    constexpr int kTasks = 3000;
    constexpr int kSynchronisers = 4;
    aclrtStream stream = nullptr;
    ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
    std::vector<int> log;
    std::vector<std::thread::id> ran_on;
    std::atomic<int> running{0};
    std::atomic<bool> overlapped{false};
    const auto enqueue = [&](int index) {
        return EnqueueTask(stream, [&, index](TaskContext &) {
            if (running.fetch_add(1) != 0) overlapped = true;
            if (index % 64 == 0) {  // now and then a longer task, for the others to run into
                const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
                while (std::chrono::steady_clock::now() < until) {
                }
            }
            log.push_back(index);
            ran_on.push_back(std::this_thread::get_id());
            running.fetch_sub(1);
        });
    };
    for (int round = 0; round < 3; ++round) {
        log.clear();
        ran_on.clear();
        for (int i = 0; i < kTasks; ++i) ASSERT_EQ(enqueue(i), ACL_SUCCESS);
        std::vector<std::thread> threads;
        std::vector<std::thread::id> ids(kSynchronisers);
        std::vector<aclError> results(kSynchronisers, -1);
        for (int t = 0; t < kSynchronisers; ++t) {
            threads.emplace_back([&, t] {
                ids[t] = std::this_thread::get_id();
                results[t] = aclrtSynchronizeStream(stream);
            });
        }
        // Queued while the others synchronise: behind every task before it.
        ASSERT_EQ(enqueue(kTasks), ACL_SUCCESS);
        for (auto &thread : threads) thread.join();
        ASSERT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        for (int t = 0; t < kSynchronisers; ++t) EXPECT_EQ(results[t], ACL_SUCCESS) << "thread " << t;
        ASSERT_FALSE(overlapped) << "two tasks of the stream ran at once";
        ASSERT_EQ(log.size(), static_cast<size_t>(kTasks + 1)) << "round " << round;
        for (int i = 0; i <= kTasks; ++i) ASSERT_EQ(log[i], i) << "round " << round;
        ids.push_back(std::this_thread::get_id());
        for (const std::thread::id &id : ran_on) {
            ASSERT_NE(std::find(ids.begin(), ids.end(), id), ids.end())
                << "a task ran on a thread that did not synchronise";
        }
    }
    EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

// Queued work runs when the stream is destroyed without a synchronisation, in order.
TEST(Runtime, DestroyingAStreamRunsItsQueuedWork) {
    constexpr size_t kBytes = size_t{1} << 20;
    std::vector<uint8_t> src(kBytes);
    std::mt19937_64 rng(4);
    for (auto &byte : src) byte = static_cast<uint8_t>(rng());
    std::vector<uint8_t> hop(kBytes, 0), back(kBytes, 0);
    aclrtStream stream = nullptr;
    ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
    ASSERT_EQ(aclrtMemcpyAsync(hop.data(), kBytes, src.data(), kBytes, ACL_MEMCPY_HOST_TO_HOST, stream), ACL_SUCCESS);
    ASSERT_EQ(aclrtMemcpyAsync(back.data(), kBytes, hop.data(), kBytes, ACL_MEMCPY_HOST_TO_HOST, stream), ACL_SUCCESS);
    EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
    EXPECT_EQ(back, src);
}

TEST(Runtime, RecentErrorMessageIsPerThread) {
    EXPECT_EQ(aclrtMalloc(nullptr, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    const std::string mine = RecentError();
    EXPECT_FALSE(mine.empty());
    std::string fresh_thread = "unset";
    std::string other_after_error;
    std::thread worker([&] {
        const char *m = aclGetRecentErrMsg();
        fresh_thread = m ? m : "<null>";
        aclrtSetDevice(7);
        other_after_error = RecentError();
    });
    worker.join();
    EXPECT_EQ(fresh_thread, "<null>") << "a new thread has no message";
    EXPECT_FALSE(other_after_error.empty());
    EXPECT_NE(other_after_error, mine);
    EXPECT_EQ(RecentError(), mine) << "another thread's error must not replace this thread's message";
}

TEST(Runtime, DataTypeSize) {
    const std::pair<aclDataType, size_t> sizes[] = {
        {ACL_FLOAT, 4},  {ACL_FLOAT16, 2},      {ACL_INT8, 1},
        {ACL_INT32, 4},  {ACL_UINT8, 1},        {ACL_INT16, 2},
        {ACL_UINT16, 2}, {ACL_UINT32, 4},       {ACL_INT64, 8},
        {ACL_UINT64, 8}, {ACL_DOUBLE, 8},       {ACL_BOOL, 1},
        {ACL_STRING, 0}, {ACL_COMPLEX64, 8},    {ACL_COMPLEX128, 16},
        {ACL_BF16, 2},   {ACL_DT_UNDEFINED, 0}, {static_cast<aclDataType>(15), 0}};
    for (const auto &s : sizes) EXPECT_EQ(aclDataTypeSize(s.first), s.second) << s.first;
}

TEST(Runtime, TensorGetters) {
    const int64_t dims[] = {3, 4};
    const int64_t strides[] = {1, 3};
    const int64_t storage[] = {12};
    float data[12] = {};
    aclTensor *t = aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, storage, 1, data);
    ASSERT_NE(t, nullptr);
    int64_t *got = nullptr;
    uint64_t num = 0;
    ASSERT_EQ(aclGetViewShape(t, &got, &num), ACLNN_SUCCESS);
    ASSERT_EQ(num, 2u);
    EXPECT_EQ(got[0], 3);
    EXPECT_EQ(got[1], 4);
    delete[] got;
    aclDataType dt = ACL_DT_UNDEFINED;
    EXPECT_EQ(aclGetDataType(t, &dt), ACLNN_SUCCESS);
    EXPECT_EQ(dt, ACL_FLOAT);
    EXPECT_EQ(aclDestroyTensor(t), ACLNN_SUCCESS);
    EXPECT_EQ(aclDestroyTensor(nullptr), ACLNN_SUCCESS);
    EXPECT_EQ(aclnnInit(nullptr), ACLNN_SUCCESS);
}

// ---- fp16 conversions against the independent encoder of float_formats.h ----

TEST(Float16, EveryHalfRoundTripsExactly) {
    for (uint32_t h = 0; h < 0x10000u; ++h) {
        const float f = aclFloat16ToFloat(static_cast<aclFloat16>(h));
        const double want = DecodeHalf(static_cast<uint16_t>(h));
        if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(f)) << std::hex << h;
            ASSERT_TRUE(std::isnan(aclFloat16ToFloat(aclFloatToFloat16(f)))) << std::hex << h;
            continue;
        }
        ASSERT_EQ(static_cast<double>(f), want) << std::hex << h;
        ASSERT_EQ(std::signbit(f), std::signbit(want)) << std::hex << h;
        ASSERT_EQ(aclFloatToFloat16(f), h) << std::hex << h;
    }
}

TEST(Float16, TiesSubnormalsOverflowInfinityNan) {
    // Midpoints between consecutive halves (exact in float) round to the even one; just off the midpoint rounds
    // to the nearer one.
    for (uint32_t h = 0; h < 0x7bffu; ++h) {
        const double lo = DecodeHalf(static_cast<uint16_t>(h));
        const double hi = DecodeHalf(static_cast<uint16_t>(h + 1));
        const float mid = static_cast<float>((lo + hi) / 2.0);
        ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2.0);
        const uint16_t even = (h % 2 == 0) ? static_cast<uint16_t>(h) : static_cast<uint16_t>(h + 1);
        ASSERT_EQ(aclFloatToFloat16(mid), even) << "tie above " << std::hex << h;
        ASSERT_EQ(aclFloatToFloat16(-mid), static_cast<uint16_t>(even | 0x8000u)) << "tie above -" << std::hex << h;
        ASSERT_EQ(aclFloatToFloat16(std::nextafter(mid, 0.0f)), h) << std::hex << h;
        ASSERT_EQ(aclFloatToFloat16(std::nextafter(mid, INFINITY)), h + 1) << std::hex << h;
    }
    EXPECT_EQ(aclFloatToFloat16(65504.0f), 0x7bffu);
    EXPECT_EQ(aclFloatToFloat16(65519.99f), 0x7bffu);
    EXPECT_EQ(aclFloatToFloat16(65520.0f), 0x7c00u) << "the tie above the largest half rounds to infinity";
    EXPECT_EQ(aclFloatToFloat16(1e10f), 0x7c00u);
    EXPECT_EQ(aclFloatToFloat16(-1e10f), 0xfc00u);
    EXPECT_EQ(aclFloatToFloat16(INFINITY), 0x7c00u);
    EXPECT_EQ(aclFloatToFloat16(-INFINITY), 0xfc00u);
    EXPECT_EQ(aclFloatToFloat16(std::ldexp(1.0f, -24)), 0x0001u) << "smallest subnormal";
    EXPECT_EQ(aclFloatToFloat16(std::ldexp(1.0f, -25)), 0x0000u) << "half of it is a tie to even 0";
    EXPECT_EQ(aclFloatToFloat16(std::ldexp(1.5f, -25)), 0x0001u);
    EXPECT_EQ(aclFloatToFloat16(std::ldexp(3.0f, -25)), 0x0002u) << "1.5 ulp ties to even 2";
    EXPECT_EQ(aclFloatToFloat16(1e-30f), 0x0000u);
    EXPECT_EQ(aclFloatToFloat16(-1e-30f), 0x8000u);
    EXPECT_EQ(aclFloatToFloat16(-0.0f), 0x8000u);
    EXPECT_EQ(aclFloatToFloat16(std::numeric_limits<float>::denorm_min()), 0x0000u);
    const uint16_t qnan = aclFloatToFloat16(std::numeric_limits<float>::quiet_NaN());
    EXPECT_EQ(qnan & 0x7c00u, 0x7c00u);
    EXPECT_NE(qnan & 0x03ffu, 0u);
    const uint16_t snan = aclFloatToFloat16(std::numeric_limits<float>::signaling_NaN());
    EXPECT_NE(snan & 0x03ffu, 0u) << "a NaN must not become infinity";
    float payload_nan;
    const uint32_t bits = 0x7f800001u;  // NaN whose payload lies below the bits fp16 keeps
    std::memcpy(&payload_nan, &bits, 4);
    EXPECT_TRUE(std::isnan(aclFloat16ToFloat(aclFloatToFloat16(payload_nan))));
}

TEST(Float16, RandomFloatsMatchIndependentRounding) {
    std::mt19937 rng(12345);
    for (int k = 0; k < 4000000; ++k) {
        uint32_t bits = rng();
        // Concentrate on the exponents that matter to fp16 (subnormal through overflow) half of the time.
        if (k % 2) bits = (bits & 0x807fffffu) | ((100u + rng() % 45u) << 23);
        float f;
        std::memcpy(&f, &bits, 4);
        if (std::isnan(f)) continue;
        ASSERT_EQ(aclFloatToFloat16(f), DoubleToHalfBits(f)) << std::hex << bits;
    }
}

// The library's double -> fp16 / bf16 stores (round to odd into float, then to nearest even) against the tests' own
// one-step rounding: doubles at and around every kind of midpoint of the 16-bit formats (where rounding twice to
// nearest would go wrong), below and within the subnormal range, near overflow, and random bit patterns.
TEST(Float16, DoublesRoundOnceToHalfAndBf16) {
    std::mt19937_64 rng(777);
    const auto check = [](double d) {
        if (std::isnan(d)) {
            EXPECT_TRUE(std::isnan(DecodeHalf(DoubleToHalf(d))));
            EXPECT_TRUE(std::isnan(DecodeBf16(DoubleToBf16(d))));
            return;
        }
        ASSERT_EQ(DoubleToHalf(d), DoubleToHalfBits(d)) << std::hexfloat << d;
        ASSERT_EQ(DoubleToBf16(d), DoubleToBf16Bits(d)) << std::hexfloat << d;
    };
    for (int k = 0; k < 2000000; ++k) {
        const uint16_t h = static_cast<uint16_t>(rng());
        const bool bf16 = k % 2 != 0;
        const double v = bf16 ? DecodeBf16(h) : DecodeHalf(h);
        const double next = bf16 ? DecodeBf16(static_cast<uint16_t>(h + 1)) : DecodeHalf(static_cast<uint16_t>(h + 1));
        if (!std::isfinite(v) || !std::isfinite(next)) continue;
        const double mid = v + (next - v) / 2;  // exact: a few more bits than the format's
        const double tiny = std::fabs(mid) * 0x1p-50 + 0x1p-1070;
        const double fraction = std::ldexp(static_cast<double>(rng() >> 11), -53);  // [0, 1)
        for (double d : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 2 * mid), mid + tiny, mid - tiny,
                         v + (next - v) * fraction, mid + (next - v) * 0x1p-30 * fraction}) {
            check(d);
        }
    }
    for (int k = 0; k < 2000000; ++k) {
        uint64_t bits = rng();
        // Exponents from below fp16's subnormals (2^-30) to beyond bf16's overflow, half of the time.
        if (k % 2) bits = (bits & 0x800fffffffffffffull) | (static_cast<uint64_t>(1023 - 30 + rng() % 190) << 52);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        check(d);
    }
}

}  // namespace
}  // namespace openaclnn::test
