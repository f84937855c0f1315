// test_emulator_strict.cpp — the emulator's strict modes (cuda/emulator/): threads of a block run in
// reverse or shuffled order, the race detector for shared memory (cuda/emulator/race_check.h), and
// CUDA's NaN rule for min and max.
//
// Each check is shown on a planted bug: a small kernel with one barrier, __syncwarp or NaN rule
// missing, which the emulator as it was (threads in id order, no race detector, std::max) ran
// without complaint and with the expected result. Each test first runs the kernel that way and
// checks that the bug goes unseen there, then shows the strict mode catching it, then runs the
// fixed kernel under the same mode to show it passes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "tests/emulator_options.h"
#include "tests/launch_error.h"
#include "cuda/async_copy.h"
#include "cuda/launch.h"
#include "cuda/mma.h"

using gg::cuda::launch;
using gg::emu::Schedule;
using gg::testing::launch_error;
using Strictness = gg::testing::EmulatorOptions;

namespace {

// The race detector sees a kernel's own loads and stores only where g++ instrumented them
// (cuda/meson.build); under AddressSanitizer these tests have nothing to look at.
bool race_detector_sees_kernels() {
    if (gg::emu::race_check_sees_kernel_accesses()) return true;
    MESSAGE("this build does not show kernels' loads and stores to the race detector (AddressSanitizer's build)");
    return false;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- the schedule ---------------------------------------------------------------------------

// turn: (threads,), the order in which each thread first ran.
__global__ void record_turns(int* turn, int* counter) { turn[threadIdx.x] = atomicAdd(counter, 1); }

std::vector<int> turns(Schedule schedule, uint64_t seed, int threads) {
    const Strictness mode(schedule, false, seed);
    std::vector<int> turn(size_t(threads), -1);
    int counter = 0;
    launch("record_turns", record_turns, dim3(1), dim3(unsigned(threads)), 0, turn.data(), &counter);
    return turn;
}

TEST_CASE("threads take turns by id, in reverse, or shuffled from a seed") {
    const int n = 64;
    std::vector<int> by_id(n), reversed(n);
    std::iota(by_id.begin(), by_id.end(), 0);
    for (int t = 0; t < n; ++t) reversed[size_t(t)] = n - 1 - t;
    CHECK(turns(Schedule::order, 1, n) == by_id);
    CHECK(turns(Schedule::reverse, 1, n) == reversed);
    const std::vector<int> shuffled = turns(Schedule::shuffle, 1, n);
    std::vector<int> sorted = shuffled;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == by_id);  // every thread ran once
    CHECK(shuffled != by_id);
    CHECK(shuffled != reversed);
    CHECK(turns(Schedule::shuffle, 1, n) == shuffled);  // the same seed, the same order
    CHECK(turns(Schedule::shuffle, 2, n) != shuffled);
}

// ---- a missing __syncthreads whose writer has the lower id ----------------------------------

// out: (blockDim.x,), thread 0's value in every element. The bug: no __syncthreads between
// thread 0's store and the others' loads. In id order thread 0 always ran first, so every
// thread read 42 and the test passed; on a GPU another warp may well read first.
template <bool Barrier>
__global__ void broadcast(float* out) {
    GG_SHARED(float, value);
    if (threadIdx.x == 0) value = 42.0f;
    if (Barrier) __syncthreads();
    out[threadIdx.x] = value;
}

std::vector<float> run_broadcast(bool barrier, int threads = 64) {
    std::vector<float> out(size_t(threads), 0.0f);
    launch(barrier ? "broadcast" : "broadcast_without_barrier", barrier ? broadcast<true> : broadcast<false>, dim3(1),
           dim3(unsigned(threads)), 0, out.data());
    return out;
}
bool all_42(const std::vector<float>& out) {
    return std::all_of(out.begin(), out.end(), [](float v) { return v == 42.0f; });
}

TEST_CASE("a missing __syncthreads whose writer runs first: unseen in id order, caught by reverse and shuffled turns") {
    {
        const Strictness old(Schedule::order, false);
        CHECK(all_42(run_broadcast(false)));  // the bug passes unseen
    }
    {
        const Strictness mode(Schedule::reverse, false);
        const std::vector<float> out = run_broadcast(false);
        CHECK(out[0] == 42.0f);
        CHECK(std::isnan(out[1]));  // read before thread 0 stored: the 0xFF fill
        CHECK(all_42(run_broadcast(true)));
    }
    {
        const Strictness mode(Schedule::shuffle, false);
        CHECK_FALSE(all_42(run_broadcast(false)));
        CHECK(all_42(run_broadcast(true)));
    }
}

TEST_CASE("the race detector names the kernel, the byte and both threads of a missing __syncthreads") {
    if (!race_detector_sees_kernels()) return;
    const Strictness mode(Schedule::order, true);  // the writer runs first, and still it is caught
    const std::string error = launch_error([] { run_broadcast(false); });
    CHECK_MESSAGE(contains(error, "cuda emulator: broadcast_without_barrier: block (0,0,0): race in shared memory: "
                                  "thread (1,0,0) loads byte 0 of `value`, which thread (0,0,0) stored with no "
                                  "__syncthreads between them"),
                  error);
    CHECK(all_42(run_broadcast(true)));
}

// s: (threads,) rotated by one in place. The bug: no __syncthreads between reading the
// neighbour and overwriting one's own element, so a thread may overwrite what its neighbour
// has not read yet (a load, then another thread's store: write after read).
template <bool Barrier>
__global__ void rotate(float* out) {
    GG_SHARED(float[64], s);
    const unsigned t = threadIdx.x;
    s[t] = float(t);
    __syncthreads();
    const float next = s[(t + 1) % 64];
    if (Barrier) __syncthreads();
    s[t] = next;
    __syncthreads();
    out[t] = s[t];
}

TEST_CASE("a store after another thread's load with no barrier between is a race too") {
    if (!race_detector_sees_kernels()) return;
    std::vector<float> out(64);
    const Strictness mode(Schedule::order, true);  // thread 0 reads s[1], then thread 1 overwrites it
    const std::string error =
        launch_error([&] { launch("rotate_without_barrier", rotate<false>, dim3(1), dim3(64), 0, out.data()); });
    CHECK_MESSAGE(contains(error, "rotate_without_barrier: block (0,0,0): race in shared memory: thread (1,0,0) "
                                  "stores to byte 4 of `s`, which thread (0,0,0) loaded with no __syncthreads between "
                                  "them and no __syncwarp that both passed"),
                  error);
    launch("rotate", rotate<true>, dim3(1), dim3(64), 0, out.data());
    for (int t = 0; t < 64; ++t) CHECK(out[size_t(t)] == float((t + 1) % 64));
}

// ---- __syncwarp orders the lanes of one warp, and only them ----------------------------------

// Each thread stores its id, then reads the element of thread t ^ partner, with a __syncwarp
// between (or not). Partners within a warp (xor 1) are ordered by it; across warps (xor 32)
// only a __syncthreads would order them.
template <bool Syncwarp>
__global__ void exchange(int* out, int partner) {
    GG_SHARED(int[64], s);
    const unsigned t = threadIdx.x;
    s[t] = int(t);
    if (Syncwarp) __syncwarp();
    out[t] = s[t ^ unsigned(partner)];
}

TEST_CASE("__syncwarp orders the lanes of its warp and no others") {
    if (!race_detector_sees_kernels()) return;
    const Strictness mode(Schedule::order, true);
    std::vector<int> out(64);
    const auto run = [&](bool syncwarp, int partner) {
        return launch_error([&] {
            launch("exchange", syncwarp ? exchange<true> : exchange<false>, dim3(1), dim3(64), 0, out.data(), partner);
        });
    };
    CHECK(run(true, 1).empty());
    for (int t = 0; t < 64; ++t) CHECK(out[size_t(t)] == (t ^ 1));
    // In id order thread 0 reads s[1] before thread 1 stores it: the store is the second access.
    const std::string lanes = run(false, 1);
    CHECK_MESSAGE(contains(lanes, "thread (1,0,0) stores to byte 4 of `s`, which thread (0,0,0) loaded with no "
                                  "__syncthreads between them and no __syncwarp that both passed"),
                  lanes);
    const std::string warps = run(true, 32);
    CHECK_MESSAGE(contains(warps, "thread (63,0,0) stores to byte 252 of `s`, which thread (31,0,0) loaded with no "
                                  "__syncthreads between them"),
                  warps);
}

// Two threads store the two halves of one 4-byte word: different bytes, no race.
__global__ void halves(uint16_t* out) {
    GG_SHARED(uint16_t[2], s);
    s[threadIdx.x] = uint16_t(threadIdx.x + 7);
    __syncthreads();
    out[threadIdx.x] = s[1 - threadIdx.x];
}

TEST_CASE("stores to neighbouring bytes by different threads are no race") {
    if (!race_detector_sees_kernels()) return;
    const Strictness mode(Schedule::shuffle, true);
    std::vector<uint16_t> out(2);
    launch("halves", halves, dim3(1), dim3(2), 0, out.data());
    CHECK(out == std::vector<uint16_t>{8, 7});
}

// ---- ldmatrix is a weak load ------------------------------------------------------------------

// tile: (32, 8) b16 → r: (32, 4) registers. Each lane stores its own row of the tile to shared
// memory, then the warp loads the four 8×8 matrices with ldmatrix.x4. The bug: no __syncwarp
// between the stores and the ldmatrix, so a lane reads rows other lanes stored with nothing
// ordering them (PTX: ldmatrix is a weak load). The emulator's ldmatrix was a warp rendezvous
// that ran only once every lane had stored, and so it read the right values.
template <bool Syncwarp>
__global__ void store_then_ldmatrix(const uint16_t* tile, uint32_t* r) {
    GG_SHARED(uint16_t[32][8], s);
    const unsigned lane = threadIdx.x;
    for (int c = 0; c < 8; ++c) s[lane][c] = tile[lane * 8 + unsigned(c)];
    if (Syncwarp) __syncwarp();
    uint32_t loaded[4];
    gg::cuda::ldmatrix<4>(loaded, &s[lane][0]);
    for (int j = 0; j < 4; ++j) r[lane * 4 + unsigned(j)] = loaded[j];
}

TEST_CASE("a lane's shared store needs a __syncwarp before another lane's ldmatrix reads it") {
    std::vector<uint16_t> tile(32 * 8);
    std::iota(tile.begin(), tile.end(), uint16_t(1));
    // Matrix j is rows 8j..8j+7; lane l gets row l/4, columns 2(l mod 4) and 2(l mod 4)+1.
    std::vector<uint32_t> expected(32 * 4);
    for (int l = 0; l < 32; ++l)
        for (int j = 0; j < 4; ++j) {
            const size_t row = size_t(8 * j + l / 4), col = size_t(2 * (l % 4));
            expected[size_t(l * 4 + j)] = uint32_t(tile[row * 8 + col]) | uint32_t(tile[row * 8 + col + 1]) << 16;
        }
    std::vector<uint32_t> r(32 * 4);
    {
        const Strictness old(Schedule::order, false);
        launch("store_then_ldmatrix", store_then_ldmatrix<false>, dim3(1), dim3(32), 0, tile.data(), r.data());
        CHECK(r == expected);  // the bug passes unseen
    }
    if (!race_detector_sees_kernels()) return;
    const Strictness mode(Schedule::order, true);
    const std::string error = launch_error([&] {
        launch("store_then_ldmatrix", store_then_ldmatrix<false>, dim3(1), dim3(32), 0, tile.data(), r.data());
    });
    // Lane 29 receives row 7 (stored by lane 7), columns 2 and 3: bytes 7·16 + 4 on.
    CHECK_MESSAGE(contains(error, "store_then_ldmatrix: block (0,0,0): race in shared memory: thread (29,0,0) reads "
                                  "with ldmatrix byte 116 of `s`, which thread (7,0,0) stored with no __syncthreads "
                                  "between them and no __syncwarp that both passed"),
                  error);
    std::fill(r.begin(), r.end(), 0u);
    launch("store_then_ldmatrix", store_then_ldmatrix<true>, dim3(1), dim3(32), 0, tile.data(), r.data());
    CHECK(r == expected);
}

// ---- cp.async lands as a store by the thread that issued it ----------------------------------

// chunks: (2, 4) floats in global memory → out: (4,). Threads 0 and 1 each copy their chunk
// into shared memory with cp.async and wait for it; thread 1 then reads thread 0's chunk. The
// bug: no __syncthreads after the wait (a wait_group makes a copy visible to its own thread
// only). In id order thread 0's copy had landed before thread 1 ran, so it read the data.
template <bool Barrier>
__global__ void copy_then_read(const float* chunks, float* out) {
    GG_SHARED(float[2][4], s);
    const unsigned t = threadIdx.x;
    gg::cuda::cp_async16(&s[t][0], chunks + 4 * t);
    gg::cuda::cp_async_commit();
    gg::cuda::cp_async_wait<0>();
    if (Barrier) __syncthreads();
    if (t == 1)
        for (int i = 0; i < 4; ++i) out[i] = s[0][i];
}

TEST_CASE("a cp.async that landed is another thread's to read only after a __syncthreads") {
    alignas(16) const float chunks[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    std::vector<float> out(4);
    {
        const Strictness old(Schedule::order, false);
        launch("copy_then_read", copy_then_read<false>, dim3(1), dim3(2), 0, chunks, out.data());
        CHECK(out == std::vector<float>{1, 2, 3, 4});  // the bug passes unseen
    }
    if (!race_detector_sees_kernels()) return;
    const Strictness mode(Schedule::order, true);
    const std::string error = launch_error(
        [&] { launch("copy_then_read", copy_then_read<false>, dim3(1), dim3(2), 0, chunks, out.data()); });
    CHECK_MESSAGE(contains(error, "race in shared memory: thread (1,0,0) loads byte 0 of `s`, which thread (0,0,0) "
                                  "wrote with cp.async with no __syncthreads between them"),
                  error);
    std::fill(out.begin(), out.end(), 0.0f);
    launch("copy_then_read", copy_then_read<true>, dim3(1), dim3(2), 0, chunks, out.data());
    CHECK(out == std::vector<float>{1, 2, 3, 4});
}

// ---- min and max are fminf and fmaxf ----------------------------------------------------------

// x: (n,) → out: (3, n): max(x, 0), min(x, 2), max(0, x), each as CUDA's overloads compute it.
__global__ void clamp_parts(const float* x, float* out, int n) {
    const int i = int(threadIdx.x);
    if (i >= n) return;
    out[i] = max(x[i], 0.0f);
    out[n + i] = min(x[i], 2.0f);
    out[2 * n + i] = max(0.0, double(x[i]));
}

TEST_CASE("max and min on floats follow fmaxf and fminf: a NaN operand gives the other one") {
    // std::max(NaN, 0.0f) is NaN (NaN < 0 is false, so it returns its first argument); the
    // emulator's max was std::max, so a kernel that relies on CUDA dropping a NaN (a ReLU by
    // max, a clamp) computed NaN here and could not be tested against the GPU.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> x = {nan, -1.0f, 3.0f};
    std::vector<float> out(9);
    launch("clamp_parts", clamp_parts, dim3(1), dim3(32), 0, x.data(), out.data(), 3);
    CHECK(out[0] == 0.0f);
    CHECK(out[1] == 0.0f);
    CHECK(out[2] == 3.0f);
    CHECK(out[3] == 2.0f);
    CHECK(out[4] == -1.0f);
    CHECK(out[5] == 2.0f);
    CHECK(out[6] == 0.0f);
    CHECK(out[7] == 0.0f);
    CHECK(out[8] == 3.0f);
    CHECK(std::isnan(max(nan, nan)));
    CHECK(std::isnan(min(double(nan), double(nan))));
}

}  // namespace
