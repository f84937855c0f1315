#include "nn/attention.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "nn/names.h"

namespace gg::nn {

// ---------------------------------------------------------------- the fused primitive

namespace {
// The attention kernels read and write (B, heads, T, D) operands through their strides, as
// long as each row of D values is contiguous (Backend::attention_forward): the heads split from
// a projection, x.view(B, T, H, dk).transpose(1, 2), go in as they are, without a copy.
Tensor rows_contiguous(const Tensor& t) {
    return (t.size(3) == 1 || t.strides()[3] == 1) && t.strides()[2] >= t.size(3) ? t : t.contiguous();
}
// An empty (B, heads, T, D) result laid out as (B, T, heads, D): as O, the heads then merge into
// (B, T, heads·D) by a view; as dQ, dK, dV, the gradient of the split above by a view.
Tensor empty_token_major(int64_t B, int64_t heads, int64_t T, int64_t D, DType dtype, Device dev) {
    return Tensor::empty({B, T, heads, D}, dtype, dev).transpose(1, 2);
}
}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const SdpaOptions& options, Tensor* probs, Tensor* lse_out) {
    const Tensor q = autocast_lower(q_in), k = autocast_lower(k_in), v = autocast_lower(v_in);
    check_defined(q, "scaled_dot_product_attention");
    check_defined(k, "scaled_dot_product_attention");
    check_defined(v, "scaled_dot_product_attention");
    const bool ok = q.dim() == 4 && k.dim() == 4 && k.shape() == v.shape() && q.size(0) == k.size(0) &&
                    q.size(3) == k.size(3) && k.size(1) > 0 && q.size(1) % k.size(1) == 0 && q.size(2) <= k.size(2) &&
                    q.dtype() == k.dtype() && k.dtype() == v.dtype() && is_floating(q.dtype()) &&
                    q.device() == k.device() && k.device() == v.device();
    if (!ok)
        throw std::invalid_argument("scaled_dot_product_attention: q " + shape_str(q.shape()) + ", k " +
                                    shape_str(k.shape()) + ", v " + shape_str(v.shape()) +
                                    ": need q (B, H, Tq, dk), k = v (B, Hkv, Tk, dk) with Hkv dividing H, Tq ≤ Tk, "
                                    "one floating dtype and one device");
    const bool with_sink = options.score_fn == ScoreFunction::sink;
    if (with_sink != options.sink.defined() ||
        (with_sink && (options.sink.shape() != Shape{q.size(1)} || !is_floating(options.sink.dtype()) ||
                       options.sink.device() != q.device())))
        throw std::invalid_argument("scaled_dot_product_attention: score function " +
                                    score_function_name(options.score_fn) + " with sink " +
                                    (options.sink.defined() ? shape_str(options.sink.shape()) : "undefined") +
                                    ": sink (one logit per query head, " + std::to_string(q.size(1)) +
                                    ", floating, on q's device) is given with the sink score function and only then");
    if (options.exclude_self && (!options.causal || options.window == 1))
        throw std::invalid_argument("scaled_dot_product_attention: exclude_self needs a causal mask and a window of "
                                    "0 or at least 2 (causal " + std::to_string(options.causal) + ", window " +
                                    std::to_string(options.window) + "): otherwise a query may see no key at all");
    const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3), Hkv = k.size(1), Tk = k.size(2);
    const AttentionShape s{B, H, Hkv, Tq, Tk, D, options.causal, options.window,
                           options.scale > 0 ? options.scale : 1.0 / std::sqrt(double(D)), options.exclude_self,
                           options.score_fn};
    const Tensor Q = rows_contiguous(q.detach()), K = rows_contiguous(k.detach()), V = rows_contiguous(v.detach());
    const Device dev = q.device();
    Tensor O = empty_token_major(B, H, Tq, D, q.dtype(), dev);
    // The log-sum-exp backward recomputes the probabilities from stays float32 for bfloat16
    // operands: rounded to 8 bits, e^(s − lse) would be off by up to 0.4% for lse ≈ 1.
    Tensor lse = Tensor::empty({B, H, Tq}, q.dtype() == DType::bf16 ? DType::f32 : q.dtype(), dev);
    const Tensor sink = with_sink ? options.sink.detach().to(lse.dtype()).contiguous() : Tensor();  // (H)
    // The probabilities, when the caller asks for them or backward will read them: a graph
    // is being recorded and they fit the backend's budget (float32 and float64 only: bfloat16
    // ones would be too coarse; softpick's backward reads the scores' signs instead). The node
    // holds them until backward has run.
    std::vector<Tensor> inputs{q, k, v};
    if (with_sink) inputs.push_back(options.sink);
    const bool for_backward =
        grad_enabled() && std::ranges::any_of(inputs, [](const Tensor& t) { return t.requires_grad(); });
    const bool keep = for_backward && q.dtype() != DType::bf16 && options.score_fn != ScoreFunction::softpick &&
                      (probs || B * H * Tq * Tk * int64_t(dtype_size(q.dtype())) <= backend(dev).attention_keep_bytes);
    const Tensor P = probs || keep ? Tensor::empty({B, H, Tq, Tk}, q.dtype(), dev) : Tensor();  // (B, H, Tq, Tk)
    const Tensor kept = keep ? P.detach() : Tensor();
    const auto view_or_none = [dtype = q.dtype()](const Tensor& t) {
        return t.defined() ? t.view_desc() : View{nullptr, dtype};
    };
    if (probs) *probs = P;
    backend(dev).attention_forward(s, O.view_desc(), lse.view_desc(), view_or_none(P), Q.view_desc(), K.view_desc(),
                                   V.view_desc(), view_or_none(sink));
    const Tensor O_saved = O.detach();
    if (lse_out) *lse_out = lse.detach();
    const DType sink_dtype = with_sink ? options.sink.dtype() : DType::f32;
    return record("scaled_dot_product_attention", O, inputs, [=](const Tensor& g) {
        const Tensor dQ = empty_token_major(B, H, Tq, D, Q.dtype(), dev),
                     dK = empty_token_major(B, Hkv, Tk, D, K.dtype(), dev),
                     dV = empty_token_major(B, Hkv, Tk, D, V.dtype(), dev);
        backend(dev).attention_backward(s, dQ.view_desc(), dK.view_desc(), dV.view_desc(),
                                        rows_contiguous(g).view_desc(), Q.view_desc(), K.view_desc(), V.view_desc(),
                                        O_saved.view_desc(), lse.view_desc(), view_or_none(kept));
        if (!with_sink) return std::vector<Tensor>{dQ, dK, dV};
        // The slot's logit (tensor/score_functions.h): ∂L/∂b_h = −Σ_{b,i} p_slot · δ, with
        // p_slot = e^{b_h − lse} and δ = dO · O, summed in lse's dtype.
        const Tensor delta = sum(g.to(lse.dtype()) * O_saved.to(lse.dtype()), {-1});  // (B, H, Tq)
        const Tensor p_slot = exp(sink.view({1, H, 1}) - lse);                         // (B, H, Tq)
        return std::vector<Tensor>{dQ, dK, dV, (-sum(p_slot * delta, {0, 2})).to(sink_dtype)};
    }, {Q, K, V, O_saved, lse, kept, sink});
}

// ---------------------------------------------------------------- option names

namespace {
// The paper (its Figure 1 and Section 2.2) and the walk-through the project started from
// number five positions each and agree on two: G1 on each head's SDPA output, G5 after the
// output projection. Their G2–G4 are other gates (the paper's are on the value, key and query
// projections; the walk-through's on the scores and the residual branch), so those have no
// bare number here: each is named by where it sits, and the walk-through's numbers are
// accepted under a name that says whose they are (docs/paper.md maps one onto the other).
// The first name of each is the one configs and outputs write. Any case: the paper and every
// text here write "G1", the tables "g1".
const Names<GatePosition> kPositions{"gate position",
                                     {{"baseline", GatePosition::none},
                                      {"g1", GatePosition::sdpa_output},
                                      {"value", GatePosition::value},
                                      {"key", GatePosition::key},
                                      {"query", GatePosition::query},
                                      {"g5", GatePosition::after_merge},
                                      {"scores-x", GatePosition::scores_from_x},
                                      {"scores-query", GatePosition::scores_from_query},
                                      {"residual", GatePosition::residual},
                                      {"sdpa", GatePosition::sdpa_output},
                                      {"output", GatePosition::after_merge},
                                      {"article-g2", GatePosition::scores_from_x},
                                      {"article-g3", GatePosition::scores_from_query},
                                      {"article-g4", GatePosition::residual}}};
const Names<GateFunction> kFunctions{"gate function",
                                     {{"sigmoid", GateFunction::sigmoid},
                                      {"tanh", GateFunction::tanh_half},
                                      {"relu", GateFunction::relu},
                                      {"silu", GateFunction::silu},
                                      {"none", GateFunction::none}}};
const Names<GateSharing> kSharings{
    "gate sharing",
    {{"elementwise", GateSharing::elementwise}, {"headwise", GateSharing::headwise}, {"shared", GateSharing::shared}}};
const Names<GateInit> kInits{"gate init",
                             {{"zero", GateInit::zero},
                              {"normal", GateInit::normal},
                              {"kaiming", GateInit::kaiming},
                              {"xavier", GateInit::xavier}}};
const Names<ScoreFunction> kScoreFunctions{"score function",
                                           {{"softmax", ScoreFunction::softmax},
                                            {"softmax1", ScoreFunction::softmax1},
                                            {"sink", ScoreFunction::sink},
                                            {"sigmoid", ScoreFunction::sigmoid},
                                            {"softpick", ScoreFunction::softpick}}};
}  // namespace

GatePosition parse_gate_position(const std::string& n) {
    // A bare g2, g3 or g4 names two gates: which one was meant cannot be guessed.
    struct TwoMeanings {
        const char *number, *paper, *article;
    };
    for (const TwoMeanings& t : {TwoMeanings{"g2", "value", "scores-x"}, TwoMeanings{"g3", "key", "scores-query"},
                                 TwoMeanings{"g4", "query", "residual"}})
        if (n.size() == 2 && std::tolower((unsigned char)n[0]) == 'g' && n[1] == t.number[1]) {
            const std::string upper = std::string("G") + t.number[1];
            throw std::invalid_argument("gate position '" + n + "' names two gates: the paper's " + upper + " is '" +
                                        t.paper + "', the walk-through's " + upper + " is '" + t.article +
                                        "' (also 'article-" + t.number + "', which files written before the names " +
                                        "followed the paper mean by " + t.number + "): give one of those names");
        }
    return kPositions.parse(n);
}
std::string gate_position_name(GatePosition p) { return kPositions.name(p); }
GateFunction parse_gate_function(const std::string& n) { return kFunctions.parse(n); }
std::string gate_function_name(GateFunction f) { return kFunctions.name(f); }
GateSharing parse_gate_sharing(const std::string& n) { return kSharings.parse(n); }
std::string gate_sharing_name(GateSharing s) { return kSharings.name(s); }
GateInit parse_gate_init(const std::string& n) { return kInits.parse(n); }
std::string gate_init_name(GateInit i) { return kInits.name(i); }
ScoreFunction parse_score_function(const std::string& n) { return kScoreFunctions.parse(n); }
std::string score_function_name(ScoreFunction f) { return kScoreFunctions.name(f); }

// ---------------------------------------------------------------- GatedAttention

// The gate's (heads, width) layout: which query/kv heads it spans and how many channels
// each gate value covers. Sharing: element-wise (h, dk), head-wise (h, 1),
// shared across heads (1, dk). G2 is one scalar per (query, head) whatever the sharing.
std::pair<int64_t, int64_t> gate_layout(const AttentionOptions& o) {
    const int64_t heads =
        (o.gate == GatePosition::key || o.gate == GatePosition::value) ? o.kv_heads() : o.n_heads;
    if (o.gate == GatePosition::scores_from_x) return {o.n_heads, 1};
    switch (o.sharing) {
        case GateSharing::elementwise: return {heads, o.head_dim()};
        case GateSharing::headwise: return {heads, 1};
        case GateSharing::shared: return {1, o.head_dim()};
    }
    return {heads, o.head_dim()};
}

// Gate init: zero (σ(0) = ½ everywhere), N(0, std²), Kaiming N(0, 2/fan_in),
// Xavier U(±√(6/(fan_in + fan_out))).
Tensor init_gate_weight(const AttentionOptions& o, const Shape& shape, int64_t fan_in, int64_t fan_out) {
    switch (o.gate_init) {
        case GateInit::zero: return zeros(shape);
        case GateInit::normal: return init_normal(shape, o.gate_init_std);
        case GateInit::kaiming: return init_normal(shape, std::sqrt(2.0 / fan_in));
        case GateInit::xavier: return init_uniform(shape, std::sqrt(6.0 / double(fan_in + fan_out)));
    }
    return zeros(shape);
}

namespace {

// The weights of scores (B, H, Tq, Tk) under the score function, in the shifted forms of
// tensor/score_functions.h, from plain ops; visible (Tq, Tk) is 1 where the mask lets a query
// see a key, and the scores are −∞ elsewhere. slot receives softmax1's and sink's slot weight.
Tensor score_weights(const Tensor& scores, const Tensor& visible, const SdpaOptions& o, Tensor& slot) {
    const int64_t B = scores.size(0), H = scores.size(1), Tq = scores.size(2), Tk = scores.size(3);
    switch (o.score_fn) {
        case ScoreFunction::softmax: return softmax(scores, -1);
        case ScoreFunction::softmax1:
        case ScoreFunction::sink: {  // one more column, the slot of logit c (0, or b_h), whose value is 0
            const Tensor c = o.score_fn == ScoreFunction::sink
                                 ? o.sink.to(scores.dtype()).view({1, H, 1, 1}).expand({B, H, Tq, 1})
                                 : zeros({B, H, Tq, 1}, scores.dtype(), scores.device());
            const Tensor all = softmax(cat({scores, c}, -1), -1);  // (B, H, Tq, Tk + 1)
            slot = all.select(3, Tk);
            return all.narrow(3, 0, Tk);
        }
        case ScoreFunction::sigmoid: {  // σ(s − log n_i), n_i the keys query i sees
            const Tensor bias = -log(sum(visible, {-1}, true));  // (Tq, 1)
            return visible * sigmoid(scores + bias);
        }
        case ScoreFunction::softpick: {  // numerator and denominator times e^{−m}, m = max(0, s_1, …)
            const Tensor m = maximum(amax(scores, {-1}, true), zeros({}, scores.dtype(), scores.device())).detach();
            const Tensor u = (exp(scores - m) - exp(-m)) * visible;  // (B, H, Tq, Tk)
            return relu(u) / (sum(abs(u), {-1}, true) + exp(-m) * kSoftpickEpsilon);
        }
    }
    return Tensor();
}

// Attention as plain ops, for hooks that read the scores or edit the scores or the weights
// (nn/hooks.h): what the fused kernel computes, with each step a tensor in the graph.
// q (B, H, Tq, dk), k and v (B, Hkv, Tk, dk) → (B, H, Tq, dk); probs and slot receive the weights.
Tensor attention_as_ops(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o,
                        const LayerHooks& hooks, Tensor& probs, Tensor& slot) {
    const int64_t H = q.size(1), Tq = q.size(2), Tk = k.size(2), group = H / k.size(1);
    const double scale = o.scale > 0 ? o.scale : 1.0 / std::sqrt(double(q.size(3)));
    // The mask as the kernels apply it (cpu/attention.cpp): query i sits at Tk − Tq + i.
    std::vector<int64_t> hidden(size_t(Tq * Tk));
    for (int64_t i = 0; i < Tq; ++i)
        for (int64_t j = 0, pos = Tk - Tq + i; j < Tk; ++j)
            hidden[size_t(i * Tk + j)] = (o.causal && j > pos) || (o.window > 0 && pos - j >= o.window) ||
                                         (o.exclude_self && j == pos && pos > 0);
    const Tensor hide = from_vector(hidden, {Tq, Tk}).to(q.device());
    const Tensor visible = 1.0 - hide.to(q.dtype());
    Tensor scores = matmul(q, repeat_interleave(k, group, 1).transpose(-1, -2)) * scale;  // (B, H, Tq, Tk)
    scores = hooks(HookPoint::scores, masked_fill(scores, hide, -INFINITY));
    probs = hooks(HookPoint::probs, score_weights(scores, visible, o, slot));
    if (slot.defined()) hooks(HookPoint::slot, slot);
    return matmul(probs, repeat_interleave(v, group, 1));
}

}  // namespace

Tensor to_heads(const Tensor& x, int64_t heads) {
    return x.view({x.size(0), x.size(1), heads, -1}).transpose(1, 2);
}

std::shared_ptr<Linear> make_gate_projection(const AttentionOptions& o) {
    const auto [heads, width] = gate_layout(o);
    auto w_g = std::make_shared<Linear>(o.d_model, heads * width, false);
    w_g->weight = init_gate_weight(o, {heads * width, o.d_model}, o.d_model, heads * width);
    w_g->weight.requires_grad_();
    return w_g;
}

Tensor apply_gate_function(GateFunction f, const Tensor& z) {
    switch (f) {
        case GateFunction::sigmoid: return sigmoid(z);
        case GateFunction::tanh_half: return (tanh(z) + 1.0) * 0.5;
        case GateFunction::relu: return relu(z);
        case GateFunction::silu: return silu(z);
        case GateFunction::none: return ones_like(z);
    }
    return z;
}

Tensor gate_and_merge_heads(const AttentionOptions& o, const Tensor& gate_logits, const Tensor& heads_in,
                            Tensor* gate) {
    const int64_t B = heads_in.size(0), H = heads_in.size(1), T = heads_in.size(2), dk = heads_in.size(3);
    // The element-wise σ gate is one fused op (sigmoid_gate: one pass each way) applied after
    // the heads merge, where the gate logits x W_g already lie in their (B, T, H·dk) order: an
    // element-wise product is the same whichever layout it runs in. Other gate functions and
    // sharings broadcast a product with the gate values in head layout.
    const bool fused = o.gate_fn == GateFunction::sigmoid && o.sharing == GateSharing::elementwise;
    Tensor heads = heads_in;  // (B, H, T, dk)
    if (!fused) {
        const Tensor values = to_heads(apply_gate_function(o.gate_fn, gate_logits), gate_layout(o).first);
        heads = heads * values;
        if (gate) *gate = values;
    }
    Tensor merged = heads.transpose(1, 2).reshape({B, T, H * dk});  // (B, T, H·dk)
    if (!fused) return merged;
    if (gate) *gate = to_heads(sigmoid(gate_logits.detach()), H);
    return sigmoid_gate(gate_logits, merged);
}

Tensor slot_weight(ScoreFunction f, const Tensor& sink, const Tensor& lse) {
    if (f == ScoreFunction::softmax1) return exp(-lse);
    if (f == ScoreFunction::sink) return exp(sink.detach().to(lse.dtype()).view({1, sink.size(0), 1}) - lse);
    return Tensor();
}

GatedAttention::GatedAttention(const AttentionOptions& options) : options_(options) {
    const int64_t d = options.d_model, H = options.n_heads, Hkv = options.kv_heads();
    // G4 and G5 gate W_O's output, d seen as h chunks of dk: that needs h·dk = d.
    const bool gates_d = options.gated() &&
                         (options.gate == GatePosition::residual || options.gate == GatePosition::after_merge);
    if (H <= 0 || options.head_size < 0 || (options.head_size == 0 && d % H != 0) || H % Hkv != 0 ||
        (options.rope && options.head_dim() % 2 != 0) || (gates_d && H * options.head_dim() != d))
        throw std::invalid_argument("GatedAttention: d_model " + std::to_string(d) + ", n_heads " + std::to_string(H) +
                                    ", n_kv_heads " + std::to_string(Hkv) + ", head_size " +
                                    std::to_string(options.head_size) +
                                    ": need heads dividing d_model (or a head size of their own), kv heads dividing "
                                    "heads, an even head size with RoPE, and heads × head size = d_model for G4/G5");
    const int64_t dk = options.head_dim();
    w_q = register_module("w_q", std::make_shared<Linear>(d, H * dk, false));
    w_k = register_module("w_k", std::make_shared<Linear>(d, Hkv * dk, false));
    w_v = register_module("w_v", std::make_shared<Linear>(d, Hkv * dk, false));
    w_o = register_module("w_o", std::make_shared<Linear>(H * dk, d, false));
    if (options.qk_norm) {
        q_norm = register_module("q_norm", std::make_shared<RMSNorm>(dk, options.qk_norm_eps, options.qk_norm_zero_centred));
        k_norm = register_module("k_norm", std::make_shared<RMSNorm>(dk, options.qk_norm_eps, options.qk_norm_zero_centred));
    }
    if (options.rope) rope_.emplace(dk, options.rope_options);
    if (options.score_fn == ScoreFunction::sink) {
        sink = zeros({H});  // e^0 = 1: at the start the slot weighs as much as one key of score 0
        register_parameter("sink", sink);
    }
    if (!options.gated()) return;
    if (options.gate == GatePosition::scores_from_query) {
        w_g_query = init_gate_weight(options, {H, dk}, dk, 1);
        register_parameter("w_g_query", w_g_query);
        return;
    }
    w_g = register_module("w_g", make_gate_projection(options));
}

Tensor GatedAttention::apply_gate_fn(const Tensor& z) const { return apply_gate_function(options_.gate_fn, z); }

Tensor GatedAttention::gate_values(const Tensor& logits) const {
    const auto [heads, width] = gate_layout(options_);
    // (B, T, heads·width) → (B, heads, T, width)
    return to_heads(apply_gate_fn(logits), heads);
}

Tensor GatedAttention::forward(const Tensor& x, KVCache* cache, const Tensor& gate_source,
                               AttentionCapture* capture, const Tensor& residual, const LayerHooks* hooks) const {
    check_defined(x, "GatedAttention");
    if (x.dim() != 3 || x.size(2) != options_.d_model)
        throw std::invalid_argument("GatedAttention: expected x (B, T, " + std::to_string(options_.d_model) +
                                    "), got " + shape_str(x.shape()));
    const AttentionOptions& o = options_;
    const int64_t B = x.size(0), T = x.size(1), H = o.n_heads, Hkv = o.kv_heads(), dk = o.head_dim();
    const int64_t past = cache ? cache->seen() : 0;  // the position of x's first token
    const bool gated = o.gated();
    const auto hooked = [hooks](HookPoint p) { return hooks && hooks->any(p); };
    const auto gate_from = [&](const Tensor& logits) { return hook(hooks, HookPoint::gate, gate_values(logits)); };
    Tensor gate;

    // Every projection of x in one GEMM (fused_linear): Q, K, V and, where the gate reads x
    // (all positions but G3, and G4 given the residual stream), the gate logits x W_g.
    const bool gate_reads_x = gated && o.gate != GatePosition::scores_from_query &&
                              !(o.gate == GatePosition::residual && gate_source.defined());
    std::vector<const Linear*> projections{w_q.get(), w_k.get(), w_v.get()};
    if (gate_reads_x) projections.push_back(w_g.get());
    const std::vector<Tensor> projected = fused_linear(x, projections);  // (B, T, ·) views of one product
    // (B, T, heads·width); G1's fused σ gate reads them, so they are hooked here.
    const Tensor gate_logits = gate_reads_x ? hook(hooks, HookPoint::gate_logits, projected[3]) : Tensor();

    Tensor q = to_heads(projected[0], H);    // (B, H, T, dk)
    Tensor k = to_heads(projected[1], Hkv);  // (B, Hkv, T, dk)
    Tensor v = to_heads(projected[2], Hkv);  // (B, Hkv, T, dk)
    if (q_norm) q = q_norm->forward(q), k = k_norm->forward(k);
    // The paper's value/key/query gates, after QK-norm: a norm after them would undo them.
    if (gated && o.gate == GatePosition::value) v = v * (gate = gate_from(gate_logits));
    if (gated && o.gate == GatePosition::key) k = k * (gate = gate_from(gate_logits));
    if (gated && o.gate == GatePosition::query) q = q * (gate = gate_from(gate_logits));
    const Tensor k_unrotated = k;
    if (rope_) q = rope_->forward(q, past), k = rope_->forward(k, past);
    q = hook(hooks, HookPoint::q, q), k = hook(hooks, HookPoint::k, k), v = hook(hooks, HookPoint::v, v);
    if (cache) {
        cache->append(k, v, k_unrotated);
        k = cache->k, v = cache->v;
        // The first positions kept past a drop sit just before the newest ones (KVCache):
        // their keys rotated dropped() positions further than where they were seen.
        if (rope_ && cache->keep_first > 0 && cache->dropped() > 0) {
            const int64_t F = cache->first_keys.size(2);
            k = cat({rope_->forward(cache->first_keys, cache->dropped()), k.narrow(2, F, k.size(2) - F)}, 2);
        }
    }
    // G2, G3: scale each query row's logits by its gate, i.e. scale the query vector.
    if (gated && o.gate == GatePosition::scores_from_x)
        q = q * (gate = gate_from(gate_logits));  // (B, H, T, 1)
    if (gated && o.gate == GatePosition::scores_from_query) {
        const Tensor logits = hook(hooks, HookPoint::gate_logits, sum(q * w_g_query.view({1, H, 1, dk}), {-1}, true));
        q = q * (gate = hook(hooks, HookPoint::gate, apply_gate_fn(logits)));  // σ(Q_i w_i)
    }

    Tensor probs, lse, slot;
    const SdpaOptions sdpa{.causal = o.causal, .window = o.window, .exclude_self = o.exclude_self,
                           .score_fn = o.score_fn, .sink = sink};
    Tensor heads;  // (B, H, T, dk)
    if (hooks && (hooks->any(HookPoint::scores) || hooks->edits(HookPoint::probs))) {
        heads = attention_as_ops(q, k, v, sdpa, *hooks, probs, slot);
    } else {
        const bool weights = capture || hooked(HookPoint::probs) || hooked(HookPoint::slot);
        heads = scaled_dot_product_attention(q, k, v, sdpa, weights ? &probs : nullptr, weights ? &lse : nullptr);
        if (weights) slot = slot_weight(o.score_fn, sink, lse);
        if (hooked(HookPoint::probs)) hook(hooks, HookPoint::probs, probs);
        if (slot.defined() && hooked(HookPoint::slot)) hook(hooks, HookPoint::slot, slot);
    }
    // G1. The element-wise σ gate is one fused op (sigmoid_gate: one pass each way) applied
    // after the heads merge, where the gate logits x W_g already lie in their (B, T, H·dk)
    // order: an element-wise product is the same whichever layout it runs in. Other gate
    // functions and sharings, and a gate a hook edits, broadcast a product with the gate
    // values in head layout.
    const bool fused_g1 = gated && o.gate == GatePosition::sdpa_output && o.gate_fn == GateFunction::sigmoid &&
                          o.sharing == GateSharing::elementwise && !(hooks && hooks->edits(HookPoint::gate));
    if (gated && o.gate == GatePosition::sdpa_output && !fused_g1)
        heads = heads * (gate = gate_from(gate_logits));

    Tensor merged = heads.transpose(1, 2).reshape({B, T, H * dk});  // (B, T, H·dk)
    if (fused_g1) {
        merged = sigmoid_gate(gate_logits, merged);
        if (capture || hooked(HookPoint::gate)) gate = hook(hooks, HookPoint::gate, to_heads(sigmoid(gate_logits.detach()), H));
    }
    if (hooked(HookPoint::z)) merged = hook(hooks, HookPoint::z, merged.view({B, T, H, dk})).reshape({B, T, H * dk});
    // G4 and G5 gate W_O's output, and a hook on attn_out sees it alone, so the residual is
    // added after them; otherwise W_O's GEMM adds it.
    const bool gate_after_w_o = gated && (o.gate == GatePosition::after_merge || o.gate == GatePosition::residual);
    const bool residual_in_gemm = !gate_after_w_o && !hooked(HookPoint::attn_out);
    Tensor y = w_o->forward(merged, residual_in_gemm ? residual : Tensor());  // (B, T, d)
    if (gate_after_w_o) {
        // G5 reads the attention input norm(x); G4 the raw residual stream (gate_source).
        gate = gate_from(gate_reads_x ? gate_logits : hook(hooks, HookPoint::gate_logits, w_g->forward(gate_source)));
        // d seen as H chunks of dk, so every sharing broadcasts: (H, dk), (H, 1) or (1, dk).
        y = (to_heads(y, H) * gate).transpose(1, 2).reshape({B, T, o.d_model});
    }
    y = hook(hooks, HookPoint::attn_out, y);
    if (!residual_in_gemm && residual.defined()) y = residual + y;
    if (capture)
        *capture = {probs.detach(), lse, slot.defined() ? slot.detach() : slot, gate.defined() ? gate.detach() : Tensor()};
    return y;
}

void KVCache::append(const Tensor& k_new, const Tensor& v_new, const Tensor& k_unrotated) {
    const int64_t B = k_new.size(0), Hkv = k_new.size(1), T = k_new.size(2), D = k_new.size(3), past = length();
    if (past > 0 && (k.size(0) != B || k.size(1) != Hkv || k.size(3) != D))
        throw std::invalid_argument("KVCache: holds " + shape_str(k.shape()) + ", cannot append " +
                                    shape_str(k_new.shape()));
    if (keep_first < 0 || (keep_first > 0 && keep <= keep_first))
        throw std::invalid_argument("KVCache: keep_first " + std::to_string(keep_first) + " with keep " +
                                    std::to_string(keep) + ": the first positions kept need a window longer than them");
    // The old positions that stay: the first keep_first (at the front since nothing before
    // them was ever dropped), then all the others, or the newest that fit beside the T new ones.
    const int64_t first = std::min(keep_first, past);
    const int64_t recent = keep > 0 ? std::min(past - first, std::max<int64_t>(keep - first - T, 0)) : past - first;
    const int64_t kept = first + recent, length = kept + T;
    // A full buffer is replaced by one twice its size (a window never needs more than keep,
    // or the T new positions beside the first ones), or by one of `reserve` at the start.
    const int64_t capacity = buffers_[0].defined() ? buffers_[0].size(2) : 0;
    const bool grows = capacity < length;
    const int64_t doubled = keep > 0 ? std::min(2 * capacity, keep) : 2 * capacity;
    const int64_t new_capacity = std::max({length, doubled, past == 0 ? reserve : 0});
    NoGradGuard no_grad;
    const auto place = [&](Tensor& held, const Tensor& fresh, Tensor& buffer) {
        if (grows) {
            const Tensor old = held;
            buffer = Tensor::empty({B, Hkv, new_capacity, D}, fresh.dtype(), fresh.device());
            if (first > 0) buffer.narrow(2, 0, first).copy_(old.narrow(2, 0, first));
            if (recent > 0) buffer.narrow(2, first, recent).copy_(old.narrow(2, past - recent, recent));
        } else if (recent > 0 && past - recent > first) {
            // Positions dropped: the newest kept ones move down beside the first ones. Source and
            // destination may overlap within the buffer, so the move goes through a copy.
            buffer.narrow(2, first, recent).copy_(held.narrow(2, past - recent, recent).clone());
        }
        buffer.narrow(2, kept, T).copy_(fresh.detach());
        held = buffer.narrow(2, 0, length);
    };
    place(k, k_new, buffers_[0]);
    if (v_new.defined()) place(v, v_new, buffers_[1]);
    if (seen_ < keep_first) {  // the first positions' keys before RoPE, for GatedAttention to move them
        const Tensor fresh = (k_unrotated.defined() ? k_unrotated : k_new).detach().narrow(2, 0, std::min(T, keep_first - seen_));
        first_keys = first_keys.defined() ? cat({first_keys, fresh}, 2) : fresh.contiguous();
    }
    seen_ += T;
}

// ---------------------------------------------------------------- MultiHeadAttention

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t heads, bool causal_)
    : w_q(register_module("w_q", std::make_shared<Linear>(d_model, d_model))),
      w_k(register_module("w_k", std::make_shared<Linear>(d_model, d_model))),
      w_v(register_module("w_v", std::make_shared<Linear>(d_model, d_model))),
      w_o(register_module("w_o", std::make_shared<Linear>(d_model, d_model))),
      n_heads(heads),
      causal(causal_) {
    if (heads <= 0 || d_model % heads != 0)
        throw std::invalid_argument("MultiHeadAttention: " + std::to_string(heads) + " heads do not divide d_model " +
                                    std::to_string(d_model));
}

Tensor MultiHeadAttention::forward(const Tensor& x) const {
    const int64_t B = x.size(0), T = x.size(1), d = x.size(2);
    const std::vector<Tensor> qkv = fused_linear(x, {w_q.get(), w_k.get(), w_v.get()});  // (B, T, d) each
    const Tensor q = to_heads(qkv[0], n_heads), k = to_heads(qkv[1], n_heads), v = to_heads(qkv[2], n_heads);
    const Tensor heads = scaled_dot_product_attention(q, k, v, {causal, 0, 0});
    return w_o->forward(heads.transpose(1, 2).reshape({B, T, d}));
}

}  // namespace gg::nn
