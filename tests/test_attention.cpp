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

namespace {

// The CPU table with another attention_keep_bytes while it lives, whose attention entries
// note whether forward was handed a buffer for the probabilities and backward read one.
struct KeepSpy {
    static inline const Backend* cpu = nullptr;
    static inline bool forward_kept = false, backward_read = false;
    Backend table;

    explicit KeepSpy(int64_t keep_bytes) : table(backend(Device::CPU)) {
        cpu = &backend(Device::CPU);
        table.attention_keep_bytes = keep_bytes;
        table.attention_forward = [](const AttentionShape& s, const View& O, const View& lse, const View& probs,
                                     const View& Q, const View& K, const View& V) {
            forward_kept = probs.data != nullptr;
            cpu->attention_forward(s, O, lse, probs, Q, K, V);
        };
        table.attention_backward = [](const AttentionShape& s, const View& dQ, const View& dK, const View& dV,
                                      const View& dO, const View& Q, const View& K, const View& V, const View& O,
                                      const View& lse, const View& probs) {
            backward_read = probs.data != nullptr;
            cpu->attention_backward(s, dQ, dK, dV, dO, Q, K, V, O, lse, probs);
        };
        register_backend(Device::CPU, &table);
    }
    ~KeepSpy() { register_backend(Device::CPU, cpu); }
    KeepSpy(const KeepSpy&) = delete;
    KeepSpy& operator=(const KeepSpy&) = delete;
};

struct AttentionRun {
    Tensor out, dq, dk, dv;
};

// Forward and backward of the fused op on leaves made from q, k, v.
AttentionRun run_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const SdpaOptions& o) {
    const Tensor lq = q.detach().clone().requires_grad_(), lk = k.detach().clone().requires_grad_(),
                 lv = v.detach().clone().requires_grad_();
    const Tensor out = scaled_dot_product_attention(lq, lk, lv, o);
    out.backward(g);
    return {out.detach(), lq.grad(), lk.grad(), lv.grad()};
}

}  // namespace

TEST_CASE("attention: backward from the probabilities forward kept equals backward recomputing them") {
    // One tile, GQA; past one block of 64 queries and one tile of 256 keys, where the kept rows
    // are rescaled tile by tile: a causal cache, a window with exclude_self, no mask.
    const Case cases[] = {{2, 4, 2, 9, 9, 8, true, 0}, {1, 2, 1, 150, 300, 4, true, 0},
                          {1, 1, 1, 300, 300, 4, true, 70, true}, {1, 2, 2, 70, 280, 4, false, 0}};
    Generator gen(11);
    for (DType dtype : {DType::f64, DType::f32})
        for (const Case& c : cases) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(c.Tq);
            const Tensor q = randn({c.B, c.H, c.Tq, c.D}, gen, dtype), k = randn({c.B, c.Hkv, c.Tk, c.D}, gen, dtype),
                         v = randn({c.B, c.Hkv, c.Tk, c.D}, gen, dtype), g = randn({c.B, c.H, c.Tq, c.D}, gen, dtype);
            const SdpaOptions options{c.causal, c.window, 0, c.exclude_self};
            AttentionRun recomputed, kept;
            {
                const KeepSpy spy(0);
                recomputed = run_attention(q, k, v, g, options);
                CHECK_FALSE(KeepSpy::forward_kept);
                CHECK_FALSE(KeepSpy::backward_read);
            }
            {
                const KeepSpy spy(int64_t(1) << 30);
                kept = run_attention(q, k, v, g, options);
                CHECK(KeepSpy::forward_kept);
                CHECK(KeepSpy::backward_read);
                // A second pass on the same inputs, after the first released its buffer, agrees bitwise.
                const AttentionRun again = run_attention(q, k, v, g, options);
                CHECK(max_abs_diff(again.dq, kept.dq) == 0);
            }
            // Forward computes O the same way either way; the kept probabilities e^{S − m} e^{m − lse}
            // differ from the recomputed e^{S − lse} by rounding only: ~1e-16 in float64, a few
            // float32 ulps of the largest gradient.
            CHECK(max_abs_diff(kept.out, recomputed.out) == 0);
            for (const auto& [a, b] : {std::pair{kept.dq, recomputed.dq}, {kept.dk, recomputed.dk},
                                       {kept.dv, recomputed.dv}}) {
                const double largest = amax(abs(b)).item(), ulp = dtype == DType::f64 ? 1e-12 : 4 * 0x1p-23;
                CHECK(max_abs_diff(a, b) <= ulp * std::max(1.0, largest));
            }
        }
}

TEST_CASE("attention: nothing is kept without a graph to record: no_grad, or inputs that need no gradient") {
    const KeepSpy spy(int64_t(1) << 30);
    Generator gen(12);
    const Tensor q = randn({1, 2, 5, 4}, gen), k = randn({1, 2, 5, 4}, gen);
    {
        const NoGradGuard no_grad;
        scaled_dot_product_attention(q.detach().clone().requires_grad_(), k, k);
        CHECK_FALSE(KeepSpy::forward_kept);
    }
    scaled_dot_product_attention(q, k, k);
    CHECK_FALSE(KeepSpy::forward_kept);
    scaled_dot_product_attention(q.detach().clone().requires_grad_(), k, k);
    CHECK(KeepSpy::forward_kept);
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
