// test_gated_deltanet.cpp — Gated DeltaNet (nn/gated_deltanet.h): the chunked form against the
// recurrent one, float64 gradchecks of both and of the layer, decoding with the cache against
// the full pass, and the layer against an independent PyTorch reference on fixed weights
// (tests/reference/gated_deltanet.py) in both Hugging Face weight layouts.
#include <map>
#include <string>

#include "nn/io/checkpoint.h"
#include "tests/nn_check.h"

using namespace gg;
using namespace gg::nn;
using gg::testing::check_gradients;
using gg::testing::max_abs_diff;
using gg::testing::randomize;

namespace {

// Inputs of the bare delta rule as the layer makes them: unit keys, queries of length 1/√dk,
// β ∈ (0, 1), g < 0.
struct RuleInputs {
    Tensor q, k, v, g, beta, S0;
    std::vector<Tensor> all() const { return {q, k, v, g, beta, S0}; }
};

RuleInputs rule_inputs(int64_t B, int64_t H, int64_t T, int64_t dk, int64_t dv, Generator& gen) {
    const auto unit = [&](double scale) {
        const Tensor x = randn({B, H, T, dk}, gen, DType::f64);
        return x / sqrt(sum(x * x, {-1}, true)) * scale;
    };
    return {unit(1 / std::sqrt(double(dk))), unit(1.0), randn({B, H, T, dv}, gen, DType::f64),
            -rand({B, H, T}, gen, DType::f64) * 0.5, rand({B, H, T}, gen, DType::f64),
            randn({B, H, dk, dv}, gen, DType::f64)};
}

GatedDeltaNetOptions small_options(int64_t Hk = 2, int64_t Hv = 0, int64_t chunk = 4) {
    GatedDeltaNetOptions o;
    o.d_model = 12;
    o.n_k_heads = Hk;
    o.n_v_heads = Hv;
    o.head_k_dim = 4;
    o.head_v_dim = 3;
    o.conv_kernel = 3;
    o.chunk_size = chunk;
    return o;
}

std::shared_ptr<GatedDeltaNet> random_deltanet(const GatedDeltaNetOptions& o, uint64_t seed) {
    auto m = std::make_shared<GatedDeltaNet>(o);
    m->to(DType::f64);
    Generator gen(seed);
    randomize(*m, gen);
    return m;
}

std::string describe(const GatedDeltaNetOptions& o) {
    return "d " + std::to_string(o.d_model) + " Hk " + std::to_string(o.n_k_heads) + " Hv " +
           std::to_string(o.v_heads()) + " dk " + std::to_string(o.k_dim()) + " dv " + std::to_string(o.v_dim()) +
           " K " + std::to_string(o.conv_kernel) + " C " + std::to_string(o.chunk_size) +
           (o.form == DeltaRuleForm::recurrent ? " recurrent" : " chunked");
}

}  // namespace

TEST_CASE("deltanet: the chunked delta rule equals the recurrent one, outputs and final states") {
    Generator gen(1);
    struct Case {
        int64_t B, H, T, dk, dv, chunk;
    };
    // T a multiple of the chunk, not one, shorter than it, a single token; dk ≠ dv; chunk 1.
    for (const Case& c : {Case{2, 3, 16, 4, 5, 4}, Case{1, 2, 13, 6, 3, 4}, Case{2, 1, 5, 4, 4, 64},
                          Case{1, 2, 1, 3, 2, 8}, Case{1, 1, 9, 3, 3, 1}, Case{1, 2, 70, 8, 8, 16}}) {
        CAPTURE(c.T);
        CAPTURE(c.chunk);
        const RuleInputs in = rule_inputs(c.B, c.H, c.T, c.dk, c.dv, gen);
        for (bool with_state : {false, true}) {
            const Tensor S0 = with_state ? in.S0 : Tensor();
            const auto [o_rec, S_rec] = gated_delta_rule_recurrent(in.q, in.k, in.v, in.g, in.beta, S0);
            const auto [o_chunk, S_chunk] = gated_delta_rule_chunked(in.q, in.k, in.v, in.g, in.beta, S0, c.chunk);
            CHECK(o_chunk.shape() == Shape{c.B, c.H, c.T, c.dv});
            CHECK(S_chunk.shape() == Shape{c.B, c.H, c.dk, c.dv});
            CHECK(max_abs_diff(o_chunk, o_rec) < 1e-12);
            CHECK(max_abs_diff(S_chunk, S_rec) < 1e-12);
        }
    }
}

TEST_CASE("deltanet: the recurrent rule is the paper's S_t = S_{t-1} α_t (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ") {
    // Written the paper's way round, S (dv, dk), one head, in plain loops over numbers.
    Generator gen(2);
    const int64_t T = 6, dk = 3, dv = 2;
    const RuleInputs in = rule_inputs(1, 1, T, dk, dv, gen);
    const auto q = in.q.to_vector<double>(), k = in.k.to_vector<double>(), v = in.v.to_vector<double>(),
               g = in.g.to_vector<double>(), beta = in.beta.to_vector<double>();
    std::vector<double> S(dv * dk, 0.0), expected;
    for (int64_t t = 0; t < T; ++t) {
        std::vector<double> next(dv * dk);
        for (int64_t i = 0; i < dv; ++i)
            for (int64_t j = 0; j < dk; ++j) {
                double s = 0;  // (S (I − β k kᵀ))_ij = S_ij − β (S k)_i k_j
                for (int64_t l = 0; l < dk; ++l) s += S[i * dk + l] * k[t * dk + l];
                next[i * dk + j] = std::exp(g[t]) * (S[i * dk + j] - beta[t] * s * k[t * dk + j]) +
                                   beta[t] * v[t * dv + i] * k[t * dk + j];
            }
        S = next;
        for (int64_t i = 0; i < dv; ++i) {
            double o = 0;
            for (int64_t j = 0; j < dk; ++j) o += S[i * dk + j] * q[t * dk + j];
            expected.push_back(o);
        }
    }
    const Tensor o = gated_delta_rule_recurrent(in.q, in.k, in.v, in.g, in.beta).first;
    CHECK(gg::testing::mismatch(o, expected, 1e-13) == "");
}

TEST_CASE("deltanet: gradcheck of the delta rule in both forms, the initial state included") {
    Generator gen(3);
    for (int64_t T : {7, 3}) {  // chunks of 4: one partial chunk after a full one; one shorter than a chunk
        CAPTURE(T);
        RuleInputs in = rule_inputs(1, 2, T, 3, 2, gen);
        for (Tensor* t : {&in.q, &in.k, &in.v, &in.g, &in.beta, &in.S0}) t->requires_grad_();
        for (DeltaRuleForm form : {DeltaRuleForm::chunked, DeltaRuleForm::recurrent}) {
            const GradcheckResult r = gradcheck(
                [form](const std::vector<Tensor>& x) {
                    const auto [o, S] = form == DeltaRuleForm::chunked
                                            ? gated_delta_rule_chunked(x[0], x[1], x[2], x[3], x[4], x[5], 4)
                                            : gated_delta_rule_recurrent(x[0], x[1], x[2], x[3], x[4], x[5]);
                    return cat({o.flatten(), S.flatten()}, 0);  // both outputs checked
                },
                in.all());
            CHECK_MESSAGE(r.ok, (form == DeltaRuleForm::chunked ? "chunked: " : "recurrent: ") << r.message);
        }
    }
}

TEST_CASE("deltanet: the layer's chunked form equals its recurrent form, GQA-style value heads included") {
    for (const GatedDeltaNetOptions& base :
         {small_options(), small_options(2, 4), small_options(1, 3, 8), small_options(3, 3, 2)}) {
        GatedDeltaNetOptions recurrent = base;
        recurrent.form = DeltaRuleForm::recurrent;
        CAPTURE(describe(base));
        const auto chunked_layer = random_deltanet(base, 4), recurrent_layer = random_deltanet(recurrent, 4);
        Generator gen(5);
        for (int64_t T : {1, 3, 8, 11}) {
            const Tensor x = randn({2, T, base.d_model}, gen, DType::f64);
            CHECK(max_abs_diff(chunked_layer->forward(x), recurrent_layer->forward(x)) < 1e-12);
        }
    }
}

TEST_CASE("deltanet: gradcheck of the layer (input and every parameter), chunked and recurrent") {
    for (GatedDeltaNetOptions o : {small_options(2, 4), small_options(1, 0)}) {
        for (DeltaRuleForm form : {DeltaRuleForm::chunked, DeltaRuleForm::recurrent}) {
            o.form = form;
            // T = 6 over chunks of 4 (one partial chunk), and T = 3 (shorter than a chunk).
            for (int64_t T : {6, 3}) {
                CAPTURE(describe(o));
                CAPTURE(T);
                const auto m = random_deltanet(o, 6);
                Generator gen(7);
                const Tensor x = randn({1, T, o.d_model}, gen, DType::f64).requires_grad_();
                const int n = check_gradients(*m, {x}, [&](const std::vector<Tensor>& in) { return m->forward(in[0]); });
                CHECK(n == 11);  // w_q, w_k, w_v, w_z, w_beta, w_alpha, conv_weight, A_log, dt_bias, norm, w_o
                if (form == DeltaRuleForm::recurrent) break;  // the recurrent form: one length is enough
            }
        }
    }
}

TEST_CASE("deltanet: decoding token by token with the cache equals the full pass; so does a prompt then tokens") {
    GatedDeltaNetOptions no_past = small_options(2, 2);
    no_past.conv_kernel = 1;  // the convolution reads only the current token: the cache holds no inputs
    for (const GatedDeltaNetOptions& o : {small_options(2, 4), small_options(1, 0, 2), no_past}) {
        CAPTURE(describe(o));
        const auto m = random_deltanet(o, 8);
        Generator gen(9);
        const int64_t T = 11;
        const Tensor x = randn({2, T, o.d_model}, gen, DType::f64);
        const Tensor full = m->forward(x);
        // One token at a time; then prompts of 5 and 1 tokens and a 3-token block, then single tokens.
        for (const std::vector<int64_t>& lengths :
             {std::vector<int64_t>(T, 1), std::vector<int64_t>{5, 1, 3, 1, 1}, std::vector<int64_t>{2, 9}}) {
            DeltaNetCache cache;
            std::vector<Tensor> parts;
            int64_t at = 0;
            for (int64_t len : lengths) {
                parts.push_back(m->forward(x.narrow(1, at, len), &cache));
                at += len;
                CHECK(cache.seen() == at);
            }
            CHECK(cache.conv.shape() == Shape{2, o.conv_kernel - 1, o.conv_channels()});
            CHECK(cache.state.shape() == Shape{2, o.v_heads(), o.k_dim(), o.v_dim()});
            CHECK(!cache.state.requires_grad());
            CHECK(max_abs_diff(cat(parts, 1), full) < 1e-12);
        }
    }
}

TEST_CASE("deltanet: the state carries the past: a cache from another prompt changes the output") {
    const GatedDeltaNetOptions o = small_options();
    const auto m = random_deltanet(o, 10);
    Generator gen(11);
    const Tensor a = randn({1, 4, o.d_model}, gen, DType::f64), b = randn({1, 4, o.d_model}, gen, DType::f64);
    const Tensor next = randn({1, 1, o.d_model}, gen, DType::f64);
    DeltaNetCache after_a, after_b;
    m->forward(a, &after_a);
    m->forward(b, &after_b);
    CHECK(max_abs_diff(m->forward(next, &after_a), m->forward(next, &after_b)) > 1e-3);
    // The full pass of b then next ends where the cache after b does.
    const Tensor full = m->forward(cat({b, next}, 1));
    DeltaNetCache again;
    m->forward(b, &again);
    CHECK(max_abs_diff(m->forward(next, &again), full.narrow(1, 4, 1)) < 1e-12);
}

TEST_CASE("deltanet: parameter shapes, the residual, and bad input") {
    GatedDeltaNetOptions o = small_options(2, 4);
    GatedDeltaNet m(o);
    const std::map<std::string, Shape> expected = {
        {"w_q.weight", {8, 12}},  {"w_k.weight", {8, 12}},     {"w_v.weight", {12, 12}}, {"w_z.weight", {12, 12}},
        {"w_beta.weight", {4, 12}}, {"w_alpha.weight", {4, 12}}, {"conv_weight", {28, 3}}, {"A_log", {4}},
        {"dt_bias", {4}},         {"norm.weight", {3}},         {"w_o.weight", {12, 12}}};
    const auto params = m.named_parameters();
    CHECK(params.size() == expected.size());
    for (const auto& entry : params) {  // not a structured binding: clang 14's CAPTURE cannot name one
        const auto& name = entry.first;
        const auto& p = entry.second;
        CAPTURE(name);
        REQUIRE(expected.count(name) == 1);
        CHECK(p.shape() == expected.at(name));
    }
    // The init: A in (0.01, 16), a step softplus(dt_bias) in (0.001, 0.1), so α = e^{−A·step} > 0.2.
    const Tensor A = exp(m.A_log), step = log(1.0 + exp(m.dt_bias));
    CHECK(amin(A).item() > 0.01);
    CHECK(amax(A).item() < 16);
    CHECK(amin(step).item() > 0.001 * (1 - 1e-5));
    CHECK(amax(step).item() < 0.1 * (1 + 1e-5));

    Generator gen(12);
    const Tensor x = randn({2, 5, 12}, gen), residual = randn({2, 5, 12}, gen);
    CHECK(max_abs_diff(m.forward(x, nullptr, residual), residual + m.forward(x)) < 1e-5);

    CHECK_THROWS_WITH_AS(m.forward(zeros({2, 5, 8})), doctest::Contains("expected x (B, T, 12), got (2,5,8)"),
                         std::invalid_argument);
    DeltaNetCache cache;
    m.forward(x, &cache);
    CHECK_THROWS_WITH_AS(m.forward(x.narrow(0, 0, 1), &cache), doctest::Contains("the cache holds 2 sequences"),
                         std::invalid_argument);
    GatedDeltaNetOptions bad = o;
    bad.n_v_heads = 3;  // not a multiple of 2 key heads
    CHECK_THROWS_WITH_AS(GatedDeltaNet{bad}, doctest::Contains("n_v_heads 3"), std::invalid_argument);
    bad = o;
    bad.chunk_size = 48;
    CHECK_THROWS_WITH_AS(GatedDeltaNet{bad}, doctest::Contains("chunk_size 48"), std::invalid_argument);
    const RuleInputs in = rule_inputs(1, 2, 5, 3, 2, gen);
    CHECK_THROWS_WITH_AS(gated_delta_rule_chunked(in.q, in.k, in.v, in.g, in.beta, in.S0, 6),
                         doctest::Contains("chunk size 6 is not a power of two"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(gated_delta_rule_recurrent(in.q, in.k, in.v, in.g.narrow(2, 0, 4), in.beta),
                         doctest::Contains("g (1,2,4)"), std::invalid_argument);
}

// ---------------------------------------------------------------- against the PyTorch reference

namespace {

// tests/reference/gated_deltanet.safetensors (written by gated_deltanet.py): x and the weights
// (float32 values, read in float64), the same weights in both Hugging Face layouts, y and the
// final state.
struct Fixture {
    GatedDeltaNetOptions options;
    std::map<std::string, Tensor> tensors;
    const Tensor& operator[](const std::string& name) const { return tensors.at(name); }
};

Fixture read_fixture() {
    Metadata metadata;
    Fixture f;
    for (const auto& [name, t] : load_tensors("tests/reference/gated_deltanet.safetensors", &metadata))
        f.tensors[name] = t.to(DType::f64);
    const nlohmann::json c = nlohmann::json::parse(metadata.at("config"));
    f.options.d_model = c.at("hidden_size");
    f.options.n_k_heads = c.at("linear_num_key_heads");
    f.options.n_v_heads = c.at("linear_num_value_heads");
    f.options.head_k_dim = c.at("linear_key_head_dim");
    f.options.head_v_dim = c.at("linear_value_head_dim");
    f.options.conv_kernel = c.at("linear_conv_kernel_dim");
    f.options.norm_eps = c.at("rms_norm_eps");
    return f;
}

enum class Layout { qwen3_5, qwen3_next, qwen3_next_read_as_qwen3_5 };

// The fixture's weights in `layout` written into m, through the map in nn/gated_deltanet.h.
// The last layout is a mistake on purpose: Qwen3-Next's joined rows read as if they were
// Qwen3.5's q ‖ k ‖ v ‖ z and b ‖ a.
void load_hf(GatedDeltaNet& m, const Fixture& f, Layout layout) {
    const GatedDeltaNetOptions& o = m.options();
    const int64_t d = o.d_model, Hk = o.n_k_heads, Hv = o.v_heads(), dk = o.k_dim(), dv = o.v_dim(), r = Hv / Hk;
    Tensor q, k, v, z, b, a;
    if (layout == Layout::qwen3_5) {
        const Tensor qkv = f["in_proj_qkv.weight"];
        q = qkv.narrow(0, 0, Hk * dk), k = qkv.narrow(0, Hk * dk, Hk * dk), v = qkv.narrow(0, 2 * Hk * dk, Hv * dv);
        z = f["in_proj_z.weight"], b = f["in_proj_b.weight"], a = f["in_proj_a.weight"];
    } else if (layout == Layout::qwen3_next_read_as_qwen3_5) {
        const Tensor qkvz = f["in_proj_qkvz.weight"], ba = f["in_proj_ba.weight"];
        q = qkvz.narrow(0, 0, Hk * dk), k = qkvz.narrow(0, Hk * dk, Hk * dk), v = qkvz.narrow(0, 2 * Hk * dk, Hv * dv);
        z = qkvz.narrow(0, 2 * Hk * dk + Hv * dv, Hv * dv), b = ba.narrow(0, 0, Hv), a = ba.narrow(0, Hv, Hv);
    } else {
        const Tensor groups = f["in_proj_qkvz.weight"].view({Hk, 2 * dk + 2 * r * dv, d});
        const Tensor ba = f["in_proj_ba.weight"].view({Hk, 2 * r, d});
        q = groups.narrow(1, 0, dk).reshape({Hk * dk, d});
        k = groups.narrow(1, dk, dk).reshape({Hk * dk, d});
        v = groups.narrow(1, 2 * dk, r * dv).reshape({Hv * dv, d});
        z = groups.narrow(1, 2 * dk + r * dv, r * dv).reshape({Hv * dv, d});
        b = ba.narrow(1, 0, r).reshape({Hv, d}), a = ba.narrow(1, r, r).reshape({Hv, d});
    }
    using gg::testing::assign;
    assign(m.w_q->weight, q), assign(m.w_k->weight, k), assign(m.w_v->weight, v), assign(m.w_z->weight, z);
    assign(m.w_beta->weight, b), assign(m.w_alpha->weight, a);
    assign(m.conv_weight, f["conv1d.weight"].view({o.conv_channels(), o.conv_kernel}));
    assign(m.dt_bias, f["dt_bias"]), assign(m.A_log, f["A_log"]), assign(m.norm->weight, f["norm.weight"]);
    assign(m.w_o->weight, f["out_proj.weight"]);
}

}  // namespace

TEST_CASE("deltanet: the layer matches the PyTorch reference on fixed weights, in both Hugging Face layouts") {
    const Fixture f = read_fixture();
    const Tensor& x = f["x"];  // (2, 11, 8): chunks of 4, two full and a partial one
    for (Layout layout : {Layout::qwen3_5, Layout::qwen3_next})
        for (DeltaRuleForm form : {DeltaRuleForm::chunked, DeltaRuleForm::recurrent}) {
            GatedDeltaNetOptions o = f.options;
            o.chunk_size = 4;
            o.form = form;
            CAPTURE(layout == Layout::qwen3_5 ? "Qwen3.5" : "Qwen3-Next");
            CAPTURE(describe(o));
            GatedDeltaNet m(o);
            m.to(DType::f64);
            load_hf(m, f, layout);
            DeltaNetCache cache;
            CHECK(max_abs_diff(m.forward(x, &cache), f["y"]) < 1e-13);
            CHECK(max_abs_diff(cache.state, f["state"]) < 1e-13);
            // In float32, to float32's rounding.
            m.to(DType::f32);
            CHECK(max_abs_diff(m.forward(x.to(DType::f32)), f["y"]) < 1e-5);
        }
    // Qwen3-Next's joined rows read as if they were Qwen3.5's: the test can tell the layouts apart.
    GatedDeltaNet m(f.options);
    m.to(DType::f64);
    load_hf(m, f, Layout::qwen3_next_read_as_qwen3_5);
    CHECK(max_abs_diff(m.forward(x), f["y"]) > 1e-2);
}
