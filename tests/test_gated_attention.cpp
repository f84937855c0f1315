// test_gated_attention.cpp — MultiHeadAttention and the whole GatedAttention family against
// nn/attention.h's formulas computed by hand, gradchecks of every option, and the KV cache.
#include "tests/nn_check.h"

using namespace gg;
using namespace gg::nn;
using namespace gg::testing;

// ================================================================ MultiHeadAttention

TEST_CASE("nn: MultiHeadAttention is torch's multi-head attention with biases; gradients check") {
    Generator gen(7);
    const int64_t B = 2, T = 5, d = 8, H = 2;
    for (bool causal : {true, false}) {
        CAPTURE(causal);
        MultiHeadAttention mha(d, H, causal);
        CHECK(names_of(mha) == std::vector<std::string>{"w_q.weight", "w_q.bias", "w_k.weight", "w_k.bias",
                                                        "w_v.weight", "w_v.bias", "w_o.weight", "w_o.bias"});
        mha.to(DType::f64);
        randomize(mha, gen);
        const Tensor x = randn({B, T, d}, gen, DType::f64);
        auto project = [&](const Linear& l) { return split_heads(matmul(x, l.weight.t()) + l.bias, H); };
        const Tensor q = project(*mha.w_q), k = project(*mha.w_k), v = project(*mha.w_v);
        Tensor scores = matmul(q, k.transpose(-1, -2)) / std::sqrt(double(d / H));
        if (causal) scores = masked_fill(scores, triu(ones({T, T}), 1), -INFINITY);
        const Tensor expected = matmul(merge_heads(matmul(softmax(scores, -1), v)), mha.w_o->weight.t()) + mha.w_o->bias;
        CHECK(max_abs_diff(mha.forward(x), expected) < 1e-12);
        CHECK(check_gradients(mha, {x.clone().requires_grad_()},
                              [&](const std::vector<Tensor>& in) { return mha.forward(in[0]); }) == 8);
    }
    CHECK_THROWS_AS(MultiHeadAttention(10, 3), std::invalid_argument);
}

// ================================================================ GatedAttention

TEST_CASE("nn: GatedAttention's gate weights have nn/attention.h's shapes for every position and sharing") {
    const int64_t d = 16, H = 4, dk = 4, Hkv = 2;
    for (GatePosition pos : kAllPositions)
        for (GateSharing sharing : kAllSharings) {
            AttentionOptions o = attention_options(pos, GateFunction::sigmoid, sharing);
            o.n_kv_heads = Hkv;
            CAPTURE(describe(o));
            const GatedAttention m(o);
            const auto names = names_of(m);
            CHECK(m.w_q->weight.shape() == Shape{H * dk, d});
            CHECK(m.w_k->weight.shape() == Shape{Hkv * dk, d});
            CHECK(m.w_v->weight.shape() == Shape{Hkv * dk, d});
            CHECK(m.w_o->weight.shape() == Shape{d, H * dk});
            if (pos == GatePosition::none) {
                CHECK(names.size() == 4);
                CHECK(!m.w_g);
                continue;
            }
            if (pos == GatePosition::scores_from_query) {  // w_i ∈ R^dk per head
                CHECK(contains(names, "w_g_query"));
                CHECK(m.w_g_query.shape() == Shape{H, dk});
                continue;
            }
            REQUIRE(m.w_g);
            CHECK(contains(names, "w_g.weight"));
            const int64_t heads = pos == GatePosition::key || pos == GatePosition::value ? Hkv : H;
            const int64_t out = pos == GatePosition::scores_from_x     ? H
                                : sharing == GateSharing::elementwise ? heads * dk
                                : sharing == GateSharing::headwise    ? heads
                                                                      : dk;
            CHECK(m.w_g->weight.shape() == Shape{out, d});
            CHECK(names.size() == 5);
        }
    // gate_fn none is the baseline: no gate parameters at all.
    CHECK(names_of(GatedAttention(attention_options(GatePosition::sdpa_output, GateFunction::none))).size() == 4);
}

TEST_CASE("nn: GatedAttention matches its formulas for every position × gate function × sharing") {
    Generator gen(8);
    for (GatePosition pos : kAllPositions)
        for (GateFunction fn : kAllFunctions)
            for (GateSharing sharing : kAllSharings) {
                const AttentionOptions o = attention_options(pos, fn, sharing);
                CAPTURE(describe(o));
                const auto m = random_attention(o, gen);
                const Tensor x = randn({2, 5, 16}, gen, DType::f64);
                AttentionCapture seen;
                const Tensor y = m->forward(x, nullptr, Tensor(), &seen);
                const Expected e = reference_attention(*m, x);
                CHECK(max_abs_diff(y, e.y) < 1e-10);
                CHECK(max_abs_diff(seen.probs, e.probs) < 1e-10);
                if (o.gated()) {
                    REQUIRE(seen.gate.defined());
                    CHECK(max_abs_diff(seen.gate, e.gate) < 1e-10);
                    // and the gate changes the output
                    CHECK(max_abs_diff(y, reference_attention(*m, x, Tensor(), false).y) > 1e-3);
                } else {
                    CHECK(!seen.gate.defined());
                }
            }
}

namespace {

// A random GatedAttention(o) on random x (2, 6, 16) and gate source against reference_attention:
// its output, its probabilities and its gate values. Returns what forward captured, and the reference.
std::pair<AttentionCapture, Expected> check_formulas(const AttentionOptions& o, Generator& gen) {
    const auto m = random_attention(o, gen);
    const Tensor x = randn({2, 6, 16}, gen, DType::f64), src = randn({2, 6, 16}, gen, DType::f64);
    const Expected e = reference_attention(*m, x, src);
    AttentionCapture seen;
    CHECK(max_abs_diff(m->forward(x, nullptr, src, &seen), e.y) < 1e-10);
    CHECK(max_abs_diff(seen.probs, e.probs) < 1e-10);
    if (o.gated()) CHECK(max_abs_diff(seen.gate, e.gate) < 1e-10);
    return {seen, e};
}

}  // namespace

TEST_CASE("nn: GatedAttention matches its formulas with GQA, RoPE, QK-norm, sliding window, no causal mask") {
    Generator gen(9);
    struct Extra {
        int64_t kv_heads;
        bool rope, qk_norm;
        int64_t window;
        bool causal;
    };
    const Extra extras[] = {{1, false, false, 0, true}, {2, false, false, 0, true}, {4, true, false, 0, true},
                            {4, false, true, 0, true},  {4, false, false, 2, true}, {2, true, true, 3, true},
                            {1, true, true, 0, false}};
    for (GatePosition pos : kAllPositions)
        for (const Extra& ex : extras)
            for (GateSharing sharing : {GateSharing::elementwise, GateSharing::shared}) {
                AttentionOptions o = attention_options(pos, GateFunction::sigmoid, sharing);
                o.n_kv_heads = ex.kv_heads;
                o.rope = ex.rope;
                o.rope_options.base = 100;
                o.qk_norm = ex.qk_norm;
                o.window = ex.window;
                o.causal = ex.causal;
                CAPTURE(describe(o));
                check_formulas(o, gen);
            }
}

TEST_CASE("nn: G1 by hand: σ(x W_g) ⊙ SDPA(x W_q, x W_k, x W_v), concat, W_O") {
    Generator gen(10);
    const AttentionOptions o = attention_options(GatePosition::sdpa_output);
    const auto m = random_attention(o, gen);
    const int64_t B = 2, T = 5, d = 16, H = 4, dk = 4;
    const Tensor x = randn({B, T, d}, gen, DType::f64);
    const Tensor gate = sigmoid(matmul(x, m->w_g->weight.t()));  // (B, T, H·dk)
    const Tensor q = split_heads(matmul(x, m->w_q->weight.t()), H), k = split_heads(matmul(x, m->w_k->weight.t()), H),
                 v = split_heads(matmul(x, m->w_v->weight.t()), H);
    const Tensor heads = merge_heads(scaled_dot_product_attention(q, k, v));  // (B, T, H·dk)
    const Tensor expected = matmul(gate * heads, m->w_o->weight.t());
    AttentionCapture seen;
    CHECK(max_abs_diff(m->forward(x, nullptr, Tensor(), &seen), expected) < 1e-12);
    CHECK(seen.gate.shape() == Shape{B, H, T, dk});
    CHECK(max_abs_diff(merge_heads(seen.gate), gate) < 1e-12);
    CHECK(seen.probs.shape() == Shape{B, H, T, T});
    CHECK(!seen.gate.requires_grad());  // analysis copies carry no graph
    CHECK(max_abs_diff(m->forward(x), expected) < 1e-12);  // the same numbers without a capture
}

TEST_CASE("nn: gate inits: zero gives σ = ½ exactly; normal, Kaiming, Xavier draw with their spread") {
    Generator gen(12);
    const int64_t d = 64, H = 4;
    for (GatePosition pos : {GatePosition::sdpa_output, GatePosition::scores_from_x, GatePosition::scores_from_query,
                             GatePosition::after_merge, GatePosition::value, GatePosition::key, GatePosition::query,
                             GatePosition::residual})
        for (GateInit init : {GateInit::zero, GateInit::normal, GateInit::kaiming, GateInit::xavier}) {
            AttentionOptions o = attention_options(pos);
            o.d_model = d;
            o.n_heads = H;
            o.gate_init = init;
            o.gate_init_std = 0.05;
            CAPTURE(describe(o));
            CAPTURE(gate_init_name(init));
            manual_seed(100 + int(init));
            GatedAttention m(o);
            AttentionCapture seen;
            m.forward(randn({1, 3, d}, gen), nullptr, Tensor(), &seen);
            const Tensor gate = seen.gate;
            const double off_half = amax(abs(gate - 0.5)).item();
            const Tensor w = pos == GatePosition::scores_from_query ? m.w_g_query : m.w_g->weight;
            CHECK(w.requires_grad());
            if (init == GateInit::zero) {
                CHECK(amax(abs(w)).item() == 0);
                CHECK(off_half == 0);  // σ(0) = ½ exactly
                continue;
            }
            CHECK(off_half > 1e-3);
            if (pos == GatePosition::scores_from_query) continue;  // (H, dk): too few draws for statistics
            const int64_t fan_out = w.size(0), n = w.numel();
            const double sd = std::sqrt(mean(w * w).item()), mu = mean(w).item();
            const double want = init == GateInit::normal  ? 0.05
                                : init == GateInit::kaiming ? std::sqrt(2.0 / d)
                                                            : std::sqrt(6.0 / double(d + fan_out)) / std::sqrt(3.0);
            CHECK(sd == relative(want, 0.15));
            CHECK(std::abs(mu) < 4 * want / std::sqrt(double(n)));
            if (init == GateInit::xavier) {  // U(±bound): thousands of draws come close to the bound
                const double bound = std::sqrt(6.0 / double(d + fan_out)), top = amax(abs(w)).item();
                CHECK(top <= bound);
                CHECK(top > 0.95 * bound);
            }
        }
    // Zero init with the other gate functions: (tanh(0) + 1)/2 = ½, relu(0) = silu(0) = 0.
    for (GateFunction fn : {GateFunction::tanh_half, GateFunction::relu, GateFunction::silu}) {
        GatedAttention m(attention_options(GatePosition::sdpa_output, fn));
        AttentionCapture seen;
        m.forward(randn({1, 3, 16}, gen), nullptr, Tensor(), &seen);
        CHECK(amax(abs(seen.gate - (fn == GateFunction::tanh_half ? 0.5 : 0.0))).item() == 0);
    }
    CHECK(parse_gate_init(gate_init_name(GateInit::kaiming)) == GateInit::kaiming);
    CHECK(parse_gate_position("article-g3") == GatePosition::scores_from_query);
    CHECK(parse_gate_position("baseline") == GatePosition::none);
    CHECK(parse_gate_function("tanh") == GateFunction::tanh_half);
    CHECK(parse_gate_sharing("headwise") == GateSharing::headwise);
    CHECK_THROWS_AS(parse_gate_position("g6"), std::invalid_argument);
    // Any case, as the paper and the docs write them.
    CHECK(parse_gate_position("G1") == GatePosition::sdpa_output);
    CHECK(parse_gate_position("Baseline") == GatePosition::none);
    CHECK(parse_gate_sharing("HeadWise") == GateSharing::headwise);
    CHECK(parse_gate_function("SiLU") == GateFunction::silu);
    CHECK(parse_gate_init("Xavier") == GateInit::xavier);
    CHECK_THROWS_WITH_AS(parse_gate_position("G6"), doctest::Contains("'G6'"), std::invalid_argument);
    // The paper's G2-G4 and the walk-through's are other gates: a bare number is refused,
    // naming both, and each is named by where it sits.
    for (const char* two : {"g2", "G3", "g4"})
        CHECK_THROWS_WITH_AS(parse_gate_position(two), doctest::Contains("names two gates"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_gate_position("g2"),
                         doctest::Contains("the paper's G2 is 'value', the walk-through's G2 is 'scores-x'"),
                         std::invalid_argument);
    // By position, as the paper (which numbers them otherwise) can be read.
    const std::pair<const char*, GatePosition> by_position[] = {
        {"sdpa", GatePosition::sdpa_output}, {"scores-x", GatePosition::scores_from_x},
        {"scores-query", GatePosition::scores_from_query}, {"residual", GatePosition::residual},
        {"Output", GatePosition::after_merge}, {"value", GatePosition::value}};
    for (const auto& [alias, position] : by_position) CHECK(parse_gate_position(alias) == position);
    CHECK(gate_position_name(parse_gate_position("output")) == "g5");
    CHECK(gate_position_name(parse_gate_position("sdpa")) == "g1");
    CHECK(gate_position_name(parse_gate_position("article-g2")) == "scores-x");
    CHECK(gate_position_name(GatePosition::value) == "value");
    CHECK_THROWS_AS(GatedAttention(attention_options(GatePosition::sdpa_output)).forward(zeros({1, 3, 8})),
                    std::invalid_argument);
    AttentionOptions bad = attention_options(GatePosition::sdpa_output);
    bad.n_kv_heads = 3;
    CHECK_THROWS_AS(GatedAttention{bad}, std::invalid_argument);
}

TEST_CASE("nn: GatedAttention gradcheck (input and every parameter) across positions and options") {
    Generator gen(13);
    std::vector<AttentionOptions> configs;
    for (GatePosition pos : kAllPositions) configs.push_back(attention_options(pos));
    for (GateFunction fn : {GateFunction::tanh_half, GateFunction::relu, GateFunction::silu})
        configs.push_back(attention_options(GatePosition::sdpa_output, fn));
    for (GatePosition pos : {GatePosition::sdpa_output, GatePosition::after_merge, GatePosition::value,
                             GatePosition::key, GatePosition::query})
        for (GateSharing sharing : {GateSharing::headwise, GateSharing::shared})
            configs.push_back(attention_options(pos, GateFunction::sigmoid, sharing));
    struct Extra {
        GatePosition pos;
        int64_t kv_heads;
        bool rope, qk_norm;
        int64_t window;
    };
    for (const Extra& ex : {Extra{GatePosition::sdpa_output, 1, false, false, 0}, Extra{GatePosition::key, 2, false, false, 0},
                            Extra{GatePosition::value, 1, false, false, 0}, Extra{GatePosition::sdpa_output, 2, true, true, 2},
                            Extra{GatePosition::scores_from_x, 2, true, true, 2},
                            Extra{GatePosition::scores_from_query, 2, true, true, 2},
                            Extra{GatePosition::query, 1, true, true, 2}, Extra{GatePosition::key, 2, true, false, 3},
                            Extra{GatePosition::none, 2, true, true, 2}}) {
        AttentionOptions o = attention_options(ex.pos);
        o.n_kv_heads = ex.kv_heads;
        o.rope = ex.rope;
        o.qk_norm = ex.qk_norm;
        o.window = ex.window;
        configs.push_back(o);
    }
    for (const AttentionOptions& o : configs) {
        CAPTURE(describe(o));
        const auto m = random_attention(o, gen);
        const Tensor x = randn({1, 4, 16}, gen, DType::f64).requires_grad_();
        std::vector<Tensor> inputs{x};
        // G4 gets a separate gate source (the raw residual), checked as an input too.
        if (o.gate == GatePosition::residual) inputs.push_back(randn({1, 4, 16}, gen, DType::f64).requires_grad_());
        const int n = check_gradients(*m, inputs, [&](const std::vector<Tensor>& in) {
            return m->forward(in[0], nullptr, in.size() > 1 ? in[1] : Tensor());
        });
        CHECK(n == int(m->named_parameters().size()));
    }
}

TEST_CASE("nn: a head size of its own (Qwen3: h·dk ≠ d) has W_Q d → h·dk, W_O h·dk → d, and gradients check") {
    Generator gen(17);
    for (GateSharing sharing : {GateSharing::elementwise, GateSharing::headwise}) {
        AttentionOptions o = attention_options(GatePosition::sdpa_output, GateFunction::sigmoid, sharing);
        o.head_size = 6;  // 4 heads × 6 = 24 channels of attention on a 16-wide stream
        o.n_kv_heads = 2;
        o.rope = o.qk_norm = true;
        CAPTURE(describe(o));
        const auto m = random_attention(o, gen);
        CHECK(m->w_q->weight.shape() == Shape{24, 16});
        CHECK(m->w_k->weight.shape() == Shape{12, 16});
        CHECK(m->w_o->weight.shape() == Shape{16, 24});
        CHECK(m->w_g->weight.shape() == Shape{sharing == GateSharing::headwise ? 4 : 24, 16});
        CHECK(m->q_norm->weight.shape() == Shape{6});
        const Tensor x = randn({2, 5, 16}, gen, DType::f64).requires_grad_();
        const int n = check_gradients(*m, {x}, [&](const std::vector<Tensor>& in) { return m->forward(in[0]); });
        CHECK(n == int(m->named_parameters().size()));
    }
    AttentionOptions g5 = attention_options(GatePosition::after_merge);
    g5.head_size = 6;
    CHECK_THROWS_WITH_AS(GatedAttention{g5}, doctest::Contains("heads × head size = d_model for G4/G5"),
                         std::invalid_argument);
}

TEST_CASE("nn: GatedAttention with a KV cache equals the full pass, every gate position") {
    Generator gen(14);
    for (GatePosition pos : kAllPositions)
        for (bool extras : {false, true}) {
            AttentionOptions o = attention_options(pos);
            if (extras) o.n_kv_heads = 2, o.rope = true, o.qk_norm = true, o.window = 3, o.exclude_self = true;
            CAPTURE(describe(o));
            const auto m = random_attention(o, gen, DType::f32);
            const Tensor x = randn({2, 7, 16}, gen), src = randn({2, 7, 16}, gen);
            const Tensor full = m->forward(x, nullptr, src);
            KVCache cache;
            std::vector<Tensor> parts;
            int64_t at = 0;
            for (int64_t len : {3, 2, 1, 1}) {
                parts.push_back(m->forward(x.narrow(1, at, len), &cache, src.narrow(1, at, len)));
                at += len;
                CHECK(cache.length() == at);
            }
            CHECK(cache.k.shape() == Shape{2, o.kv_heads(), 7, 4});
            CHECK(max_abs_diff(cat(parts, 1), full) < 1e-5);
        }
}

TEST_CASE("nn: a KV cache writes each step into one buffer, sized by reserve or doubled, and k and v are views of it") {
    // Each step writes only its own positions; the positions held are copied only when the
    // buffer is full. k's head stride is capacity · dk, so it shows the buffer's size.
    AttentionOptions o = attention_options(GatePosition::sdpa_output);
    o.n_kv_heads = 2, o.rope = true;
    Generator gen(19);
    const auto m = random_attention(o, gen, DType::f32);
    const int64_t dk = o.head_dim();
    const Tensor x = randn({2, 9, 16}, gen);
    const Tensor full = m->forward(x);
    for (int64_t reserve : {0, 8}) {
        CAPTURE(reserve);
        KVCache cache;
        cache.reserve = reserve;
        std::vector<Tensor> parts;
        std::vector<int64_t> capacities;
        int64_t at = 0;
        for (int64_t len : {3, 1, 1, 1, 1, 1, 1}) {
            parts.push_back(m->forward(x.narrow(1, at, len), &cache));
            at += len;
            CHECK(cache.k.shape() == Shape{2, 2, at, dk});
            CHECK(cache.k.strides()[2] == dk);  // rows contiguous, as the kernels read them
            capacities.push_back(cache.k.strides()[1] / dk);
        }
        const std::vector<int64_t> expected = reserve > 0 ? std::vector<int64_t>{8, 8, 8, 8, 8, 8, 16}
                                                          : std::vector<int64_t>{3, 6, 6, 6, 12, 12, 12};
        CHECK(capacities == expected);  // 9 positions: a buffer of 8, then 16; or 3, doubled to 6 and 12
        CHECK(max_abs_diff(cat(parts, 1), full) < 1e-5);
    }
}

TEST_CASE("nn: a KV cache that keeps the last K positions is sliding-window attention over K") {
    for (GatePosition pos : {GatePosition::none, GatePosition::sdpa_output, GatePosition::scores_from_query})
        for (bool rope : {false, true}) {
            AttentionOptions o = attention_options(pos);
            o.n_kv_heads = 2, o.rope = rope;
            AttentionOptions windowed = o;
            windowed.window = 3;
            CAPTURE(describe(o));
            Generator g1(15), g2(15);  // the same weights in both
            const auto cached = random_attention(o, g1, DType::f32), reference = random_attention(windowed, g2, DType::f32);
            const Tensor x = randn({2, 9, 16}, g1);
            const Tensor full = reference->forward(x);
            KVCache cache;
            cache.keep = 3;
            std::vector<Tensor> parts{cached->forward(x.narrow(1, 0, 2), &cache)};  // a first block within the window
            for (int64_t t = 2; t < 9; ++t) {
                parts.push_back(cached->forward(x.narrow(1, t, 1), &cache));
                CHECK(cache.length() == std::min<int64_t>(t + 1, 3));
                CHECK(cache.seen() == t + 1);  // RoPE rotates by the true position
            }
            CHECK(max_abs_diff(cat(parts, 1), full) < 1e-5);
            // Without the window, the same cache would have seen more: the test can tell.
            CHECK(max_abs_diff(cat(parts, 1), cached->forward(x)) > 1e-3);
        }
}

TEST_CASE("nn: a KV cache that also keeps the first F positions reads as a pass over those and the newest, at cache positions") {
    // StreamingLLM's cache (KVCache::keep_first): once positions drop, query t sees the first F
    // tokens and the newest K − F, and with RoPE the distances are those within the cache. A
    // single layer's keys and values depend on their own token only, so the reference is a fresh
    // pass over [x_0 … x_{F−1}, x_{t−K+F+1} … x_t], whose last row is query t's.
    const int64_t K = 5, F = 2, T = 12;
    for (ScoreFunction f : kAllScoreFunctions)
        for (GatePosition pos : {GatePosition::none, GatePosition::sdpa_output, GatePosition::key})
            for (bool rope : {false, true}) {
                AttentionOptions o = attention_options(pos);
                o.n_kv_heads = 2, o.rope = rope, o.qk_norm = rope, o.score_fn = f;
                CAPTURE(describe(o));
                Generator gen(16);
                const auto m = random_attention(o, gen, DType::f32);
                const Tensor x = randn({2, T, 16}, gen);
                KVCache cache;
                cache.keep = K, cache.keep_first = F;
                const Tensor prompt = m->forward(x.narrow(1, 0, 3), &cache);  // a first block within the cache
                CHECK(max_abs_diff(prompt, m->forward(x.narrow(1, 0, 3))) < 1e-5);
                double without_first = 0;  // how far the newest K alone would be: the test can tell
                for (int64_t t = 3; t < T; ++t) {
                    const Tensor got = m->forward(x.narrow(1, t, 1), &cache);  // (2, 1, 16)
                    CHECK(cache.length() == std::min<int64_t>(t + 1, K));
                    CHECK(cache.seen() == t + 1);
                    const int64_t recent = std::min<int64_t>(t + 1 - F, K - F);
                    const Tensor seen = cat({x.narrow(1, 0, F), x.narrow(1, t + 1 - recent, recent)}, 1);
                    CHECK(max_abs_diff(got, m->forward(seen).narrow(1, F + recent - 1, 1)) < 1e-5);
                    const Tensor newest = x.narrow(1, t + 1 - std::min<int64_t>(t + 1, K), std::min<int64_t>(t + 1, K));
                    if (t + 1 > K) without_first = std::max(without_first, max_abs_diff(got, m->forward(newest).narrow(1, K - 1, 1)));
                }
                CHECK(without_first > 1e-3);
                CHECK(cache.first_keys.shape() == Shape{2, 2, F, o.head_dim()});
            }
    AttentionOptions o = attention_options(GatePosition::none);
    Generator gen(17);
    const auto m = random_attention(o, gen, DType::f32);
    KVCache cache;
    cache.keep = 3, cache.keep_first = 3;
    CHECK_THROWS_WITH_AS(m->forward(randn({1, 1, 16}, gen), &cache), doctest::Contains("keep_first 3 with keep 3"),
                         std::invalid_argument);
}

// ================================================================ score functions

TEST_CASE("nn: every score function matches its formulas with every gate, QK-norm, GQA, a window, exclude_self") {
    Generator gen(18);
    for (ScoreFunction f : kAllScoreFunctions)
        for (GatePosition pos : kAllPositions)
            for (bool extras : {false, true}) {
                AttentionOptions o = attention_options(pos);
                o.score_fn = f;
                if (extras) o.n_kv_heads = 2, o.qk_norm = true, o.window = 3, o.exclude_self = true;
                CAPTURE(describe(o));
                const auto checked = check_formulas(o, gen);
                const AttentionCapture& seen = checked.first;
                const Expected& e = checked.second;
                // The slot's weight is what the keys' weights leave out of 1 (softmax1, sink), and
                // nothing else has a slot.
                if (f == ScoreFunction::softmax1 || f == ScoreFunction::sink) {
                    REQUIRE(seen.slot.shape() == Shape{2, 4, 6});
                    CHECK(max_abs_diff(seen.slot, 1.0 - sum(e.probs, {-1})) < 1e-10);
                } else {
                    CHECK(!seen.slot.defined());
                }
            }
}

TEST_CASE("nn: the sink logit is a parameter (h), init 0, in the state_dict") {
    AttentionOptions o = attention_options(GatePosition::sdpa_output);
    o.score_fn = ScoreFunction::sink;
    GatedAttention m(o);
    REQUIRE(contains(names_of(m), "sink"));
    CHECK(m.sink.shape() == Shape{4});
    CHECK(m.sink.requires_grad());
    CHECK(amax(abs(m.sink)).item() == 0);
    for (ScoreFunction f : {ScoreFunction::softmax, ScoreFunction::softmax1, ScoreFunction::sigmoid,
                            ScoreFunction::softpick}) {
        o.score_fn = f;
        CHECK_FALSE(contains(names_of(GatedAttention(o)), "sink"));
    }
    // An LM's state_dict holds each block's sink logit (test_checkpoint.cpp saves and loads it).
    LMConfig config = small_lm();
    config.attn.score_fn = ScoreFunction::sink;
    const auto names = names_of(GatedTransformerLM(config));
    CHECK(std::ranges::count_if(names, [](const std::string& n) { return n.ends_with("attn.sink"); }) ==
          config.n_layers);
}

TEST_CASE("nn: GatedAttention gradcheck for every score function with every gate (the sink logit included)") {
    Generator gen(20);
    for (ScoreFunction f : {ScoreFunction::softmax1, ScoreFunction::sink, ScoreFunction::sigmoid,
                            ScoreFunction::softpick})
        for (GatePosition pos : kAllPositions) {
            AttentionOptions o = attention_options(pos);
            o.score_fn = f;
            o.qk_norm = true;
            o.n_kv_heads = 2;
            if (pos == GatePosition::sdpa_output) o.window = 3, o.exclude_self = true, o.rope = true;
            CAPTURE(describe(o));
            const auto m = random_attention(o, gen);
            const Tensor x = randn({1, 4, 16}, gen, DType::f64).requires_grad_();
            std::vector<Tensor> inputs{x};
            if (pos == GatePosition::residual) inputs.push_back(randn({1, 4, 16}, gen, DType::f64).requires_grad_());
            const int n = check_gradients(*m, inputs, [&](const std::vector<Tensor>& in) {
                return m->forward(in[0], nullptr, in.size() > 1 ? in[1] : Tensor());
            });
            CHECK(n == int(m->named_parameters().size()));
        }
}

TEST_CASE("nn: decoding token by token with a KV cache equals the full pass, every score function") {
    Generator gen(22);
    for (ScoreFunction f : kAllScoreFunctions)
        for (GatePosition pos : {GatePosition::none, GatePosition::sdpa_output, GatePosition::scores_from_query})
            for (bool extras : {false, true}) {
                AttentionOptions o = attention_options(pos);
                o.score_fn = f;
                if (extras) o.n_kv_heads = 2, o.rope = true, o.qk_norm = true, o.window = 3, o.exclude_self = true;
                CAPTURE(describe(o));
                const auto m = random_attention(o, gen, DType::f32);
                const Tensor x = randn({2, 7, 16}, gen);
                const Tensor full = m->forward(x);
                KVCache cache;
                std::vector<Tensor> parts;
                for (int64_t t = 0; t < 7; ++t) parts.push_back(m->forward(x.narrow(1, t, 1), &cache));
                CHECK(max_abs_diff(cat(parts, 1), full) < 1e-5);
            }
}
