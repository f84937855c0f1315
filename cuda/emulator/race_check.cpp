// race_check.cpp — the race detector for shared memory (race_check.h says what it checks) and
// the hooks through which the compiled kernels report their loads and stores.
#include "cuda/emulator/race_check.h"

#include <algorithm>
#include <cstdio>

#include "cuda/build_config.h"

namespace gg::emu {

thread_local RaceContext race_context;

void RaceChecker::start_block(int threads, dim3 block_dim) {
    ++epoch_;
    threads_ = threads;
    block_dim_ = block_dim;
    regions_used_ = 0;
    low_ = high_ = 0;
    const size_t warps = size_t(threads + warpSize - 1) / warpSize;
    if (warp_syncs_.size() < warps) warp_syncs_.resize(warps, 0);
    if (joint_.size() < warps * warpSize * warpSize) joint_.resize(warps * warpSize * warpSize, 0);
    error_.clear();
}

void RaceChecker::add_region(const void* start, size_t bytes, std::string name) {
    if (regions_used_ == regions_.size()) regions_.emplace_back();
    Region& region = regions_[regions_used_++];
    region.start = static_cast<const std::byte*>(start);
    region.bytes = bytes;
    region.name = std::move(name);
    if (region.cells.size() < bytes) region.cells.resize(bytes);
    const auto first = reinterpret_cast<uintptr_t>(start);
    low_ = regions_used_ == 1 ? first : std::min(low_, first);
    high_ = std::max(high_, first + bytes);
}

void RaceChecker::barrier() { ++epoch_; }

void RaceChecker::warp_sync(int first, unsigned lanes) {
    const uint32_t syncs = ++warp_syncs_[size_t(first) / warpSize];
    for (int l = 0; l < warpSize; ++l)
        if (lanes >> l & 1)
            for (int m = 0; m < warpSize; ++m)
                if (lanes >> m & 1) joint_[size_t(first + l) * warpSize + size_t(m)] = syncs;
}

void RaceChecker::access(int thread, const void* address, size_t bytes, Kind kind) {
    const auto a = reinterpret_cast<uintptr_t>(address);
    if (a + bytes <= low_ || a >= high_ || !error_.empty()) return;
    const bool store = kind == Kind::store || kind == Kind::cp_async;
    const Access now{epoch_, warp_syncs_[size_t(thread) / warpSize], int16_t(thread), kind};
    for (size_t r = 0; r < regions_used_; ++r) {
        Region& region = regions_[r];
        const auto start = reinterpret_cast<uintptr_t>(region.start);
        if (a + bytes <= start || a >= start + region.bytes) continue;
        const size_t first = a > start ? a - start : 0, last = std::min(a + bytes - start, region.bytes);
        for (size_t i = first; i < last; ++i) {
            Cell& cell = region.cells[i];
            if (!ordered(cell.store, thread)) return report(region, i, cell.store, thread, kind);
            if (store) {
                if (!ordered(cell.load, thread)) return report(region, i, cell.load, thread, kind);
                if (!ordered(cell.other_load, thread)) return report(region, i, cell.other_load, thread, kind);
                cell.store = now;
            } else if (cell.load.epoch != epoch_ || cell.load.thread == thread) {
                cell.load = now;
            } else if (cell.other_load.epoch != epoch_ || cell.other_load.thread == thread) {
                cell.other_load = now;
            }
        }
    }
}

std::string RaceChecker::thread_name(int thread) const {
    const unsigned t = unsigned(thread), x = block_dim_.x, y = block_dim_.y;
    char text[48];
    std::snprintf(text, sizeof text, "thread (%u,%u,%u)", t % x, t / x % y, t / (x * y));
    return text;
}

// "race in shared memory: thread (1,0,0) loads byte 0 of `value`, which thread (0,0,0)
// stored with no __syncthreads between them"
void RaceChecker::report(const Region& region, size_t offset, const Access& earlier, int thread, Kind kind) {
    static const char* const present[] = {"loads", "stores to", "reads with ldmatrix", "writes with cp.async"};
    static const char* const past[] = {"loaded", "stored", "read with ldmatrix", "wrote with cp.async"};
    error_ = "race in shared memory: " + thread_name(thread) + " " + present[int(kind)] + " byte " +
             std::to_string(offset) + " of " + region.name + ", which " + thread_name(earlier.thread) + " " +
             past[int(earlier.kind)] + " with no __syncthreads between them";
    if (earlier.thread / warpSize == thread / warpSize) error_ += " and no __syncwarp that both passed";
}

UncheckedAccesses::UncheckedAccesses() { ++race_context.unchecked; }
UncheckedAccesses::~UncheckedAccesses() { --race_context.unchecked; }

void note_ldmatrix_read(const void* address, size_t bytes) {
    RaceContext& c = race_context;
    if (c.checker != nullptr) c.checker->access(c.thread, address, bytes, RaceChecker::Kind::ldmatrix);
}

}  // namespace gg::emu

// The hooks -fsanitize=kernel-address calls for every load and store of an instrumented file
// (with --param asan-instrumentation-with-call-threshold=0, no inline shadow check): the
// kernel build's way of showing each access to a checker of one's own. Defined only where
// the emulated kernels are built that way; a build under AddressSanitizer has its own.
#if GG_EMU_RACE_HOOKS
namespace {
void load(const void* address, size_t bytes) { gg::emu::note_access(address, bytes, gg::emu::RaceChecker::Kind::load); }
void store(const void* address, size_t bytes) { gg::emu::note_access(address, bytes, gg::emu::RaceChecker::Kind::store); }
}  // namespace

extern "C" {
void __asan_load1_noabort(const void* p) { load(p, 1); }
void __asan_load2_noabort(const void* p) { load(p, 2); }
void __asan_load4_noabort(const void* p) { load(p, 4); }
void __asan_load8_noabort(const void* p) { load(p, 8); }
void __asan_load16_noabort(const void* p) { load(p, 16); }
void __asan_loadN_noabort(const void* p, size_t bytes) { load(p, bytes); }
void __asan_store1_noabort(const void* p) { store(p, 1); }
void __asan_store2_noabort(const void* p) { store(p, 2); }
void __asan_store4_noabort(const void* p) { store(p, 4); }
void __asan_store8_noabort(const void* p) { store(p, 8); }
void __asan_store16_noabort(const void* p) { store(p, 16); }
void __asan_storeN_noabort(const void* p, size_t bytes) { store(p, bytes); }
// Also called by instrumented code, for what AddressSanitizer proper would do there (unpoison a
// stack before a noreturn call, check the order of static initialisers): nothing, here.
void __asan_handle_no_return() {}
void __asan_before_dynamic_init(const char*) {}
void __asan_after_dynamic_init() {}
}
#endif
