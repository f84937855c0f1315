// attention.h — scaled dot-product attention and the whole gated-attention family.
//
// Notation: x (B, T, d); h heads of size dk (d / h unless set apart); σ the gate function.
//   standard:  head_i = softmax(Q_i K_iᵀ / √dk + mask) V_i,  y = Concat(heads) W_O
// GatedAttention adds one gate, at one of these positions (GatePosition):
//   G1 sdpa_output       head_i ← σ(x W_g,i) ⊙ head_i                   (the recommended one)
//   G2 scores_from_x     logits ← (Q Kᵀ/√dk) ⊙ σ(x W_g), W_g: d → h, one gate per (query, head)
//   G3 scores_from_query logits_i ← (Q_i K_iᵀ/√dk) ⊙ σ(Q_i w_i), w_i ∈ R^dk
//   G4 residual          the block computes x + σ(x W_g) ⊙ Attn(norm(x)) (gate reads raw x)
//   G5 after_merge       y ← σ(norm(x) W_g) ⊙ (Concat(heads) W_O)
//   paper's value / key / query gates: V ← V ⊙ σ(x W_g) (likewise K, Q)
// A gate on the logits scales a whole query row, so it is applied to the query vector:
// (g q)·k = g (q·k) — the same numbers, and the fused attention kernel stays unchanged.
// Orthogonal to the gate, the score function (ScoreFunction, tensor/score_functions.h) says
// how a row of scores becomes weights: softmax, or one of the field's other answers to the
// attention sink — softmax1, a learnable sink logit per head, sigmoid, softpick.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "nn/hooks.h"
#include "nn/layers.h"
#include "nn/rope.h"

namespace gg::nn {

struct SdpaOptions {
    bool causal = true;
    int64_t window = 0;  // > 0: each query sees only its last `window` keys (itself included)
    double scale = 0;    // 0: 1/√dk
    // Causal only: query t sees keys 0 … t−1, not itself (query 0 sees key 0, its only one).
    // An experiment's switch (tutorial 06): it takes away a head's cheapest way to do nothing.
    bool exclude_self = false;
    ScoreFunction score_fn = ScoreFunction::softmax;
    // ScoreFunction::sink only: the slot's logit b_h of each query head (H), a parameter that
    // gets its gradient through the op.
    Tensor sink = Tensor();
};

// q (B, H, Tq, dk), k and v (B, Hkv, Tk, dk) → (B, H, Tq, dk); H a multiple of Hkv.
// The queries are the last Tq positions of the Tk keys (Tq < Tk when a KV cache holds the
// rest). When `probs` is given it receives the (B, H, Tq, Tk) attention weights the output
// was made with (probabilities for softmax; rows summing to less than 1 for softmax1 and sink,
// to anything for sigmoid and softpick); when `lse` is given, the (B, H, Tq) row statistic
// (Backend::attention_forward): for softmax log Σ_j exp(z_ij), z = q·k·scale over the keys the
// mask lets the query see, so that z_ij = lse_i + log p_ij for those keys, which softmax1 and
// sink keep by counting their slot's e^c in the sum.
// While a graph is recorded, backward reads the weights instead of recomputing them when they
// fit the device's Backend::attention_keep_bytes or were asked for (not bfloat16, not softpick).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const SdpaOptions& options = {}, Tensor* probs = nullptr, Tensor* lse = nullptr);

enum class GatePosition { none, sdpa_output, scores_from_x, scores_from_query, residual, after_merge, value, key, query };
enum class GateFunction { sigmoid, tanh_half, relu, silu, none };
enum class GateSharing { elementwise, headwise, shared };
enum class GateInit { zero, normal, kaiming, xavier };

// Names used on command lines and in configs: "baseline"; "g1" and "g5", the two numbers the
// paper and the walk-through give the same gate; the paper's G2–G4 by where they sit, "value",
// "key", "query"; the walk-through's G2–G4, "scores-x", "scores-query", "residual" (or
// "article-g2".."article-g4"); "sdpa" (g1) and "output" (g5). A bare "g2".."g4" is refused with
// both meanings. Parsing ignores case ("G1" is "g1"); gate_position_name gives the first name.
GatePosition parse_gate_position(const std::string& name);
std::string gate_position_name(GatePosition p);
GateFunction parse_gate_function(const std::string& name);  // sigmoid, tanh, relu, silu, none
std::string gate_function_name(GateFunction f);
GateSharing parse_gate_sharing(const std::string& name);    // elementwise, headwise, shared
std::string gate_sharing_name(GateSharing s);
GateInit parse_gate_init(const std::string& name);          // zero, normal, kaiming, xavier
std::string gate_init_name(GateInit i);
ScoreFunction parse_score_function(const std::string& name);  // softmax, softmax1, sink, sigmoid, softpick
std::string score_function_name(ScoreFunction f);

struct AttentionOptions {
    int64_t d_model = 64;
    int64_t n_heads = 4;
    int64_t n_kv_heads = 0;  // 0: n_heads (no grouping); else must divide n_heads (GQA)
    // 0: dk = d_model / n_heads. Else dk itself, whatever d_model is: Qwen3 sizes heads on
    // their own (Qwen3-0.6B: d_model 1024, 16 heads of 128), so W_Q maps d → h·dk ≠ d and
    // W_O maps h·dk back to d.
    int64_t head_size = 0;
    GatePosition gate = GatePosition::sdpa_output;
    GateFunction gate_fn = GateFunction::sigmoid;
    GateSharing sharing = GateSharing::elementwise;
    GateInit gate_init = GateInit::zero;
    double gate_init_std = 0.02;  // for GateInit::normal
    bool rope = false;
    RopeOptions rope_options;
    bool qk_norm = false;  // RMSNorm on each query and key head (Qwen3)
    double qk_norm_eps = 1e-6;
    bool qk_norm_zero_centred = false;  // the norms scale by 1 + weight (RMSNorm; Qwen3-Next)
    bool causal = true;
    int64_t window = 0;    // sliding window, 0 = none
    bool exclude_self = false;  // hide each query's own key (SdpaOptions::exclude_self)
    // How scores become weights; ScoreFunction::sink adds the parameter `sink` (n_heads), init 0.
    ScoreFunction score_fn = ScoreFunction::softmax;
    // > 0: multi-head latent attention (nn/mla.h), keys and values from a latent of this size.
    int64_t kv_rank = 0;
    int64_t rope_dim = 0;  // MLA's decoupled RoPE key and query part (0: head_dim / 2)

    int64_t kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
    int64_t head_dim() const { return head_size > 0 ? head_size : d_model / n_heads; }
    int64_t mla_rope_dim() const { return rope_dim > 0 ? rope_dim : head_dim() / 2; }
    bool gated() const { return gate != GatePosition::none && gate_fn != GateFunction::none; }
};

// The pieces GatedAttention and MultiHeadLatentAttention (nn/mla.h) share.
// (B, T, heads·width) → (B, heads, T, width): the head-major layout attention works in.
Tensor to_heads(const Tensor& x, int64_t heads);
// The gate's (heads, width) layout: element-wise (h, dk), head-wise (h, 1), shared (1, dk); G2 (h, 1).
std::pair<int64_t, int64_t> gate_layout(const AttentionOptions& o);
// W_g (heads·width, d) drawn as o.gate_init says.
Tensor init_gate_weight(const AttentionOptions& o, const Shape& shape, int64_t fan_in, int64_t fan_out);
// The gate's projection x W_g, d → heads·width, with that init (every gate but G3's).
std::shared_ptr<Linear> make_gate_projection(const AttentionOptions& o);
Tensor apply_gate_function(GateFunction f, const Tensor& z);  // σ(z) for the chosen σ
// G1: heads (B, H, T, dk) ⊙ σ(gate_logits), gate_logits (B, T, heads·width) = x W_g, merged
// into (B, T, H·dk). `gate`, when given, receives the gate values in head layout.
Tensor gate_and_merge_heads(const AttentionOptions& o, const Tensor& gate_logits, const Tensor& heads, Tensor* gate);
// The weight a row's slot took, e^{c − lse} (softmax1: c = 0, sink: c = b_h): (B, H, Tq);
// undefined for the score functions without a slot. sink (H) or undefined, lse (B, H, Tq).
Tensor slot_weight(ScoreFunction f, const Tensor& sink, const Tensor& lse);

// The keys and values of the positions seen so far, for incremental decoding. The gate
// needs nothing cached: it reads only the current token. A cache may hold keys alone (v
// undefined): multi-head latent attention keeps one latent per token that serves as both.
//
// append() writes the new positions into a buffer per tensor, (B, Hkv, capacity, dk), and k
// and v are views of its first positions: each step writes only its own T positions, and no
// position is copied until the buffer is full, when a buffer of twice the size takes them
// (a cache of T positions takes at most 2T positions of memory, 3T during that copy).
// `reserve` sizes the first buffer for the positions the caller knows will come (generate:
// the prompt and the new tokens), so a decoding run allocates its cache once, at its final
// size. Concatenating a new (B, Hkv, T + 1, dk) tensor every step instead asks for a new size
// every token, and the caching allocator (tensor/caching_allocator.h) keeps each freed size
// for reuse, so a run of N tokens held memory growing with N² (2000 tokens of the tiny model:
// 1.5 GB for a 1 MB cache). The views' rows are contiguous (stride dk), as the attention
// kernels read them; their heads lie capacity·dk apart.
//
// With `keep` > 0 only the last `keep` positions stay once new ones come: a query then sees
// at most that many keys, itself included (sliding-window attention over `keep`), so every
// new token costs the same time and memory however long decoding goes on. Positions keep
// counting (seen()): RoPE rotates by the true position, and the distances stay right.
//
// With `keep_first` > 0 as well, the stream's first keep_first positions are never dropped:
// the cache holds them and the newest keep − keep_first (StreamingLLM, arXiv 2309.17453: a
// model that parks its idle attention on the first tokens collapses once they leave the
// window, and keeping them is enough). As there, the distances are those within the cache:
// the newest keys keep their true distances to the query, and the first ones are moved up to
// sit just before them — GatedAttention rotates their unrotated keys (`first_keys`) by
// dropped() more positions — so no query sees a distance longer than `keep`, however far the
// stream has gone. Exact when tokens come one at a time once positions drop (as eval and
// generate feed them after a prompt).
struct KVCache {
    Tensor k, v;  // (B, Hkv, T_kept, dk), undefined before the first step (v: or always); no gradient
    int64_t keep = 0;        // 0: every position
    int64_t keep_first = 0;  // with keep: the first positions, never dropped; < keep
    int64_t reserve = 0;     // positions the first buffer holds at least (a hint; more grow it)
    Tensor first_keys;       // (B, Hkv, ≤ keep_first, dk) their keys before RoPE, when keep_first > 0
    int64_t length() const { return k.defined() ? k.size(2) : 0; }  // positions held
    int64_t seen() const { return seen_; }  // positions appended, held or dropped: the next one's index
    int64_t dropped() const { return seen_ - length(); }
    // k_new, v_new (B, Hkv, T, dk): the next T positions (v_new undefined: keys only); k_unrotated: their keys before RoPE,
    // kept for the first keep_first positions (undefined: k_new is unrotated, no RoPE).
    void append(const Tensor& k_new, const Tensor& v_new, const Tensor& k_unrotated = Tensor());

private:
    Tensor buffers_[2];  // k's and v's (B, Hkv, capacity, dk): k and v are their first positions
    int64_t seen_ = 0;
};

// What one forward pass computed, for analysis (nn/analysis/analysis.h): the caller owns
// it and passes it to forward(), which fills it in. Without one, nothing is kept for the
// caller, so analysis costs memory only when asked for (a training forward may still keep
// short sequences' probabilities until backward: Backend::attention_keep_bytes).
// probs are the weights each value was multiplied by, whatever the score function: a row sums
// to 1 for softmax, to 1 − slot for softmax1 and sink, to anything for sigmoid and softpick.
// A metric that counts only the keys misses what the slot took (a sink model parks its idle
// heads there), hence slot.
struct AttentionCapture {
    Tensor probs;  // (B, H, Tq, Tk) the attention weights
    // (B, H, Tq) the row statistic (Backend::attention_forward): for softmax, softmax1 and sink
    // the log-sum-exp of the row's logits (the slot's e^c included), so the largest logit is
    // lse + log max_j p_ij (stability.h); softpick's log denominator; sigmoid's bias b_i.
    Tensor lse;
    Tensor slot;   // (B, H, Tq) the weight the slot took, 1 − Σ_j p_ij (softmax1, sink); undefined otherwise
    Tensor gate;   // the gate values, in the shape the gate is applied in; undefined without a gate
};

class GatedAttention : public Module {
public:
    explicit GatedAttention(const AttentionOptions& options);
    // x (B, T, d) → (B, T, d). gate_source: what the G4 gate reads (the raw residual
    // stream); other positions read x. With a cache, x holds only the new positions.
    // With capture, the pass's probabilities and gate values are written into it. With a
    // residual (B, T, d), returns residual + the attention output (W_O's GEMM adds it).
    // With hooks, the attention's points of nn/hooks.h (q … attn_out) run them.
    Tensor forward(const Tensor& x, KVCache* cache = nullptr, const Tensor& gate_source = Tensor(),
                   AttentionCapture* capture = nullptr, const Tensor& residual = Tensor(),
                   const LayerHooks* hooks = nullptr) const;

    const AttentionOptions& options() const { return options_; }
    RoPE* rope() { return rope_ ? &*rope_ : nullptr; }

    std::shared_ptr<Linear> w_q, w_k, w_v, w_o, w_g;
    std::shared_ptr<RMSNorm> q_norm, k_norm;
    Tensor w_g_query;  // G3's per-head vectors (h, dk)
    Tensor sink;       // ScoreFunction::sink: each head's slot logit b_h (h), init 0

private:
    Tensor gate_values(const Tensor& logits) const;  // σ(source W_g) from its logits, in the gate layout
    Tensor apply_gate_fn(const Tensor& z) const;
    AttentionOptions options_;
    std::optional<RoPE> rope_;
};

// The standard baseline, as torch.nn.MultiheadAttention (biases on all projections),
// with an optional causal mask.
class MultiHeadAttention : public Module {
public:
    MultiHeadAttention(int64_t d_model, int64_t n_heads, bool causal = true);
    Tensor forward(const Tensor& x) const;  // (B, T, d) → (B, T, d)
    std::shared_ptr<Linear> w_q, w_k, w_v, w_o;
    int64_t n_heads;
    bool causal;
};

}  // namespace gg::nn
