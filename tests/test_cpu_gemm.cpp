// test_cpu_gemm.cpp — the CPU backend's GEMM keeps the reference BLAS's promises on every
// kernel OpenBLAS can pick: β = 0 never reads C, α = 0 (or K = 0) never reads A or B, so NaN
// there never reaches the result, and padding between C's rows is never written.
//
// OpenBLAS picks its kernels per CPU when it loads (DYNAMIC_ARCH), and its SkylakeX and
// Cooperlake kernels multiply A·B by α = 0 instead of skipping them. A result that depends on
// the CPU is a bug that only some machines see, so the promises are checked once with the
// kernels this CPU gets and then again in a child process per core type OpenBLAS can be told
// to use (OPENBLAS_CORETYPE, read when the library loads), each that this CPU can execute.
#include <cblas.h>
#include <doctest/doctest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/backend.h"
#include "tensor/bf16.h"
#include "cpu/gemm.h"
#include "tests/gemm_layout.h"

extern char** environ;

namespace {

using gg::DType;
using gg::testing::describe;
using gg::testing::Gemm;
using gg::testing::Layout;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// C = α·op(A)·op(B) + β·C in double, element by element, reading only what the BLAS reads.
std::vector<double> reference(const Gemm& g, const Layout& l, const std::vector<double>& A,
                              const std::vector<double>& B, std::vector<double> C) {
    for (int64_t i = 0; i < g.batch; ++i)
        for (int64_t m = 0; m < g.M; ++m)
            for (int64_t n = 0; n < g.N; ++n) {
                double sum = 0;
                if (g.alpha != 0)
                    for (int64_t k = 0; k < g.K; ++k) {
                        const double a = A[l.a.offset + i * l.a.stride + (g.trans_a ? k * l.a.ld + m : m * l.a.ld + k)];
                        const double b = B[l.b.offset + i * l.b.stride + (g.trans_b ? n * l.b.ld + k : k * l.b.ld + n)];
                        sum += a * b;
                    }
                double& c = C[l.c.offset + i * l.c.stride + m * l.c.ld + n];
                c = g.alpha * sum + (g.beta == 0 ? 0.0 : g.beta * c);
            }
    return C;
}

// Runs g through the CPU backend in `dtype` with A and B filled by ab_fill (NaN: must not be
// read) or small integers, C by c_fill; returns "" or the first element that differs from the
// reference, padding included (it must keep c_fill). A bfloat16 GEMM with panel > 0 runs
// cpu_gemm_bf16 with float32 copies of at most that many floats each.
std::string mismatch(DType dtype, const Gemm& g, double c_fill, double ab_fill, int64_t panel = 0) {
    const Layout l(g);
    std::vector<double> A(size_t(l.a.size), ab_fill), B(size_t(l.b.size), ab_fill), C(size_t(l.c.size), c_fill);
    if (!std::isnan(ab_fill)) {  // small integers: every product and sum is exact in each dtype
        for (size_t i = 0; i < A.size(); ++i) A[i] = double(int(i * 7 % 5) - 2);
        for (size_t i = 0; i < B.size(); ++i) B[i] = double(int(i * 3 % 7) - 3);
    }
    const std::vector<double> want = reference(g, l, A, B, C);
    const auto run = [&]<class T>() {
        std::vector<T> a(A.begin(), A.end()), b(B.begin(), B.end()), c(C.begin(), C.end());
        if constexpr (std::is_same_v<T, gg::bfloat16>)
            if (panel > 0) {
                gg::cpu_gemm_bf16(g.batch, g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, a.data() + l.a.offset, l.a.ld,
                                  l.a.stride, b.data() + l.b.offset, l.b.ld, l.b.stride, g.beta,
                                  c.data() + l.c.offset, l.c.ld, l.c.stride, panel);
                return std::vector<double>(c.begin(), c.end());
            }
        gg::backend(gg::Device::CPU).gemm(dtype, g.batch, g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha,
                                           a.data() + l.a.offset, l.a.ld, l.a.stride, b.data() + l.b.offset, l.b.ld,
                                           l.b.stride, g.beta, c.data() + l.c.offset, l.c.ld, l.c.stride);
        return std::vector<double>(c.begin(), c.end());
    };
    const std::vector<double> got = dtype == DType::f32    ? run.operator()<float>()
                                    : dtype == DType::f64  ? run.operator()<double>()
                                                           : run.operator()<gg::bfloat16>();
    // Integer sums are exact in float32 in any order; bfloat16 then rounds each once.
    const auto rounded = [&](double x) { return dtype == DType::bf16 ? double(gg::bfloat16(float(x))) : x; };
    for (size_t i = 0; i < got.size(); ++i)
        if (!(got[i] == rounded(want[i])) && !(std::isnan(got[i]) && std::isnan(want[i])))
            return std::string(gg::dtype_name(dtype)) + " " + describe(g) + ": C[" + std::to_string(i) + "] is " +
                   std::to_string(got[i]) + ", want " + std::to_string(rounded(want[i]));
    return "";
}

// The cases, each with one transpose combination per run; batch 1 splits C's rows over
// threads, a batch splits over its matrices (cpu/backend.cpp: cpu_gemm).
void check_contract() {
    for (DType dtype : {DType::f32, DType::f64, DType::bf16})
        for (bool trans_a : {false, true})
            for (bool trans_b : {false, true})
                for (int64_t batch : {1, 3}) {
                    const Gemm overwrite{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 33, .N = 65,
                                         .K = 7, .alpha = 1.5, .beta = 0, .pad_c = 2};
                    CHECK(mismatch(dtype, overwrite, kNaN, 0) == "");
                    const Gemm scale_only{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 7, .N = 33,
                                          .K = 65, .alpha = 0, .beta = -2, .pad_c = 1};
                    CHECK(mismatch(dtype, scale_only, 2, kNaN) == "");
                    const Gemm zero_only{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 20, .N = 9,
                                         .K = 16, .alpha = 0, .beta = 0, .pad_c = 3};
                    CHECK(mismatch(dtype, zero_only, kNaN, kNaN) == "");
                    const Gemm empty_k{.batch = batch, .M = 7, .N = 33, .K = 0, .alpha = 1, .beta = 0.5};
                    CHECK(mismatch(dtype, empty_k, 2, kNaN) == "");
                    const Gemm both{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 17, .N = 40,
                                    .K = 24, .alpha = -0.5, .beta = 0.25, .pad_c = 2};
                    CHECK(mismatch(dtype, both, 4, 0) == "");
                    // At most gg::kFewRows rows of op(A): bfloat16 reads B in place, with a K that
                    // leaves a partial vector and (B not transposed) columns in two blocks.
                    const Gemm few_rows{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 3, .N = 600,
                                        .K = 37, .alpha = -0.5, .beta = 0.25, .pad_c = 2};
                    CHECK(mismatch(dtype, few_rows, 4, 0) == "");
                    const Gemm one_row{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 1, .N = 33,
                                       .K = 65, .alpha = 1.5, .beta = 0, .pad_c = 1};
                    CHECK(mismatch(dtype, one_row, kNaN, 0) == "");
                    const Gemm one_row_scale{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 1, .N = 33,
                                             .K = 65, .alpha = 0, .beta = -2, .pad_c = 1};
                    CHECK(mismatch(dtype, one_row_scale, 2, kNaN) == "");
                }
}

std::string lower(std::string s) {
    std::ranges::transform(s, s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

// Runs this test binary again with OPENBLAS_CORETYPE=core, only the contract's test case;
// returns its exit status (0: every check held) and what it printed goes to ours.
int run_child(const std::string& core) {
    std::vector<std::string> env{"OPENBLAS_CORETYPE=" + core, "GG_EXPECT_OPENBLAS_CORE=" + core};
    for (char** e = environ; *e; ++e)
        if (!std::string(*e).starts_with("OPENBLAS_CORETYPE=") && !std::string(*e).starts_with("GG_EXPECT_"))
            env.push_back(*e);
    std::vector<char*> envp, argv;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string self = "/proc/self/exe", only = "--test-case=the CPU GEMM keeps the BLAS's promises", quiet = "--no-intro";
    argv = {self.data(), only.data(), quiet.data(), nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("the CPU GEMM keeps the BLAS's promises") {
    // In a child run for one core type, first make sure OpenBLAS took it: otherwise the
    // loop below would test the same kernels several times and prove nothing.
    if (const char* want = std::getenv("GG_EXPECT_OPENBLAS_CORE")) REQUIRE(lower(openblas_get_corename()) == lower(want));
    const std::string core = "OpenBLAS core: " + std::string(openblas_get_corename());
    MESSAGE(core);
    check_contract();
}

TEST_CASE("the CPU GEMM keeps the BLAS's promises on every OpenBLAS core type this CPU can run") {
    // The x86-64 kernels OpenBLAS picks among on current CPUs, with the instructions each needs.
    struct Core {
        const char* name;
        bool runs;
    };
    __builtin_cpu_init();
    const Core cores[] = {{"Haswell", bool(__builtin_cpu_supports("avx2"))},
                          {"Zen", bool(__builtin_cpu_supports("avx2"))},
                          {"SkylakeX", bool(__builtin_cpu_supports("avx512f"))},
                          {"Cooperlake", bool(__builtin_cpu_supports("avx512bf16"))},
                          {"Sandybridge", bool(__builtin_cpu_supports("avx"))}};
    int ran = 0;
    for (const Core& core : cores) {
        if (!core.runs) {
            const std::string why = std::string("skipped ") + core.name + ": this CPU lacks its instructions";
            MESSAGE(why);
            continue;
        }
        const std::string name = core.name;
        CAPTURE(name);
        CHECK(run_child(core.name) == 0);
        ++ran;
    }
    CHECK(ran >= 1);
}

// A bfloat16 product larger than a panel runs block by block (cpu/gemm_bf16.cpp): with
// panels of a few hundred floats, these small matrices take every path of that loop: one
// row panel or several, ragged last blocks, op(A) and op(B) transposed or not, β read or not,
// padding between C's rows kept, a batch of such products, and a K longer than a panel.
TEST_CASE("the bfloat16 GEMM gives the same result panel by panel") {
    for (int64_t panel : {64, 200, 1000})
        for (bool trans_a : {false, true})
            for (bool trans_b : {false, true})
                for (int64_t batch : {1, 2}) {
                    CAPTURE(panel);
                    const Gemm overwrite{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 33, .N = 65,
                                         .K = 7, .alpha = 1.5, .beta = 0, .pad_c = 2};
                    CHECK(mismatch(DType::bf16, overwrite, kNaN, 0, panel) == "");
                    const Gemm both{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 17, .N = 40,
                                    .K = 24, .alpha = -0.5, .beta = 0.25, .pad_c = 2};
                    CHECK(mismatch(DType::bf16, both, 4, 0, panel) == "");
                    const Gemm long_k{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 5, .N = 9,
                                      .K = 300, .alpha = 1, .beta = 1, .pad_c = 1};
                    CHECK(mismatch(DType::bf16, long_k, 1, 0, panel) == "");
                    const Gemm scale_only{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 20, .N = 33,
                                          .K = 65, .alpha = 0, .beta = -2, .pad_c = 1};
                    CHECK(mismatch(DType::bf16, scale_only, 2, kNaN, panel) == "");
                }
}
