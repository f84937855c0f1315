// test_emulator.cpp — the CPU emulator of the CUDA execution model (cuda/emulator/), through the
// same launch.h the kernels use.
//
// Expected values are worked out by hand or by plain loops here, never by the emulator. The
// cases tagged "bench" are skipped by default: run them with --no-skip.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/emulator_options.h"
#include "tests/launch_error.h"
#include "cuda/launch.h"

using gg::cuda::launch;

namespace {

constexpr unsigned kFull = 0xffffffff;

using gg::testing::launch_error;

// ---- indices ------------------------------------------------------------------------------

// hits: (blocks · threads) counters; each thread adds 1 to its own.
__global__ void count_hits(int* hits, int* bad_dims) {
    const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    atomicAdd(&hits[block * blockDim.x * blockDim.y * blockDim.z + thread], 1);
    if (blockDim.x != 5 || blockDim.y != 3 || blockDim.z != 2 || gridDim.x != 3 || gridDim.y != 2 || gridDim.z != 4)
        atomicAdd(bad_dims, 1);
}

TEST_CASE("every thread of a 3-D grid of 3-D blocks runs exactly once") {
    const dim3 grid(3, 2, 4), block(5, 3, 2);  // 30 threads: the block's only warp is partial
    std::vector<int> hits(24 * 30, 0);
    int bad_dims = 0;
    launch("count_hits", count_hits, grid, block, 0, hits.data(), &bad_dims);
    CHECK(bad_dims == 0);
    for (size_t i = 0; i < hits.size(); ++i) CHECK_MESSAGE(hits[i] == 1, "thread " << i);
}

// ---- barriers and shared memory -----------------------------------------------------------

// x: (n,) → partial: (blocks,), each block's sum by a tree in shared memory; block = 256.
__global__ void block_sum(const float* x, float* partial, int n) {
    GG_SHARED(float[256], s);
    const unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < unsigned(n) ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = s[0];
}

float gpu_sum(const std::vector<float>& x) {
    const int blocks = int(x.size() + 255) / 256;
    std::vector<float> partial(blocks);
    launch("block_sum", block_sum, dim3(blocks), dim3(256), 0, x.data(), partial.data(), int(x.size()));
    float total = 0;
    for (float p : partial) total += p;
    return total;
}

TEST_CASE("a block-wide tree reduction in shared memory equals the plain sum") {
    std::vector<float> x(2000);
    double expected = 0;
    for (size_t i = 0; i < x.size(); ++i) expected += x[i] = float(i % 7);  // integers: exact in float
    CHECK(gpu_sum(x) == expected);
}

// out: (4, 100): three barrier votes, then the active lanes once lanes 4..7 of each warp
// have returned.
__global__ void votes(int* out) {
    const int t = int(threadIdx.x), n = int(blockDim.x);
    out[0 * n + t] = __syncthreads_count(t % 3 == 0);
    out[1 * n + t] = __syncthreads_and(t < 100);
    out[2 * n + t] = __syncthreads_or(t == 99);
    if (t % 32 >= 4 && t % 32 < 8) return;
    __syncwarp(__activemask());
    out[3 * n + t] = int(__activemask());
}

// Lanes 0..9 of each warp ask for the active mask inside a branch the others skip.
__global__ void mask_in_branch(unsigned* out) {
    out[threadIdx.x] = threadIdx.x % 32 < 10 ? __activemask() : 0;
    __syncthreads();
}

TEST_CASE("barrier votes count the whole block; __activemask names the lanes that reach it together") {
    const int n = 100;  // warps of 32, 32, 32 and 4 lanes
    std::vector<int> out(4 * n, -1);
    launch("votes", votes, 1, n, 0, out.data());
    for (int t = 0; t < n; ++t) {
        CAPTURE(t);
        CHECK(out[0 * n + t] == 34);
        CHECK(out[1 * n + t] == 1);
        CHECK(out[2 * n + t] == 1);
        const bool returned = t % 32 >= 4 && t % 32 < 8;
        CHECK(unsigned(out[3 * n + t]) == (returned ? unsigned(-1) : t < 96 ? 0xffffff0fu : 0xfu));
    }
    std::vector<unsigned> masks(64);
    launch("mask_in_branch", mask_in_branch, 1, 64, 0, masks.data());
    for (int t = 0; t < 64; ++t) CHECK(masks[t] == (t % 32 < 10 ? 0x3ffu : 0u));
}

__global__ void divergent_barrier(int* out) {
    if (threadIdx.x < 32) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1;
}

__global__ void barrier_after_return(int* out) {
    if (threadIdx.x >= 40) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}

TEST_CASE("threads at different barriers, or returned while others wait, are an error") {
    std::vector<int> out(64, 0);
    const std::string split = launch_error([&] { launch("divergent_barrier", divergent_barrier, 1, 64, 0, out.data()); });
    CHECK(split.starts_with("cuda emulator: divergent_barrier: block (0,0,0): divergent __syncthreads: "));
    CHECK(split.find("threads 0..31 wait at __syncthreads (test_emulator.cpp:") != std::string::npos);
    CHECK(split.find("threads 32..63 wait at __syncthreads (test_emulator.cpp:") != std::string::npos);
    const std::string early = launch_error([&] { launch("barrier_after_return", barrier_after_return, 1, 64, 0, out.data()); });
    CHECK(early.starts_with("cuda emulator: barrier_after_return: block (0,0,0): divergent __syncthreads: threads 0..39 wait at"));
    CHECK(early.ends_with("threads 40..63 returned"));
    CHECK(out == std::vector<int>(64, 0));
    // The failed launches left nothing behind.
    CHECK(gpu_sum(std::vector<float>(1000, 1.0f)) == 1000.0f);
}

__global__ void warps_at_different_syncwarps(int* out) {
    if (threadIdx.x % 32 < 16) {
        __syncwarp();
    } else {
        __syncwarp();
    }
    out[threadIdx.x] = 1;
}

__global__ void warp_waits_for_barrier(int* out) {
    if (threadIdx.x == 3) __syncthreads();
    __syncwarp();
    out[threadIdx.x] = 1;
}

TEST_CASE("a warp collective that can never complete is reported, not hung") {
    std::vector<int> out(64, 0);
    const std::string halves = launch_error([&] { launch("halves", warps_at_different_syncwarps, 1, 32, 0, out.data()); });
    CHECK(halves.starts_with("cuda emulator: halves: block (0,0,0): deadlock: threads 0..15 wait at __syncwarp (test_emulator.cpp:"));
    CHECK(halves.find("threads 16..31 wait at __syncwarp") != std::string::npos);
    const std::string barrier = launch_error([&] { launch("barrier", warp_waits_for_barrier, 1, 64, 0, out.data()); });
    CHECK(barrier.find(": deadlock: threads 0..2 wait at __syncwarp") != std::string::npos);
    CHECK(barrier.find("thread 3 wait at __syncthreads") != std::string::npos);
    CHECK(out[0] == 0);
}

// ---- warp collectives ---------------------------------------------------------------------

// out: (13, threads): each row one collective, as the lane saw it; lane values are lane · 10.
__global__ void collectives(int* out, double* as_double, long long* as_long) {
    const int n = int(blockDim.x), t = int(threadIdx.x), lane = t % 32, v = lane * 10;
    out[0 * n + t] = __shfl_sync(kFull, v, 3);
    out[1 * n + t] = __shfl_sync(kFull, v, 3, 8);
    out[2 * n + t] = __shfl_up_sync(kFull, v, 2);
    out[3 * n + t] = __shfl_up_sync(kFull, v, 2, 8);
    out[4 * n + t] = __shfl_down_sync(kFull, v, 3);
    out[5 * n + t] = __shfl_down_sync(kFull, v, 3, 16);
    out[6 * n + t] = __shfl_xor_sync(kFull, v, 1);
    out[7 * n + t] = __shfl_xor_sync(kFull, v, 8, 4);
    out[8 * n + t] = int(__ballot_sync(kFull, lane % 3 == 0));
    out[9 * n + t] = __all_sync(kFull, lane < 40);
    out[10 * n + t] = __all_sync(kFull, lane < 31);
    out[11 * n + t] = __any_sync(kFull, lane == 17);
    out[12 * n + t] = __any_sync(kFull, lane == 40);
    as_double[t] = __shfl_down_sync(kFull, lane + 0.5, 1);
    as_long[t] = __shfl_xor_sync(kFull, (1LL << 40) + lane, 31);
}

TEST_CASE("shuffles, ballots and votes give what CUDA documents") {
    const int n = 64;
    std::vector<int> out(13 * n, -7);
    std::vector<double> as_double(n);
    std::vector<long long> as_long(n);
    launch("collectives", collectives, 1, n, 0, out.data(), as_double.data(), as_long.data());
    for (int t = 0; t < n; ++t) {
        const int lane = t % 32, own = lane * 10;
        CAPTURE(t);
        CHECK(out[0 * n + t] == 30);
        CHECK(out[1 * n + t] == (lane / 8 * 8 + 3) * 10);
        CHECK(out[2 * n + t] == (lane >= 2 ? own - 20 : own));
        CHECK(out[3 * n + t] == (lane % 8 >= 2 ? own - 20 : own));
        CHECK(out[4 * n + t] == (lane + 3 < 32 ? own + 30 : own));
        CHECK(out[5 * n + t] == (lane % 16 + 3 < 16 ? own + 30 : own));
        CHECK(out[6 * n + t] == (lane ^ 1) * 10);
        // width 4: xor 8 may read an earlier segment of 4 lanes, never a later one.
        CHECK(out[7 * n + t] == (lane & 8 ? own - 80 : own));
        CHECK(unsigned(out[8 * n + t]) == 0x49249249u);
        CHECK(out[9 * n + t] == 1);
        CHECK(out[10 * n + t] == 0);
        CHECK(out[11 * n + t] == 1);
        CHECK(out[12 * n + t] == 0);
        CHECK(as_double[t] == (lane < 31 ? lane + 1.5 : lane + 0.5));
        CHECK(as_long[t] == (1LL << 40) + (lane ^ 31));
    }
}

// A block of 40 threads: its second warp has lanes 0..7 only.
__global__ void partial_warp(unsigned* ballot, int* shuffled, int source) {
    ballot[threadIdx.x] = __ballot_sync(kFull, 1);
    shuffled[threadIdx.x] = __shfl_sync(kFull, int(threadIdx.x), source);
}

TEST_CASE("in a partial warp the missing lanes are ignored, and reading one is an error") {
    std::vector<unsigned> ballot(40);
    std::vector<int> shuffled(40);
    launch("partial_warp", partial_warp, 1, 40, 0, ballot.data(), shuffled.data(), 7);
    CHECK(ballot[0] == kFull);
    CHECK(ballot[39] == 0xffu);
    CHECK(shuffled[0] == 7);
    CHECK(shuffled[39] == 39);
    const std::string missing = launch_error([&] {
        launch("partial_warp", partial_warp, 1, 40, 0, ballot.data(), shuffled.data(), 9);
    });
    CHECK(missing.starts_with("cuda emulator: partial_warp: block (0,0,0) thread (3"));
    CHECK(missing.find("__shfl_sync (test_emulator.cpp:") != std::string::npos);
    CHECK(missing.find("reads lane 9, which is not in mask 0xffffffff or not in the block") != std::string::npos);
}

// Lanes not in `callers` return at once; the others shuffle.
__global__ void shuffle_with_mask(int* out, unsigned mask, unsigned callers, int source) {
    if (!(callers >> threadIdx.x & 1)) return;
    out[threadIdx.x] = __shfl_sync(mask, int(threadIdx.x), source);
}

TEST_CASE("a lane outside its mask, reading a lane outside the mask, or waiting for a returned lane is an error") {
    const gg::testing::EmulatorOptions by_id(gg::emu::Schedule::order);  // which lane errs first depends on the order
    std::vector<int> out(32, -1);
    const unsigned low = 0x0000ffff;
    launch("half_warp", shuffle_with_mask, 1, 32, 0, out.data(), low, low, 5);
    CHECK(out[15] == 5);
    CHECK(out[16] == -1);
    const auto error = [&](unsigned mask, unsigned callers, int source) {
        return launch_error([&] { launch("k", shuffle_with_mask, 1, 32, 0, out.data(), mask, callers, source); });
    };
    const std::string outside = error(low, kFull, 5);
    CHECK(outside.find("thread (16,0,0): __shfl_sync (test_emulator.cpp:") != std::string::npos);
    CHECK(outside.ends_with("lane 16 is not in its mask 0x0000ffff"));
    CHECK(error(low, low, 20).ends_with("lane 0 reads lane 20, which is not in mask 0x0000ffff or not in the block"));
    CHECK(error(kFull, ~1u, 3).ends_with("lane 0 of mask 0xffffffff has returned"));
    const std::string later = error(kFull, low, 3);
    CHECK(later.starts_with("cuda emulator: k: block (0,0,0): deadlock: threads 0..15 wait at __shfl_sync (test_emulator.cpp:"));
    CHECK(later.ends_with(", mask 0xffffffff), threads 16..31 returned"));
}

// ---- shared memory poison -----------------------------------------------------------------

// out: (blocks, 64). Even blocks fill their shared arrays with 7; odd blocks read theirs
// unwritten, except the first half of `s`.
__global__ void read_unwritten(float* out, int* ints, double* dynamic) {
    GG_SHARED(float[64], s);
    GG_SHARED(int[64], i);
    GG_DYNAMIC_SHARED(double, d);
    const unsigned t = threadIdx.x, b = blockIdx.x;
    if (b % 2 == 0 || t < 32) s[t] = 7;
    if (b % 2 == 0) {
        i[t] = 7;
        d[t] = 7;
    }
    __syncthreads();
    out[b * 64 + t] = s[t];
    ints[b * 64 + t] = i[t];
    dynamic[b * 64 + t] = d[t];
}

TEST_CASE("shared memory nobody wrote reads as NaN (or -1), in every block afresh") {
    const int blocks = 16;  // enough that some OS thread runs an odd block right after an even one
    std::vector<float> out(blocks * 64);
    std::vector<int> ints(blocks * 64);
    std::vector<double> dynamic(blocks * 64);
    launch("read_unwritten", read_unwritten, blocks, 64, 64 * sizeof(double), out.data(), ints.data(), dynamic.data());
    for (int b = 0; b < blocks; ++b)
        for (int t = 0; t < 64; ++t) {
            CAPTURE(b);
            CAPTURE(t);
            const bool written = b % 2 == 0;
            CHECK((written || t < 32 ? out[b * 64 + t] == 7 : std::isnan(out[b * 64 + t])));
            CHECK(ints[b * 64 + t] == (written ? 7 : -1));
            CHECK((written ? dynamic[b * 64 + t] == 7 : std::isnan(dynamic[b * 64 + t])));
        }
}

// ---- atomics ------------------------------------------------------------------------------

// The largest value, by compare-and-swap as kernels write it for types atomicMax lacks.
__device__ void cas_max(int* address, int value) {
    int old = *address;
    while (old < value) {
        const int seen = atomicCAS(address, old, value);
        if (seen == old) break;
        old = seen;
    }
}

struct Counters {
    int count = 0;
    float sum = 0;
    double dsum = 0;
    unsigned long long ull = 0;
    int cas_max = -1, max = -1, min = 1 << 30, sub = 0;
    unsigned bits_or = 0, bits_and = kFull, bits_xor = 0;
    int per_block_ok = 0;
};

__global__ void count_everything(Counters* c) {
    GG_SHARED(int, block_count);
    const int t = int(threadIdx.x), id = int(blockIdx.x * blockDim.x) + t;
    if (t == 0) block_count = 0;
    __syncthreads();
    atomicAdd(&block_count, 1);
    atomicAdd(&c->count, 1);
    atomicAdd(&c->sum, 1.0f);
    atomicAdd(&c->dsum, 0.5);
    atomicAdd(&c->ull, 1ull << 33);
    cas_max(&c->cas_max, (id * 7919) % 16384);
    atomicMax(&c->max, (id * 7919) % 16384);
    atomicMin(&c->min, (id * 7919) % 16384 + 5);
    atomicSub(&c->sub, 2);
    atomicOr(&c->bits_or, 1u << (id % 32));
    atomicAnd(&c->bits_and, ~(1u << (id % 16)));
    atomicXor(&c->bits_xor, 1u << (id % 3));
    __syncthreads();
    if (t == 0 && block_count == int(blockDim.x)) atomicAdd(&c->per_block_ok, 1);
}

TEST_CASE("atomics from many blocks at once lose no update") {
    Counters c;
    launch("count_everything", count_everything, 64, 256, 0, &c);  // 16384 threads
    CHECK(c.count == 16384);
    CHECK(c.sum == 16384.0f);
    CHECK(c.dsum == 8192.0);
    CHECK(c.ull == 16384ull << 33);
    CHECK(c.cas_max == 16383);
    CHECK(c.max == 16383);
    CHECK(c.min == 5);
    CHECK(c.sub == -32768);
    CHECK(c.bits_or == kFull);
    CHECK(c.bits_and == 0xffff0000u);
    CHECK(c.bits_xor == 6u);  // ids 0..16383: bit 0 flipped 5462 times, bits 1 and 2 5461 times
    CHECK(c.per_block_ok == 64);
}

__global__ void exchange(int* cell, int* old) { *old = atomicExch(cell, 9); }

TEST_CASE("atomicExch returns the old value") {
    int cell = 3, old = 0;
    launch("exchange", exchange, 1, 1, 0, &cell, &old);
    CHECK(cell == 9);
    CHECK(old == 3);
}

// ---- errors -------------------------------------------------------------------------------

// Counts live instances, to show that an aborted launch unwinds every thread's stack.
std::atomic<int> alive{0};
struct Tracked {
    Tracked() { ++alive; }
    ~Tracked() { --alive; }
};

__global__ void throws_in_one_thread(int* after) {
    const Tracked local;
    if (blockIdx.x == 2 && threadIdx.x == 5) throw std::runtime_error("boom");
    __syncthreads();
    atomicAdd(after, 1);
}

TEST_CASE("an exception in a kernel ends the launch and surfaces from launch, with the kernel's name") {
    int after = 0;
    const std::string error = launch_error([&] { launch("throws_in_one_thread", throws_in_one_thread, 3, 64, 0, &after); });
    CHECK(error == "cuda emulator: throws_in_one_thread: block (2,0,0) thread (5,0,0): boom");
    CHECK(alive == 0);
    CHECK(after <= 128);  // blocks 0 and 1 may have finished; block 2 never passed its barrier
    CHECK(gpu_sum(std::vector<float>(300, 2.0f)) == 600.0f);
}

__global__ void counts_calls(int* calls) { atomicAdd(calls, 1); }

__global__ void declares_too_much(int* calls) {
    GG_SHARED(float[13000], big);  // 52000 B
    big[threadIdx.x] = 0;
    atomicAdd(calls, 1);
}

__global__ void declares_some(int* calls) {
    GG_SHARED(float[8192], tile);  // 32 KiB
    tile[threadIdx.x] = 0;
    atomicAdd(calls, 1);
}

TEST_CASE("launch configurations a GPU would refuse are errors, before anything runs") {
    int calls = 0;
    const auto error = [&](dim3 grid, dim3 block, size_t shared, auto kernel) {
        return launch_error([&] { launch("config", kernel, grid, block, shared, &calls); });
    };
    CHECK(error(1, dim3(33, 32), 0, counts_calls) ==
          "cuda emulator: config: block (33,32,1) has 1056 threads; a block has 1 to 1024, at most (1024,1024,64)");
    CHECK(error(1, dim3(1, 1, 65), 0, counts_calls).starts_with("cuda emulator: config: block (1,1,65) has 65 threads"));
    CHECK(error(1, dim3(0), 0, counts_calls).starts_with("cuda emulator: config: block (0,1,1) has 0 threads"));
    CHECK(error(dim3(1, 0), 32, 0, counts_calls) ==
          "cuda emulator: config: grid (1,0,1) is empty or larger than (2147483647,65535,65535)");
    CHECK(error(1, 32, 300 * 1024, counts_calls) ==
          "cuda emulator: config: 307200 B of dynamic shared memory, more than the 232448 B a block may have");
    CHECK(calls == 0);
    CHECK(error(1, 32, 0, declares_too_much).ends_with(
        "GG_SHARED arrays of 52000 B, more than the 49152 B a kernel may declare; use GG_DYNAMIC_SHARED"));
    CHECK(error(1, 32, 200 * 1024, declares_some).ends_with(
        "shared memory of 32768 B static + 204800 B dynamic, more than the 232448 B a block may have"));
    CHECK(calls == 0);
    CHECK(error(1, 32, 0, declares_some) == "");
    CHECK(calls == 32);
}

// ---- intrinsics ---------------------------------------------------------------------------

__global__ void intrinsics(float* f, int* i) {
    f[0] = rsqrtf(4.0f);
    f[1] = __expf(0.0f) + __logf(1.0f);
    f[2] = __fdividef(1.0f, 4.0f);
    f[3] = fmaxf(-1.0f, fminf(2.0f, 3.0f));
    f[4] = __int_as_float(__float_as_int(1.5f));
    f[5] = __fmaf_rn(2.0f, 3.0f, 1.0f);
    f[6] = float(rsqrt(16.0));
    i[0] = __popc(0xf0f0u);
    i[1] = __ffs(0x28);
    i[2] = __clz(1);
    i[3] = min(3, 5) + max(3u, 5u) + int(min(2.5f, 1.5f));
    i[4] = int(__longlong_as_double(__double_as_longlong(3.0)));
    const float4 v = make_float4(1, 2, 3, 4);
    i[5] = int(v.w) + int(alignof(float4));
}

TEST_CASE("math intrinsics and vector types behave as in device code") {
    std::vector<float> f(7);
    std::vector<int> i(6);
    launch("intrinsics", intrinsics, 1, 1, 0, f.data(), i.data());
    CHECK(f == std::vector<float>{0.5f, 1.0f, 0.25f, 2.0f, 1.5f, 7.0f, 0.25f});
    CHECK(i == std::vector<int>{8, 4, 31, 9, 3, 20});
    CHECK(std::min(2, 3) == 2);  // std::min still resolves next to device min
}

// ---- speed (skipped by default) -----------------------------------------------------------

__global__ void barriers(int rounds) {
    for (int r = 0; r < rounds; ++r) __syncthreads();
}

constexpr int kTile = 16;

// A (M, K) · B (K, N) → C (M, N), row-major; block (kTile, kTile) computes one kTile² tile of C.
__global__ void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    GG_SHARED(float[kTile][kTile], As);
    GG_SHARED(float[kTile][kTile], Bs);
    const int tx = int(threadIdx.x), ty = int(threadIdx.y);
    const int row = int(blockIdx.y) * kTile + ty, col = int(blockIdx.x) * kTile + tx;
    float acc = 0;
    for (int k0 = 0; k0 < K; k0 += kTile) {
        As[ty][tx] = row < M && k0 + tx < K ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = k0 + ty < K && col < N ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < kTile; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST_CASE("bench: one fiber switch, and a 256×256×256 tiled SGEMM" * doctest::skip()) {
    const int threads = 256, rounds = 2000;
    launch("barriers", barriers, 1, threads, 0, 1);  // maps the stacks
    auto start = std::chrono::steady_clock::now();
    launch("barriers", barriers, 1, threads, 0, rounds);
    MESSAGE("one thread through one __syncthreads (a switch out and back in): "
            << seconds_since(start) / (double(threads) * rounds) * 1e9 << " ns");

    const int n = 256;
    std::vector<float> A(n * n), B(n * n), C(n * n), expected(n * n, 0.0f);
    for (int i = 0; i < n * n; ++i) {
        A[i] = float(i % 13) - 6;
        B[i] = float(i % 7) - 3;
    }
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k)
            for (int j = 0; j < n; ++j) expected[i * n + j] += A[i * n + k] * B[k * n + j];
    const dim3 grid(n / kTile, n / kTile), block(kTile, kTile);
    start = std::chrono::steady_clock::now();
    launch("sgemm_tiled", sgemm_tiled, grid, block, 0, A.data(), B.data(), C.data(), n, n, n);
    MESSAGE("tiled SGEMM 256x256x256: " << seconds_since(start) * 1e3 << " ms");
    CHECK(C == expected);  // small integers: exact in float
}

}  // namespace
