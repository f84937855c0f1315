// test_cuda_gemm_ladder.cpp — every rung of the GEMM teaching ladder (cuda/gemm_ladder/), run
// in the emulator, against the CPU: rungs 1–7 against OpenBLAS's sgemm, the tensor-core rung
// against a double-precision product of the inputs rounded as the tensor cores round them.
// Sizes are odd and off every tile grid; some allow float4 and some do not.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/gemm_ladder/ladder.h"
#include "cuda/launch.h"  // the emulator's tf32 and bf16 rounding
#include "tensor/backend.h"

namespace {

using gg::cuda::Rung;

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
    // round: what the rung does to A and B before multiplying (identity for rungs 1–7).
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

// C from the rung, on copies of the problem's operands placed `offset` floats into their
// buffers (offset 1 breaks the 16-byte alignment float4 needs).
std::vector<float> run_rung(Rung rung, const Problem& p, int offset = 0) {
    std::vector<float> A(offset), B(offset), C(offset);
    A.insert(A.end(), p.A.begin(), p.A.end());
    B.insert(B.end(), p.B.begin(), p.B.end());
    C.insert(C.end(), p.C.begin(), p.C.end());
    gg::cuda::emulated::gemm_ladder(rung, p.s.M, p.s.N, p.s.K, p.alpha, A.data() + offset, B.data() + offset, p.beta,
                                    C.data() + offset);
    return std::vector<float>(C.begin() + offset, C.end());
}

std::string describe(Rung rung, const Problem& p, int offset) {
    return std::string(gg::cuda::rung_name(rung)) + " M " + std::to_string(p.s.M) + " N " + std::to_string(p.s.N) +
           " K " + std::to_string(p.s.K) + " alpha " + std::to_string(p.alpha) + " beta " + std::to_string(p.beta) +
           " offset " + std::to_string(offset);
}

// Odd sizes; sizes with N and K multiples of 4 (the float4 path of rungs 6 and 7) and M not;
// more than one 128×128 block tile.
constexpr Shape kShapes[] = {{1, 1, 1}, {7, 33, 65}, {65, 7, 33}, {33, 65, 7}, {33, 64, 36}, {130, 132, 20}};

}  // namespace

TEST_CASE("rungs 1-7 match the CPU's sgemm") {
    const gg::Backend& cpu = gg::backend(gg::Device::CPU);
    for (Rung rung : gg::cuda::kRungs) {
        if (rung == Rung::tensor_core_tf32 || rung == Rung::tensor_core_bf16) continue;
        unsigned seed = 1;
        for (const Shape& s : kShapes)
            for (float beta : {0.0f, -0.5f}) {
                Problem p = random_problem(s, 1.25f, beta, seed++);
                p.expect([](float x) { return x; });
                std::vector<float> expected = p.C;
                cpu.gemm(gg::DType::f32, 1, false, false, s.M, s.N, s.K, p.alpha, p.A.data(), s.K, 0, p.B.data(),
                         s.N, 0, p.beta, expected.data(), s.N, 0);
                const std::vector<double> cpu_value(expected.begin(), expected.end());
                for (int offset : {0, 1}) {
                    CAPTURE(describe(rung, p, offset));
                    CHECK(mismatch(run_rung(rung, p, offset), cpu_value, p.scale, 1e-5) == "");
                }
            }
    }
}

// Products of rounded inputs are exact in float; what is left is the float additions, at most
// K + 3 roundings (K products, beta·C, alpha, the sum), each of relative size 2⁻²⁴: the error
// bound γ = (K + 3)·2⁻²⁴ of the sum of |terms|, doubled for margin.
TEST_CASE("the tensor-core rungs match a product of inputs rounded to tf32 or bf16") {
    const auto to_tf32 = [](float x) { return nvcuda::wmma::__float_to_tf32(x); };
    const auto to_bf16 = [](float x) { return __bfloat162float(__float2bfloat16(x)); };
    for (Rung rung : {Rung::tensor_core_tf32, Rung::tensor_core_bf16}) {
        unsigned seed = 100;
        for (const Shape& s : kShapes)
            for (float beta : {0.0f, 0.75f}) {
                Problem p = random_problem(s, -1.5f, beta, seed++);
                if (rung == Rung::tensor_core_tf32) p.expect(to_tf32);
                else p.expect(to_bf16);
                const double tol = (s.K + 3) * std::ldexp(1.0, -23);
                CAPTURE(describe(rung, p, 0));
                const std::vector<float> got = run_rung(rung, p);
                CHECK(mismatch(got, p.value, p.scale, tol) == "");
                if (s.K < 32) continue;
                // The rounding is real: the unrounded product is further away than the tolerance.
                p.expect([](float x) { return x; });
                CHECK(mismatch(got, p.value, p.scale, tol) != "");
            }
    }
}

TEST_CASE("gemm_ladder: K = 0 scales C by beta, empty M or N writes nothing, negative sizes throw") {
    for (Rung rung : gg::cuda::kRungs) {
        CAPTURE(gg::cuda::rung_name(rung));
        std::vector<float> C = {1, 2, 3, 4, 5, 6};  // (2, 3)
        gg::cuda::emulated::gemm_ladder(rung, 2, 3, 0, 1, nullptr, nullptr, 2, C.data());
        CHECK(C == std::vector<float>{2, 4, 6, 8, 10, 12});
        gg::cuda::emulated::gemm_ladder(rung, 0, 3, 4, 1, nullptr, nullptr, 2, C.data());
        gg::cuda::emulated::gemm_ladder(rung, 2, 0, 4, 1, nullptr, nullptr, 2, C.data());
        CHECK(C == std::vector<float>{2, 4, 6, 8, 10, 12});
        CHECK_THROWS_AS(gg::cuda::emulated::gemm_ladder(rung, 2, -1, 4, 1, nullptr, nullptr, 2, C.data()),
                        std::invalid_argument);
    }
}
