// test_emulator_wmma.cpp — the emulator's tensor-core API (cuda/emu/wmma.h): tf32 and bf16
// rounding worked out by hand, one warp's mma_sync against plain loops, and the errors for
// calls a GPU would get silently wrong.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/launch_error.h"
#include "cuda/launch.h"

using gg::cuda::launch;
using namespace nvcuda;

namespace {

using gg::testing::launch_error;

float bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }

}  // namespace

TEST_CASE("__float_to_tf32 rounds to 10 mantissa bits, ties away from zero; bf16 to 7, ties to even") {
    const float ulp_tf32 = std::ldexp(1.0f, -10), ulp_bf16 = std::ldexp(1.0f, -7);  // at 1.0
    CHECK(wmma::__float_to_tf32(1.0f + ulp_tf32 / 4) == 1.0f);
    CHECK(wmma::__float_to_tf32(1.0f + ulp_tf32 / 2) == 1.0f + ulp_tf32);  // a tie: away from zero
    CHECK(wmma::__float_to_tf32(-(1.0f + ulp_tf32 / 2)) == -(1.0f + ulp_tf32));
    CHECK(wmma::__float_to_tf32(1.0f + 3 * ulp_tf32 / 4) == 1.0f + ulp_tf32);
    CHECK(wmma::__float_to_tf32(3.0f) == 3.0f);
    CHECK(std::isinf(wmma::__float_to_tf32(INFINITY)));
    CHECK(std::isnan(wmma::__float_to_tf32(std::nanf(""))));

    CHECK(bf16(1.0f + ulp_bf16 / 2) == 1.0f);                       // a tie: to the even 1.0
    CHECK(bf16(1.0f + 3 * ulp_bf16 / 2) == 1.0f + 2 * ulp_bf16);    // a tie: to the even 1 + 2 ulp
    CHECK(bf16(1.0f + ulp_bf16 / 2 + ulp_bf16 / 64) == 1.0f + ulp_bf16);
    CHECK(bf16(-2.5f) == -2.5f);
    CHECK(std::isnan(bf16(std::nanf(""))));
    CHECK(std::isinf(bf16(INFINITY)));
}

namespace {

// One warp: d = a·b + c for a (16, 8) read column-major, b (8, 16) row-major, c (16, 16)
// column-major; d (16, 16) written row-major. Inputs are not converted to tf32 first, so the
// product uses their truncated tf32 bits, as the hardware does.
__global__ void mma_tf32(const float* a, const float* b, const float* c, float* d) {
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::load_matrix_sync(fc, c, 16, wmma::mem_col_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(d, fc, 16, wmma::mem_row_major);
}

// One warp: d = a·b for bf16 a (32, 16) row-major and b (16, 8) column-major.
__global__ void mma_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, float* d) {
    wmma::fragment<wmma::matrix_a, 32, 8, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 32, 8, 16, __nv_bfloat16, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 32, 8, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(d, fc, 8, wmma::mem_row_major);
}

float truncated_tf32(float x) { return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0xffffe000u); }

// Values with bits below tf32's and bf16's last place, so that rounding and truncation show.
float value(int i) { return float((i * 37) % 23 - 11) / 7.0f; }

}  // namespace

TEST_CASE("a warp's mma_sync is the matrix product of what the fragments hold") {
    alignas(32) float a[16 * 8], b[8 * 16], c[16 * 16], d[16 * 16];
    for (int i = 0; i < 16 * 8; ++i) a[i] = value(i), b[i] = value(i + 200);
    for (int i = 0; i < 16 * 16; ++i) c[i] = value(i + 500);
    launch("mma_tf32", mma_tf32, 1, 32, 0, a, b, c, d);
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 16; ++n) {
            double expected = c[n * 16 + m];  // c is read column-major
            for (int k = 0; k < 8; ++k)
                expected += double(truncated_tf32(a[k * 16 + m])) * double(truncated_tf32(b[k * 16 + n]));
            CHECK(d[m * 16 + n] == doctest::Approx(expected).epsilon(1e-6));
        }

    alignas(32) __nv_bfloat16 ha[32 * 16], hb[16 * 8];
    alignas(32) float hd[32 * 8];
    for (int i = 0; i < 32 * 16; ++i) ha[i] = __float2bfloat16(value(i));
    for (int i = 0; i < 16 * 8; ++i) hb[i] = __float2bfloat16(value(i + 900));
    launch("mma_bf16", mma_bf16, 1, 32, 0, ha, hb, hd);
    for (int m = 0; m < 32; ++m)
        for (int n = 0; n < 8; ++n) {
            double expected = 0;
            for (int k = 0; k < 16; ++k)
                expected += double(__bfloat162float(ha[m * 16 + k])) * double(__bfloat162float(hb[n * 16 + k]));
            CHECK(hd[m * 8 + n] == doctest::Approx(expected).epsilon(1e-6));
        }
}

namespace {

using Tf32A = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;

// mma_sync reached by the two halves of a warp from two call sites.
__global__ void divergent_mma(float* out) {
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
    wmma::fill_fragment(a, 1.0f);
    wmma::fill_fragment(b, 1.0f);
    wmma::fill_fragment(c, 0.0f);
    if (threadIdx.x < 16) {
        wmma::mma_sync(c, a, b, c);
    } else {
        wmma::mma_sync(c, a, b, c);
    }
    out[threadIdx.x] = c.x[0];
}

// Lane 5 returns before the warp loads a fragment.
__global__ void lane_returns(const float* p) {
    if (threadIdx.x == 5) return;
    Tf32A a;
    wmma::load_matrix_sync(a, p, 8);
}

// Each lane loads from p + offset(lane) with leading dimension ldm.
__global__ void load_at(const float* p, int odd_lane_offset, unsigned ldm) {
    Tf32A a;
    wmma::load_matrix_sync(a, p + (threadIdx.x % 2) * odd_lane_offset, ldm);
}

}  // namespace

TEST_CASE("wmma calls that a GPU would get silently wrong are errors") {
    std::vector<float> out(32);
    const std::string divergent = launch_error([&] { launch("divergent_mma", divergent_mma, 1, 32, 0, out.data()); });
    CHECK(divergent.starts_with("cuda emulator: divergent_mma: block (0,0,0): deadlock: threads 0..15 wait at "
                                "wmma::mma_sync (test_emulator_wmma.cpp:"));
    CHECK(divergent.find("threads 16..31 wait at wmma::mma_sync (test_emulator_wmma.cpp:") != std::string::npos);

    alignas(32) float tile[64 * 16] = {};
    const std::string returned = launch_error([&] { launch("lane_returns", lane_returns, 1, 32, 0, tile); });
    CHECK(returned.find("wmma::load_matrix_sync (test_emulator_wmma.cpp:") != std::string::npos);
    CHECK(returned.ends_with("lane 5 of mask 0xffffffff has returned"));

    CHECK(launch_error([&] { launch("load_at", load_at, 1, 32, 0, tile, 0, 8u); }) == "");
    CHECK(launch_error([&] { launch("load_at", load_at, 1, 48, 0, tile, 0, 8u); })
              .ends_with("warp 1 has 16 lanes; wmma needs all 32"));
    CHECK(launch_error([&] { launch("load_at", load_at, 1, 32, 0, tile + 1, 0, 8u); })
              .ends_with("the pointer is not 32-byte aligned"));
    CHECK(launch_error([&] { launch("load_at", load_at, 1, 32, 0, tile, 0, 6u); })
              .ends_with("ldm 6 is not a multiple of 16 bytes"));
    CHECK(launch_error([&] { launch("load_at", load_at, 1, 32, 0, tile, 8, 8u); })
              .find("passes another pointer, ldm or layout than lane 0") != std::string::npos);
}
