// test_cuda_attention.cpp — the fused attention kernels (cuda/attention_forward.cu,
// cuda/attention_backward.cu) run in the CUDA emulator against the CPU table on the same
// inputs: O, lse and probs forward; dQ, dK, dV backward, from the CPU's O and lse so that
// each direction is checked on its own.
//
// The emulator switches fibers at every barrier and shuffle, so the shapes stay small; the
// case tagged "bench" (T = 128, D = 64) is skipped by default: run it with --no-skip.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/kernels.h"
#include "tensor/random.h"
#include "tensor/tensor.h"
#include "tests/check.h"

using namespace gg;
using gg::testing::mismatch;

namespace {

struct Case {
    int64_t B, H, Hkv, Tq, Tk, D;
    bool causal;
    int64_t window = 0;
    bool exclude_self = false;
};

using ForwardEntry = decltype(Backend::attention_forward);
using BackwardEntry = decltype(Backend::attention_backward);

struct Inputs {
    AttentionShape shape;
    Tensor Q, K, V, dO;  // (B, H, Tq, D), (B, Hkv, Tk, D) twice, (B, H, Tq, D)
};

Inputs make_inputs(const Case& c, DType dtype, uint64_t seed) {
    Generator gen(seed);
    const double scale = 1 / std::sqrt(double(std::max<int64_t>(c.D, 1)));
    const AttentionShape s{c.B, c.H, c.Hkv, c.Tq, c.Tk, c.D, c.causal, c.window, scale, c.exclude_self};
    return {s, randn({c.B, c.H, c.Tq, c.D}, gen, dtype), randn({c.B, c.Hkv, c.Tk, c.D}, gen, dtype),
            randn({c.B, c.Hkv, c.Tk, c.D}, gen, dtype), randn({c.B, c.H, c.Tq, c.D}, gen, dtype)};
}

struct Forward {
    Tensor O, lse, probs;
};
Forward run_forward(ForwardEntry entry, const Inputs& in, bool with_probs) {
    const AttentionShape& s = in.shape;
    const DType dtype = in.Q.dtype();
    Forward f{Tensor::empty({s.B, s.H, s.Tq, s.D}, dtype), Tensor::empty({s.B, s.H, s.Tq}, dtype), Tensor()};
    View probs{nullptr, dtype};
    if (with_probs) {
        f.probs = Tensor::empty({s.B, s.H, s.Tq, s.Tk}, dtype);
        probs = f.probs.view_desc();
    }
    entry(s, f.O.view_desc(), f.lse.view_desc(), probs, in.Q.view_desc(), in.K.view_desc(), in.V.view_desc());
    return f;
}

struct Backward {
    Tensor dQ, dK, dV;
};
Backward run_backward(BackwardEntry entry, const Inputs& in, const Forward& f) {
    Backward g{Tensor::empty(in.Q.shape(), in.Q.dtype()), Tensor::empty(in.K.shape(), in.K.dtype()),
               Tensor::empty(in.V.shape(), in.V.dtype())};
    entry(in.shape, g.dQ.view_desc(), g.dK.view_desc(), g.dV.view_desc(), in.dO.view_desc(), in.Q.view_desc(),
          in.K.view_desc(), in.V.view_desc(), f.O.view_desc(), f.lse.view_desc(), View{});
    return g;
}

// The emulated kernels give what the CPU gives on this case: each CHECK prints the first
// difference (relative above 1, absolute below).
void check_case(const Case& c, DType dtype) {
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    const Backend& cpu = backend(Device::CPU);
    const Inputs in = make_inputs(c, dtype, 17);
    const Forward want = run_forward(cpu.attention_forward, in, true);
    const Forward got = run_forward(cuda::emulated::attention_forward, in, true);
    CHECK(mismatch(got.O, want.O.to_vector<double>(), tol) == "");
    CHECK(mismatch(got.lse, want.lse.to_vector<double>(), tol) == "");
    CHECK(mismatch(got.probs, want.probs.to_vector<double>(), tol) == "");
    const Backward want_grad = run_backward(cpu.attention_backward, in, want);
    const Backward got_grad = run_backward(cuda::emulated::attention_backward, in, want);
    CHECK(mismatch(got_grad.dQ, want_grad.dQ.to_vector<double>(), tol) == "");
    CHECK(mismatch(got_grad.dK, want_grad.dK.to_vector<double>(), tol) == "");
    CHECK(mismatch(got_grad.dV, want_grad.dV.to_vector<double>(), tol) == "");
}

void check_cases(const std::vector<Case>& cases, const std::vector<DType>& dtypes = {DType::f32, DType::f64}) {
    for (const Case& c : cases)
        for (DType dtype : dtypes) {
            INFO("B ", c.B, ", H ", c.H, ", Hkv ", c.Hkv, ", Tq ", c.Tq, ", Tk ", c.Tk, ", D ", c.D, ", causal ",
                 c.causal, ", window ", c.window, ", exclude_self ", c.exclude_self, ", ", dtype_name(dtype));
            check_case(c, dtype);
        }
}

bool same_bits(const Tensor& a, const Tensor& b) {
    const size_t n = size_t(a.numel()) * dtype_size(a.dtype());
    return a.numel() == b.numel() && std::memcmp(a.view_desc().data, b.view_desc().data, n) == 0;
}

}  // namespace

// Tiles are 32 queries by 32 keys: T = 1, 5, 17 fit one tile, 33 and 70 cross into more.
TEST_CASE("cuda attention: causal and full masks, odd sizes and head sizes") {
    check_cases({
        {1, 1, 1, 1, 1, 1, true},
        {2, 2, 2, 5, 5, 8, true},
        {1, 2, 2, 17, 17, 16, true},
        {1, 2, 2, 33, 33, 3, true},
        {2, 1, 1, 33, 33, 33, true},
        {1, 2, 2, 17, 17, 16, false},
        {1, 1, 1, 33, 33, 8, false},
        {2, 2, 2, 5, 5, 1, false},
    });
}

TEST_CASE("cuda attention: sliding windows and exclude_self") {
    check_cases({
        {1, 2, 2, 17, 17, 8, true, 1},
        {1, 2, 2, 33, 33, 8, true, 3},
        {1, 2, 2, 17, 17, 8, true, 100},  // wider than T: the plain causal mask
        {1, 1, 1, 33, 33, 5, false, 4},   // without causal the window looks both ways
        {1, 2, 2, 33, 33, 8, true, 0, true},
        {1, 2, 2, 17, 17, 8, true, 3, true},
        {1, 1, 1, 70, 70, 8, true, 20},  // the band leaves key tile 0 behind from query 52 on
        {1, 2, 1, 70, 70, 8, false, 20},
    });
}

TEST_CASE("cuda attention: grouped-query heads and a KV cache") {
    check_cases({
        {1, 4, 4, 17, 17, 8, true},
        {1, 4, 2, 33, 33, 3, true},
        {2, 4, 1, 17, 17, 16, true, 5},
        {1, 4, 2, 5, 37, 16, true},          // Tq < Tk: queries at positions 32..36
        {1, 4, 1, 1, 70, 8, true},           // decoding one token against a long cache
        {1, 2, 2, 1, 70, 8, true, 20},
        {1, 2, 1, 1, 40, 8, false},
        {1, 2, 2, 5, 9, 8, true, 0, true},
        {1, 2, 2, 40, 75, 8, true},          // two query tiles against three key tiles
    });
}

TEST_CASE("cuda attention: the largest head sizes, where every lane holds the most columns") {
    check_cases({{1, 2, 1, 33, 33, 128, true}, {1, 1, 1, 20, 40, 100, false, 9}}, {DType::f32});
    check_cases({{1, 2, 1, 33, 33, 64, true}, {1, 1, 1, 20, 40, 50, false, 9}}, {DType::f64});
}

TEST_CASE("cuda attention: empty dims launch nothing and leave dK, dV zero where no query looks") {
    check_cases({
        {0, 2, 2, 5, 5, 8, true},
        {1, 2, 1, 0, 6, 8, true},  // no query: dK = dV = 0
        {1, 2, 2, 3, 3, 0, true},  // D = 0: lse is still log(#visible keys)
    });
}

TEST_CASE("cuda attention: two runs give the same bits") {
    for (DType dtype : {DType::f32, DType::f64}) {
        const Inputs in = make_inputs({2, 4, 2, 33, 40, 16, true, 9}, dtype, 3);
        const Forward a = run_forward(cuda::emulated::attention_forward, in, true);
        const Forward b = run_forward(cuda::emulated::attention_forward, in, true);
        CHECK(same_bits(a.O, b.O));
        CHECK(same_bits(a.lse, b.lse));
        CHECK(same_bits(a.probs, b.probs));
        const Backward ga = run_backward(cuda::emulated::attention_backward, in, a);
        const Backward gb = run_backward(cuda::emulated::attention_backward, in, a);
        CHECK(same_bits(ga.dQ, gb.dQ));
        CHECK(same_bits(ga.dK, gb.dK));
        CHECK(same_bits(ga.dV, gb.dV));
    }
}

TEST_CASE("cuda attention: a head size beyond the kernels' registers is a clear error") {
    for (const auto& [dtype, D, limit] : {std::tuple{DType::f32, 129, "(128)"}, std::tuple{DType::f64, 65, "(64)"}}) {
        const Inputs in = make_inputs({1, 1, 1, 2, 2, D, true}, dtype, 1);
        const std::string what = "head size D = " + std::to_string(D);
        const std::string forward_error = "attention_forward: " + what +
                                          " is more than the CUDA kernels support in " + dtype_name(dtype) + " " +
                                          limit;
        CHECK_THROWS_WITH_AS(run_forward(cuda::emulated::attention_forward, in, false),
                             doctest::Contains(forward_error.c_str()), std::invalid_argument);
        const Forward f{Tensor::empty({1, 1, 2, D}, dtype), Tensor::empty({1, 1, 2}, dtype), Tensor()};
        const std::string backward_error = "attention_backward: " + what;
        CHECK_THROWS_WITH_AS(run_backward(cuda::emulated::attention_backward, in, f),
                             doctest::Contains(backward_error.c_str()), std::invalid_argument);
    }
}

TEST_CASE("bench: T = 128, D = 64, GQA, forward and backward against the CPU" * doctest::skip()) {
    const auto start = std::chrono::steady_clock::now();
    check_cases({{1, 4, 2, 128, 128, 64, true}});
    MESSAGE("f32 and f64, forward and backward, emulator and CPU: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s");
}
