// Device memory is host memory. aclrtMalloc follows CANN's sizing (round up to 32 bytes, then 32 bytes of
// padding), aligns to 64 bytes and zero-fills. Large blocks come straight from mmap (zero pages for free) and, for
// the HUGE policies, are 2 MiB aligned and advised to use transparent huge pages: a first touch of 4 KiB pages
// costs about 30 times more than of huge pages. Every block is registered, so that freeing an unknown pointer or
// freeing twice is an error code and views can be checked against the block they point into.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/runtime.h"

namespace openaclnn {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kHugePage = size_t{2} << 20;
// From this size on, blocks come from mmap: zero-filled by the kernel, returned to it on free.
constexpr size_t kMmapThreshold = size_t{256} << 10;

enum class BlockKind { kDevice, kHost };

struct Block {
    size_t usable;        // bytes the caller may touch: request rounded up to 32, plus 32 of padding
    void *mapping;        // mmap base, or nullptr for aligned_alloc blocks
    size_t mapping_size;  // bytes mapped
    BlockKind kind;
};

std::mutex g_blocks_mutex;
std::map<uintptr_t, Block> &Blocks() {
    static auto *blocks = new std::map<uintptr_t, Block>();  // never destroyed: frees may come during exit
    return *blocks;
}

bool UsableSize(size_t size, size_t *usable) {
    if (size > SIZE_MAX - 64) return false;
    *usable = ((size + 31) / 32) * 32 + 32;
    return true;
}

// The device's memory is the host's physical memory: a larger request fails as it would on an NPU, whatever the
// kernel's overcommit policy would let mmap promise (and later fail to keep, with the OOM killer).
uint64_t PhysicalMemoryBytes() {
    static const uint64_t bytes = [] {
        const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
        return pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                                           : UINT64_MAX;
    }();
    return bytes;
}

aclError Allocate(void **ptr, size_t size, bool huge, BlockKind kind, const char *api) {
    size_t usable = 0;
    if (!UsableSize(size, &usable)) {
        return Fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: size %zu bytes cannot be allocated", api, size);
    }
    if (usable > PhysicalMemoryBytes()) {
        return Fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: size %zu bytes is more than the device's memory (%llu bytes)",
                    api, size, static_cast<unsigned long long>(PhysicalMemoryBytes()));
    }
    Block block{usable, nullptr, 0, kind};
    void *result = nullptr;
    if (usable >= kMmapThreshold) {
        const size_t align = huge ? kHugePage : kAlignment;
        if (usable > SIZE_MAX - align - kHugePage) {
            return Fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: size %zu bytes cannot be allocated", api, size);
        }
        const size_t mapped = ((usable + align - 1) / align) * align + (huge ? align : 0);
        void *mapping = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                             -1, 0);
        if (mapping == MAP_FAILED) {
            return Fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of memory allocating %zu bytes (%s)", api, size,
                        std::strerror(errno));
        }
        uintptr_t start = reinterpret_cast<uintptr_t>(mapping);
        start = (start + align - 1) / align * align;
        result = reinterpret_cast<void *>(start);
        if (huge) madvise(result, mapped - (start - reinterpret_cast<uintptr_t>(mapping)), MADV_HUGEPAGE);
        block.mapping = mapping;
        block.mapping_size = mapped;
    } else {
        // posix_memalign, not aligned_alloc: usable is a multiple of 32, not always of 64.
        if (posix_memalign(&result, kAlignment, usable) != 0) result = nullptr;
        if (!result) {
            return Fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of memory allocating %zu bytes", api, size);
        }
        std::memset(result, 0, usable);
    }
    {
        std::lock_guard<std::mutex> lock(g_blocks_mutex);
        Blocks()[reinterpret_cast<uintptr_t>(result)] = block;
    }
    *ptr = result;
    return ACL_SUCCESS;
}

aclError Release(void *ptr, BlockKind kind, const char *api) {
    if (!ptr) return Fail(ACL_ERROR_INVALID_PARAM, "%s: pointer is NULL, expected a block to free", api);
    Block block;
    {
        std::lock_guard<std::mutex> lock(g_blocks_mutex);
        auto it = Blocks().find(reinterpret_cast<uintptr_t>(ptr));
        if (it == Blocks().end()) {
            return Fail(ACL_ERROR_INVALID_PARAM,
                        "%s: pointer %p is not a live block (never allocated, already freed, or not its start)", api,
                        ptr);
        }
        if (it->second.kind != kind) {
            return Fail(ACL_ERROR_INVALID_PARAM, "%s: pointer %p was allocated with %s", api, ptr,
                        it->second.kind == BlockKind::kDevice ? "aclrtMalloc" : "aclrtMallocHost");
        }
        block = it->second;
        Blocks().erase(it);
    }
    if (block.mapping) {
        munmap(block.mapping, block.mapping_size);
    } else {
        std::free(ptr);
    }
    return ACL_SUCCESS;
}

}  // namespace

bool FindAllocation(const void *ptr, uint64_t *bytes_from_ptr) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(g_blocks_mutex);
    auto it = Blocks().upper_bound(address);
    if (it == Blocks().begin()) return false;
    --it;
    if (address - it->first >= it->second.usable) return false;
    *bytes_from_ptr = it->second.usable - (address - it->first);
    return true;
}

}  // namespace openaclnn

using namespace openaclnn;

extern "C" {

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
    if (!devPtr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr is NULL, expected a pointer");
    if (size == 0) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size is 0, expected a positive size");
    if (policy != ACL_MEM_MALLOC_HUGE_FIRST && policy != ACL_MEM_MALLOC_HUGE_ONLY &&
        policy != ACL_MEM_MALLOC_NORMAL_ONLY) {
        return Fail(ACL_ERROR_INVALID_PARAM,
                    "aclrtMalloc: policy is %d, expected ACL_MEM_MALLOC_HUGE_FIRST (0), HUGE_ONLY (1) or "
                    "NORMAL_ONLY (2)",
                    static_cast<int>(policy));
    }
    return Allocate(devPtr, size, policy != ACL_MEM_MALLOC_NORMAL_ONLY, BlockKind::kDevice, "aclrtMalloc");
}

aclError aclrtFree(void *devPtr) { return Release(devPtr, BlockKind::kDevice, "aclrtFree"); }

aclError aclrtMallocHost(void **hostPtr, size_t size) {
    if (!hostPtr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: hostPtr is NULL, expected a pointer");
    if (size == 0) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: size is 0, expected a positive size");
    return Allocate(hostPtr, size, false, BlockKind::kHost, "aclrtMallocHost");
}

aclError aclrtFreeHost(void *hostPtr) { return Release(hostPtr, BlockKind::kHost, "aclrtFreeHost"); }

}  // extern "C"

namespace openaclnn {

// Argument checks shared by aclrtMemcpy and aclrtMemcpyAsync.
aclError CheckMemcpy(const char *api, void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind) {
    if (static_cast<int>(kind) < ACL_MEMCPY_HOST_TO_HOST || static_cast<int>(kind) > ACL_MEMCPY_DEFAULT) {
        return Fail(ACL_ERROR_INVALID_PARAM, "%s: kind is %d, expected an aclrtMemcpyKind in [0, 4]", api,
                    static_cast<int>(kind));
    }
    if (count == 0) return ACL_SUCCESS;
    if (!dst) return Fail(ACL_ERROR_INVALID_PARAM, "%s: dst is NULL, expected a pointer", api);
    if (!src) return Fail(ACL_ERROR_INVALID_PARAM, "%s: src is NULL, expected a pointer", api);
    if (destMax < count) {
        return Fail(ACL_ERROR_RT_PARAM_INVALID, "%s: count is %zu bytes, more than destMax (%zu bytes)", api, count,
                    destMax);
    }
    return ACL_SUCCESS;
}

}  // namespace openaclnn

extern "C" {

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind) {
    const aclError status = CheckMemcpy("aclrtMemcpy", dst, destMax, src, count, kind);
    if (status != ACL_SUCCESS || count == 0) return status;
    std::memmove(dst, src, count);
    return ACL_SUCCESS;
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
    const aclError status = CheckMemcpy("aclrtMemcpyAsync", dst, destMax, src, count, kind);
    if (status != ACL_SUCCESS) return status;
    if (count == 0) return IsLiveStream(stream) ? ACL_SUCCESS : Fail(ACL_ERROR_INVALID_PARAM,
                                                                     "aclrtMemcpyAsync: stream %p is not a live stream",
                                                                     stream);
    return EnqueueTask(stream, [dst, src, count](TaskContext &) { std::memmove(dst, src, count); });
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
    if (count == 0) return ACL_SUCCESS;
    if (!devPtr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemset: devPtr is NULL, expected a pointer");
    if (maxCount < count) {
        return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemset: count is %zu bytes, more than maxCount (%zu bytes)",
                    count, maxCount);
    }
    std::memset(devPtr, value, count);
    return ACL_SUCCESS;
}

}  // extern "C"
