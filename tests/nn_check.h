// nn_check.h — what the module suites share: parameter randomising, float64 gradchecks with
// respect to inputs and to each parameter, nn/attention.h's attention by hand, small LM
// configs.
#pragma once
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

namespace gg::testing {

using namespace gg::nn;

// ---------------------------------------------------------------- helpers

// doctest::Approx with a purely relative tolerance (its default adds a scale of 1, which
// would make the tolerance absolute for values below 1).
inline doctest::Approx relative(double value, double tolerance) { return doctest::Approx(value).epsilon(tolerance).scale(0); }

// Writes src's values into dst's own storage, converting the dtype: the module that holds
// dst sees the new values, and its Tensor handles stay the same.
inline void assign(const Tensor& dst, const Tensor& src) {
    REQUIRE(dst.numel() == src.numel());
    NoGradGuard no_grad;
    dst.copy_(src.reshape(dst.shape()));
}

// Every parameter ~ N(0, scale²): gates, norms and biases away from their special
// initial values (a zero gate weight would hide a bug in the gate's input path).
inline void randomize(const Module& m, Generator& gen, double scale = 0.5) {
    for (const auto& [name, p] : m.named_parameters()) assign(p, randn(p.shape(), gen, DType::f64) * scale);
}

// `forward()` as a differentiable function of `value`, the values of a module parameter.
// gradcheck perturbs private copies of its inputs, so the copy's values are written into
// the parameter's storage first; the node then hands the output gradient through
// forward()'s graph to the parameter and returns the parameter's gradient as value's.
inline Tensor bind_parameter(const Tensor& param, const Tensor& value, const std::function<Tensor()>& forward) {
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
inline int check_gradients(const Module& module, const std::vector<Tensor>& inputs, const Fn& f,
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
        const std::string param_name = name;  // doctest captures it in a lambda
        CHECK_MESSAGE(r.ok, param_name << ": " << r.message);
        ++checked;
    }
    for (const Tensor& p : module.parameters()) p.zero_grad();
    return checked;
}

inline std::function<bool(const std::string&)> only(std::set<std::string> names) {
    return [names = std::move(names)](const std::string& n) { return names.count(n) > 0; };
}

inline std::vector<std::string> names_of(const Module& m) {
    std::vector<std::string> out;
    for (const auto& [name, p] : m.named_parameters()) out.push_back(name);
    return out;
}

inline bool contains(const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

// ---------------------------------------------------------------- nn/attention.h by hand

// The gate functions of nn/attention.h (GateFunction), written from exp so as not to share code
// with the ops under test.
inline Tensor spec_gate_fn(GateFunction f, const Tensor& z) {
    switch (f) {
        case GateFunction::sigmoid: return 1.0 / (1.0 + exp(-z));
        case GateFunction::tanh_half: return (tanh(z) + 1.0) / 2.0;
        case GateFunction::relu: return maximum(z, zeros_like(z));
        case GateFunction::silu: return z / (1.0 + exp(-z));
        case GateFunction::none: return ones_like(z);
    }
    return z;
}

// Gate sharing, as (heads, width) of the gate: element-wise (h, dk), head-wise (h, 1),
// shared (1, dk); value/key gates span the kv heads; G2 is one scalar per (query, head).
inline std::pair<int64_t, int64_t> spec_gate_layout(const AttentionOptions& o) {
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
inline Tensor split_heads(const Tensor& t, int64_t n) {
    return t.reshape({t.size(0), t.size(1), n, t.size(2) / n}).permute({0, 2, 1, 3});
}
inline Tensor merge_heads(const Tensor& t) { return t.permute({0, 2, 1, 3}).reshape({t.size(0), t.size(2), -1}); }

// The weights of the score functions (tensor/score_functions.h) from logits (B, H, Tq, Tk), the
// formulas written out in ops rather than their stable forms: hidden (Tq, Tk) is 1 where the mask
// hides a key, sink (H) the sink function's slot logits.
inline Tensor spec_score_weights(ScoreFunction f, const Tensor& logits, const Tensor& hidden,
                                 const Tensor& sink = Tensor()) {
    const int64_t B = logits.size(0), H = logits.size(1), Tq = logits.size(2), Tk = logits.size(3);
    const Tensor visible = 1.0 - hidden.to(logits.dtype());  // (Tq, Tk)
    const Tensor masked = masked_fill(logits, hidden, -INFINITY);
    switch (f) {
        case ScoreFunction::softmax: return softmax(masked, -1);
        case ScoreFunction::softmax1:
        case ScoreFunction::sink: {  // a softmax over one more column, the slot of logit c; its weight dropped
            const Tensor c = f == ScoreFunction::sink ? sink.view({1, H, 1, 1}).expand({B, H, Tq, 1})
                                                      : zeros({B, H, Tq, 1}, logits.dtype());
            return softmax(cat({masked, c}, -1), -1).narrow(3, 0, Tk);
        }
        case ScoreFunction::sigmoid: {  // σ(z − log n_i), n_i the keys query i sees
            const Tensor bias = -log(sum(visible, {-1}, true));  // (Tq, 1)
            return visible / (1.0 + exp(-(logits + bias)));
        }
        case ScoreFunction::softpick: {
            const Tensor u = (exp(logits) - 1.0) * visible;
            return relu(u) / (sum(abs(u), {-1}, true) + kSoftpickEpsilon);
        }
    }
    return Tensor();
}

inline Tensor spec_rms_norm(const Tensor& x, const Tensor& weight, double eps) {
    return x / sqrt(mean(x * x, {-1}, true) + eps) * weight;
}

struct Expected {
    Tensor y;      // (B, T, d)
    Tensor probs;  // (B, H, T, T)
    Tensor gate;   // (B, heads, T, width) as nn/attention.h lays it out
};

// GatedAttention on the full sequence, from nn/attention.h's formulas and the module's own
// weights. Unlike the module, the G2/G3 gates multiply the logits themselves, and GQA
// repeats kv heads explicitly. apply_gate = false gives the same attention ungated.
inline Expected reference_attention(GatedAttention& m, const Tensor& x, const Tensor& gate_source = Tensor(),
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
            hidden[i * T + j] = (o.causal && j > i) || (o.window > 0 && i - j >= o.window) ||
                                        (o.exclude_self && i == j && i > 0)
                                    ? 1
                                    : 0;
    e.probs = spec_score_weights(o.score_fn, logits, from_vector(hidden, {T, T}), m.sink);
    Tensor heads = matmul(e.probs, vv);  // (B, H, T, dk)
    if (gated && o.gate == GatePosition::sdpa_output) heads = heads * (e.gate = gate_from(x));
    e.y = matmul(merge_heads(heads), m.w_o->weight.t());  // (B, T, d)
    if (gated && (o.gate == GatePosition::after_merge || o.gate == GatePosition::residual)) {
        e.gate = gate_from(o.gate == GatePosition::residual && gate_source.defined() ? gate_source : x);
        e.y = merge_heads(split_heads(e.y, H) * e.gate);  // one gate value per channel of d
    }
    return e;
}

inline std::string describe(const AttentionOptions& o) {
    return gate_position_name(o.gate) + "/" + gate_function_name(o.gate_fn) + "/" + gate_sharing_name(o.sharing) +
           " H=" + std::to_string(o.n_heads) + " Hkv=" + std::to_string(o.kv_heads()) + (o.rope ? " rope" : "") +
           (o.qk_norm ? " qk_norm" : "") + (o.window ? " window=" + std::to_string(o.window) : "") +
           (o.exclude_self ? " exclude_self" : "") + (o.causal ? "" : " non-causal") + " " +
           score_function_name(o.score_fn);
}

// A float64 GatedAttention with every parameter random.
inline std::shared_ptr<GatedAttention> random_attention(const AttentionOptions& o, Generator& gen, DType dtype = DType::f64) {
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
const ScoreFunction kAllScoreFunctions[] = {ScoreFunction::softmax, ScoreFunction::softmax1, ScoreFunction::sink,
                                            ScoreFunction::sigmoid, ScoreFunction::softpick};

inline AttentionOptions attention_options(GatePosition gate, GateFunction fn = GateFunction::sigmoid,
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

inline Routing route(const MoE& moe, const Tensor& tokens) {
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
inline Tensor dense_moe(const MoE& moe, const Tensor& x) {
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

inline LMConfig small_lm(GatePosition gate = GatePosition::sdpa_output) {
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

// A small synthetic corpus: `documents` documents of 30 words drawn from six, so tests that
// train need no files.
inline std::shared_ptr<TextDataset> word_corpus(int documents) {
    const char* words[] = {"gate ", "sink ", "head ", "token ", "attention ", "softmax "};
    std::vector<std::string> docs;
    Generator gen(5);
    for (int d = 0; d < documents; ++d) {
        std::string doc;
        for (int w = 0; w < 30; ++w) doc += words[gen.randint(0, 6)];
        docs.push_back(doc);
    }
    return std::make_shared<TextDataset>(docs);
}

}  // namespace gg::testing
