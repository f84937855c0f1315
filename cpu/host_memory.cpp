// host_memory.cpp — see host_memory.h.
#include "cpu/host_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace gg {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

// The blocks that have a mapping of their own, and its length: munmap needs it back.
std::mutex mappings_mutex;
std::unordered_map<void*, size_t>& mappings() {
    static auto* blocks = new std::unordered_map<void*, size_t>;  // never destroyed: frees run at exit
    return *blocks;
}

// bytes (a multiple of 2 MiB) at an address that is a multiple of 2 MiB: map 2 MiB more than
// asked, then give back the ends around the aligned middle.
void* map_aligned(size_t bytes) {
    void* raw = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const auto start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t end = start + bytes + kHugePage;
    if (end > aligned + bytes) munmap(reinterpret_cast<void*>(aligned + bytes), end - (aligned + bytes));
    void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);  // advice only: the block works the same if refused
#endif
    return p;
}

}  // namespace

void* host_allocate(size_t nbytes) {
    if (!kHostMappings || nbytes < kHugeBlock) return std::aligned_alloc(64, std::max<size_t>(64, (nbytes + 63) / 64 * 64));
    if (nbytes > SIZE_MAX / 2) return nullptr;  // no system has it, and rounding up must not wrap
    const size_t bytes = (nbytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = map_aligned(bytes);
    if (p) {
        const std::lock_guard lock(mappings_mutex);
        mappings().emplace(p, bytes);
    }
    return p;
}

void host_free(void* p) {
    if (!p) return;
    if (kHostMappings) {
        std::unique_lock lock(mappings_mutex);
        const auto it = mappings().find(p);
        if (it != mappings().end()) {
            const size_t bytes = it->second;
            mappings().erase(it);
            lock.unlock();
            munmap(p, bytes);
            return;
        }
    }
    std::free(p);
}

}  // namespace gg
