// test_nn.cpp — the modules of nn/, each against its formula computed by hand from the
// module's own weights; gradients by float64 finite differences with respect to the
// inputs and to every parameter; the gated-attention family against SPEC §2; MoE against
// its dense formula; KV-cache decoding and generate() against the full forward pass.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gatedgrad.h"
#include "tests/check.h"
#include "nn/transformer.h"

using namespace gg;
using gg::testing::max_abs_diff;
using namespace gg::nn;

namespace {

// ---------------------------------------------------------------- helpers

// doctest::Approx with a purely relative tolerance (its default adds a scale of 1, which
// would make the tolerance absolute for values below 1).
doctest::Approx relative(double value, double tolerance) { return doctest::Approx(value).epsilon(tolerance).scale(0); }

// Writes src's values into dst's own storage, converting the dtype: the module that holds
// dst sees the new values, and its Tensor handles stay the same.
void assign(const Tensor& dst, const Tensor& src) {
    REQUIRE(dst.is_contiguous());
    REQUIRE(dst.numel() == src.numel());
    const Tensor from = src.detach().to(dst.dtype()).contiguous();
    dispatch(dst.dtype(), [&]<class T>() { std::copy_n(from.data<T>(), from.numel(), dst.data<T>()); });
}

// Every parameter ~ N(0, scale²): gates, norms and biases away from their special
// initial values (a zero gate weight would hide a bug in the gate's input path).
void randomize(const Module& m, Generator& gen, double scale = 0.5) {
    for (const auto& [name, p] : m.named_parameters()) assign(p, randn(p.shape(), gen, DType::f64) * scale);
}

// `forward()` as a differentiable function of `value`, the values of a module parameter.
// gradcheck perturbs private copies of its inputs, so the copy's values are written into
// the parameter's storage first; the node then hands the output gradient through
// forward()'s graph to the parameter and returns the parameter's gradient as value's.
Tensor bind_parameter(const Tensor& param, const Tensor& value, const std::function<Tensor()>& forward) {
    assign(param, value);
    const Tensor y = forward();
    if (!grad_enabled() || !value.requires_grad()) return y;
    return record("bind_parameter", y.detach(), {value}, [y, param](const Tensor& g) {
        param.zero_grad();
        y.backward(g);
        const Tensor grad = param.grad().defined() ? param.grad() : zeros_like(param);
        param.zero_grad();
        return std::vector<Tensor>{grad};
    });
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// gradcheck of f with respect to its inputs that require grad, then with respect to each
// parameter of `module` that `which` accepts (all when empty), one at a time so that a
// failure names the parameter. Parameters get their values back afterwards. Returns how
// many parameters were checked.
int check_gradients(const Module& module, const std::vector<Tensor>& inputs, const Fn& f,
                    const std::function<bool(const std::string&)>& which = {}, const GradcheckOptions& options = {}) {
    if (std::any_of(inputs.begin(), inputs.end(), [](const Tensor& x) { return x.requires_grad(); })) {
        const GradcheckResult r = gradcheck(f, inputs, options);
        CHECK_MESSAGE(r.ok, "inputs: " << r.message);
    }
    std::vector<Tensor> fixed;
    for (const Tensor& x : inputs) fixed.push_back(x.detach());
    int checked = 0;
    for (const auto& [name, p] : module.named_parameters()) {
        if (which && !which(name)) continue;
        const Tensor param = p, original = p.detach().clone();
        std::vector<Tensor> in = fixed;
        in.push_back(original.to(DType::f64).clone().requires_grad_());
        const GradcheckResult r = gradcheck(
            [&](const std::vector<Tensor>& xs) {
                return bind_parameter(param, xs.back(),
                                      [&] { return f(std::vector<Tensor>(xs.begin(), xs.end() - 1)); });
            },
            in, options);
        assign(param, original);
        CHECK_MESSAGE(r.ok, name << ": " << r.message);
        ++checked;
    }
    for (const Tensor& p : module.parameters()) p.zero_grad();
    return checked;
}

std::function<bool(const std::string&)> only(std::set<std::string> names) {
    return [names = std::move(names)](const std::string& n) { return names.count(n) > 0; };
}

std::vector<std::string> names_of(const Module& m) {
    std::vector<std::string> out;
    for (const auto& [name, p] : m.named_parameters()) out.push_back(name);
    return out;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

// ---------------------------------------------------------------- SPEC §2 by hand

// The gate functions of SPEC §2 (article 5.1), written from exp so as not to share code
// with the ops under test.
Tensor spec_gate_fn(GateFunction f, const Tensor& z) {
    switch (f) {
        case GateFunction::sigmoid: return 1.0 / (1.0 + exp(-z));
        case GateFunction::tanh_half: return (tanh(z) + 1.0) / 2.0;
        case GateFunction::relu: return maximum(z, zeros_like(z));
        case GateFunction::silu: return z / (1.0 + exp(-z));
        case GateFunction::none: return ones_like(z);
    }
    return z;
}

// SPEC §2 sharing, as (heads, width) of the gate: element-wise (h, dk), head-wise (h, 1),
// shared (1, dk); value/key gates span the kv heads; G2 is one scalar per (query, head).
std::pair<int64_t, int64_t> spec_gate_layout(const AttentionOptions& o) {
    const int64_t heads =
        o.gate == GatePosition::value || o.gate == GatePosition::key ? o.kv_heads() : o.n_heads;
    if (o.gate == GatePosition::scores_from_x) return {o.n_heads, 1};
    switch (o.sharing) {
        case GateSharing::elementwise: return {heads, o.head_dim()};
        case GateSharing::headwise: return {heads, 1};
        case GateSharing::shared: return {1, o.head_dim()};
    }
    return {0, 0};
}

// (B, T, n·w) → (B, n, T, w) and back.
Tensor split_heads(const Tensor& t, int64_t n) {
    return t.reshape({t.size(0), t.size(1), n, t.size(2) / n}).permute({0, 2, 1, 3});
}
Tensor merge_heads(const Tensor& t) { return t.permute({0, 2, 1, 3}).reshape({t.size(0), t.size(2), -1}); }

Tensor spec_rms_norm(const Tensor& x, const Tensor& weight, double eps) {
    return x / sqrt(mean(x * x, {-1}, true) + eps) * weight;
}

struct Expected {
    Tensor y;      // (B, T, d)
    Tensor probs;  // (B, H, T, T)
    Tensor gate;   // (B, heads, T, width) as SPEC lays it out
};

// GatedAttention on the full sequence, from SPEC §2's formulas and the module's own
// weights. Unlike the module, the G2/G3 gates multiply the logits themselves, and GQA
// repeats kv heads explicitly. apply_gate = false gives the same attention ungated.
Expected reference_attention(GatedAttention& m, const Tensor& x, const Tensor& gate_source = Tensor(),
                             bool apply_gate = true) {
    const AttentionOptions& o = m.options();
    const int64_t T = x.size(1), H = o.n_heads, Hkv = o.kv_heads(), dk = o.d_model / H;
    const bool gated = apply_gate && o.gate != GatePosition::none && o.gate_fn != GateFunction::none;
    const auto [gate_heads, gate_width] = spec_gate_layout(o);
    auto gate_from = [&, gate_heads = gate_heads](const Tensor& src) {  // σ(src W_g): (B, heads, T, width)
        return split_heads(spec_gate_fn(o.gate_fn, matmul(src, m.w_g->weight.t())), gate_heads);
    };
    Expected e;
    Tensor q = split_heads(matmul(x, m.w_q->weight.t()), H);    // (B, H, T, dk)
    Tensor k = split_heads(matmul(x, m.w_k->weight.t()), Hkv);  // (B, Hkv, T, dk)
    Tensor v = split_heads(matmul(x, m.w_v->weight.t()), Hkv);  // (B, Hkv, T, dk)
    if (o.qk_norm) {
        q = spec_rms_norm(q, m.q_norm->weight, m.q_norm->eps);
        k = spec_rms_norm(k, m.k_norm->weight, m.k_norm->eps);
    }
    // The paper's query/key/value gates act after QK-norm, which would otherwise undo them.
    if (gated && o.gate == GatePosition::query) q = q * (e.gate = gate_from(x));
    if (gated && o.gate == GatePosition::key) k = k * (e.gate = gate_from(x));
    if (gated && o.gate == GatePosition::value) v = v * (e.gate = gate_from(x));
    if (o.rope) q = m.rope()->forward(q), k = m.rope()->forward(k);
    const Tensor kk = repeat_interleave(k, H / Hkv, 1), vv = repeat_interleave(v, H / Hkv, 1);  // (B, H, T, dk)
    Tensor logits = matmul(q, kk.transpose(-1, -2)) / std::sqrt(double(dk));                  // (B, H, T, T)
    if (gated && o.gate == GatePosition::scores_from_x) logits = logits * (e.gate = gate_from(x));
    if (gated && o.gate == GatePosition::scores_from_query)
        logits = logits * (e.gate = spec_gate_fn(o.gate_fn, sum(q * m.w_g_query.view({1, H, 1, dk}), {-1}, true)));
    std::vector<double> hidden(T * T, 0.0);
    for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j)
            hidden[i * T + j] = (o.causal && j > i) || (o.window > 0 && i - j >= o.window) ? 1 : 0;
    e.probs = softmax(masked_fill(logits, from_vector(hidden, {T, T}), -INFINITY), -1);
    Tensor heads = matmul(e.probs, vv);  // (B, H, T, dk)
    if (gated && o.gate == GatePosition::sdpa_output) heads = heads * (e.gate = gate_from(x));
    e.y = matmul(merge_heads(heads), m.w_o->weight.t());  // (B, T, d)
    if (gated && (o.gate == GatePosition::after_merge || o.gate == GatePosition::residual)) {
        e.gate = gate_from(o.gate == GatePosition::residual && gate_source.defined() ? gate_source : x);
        e.y = merge_heads(split_heads(e.y, H) * e.gate);  // one gate value per channel of d
    }
    return e;
}

std::string describe(const AttentionOptions& o) {
    return gate_position_name(o.gate) + "/" + gate_function_name(o.gate_fn) + "/" + gate_sharing_name(o.sharing) +
           " H=" + std::to_string(o.n_heads) + " Hkv=" + std::to_string(o.kv_heads()) + (o.rope ? " rope" : "") +
           (o.qk_norm ? " qk_norm" : "") + (o.window ? " window=" + std::to_string(o.window) : "") +
           (o.exclude_self ? " exclude_self" : "") + (o.causal ? "" : " non-causal");
}

// A float64 GatedAttention with every parameter random.
std::shared_ptr<GatedAttention> random_attention(const AttentionOptions& o, Generator& gen, DType dtype = DType::f64) {
    auto m = std::make_shared<GatedAttention>(o);
    m->to(dtype);
    randomize(*m, gen);
    return m;
}

const GatePosition kAllPositions[] = {GatePosition::none,        GatePosition::sdpa_output, GatePosition::scores_from_x,
                                      GatePosition::scores_from_query, GatePosition::residual, GatePosition::after_merge,
                                      GatePosition::value,       GatePosition::key,         GatePosition::query};
const GateFunction kAllFunctions[] = {GateFunction::sigmoid, GateFunction::tanh_half, GateFunction::relu,
                                      GateFunction::silu, GateFunction::none};
const GateSharing kAllSharings[] = {GateSharing::elementwise, GateSharing::headwise, GateSharing::shared};

AttentionOptions attention_options(GatePosition gate, GateFunction fn = GateFunction::sigmoid,
                                   GateSharing sharing = GateSharing::elementwise) {
    AttentionOptions o;
    o.d_model = 16;
    o.n_heads = 4;
    o.gate = gate;
    o.gate_fn = fn;
    o.sharing = sharing;
    return o;
}

// ---------------------------------------------------------------- MoE by hand

struct Routing {
    std::vector<std::vector<double>> probs;  // (N, E) softmax of the router logits
    std::vector<std::vector<int64_t>> top;   // (N, k) chosen experts, most probable first
    double min_gap;                          // smallest p_(k) − p_(k+1): distance to a tie
};

Routing route(const MoE& moe, const Tensor& tokens) {
    const int64_t N = tokens.size(0), D = tokens.size(1), E = moe.experts.size(), k = moe.top_k;
    const auto X = tokens.to_vector<double>(), W = moe.router->weight.to_vector<double>();
    Routing r{{}, {}, INFINITY};
    for (int64_t n = 0; n < N; ++n) {
        std::vector<double> logit(E), p(E);
        for (int64_t e = 0; e < E; ++e)
            for (int64_t c = 0; c < D; ++c) logit[e] += X[n * D + c] * W[e * D + c];
        const double top_logit = *std::max_element(logit.begin(), logit.end());
        double total = 0;
        for (int64_t e = 0; e < E; ++e) total += p[e] = std::exp(logit[e] - top_logit);
        for (double& pe : p) pe /= total;
        std::vector<int64_t> order(E);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
        if (k < E) r.min_gap = std::min(r.min_gap, p[order[k - 1]] - p[order[k]]);
        r.probs.push_back(p);
        r.top.emplace_back(order.begin(), order.begin() + k);
    }
    return r;
}

// y = Σ_{e in top-k} w_e expert_e(x), w the renormalised top-k probabilities, with every
// expert run densely on every token.
Tensor dense_moe(const MoE& moe, const Tensor& x) {
    const int64_t D = x.size(-1), N = x.numel() / D;
    const Tensor tokens = x.reshape({N, D});
    const Routing r = route(moe, tokens);
    std::vector<Tensor> expert_out;
    for (const auto& expert : moe.experts) expert_out.push_back(expert->forward(tokens));  // (N, D) each
    std::vector<Tensor> rows;
    for (int64_t n = 0; n < N; ++n) {
        double kept = 0;
        for (int64_t e : r.top[n]) kept += r.probs[n][e];
        Tensor row = zeros({D}, x.dtype());
        for (int64_t e : r.top[n]) row = row + expert_out[e].select(0, n) * (r.probs[n][e] / kept);
        rows.push_back(row);
    }
    return stack(rows, 0).reshape(x.shape());
}

// ---------------------------------------------------------------- language-model configs

LMConfig small_lm(GatePosition gate = GatePosition::sdpa_output) {
    LMConfig c;
    c.vocab_size = 23;
    c.max_len = 12;
    c.d_model = 16;
    c.n_layers = 2;
    c.attn.n_heads = 4;
    c.attn.gate = gate;
    c.d_ff = 24;
    return c;
}

}  // namespace

// ================================================================ basic layers

TEST_CASE("nn: Linear computes x Wᵀ + b, with and without bias; gradients check") {
    Generator gen(1);
    for (bool bias : {true, false}) {
        CAPTURE(bias);
        Linear lin(5, 3, bias);
        CHECK(amax(abs(lin.weight)).item() <= 1 / std::sqrt(5.0));  // torch: U(±1/√in)
        CHECK(lin.bias.defined() == bias);
        CHECK(names_of(lin) == (bias ? std::vector<std::string>{"weight", "bias"} : std::vector<std::string>{"weight"}));
        lin.to(DType::f64);
        randomize(lin, gen);
        const Tensor x = randn({2, 4, 5}, gen, DType::f64);
        const Tensor y = lin.forward(x);
        REQUIRE(y.shape() == Shape{2, 4, 3});
        const auto X = x.to_vector<double>(), W = lin.weight.to_vector<double>(), Y = y.to_vector<double>();
        const auto b = bias ? lin.bias.to_vector<double>() : std::vector<double>(3, 0.0);
        double err = 0;
        for (int r = 0; r < 8; ++r)
            for (int o = 0; o < 3; ++o) {
                double s = b[o];
                for (int i = 0; i < 5; ++i) s += X[r * 5 + i] * W[o * 5 + i];
                err = std::max(err, std::abs(s - Y[r * 3 + o]));
            }
        CHECK(err < 1e-12);
        const int n = check_gradients(lin, {x.clone().requires_grad_()},
                                      [&](const std::vector<Tensor>& in) { return lin.forward(in[0]); });
        CHECK(n == (bias ? 2 : 1));
    }
    CHECK_THROWS_AS(Linear(5, 3).forward(zeros({2, 4})), std::invalid_argument);
}

TEST_CASE("nn: Embedding picks rows, and repeated ids add up in the gradient") {
    Generator gen(2);
    Embedding emb(6, 4);
    emb.to(DType::f64);
    const std::vector<int64_t> id_values{1, 3, 1, 5, 1, 0};
    const Tensor ids = from_vector(id_values, {2, 3});
    const Tensor y = emb.forward(ids);
    REQUIRE(y.shape() == Shape{2, 3, 4});
    for (int64_t n = 0; n < 6; ++n) CHECK(max_abs_diff(y.reshape({6, 4}).select(0, n), emb.weight.select(0, id_values[n])) == 0);

    const Tensor g = randn({2, 3, 4}, gen, DType::f64), G = g.reshape({6, 4});
    emb.forward(ids).backward(g);
    const Tensor dW = emb.weight.grad();
    CHECK(max_abs_diff(dW.select(0, 1), G.select(0, 0) + G.select(0, 2) + G.select(0, 4)) < 1e-12);
    CHECK(max_abs_diff(dW.select(0, 3), G.select(0, 1)) < 1e-12);
    CHECK(max_abs_diff(dW.select(0, 2), zeros({4}, DType::f64)) == 0);  // never looked up
    emb.zero_grad();
    CHECK(check_gradients(emb, {}, [&](const std::vector<Tensor>&) { return emb.forward(ids); }) == 1);
}

TEST_CASE("nn: RMSNorm and LayerNorm follow their formulas; gradients check") {
    Generator gen(3);
    const Tensor x = randn({3, 6}, gen, DType::f64) * 2.0 + 0.5;
    const auto X = x.to_vector<double>();

    RMSNorm rms(6, 1e-5);
    CHECK(max_abs_diff(rms.weight, ones({6})) == 0);
    rms.to(DType::f64);
    randomize(rms, gen);
    {
        const auto Y = rms.forward(x).to_vector<double>(), g = rms.weight.to_vector<double>();
        double err = 0;
        for (int r = 0; r < 3; ++r) {
            double ms = 0;
            for (int c = 0; c < 6; ++c) ms += X[r * 6 + c] * X[r * 6 + c] / 6;
            for (int c = 0; c < 6; ++c)
                err = std::max(err, std::abs(X[r * 6 + c] / std::sqrt(ms + 1e-5) * g[c] - Y[r * 6 + c]));
        }
        CHECK(err < 1e-12);
        check_gradients(rms, {x.clone().requires_grad_()}, [&](const std::vector<Tensor>& in) { return rms.forward(in[0]); });
    }

    LayerNorm ln(6);
    CHECK(max_abs_diff(ln.weight, ones({6})) == 0);
    CHECK(max_abs_diff(ln.bias, zeros({6})) == 0);
    ln.to(DType::f64);
    {
        // At init: zero mean and (up to ε) unit biased variance per row.
        const Tensor y = ln.forward(x);
        CHECK(amax(abs(mean(y, {-1}))).item() < 1e-12);
        CHECK(amax(abs(mean(y * y, {-1}) - 1.0)).item() < 1e-4);
    }
    randomize(ln, gen);
    {
        const auto Y = ln.forward(x).to_vector<double>(), g = ln.weight.to_vector<double>(),
                   b = ln.bias.to_vector<double>();
        double err = 0;
        for (int r = 0; r < 3; ++r) {
            double mu = 0, var = 0;
            for (int c = 0; c < 6; ++c) mu += X[r * 6 + c] / 6;
            for (int c = 0; c < 6; ++c) var += (X[r * 6 + c] - mu) * (X[r * 6 + c] - mu) / 6;
            for (int c = 0; c < 6; ++c)
                err = std::max(err, std::abs((X[r * 6 + c] - mu) / std::sqrt(var + 1e-5) * g[c] + b[c] - Y[r * 6 + c]));
        }
        CHECK(err < 1e-12);
        CHECK(check_gradients(ln, {x.clone().requires_grad_()},
                              [&](const std::vector<Tensor>& in) { return ln.forward(in[0]); }) == 2);
    }
}

TEST_CASE("nn: Dropout keeps units with probability 1 − p scaled by 1/(1 − p) in training, identity in eval") {
    manual_seed(11);
    const double p = 0.3;
    const int64_t n = 200000;
    Dropout drop(p);
    const Tensor x = ones({n}, DType::f64).requires_grad_();
    const Tensor y = drop.forward(x);
    const auto Y = y.to_vector<double>();
    int64_t dropped = 0, bad = 0;
    for (double v : Y) {
        if (v == 0) ++dropped;
        else if (std::abs(v - 1 / (1 - p)) > 1e-12) ++bad;
    }
    CHECK(bad == 0);
    CHECK(std::abs(double(dropped) / n - p) < 0.01);  // ~10 binomial standard deviations
    CHECK(std::abs(mean(y).item() - 1.0) < 0.015);  // E[y] = x
    y.backward(ones({n}, DType::f64));
    CHECK(max_abs_diff(x.grad(), y) == 0);  // dy/dx is the same mask and scale (x = 1)
    CHECK(max_abs_diff(drop.forward(x), y) > 0);  // a fresh mask each call

    drop.eval();
    const Tensor z = randn({5, 7}, default_generator(), DType::f64);
    CHECK(max_abs_diff(drop.forward(z), z) == 0);
    drop.train();
    CHECK(max_abs_diff(Dropout(0).forward(z), z) == 0);
    CHECK(amax(abs(Dropout(1).forward(z))).item() == 0);
    CHECK_THROWS_AS(Dropout(1.5).forward(z), std::invalid_argument);
}

TEST_CASE("nn: SwiGLU is W3(silu(W1 x) ⊙ W2 x); gradients check") {
    Generator gen(4);
    SwiGLU ffn(6, 10);
    CHECK(names_of(ffn) == std::vector<std::string>{"w1.weight", "w2.weight", "w3.weight"});
    CHECK(ffn.w1->weight.shape() == Shape{10, 6});
    CHECK(ffn.w3->weight.shape() == Shape{6, 10});
    ffn.to(DType::f64);
    randomize(ffn, gen);
    const Tensor x = randn({2, 3, 6}, gen, DType::f64);
    const Tensor a = matmul(x, ffn.w1->weight.t()), b = matmul(x, ffn.w2->weight.t());
    const Tensor expected = matmul(a / (1.0 + exp(-a)) * b, ffn.w3->weight.t());
    CHECK(max_abs_diff(ffn.forward(x), expected) < 1e-12);
    CHECK(check_gradients(ffn, {x.clone().requires_grad_()},
                          [&](const std::vector<Tensor>& in) { return ffn.forward(in[0]); }) == 3);
}

TEST_CASE("nn: LearnedPositionalEmbedding returns rows [offset, offset + T)") {
    Generator gen(5);
    LearnedPositionalEmbedding pos(64, 32);
    const double sd = std::sqrt(mean(pos.weight * pos.weight).item());
    CHECK(sd > 0.018);  // N(0, 0.02²) init, 2048 draws
    CHECK(sd < 0.022);
    pos.to(DType::f64);
    const Tensor y = pos.forward(5, 7);
    CHECK(y.shape() == Shape{5, 32});
    for (int64_t t = 0; t < 5; ++t) CHECK(max_abs_diff(y.select(0, t), pos.weight.select(0, 7 + t)) == 0);
    CHECK_NOTHROW(pos.forward(4, 60));
    CHECK_THROWS_AS(pos.forward(5, 60), std::out_of_range);
    CHECK_THROWS_AS(pos.forward(1, -1), std::out_of_range);
    const Tensor w = randn({5, 32}, gen, DType::f64);
    CHECK(check_gradients(pos, {}, [&](const std::vector<Tensor>&) { return pos.forward(5, 7) * w; }) == 1);
}

// ================================================================ RoPE

namespace {
const RopeScaling kAllScalings[] = {RopeScaling::none, RopeScaling::interpolation, RopeScaling::ntk, RopeScaling::yarn};

RopeOptions rope_options(RopeScaling scaling) {
    RopeOptions o;
    o.base = 10000;
    o.scaling = scaling;
    o.factor = scaling == RopeScaling::none ? 1 : 4;
    o.original_length = 512;
    return o;
}

// θ_c for head size D, from the formulas in rope.h's header comment.
std::vector<double> spec_frequencies(int64_t D, const RopeOptions& o) {
    const double s = o.factor;
    const double base = o.scaling == RopeScaling::ntk ? o.base * std::pow(s, double(D) / (D - 2)) : o.base;
    std::vector<double> theta(D / 2);
    for (int64_t c = 0; c < D / 2; ++c) {
        const double t = std::pow(base, -2.0 * c / D);
        const double turns = o.original_length * t / (2 * M_PI);
        const double keep = std::clamp((turns - o.yarn_beta_slow) / (o.yarn_beta_fast - o.yarn_beta_slow), 0.0, 1.0);
        theta[c] = o.scaling == RopeScaling::interpolation ? t / s
                   : o.scaling == RopeScaling::yarn        ? keep * t + (1 - keep) * t / s
                                                           : t;
    }
    return theta;
}
}  // namespace

TEST_CASE("nn: RoPE frequencies follow each scaling's formula") {
    const int64_t D = 16;
    for (RopeScaling scaling : kAllScalings) {
        CAPTURE(rope_scaling_name(scaling));
        const RopeOptions o = rope_options(scaling);
        const std::vector<double> got = RoPE(D, o).frequencies(), want = spec_frequencies(D, o);
        REQUIRE(got.size() == want.size());
        for (size_t c = 0; c < got.size(); ++c) CHECK(got[c] == relative(want[c], 1e-12));
    }
    const std::vector<double> plain = RoPE(D, rope_options(RopeScaling::none)).frequencies(),
                              pi = RoPE(D, rope_options(RopeScaling::interpolation)).frequencies(),
                              ntk = RoPE(D, rope_options(RopeScaling::ntk)).frequencies(),
                              yarn = RoPE(D, rope_options(RopeScaling::yarn)).frequencies();
    CHECK(plain[3] == relative(std::pow(10000.0, -6.0 / 16), 1e-12));
    // NTK keeps the highest frequency and slows the lowest exactly as interpolation does.
    CHECK(ntk[0] == relative(1.0, 1e-12));
    CHECK(ntk[7] == relative(pi[7], 1e-12));
    // YaRN (L = 512, s = 4): channel 0 turns 81 times within L (> β_fast: kept), channel 7
    // well under once (< β_slow: interpolated), channels in between blended.
    CHECK(yarn[0] == relative(plain[0], 1e-12));
    CHECK(yarn[7] == relative(plain[7] / 4, 1e-12));
    CHECK(yarn[2] < plain[2]);
    CHECK(yarn[2] > plain[2] / 4);

    CHECK_THROWS_AS(RoPE(7), std::invalid_argument);
    RopeOptions bad = rope_options(RopeScaling::yarn);
    bad.original_length = 0;
    CHECK_THROWS_AS(RoPE(8, bad), std::invalid_argument);
    bad = rope_options(RopeScaling::ntk);
    bad.factor = 0.5;
    CHECK_THROWS_AS(RoPE(8, bad), std::invalid_argument);
    CHECK(parse_rope_scaling("pi") == RopeScaling::interpolation);
    CHECK(parse_rope_scaling(rope_scaling_name(RopeScaling::yarn)) == RopeScaling::yarn);
    CHECK_THROWS_AS(parse_rope_scaling("linear"), std::invalid_argument);
}

TEST_CASE("nn: RoPE rotates channel pairs (c, c + D/2), keeps norms, and q·k depends only on m − n") {
    Generator gen(6);
    const int64_t B = 1, H = 2, T = 7, D = 8, offset = 3;
    for (RopeScaling scaling : kAllScalings) {
        CAPTURE(rope_scaling_name(scaling));
        const RopeOptions o = rope_options(scaling);
        const RoPE rope(D, o);
        const double mscale = scaling == RopeScaling::yarn ? 0.1 * std::log(o.factor) + 1 : 1.0;
        const std::vector<double> theta = spec_frequencies(D, o);

        const Tensor x = randn({B, H, T, D}, gen, DType::f64);
        const Tensor y = rope.forward(x, offset);
        REQUIRE(y.shape() == x.shape());
        const auto X = x.to_vector<double>(), Y = y.to_vector<double>();
        double err = 0;
        for (int64_t bh = 0; bh < B * H; ++bh)
            for (int64_t t = 0; t < T; ++t)
                for (int64_t c = 0; c < D / 2; ++c) {
                    const int64_t i = (bh * T + t) * D + c, j = i + D / 2;
                    const double angle = double(offset + t) * theta[c];
                    err = std::max(err, std::abs(mscale * (X[i] * std::cos(angle) - X[j] * std::sin(angle)) - Y[i]));
                    err = std::max(err, std::abs(mscale * (X[j] * std::cos(angle) + X[i] * std::sin(angle)) - Y[j]));
                }
        CHECK(err < 1e-12);

        // A rotation keeps each head vector's length; YaRN also scales it by its mscale.
        const Tensor norm_x = sqrt(sum(x * x, {-1})), norm_y = sqrt(sum(y * y, {-1}));
        CHECK(max_abs_diff(norm_y, norm_x * mscale) < 1e-12);

        // An offset continues the positions of a longer sequence.
        const Tensor longer = randn({B, H, offset + T, D}, gen, DType::f64);
        CHECK(max_abs_diff(rope.forward(longer).narrow(2, offset, T), rope.forward(longer.narrow(2, offset, T), offset)) <
              1e-12);

        // The same q and k at every position: q_m · k_n must depend on m − n alone.
        const Tensor q = randn({1, 1, 1, D}, gen, DType::f64).expand({1, 1, T, D}).contiguous();
        const Tensor k = randn({1, 1, 1, D}, gen, DType::f64).expand({1, 1, T, D}).contiguous();
        const auto S = matmul(rope.forward(q), rope.forward(k).transpose(-1, -2)).to_vector<double>();  // (T, T)
        double spread = 0, variation = 0;
        for (int64_t m = 0; m < T; ++m)
            for (int64_t n = 0; n < T; ++n) {
                const int64_t m0 = m - std::min(m, n), n0 = n - std::min(m, n);  // same m − n, nearest the origin
                spread = std::max(spread, std::abs(S[m * T + n] - S[m0 * T + n0]));
                variation = std::max(variation, std::abs(S[m * T + n] - S[0]));
            }
        CHECK(spread < 1e-12);
        CHECK(variation > 1e-3);  // ... and does depend on it

        const GradcheckResult r = gradcheck(
            [&](const std::vector<Tensor>& in) { return rope.forward(in[0], offset); },
            {randn({1, 2, 3, D}, gen, DType::f64).requires_grad_()});
        CHECK_MESSAGE(r.ok, r.message);
    }
}

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

TEST_CASE("nn: GatedAttention's gate weights have SPEC's shapes for every position and sharing") {
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

TEST_CASE("nn: GatedAttention matches SPEC §2 for every position × gate function × sharing") {
    Generator gen(8);
    for (GatePosition pos : kAllPositions)
        for (GateFunction fn : kAllFunctions)
            for (GateSharing sharing : kAllSharings) {
                const AttentionOptions o = attention_options(pos, fn, sharing);
                CAPTURE(describe(o));
                const auto m = random_attention(o, gen);
                m->capture = true;
                const Tensor x = randn({2, 5, 16}, gen, DType::f64);
                const Tensor y = m->forward(x);
                const Expected e = reference_attention(*m, x);
                CHECK(max_abs_diff(y, e.y) < 1e-10);
                CHECK(max_abs_diff(m->last.probs, e.probs) < 1e-10);
                if (o.gated()) {
                    REQUIRE(m->last.gate.defined());
                    CHECK(max_abs_diff(m->last.gate, e.gate) < 1e-10);
                    // and the gate changes the output
                    CHECK(max_abs_diff(y, reference_attention(*m, x, Tensor(), false).y) > 1e-3);
                } else {
                    CHECK(!m->last.gate.defined());
                }
            }
}

TEST_CASE("nn: GatedAttention matches SPEC §2 with GQA, RoPE, QK-norm, sliding window, no causal mask") {
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
                const auto m = random_attention(o, gen);
                m->capture = true;
                const Tensor x = randn({2, 6, 16}, gen, DType::f64), src = randn({2, 6, 16}, gen, DType::f64);
                const Expected e = reference_attention(*m, x, src);
                CHECK(max_abs_diff(m->forward(x, nullptr, src), e.y) < 1e-10);
                CHECK(max_abs_diff(m->last.probs, e.probs) < 1e-10);
                if (o.gated()) CHECK(max_abs_diff(m->last.gate, e.gate) < 1e-10);
            }
}

TEST_CASE("nn: G1 by hand: σ(x W_g) ⊙ SDPA(x W_q, x W_k, x W_v), concat, W_O") {
    Generator gen(10);
    const AttentionOptions o = attention_options(GatePosition::sdpa_output);
    const auto m = random_attention(o, gen);
    m->capture = true;
    const int64_t B = 2, T = 5, d = 16, H = 4, dk = 4;
    const Tensor x = randn({B, T, d}, gen, DType::f64);
    const Tensor gate = sigmoid(matmul(x, m->w_g->weight.t()));  // (B, T, H·dk)
    const Tensor q = split_heads(matmul(x, m->w_q->weight.t()), H), k = split_heads(matmul(x, m->w_k->weight.t()), H),
                 v = split_heads(matmul(x, m->w_v->weight.t()), H);
    const Tensor heads = merge_heads(scaled_dot_product_attention(q, k, v));  // (B, T, H·dk)
    const Tensor expected = matmul(gate * heads, m->w_o->weight.t());
    CHECK(max_abs_diff(m->forward(x), expected) < 1e-12);
    CHECK(m->last.gate.shape() == Shape{B, H, T, dk});
    CHECK(max_abs_diff(merge_heads(m->last.gate), gate) < 1e-12);
    CHECK(m->last.probs.shape() == Shape{B, H, T, T});
    CHECK(!m->last.gate.requires_grad());  // analysis copies carry no graph

    m->capture = false;
    m->last = {};
    m->forward(x);
    CHECK(!m->last.probs.defined());  // off: nothing kept
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
            m.capture = true;
            m.forward(randn({1, 3, d}, gen));
            const Tensor gate = m.last.gate;
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
        m.capture = true;
        m.forward(randn({1, 3, 16}, gen));
        CHECK(amax(abs(m.last.gate - (fn == GateFunction::tanh_half ? 0.5 : 0.0))).item() == 0);
    }
    CHECK(parse_gate_init(gate_init_name(GateInit::kaiming)) == GateInit::kaiming);
    CHECK(parse_gate_position("g3") == GatePosition::scores_from_query);
    CHECK(parse_gate_position("baseline") == GatePosition::none);
    CHECK(parse_gate_function("tanh") == GateFunction::tanh_half);
    CHECK(parse_gate_sharing("headwise") == GateSharing::headwise);
    CHECK_THROWS_AS(parse_gate_position("g6"), std::invalid_argument);
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

// ================================================================ MoE

TEST_CASE("nn: MoE equals Σ_top-k w_e expert_e(x) with renormalised router weights") {
    Generator gen(15);
    MoE moe(8, 4, 2, 12);
    CHECK(moe.experts.size() == 4);
    const auto names = names_of(moe);
    CHECK(names.front() == "router.weight");
    CHECK(contains(names, "experts.3.w2.weight"));
    CHECK(names.size() == 1 + 4 * 3);
    CHECK(moe.num_parameters() == 8 * 4 + 4 * 3 * 8 * 12);
    moe.to(DType::f64);
    randomize(moe, gen);
    const Tensor x = randn({2, 5, 8}, gen, DType::f64);
    const Tensor y = moe.forward(x);
    CHECK(y.shape() == x.shape());
    CHECK(max_abs_diff(y, dense_moe(moe, x)) < 1e-12);
    // top_k = E is the full softmax mixture; top_k = 1 one expert with weight 1.
    for (int64_t k : {1, 4}) {
        CAPTURE(k);
        moe.top_k = k;
        CHECK(max_abs_diff(moe.forward(x), dense_moe(moe, x)) < 1e-12);
    }
    CHECK_THROWS_AS(MoE(8, 4, 5, 12), std::invalid_argument);
    CHECK_THROWS_AS(MoE(8, 4, 0, 12), std::invalid_argument);
}

TEST_CASE("nn: MoE load-balancing loss: E Σ f_e P_e by hand, 1 under uniform routing, differentiable in the router") {
    Generator gen(16);
    const int64_t D = 8, E = 4, k = 2;
    MoE moe(D, E, k, 6);
    moe.to(DType::f64);
    randomize(moe, gen);
    const Tensor x = randn({3, 4, D}, gen, DType::f64);
    moe.forward(x);
    REQUIRE(moe.last_aux_loss.defined());
    CHECK(moe.last_aux_loss.numel() == 1);
    {
        const int64_t N = 12;
        const Routing r = route(moe, x.reshape({N, D}));
        std::vector<double> f(E), P(E);
        for (int64_t n = 0; n < N; ++n) {
            for (int64_t e : r.top[n]) f[e] += 1.0 / double(N * k);
            for (int64_t e = 0; e < E; ++e) P[e] += r.probs[n][e] / N;
        }
        double aux = 0;
        for (int64_t e = 0; e < E; ++e) aux += E * f[e] * P[e];
        CHECK(moe.last_aux_loss.item() == relative(aux, 1e-12));
    }
    // With a zero router every P_e = 1/E; Σ_e f_e = 1 whatever the top-k picks, so
    // aux = E · Σ_e f_e / E = 1.
    {
        MoE uniform(D, E, k, 6);
        uniform.to(DType::f64);
        assign(uniform.router->weight, zeros({E, D}, DType::f64));
        uniform.forward(x);
        CHECK(uniform.last_aux_loss.item() == relative(1.0, 1e-12));
    }
    // The gradient reaches the router (through P; f is a count) and nothing else.
    const int n = check_gradients(moe, {}, [&](const std::vector<Tensor>&) {
        moe.forward(x);
        return moe.last_aux_loss;
    }, only({"router.weight", "experts.0.w1.weight"}));
    CHECK(n == 2);
    moe.zero_grad();
    moe.forward(x);
    moe.last_aux_loss.backward();
    CHECK(amax(abs(moe.router->weight.grad())).item() > 1e-6);
    CHECK(!moe.experts[0]->w1->weight.grad().defined());
}

TEST_CASE("nn: MoE gradcheck w.r.t. input, router and expert weights (away from top-k ties)") {
    Generator gen(17);
    const int64_t D = 6;
    MoE moe(D, 4, 2, 8);
    moe.to(DType::f64);
    randomize(moe, gen, 0.8);
    // Pick an input whose top-2 is far from a tie: the choice is piecewise constant.
    Tensor x;
    for (int tries = 0; tries < 100; ++tries) {
        x = randn({2, 3, D}, gen, DType::f64);
        if (route(moe, x.reshape({6, D})).min_gap > 0.02) break;
    }
    REQUIRE(route(moe, x.reshape({6, D})).min_gap > 0.02);
    const int n = check_gradients(moe, {x.clone().requires_grad_()},
                                  [&](const std::vector<Tensor>& in) { return moe.forward(in[0]); });
    CHECK(n == 13);
}

// ================================================================ blocks and the language model

TEST_CASE("nn: TransformerBlock is x + attn(norm1 x), then h + ffn(norm2 h); G4's gate reads the raw x") {
    Generator gen(18);
    for (int variant = 0; variant < 3; ++variant) {  // SwiGLU, MoE, attention only
        LMConfig c = small_lm();
        c.n_experts = variant == 1 ? 3 : 0;
        c.ffn = variant != 2;
        CAPTURE(variant);
        TransformerBlock block(c);
        CHECK(bool(block.ffn) == (variant == 0));
        CHECK(bool(block.moe) == (variant == 1));
        CHECK(bool(block.norm2) == (variant != 2));
        CHECK(block.attn->rope() != nullptr);  // LMConfig's default positions: RoPE in attention
        block.to(DType::f64);
        randomize(block, gen);
        const Tensor x = randn({2, 5, 16}, gen, DType::f64) * 3.0;
        const Tensor h = x + block.attn->forward(block.norm1->forward(x));
        Tensor expected = h;
        if (block.ffn) expected = h + block.ffn->forward(block.norm2->forward(h));
        if (block.moe) expected = h + dense_moe(*block.moe, block.norm2->forward(h));
        CHECK(max_abs_diff(block.forward(x), expected) < 1e-12);
    }

    LMConfig c = small_lm(GatePosition::residual);
    TransformerBlock block(c);
    block.to(DType::f64);
    randomize(block, gen);
    block.attn->capture = true;
    const Tensor x = randn({2, 5, 16}, gen, DType::f64) * 3.0;
    const Tensor normed = block.norm1->forward(x);
    const Tensor attn = reference_attention(*block.attn, normed, x).y;  // x + σ(x W_g) ⊙ Attn(norm(x))
    const Tensor h = x + attn;
    CHECK(max_abs_diff(block.forward(x), h + block.ffn->forward(block.norm2->forward(h))) < 1e-10);
    CHECK(max_abs_diff(merge_heads(block.attn->last.gate), sigmoid(matmul(x, block.attn->w_g->weight.t()))) < 1e-12);
    // A gate reading norm(x) instead would give other numbers.
    CHECK(max_abs_diff(attn, reference_attention(*block.attn, normed).y) > 1e-3);
}

TEST_CASE("nn: TransformerBlock gradcheck: SwiGLU, MoE and attention-only blocks") {
    Generator gen(19);
    for (int variant = 0; variant < 3; ++variant) {
        LMConfig c = small_lm(variant == 2 ? GatePosition::residual : GatePosition::sdpa_output);
        c.d_model = 8;
        c.attn.n_heads = 2;
        c.attn.n_kv_heads = 1;
        c.attn.qk_norm = variant == 0;
        c.d_ff = 8;
        c.n_experts = variant == 1 ? 3 : 0;
        c.ffn = variant != 2;
        CAPTURE(variant);
        TransformerBlock block(c);
        block.to(DType::f64);
        randomize(block, gen);
        Tensor x = randn({1, 4, 8}, gen, DType::f64);
        if (block.moe) {  // keep the routing away from ties
            for (int tries = 0; tries < 100; ++tries) {
                const Tensor h = x + block.attn->forward(block.norm1->forward(x), nullptr, x);
                if (route(*block.moe, block.norm2->forward(h).reshape({4, 8})).min_gap > 0.02) break;
                x = randn({1, 4, 8}, gen, DType::f64);
            }
        }
        const int n = check_gradients(block, {x.clone().requires_grad_()},
                                      [&](const std::vector<Tensor>& in) { return block.forward(in[0]); });
        CHECK(n == int(block.named_parameters().size()));
    }
}

TEST_CASE("nn: GatedTransformerLM parameter names and counts") {
    const int64_t V = 23, L = 12, d = 16, H = 4, dk = 4, ff = 24, layers = 2;
    {
        LMConfig c = small_lm();
        c.positions = PositionEncoding::learned;
        c.attn.n_kv_heads = 2;
        c.attn.qk_norm = true;
        GatedTransformerLM model(c);
        const auto names = names_of(model);
        for (const char* name : {"tok_emb.weight", "pos_emb.weight", "layers.0.norm1.weight", "layers.0.attn.w_q.weight",
                                 "layers.0.attn.w_k.weight", "layers.0.attn.w_v.weight", "layers.0.attn.w_o.weight",
                                 "layers.0.attn.w_g.weight", "layers.0.attn.q_norm.weight", "layers.0.attn.k_norm.weight",
                                 "layers.0.norm2.weight", "layers.0.ffn.w1.weight", "layers.0.ffn.w2.weight",
                                 "layers.0.ffn.w3.weight", "layers.1.attn.w_g.weight", "norm_f.weight", "lm_head.weight"})
            CHECK_MESSAGE(contains(names, name), name);
        CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
        const int64_t block = d + d * H * dk + 2 * d * 2 * dk + H * dk * d + d * H * dk + 2 * dk + d + 3 * d * ff;
        CHECK(names.size() == 2 + layers * 12 + 2);
        CHECK(model.num_parameters() == V * d + L * d + layers * block + d + V * d);
        CHECK(model.blocks[0]->attn->w_k->weight.shape() == Shape{2 * dk, d});
        CHECK(model.pos_emb->weight.shape() == Shape{L, d});
        CHECK(!model.blocks[0]->attn->rope());  // learned positions: no RoPE
    }
    {
        LMConfig c = small_lm(GatePosition::scores_from_query);
        c.tie_embeddings = true;
        c.ffn = false;
        GatedTransformerLM model(c);
        const auto names = names_of(model);
        CHECK(!contains(names, "lm_head.weight"));
        CHECK(!contains(names, "pos_emb.weight"));
        CHECK(contains(names, "layers.1.attn.w_g_query"));
        CHECK(!contains(names, "layers.0.norm2.weight"));
        const int64_t block = d + 4 * d * d + H * dk;
        CHECK(model.num_parameters() == V * d + layers * block + d);
    }
    {
        LMConfig c = small_lm(GatePosition::after_merge);
        c.attn.sharing = GateSharing::headwise;
        c.n_experts = 3;
        GatedTransformerLM model(c);
        const auto names = names_of(model);
        CHECK(contains(names, "layers.1.moe.router.weight"));
        CHECK(contains(names, "layers.1.moe.experts.2.w3.weight"));
        const int64_t block = d + 4 * d * d + d * H + d + d * 3 + 3 * 3 * d * ff;
        CHECK(model.num_parameters() == V * d + layers * block + d + V * d);
    }
    LMConfig c;
    c.d_model = 64;
    CHECK(c.ffn_hidden() == 176);  // 8/3 · 64 = 170.7, up to a multiple of 8
    c.d_model = 48;
    CHECK(c.ffn_hidden() == 128);
    c.d_ff = 100;
    CHECK(c.ffn_hidden() == 100);
}

TEST_CASE("nn: GatedTransformerLM forward is embed (+ positions), blocks, RMSNorm, lm_head; loss is CE + aux") {
    Generator gen(20);
    for (bool learned : {false, true})
        for (bool tied : {false, true}) {
            CAPTURE(learned);
            CAPTURE(tied);
            LMConfig c = small_lm();
            c.positions = learned ? PositionEncoding::learned : PositionEncoding::rope;
            c.tie_embeddings = tied;
            c.n_experts = 2;
            c.aux_loss_weight = 0.3;
            GatedTransformerLM model(c);
            model.to(DType::f64);
            randomize(model, gen, 0.3);
            const Tensor ids = randint(0, c.vocab_size, {2, 6}, gen), targets = randint(0, c.vocab_size, {2, 6}, gen);
            const LMOutput out = model.forward(ids, targets);
            REQUIRE(out.logits.shape() == Shape{2, 6, c.vocab_size});

            Tensor x = model.tok_emb->forward(ids);
            if (learned) x = x + model.pos_emb->weight.narrow(0, 0, 6);
            double aux = 0;
            for (const auto& block : model.blocks) {
                x = block->forward(x);
                aux += block->moe->last_aux_loss.item();
            }
            x = model.norm_f->forward(x);
            const Tensor W = tied ? model.tok_emb->weight : model.lm_head->weight;
            const Tensor logits = matmul(x, W.t());
            CHECK(max_abs_diff(out.logits, logits) < 1e-12);

            const auto Lg = logits.to_vector<double>();
            const auto tg = targets.to_vector<int64_t>();
            double ce = 0;
            for (int64_t r = 0; r < 12; ++r) {
                double top = -INFINITY, total = 0;
                for (int64_t v = 0; v < c.vocab_size; ++v) top = std::max(top, Lg[r * c.vocab_size + v]);
                for (int64_t v = 0; v < c.vocab_size; ++v) total += std::exp(Lg[r * c.vocab_size + v] - top);
                ce += (top + std::log(total) - Lg[r * c.vocab_size + tg[r]]) / 12;
            }
            CHECK(out.loss.item() == relative(ce + 0.3 * aux, 1e-12));
            CHECK(!model.forward(ids).loss.defined());
        }
}

TEST_CASE("nn: GatedTransformerLM gradcheck of the loss w.r.t. a few parameters") {
    Generator gen(21);
    struct Variant {
        PositionEncoding positions;
        bool tied;
        int64_t experts;
        GatePosition gate;
        std::set<std::string> params;
    };
    const Variant variants[] = {
        {PositionEncoding::learned, false, 0, GatePosition::sdpa_output,
         {"tok_emb.weight", "pos_emb.weight", "layers.0.attn.w_g.weight", "layers.1.attn.w_q.weight",
          "layers.0.ffn.w1.weight", "layers.1.norm2.weight", "norm_f.weight", "lm_head.weight"}},
        {PositionEncoding::rope, true, 0, GatePosition::residual,
         {"tok_emb.weight", "layers.0.attn.w_g.weight", "layers.1.attn.w_k.weight", "layers.1.norm1.weight"}},
        {PositionEncoding::rope, false, 3, GatePosition::scores_from_x,
         {"layers.0.moe.router.weight", "layers.1.moe.experts.1.w3.weight", "layers.1.attn.w_g.weight",
          "lm_head.weight"}},
    };
    for (const Variant& v : variants) {
        LMConfig c = small_lm(v.gate);
        c.d_model = 8;
        c.attn.n_heads = 2;
        c.d_ff = 8;
        c.positions = v.positions;
        c.tie_embeddings = v.tied;
        c.n_experts = v.experts;
        c.aux_loss_weight = 0.5;
        CAPTURE(c.to_json());
        GatedTransformerLM model(c);
        model.to(DType::f64);
        randomize(model, gen, 0.5);
        const Tensor ids = randint(0, c.vocab_size, {2, 5}, gen), targets = randint(0, c.vocab_size, {2, 5}, gen);
        GradcheckOptions options;
        options.full_jacobian_limit = 64;  // small tensors element by element, the rest by projections
        const int n = check_gradients(
            model, {}, [&](const std::vector<Tensor>&) { return model.forward(ids, targets).loss; }, only(v.params),
            options);
        CHECK(n == int(v.params.size()));
    }
}

TEST_CASE("nn: LMConfig JSON round trip and field errors") {
    LMConfig c;
    c.vocab_size = 99;
    c.max_len = 77;
    c.d_model = 24;
    c.n_layers = 3;
    c.attn.n_heads = 6;
    c.attn.n_kv_heads = 3;
    c.attn.gate = GatePosition::scores_from_query;
    c.attn.gate_fn = GateFunction::silu;
    c.attn.sharing = GateSharing::headwise;
    c.attn.gate_init = GateInit::xavier;
    c.attn.gate_init_std = 0.125;
    c.attn.qk_norm = true;
    c.attn.window = 5;
    c.attn.exclude_self = true;
    c.attn.rope_options.base = 50000;
    c.positions = PositionEncoding::learned;
    c.ffn = false;
    c.d_ff = 40;
    c.n_experts = 4;
    c.top_k = 1;
    c.aux_loss_weight = 0.25;
    c.tie_embeddings = true;
    c.norm_eps = 1e-5;
    const LMConfig r = LMConfig::from_json(c.to_json());
    CHECK(r.vocab_size == 99);
    CHECK(r.max_len == 77);
    CHECK(r.d_model == 24);
    CHECK(r.n_layers == 3);
    CHECK(r.attn.n_heads == 6);
    CHECK(r.attn.kv_heads() == 3);
    CHECK(r.attn.gate == GatePosition::scores_from_query);
    CHECK(r.attn.gate_fn == GateFunction::silu);
    CHECK(r.attn.sharing == GateSharing::headwise);
    CHECK(r.attn.gate_init == GateInit::xavier);
    CHECK(r.attn.gate_init_std == 0.125);
    CHECK(r.attn.qk_norm);
    CHECK(r.attn.window == 5);
    CHECK(r.attn.exclude_self);
    CHECK(r.attn.rope_options.base == 50000);
    CHECK(r.positions == PositionEncoding::learned);
    CHECK(!r.ffn);
    CHECK(r.ffn_hidden() == 40);
    CHECK(r.n_experts == 4);
    CHECK(r.top_k == 1);
    CHECK(r.aux_loss_weight == 0.25);
    CHECK(r.tie_embeddings);
    CHECK(r.norm_eps == 1e-5);
    CHECK(r.to_json() == c.to_json());
    // Defaults survive too (every field is written).
    CHECK(LMConfig::from_json(LMConfig().to_json()).to_json() == LMConfig().to_json());
    CHECK(LMConfig::from_json("{}").to_json() == LMConfig().to_json());

    CHECK_THROWS_WITH_AS(LMConfig::from_json(R"({"d_model": "wide"})"), doctest::Contains("d_model"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(LMConfig::from_json(R"({"qk_norm": 3.5})"), doctest::Contains("qk_norm"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(LMConfig::from_json(R"({"gate": "g9"})"), doctest::Contains("g9"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(LMConfig::from_json(R"({"positions": "sinusoidal"})"), doctest::Contains("sinusoidal"),
                         std::invalid_argument);
    CHECK_THROWS_AS(LMConfig::from_json("not json"), std::invalid_argument);
    CHECK_THROWS_AS(LMConfig::from_json("[1, 2]"), std::invalid_argument);
}

// ================================================================ decoding

namespace {
// Logits of the whole sequence against feeding it in chunks through per-layer KV caches.
void check_incremental_decoding(const LMConfig& c, uint64_t seed) {
    CAPTURE(c.to_json());
    manual_seed(seed);
    Generator gen(seed);
    GatedTransformerLM model(c);
    randomize(model, gen, 0.3);
    model.eval();
    const Tensor ids = randint(0, c.vocab_size, {2, 9}, gen);
    const Tensor full = model.forward(ids).logits;
    std::vector<KVCache> caches;
    std::vector<Tensor> parts;
    int64_t at = 0;
    for (int64_t len : {4, 2, 1, 1, 1}) {
        parts.push_back(model.forward(ids.narrow(1, at, len), Tensor(), &caches).logits);
        at += len;
    }
    REQUIRE(caches.size() == size_t(c.n_layers));
    CHECK(caches[1].length() == 9);
    const double diff = max_abs_diff(cat(parts, 1), full);
    CHECK(diff < 1e-5);
    CHECK(amax(abs(full)).item() > 0.1);  // the logits are not trivially small
}
}  // namespace

TEST_CASE("nn: KV-cache decoding equals the full forward (float32, 1e-5)") {
    LMConfig c = small_lm(GatePosition::none);
    SUBCASE("baseline") { check_incremental_decoding(c, 31); }
    SUBCASE("G1") {
        c.attn.gate = GatePosition::sdpa_output;
        check_incremental_decoding(c, 32);
    }
    SUBCASE("G1 + GQA + RoPE + window + QK-norm") {
        c.attn.gate = GatePosition::sdpa_output;
        c.attn.n_kv_heads = 2;
        c.attn.window = 3;
        c.attn.qk_norm = true;
        check_incremental_decoding(c, 33);
    }
    SUBCASE("learned positions") {
        c.attn.gate = GatePosition::sdpa_output;
        c.positions = PositionEncoding::learned;
        check_incremental_decoding(c, 34);
    }
    SUBCASE("G4 with MoE blocks and tied embeddings") {
        c.attn.gate = GatePosition::residual;
        c.n_experts = 3;
        c.tie_embeddings = true;
        check_incremental_decoding(c, 35);
    }
}

TEST_CASE("nn: generate with temperature 0 is greedy decoding of the full forward") {
    for (PositionEncoding positions : {PositionEncoding::rope, PositionEncoding::learned}) {
        LMConfig c = small_lm();
        c.positions = positions;
        c.max_len = 16;
        c.attn.n_kv_heads = 2;
        manual_seed(41);
        Generator gen(41);
        GatedTransformerLM model(c);
        randomize(model, gen, 0.3);
        model.eval();
        const std::vector<int64_t> prompt{1, 7, 3};
        SampleOptions greedy;
        greedy.max_new_tokens = 6;
        greedy.temperature = 0;
        const std::vector<int64_t> out = generate(model, prompt, greedy);
        REQUIRE(out.size() == 6);
        CHECK(generate(model, prompt, greedy) == out);
        std::vector<int64_t> seq = prompt;
        for (int64_t next : out) {
            const Tensor logits = model.forward(from_vector(seq, {1, int64_t(seq.size())})).logits;  // (1, T, V)
            const auto row = logits.select(1, int64_t(seq.size()) - 1).reshape({-1}).to_vector<double>();
            CHECK(next == std::max_element(row.begin(), row.end()) - row.begin());
            seq.push_back(next);
        }
        // Sampling: the same generator state gives the same tokens; top_k = 1 is greedy.
        SampleOptions sample;
        sample.max_new_tokens = 6;
        sample.temperature = 1.5;
        Generator g1(5), g2(5);
        const auto s1 = generate(model, prompt, sample, g1), s2 = generate(model, prompt, sample, g2);
        CHECK(s1 == s2);
        for (int64_t t : s1) CHECK((t >= 0 && t < c.vocab_size));
        sample.top_k = 1;
        CHECK(generate(model, prompt, sample, g1) == out);
        if (positions == PositionEncoding::learned) {
            // Learned positions end at max_len: the 16 positions hold the prompt and all
            // but the last new token.
            greedy.max_new_tokens = 50;
            const auto capped = generate(model, std::vector<int64_t>(13, 2), greedy);
            CHECK(capped.size() == 4);
        }
    }
    LMConfig c = small_lm();
    GatedTransformerLM model(c);
    CHECK_THROWS_AS(generate(model, {}, SampleOptions{}), std::invalid_argument);
}

// ================================================================ Module

TEST_CASE("nn: Module train()/eval() propagate, zero_grad clears, to(dtype) converts every parameter") {
    LMConfig c = small_lm();
    c.n_experts = 2;
    c.positions = PositionEncoding::learned;
    manual_seed(51);
    GatedTransformerLM model(c);
    const std::vector<const Module*> nested = {&model,
                                               model.tok_emb.get(),
                                               model.pos_emb.get(),
                                               model.blocks[1].get(),
                                               model.blocks[1]->attn.get(),
                                               model.blocks[1]->attn->w_g.get(),
                                               model.blocks[0]->moe.get(),
                                               model.blocks[0]->moe->experts[1]->w3.get(),
                                               model.norm_f.get()};
    for (const Module* m : nested) CHECK(m->is_training());
    model.eval();
    for (const Module* m : nested) CHECK(!m->is_training());
    model.train();
    for (const Module* m : nested) CHECK(m->is_training());

    Generator gen(52);
    const Tensor ids = randint(0, c.vocab_size, {2, 6}, gen), targets = randint(0, c.vocab_size, {2, 6}, gen);
    model.forward(ids, targets).loss.backward();
    int with_grad = 0;
    for (const Tensor& p : model.parameters()) with_grad += p.grad().defined();
    CHECK(with_grad > int(model.parameters().size()) / 2);
    model.zero_grad();
    for (const auto& [name, p] : model.named_parameters()) CHECK_MESSAGE(!p.grad().defined(), name);

    std::vector<std::vector<double>> before;
    for (const Tensor& p : model.parameters()) before.push_back(p.to_vector<double>());
    model.to(DType::f64);
    size_t i = 0;
    for (const auto& [name, p] : model.named_parameters()) {
        CAPTURE(name);
        CHECK(p.dtype() == DType::f64);
        CHECK(p.requires_grad());
        CHECK(p.is_leaf());
        CHECK(p.to_vector<double>() == before[i++]);  // f32 → f64 is exact
    }
    // The modules' own members were converted (not copies of them).
    CHECK(model.blocks[0]->attn->w_q->weight.dtype() == DType::f64);
    CHECK(model.blocks[1]->moe->experts[0]->w2->weight.dtype() == DType::f64);
    const LMOutput out = model.forward(ids, targets);
    CHECK(out.logits.dtype() == DType::f64);
    out.loss.backward();
    CHECK(model.tok_emb->weight.grad().dtype() == DType::f64);
    model.zero_grad();
    model.to(DType::f32);
    for (const Tensor& p : model.parameters()) CHECK(p.dtype() == DType::f32);
    CHECK(model.state_dict().size() == model.named_parameters().size() + model.named_buffers().size());
}
