// test_emulator_mma.cpp — the emulator's PTX-level tensor-core instructions (cuda/emulator/mma.h,
// reached through cuda/mma.h): mma.sync m16n8k16 bf16 with registers filled lane by lane from
// the PTX ISA's fragment table (written out again here, independently of the emulator),
// ldmatrix x1/x2/x4 with and without .trans against the element each lane must receive, the two
// together as the bf16 GEMM uses them, and the errors for what a GPU would fault on or hang.
//
// The inputs are small multiples of 1/8 (exact in bf16) and every sum of 16 products of them is
// exact in float, so the results are compared for equality with a scalar reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/emulator_options.h"
#include "tests/launch_error.h"
#include "tests/ldmatrix_probe.h"
#include "cuda/launch.h"
#include "cuda/mma.h"
#include "tensor/bf16.h"

using gg::bfloat16;
using gg::cuda::launch;

namespace {

using gg::testing::launch_error;

uint32_t pair(bfloat16 first, bfloat16 second) { return uint32_t(first.bits) | uint32_t(second.bits) << 16; }

// A (16, 16) row-major, B (16, 8) row-major (element (k, n) at b[k·8 + n]), C and D (16, 8)
// row-major. Each lane builds its registers from the PTX table for m16n8k16 .bf16:
// g = lane / 4, q = lane % 4; a[0] = A(g, 2q..), a[1] = A(g+8, 2q..), a[2] = A(g, 2q+8..),
// a[3] = A(g+8, 2q+8..); b[0] = B(2q.., g), b[1] = B(2q+8.., g); c[i] = C(g + 8(i ≥ 2), 2q + i%2).
__global__ void mma_from_table(const bfloat16* A, const bfloat16* B, const float* C, float* D) {
    const int lane = int(threadIdx.x), g = lane / 4, q = lane % 4;
    const uint32_t a[4] = {pair(A[g * 16 + 2 * q], A[g * 16 + 2 * q + 1]),
                           pair(A[(g + 8) * 16 + 2 * q], A[(g + 8) * 16 + 2 * q + 1]),
                           pair(A[g * 16 + 2 * q + 8], A[g * 16 + 2 * q + 9]),
                           pair(A[(g + 8) * 16 + 2 * q + 8], A[(g + 8) * 16 + 2 * q + 9])};
    const uint32_t b[2] = {pair(B[2 * q * 8 + g], B[(2 * q + 1) * 8 + g]),
                           pair(B[(2 * q + 8) * 8 + g], B[(2 * q + 9) * 8 + g])};
    float c[4], d[4];
    for (int i = 0; i < 4; ++i) c[i] = C[(g + 8 * (i >= 2)) * 8 + 2 * q + i % 2];
    gg::cuda::mma_m16n8k16_bf16(d, a, b, c);
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i >= 2)) * 8 + 2 * q + i % 2] = d[i];
}

// Values exact in bf16 whose products and sums of 16 are exact in float: (i·7 mod 17 − 8) / 8.
std::vector<bfloat16> pattern(int n, int seed) {
    std::vector<bfloat16> v(size_t(n), bfloat16(0.0f));
    for (int i = 0; i < n; ++i) v[size_t(i)] = bfloat16(float((i * 7 + seed) % 17 - 8) / 8);
    return v;
}

std::vector<float> reference(const std::vector<bfloat16>& A, const std::vector<bfloat16>& B,
                             const std::vector<float>& C) {
    std::vector<float> D(16 * 8);
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) {
            float sum = C[size_t(m * 8 + n)];
            for (int k = 0; k < 16; ++k) sum += float(A[size_t(m * 16 + k)]) * float(B[size_t(k * 8 + n)]);
            D[size_t(m * 8 + n)] = sum;
        }
    return D;
}

// ldmatrix x1/x2/x4, plain and .trans: every lane's registers against the PTX ISA's layout
// (the probe and the layout in tests/ldmatrix_probe.h, which the GPU's probe shares).
template <int X, bool Trans>
void check_ldmatrix() {
    std::vector<uint32_t> out(size_t(32 * X));
    launch("ldmatrix_probe", gg::testing::ldmatrix_probe<X, Trans>, 1, 32, 0, out.data());
    for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < X; ++j) {
            const auto want = gg::testing::ldmatrix_expected(Trans, lane, j);
            CAPTURE(lane);
            CAPTURE(j);
            CHECK((out[size_t(lane * X + j)] & 0xffffu) == uint32_t(want.first));
            CHECK((out[size_t(lane * X + j)] >> 16) == uint32_t(want.second));
        }
}

// A (16, 16) row-major and B through shared memory, then ldmatrix into the registers and one
// mma: B stored n-major (B_nk[n][k], plain ldmatrix) or k-major (B_kn[k][n], .trans).
template <bool BKMajor>
__global__ void mma_through_ldmatrix(const bfloat16* A, const bfloat16* B, float* D) {
    GG_SHARED(bfloat16[16][24], As);  // rows padded to 48 bytes: still 16-byte aligned
    GG_SHARED(bfloat16[16][24], Bs);  // B_nk[n][k] (n < 8) or B_kn[k][n]
    const int lane = int(threadIdx.x);
    for (int e = lane; e < 256; e += 32) As[e / 16][e % 16] = A[e];
    for (int e = lane; e < 128; e += 32) {
        const int k = e / 8, n = e % 8;
        if (BKMajor) Bs[k][n] = B[e];
        else Bs[n][k] = B[e];
    }
    __syncwarp();
    uint32_t a[4], b[2];
    gg::cuda::ldmatrix<4>(a, &As[lane % 16][8 * (lane / 16)]);
    if constexpr (BKMajor) gg::cuda::ldmatrix<2, true>(b, &Bs[lane % 16][0]);
    else gg::cuda::ldmatrix<2>(b, &Bs[lane % 8][8 * (lane / 8 % 2)]);
    const float zero[4] = {0, 0, 0, 0};
    float d[4];
    gg::cuda::mma_m16n8k16_bf16(d, a, b, zero);
    const int g = lane / 4, q = lane % 4;
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i >= 2)) * 8 + 2 * q + i % 2] = d[i];
}

__global__ void ldmatrix_misaligned(uint32_t* out) {
    GG_SHARED(bfloat16[8][16], tile);
    for (int e = int(threadIdx.x); e < 128; e += 32) tile[e / 16][e % 16] = bfloat16(1.0f);
    __syncwarp();
    uint32_t r[1];
    gg::cuda::ldmatrix<1>(r, &tile[threadIdx.x % 8][threadIdx.x == 3 ? 4 : 0]);  // lane 3's row 8 bytes in
    out[threadIdx.x] = r[0];
}

__global__ void mma_half_warp(float* D) {
    const uint32_t a[4] = {}, b[2] = {};
    float d[4] = {};
    if (threadIdx.x < 16) gg::cuda::mma_m16n8k16_bf16(d, a, b, d);
    D[threadIdx.x] = d[0];
}

}  // namespace

TEST_CASE("mma.sync m16n8k16 bf16: registers laid out as the PTX table says give A·B + C") {
    const std::vector<bfloat16> A = pattern(16 * 16, 3), B = pattern(16 * 8, 11);
    std::vector<float> C(16 * 8);
    for (int i = 0; i < 16 * 8; ++i) C[size_t(i)] = float(i % 5) - 2.0f;
    std::vector<float> D(16 * 8, -1.0f);
    launch("mma_from_table", mma_from_table, 1, 32, 0, A.data(), B.data(), C.data(), D.data());
    const std::vector<float> expected = reference(A, B, C);
    for (int i = 0; i < 16 * 8; ++i) {
        CAPTURE(i);
        CHECK(D[size_t(i)] == expected[size_t(i)]);
    }
    // The reference is not trivially the input: every row of D differs from C.
    int changed = 0;
    for (int i = 0; i < 16 * 8; ++i) changed += D[size_t(i)] != C[size_t(i)];
    CHECK(changed > 100);
}

TEST_CASE("ldmatrix x1, x2, x4, with and without .trans, hands each lane the PTX layout's elements") {
    check_ldmatrix<1, false>();
    check_ldmatrix<2, false>();
    check_ldmatrix<4, false>();
    check_ldmatrix<1, true>();
    check_ldmatrix<2, true>();
    check_ldmatrix<4, true>();
}

TEST_CASE("ldmatrix then mma.sync: B n-major with plain ldmatrix and k-major with .trans both give A·B") {
    const std::vector<bfloat16> A = pattern(16 * 16, 5), B = pattern(16 * 8, 2);
    const std::vector<float> expected = reference(A, B, std::vector<float>(16 * 8, 0.0f));
    std::vector<float> D(16 * 8, -1.0f);
    launch("mma_through_ldmatrix", mma_through_ldmatrix<false>, 1, 32, 0, A.data(), B.data(), D.data());
    CHECK(D == expected);
    std::fill(D.begin(), D.end(), -1.0f);
    launch("mma_through_ldmatrix", mma_through_ldmatrix<true>, 1, 32, 0, A.data(), B.data(), D.data());
    CHECK(D == expected);
}

TEST_CASE("mma.sync and ldmatrix errors: a misaligned row, a partial warp, a divergent warp") {
    const gg::testing::EmulatorOptions by_id(gg::emu::Schedule::order);  // in reverse a returned lane is seen first
    std::vector<uint32_t> out(64);
    std::vector<float> D(64);
    CHECK(launch_error([&] { launch("ldmatrix_misaligned", ldmatrix_misaligned, 1, 32, 0, out.data()); })
              .find("lane 3's row address is not 16-byte aligned") != std::string::npos);
    CHECK(launch_error([&] { launch("mma_half_warp", mma_half_warp, 1, 16, 0, D.data()); })
              .find("mma.sync") != std::string::npos);
    CHECK(launch_error([&] { launch("mma_half_warp", mma_half_warp, 1, 16, 0, D.data()); })
              .find("needs all 32") != std::string::npos);
    CHECK(launch_error([&] { launch("mma_half_warp", mma_half_warp, 1, 32, 0, D.data()); })
              .find("deadlock") != std::string::npos);
}
