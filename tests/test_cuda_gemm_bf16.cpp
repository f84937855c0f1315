// test_cuda_gemm_bf16.cpp — the bf16 tensor-core GEMM (cuda/gemm_bf16.cu, mma.sync m16n8k16),
// in the emulator and, where one answers, on the GPU (tests/cuda_targets.h), against the CPU's
// f32 GEMM on the same bf16 inputs, rounded once to bf16:
// every transpose combination, sizes off the 128×128 tile and the 32-wide K slice, batches with
// padded and broadcast operands, alpha and beta, what BLAS promises not to read, and both
// paths: the cp.async pipeline (operands in aligned 16-byte chunks) and the general one.
//
// Tolerance. The inputs are bf16 values, so their products are exact in f32 on both sides and
// the two f32 sums differ only by the order of the additions: at most ~K·2⁻²⁴ of Σ|terms|,
// covered by 1e-5 × Σ|terms| (the CPU's gemm on |A|, |B|, |C|). Each side then rounds its sum to
// bf16, which keeps 8 significant bits: half an ulp each, 2⁻⁹ of the value, and two f32 sums
// a hair apart can round to neighbouring bf16 values, one ulp, at most 2⁻⁷ of the value. So an
// element may differ from the reference by 2⁻⁷·|reference| + 1e-5·Σ|terms|, and no more.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "tensor/backend.h"
#include "tensor/bf16.h"
#include "tests/cuda_targets.h"
#include "tests/gemm_layout.h"

namespace {

using gg::bfloat16;
using gg::DType;
using gg::testing::cuda_targets;
using gg::testing::CudaTarget;
using gg::testing::describe;
using gg::testing::Gemm;
using gg::testing::Layout;

constexpr double kOrderTol = 1e-5;              // f32 sums in another order, × Σ|terms|
const double kRoundTol = std::ldexp(1.0, -7);  // one bf16 ulp of the result, relative

std::vector<bfloat16> uniform_bf16(int64_t n, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<bfloat16> v(size_t(n), bfloat16(0.0f));
    for (bfloat16& x : v) x = bfloat16(u(rng));
    return v;
}
std::vector<float> widen(const std::vector<bfloat16>& v) { return std::vector<float>(v.begin(), v.end()); }

void cpu_sgemm(const Gemm& g, const Layout& l, const float* A, const float* B, float* C) {
    gg::backend(gg::Device::CPU)
        .gemm(DType::f32, g.batch, g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, A, l.a.ld, l.a.stride, B, l.b.ld,
              l.b.stride, g.beta, C, l.c.ld, l.c.stride);
}

// What one call of the bf16 GEMM did on every target: "" when it matches the reference within
// the stated tolerance and leaves everything outside the result bit for bit as it was, else
// the first difference and where; and whether it took the pipelined path.
struct Outcome {
    std::string mismatch;
    bool pipelined;
};

// A and B are placed `offset` elements into their buffers (1 breaks their 16-byte alignment).
Outcome run(const Gemm& g, float c_fill = 2, float ab_fill = 2, int offset = 0) {
    const Layout l(g);
    std::mt19937 rng(unsigned(g.M * 1000003 + g.N * 1009 + g.K + g.batch));
    std::vector<bfloat16> A = uniform_bf16(l.a.size, rng), B = uniform_bf16(l.b.size, rng),
                          C = uniform_bf16(l.c.size, rng);
    if (c_fill != 2) C.assign(C.size(), bfloat16(c_fill));
    if (ab_fill != 2) A.assign(A.size(), bfloat16(ab_fill)), B.assign(B.size(), bfloat16(ab_fill));
    std::vector<bfloat16> placed_a(size_t(offset), bfloat16(0.0f)), placed_b = placed_a;
    placed_a.insert(placed_a.end(), A.begin(), A.end());
    placed_b.insert(placed_b.end(), B.begin(), B.end());
    const bfloat16 *a = placed_a.data() + offset, *b = placed_b.data() + offset;

    std::vector<float> reference = widen(C), scale(C.size());
    cpu_sgemm(g, l, widen(A).data(), widen(B).data(), reference.data());
    std::vector<float> absA = widen(A), absB = widen(B);
    for (float& x : absA) x = std::abs(x);
    for (float& x : absB) x = std::abs(x);
    for (size_t i = 0; i < C.size(); ++i) scale[i] = std::abs(float(C[i]));
    Gemm magnitude = g;
    magnitude.alpha = std::abs(g.alpha), magnitude.beta = std::abs(g.beta);
    cpu_sgemm(magnitude, l, absA.data(), absB.data(), scale.data());

    std::vector<bool> inside(C.size(), false);
    for (int64_t b = 0; b < g.batch; ++b)
        for (int64_t m = 0; m < g.M; ++m)
            for (int64_t n = 0; n < g.N; ++n) inside[size_t(b * l.c.stride + m * l.c.ld + n)] = true;
    // The host's choice of path, from the pointers' alignment and the strides alone.
    const bool pipelined =
        gg::cuda::emulated::gemm_bf16_pipelines(g.batch, a, l.a.ld, l.a.stride, b, l.b.ld, l.b.stride);
    for (const CudaTarget& t : cuda_targets()) {
        std::vector<bfloat16> got = C;
        gg::testing::Mirror mirror(t);
        const bfloat16 *a_there = mirror.on(placed_a) + offset, *b_there = mirror.on(placed_b) + offset;
        t.table->gemm(DType::bf16, g.batch, g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, a_there, l.a.ld, l.a.stride,
                      b_there, l.b.ld, l.b.stride, g.beta, mirror.on(got), l.c.ld, l.c.stride);
        mirror.back(got);
        for (size_t i = 0; i < C.size(); ++i) {
            const double expected = double(gg::round_to_bf16(reference[i]));
            const bool ok = inside[i] ? std::abs(double(float(got[i])) - expected) <=
                                            kRoundTol * std::abs(expected) + kOrderTol * scale[i]
                                      : got[i].bits == C[i].bits;
            if (!ok)
                return {"on the " + t.name + ": C[" + std::to_string(i) + "] (" + (inside[i] ? "inside" : "outside") +
                            " the result) is " + std::to_string(float(got[i])) +
                            ", the f32 reference rounded to bf16 is " + std::to_string(expected),
                        pipelined};
        }
    }
    return {"", pipelined};
}

std::string mismatch(const Gemm& g, float c_fill = 2, float ab_fill = 2) { return run(g, c_fill, ab_fill).mismatch; }

}  // namespace

TEST_CASE("bf16 gemm matches f32 gemm on the same bf16 inputs: every transpose, sizes off the tile grid") {
    const int64_t shapes[][3] = {{1, 1, 1}, {7, 33, 65}, {33, 65, 7}, {65, 7, 33}, {64, 64, 32}, {130, 72, 100}};
    int variant = 0;
    for (bool trans_a : {false, true})
        for (bool trans_b : {false, true})
            for (const auto& s : shapes) {
                Gemm g{.trans_a = trans_a, .trans_b = trans_b, .M = s[0], .N = s[1], .K = s[2]};
                if (variant++ % 2) g.alpha = -0.75, g.beta = 1.5;  // half the cases accumulate into C
                CAPTURE(describe(g));
                CHECK(mismatch(g) == "");
            }
}

TEST_CASE("batched bf16 gemm: padded leading dimensions, gaps between batches, a broadcast operand") {
    for (bool trans_a : {false, true})
        for (bool trans_b : {false, true}) {
            Gemm padded{.batch = 3, .trans_a = trans_a, .trans_b = trans_b, .M = 33, .N = 7, .K = 65, .alpha = 0.5,
                        .beta = -1.25, .pad_a = 3, .pad_b = 1, .pad_c = 5};
            const Layout tight(padded);
            padded.stride_a = tight.a.stride + 11, padded.stride_b = tight.b.stride + 2,
            padded.stride_c = tight.c.stride + 7;
            const Gemm broadcast_a{.batch = 4, .trans_a = trans_a, .trans_b = trans_b, .M = 7, .N = 65, .K = 33,
                                   .beta = 1, .stride_a = 0};
            const Gemm broadcast_b{.batch = 2, .trans_a = trans_a, .trans_b = trans_b, .M = 65, .N = 33, .K = 7,
                                   .alpha = 2, .stride_b = 0};
            for (const Gemm& g : {padded, broadcast_a, broadcast_b}) {
                CAPTURE(describe(g));
                CHECK(mismatch(g) == "");
            }
        }
}

TEST_CASE("bf16 gemm: beta = 0 never reads C, alpha = 0 never reads A or B, K = 0 scales C") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const Gemm overwrite{.batch = 2, .trans_a = true, .M = 33, .N = 65, .K = 7, .alpha = 1.5, .beta = 0, .pad_c = 2};
    CHECK(mismatch(overwrite, nan) == "");
    const Gemm scale_only{.M = 7, .N = 33, .K = 65, .alpha = 0, .beta = -2};
    CHECK(mismatch(scale_only, 2, nan) == "");
    const Gemm empty_k{.M = 7, .N = 33, .K = 0, .beta = 0.5};
    CHECK(mismatch(empty_k) == "");
}

TEST_CASE("bf16 gemm: a product exact in bf16 comes out exact, so no tolerance hides a wrong layout") {
    // Small integers: every product and sum is exact in f32 and the results (below 256) in
    // bf16, so any element taken from the wrong lane or register shows as an inequality.
    const Gemm g{.M = 16, .N = 8, .K = 16};
    const Layout l(g);
    std::vector<bfloat16> A(size_t(l.a.size)), B(size_t(l.b.size)), C(size_t(l.c.size), bfloat16(0.0f));
    for (size_t i = 0; i < A.size(); ++i) A[i] = bfloat16(float(int(i * 7 % 5) - 2));
    for (size_t i = 0; i < B.size(); ++i) B[i] = bfloat16(float(int(i * 3 % 7) - 3));
    std::vector<float> reference(C.size(), 0.0f);
    cpu_sgemm(g, l, widen(A).data(), widen(B).data(), reference.data());
    for (const CudaTarget& t : cuda_targets()) {
        std::vector<bfloat16> got = C;
        gg::testing::Mirror mirror(t);
        t.table->gemm(DType::bf16, 1, false, false, 16, 8, 16, 1.0, mirror.on(A), l.a.ld, l.a.stride, mirror.on(B), l.b.ld,
                      l.b.stride, 0.0, mirror.on(got), l.c.ld, l.c.stride);
        mirror.back(got);
        for (size_t i = 0; i < C.size(); ++i) {
            CAPTURE(t.name);
            CAPTURE(i);
            CHECK(float(got[i]) == reference[i]);  // integers below 256: exact in bf16
        }
    }
}

TEST_CASE("bf16 gemm: leading dimensions shorter than a row are errors naming the sizes") {
    std::vector<bfloat16> a(16), b(16), c(16);
    CHECK_THROWS_WITH_AS(gg::cuda::emulated::gemm(DType::bf16, 1, false, false, 2, 2, 4, 1.0, a.data(), 3, 8, b.data(),
                                                  2, 8, 0.0, c.data(), 2, 4),
                         doctest::Contains("gemm: lda 3 is shorter than a stored row of 4"), std::invalid_argument);
}

TEST_CASE("bf16 gemm: the cp.async pipeline on aligned operands and the general path on the same problems") {
    // Leading dimensions rounded up to whole 16-byte chunks (8 elements), batch strides too; the
    // sizes still fall off the 128×128 tile, the 32-wide K slice and, for the chunks, off 8, so
    // that chunks past an edge are zero-filled whole and in part. K 200 walks 7 slices through
    // the 4 stages.
    const auto chunks = [](int64_t cols) { return (8 - cols % 8) % 8; };  // pad to a multiple of 8
    const int64_t shapes[][4] = {{1, 7, 33, 65}, {1, 33, 65, 7}, {1, 130, 72, 200}, {3, 64, 64, 32}, {2, 20, 9, 41}};
    int variant = 0;
    for (bool trans_a : {false, true})
        for (bool trans_b : {false, true})
            for (const auto& s : shapes) {
                Gemm g{.batch = s[0], .trans_a = trans_a, .trans_b = trans_b, .M = s[1], .N = s[2], .K = s[3]};
                g.pad_a = chunks(trans_a ? g.M : g.K), g.pad_b = chunks(trans_b ? g.K : g.N), g.pad_c = 3;
                if (variant++ % 2) g.alpha = -0.75, g.beta = 1.5;
                const Layout tight(g);
                g.stride_a = tight.a.stride + 8, g.stride_b = tight.b.stride + 16;
                CAPTURE(describe(g));
                const Outcome aligned = run(g), misaligned = run(g, 2, 2, 1);
                CHECK(aligned.pipelined);
                CHECK(aligned.mismatch == "");
                CHECK_FALSE(misaligned.pipelined);
                CHECK(misaligned.mismatch == "");
            }
    // Any leading dimension or batch stride off a whole chunk takes the general path.
    Gemm odd_ld{.M = 16, .N = 16, .K = 20, .pad_a = 1};
    CHECK_FALSE(run(odd_ld).pipelined);
    Gemm odd_stride{.batch = 2, .M = 16, .N = 16, .K = 16, .stride_b = 16 * 16 + 4};
    CHECK_FALSE(run(odd_stride).pipelined);
    CHECK(run(odd_stride).mismatch == "");
}

TEST_CASE("bf16 gemm: split-K over a long K on both paths, and 16-byte epilogue runs with element tails") {
    // 37 × 24 is one 128×128 tile, so K 800 is cut into 3 ranges of 288 (the last 224), added
    // in order by a second kernel; the operands are padded to whole chunks (pipelined) and run
    // one element off (general). C's rows are whole 16-byte chunks (ldc 24, or 32 for N = 21,
    // whose last run of 8 has 5 columns inside and ends element by element) or not (ldc 25).
    const auto chunks = [](int64_t cols) { return (8 - cols % 8) % 8; };
    int variant = 0;
    for (bool trans_a : {false, true})
        for (bool trans_b : {false, true})
            for (const auto& [N, pad_c] : {std::pair<int64_t, int64_t>{24, 0}, {21, 11}, {24, 1}}) {
                Gemm g{.trans_a = trans_a, .trans_b = trans_b, .M = 37, .N = N, .K = 800, .pad_c = pad_c};
                g.pad_a = chunks(trans_a ? g.M : g.K), g.pad_b = chunks(trans_b ? g.K : g.N);
                if (variant++ % 2) g.alpha = -0.75, g.beta = 1.5;
                CAPTURE(describe(g));
                CHECK(gg::cuda::emulated::gemm_bf16_splits(g.batch, g.M, g.N, g.K) == 3);
                const Outcome aligned = run(g), misaligned = run(g, 2, 2, 1);
                CHECK(aligned.pipelined);
                CHECK(aligned.mismatch == "");
                CHECK_FALSE(misaligned.pipelined);
                CHECK(misaligned.mismatch == "");
            }
    // No split where the tiles fill the GPU, for batches, or for a short K.
    CHECK(gg::cuda::emulated::gemm_bf16_splits(1, 384, 384, 8192) == 29);  // 9 tiles: 261 blocks
    CHECK(gg::cuda::emulated::gemm_bf16_splits(1, 4096, 4096, 8192) == 1);
    CHECK(gg::cuda::emulated::gemm_bf16_splits(2, 37, 24, 800) == 1);
    CHECK(gg::cuda::emulated::gemm_bf16_splits(1, 37, 24, 511) == 1);
    // Without a split: two tiles down, runs of 8 whole (N 72, ldc 72) and with a tail (N 75, ldc 80).
    for (const auto& [N, pad_c] : {std::pair<int64_t, int64_t>{72, 0}, {75, 5}}) {
        Gemm g{.M = 130, .N = N, .K = 40, .alpha = 1.25, .beta = -0.5, .pad_c = pad_c};
        g.pad_a = chunks(g.K), g.pad_b = chunks(g.N);
        CAPTURE(describe(g));
        CHECK(run(g).mismatch == "");
        CHECK(run(g, 2, 2, 1).mismatch == "");
    }
}
