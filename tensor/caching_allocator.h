// caching_allocator.h — memory that is kept and reused instead of freed, for every device.
//
// A training step frees and allocates the same sizes every step, and asking the system each
// time is slow: cudaMalloc and cudaFree (which also waits for the whole device) on a GPU,
// and on the CPU fresh pages that fault on first touch, which halves the speed of an
// element-wise op. So a freed block goes to a free list of its size class, and the next
// request of that class takes it back. Plain C++ over a pair of raw functions: the CPU
// backend passes aligned host memory, the GPU build cudaMalloc/cudaFree, the emulated build
// aligned host memory, the tests counting fakes.
//
// On the GPU, handing a freed block to the next request needs no event: every kernel runs on
// the one stream of cuda/launch.h, so work queued after the free runs after the work that
// used it.
//
// A cache may be bounded (max_cached): a freed block that would take it past the bound goes
// back to the system instead, and a request it cannot serve from the cache that would take
// cached and new bytes together past the bound first returns the cached blocks. The CPU's is, because its raw allocator never fails on Linux
// (the kernel overcommits), so "empty the cache when the device is full" never happens there:
// a block of a size never asked for again (the float32 copy a model is converted from, say)
// would be held for the life of the process.
//
// Caching off (GATEDGRAD_CPU_CACHE=0, GATEDGRAD_CUDA_CACHE=0) sends every request to the raw
// functions at its exact size, so a memory checker (AddressSanitizer, compute-sanitizer)
// sees each block's true end.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

namespace gg {

// The device cannot serve a request even with the cache emptied. A std::bad_alloc that
// says how much was asked for and how much is taken.
class OutOfMemory : public std::bad_alloc {
public:
    explicit OutOfMemory(std::string what) : what_(std::move(what)) {}
    const char* what() const noexcept override { return what_.c_str(); }

private:
    std::string what_;
};

struct MemoryStats {
    size_t bytes_in_use = 0;       // in blocks handed out (rounded up to their size class)
    size_t bytes_cached = 0;       // in freed blocks kept for reuse
    size_t peak_bytes_in_use = 0;  // the most bytes_in_use has been
    size_t device_allocations = 0; // calls to the raw allocator (cache misses)
};

class CachingAllocator {
public:
    // raw_allocate returns null when the device is out of memory, and throws on any other
    // failure; raw_free throws only for a device that is already broken.
    using RawAllocate = void* (*)(size_t nbytes);
    using RawFree = void (*)(void* ptr);

    CachingAllocator(RawAllocate raw_allocate, RawFree raw_free, bool caching, size_t max_cached = SIZE_MAX);
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;
    ~CachingAllocator();  // returns every block it holds, cached or not, to raw_free

    // A block of at least nbytes (nbytes may be 0: every block has its own address). On a
    // miss that the device cannot serve, the cache is emptied and the request tried again;
    // then OutOfMemory.
    void* allocate(size_t nbytes);
    // Takes back a block from allocate. Throws std::invalid_argument on any other pointer.
    void deallocate(void* ptr);
    // Returns the cached blocks to raw_free (blocks in use stay).
    void empty_cache();

    MemoryStats stats() const;
    bool caching() const { return caching_; }

    // The size a request of nbytes is rounded up to: multiples of 512 bytes up to 1 MiB,
    // then four classes per power of two (at most a quarter wasted).
    static size_t size_class(size_t nbytes);

private:
    void release_cached();  // with mutex_ held

    RawAllocate raw_allocate_;
    RawFree raw_free_;
    bool caching_;
    size_t max_cached_;
    mutable std::mutex mutex_;
    std::unordered_map<void*, size_t> in_use_;                // block → its size
    std::unordered_map<size_t, std::vector<void*>> free_;    // size class → cached blocks
    MemoryStats stats_;
};

// Whether the environment leaves caching on: everything but `variable`=0.
bool caching_enabled_by_environment(const char* variable);

namespace cuda {  // the names the CUDA runtime has always used
using gg::CachingAllocator;
using gg::MemoryStats;
using gg::OutOfMemory;
}  // namespace cuda

}  // namespace gg
