// emulator.h — the CUDA execution model on the CPU, for .cu files compiled by g++.
//
// A kernel runs as a grid of blocks; a block is up to 1024 threads that share memory and meet
// at barriers (__syncthreads); a warp is 32 consecutive threads of a block that trade
// registers (shuffles, ballots). Here each block runs on one OS thread, and each of its
// threads is a fiber: a function with its own small stack that runs until it must wait for
// others, then hands the OS thread back to the block's scheduler (emulator.cpp). Blocks run
// side by side on OpenMP threads, so atomics are real atomics.
//
// Kernel sources do not include this file: they include cuda/launch.h, which picks it or the
// CUDA runtime.
#pragma once
#ifdef __CUDACC__
#error "emulator.h is the g++ stand-in for the CUDA runtime; under nvcc include cuda/launch.h"
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <functional>
#include <source_location>
#include <tuple>
#include <type_traits>

// CUDA's function and variable qualifiers: on the CPU everything is host code.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return {x, y, z}; }
};

constexpr int warpSize = 32;

namespace gg::emu {

// Where a barrier or collective was called, for its error messages: std::source_location,
// or, where the standard library has none for the compiler (libstdc++ 12 under clang 14, the
// compiler of the sanitizer build), the same facts from the builtins it is made of.
#ifdef __cpp_lib_source_location
using SourceLocation = std::source_location;
#else
struct SourceLocation {
    static constexpr SourceLocation current(const char* file = __builtin_FILE(),
                                            const char* function = __builtin_FUNCTION(),
                                            unsigned line = __builtin_LINE(), unsigned column = __builtin_COLUMN()) {
        return SourceLocation{file, function, line, column};
    }
    constexpr const char* file_name() const { return file_; }
    constexpr const char* function_name() const { return function_; }
    constexpr unsigned line() const { return line_; }
    constexpr unsigned column() const { return column_; }

    const char* file_ = "";
    const char* function_ = "";
    unsigned line_ = 0, column_ = 0;
};
#endif

// What a running kernel thread can ask about itself. The scheduler points current_thread at
// the fiber it switches to, so the macros below always read the thread that is running.
struct ThreadState {
    uint3 thread_idx, block_idx;
    dim3 block_dim, grid_dim;
};
inline constinit thread_local const ThreadState* current_thread = nullptr;

// How strictly a launch runs, read from the environment at the first launch; tests may change
// it between launches.
//   GATEDGRAD_EMU_SCHEDULE  the order a block's threads take turns in, each until it waits:
//                           `order` (linear id, the default), `reverse`, or `shuffle` (a new
//                           random order every turn, from GATEDGRAD_EMU_SEED and the block's
//                           index, so the same seed runs the same way). A missing barrier whose
//                           writer runs first goes unseen in one order and not in another.
//   GATEDGRAD_EMU_RACECHECK  1: the race detector for shared memory (race_check.h); 0: off.
enum class Schedule { order, reverse, shuffle };
struct Options {
    Schedule schedule = Schedule::order;
    uint64_t seed = 1;
    bool race_check = false;
};
Options& options();
// Whether the kernels' own loads and stores reach the race detector (the g++ build; under
// AddressSanitizer it sees only the emulator's own accesses: cp.async, ldmatrix).
bool race_check_sees_kernel_accesses();

// Runs every block of the grid and returns when all have finished; an error in any thread
// (a thrown exception, a divergent barrier, a deadlocked warp) ends the launch and is thrown
// here as std::runtime_error("cuda emulator: <name>: ...").
void run_grid(const char* name, dim3 grid, dim3 block, size_t shared_bytes, const std::function<void()>& thread_body);

template <class Kernel, class... Args>
void launch(const char* name, Kernel kernel, dim3 grid, dim3 block, size_t shared_bytes, Args... args) {
    // Each block copies this closure, and with it the arguments; each thread then gets its own
    // by-value parameters from the call, as on a GPU.
    run_grid(name, grid, block, shared_bytes, [kernel, params = std::tuple<Args...>(args...)] {
        std::apply(kernel, params);
    });
}

// Shared memory of the running block: the array `name` declared at `site` (allocated and
// filled with 0xFF bytes by the first thread that reaches it), or the launch's dynamic region.
void* block_shared(const void* site, const char* name, size_t bytes, size_t align);
void* dynamic_shared();

template <class T>
T& block_shared(const void* site, const char* name) {
    static_assert(std::is_trivially_copyable_v<T>, "shared memory holds plain data, never constructed");
    return *static_cast<T*>(block_shared(site, name, sizeof(T), std::max<size_t>(alignof(T), 16)));
}

// The race detector leaves out the accesses made while one of these lives: an atomic's (atomics
// on one address never race with one another) and ldmatrix's, which reports its own reads as
// ldmatrix reads (note_ldmatrix_read).
struct UncheckedAccesses {
    UncheckedAccesses();
    ~UncheckedAccesses();
    UncheckedAccesses(const UncheckedAccesses&) = delete;
    UncheckedAccesses& operator=(const UncheckedAccesses&) = delete;
};
void note_ldmatrix_read(const void* address, size_t bytes);
template <class T>
T* dynamic_shared() {
    return static_cast<T*>(dynamic_shared());
}

// A GPU faults ("misaligned address") on a vector access whose address is not a multiple of
// its size, where the CPU reads on regardless: the accesses kernels mark with
// GG_CHECK_ALIGNED (cuda/launch.h) throw here instead.
void check_aligned(const void* address, size_t bytes);

// A block-wide barrier: returns how many threads passed a non-zero predicate.
int block_barrier(const char* op, int predicate, const SourceLocation& site);

// Every warp collective is one exchange: each lane of `mask` offers a 64-bit value and
// receives the value of its source lane (shuffles), the warp's vote (ballot, all, any), the
// lanes that arrived (__activemask, whose mask is every lane still running) or lane 0's value
// (the mma.sync and ldmatrix of mma.h, which pass the address of lane 0's exchange table).
enum class WarpOp {
    sync, active, ballot, all, any, mma, ldmatrix,
    shfl, shfl_up, shfl_down, shfl_xor  // shuffles last
};
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int lane_arg, int width,
                         const SourceLocation& site);

template <class T>
T shuffle(WarpOp op, unsigned mask, T var, int lane_arg, int width, const SourceLocation& site) {
    static_assert(std::is_arithmetic_v<T> && sizeof(T) <= 8, "shuffles move one scalar of at most 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &var, sizeof(T));
    bits = warp_collective(op, mask, bits, lane_arg, width, site);
    std::memcpy(&var, &bits, sizeof(T));
    return var;
}

template <class T, class... U>
concept one_of = (std::same_as<T, U> || ...);

// Read-modify-write through a compare-and-swap loop, for the atomics std::atomic_ref lacks.
template <class T, class Op>
T atomic_update(T* address, Op op) {
    std::atomic_ref<T> cell(*address);
    T old = cell.load();
    while (!cell.compare_exchange_weak(old, op(old))) {
    }
    return old;
}

}  // namespace gg::emu

#define threadIdx (::gg::emu::current_thread->thread_idx)
#define blockIdx (::gg::emu::current_thread->block_idx)
#define blockDim (::gg::emu::current_thread->block_dim)
#define gridDim (::gg::emu::current_thread->grid_dim)

// Barriers. The default argument records the call site, so that threads waiting at two
// different __syncthreads are caught instead of silently passing each other.
inline void __syncthreads(gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    gg::emu::block_barrier("__syncthreads", 0, site);
}
inline int __syncthreads_count(int predicate, gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    return gg::emu::block_barrier("__syncthreads_count", predicate, site);
}
inline int __syncthreads_and(int predicate, gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    const dim3 b = blockDim;
    return gg::emu::block_barrier("__syncthreads_and", predicate, site) == int(b.x * b.y * b.z);
}
inline int __syncthreads_or(int predicate, gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    return gg::emu::block_barrier("__syncthreads_or", predicate, site) > 0;
}

// Warp collectives. A lane waits until every lane of `mask` has reached the same call.
inline void __syncwarp(unsigned mask = 0xffffffff, gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    gg::emu::warp_collective(gg::emu::WarpOp::sync, mask, 0, 0, warpSize, site);
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    return unsigned(gg::emu::warp_collective(gg::emu::WarpOp::ballot, mask, predicate != 0, 0, warpSize, site));
}
inline int __all_sync(unsigned mask, int predicate, gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    return int(gg::emu::warp_collective(gg::emu::WarpOp::all, mask, predicate != 0, 0, warpSize, site));
}
inline int __any_sync(unsigned mask, int predicate, gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    return int(gg::emu::warp_collective(gg::emu::WarpOp::any, mask, predicate != 0, 0, warpSize, site));
}
// The lanes that reach this call together: it waits until every other lane of the warp has
// reached it too, returned, or stopped at some other barrier or collective.
inline unsigned __activemask(gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    return unsigned(gg::emu::warp_collective(gg::emu::WarpOp::active, 0, 0, 0, warpSize, site));
}

template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    return gg::emu::shuffle(gg::emu::WarpOp::shfl, mask, var, src_lane, width, site);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    return gg::emu::shuffle(gg::emu::WarpOp::shfl_up, mask, var, int(delta), width, site);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    return gg::emu::shuffle(gg::emu::WarpOp::shfl_down, mask, var, int(delta), width, site);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    return gg::emu::shuffle(gg::emu::WarpOp::shfl_xor, mask, var, lane_mask, width, site);
}

// Atomics, with CUDA's overload sets: blocks run on several OS threads at once.
template <class T> requires gg::emu::one_of<T, int, unsigned, unsigned long long, float, double>
T atomicAdd(T* address, std::type_identity_t<T> val) {
    const gg::emu::UncheckedAccesses atomic;
    return std::atomic_ref<T>(*address).fetch_add(val);
}
template <class T> requires gg::emu::one_of<T, int, unsigned>
T atomicSub(T* address, std::type_identity_t<T> val) {
    const gg::emu::UncheckedAccesses atomic;
    return std::atomic_ref<T>(*address).fetch_sub(val);
}
template <class T> requires gg::emu::one_of<T, int, unsigned, unsigned long long, float>
T atomicExch(T* address, std::type_identity_t<T> val) {
    const gg::emu::UncheckedAccesses atomic;
    return std::atomic_ref<T>(*address).exchange(val);
}
template <class T> requires gg::emu::one_of<T, int, unsigned, unsigned long long>
T atomicOr(T* address, std::type_identity_t<T> val) {
    const gg::emu::UncheckedAccesses atomic;
    return std::atomic_ref<T>(*address).fetch_or(val);
}
template <class T> requires gg::emu::one_of<T, int, unsigned, unsigned long long>
T atomicAnd(T* address, std::type_identity_t<T> val) {
    const gg::emu::UncheckedAccesses atomic;
    return std::atomic_ref<T>(*address).fetch_and(val);
}
template <class T> requires gg::emu::one_of<T, int, unsigned, unsigned long long>
T atomicXor(T* address, std::type_identity_t<T> val) {
    const gg::emu::UncheckedAccesses atomic;
    return std::atomic_ref<T>(*address).fetch_xor(val);
}
template <class T> requires gg::emu::one_of<T, int, unsigned, unsigned long long>
T atomicCAS(T* address, std::type_identity_t<T> compare, std::type_identity_t<T> val) {
    const gg::emu::UncheckedAccesses atomic;
    std::atomic_ref<T>(*address).compare_exchange_strong(compare, val);
    return compare;  // the old value, whether or not the swap happened
}
template <class T> requires gg::emu::one_of<T, int, unsigned, long long, unsigned long long>
T atomicMax(T* address, std::type_identity_t<T> val) {
    const gg::emu::UncheckedAccesses atomic;
    return gg::emu::atomic_update(address, [val](T old) { return std::max(old, val); });
}
template <class T> requires gg::emu::one_of<T, int, unsigned, long long, unsigned long long>
T atomicMin(T* address, std::type_identity_t<T> val) {
    const gg::emu::UncheckedAccesses atomic;
    return gg::emu::atomic_update(address, [val](T old) { return std::min(old, val); });
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
template <class T>
T __ldg(const T* p) {
    return *p;
}

// Fast-math intrinsics: on the CPU the accurate functions stand in for them.
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }

inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return std::countl_zero(unsigned(x)); }

// Device code calls min and max unqualified, with CUDA's overloads; plain functions, so
// that std::min and std::max keep working where they are named. For floating point CUDA's
// min and max are fminf/fmaxf (fmin/fmax), which return the other operand when one is NaN
// (IEEE 754 minNum/maxNum): max(NaN, 1.0f) is 1, where std::max's a < b ? b : a gives NaN.
#define GG_EMU_MIN_MAX(A, B, R)                                   \
    inline R min(A a, B b) { return std::min<R>(a, b); } \
    inline R max(A a, B b) { return std::max<R>(a, b); }
#define GG_EMU_FMIN_FMAX(A, B, R)                                  \
    inline R min(A a, B b) { return std::fmin(R(a), R(b)); } \
    inline R max(A a, B b) { return std::fmax(R(a), R(b)); }
GG_EMU_MIN_MAX(int, int, int)
GG_EMU_MIN_MAX(unsigned, unsigned, unsigned)
GG_EMU_MIN_MAX(int, unsigned, unsigned)
GG_EMU_MIN_MAX(unsigned, int, unsigned)
GG_EMU_MIN_MAX(long, long, long)
GG_EMU_MIN_MAX(unsigned long, unsigned long, unsigned long)
GG_EMU_MIN_MAX(long long, long long, long long)
GG_EMU_MIN_MAX(unsigned long long, unsigned long long, unsigned long long)
GG_EMU_FMIN_FMAX(float, float, float)
GG_EMU_FMIN_FMAX(double, double, double)
GG_EMU_FMIN_FMAX(float, double, double)
GG_EMU_FMIN_FMAX(double, float, double)
#undef GG_EMU_MIN_MAX
#undef GG_EMU_FMIN_FMAX

// Vector types, aligned as on the GPU so that one load moves all of it.
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) double2 { double x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline double2 make_double2(double x, double y) { return {x, y}; }

// Tensor cores at the PTX level (mma.sync, ldmatrix), for cuda/mma.h.
#include "cuda/emulator/mma.h"
// Asynchronous copies into shared memory (cp.async), for cuda/async_copy.h.
#include "cuda/emulator/async_copy.h"
