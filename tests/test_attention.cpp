// Attention: the fused kernel against a plain composition of ops, gradients by finite
// differences for every GatedAttention option, and KV-cache decoding against the full pass.
#include <doctest/doctest.h>

#include <cmath>

#include "gatedgrad.h"
#include "tests/check.h"

using namespace gg;
using gg::testing::max_abs_diff;
using namespace gg::nn;

namespace {

// softmax(Q Kᵀ · scale + mask) V from separate ops, with GQA by repeating kv heads.
Tensor naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, int64_t window,
                       bool exclude_self = false) {
    const int64_t H = q.size(1), Tq = q.size(2), Tk = k.size(2), group = H / k.size(1);
    const Tensor kk = repeat_interleave(k, group, 1), vv = repeat_interleave(v, group, 1);
    Tensor scores = matmul(q, kk.transpose(-1, -2)) / std::sqrt(double(q.size(3)));
    // Query i is at position Tk − Tq + i.
    const Tensor pos_q = arange(double(Tk - Tq), double(Tk), 1, DType::i64).unsqueeze(1);
    const Tensor pos_k = arange(Tk).unsqueeze(0);
    Tensor hidden = zeros({Tq, Tk}, DType::i64);
    if (causal) hidden = maximum(hidden, gt(pos_k, pos_q));
    if (window > 0) hidden = maximum(hidden, ge(pos_q - pos_k, scalar(double(window), DType::i64)));
    if (exclude_self) hidden = maximum(hidden, eq(pos_q, pos_k) * gt(pos_q, scalar(0.0, DType::i64)));  // not at 0
    scores = masked_fill(scores, hidden, -INFINITY);
    return matmul(softmax(scores, -1), vv);
}

struct Case {
    int64_t B, H, Hkv, Tq, Tk, D;
    bool causal;
    int64_t window;
    bool exclude_self = false;
};

}  // namespace

TEST_CASE("attention: fused kernel equals the composed ops, forward and backward") {
    const Case cases[] = {{2, 4, 4, 7, 7, 8, true, 0},  {1, 4, 2, 5, 5, 4, true, 0}, {2, 2, 1, 6, 6, 4, true, 3},
                          {1, 2, 2, 3, 9, 4, true, 0},  {2, 3, 3, 4, 4, 6, false, 0}, {1, 4, 1, 1, 6, 8, true, 4},
                          {2, 4, 2, 6, 6, 4, true, 0, true}, {1, 2, 2, 3, 7, 4, true, 3, true},
                          // Past one block of 64 queries and one tile of 256 keys (tensor/cpu_attention.cpp):
                          // a causal cache, a window that starts and ends inside tiles, no mask at all.
                          {1, 2, 1, 150, 300, 4, true, 0}, {1, 1, 1, 300, 300, 4, true, 70, true},
                          {1, 2, 2, 70, 280, 4, false, 0}};
    Generator gen(7);
    for (const Case& c : cases) {
        CAPTURE(c.H);
        CAPTURE(c.Hkv);
        CAPTURE(c.Tq);
        CAPTURE(c.window);
        CAPTURE(c.exclude_self);
        const Tensor q = randn({c.B, c.H, c.Tq, c.D}, gen, DType::f64).requires_grad_();
        const Tensor k = randn({c.B, c.Hkv, c.Tk, c.D}, gen, DType::f64).requires_grad_();
        const Tensor v = randn({c.B, c.Hkv, c.Tk, c.D}, gen, DType::f64).requires_grad_();
        const Tensor g = randn({c.B, c.H, c.Tq, c.D}, gen, DType::f64);
        Tensor probs;
        const Tensor fused = scaled_dot_product_attention(q, k, v, {c.causal, c.window, 0, c.exclude_self}, &probs);
        fused.backward(g);
        const Tensor dq = q.grad(), dk = k.grad(), dv = v.grad();
        q.zero_grad(), k.zero_grad(), v.zero_grad();
        const Tensor naive = naive_attention(q, k, v, c.causal, c.window, c.exclude_self);
        naive.backward(g);
        CHECK(max_abs_diff(fused, naive) < 1e-12);
        CHECK(max_abs_diff(dq, q.grad()) < 1e-12);
        CHECK(max_abs_diff(dk, k.grad()) < 1e-12);
        CHECK(max_abs_diff(dv, v.grad()) < 1e-12);
        CHECK(max_abs_diff(sum(probs, {-1}), ones({c.B, c.H, c.Tq}, DType::f64)) < 1e-12);
    }
}

TEST_CASE("attention: gradcheck of the fused kernel") {
    Generator gen(3);
    const Tensor q = randn({1, 2, 4, 4}, gen, DType::f64).requires_grad_();
    const Tensor k = randn({1, 1, 5, 4}, gen, DType::f64).requires_grad_();
    const Tensor v = randn({1, 1, 5, 4}, gen, DType::f64).requires_grad_();
    for (int64_t window : {0, 2})
        for (bool exclude_self : {false, true}) {
            const auto r = gradcheck(
                [=](const std::vector<Tensor>& in) {
                    return scaled_dot_product_attention(in[0], in[1], in[2], {true, window, 0, exclude_self});
                },
                {q, k, v});
            CHECK_MESSAGE(r.ok, r.message);
        }
}

TEST_CASE("attention: exclude_self hides the diagonal; the query at position 0 keeps its one key") {
    Generator gen(5);
    const Tensor q = randn({1, 1, 5, 4}, gen, DType::f64), k = randn({1, 1, 5, 4}, gen, DType::f64);
    Tensor probs;
    const Tensor out = scaled_dot_product_attention(q, k, k, {true, 0, 0, true}, &probs);
    const std::vector<double> p = probs.to_vector<double>();  // (T, T) row-major: p[t * 5 + s]
    CHECK(p[0] == 1.0);
    CHECK(p[1 * 5 + 0] == 1.0);  // query 1 sees only key 0
    CHECK(max_abs_diff(out.select(2, 1), k.select(2, 0)) == 0.0);
    for (int64_t t = 1; t < 5; ++t) {
        double row = 0;
        for (int64_t s = 0; s < 5; ++s) row += p[t * 5 + s];
        CHECK(p[t * 5 + t] == 0.0);
        CHECK(std::abs(row - 1.0) < 1e-12);
    }
    // Without a causal mask, or with a window of 1, some query would see no key at all.
    CHECK_THROWS_WITH_AS(scaled_dot_product_attention(q, k, k, {false, 0, 0, true}), doctest::Contains("exclude_self"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(scaled_dot_product_attention(q, k, k, {true, 1, 0, true}), doctest::Contains("window 1"),
                         std::invalid_argument);
}

TEST_CASE("attention: bad shapes are a clear error") {
    const Tensor q = zeros({1, 3, 4, 8}), k = zeros({1, 2, 4, 8});
    CHECK_THROWS_WITH_AS(scaled_dot_product_attention(q, k, k), doctest::Contains("q (1,3,4,8), k (1,2,4,8)"),
                         std::invalid_argument);
}
