// race_check.h — the emulator's race detector for shared memory (emulator.cpp's; kernels never
// include it).
//
// Threads of a block may touch the same byte of shared memory only in an order a barrier
// fixes: a store by one thread and a load or store by another with no __syncthreads between
// them is a race on a GPU, whatever order the emulator happened to run them in. Lanes of one
// warp may also be ordered by a __syncwarp that both took part in. Nothing else orders
// memory: shuffles, votes, ldmatrix and mma.sync are warp rendezvous, but PTX makes no promise
// that a store before them is seen by another lane after them (ldmatrix is a weak load), so
// they order nothing here either.
//
// How accesses are seen: g++ compiles the emulated kernels with -fsanitize=kernel-address and
// calls instead of inline checks (cuda/meson.build), so every load and store of a kernel calls
// one of the __asan_{load,store}N_noabort hooks with its address and size; race_check.cpp
// defines those hooks, ignores every address outside the running block's shared memory, and
// hands the rest to the Checker. The emulator itself adds the accesses no compiled load
// makes: the bytes a cp.async writes at its wait_group, the rows an ldmatrix reads.
//
// What is kept: for every byte of shared memory, the last store and up to two loads by
// different threads since the last barrier, each with the thread and how many __syncwarps
// its warp had passed. A new access is checked against them and then recorded. A barrier
// starts a new epoch, which makes every older record void at once (nothing is cleared).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/emulator/emulator.h"

namespace gg::emu {

class RaceChecker {
  public:
    enum class Kind : uint8_t { load, store, ldmatrix, cp_async };

    // A new block of `threads` threads (block_dim for naming them); no shared memory yet.
    void start_block(int threads, dim3 block_dim);
    // A region of the block's shared memory, named in errors ("`tile`", "the dynamic shared memory").
    void add_region(const void* start, size_t bytes, std::string name);
    void barrier();                             // every thread passed a __syncthreads
    void warp_sync(int first, unsigned lanes);  // these lanes of the warp starting at `first` passed a __syncwarp
    // Thread `thread` touched [address, address + bytes); outside shared memory, nothing happens.
    void access(int thread, const void* address, size_t bytes, Kind kind);

    // The first race found in this block, or empty.
    const std::string& error() const { return error_; }

  private:
    struct Access {
        uint32_t epoch = 0;  // the barrier interval it happened in; 0 never matches
        uint32_t syncs = 0;  // how many __syncwarps its warp had completed
        int16_t thread = -1;
        Kind kind = Kind::load;
    };
    struct Cell {
        Access store, load, other_load;  // other_load: a second loading thread
    };
    struct Region {
        const std::byte* start = nullptr;
        size_t bytes = 0;
        std::string name;
        std::vector<Cell> cells;  // kept from block to block; records of old epochs are void
    };

    // An access from an earlier epoch (a barrier since) or by the same thread comes before
    // this one; so does one by a lane of the same warp if both lanes passed a __syncwarp after it.
    bool ordered(const Access& earlier, int thread) const {
        if (earlier.epoch != epoch_ || earlier.thread == thread) return true;
        if (earlier.thread / warpSize != thread / warpSize) return false;
        return joint_[size_t(thread) * warpSize + size_t(earlier.thread % warpSize)] > earlier.syncs;
    }
    void report(const Region& region, size_t offset, const Access& earlier, int thread, Kind kind);
    std::string thread_name(int thread) const;

    uint32_t epoch_ = 0;
    int threads_ = 0;
    dim3 block_dim_;
    std::vector<Region> regions_;
    size_t regions_used_ = 0;
    uintptr_t low_ = 0, high_ = 0;  // the regions' span: one comparison drops most addresses
    std::vector<uint32_t> warp_syncs_;  // per warp: __syncwarps completed (never reset)
    std::vector<uint32_t> joint_;       // [thread][lane]: warp_syncs_ at the last __syncwarp both passed
    std::string error_;
};

// The checker of the block running on this OS thread and the thread running in it, while
// race checking is on (checker null otherwise): emulator.cpp sets both, the hooks read them.
struct RaceContext {
    RaceChecker* checker = nullptr;
    int thread = 0;
    int unchecked = 0;  // > 0 inside an atomic or an ldmatrix (UncheckedAccesses)
};
extern thread_local RaceContext race_context;

inline void note_access(const void* address, size_t bytes, RaceChecker::Kind kind) {
    RaceContext& c = race_context;
    if (c.checker != nullptr && c.unchecked == 0) c.checker->access(c.thread, address, bytes, kind);
}

}  // namespace gg::emu
