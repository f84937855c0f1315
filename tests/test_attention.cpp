// Attention: the fused kernel against a plain composition of ops for every score function
// (tensor/score_functions.h), forward and backward, and finite-difference gradients.
#include <cmath>

#include "tests/nn_check.h"

using namespace gg;
using gg::testing::kAllScoreFunctions;
using gg::testing::max_abs_diff;
using gg::testing::spec_score_weights;
using namespace gg::nn;

namespace {

// 1 where the mask hides key j from query i (Tq, Tk); query i is at position Tk − Tq + i.
Tensor hidden_keys(int64_t Tq, int64_t Tk, bool causal, int64_t window, bool exclude_self) {
    const Tensor pos_q = arange(double(Tk - Tq), double(Tk), 1, DType::i64).unsqueeze(1);
    const Tensor pos_k = arange(Tk).unsqueeze(0);
    Tensor hidden = zeros({Tq, Tk}, DType::i64);
    if (causal) hidden = maximum(hidden, gt(pos_k, pos_q));
    if (window > 0) hidden = maximum(hidden, ge(pos_q - pos_k, scalar(double(window), DType::i64)));
    if (exclude_self) hidden = maximum(hidden, eq(pos_q, pos_k) * gt(pos_q, scalar(0.0, DType::i64)));  // not at 0
    return hidden;
}

// The weights (B, H, Tq, Tk) of the scores Q Kᵀ · scale from separate ops, with GQA by
// repeating kv heads; and the attention output, those weights times V.
Tensor naive_weights(const Tensor& q, const Tensor& k, const SdpaOptions& o) {
    const int64_t Tq = q.size(2), Tk = k.size(2), group = q.size(1) / k.size(1);
    const Tensor scores = matmul(q, repeat_interleave(k, group, 1).transpose(-1, -2)) / std::sqrt(double(q.size(3)));
    return spec_score_weights(o.score_fn, scores, hidden_keys(Tq, Tk, o.causal, o.window, o.exclude_self), o.sink);
}
Tensor naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o) {
    return matmul(naive_weights(q, k, o), repeat_interleave(v, q.size(1) / k.size(1), 1));
}

struct Case {
    int64_t B, H, Hkv, Tq, Tk, D;
    bool causal;
    int64_t window;
    bool exclude_self = false;
};

SdpaOptions options_of(const Case& c, ScoreFunction f, const Tensor& sink) {
    return {.causal = c.causal, .window = c.window, .exclude_self = c.exclude_self, .score_fn = f,
            .sink = f == ScoreFunction::sink ? sink : Tensor()};
}

}  // namespace

TEST_CASE("attention: the fused kernel equals the composed ops for every score function, forward and backward") {
    const Case cases[] = {{2, 4, 4, 7, 7, 8, true, 0},  {1, 4, 2, 5, 5, 4, true, 0}, {2, 2, 1, 6, 6, 4, true, 3},
                          {1, 2, 2, 3, 9, 4, true, 0},  {2, 3, 3, 4, 4, 6, false, 0}, {1, 4, 1, 1, 6, 8, true, 4},
                          {2, 4, 2, 6, 6, 4, true, 0, true}, {1, 2, 2, 3, 7, 4, true, 3, true},
                          // Past one block of 64 queries and one tile of 256 keys (cpu/attention.cpp):
                          // a causal cache, a window that starts and ends inside tiles, no mask at all.
                          {1, 2, 1, 150, 300, 4, true, 0}, {1, 1, 1, 300, 300, 4, true, 70, true},
                          {1, 2, 2, 70, 280, 4, false, 0}};
    Generator gen(7);
    for (ScoreFunction f : kAllScoreFunctions)
        for (const Case& c : cases) {
            CAPTURE(score_function_name(f));
            CAPTURE(c.H);
            CAPTURE(c.Hkv);
            CAPTURE(c.Tq);
            CAPTURE(c.window);
            CAPTURE(c.exclude_self);
            const Tensor q = randn({c.B, c.H, c.Tq, c.D}, gen, DType::f64).requires_grad_();
            const Tensor k = randn({c.B, c.Hkv, c.Tk, c.D}, gen, DType::f64).requires_grad_();
            const Tensor v = randn({c.B, c.Hkv, c.Tk, c.D}, gen, DType::f64).requires_grad_();
            const Tensor sink = randn({c.H}, gen, DType::f64).requires_grad_();
            const Tensor g = randn({c.B, c.H, c.Tq, c.D}, gen, DType::f64);
            const SdpaOptions o = options_of(c, f, sink);
            Tensor probs, lse;
            const Tensor fused = scaled_dot_product_attention(q, k, v, o, &probs, &lse);
            fused.backward(g);
            const Tensor dq = q.grad(), dk = k.grad(), dv = v.grad(), dsink = sink.grad();
            q.zero_grad(), k.zero_grad(), v.zero_grad(), sink.zero_grad();
            const Tensor naive = naive_attention(q, k, v, o);
            naive.backward(g);
            CHECK(max_abs_diff(fused, naive) < 1e-12);
            CHECK(max_abs_diff(probs, naive_weights(q, k, o)) < 1e-12);
            CHECK(max_abs_diff(dq, q.grad()) < 1e-12);
            CHECK(max_abs_diff(dk, k.grad()) < 1e-12);
            CHECK(max_abs_diff(dv, v.grad()) < 1e-12);
            if (f == ScoreFunction::sink) CHECK(max_abs_diff(dsink, sink.grad()) < 1e-12);
            else CHECK(!dsink.defined());
            // A softmax's rows sum to 1 less what the slot of logit c took, e^{c − lse}.
            const Tensor row_sums = sum(probs, {-1});  // (B, H, Tq)
            const Tensor ones_ = ones({c.B, c.H, c.Tq}, DType::f64);
            if (f == ScoreFunction::softmax) CHECK(max_abs_diff(row_sums, ones_) < 1e-12);
            if (f == ScoreFunction::softmax1) CHECK(max_abs_diff(row_sums, ones_ - exp(-lse)) < 1e-12);
            if (f == ScoreFunction::sink)
                CHECK(max_abs_diff(row_sums, ones_ - exp(sink.detach().view({1, c.H, 1}) - lse)) < 1e-12);
        }
}

TEST_CASE("attention: the shifted forms hold where the plain formulas overflow float32") {
    // Integer q and k, so that every score q·k/2 is exact in float32 too: up to ±288 with entries
    // in [−12, 12], where e^{s} is far past float32's range (e^±88); the float32 kernel against
    // the formulas in float64. With entries in [−40, 40] (scores to ±3200, past float64's e^709)
    // the kernel's output must still be finite.
    Generator gen(21);
    for (int64_t size : {12, 40})
        for (ScoreFunction f : kAllScoreFunctions) {
            CAPTURE(size);
            CAPTURE(score_function_name(f));
            const auto integers = [&](const Shape& shape) {
                return randint(-size, size + 1, shape, gen).to(DType::f32);
            };
            const Tensor q = integers({1, 2, 9, 4}), k = integers({1, 2, 9, 4}), v = randn({1, 2, 9, 4}, gen),
                         sink = integers({2}) * 10.0;
            const SdpaOptions o{.score_fn = f, .sink = f == ScoreFunction::sink ? sink : Tensor()};
            Tensor probs;
            const Tensor out = scaled_dot_product_attention(q, k, v, o, &probs);
            CHECK(amax(abs(out)).item() < 1e3);  // finite: a NaN fails the comparison too
            if (size > 12) continue;
            SdpaOptions o64 = o;
            if (o.sink.defined()) o64.sink = sink.to(DType::f64);
            // s − m rounded to float32 moves e^{s − m} by up to |s − m| · 2⁻²⁴ of itself: 2e-5 at 300.
            CHECK(max_abs_diff(probs, naive_weights(q.to(DType::f64), k.to(DType::f64), o64)) < 3e-5);
        }
}

// Named gradcheck*: meson runs it once more on the emulated CUDA device (tests/check.h: test_device).
TEST_CASE("gradcheck: fused attention, every score function and mask, the sink logit included") {
    Generator gen(3);
    const auto leaf = [&](const Shape& shape) {
        return gg::testing::on_test_device(randn(shape, gen, DType::f64)).detach().requires_grad_();
    };
    const Tensor q = leaf({1, 2, 4, 4});
    const Tensor k = leaf({1, 1, 5, 4}), v = leaf({1, 1, 5, 4});  // GQA: both query heads read one kv head
    const Tensor sink = leaf({2});
    struct Mask {
        bool causal;
        int64_t window;
        bool exclude_self;
    };
    // On the emulated device, random projections wᵀ J v (autograd/gradcheck.h): the whole Jacobian
    // there is some 180 emulated launches a check, minutes for the suite.
    GradcheckOptions options;
    if (gg::testing::test_device() == Device::CUDA) options.full_jacobian_limit = 0;
    for (ScoreFunction f : kAllScoreFunctions)
        for (const Mask m : {Mask{true, 0, false}, Mask{true, 2, false}, Mask{true, 0, true}, Mask{true, 3, true},
                             Mask{false, 0, false}}) {
            CAPTURE(score_function_name(f));
            CAPTURE(m.causal);
            CAPTURE(m.window);
            CAPTURE(m.exclude_self);
            std::vector<Tensor> inputs{q, k, v};
            if (f == ScoreFunction::sink) inputs.push_back(sink);
            const auto r = gradcheck(
                [=](const std::vector<Tensor>& in) {
                    const SdpaOptions o{m.causal, m.window, 0, m.exclude_self, f, in.size() > 3 ? in[3] : Tensor()};
                    return scaled_dot_product_attention(in[0], in[1], in[2], o);
                },
                inputs, options);
            CHECK_MESSAGE(r.ok, r.message);
        }
}

TEST_CASE("attention: score functions by name, and the sink logit only with the sink function") {
    for (ScoreFunction f : kAllScoreFunctions) CHECK(parse_score_function(score_function_name(f)) == f);
    CHECK(score_function_name(ScoreFunction::softmax1) == "softmax1");
    CHECK(parse_score_function("SoftPick") == ScoreFunction::softpick);
    CHECK_THROWS_WITH_AS(parse_score_function("relu"),
                         "score function 'relu' is not one of softmax, softmax1, sink, sigmoid, softpick",
                         std::invalid_argument);
    const Tensor q = zeros({1, 2, 3, 4}), sink = zeros({2});
    CHECK_THROWS_WITH_AS(scaled_dot_product_attention(q, q, q, {.score_fn = ScoreFunction::sink}),
                         doctest::Contains("score function sink with sink undefined"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(scaled_dot_product_attention(q, q, q, {.sink = sink}),
                         doctest::Contains("score function softmax with sink (2)"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(scaled_dot_product_attention(q, q, q, {.score_fn = ScoreFunction::sink, .sink = zeros({3})}),
                         doctest::Contains("one logit per query head, 2"), std::invalid_argument);
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
                                     const View& Q, const View& K, const View& V, const View& sink) {
            forward_kept = probs.data != nullptr;
            cpu->attention_forward(s, O, lse, probs, Q, K, V, sink);
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
    for (ScoreFunction f : kAllScoreFunctions)
        for (DType dtype : {DType::f64, DType::f32})
            for (const Case& c : cases) {
                CAPTURE(score_function_name(f));
                CAPTURE(dtype_name(dtype));
                CAPTURE(c.Tq);
                const Tensor q = randn({c.B, c.H, c.Tq, c.D}, gen, dtype),
                             k = randn({c.B, c.Hkv, c.Tk, c.D}, gen, dtype),
                             v = randn({c.B, c.Hkv, c.Tk, c.D}, gen, dtype), g = randn({c.B, c.H, c.Tq, c.D}, gen, dtype);
                const SdpaOptions options = options_of(c, f, randn({c.H}, gen, dtype));
                AttentionRun recomputed, kept;
                {
                    const KeepSpy spy(0);
                    recomputed = run_attention(q, k, v, g, options);
                    CHECK_FALSE(KeepSpy::forward_kept);
                    CHECK_FALSE(KeepSpy::backward_read);
                }
                {
                    // Softpick's gradient reads the scores' signs, which its weights do not keep: never kept.
                    const bool keeps = f != ScoreFunction::softpick;
                    const KeepSpy spy(int64_t(1) << 30);
                    kept = run_attention(q, k, v, g, options);
                    CHECK(KeepSpy::forward_kept == keeps);
                    CHECK(KeepSpy::backward_read == keeps);
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
