// test_cuda_gemm_ladder.cpp — every rung of the GEMM teaching ladder (cuda/gemm_ladder/), run
// in the emulator and, where one answers, on the GPU (tests/cuda_targets.h), against the CPU: rungs 1–8 against OpenBLAS's sgemm, the bf16 tensor-core
// rungs 9–10 against a double-precision product of the inputs rounded to bf16. Sizes are odd
// and off every tile grid; some allow the 16-byte paths (float4, bf16 chunks, cp.async) and
// some do not, and operands one element into their buffers force the others.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/build_config.h"  // GG_CUDA_GPU: whether cuda::gpu::gemm_ladder exists
#include "cuda/gemm_ladder/ladder.h"
#include "cuda/gemm_ladder/mma_tiles.h"
#include "tensor/backend.h"
#include "tensor/bf16.h"
#include "tests/cuda_targets.h"

namespace {

using gg::cuda::Rung;
using gg::testing::cuda_targets;
using gg::testing::CudaTarget;

struct Shape {
    int M, N, K;
};

// The problem, and what to expect of it: per element of C (M, N), the exact result of the
// inputs as given (value) and the sum of the magnitudes of its terms (scale), in double.
struct Problem {
    Shape s;
    float alpha, beta;
    std::vector<float> A, B, C;  // (M, K), (K, N), (M, N)

    std::vector<double> value, scale;
    // round: what the rung does to A and B before multiplying (identity for rungs 1–8).
    template <class Round>
    void expect(Round round) {
        value.assign(C.size(), 0), scale.assign(C.size(), 0);
        for (int m = 0; m < s.M; ++m)
            for (int n = 0; n < s.N; ++n) {
                double sum = 0, magnitude = 0;
                for (int k = 0; k < s.K; ++k) {
                    const double term = double(round(A[m * s.K + k])) * double(round(B[k * s.N + n]));
                    sum += term, magnitude += std::abs(term);
                }
                const double c = beta == 0 ? 0 : double(C[m * s.N + n]);
                value[m * s.N + n] = double(alpha) * sum + double(beta) * c;
                scale[m * s.N + n] = std::abs(double(alpha)) * magnitude + std::abs(double(beta) * c);
            }
    }
};

Problem random_problem(Shape s, float alpha, float beta, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    Problem p{s, alpha, beta, std::vector<float>(size_t(s.M) * s.K), std::vector<float>(size_t(s.K) * s.N),
              std::vector<float>(size_t(s.M) * s.N), {}, {}};
    for (auto* v : {&p.A, &p.B, &p.C})
        for (float& x : *v) x = u(rng);
    // beta = 0 must not read C: fill it with NaN, which any read would carry into the result.
    if (beta == 0) p.C.assign(p.C.size(), std::numeric_limits<float>::quiet_NaN());
    return p;
}

// "" when |got − expected| ≤ tol · scale for every element, else the first that is not.
std::string mismatch(const std::vector<float>& got, const std::vector<double>& expected,
                     const std::vector<double>& scale, double tol) {
    for (size_t i = 0; i < got.size(); ++i)
        if (!(std::abs(double(got[i]) - expected[i]) <= tol * scale[i]))
            return "C[" + std::to_string(i) + "] is " + std::to_string(got[i]) + ", expected " +
                   std::to_string(expected[i]);
    return "";
}

// The rung on target t: the GPU build's gemm_ladder or the emulated build's, on pointers where t
// reads them.
template <class T>
void gemm_ladder([[maybe_unused]] const CudaTarget& t, Rung rung, int M, int N, int K, float alpha, const T* A, const T* B, float beta,
                 float* C) {
#if GG_CUDA_GPU
    if (t.gpu) return gg::cuda::gpu::gemm_ladder(rung, M, N, K, alpha, A, B, beta, C);
#endif
    gg::cuda::emulated::gemm_ladder(rung, M, N, K, alpha, A, B, beta, C);
}

// C from the rung on target t, on copies of the problem's operands placed `offset` elements
// into their buffers (offset 1 breaks the 16-byte alignment of float4 and of bf16 chunks), A
// and B rounded to bf16 for the rungs that take bf16.
std::vector<float> run_rung(const CudaTarget& t, Rung rung, const Problem& p, int offset = 0) {
    std::vector<float> C(offset);
    C.insert(C.end(), p.C.begin(), p.C.end());
    const auto placed = [&]<class T>(const std::vector<float>& x, T) {
        std::vector<T> out(size_t(offset), T(0.0f));
        for (float v : x) out.push_back(T(v));
        return out;
    };
    gg::testing::Mirror mirror(t);
    if (gg::cuda::takes_bf16(rung)) {
        const auto A = placed(p.A, gg::bfloat16()), B = placed(p.B, gg::bfloat16());
        gemm_ladder(t, rung, p.s.M, p.s.N, p.s.K, p.alpha, mirror.on(A) + offset, mirror.on(B) + offset, p.beta,
                    mirror.on(C) + offset);
    } else {
        const auto A = placed(p.A, 0.0f), B = placed(p.B, 0.0f);
        gemm_ladder(t, rung, p.s.M, p.s.N, p.s.K, p.alpha, mirror.on(A) + offset, mirror.on(B) + offset, p.beta,
                    mirror.on(C) + offset);
    }
    mirror.back(C);
    return std::vector<float>(C.begin() + offset, C.end());
}

std::string describe(Rung rung, const Problem& p, int offset) {
    return std::string(gg::cuda::rung_name(rung)) + " M " + std::to_string(p.s.M) + " N " + std::to_string(p.s.N) +
           " K " + std::to_string(p.s.K) + " alpha " + std::to_string(p.alpha) + " beta " + std::to_string(p.beta) +
           " offset " + std::to_string(offset);
}

// Odd sizes; sizes with N and K multiples of 4 (the float4 path of rungs 6–8) and M not; N and
// K multiples of 8 (the chunks and cp.async of rungs 9–10) with K past 4 slices of 32 and not
// a multiple of 32, so that rung 10's 4 stages wrap around; more than one 128×128 block tile.
constexpr Shape kShapes[] = {{1, 1, 1},    {7, 33, 65},    {65, 7, 33},  {33, 65, 7},  
                             {33, 64, 36}, {130, 132, 20}, {17, 40, 48}, {9, 136, 168}};

}  // namespace

TEST_CASE("rungs 1-8 match the CPU's sgemm") {
    const gg::Backend& cpu = gg::backend(gg::Device::CPU);
    for (Rung rung : gg::cuda::kRungs) {
        if (gg::cuda::takes_bf16(rung)) continue;
        unsigned seed = 1;
        for (const Shape& s : kShapes)
            for (float beta : {0.0f, -0.5f}) {
                Problem p = random_problem(s, 1.25f, beta, seed++);
                p.expect([](float x) { return x; });
                std::vector<float> expected = p.C;
                cpu.gemm(gg::DType::f32, 1, false, false, s.M, s.N, s.K, p.alpha, p.A.data(), s.K, 0, p.B.data(),
                         s.N, 0, p.beta, expected.data(), s.N, 0);
                const std::vector<double> cpu_value(expected.begin(), expected.end());
                for (const CudaTarget& t : cuda_targets())
                    for (int offset : {0, 1}) {
                        CAPTURE(t.name);
                        CAPTURE(describe(rung, p, offset));
                        CHECK(mismatch(run_rung(t, rung, p, offset), cpu_value, p.scale, 1e-5) == "");
                    }
            }
    }
}

// Products of bf16 inputs are exact in float; what is left is the float additions, at most
// K + 3 roundings (K products, beta·C, alpha, the sum), each of relative size 2⁻²⁴: the error
// bound γ = (K + 3)·2⁻²⁴ of the sum of |terms|, doubled for margin.
TEST_CASE("the tensor-core rungs 9-10 match a product of inputs rounded to bf16") {
    for (Rung rung : {Rung::tensor_cores, Rung::async_pipeline}) {
        unsigned seed = 100;
        for (const Shape& s : kShapes)
            for (float beta : {0.0f, 0.75f}) {
                Problem p = random_problem(s, -1.5f, beta, seed++);
                p.expect(gg::round_to_bf16);
                const double tol = (s.K + 3) * std::ldexp(1.0, -23);
                for (const CudaTarget& t : cuda_targets())
                    for (int offset : {0, 1}) {
                        CAPTURE(t.name);
                        CAPTURE(describe(rung, p, offset));
                        const std::vector<float> got = run_rung(t, rung, p, offset);
                        CHECK(mismatch(got, p.value, p.scale, tol) == "");
                    }
                if (s.K < 32) continue;
                // The rounding is real: the unrounded product is further away than the tolerance.
                p.expect([](float x) { return x; });
                CHECK(mismatch(run_rung(cuda_targets().front(), rung, p), p.value, p.scale, tol) != "");
            }
    }
}

TEST_CASE("gemm_ladder: K = 0 scales C by beta, empty M or N writes nothing, negative sizes throw") {
    for (const CudaTarget& t : cuda_targets())
        for (Rung rung : gg::cuda::kRungs) {
            CAPTURE(t.name);
            CAPTURE(gg::cuda::rung_name(rung));
            // The rung's own input type; the other is refused by name. C where t reads it, and back.
            const auto run = [&](int M, int N, int K, std::vector<float>& C, bool bf16) {
                gg::testing::Mirror mirror(t);
                if (bf16)
                    gemm_ladder<gg::bfloat16>(t, rung, M, N, K, 1, nullptr, nullptr, 2, mirror.on(C));
                else
                    gemm_ladder<float>(t, rung, M, N, K, 1, nullptr, nullptr, 2, mirror.on(C));
                mirror.back(C);
            };
            const bool bf16 = gg::cuda::takes_bf16(rung);
            std::vector<float> C = {1, 2, 3, 4, 5, 6};  // (2, 3)
            run(2, 3, 0, C, bf16);
            CHECK(C == std::vector<float>{2, 4, 6, 8, 10, 12});
            run(0, 3, 4, C, bf16);
            run(2, 0, 4, C, bf16);
            CHECK(C == std::vector<float>{2, 4, 6, 8, 10, 12});
            CHECK_THROWS_AS(run(2, -1, 4, C, bf16), std::invalid_argument);
            const char* refusal = bf16 ? "takes bf16 A and B, given f32" : "takes f32 A and B, given bf16";
            CHECK_THROWS_WITH_AS(run(2, 3, 4, C, !bf16), doctest::Contains(refusal), std::invalid_argument);
        }
}

namespace {

// A slice stored row after row as it is, for contrast with the two layouts of mma_tiles.h.
template <int kRows, int kCols>
struct PlainRows {
    static constexpr int kChunks = kRows * kCols / 8;
    static int chunk(int row, int col) { return row * (kCols / 8) + col / 8; }
};

// Whether the 8 chunks of each set fall in 8 different bank groups (chunk index mod 8).
bool distinct_groups(const std::vector<std::set<int>>& accesses) {
    for (const std::set<int>& chunks : accesses) {
        std::set<int> groups;
        for (int chunk : chunks) groups.insert(chunk % 8);
        if (groups.size() != 8) return false;
    }
    return true;
}

// Where a layout of a (kRows, kCols) bf16 slice puts the chunks that 8 lanes reading or
// writing 16 bytes each touch together. ldmatrix: one chunk column of 8 consecutive rows.
template <class Layout, int kRows, int kCols>
std::vector<std::set<int>> ldmatrix_reads() {
    std::vector<std::set<int>> reads;
    for (int r0 = 0; r0 < kRows; r0 += 8)
        for (int c = 0; c < kCols; c += 8) {
            reads.emplace_back();
            for (int r = r0; r < r0 + 8; ++r) reads.back().insert(Layout::chunk(r, c));
        }
    return reads;
}
// The copies into the slice: chunks 8j .. 8j + 7 in the order threads take them, row after row.
template <class Layout, int kRows, int kCols>
std::vector<std::set<int>> copy_writes() {
    constexpr int row_chunks = kCols / 8;
    std::vector<std::set<int>> writes;
    for (int e0 = 0; e0 < kRows * row_chunks; e0 += 8) {
        writes.emplace_back();
        for (int e = e0; e < e0 + 8; ++e) writes.back().insert(Layout::chunk(e / row_chunks, 8 * (e % row_chunks)));
    }
    return writes;
}
// Whether the layout gives every chunk its own place inside the array.
template <class Layout, int kRows, int kCols>
bool one_to_one() {
    std::set<int> places;
    for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < kCols; c += 8) places.insert(Layout::chunk(r, c));
    return int(places.size()) == kRows * kCols / 8 && *places.begin() >= 0 && *places.rbegin() < Layout::kChunks;
}

}  // namespace

TEST_CASE("shared-memory layouts of rungs 9-10 and the bf16 GEMM: ldmatrix, and the swizzle's copies, conflict-free") {
    using namespace gg::cuda::emulated::ladder;
    using PaddedA = PaddedRows<128, 32>;  // A's slice (128, 32) and B's (32, 128), in each layout
    using PaddedB = PaddedRows<32, 128>;
    using SwizzledA = SwizzledRows<128, 32>;
    using SwizzledB = SwizzledRows<32, 128>;
    CHECK(one_to_one<PaddedA, 128, 32>());
    CHECK(one_to_one<PaddedB, 32, 128>());
    CHECK(one_to_one<SwizzledA, 128, 32>());
    CHECK(one_to_one<SwizzledB, 32, 128>());
    CHECK(distinct_groups(ldmatrix_reads<PaddedA, 128, 32>()));
    CHECK(distinct_groups(ldmatrix_reads<PaddedB, 32, 128>()));
    CHECK(distinct_groups(ldmatrix_reads<SwizzledA, 128, 32>()));
    CHECK(distinct_groups(ldmatrix_reads<SwizzledB, 32, 128>()));
    CHECK(distinct_groups(copy_writes<SwizzledA, 128, 32>()));
    CHECK(distinct_groups(copy_writes<SwizzledB, 32, 128>()));
    CHECK(distinct_groups(copy_writes<PaddedB, 32, 128>()));
    // The same swizzle (cuda/swizzle.h) on the bf16 GEMM's slices of 64 rows of 4 chunks and 32
    // rows of 8.
    CHECK(one_to_one<SwizzledRows<64, 32>, 64, 32>());
    CHECK(one_to_one<SwizzledRows<32, 64>, 32, 64>());
    CHECK(distinct_groups(ldmatrix_reads<SwizzledRows<64, 32>, 64, 32>()));
    CHECK(distinct_groups(ldmatrix_reads<SwizzledRows<32, 64>, 32, 64>()));
    CHECK(distinct_groups(copy_writes<SwizzledRows<64, 32>, 64, 32>()));
    CHECK(distinct_groups(copy_writes<SwizzledRows<32, 64>, 32, 64>()));
    // Padding costs A's copies a 2-way conflict: two rows of 4 chunks and the pad between
    // them span 9 chunks, so the first and the last share a group.
    CHECK_FALSE(distinct_groups(copy_writes<PaddedA, 128, 32>()));
    // The control: rows stored as they are put a chunk column of 8 rows in 2 (A) or 1 (B) groups.
    CHECK_FALSE(distinct_groups(ldmatrix_reads<PlainRows<128, 32>, 128, 32>()));
    CHECK_FALSE(distinct_groups(ldmatrix_reads<PlainRows<32, 128>, 32, 128>()));
}
