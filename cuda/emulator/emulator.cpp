// emulator.cpp — the scheduler behind emulator.h: blocks on OpenMP threads, each block's
// threads as fibers that switch only where CUDA threads wait for one another.
//
// Fibers switch with _setjmp/_longjmp, not swapcontext: swapcontext also saves the signal
// mask, a system call each way (about 9 µs a round trip where this was measured, against
// 0.1 µs). makecontext/setcontext are used once per fiber, to start it on its own stack.

// glibc's fortified longjmp refuses to jump onto another stack, which is what fibers do.
#undef _FORTIFY_SOURCE

#include "cuda/emulator/emulator.h"

#include "cuda/emulator/race_check.h"

#include "cuda/build_config.h"

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define GG_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GG_EMU_ASAN 1
#endif
#endif
#ifdef GG_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace gg::emu {
namespace {

constexpr size_t kMaxStaticShared = 48 * 1024;  // what nvcc lets a kernel declare __shared__
constexpr size_t kMaxShared = 227 * 1024;       // static + dynamic per block on H100/H200
constexpr unsigned kFullMask = 0xffffffff;

std::string hex(unsigned mask) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", mask);
    return text;
}
std::string dims(uint3 v) {
    char text[40];
    std::snprintf(text, sizeof text, "(%u,%u,%u)", v.x, v.y, v.z);
    return text;
}
// "file.cpp:12" without the directories, which depend on where the build ran.
std::string where(const SourceLocation& site) {
    const std::string file = site.file_name();
    return file.substr(file.find_last_of('/') + 1) + ":" + std::to_string(site.line());
}
bool same_site(const SourceLocation& a, const SourceLocation& b) {
    return a.line() == b.line() && a.column() == b.column() && std::strcmp(a.file_name(), b.file_name()) == 0;
}

// A fiber stack with one inaccessible page below it, so that an overflow faults (SIGSEGV)
// instead of silently overwriting the neighbouring stack. 64 KiB unless GG_EMU_STACK_KB says.
class Stack {
  public:
    Stack() : guard_(size_t(sysconf(_SC_PAGESIZE))), bytes_(default_bytes()) {
        base_ = mmap(nullptr, guard_ + bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (base_ == MAP_FAILED)
            throw std::runtime_error("cannot map a fiber stack of " + std::to_string(bytes_ / 1024) + " KiB");
        mprotect(base_, guard_, PROT_NONE);
    }
    ~Stack() { munmap(base_, guard_ + bytes_); }
    Stack(const Stack&) = delete;
    Stack& operator=(const Stack&) = delete;
    void* bottom() const { return static_cast<char*>(base_) + guard_; }
    size_t size() const { return bytes_; }

  private:
    static size_t default_bytes() {
        static const size_t kib = [] {
            const char* env = std::getenv("GG_EMU_STACK_KB");
            return env ? std::max(16L, std::atol(env)) : 64L;
        }();
        return kib * 1024;
    }
    size_t guard_, bytes_;
    void* base_;
};

enum class State { ready, at_barrier, at_warp, returned };

// One thread of the running block. A fiber keeps its stack and its place in the block
// (linear id x + y·X + z·X·Y) for life, and serves block after block.
struct Fiber : ThreadState {
    int id = 0;
    Stack stack;
    bool started = false;  // context is valid once the fiber has run and switched out
    jmp_buf context;
    State state = State::returned;
    // The barrier or collective it waits at, what it offers there and what it gets back.
    const char* op = "";
    SourceLocation site;
    unsigned mask = 0;
    int source = 0;  // shuffles: the lane whose value this lane receives
    uint64_t value = 0, result = 0;
    // cp.async copies in flight (async_copy.h): the bytes read at issue, where they go, and
    // the group they belong to (== committed: not yet in a group).
    struct AsyncCopy {
        void* dst;
        std::array<std::byte, 16> bytes;
        int group;
    };
    std::vector<AsyncCopy> copies;
    int committed = 0;  // groups committed so far
};

// Shared memory is plain heap memory, one allocation per array, so that AddressSanitizer
// catches an index past its end.
struct AlignedDelete {
    size_t align;
    void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t(align)); }
};
using Buffer = std::unique_ptr<std::byte, AlignedDelete>;
// Filled with 0xFF bytes: a NaN as float or double, -1 as an integer, so that reading
// shared memory no thread wrote shows up in the results.
Buffer poisoned_buffer(size_t bytes, size_t align) {
    Buffer buffer(static_cast<std::byte*>(::operator new(bytes, std::align_val_t(align))), AlignedDelete{align});
    std::memset(buffer.get(), 0xFF, bytes);
    return buffer;
}

// The block now running on an OS thread.
struct Block {
    std::function<void()> body;  // the block's own copy of the kernel and its arguments
    int threads = 0;
    uint3 index{};
    Buffer dynamic;
    size_t dynamic_bytes = 0, static_bytes = 0;
    struct SharedArray {
        const void* declared_at;
        Buffer buffer;
        size_t bytes;
    };
    RaceChecker* race = nullptr;  // while race checking is on
    std::vector<SharedArray> shared;  // GG_SHARED arrays by declaration
    std::string error;                                   // the first failure; ends the block
    bool aborting = false;
};

// Thrown into waiting fibers when their block fails, so that each unwinds its own stack.
struct Aborted {};

// Per OS thread: the fibers, reused from block to block, and the scheduler's own context.
struct Worker {
    std::vector<std::unique_ptr<Fiber>> fibers;
    jmp_buf scheduler;
    Fiber* running = nullptr;
    Block* block = nullptr;
    const void* os_stack_bottom = nullptr;  // told to AddressSanitizer when switching back
    size_t os_stack_size = 0;
    RaceChecker race;  // its records are kept from block to block (race_check.h)
};
thread_local Worker worker;

// The lane a shuffle reads, as PTX's shfl.sync defines it: lanes work in segments of
// `width`; a lane whose source falls outside its segment (or, for xor, in a later one)
// reads its own value.
int source_lane(WarpOp op, int lane, int arg, int width) {
    const int segment_first = lane & ~(width - 1), segment_last = segment_first + width - 1, b = arg & 31;
    switch (op) {
        case WarpOp::shfl: return segment_first + (b & (width - 1));
        case WarpOp::shfl_up: return lane - b >= segment_first ? lane - b : lane;
        case WarpOp::shfl_down: return lane + b <= segment_last ? lane + b : lane;
        case WarpOp::shfl_xor: return (lane ^ b) <= segment_last ? lane ^ b : lane;
        default: return lane;
    }
}

const char* op_name(WarpOp op) {
    static const char* const names[] = {"__syncwarp",  "__activemask", "__ballot_sync",  "__all_sync",
                                        "__any_sync",  "mma.sync",     "ldmatrix",       "__shfl_sync",
                                        "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"};
    return names[int(op)];
}

// The lanes of the warp starting at thread `first` that exist: a last warp may be partial.
unsigned existing_lanes(int first, int threads) {
    return threads - first >= warpSize ? kFullMask : (1u << (threads - first)) - 1;
}
// The lanes of that warp that have not returned.
unsigned running_lanes(const Worker& w, int first) {
    unsigned lanes = 0;
    for (int l = 0; l < warpSize && first + l < w.block->threads; ++l)
        if (w.fibers[first + l]->state != State::returned) lanes |= 1u << l;
    return lanes;
}

// AddressSanitizer tracks one stack per thread; it must be told when execution moves to
// another, or it reports the other stack's frames as errors.
void start_switch([[maybe_unused]] void** fake_stack, [[maybe_unused]] const void* bottom,
                  [[maybe_unused]] size_t size) {
#ifdef GG_EMU_ASAN
    __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#endif
}
void finish_switch([[maybe_unused]] void* fake_stack, [[maybe_unused]] const void** old_bottom,
                   [[maybe_unused]] size_t* old_size) {
#ifdef GG_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake_stack, old_bottom, old_size);
#endif
}

[[noreturn]] void fiber_main();

// Scheduler → fiber f; returns when f switches back.
void resume(Worker& w, Fiber& f) {
    w.running = &f;
    current_thread = &f;
    race_context.thread = f.id;
    void* fake_stack = nullptr;
    start_switch(&fake_stack, f.stack.bottom(), f.stack.size());
    if (_setjmp(w.scheduler) == 0) {
        if (f.started) _longjmp(f.context, 1);
        f.started = true;
        ucontext_t start;
        getcontext(&start);
        start.uc_stack = {f.stack.bottom(), 0, f.stack.size()};
        start.uc_link = nullptr;
        makecontext(&start, fiber_main, 0);
        setcontext(&start);
    }
    finish_switch(fake_stack, nullptr, nullptr);
}

// Fiber f → scheduler; returns when the scheduler resumes f.
void suspend(Worker& w, Fiber& f) {
    void* fake_stack = nullptr;
    start_switch(&fake_stack, w.os_stack_bottom, w.os_stack_size);
    if (_setjmp(f.context) == 0) _longjmp(w.scheduler, 1);
    finish_switch(fake_stack, nullptr, nullptr);
}

void run_thread(Worker& w, Fiber& f) {
    Block& b = *w.block;
    if (b.aborting) return;
    try {
        b.body();
    } catch (const Aborted&) {
    } catch (const std::exception& e) {
        if (b.error.empty()) b.error = "block " + dims(b.index) + " thread " + dims(f.thread_idx) + ": " + e.what();
    } catch (...) {
        if (b.error.empty()) b.error = "block " + dims(b.index) + " thread " + dims(f.thread_idx) + ": unknown exception";
    }
}

// Every fiber runs this loop for life: one kernel thread per block it serves. Exceptions
// stop in run_thread: none may unwind past the bottom of a fiber's stack.
[[noreturn]] void fiber_main() {
    Worker& w = worker;
    finish_switch(nullptr, &w.os_stack_bottom, &w.os_stack_size);
    for (;;) {
        Fiber& f = *w.running;
        run_thread(w, f);
        f.state = State::returned;
        suspend(w, f);
    }
}

// Switches out until the barrier or collective the fiber waits at lets it go.
void wait(Worker& w, Fiber& f, State at) {
    f.state = at;
    suspend(w, f);
    if (w.block->aborting) throw Aborted{};
}

std::string what_it_does(const Fiber& f) {
    switch (f.state) {
        case State::returned: return "returned";
        case State::at_barrier: return "wait at " + std::string(f.op) + " (" + where(f.site) + ")";
        case State::at_warp: return "wait at " + std::string(f.op) + " (" + where(f.site) + ", mask " + hex(f.mask) + ")";
        case State::ready: break;
    }
    return "run";
}

// "threads 0..31 wait at __syncthreads (k.cu:12), thread 32 returned": runs of consecutive
// threads doing the same thing, the first eight runs.
std::string who_waits_where(const Worker& w, int threads) {
    std::string out;
    for (int t = 0, runs = 0; t < threads; ++runs) {
        if (runs == 8) return out + ", ...";
        const std::string what = what_it_does(*w.fibers[t]);
        int end = t + 1;
        while (end < threads && what_it_does(*w.fibers[end]) == what) ++end;
        out += (out.empty() ? "" : ", ") +
               (end - t == 1 ? "thread " + std::to_string(t) : "threads " + std::to_string(t) + ".." + std::to_string(end - 1)) +
               " " + what;
        t = end;
    }
    return out;
}

// Called when no fiber can run. Lanes at an __activemask go first: no other lane of their
// warp can reach it now, so each gets the lanes that did. Else, if every thread waits at the
// same barrier, opens it; else the block can never finish, and the error says who waits where.
void unblock(Worker& w, Block& b) {
    bool released = false;
    for (int t = 0; t < b.threads; ++t) {
        const Fiber& f = *w.fibers[t];
        if (f.state != State::at_warp || f.op != op_name(WarpOp::active)) continue;
        const int first = t - t % warpSize;
        unsigned here = 0;
        for (int l = 0; first + l < b.threads && l < warpSize; ++l) {
            const Fiber& other = *w.fibers[first + l];
            if (other.state == State::at_warp && other.op == f.op && same_site(other.site, f.site)) here |= 1u << l;
        }
        for (int l = 0; l < warpSize; ++l)
            if (here >> l & 1) {
                w.fibers[first + l]->result = here;
                w.fibers[first + l]->state = State::ready;
            }
        released = true;
    }
    if (released) return;
    const Fiber& first = *w.fibers[0];
    bool all_at_barrier = true, all_alike = true;
    int passed = 0;
    for (int t = 0; t < b.threads; ++t) {
        const Fiber& f = *w.fibers[t];
        all_at_barrier &= f.state == State::at_barrier || f.state == State::returned;
        all_alike &= f.state == State::at_barrier && same_site(f.site, first.site);
        // value is the barrier's predicate only for a fiber waiting at it; a returned fiber's
        // still holds whatever its last warp collective exchanged.
        if (f.state == State::at_barrier) passed += int(f.value);
    }
    if (!all_at_barrier || !all_alike) {
        b.error = "block " + dims(b.index) + ": " + (all_at_barrier ? "divergent __syncthreads: " : "deadlock: ") +
                  who_waits_where(w, b.threads);
        return;
    }
    for (int t = 0; t < b.threads; ++t) {
        w.fibers[t]->result = uint64_t(passed);
        w.fibers[t]->state = State::ready;
    }
    if (b.race) b.race->barrier();
}

// splitmix64: a small, good-enough generator for the shuffled schedule.
uint64_t next_random(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
}

// The order of this turn: by linear id, its reverse, or a fresh random permutation.
void order_turn(std::vector<int>& order, const Options& options, uint64_t& random) {
    if (options.schedule != Schedule::shuffle) return;
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[next_random(random) % i]);
}

// Runs the threads of one block in turns, each thread until it returns or waits, turn after
// turn, until all have returned or the block has failed; options.schedule says in which order.
std::string run_block(Worker& w, const std::function<void()>& body, uint3 index, dim3 grid, dim3 block_dim,
                      size_t dynamic_bytes, const Options& options) {
    Block b;
    b.body = body;
    b.index = index;
    b.threads = int(block_dim.x * block_dim.y * block_dim.z);
    b.dynamic_bytes = dynamic_bytes;
    if (dynamic_bytes > 0) b.dynamic = poisoned_buffer(dynamic_bytes, 16);
    if (options.race_check) {
        b.race = &w.race;
        b.race->start_block(b.threads, block_dim);
        if (b.dynamic) b.race->add_region(b.dynamic.get(), dynamic_bytes, "the dynamic shared memory");
        race_context.checker = b.race;
    }
    w.block = &b;
    while (w.fibers.size() < size_t(b.threads)) {
        w.fibers.push_back(std::make_unique<Fiber>());
        w.fibers.back()->id = int(w.fibers.size()) - 1;
    }
    for (int t = 0; t < b.threads; ++t) {
        Fiber& f = *w.fibers[t];
        f.thread_idx = {t % block_dim.x, t / block_dim.x % block_dim.y, t / (block_dim.x * block_dim.y)};
        f.block_idx = index;
        f.block_dim = block_dim;
        f.grid_dim = grid;
        f.state = State::ready;
        f.value = 0;
        f.copies.clear();
        f.committed = 0;
    }
    std::vector<int> order(size_t(b.threads));
    std::iota(order.begin(), order.end(), 0);
    if (options.schedule == Schedule::reverse) std::reverse(order.begin(), order.end());
    const uint64_t block_number = (uint64_t(index.z) * grid.y + index.y) * grid.x + index.x;
    uint64_t random = options.seed ^ block_number * 0xd1b54a32d192ed03;
    bool finished = false;
    while (!finished && b.error.empty()) {
        bool ran = false;
        order_turn(order, options, random);
        for (int i = 0; i < b.threads && b.error.empty(); ++i)
            if (Fiber& f = *w.fibers[order[size_t(i)]]; f.state == State::ready) {
                resume(w, f);
                ran = true;
                if (b.race && !b.race->error().empty() && b.error.empty())
                    b.error = "block " + dims(b.index) + ": " + b.race->error();
            }
        finished = true;
        for (int t = 0; t < b.threads; ++t) finished &= w.fibers[t]->state == State::returned;
        if (!ran && !finished && b.error.empty()) unblock(w, b);
    }
    race_context.checker = nullptr;
    if (!b.error.empty()) {  // every fiber still inside the kernel unwinds from where it waits
        b.aborting = true;
        for (int t = 0; t < b.threads; ++t)
            while (w.fibers[t]->state != State::returned) resume(w, *w.fibers[t]);
    }
    w.block = nullptr;
    current_thread = nullptr;
    return b.error;
}

[[noreturn]] void launch_error(const char* name, const std::string& what) {
    throw std::runtime_error("cuda emulator: " + std::string(name) + ": " + what);
}

void check_configuration(const char* name, dim3 grid, dim3 block, size_t shared_bytes) {
    const uint64_t threads = uint64_t(block.x) * block.y * block.z;
    if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64)
        launch_error(name, "block " + dims(block) + " has " + std::to_string(threads) +
                               " threads; a block has 1 to 1024, at most (1024,1024,64)");
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
        launch_error(name, "grid " + dims(grid) + " is empty or larger than (2147483647,65535,65535)");
    if (shared_bytes > kMaxShared)
        launch_error(name, std::to_string(shared_bytes) + " B of dynamic shared memory, more than the " +
                               std::to_string(kMaxShared) + " B a block may have");
}

}  // namespace

Options& options() {
    static Options from_environment = [] {
        Options o;
        const auto refuse = [](const char* variable, const char* value, const char* allowed) {
            throw std::runtime_error(std::string("cuda emulator: ") + variable + "=" + value + "; it takes " + allowed);
        };
        if (const char* schedule = std::getenv("GATEDGRAD_EMU_SCHEDULE"); schedule && *schedule) {
            const std::string s = schedule;
            if (s == "order") o.schedule = Schedule::order;
            else if (s == "reverse") o.schedule = Schedule::reverse;
            else if (s == "shuffle") o.schedule = Schedule::shuffle;
            else refuse("GATEDGRAD_EMU_SCHEDULE", schedule, "order, reverse or shuffle");
        }
        if (const char* seed = std::getenv("GATEDGRAD_EMU_SEED"); seed && *seed) {
            char* end = nullptr;
            o.seed = std::strtoull(seed, &end, 10);
            if (*end != '\0') refuse("GATEDGRAD_EMU_SEED", seed, "a non-negative integer");
        }
        if (const char* check = std::getenv("GATEDGRAD_EMU_RACECHECK"); check && *check) {
            const std::string c = check;
            if (c != "0" && c != "1") refuse("GATEDGRAD_EMU_RACECHECK", check, "0 or 1");
            o.race_check = c == "1";
        }
        return o;
    }();
    return from_environment;
}

bool race_check_sees_kernel_accesses() { return GG_EMU_RACE_HOOKS != 0; }

void run_grid(const char* name, dim3 grid, dim3 block, size_t shared_bytes, const std::function<void()>& thread_body) {
    check_configuration(name, grid, block, shared_bytes);
    const Options run_options = options();
    const int64_t blocks = int64_t(grid.x) * grid.y * grid.z;
    std::mutex mutex;
    std::string first_error;
    std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic) if (blocks > 1)
    for (int64_t i = 0; i < blocks; ++i) {
        if (failed.load(std::memory_order_relaxed)) continue;
        const uint3 index{unsigned(i % grid.x), unsigned(i / grid.x % grid.y), unsigned(i / (int64_t(grid.x) * grid.y))};
        std::string error;
        try {
            error = run_block(worker, thread_body, index, grid, block, shared_bytes, run_options);
        } catch (const std::exception& e) {
            error = e.what();
        }
        if (!error.empty()) {
            const std::lock_guard lock(mutex);
            if (first_error.empty()) first_error = error;
            failed = true;
        }
    }
    if (failed) launch_error(name, first_error);
}

void* block_shared(const void* site, const char* name, size_t bytes, size_t align) {
    Block& b = *worker.block;
    for (const Block::SharedArray& array : b.shared)
        if (array.declared_at == site) return array.buffer.get();
    if (b.static_bytes + bytes > kMaxStaticShared)
        throw std::runtime_error("GG_SHARED arrays of " + std::to_string(b.static_bytes + bytes) + " B, more than the " +
                                 std::to_string(kMaxStaticShared) + " B a kernel may declare; use GG_DYNAMIC_SHARED");
    if (b.static_bytes + bytes + b.dynamic_bytes > kMaxShared)
        throw std::runtime_error("shared memory of " + std::to_string(b.static_bytes + bytes) + " B static + " +
                                 std::to_string(b.dynamic_bytes) + " B dynamic, more than the " +
                                 std::to_string(kMaxShared) + " B a block may have");
    b.static_bytes += bytes;
    b.shared.push_back({site, poisoned_buffer(bytes, align), bytes});
    if (b.race) b.race->add_region(b.shared.back().buffer.get(), bytes, std::string("`") + name + "`");
    return b.shared.back().buffer.get();
}

void* dynamic_shared() {
    Block& b = *worker.block;
    if (!b.dynamic) throw std::runtime_error("GG_DYNAMIC_SHARED, but the launch gave 0 B of dynamic shared memory");
    return b.dynamic.get();
}

void check_aligned(const void* address, size_t bytes) {
    const size_t past = reinterpret_cast<uintptr_t>(address) % bytes;
    if (past != 0)
        throw std::runtime_error("misaligned address: a " + std::to_string(bytes) + "-byte access " +
                                 std::to_string(past) + " B past a multiple of " + std::to_string(bytes));
}

void async_copy(void* shared_dst, const void* global_src, int src_bytes, const SourceLocation& site) {
    const auto refuse = [&](const std::string& what) {
        throw std::runtime_error("cp.async (" + where(site) + "): " + what);
    };
    const auto check_aligned = [&](const char* space, const void* address) {
        if (const size_t past = reinterpret_cast<uintptr_t>(address) % 16; past != 0)
            refuse(std::string(space) + " address " + std::to_string(past) +
                   " B past a multiple of 16; a 16-byte copy needs both addresses aligned");
    };
    check_aligned("shared", shared_dst);
    check_aligned("global", global_src);
    // The GPU reads the destination as a shared-memory address; anything else lands nowhere
    // the kernel meant.
    const Block& b = *worker.block;
    const auto address = reinterpret_cast<uintptr_t>(shared_dst);
    const auto holds = [&](const std::byte* start, size_t bytes) {
        const auto first = reinterpret_cast<uintptr_t>(start);
        return start != nullptr && address >= first && address + 16 <= first + bytes;
    };
    bool in_shared = holds(b.dynamic.get(), b.dynamic_bytes);
    for (const Block::SharedArray& array : b.shared) in_shared = in_shared || holds(array.buffer.get(), array.bytes);
    if (!in_shared) refuse("the destination is not 16 bytes of this block's shared memory");
    if (src_bytes < 0 || src_bytes > 16) refuse("src_bytes " + std::to_string(src_bytes) + " is not from 0 to 16");
    Fiber& f = *worker.running;
    Fiber::AsyncCopy copy{shared_dst, {}, f.committed};  // zeros past src_bytes
    std::memcpy(copy.bytes.data(), global_src, size_t(src_bytes));
    f.copies.push_back(copy);
}

void async_commit() { ++worker.running->committed; }

void async_wait(int pending) {
    Fiber& f = *worker.running;
    const auto landed = [&](const Fiber::AsyncCopy& copy) { return copy.group < f.committed - pending; };
    for (const Fiber::AsyncCopy& copy : f.copies)
        if (landed(copy)) {
            note_access(copy.dst, copy.bytes.size(), RaceChecker::Kind::cp_async);  // the copying thread's store
            std::memcpy(copy.dst, copy.bytes.data(), copy.bytes.size());
        }
    std::erase_if(f.copies, landed);
}

int block_barrier(const char* op, int predicate, const SourceLocation& site) {
    Worker& w = worker;
    Fiber& f = *w.running;
    f.op = op;
    f.site = site;
    f.value = predicate != 0;
    wait(w, f, State::at_barrier);
    return int(f.result);
}

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int lane_arg, int width,
                         const SourceLocation& site) {
    Worker& w = worker;
    Fiber& me = *w.running;
    const int lane = me.id % warpSize, first = me.id - lane;
    if (op == WarpOp::active) mask = running_lanes(w, first);
    const unsigned group = mask & existing_lanes(first, w.block->threads);
    const auto error = [&](const std::string& what) {
        return std::runtime_error(std::string(op_name(op)) + " (" + where(site) + "): " + what);
    };
    if (!(mask >> lane & 1)) throw error("lane " + std::to_string(lane) + " is not in its mask " + hex(mask));
    me.op = op_name(op);
    me.site = site;
    me.mask = mask;
    me.value = value;
    me.source = lane;
    if (op >= WarpOp::shfl) {  // a shuffle
        if (width < 1 || width > warpSize || (width & (width - 1)) != 0)
            throw error("width " + std::to_string(width) + " is not a power of two from 1 to 32");
        me.source = source_lane(op, lane, lane_arg, width);
        if (!(group >> me.source & 1))
            throw error("lane " + std::to_string(lane) + " reads lane " + std::to_string(me.source) +
                        ", which is not in mask " + hex(mask) + " or not in the block");
    }
    bool all_here = true;
    for (int l = 0; l < warpSize; ++l) {
        if (!(group >> l & 1) || l == lane) continue;
        const Fiber& other = *w.fibers[first + l];
        if (other.state == State::returned)
            throw error("lane " + std::to_string(l) + " of mask " + hex(mask) + " has returned");
        all_here &= other.state == State::at_warp && same_site(other.site, site) &&
                    (other.mask == mask || op == WarpOp::active);
    }
    if (!all_here) {
        wait(w, me, State::at_warp);
        return me.result;
    }
    // The last lane to arrive completes the exchange for the whole group.
    unsigned votes = 0;
    for (int l = 0; l < warpSize; ++l)
        if (group >> l & 1 && w.fibers[first + l]->value != 0) votes |= 1u << l;
    for (int l = 0; l < warpSize; ++l) {
        if (!(group >> l & 1)) continue;
        Fiber& f = *w.fibers[first + l];
        switch (op) {
            case WarpOp::active: f.result = group; break;
            case WarpOp::ballot: f.result = votes; break;
            case WarpOp::all: f.result = votes == group; break;
            case WarpOp::any: f.result = votes != 0; break;
            case WarpOp::mma:
            case WarpOp::ldmatrix: f.result = w.fibers[first]->value; break;
            default: f.result = w.fibers[first + f.source]->value;
        }
        f.state = State::ready;
    }
    if (op == WarpOp::sync && w.block->race) w.block->race->warp_sync(first, group);
    return me.result;
}

}  // namespace gg::emu
