// test_emulator_async_copy.cpp — the emulator's cp.async (cuda/emulator/async_copy.h, reached
// through cuda/async_copy.h): a copy lands in shared memory at the wait that covers its group
// and not before, so that a kernel which reads too early reads the 0xFF fill (NaN) and fails;
// wait_group N leaves the N newest groups in flight; copies never committed are covered by no
// wait; src_bytes below 16 fills with zeros; both addresses must be 16-byte aligned, and the
// destination must lie in the block's shared memory.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "cuda/async_copy.h"
#include "cuda/launch.h"
#include "tests/launch_error.h"

using gg::cuda::cp_async16;
using gg::cuda::cp_async_commit;
using gg::cuda::cp_async_wait;
using gg::cuda::launch;
using gg::testing::launch_error;

namespace {

constexpr int kLanes = 32;

// in (32, 4) → shared → out (32, 4), each lane copying its own row of 16 bytes and reading
// back its neighbour's (lane + 1), so that only the barrier makes the row visible to it.
// Without the wait the copies are still in flight at the read.
__global__ void stage_rows(const float* in, float* out, bool wait) {
    GG_SHARED(float[kLanes][4], rows);
    const int lane = int(threadIdx.x);
    cp_async16(rows[lane], in + 4 * lane);
    cp_async_commit();
    if (wait) cp_async_wait<0>();
    __syncthreads();
    for (int i = 0; i < 4; ++i) out[4 * lane + i] = rows[(lane + 1) % kLanes][i];
}

// Two groups of one copy each: after wait<1> the older has landed and the newer not; after
// wait<0> both. out: (2 reads, 2 rows, 4).
__global__ void two_groups(const float* in, float* out) {
    GG_SHARED(float[2][4], rows);
    for (int g = 0; g < 2; ++g) {
        cp_async16(rows[g], in + 4 * g);
        cp_async_commit();
    }
    cp_async_wait<1>();
    for (int i = 0; i < 8; ++i) out[i] = rows[i / 4][i % 4];
    cp_async_wait<0>();
    for (int i = 0; i < 8; ++i) out[8 + i] = rows[i / 4][i % 4];
}

// A copy not yet committed is in no group: wait<0> does not cover it, a commit and a wait do.
__global__ void uncommitted(const float* in, float* out) {
    GG_SHARED(float[4], row);
    cp_async16(row, in);
    cp_async_wait<0>();
    for (int i = 0; i < 4; ++i) out[i] = row[i];
    cp_async_commit();
    cp_async_wait<0>();
    for (int i = 0; i < 4; ++i) out[4 + i] = row[i];
}

// src_bytes 0, 8 and 16 into three rows: zeros, two values and zeros, four values.
__global__ void zero_fill(const float* in, float* out) {
    GG_SHARED(float[3][4], rows);
    for (int r = 0; r < 3; ++r) cp_async16(rows[r], in + 4 * r, 8 * r);
    cp_async_commit();
    cp_async_wait<0>();
    for (int i = 0; i < 12; ++i) out[i] = rows[i / 4][i % 4];
}

// A copy whose shared (or global) address is `offset` floats past a 16-byte boundary.
__global__ void misaligned(const float* in, float* out, int shared_offset, int global_offset) {
    GG_SHARED(float[8], row);
    cp_async16(row + shared_offset, in + global_offset);
    cp_async_commit();
    cp_async_wait<0>();
    out[0] = row[0];
}

// A copy to global memory, or to the 16 bytes just past a shared array, where a GPU would
// write some other shared address.
__global__ void outside_shared(const float* in, float* out, bool to_global) {
    GG_SHARED(float[8], row);
    cp_async16(to_global ? out : row + 8, in);
    cp_async_commit();
    cp_async_wait<0>();
    out[0] = row[0];
}

}  // namespace

TEST_CASE("cp.async lands at the wait that covers it: reading before the wait reads stale shared memory") {
    alignas(16) float in[kLanes * 4], out[kLanes * 4];
    for (int i = 0; i < kLanes * 4; ++i) in[i] = float(i);
    launch("stage_rows", stage_rows, 1, kLanes, 0, in, out, true);
    for (int i = 0; i < kLanes * 4; ++i) {
        CAPTURE(i);
        CHECK(out[i] == in[(i + 4) % (kLanes * 4)]);
    }
    // The same kernel without cp_async_wait: every value read is the NaN fill.
    launch("stage_rows", stage_rows, 1, kLanes, 0, in, out, false);
    int stale = 0;
    for (float x : out) stale += std::isnan(x);
    CHECK(stale == kLanes * 4);
}

TEST_CASE("cp.async.wait_group N leaves the N newest groups in flight; uncommitted copies are in none") {
    alignas(16) float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[16];
    launch("two_groups", two_groups, 1, 1, 0, in, out);
    for (int i = 0; i < 4; ++i) CHECK(out[i] == in[i]);       // group 0 after wait<1>
    for (int i = 4; i < 8; ++i) CHECK(std::isnan(out[i]));    // group 1 still in flight
    for (int i = 0; i < 8; ++i) CHECK(out[8 + i] == in[i]);   // both after wait<0>

    launch("uncommitted", uncommitted, 1, 1, 0, in, out);
    for (int i = 0; i < 4; ++i) CHECK(std::isnan(out[i]));
    for (int i = 0; i < 4; ++i) CHECK(out[4 + i] == in[i]);
}

TEST_CASE("cp.async with src_bytes below 16 fills the rest of the 16 bytes with zeros") {
    alignas(16) float in[12], out[12];
    for (int i = 0; i < 12; ++i) in[i] = float(i + 1);
    launch("zero_fill", zero_fill, 1, 1, 0, in, out);
    const float expected[12] = {0, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 12};
    for (int i = 0; i < 12; ++i) CHECK(out[i] == expected[i]);
}

TEST_CASE("cp.async refuses a shared or global address that is not 16-byte aligned") {
    alignas(16) float in[12] = {}, out[1];
    CHECK(launch_error([&] { launch("misaligned", misaligned, 1, 1, 0, in, out, 0, 0); }) == "");
    const std::string global = launch_error([&] { launch("misaligned", misaligned, 1, 1, 0, in, out, 0, 1); });
    CHECK(global.find("cp.async (test_emulator_async_copy.cpp:") != std::string::npos);
    CHECK(global.find("global address 4 B past a multiple of 16") != std::string::npos);
    const std::string shared = launch_error([&] { launch("misaligned", misaligned, 1, 1, 0, in, out, 2, 0); });
    CHECK(shared.find("shared address 8 B past a multiple of 16") != std::string::npos);
}

TEST_CASE("cp.async refuses a destination outside the block's shared memory") {
    alignas(16) float in[4] = {}, out[4];
    for (bool to_global : {true, false}) {
        CAPTURE(to_global);
        CHECK(launch_error([&] { launch("outside_shared", outside_shared, 1, 1, 0, in, out, to_global); })
                  .find("the destination is not 16 bytes of this block's shared memory") != std::string::npos);
    }
}
