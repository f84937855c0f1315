// caching_allocator.cpp — free lists by size class over a raw allocator (caching_allocator.h).
#include "tensor/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace gg {

CachingAllocator::CachingAllocator(RawAllocate raw_allocate, RawFree raw_free, bool caching, size_t max_cached)
    : raw_allocate_(raw_allocate), raw_free_(raw_free), caching_(caching), max_cached_(max_cached) {}

CachingAllocator::~CachingAllocator() {
    for (const auto& [ptr, size] : in_use_) raw_free_(ptr);
    release_cached();
}

size_t CachingAllocator::size_class(size_t nbytes) {
    constexpr size_t kSmall = 512, kLarge = size_t(1) << 20;
    if (nbytes <= kLarge) return std::max<size_t>(1, (nbytes + kSmall - 1) / kSmall) * kSmall;
    // Between 2^k and 2^(k+1) the classes are 2^k · (1, 1.25, 1.5, 1.75, 2).
    const size_t quarter = std::bit_floor(nbytes) / 4;
    return (nbytes + quarter - 1) / quarter * quarter;
}

void* CachingAllocator::allocate(size_t nbytes) {
    std::lock_guard lock(mutex_);
    const size_t size = caching_ ? size_class(nbytes) : std::max<size_t>(nbytes, 1);
    void* ptr = nullptr;
    if (caching_) {
        auto it = free_.find(size);
        if (it != free_.end() && !it->second.empty()) {
            ptr = it->second.back();
            it->second.pop_back();
            stats_.bytes_cached -= size;
        }
    }
    if (!ptr) {
        // A bounded cache makes room first: the new block and what is cached would exceed the
        // bound together (a real model's logits after its layers' activations, say).
        if (caching_ && stats_.bytes_cached > 0 && size > max_cached_ - stats_.bytes_cached) release_cached();
        ptr = raw_allocate_(size);
        if (!ptr && stats_.bytes_cached > 0) {  // the cache may hold what the device lacks
            release_cached();
            ptr = raw_allocate_(size);
        }
        if (!ptr)
            throw OutOfMemory("cuda: out of memory: " + std::to_string(nbytes) + " bytes requested, " +
                              std::to_string(stats_.bytes_in_use) + " in use");
        ++stats_.device_allocations;
    }
    in_use_.emplace(ptr, size);
    stats_.bytes_in_use += size;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    return ptr;
}

void CachingAllocator::deallocate(void* ptr) {
    std::lock_guard lock(mutex_);
    const auto it = in_use_.find(ptr);
    if (it == in_use_.end()) throw std::invalid_argument("cuda allocator: freeing a block it did not hand out");
    const size_t size = it->second;
    in_use_.erase(it);
    stats_.bytes_in_use -= size;
    if (caching_ && size <= max_cached_ - stats_.bytes_cached) {
        free_[size].push_back(ptr);
        stats_.bytes_cached += size;
    } else {
        raw_free_(ptr);
    }
}

void CachingAllocator::empty_cache() {
    std::lock_guard lock(mutex_);
    release_cached();
}

void CachingAllocator::release_cached() {
    for (auto& [size, blocks] : free_)
        for (void* ptr : blocks) raw_free_(ptr);
    free_.clear();
    stats_.bytes_cached = 0;
}

MemoryStats CachingAllocator::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

bool caching_enabled_by_environment(const char* variable) {
    const char* value = std::getenv(variable);
    return !value || std::strcmp(value, "0") != 0;
}

}  // namespace gg
