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
#include <stdexcept>
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
// cpu_gemm_bf16 with float32 copies of at most that many floats each. With `specials`, op(A)'s
// element (1, 0) is NaN and op(B)'s (1, 2) is +infinity: row 1 of C must be NaN, and column 2
// infinite, or NaN where it met a zero (the reference's own IEEE arithmetic says which).
std::string mismatch(DType dtype, const Gemm& g, double c_fill, double ab_fill, int64_t panel = 0,
                     bool specials = false) {
    const Layout l(g);
    std::vector<double> A(size_t(l.a.size), ab_fill), B(size_t(l.b.size), ab_fill), C(size_t(l.c.size), c_fill);
    if (!std::isnan(ab_fill)) {  // small integers: every product and sum is exact in each dtype
        for (size_t i = 0; i < A.size(); ++i) A[i] = double(int(i * 7 % 5) - 2);
        for (size_t i = 0; i < B.size(); ++i) B[i] = double(int(i * 3 % 7) - 3);
    }
    if (specials) {
        A[size_t(l.a.offset + (g.trans_a ? 0 * l.a.ld + 1 : 1 * l.a.ld + 0))] = kNaN;
        B[size_t(l.b.offset + (g.trans_b ? 2 * l.b.ld + 1 : 1 * l.b.ld + 2))] = std::numeric_limits<double>::infinity();
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
void check_contract(std::initializer_list<DType> dtypes = {DType::f32, DType::f64, DType::bf16}) {
    for (DType dtype : dtypes)
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
                    // NaN and infinity propagate as IEEE arithmetic says, on every path
                    for (int64_t M : {3, 17}) {
                        const Gemm special{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = M, .N = 40,
                                           .K = 24, .alpha = 1.5, .beta = 0.5, .pad_c = 1};
                        CHECK(mismatch(dtype, special, 4, 0, 0, true) == "");
                    }
                    // Padded rows in A and B, an operand shared by the whole batch (stride 0),
                    // and matrices further apart than they need to be.
                    const Gemm padded{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 19, .N = 37,
                                      .K = 29, .alpha = 2, .beta = 0, .pad_a = 3, .pad_b = 5, .pad_c = 2};
                    CHECK(mismatch(dtype, padded, kNaN, 0) == "");
                    const Gemm shared_b{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 12, .N = 21,
                                        .K = 18, .alpha = 1, .beta = 0, .pad_a = 1, .stride_b = 0};
                    CHECK(mismatch(dtype, shared_b, kNaN, 0) == "");
                    const Gemm shared_a{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 12, .N = 21,
                                        .K = 18, .alpha = 1, .beta = 1, .stride_a = 0};
                    CHECK(mismatch(dtype, shared_a, 3, 0) == "");
                    const Gemm spaced{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 9, .N = 10,
                                      .K = 11, .alpha = 1, .beta = 0, .stride_a = 200, .stride_b = 150,
                                      .stride_c = 120};
                    CHECK(mismatch(dtype, spaced, kNaN, 0) == "");
                }
}

std::string lower(std::string s) {
    std::ranges::transform(s, s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

// Runs this test binary again with the variables `set` (NAME=value) in its environment, only
// the test case `test_case`; returns its exit status (0: every check held) and what it printed
// goes to ours.
int run_child(const std::vector<std::string>& set, const std::string& test_case) {
    std::vector<std::string> env = set;
    for (char** e = environ; *e; ++e)
        if (std::ranges::none_of(set, [&](const std::string& s) {
                return std::string(*e).starts_with(s.substr(0, s.find('=') + 1));
            }))
            env.push_back(*e);
    std::vector<char*> envp, argv;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string self = "/proc/self/exe", only = "--test-case=" + test_case, quiet = "--no-intro";
    argv = {self.data(), only.data(), quiet.data(), nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Whether this CPU and this build have the bfloat16 GEMM's hardware path, whichever path the
// environment (GATEDGRAD_BF16_GEMM) chose for the process.
bool hardware_here() {
    const bool was = gg::allow_bf16_hardware(true);
    const bool here = gg::bf16_gemm_on_hardware();
    gg::allow_bf16_hardware(was);
    return here;
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
        CHECK(run_child({"OPENBLAS_CORETYPE=" + name, "GG_EXPECT_OPENBLAS_CORE=" + name},
                        "the CPU GEMM keeps the BLAS's promises") == 0);
        ++ran;
    }
    CHECK(ran >= 1);
}

// A bfloat16 product larger than a panel runs block by block (cpu/gemm_bf16.cpp), on the
// widened path and on the hardware path alike: with panels of a few hundred floats, these
// small matrices take every path of those loops: one row panel or several, ragged last blocks,
// op(A) and op(B) transposed or not, β read or not, padding between C's rows kept, a batch of
// such products, and a K longer than a panel.
TEST_CASE("the bfloat16 GEMM gives the same result panel by panel") {
    for (bool hardware : {false, true}) {
        if (hardware && !hardware_here()) continue;
        CAPTURE(hardware);
        const bool was = gg::allow_bf16_hardware(hardware);
        for (int64_t panel : {64, 200, 1000})
            for (bool trans_a : {false, true})
                for (bool trans_b : {false, true})
                    for (int64_t batch : {1, 2}) {
                        CAPTURE(panel);
                        const Gemm overwrite{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 33,
                                             .N = 65, .K = 7, .alpha = 1.5, .beta = 0, .pad_c = 2};
                        CHECK(mismatch(DType::bf16, overwrite, kNaN, 0, panel) == "");
                        const Gemm both{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 17, .N = 40,
                                        .K = 24, .alpha = -0.5, .beta = 0.25, .pad_c = 2};
                        CHECK(mismatch(DType::bf16, both, 4, 0, panel) == "");
                        const Gemm long_k{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 5, .N = 9,
                                          .K = 300, .alpha = 1, .beta = 1, .pad_c = 1};
                        CHECK(mismatch(DType::bf16, long_k, 1, 0, panel) == "");
                        const Gemm scale_only{.batch = batch, .trans_a = trans_a, .trans_b = trans_b, .M = 20,
                                              .N = 33, .K = 65, .alpha = 0, .beta = -2, .pad_c = 1};
                        CHECK(mismatch(DType::bf16, scale_only, 2, kNaN, panel) == "");
                    }
        gg::allow_bf16_hardware(was);
    }
}

// Where the CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX) and the build has oneDNN,
// a bfloat16 GEMM of more than gg::kFewRows rows runs there (cpu/gemm_dnnl.cpp); elsewhere it
// widens to float32 (cpu/gemm_bf16.cpp). Both paths must keep the same contract, so the
// contract runs on each, the widened one forced as it is on a CPU without the instructions.
TEST_CASE("the bfloat16 GEMM keeps the contract on the CPU's bfloat16 instructions and without them") {
    const bool hardware = hardware_here();
    const std::string paths = hardware ? "this CPU multiplies bfloat16 in hardware: both paths"
                                       : "no bfloat16 instructions here (or no oneDNN in the build): the widened path only";
    MESSAGE(paths);
    for (bool allowed : {true, false}) {
        CAPTURE(allowed);
        const bool was = gg::allow_bf16_hardware(allowed);
        CHECK(gg::bf16_gemm_on_hardware() == (allowed && hardware));
        check_contract({DType::bf16});
        gg::allow_bf16_hardware(was);
    }
}

namespace {

// One bfloat16 GEMM on random operands through the CPU backend, hardware allowed or not, and
// how far it is from the float64 product of the same bfloat16 values, in units of what the
// contract allows each element: half a bfloat16 step of the exact result for C's rounding,
// plus float32's rounding of K sums (K·2⁻²⁴·Σ|a·b|, the textbook bound for any order).
double worst_error(const Gemm& g, bool hardware, uint64_t seed) {
    const Layout l(g);
    std::vector<gg::bfloat16> a(size_t(l.a.size)), b(size_t(l.b.size)), c(size_t(l.c.size));
    uint64_t state = seed;
    const auto uniform = [&] {  // in (-1, 1), from a 64-bit LCG's high bits
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return double(state >> 11) / double(1ull << 53) * 2 - 1;
    };
    for (auto& x : a) x = gg::bfloat16(float(uniform()));
    for (auto& x : b) x = gg::bfloat16(float(uniform() * 4));
    for (auto& x : c) x = gg::bfloat16(float(uniform()));
    const std::vector<gg::bfloat16> c0 = c;
    const bool was = gg::allow_bf16_hardware(hardware);
    gg::backend(gg::Device::CPU).gemm(DType::bf16, g.batch, g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha,
                                       a.data() + l.a.offset, l.a.ld, l.a.stride, b.data() + l.b.offset, l.b.ld,
                                       l.b.stride, g.beta, c.data() + l.c.offset, l.c.ld, l.c.stride);
    gg::allow_bf16_hardware(was);
    double worst = 0;
    for (int64_t i = 0; i < g.batch; ++i)
        for (int64_t m = 0; m < g.M; ++m)
            for (int64_t n = 0; n < g.N; ++n) {
                double sum = 0, magnitude = 0;
                for (int64_t k = 0; k < g.K; ++k) {
                    const double x = float(a[size_t(l.a.offset + i * l.a.stride +
                                                    (g.trans_a ? k * l.a.ld + m : m * l.a.ld + k))]);
                    const double y = float(b[size_t(l.b.offset + i * l.b.stride +
                                                    (g.trans_b ? n * l.b.ld + k : k * l.b.ld + n))]);
                    sum += x * y;
                    magnitude += std::abs(x * y);
                }
                const size_t at = size_t(l.c.offset + i * l.c.stride + m * l.c.ld + n);
                const double want = g.alpha * sum + g.beta * double(float(c0[at]));
                const double allowed = std::abs(want) * 0x1p-8 +
                                       (std::abs(g.alpha) * magnitude + std::abs(g.beta * float(c0[at]))) *
                                           double(g.K + 2) * 0x1p-24 * 2;  // ×2: C's bfloat16 step grows with it
                worst = std::max(worst, std::abs(double(float(c[at])) - want) / allowed);
            }
    return worst;
}

}  // namespace

// The same on random values, where sums are inexact: every shape class the library sends (a
// Linear's x·Wᵀ, its gradients' transposes, attention's batched products, a decoding step's
// few rows, a product larger than a panel), each path within the contract's rounding of the
// float64 result.
TEST_CASE("the bfloat16 GEMM's two paths both round within the contract on random values") {
    const Gemm shapes[] = {
        {.trans_b = true, .M = 96, .N = 80, .K = 200},                 // x·Wᵀ
        {.trans_a = true, .M = 64, .N = 48, .K = 150},                 // dW = dyᵀ·x
        {.M = 70, .N = 90, .K = 33},                                   // dx = dy·W
        {.batch = 6, .trans_b = true, .M = 32, .N = 32, .K = 16},      // attention's q·kᵀ
        {.batch = 6, .M = 32, .N = 16, .K = 32},                       // and p·v
        {.trans_b = true, .M = 3, .N = 300, .K = 64},                  // a decoding step
        {.M = 300, .N = 700, .K = 96, .alpha = 0.5, .beta = -1.5, .pad_a = 2, .pad_b = 1, .pad_c = 3},
    };
    const bool hardware = hardware_here();
    for (const Gemm& g : shapes) {
        const std::string shape = describe(g);
        CAPTURE(shape);
        for (bool allowed : {false, true}) {
            if (allowed && !hardware) continue;
            CAPTURE(allowed);
            CHECK(worst_error(g, allowed, 7) <= 1.0);
        }
    }
}

// GATEDGRAD_BF16_GEMM picks the path for a whole process, read once: in a child run per value,
// the path it names is the one taken (GG_EXPECT_BF16_GEMM says which the child should see).
TEST_CASE("GATEDGRAD_BF16_GEMM names the bfloat16 GEMM's path") {
    if (const char* want = std::getenv("GG_EXPECT_BF16_GEMM")) {
        const std::string expected = want;
        if (expected == "refused") {
            CHECK_THROWS_WITH_AS(gg::bf16_gemm_on_hardware(), doctest::Contains("GATEDGRAD_BF16_GEMM="),
                                 std::invalid_argument);
        } else {
            CHECK(gg::bf16_gemm_on_hardware() == (expected == "hardware"));
        }
        return;
    }
    const bool hardware = hardware_here();
    const std::string self = "GATEDGRAD_BF16_GEMM names the bfloat16 GEMM's path";
    CHECK(run_child({"GATEDGRAD_BF16_GEMM=widened", "GG_EXPECT_BF16_GEMM=widened"}, self) == 0);
    CHECK(run_child({"GATEDGRAD_BF16_GEMM=hardware", std::string("GG_EXPECT_BF16_GEMM=") +
                                                         (hardware ? "hardware" : "refused")}, self) == 0);
    CHECK(run_child({"GATEDGRAD_BF16_GEMM=fast", "GG_EXPECT_BF16_GEMM=refused"}, self) == 0);
}

// The one place the paths differ by design: the bfloat16 instructions take a subnormal operand
// (below 2⁻¹²⁶ ≈ 1.2·10⁻³⁸ in magnitude) as zero, where the widened path multiplies it exactly.
// Weights and activations never live there; the test keeps docs/mixed-precision.md's word true.
TEST_CASE("the bfloat16 instructions take subnormal operands as zero; the widened path does not") {
    constexpr int64_t n = 8;  // more than gg::kFewRows rows, so the hardware path takes it
    const float tiny = 0x1p-130f;  // a subnormal, exact in bfloat16
    for (bool allowed : {false, true}) {
        if (allowed && !hardware_here()) continue;
        CAPTURE(allowed);
        std::vector<gg::bfloat16> a(n * n, gg::bfloat16(0.0f)), b(n * n, gg::bfloat16(0.0f)), c(n * n);
        a[0] = gg::bfloat16(tiny);
        a[n] = gg::bfloat16(0x1p-100f);  // row 1: a normal operand, same product
        b[0] = gg::bfloat16(0x1p100f);
        b[1] = gg::bfloat16(0x1p70f);
        const bool was = gg::allow_bf16_hardware(allowed);
        gg::cpu_gemm_bf16(1, false, false, n, n, n, 1.0, a.data(), n, 0, b.data(), n, 0, 0.0, c.data(), n, 0);
        gg::allow_bf16_hardware(was);
        CHECK(float(c[0]) == (allowed ? 0.0f : 0x1p-30f));
        CHECK(float(c[n]) == 1.0f);
        CHECK(float(c[n + 1]) == 0x1p-30f);
    }
}
