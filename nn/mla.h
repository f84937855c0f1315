// mla.h — multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, its §2.1).
//
// A KV cache of standard attention holds 2 · h_kv · dk numbers per token and layer. MLA keeps
// one small latent instead, from which every head's key and value are made:
//   c_t   = RMSNorm(W_DKV x_t)                   the latent, d_c = kv_rank numbers
//   k^C_t = W_UK c_t,  v_t = W_UV c_t            per head, dk each (never cached)
//   k^R_t = RoPE(W_KR x_t)                       one rotary key of d_r numbers, shared by all heads
//   q_t   = [q^C_t; RoPE(q^R_t)],  q^C = W_Q x, q^R = W_QR x   per head, dk + d_r
//   head_i = Σ_j weights(q_i,t · [k^C_i,j; k^R_j] / √(dk + d_r)) v_i,j,  y = Concat(heads) W_O
// RoPE cannot sit on k^C: a rotation between W_UK and c would stop W_UK from being moved onto
// the query (below), so position enters through its own decoupled part k^R.
//
// The absorbed form, for cached decoding: q^C_i · W_UK,i c = (W_UK,iᵀ q^C_i) · c and
// Σ_j p_j W_UV,i c_j = W_UV,i Σ_j p_j c_j. So each head's query moves into the latent space,
// every head attends over the same keys [c; k^R] (one "kv head", as in multi-query
// attention), the weighted sum stays a latent and W_UV maps it out after. The cache holds
// only [c; k^R]: d_c + d_r numbers per token and layer. The same function of x either way:
// the explicit form trains (its GEMMs are the larger, better-shaped ones over T), the
// absorbed form decodes; tests/test_mla.cpp checks they agree.
//
// Orthogonal to the rest of attention: every score function (the scores are still q · k),
// causal masks and windows, and the output gate G1 (gated heads before W_O, the seed article's
// §8.1: "they can be stacked"). Not QK-norm (a norm of k^C would stop the absorption) and
// not the gates that act on q, k, v or the logits.
#pragma once
#include <memory>
#include <optional>

#include "nn/attention.h"

namespace gg::nn {

class MultiHeadLatentAttention : public Module {
public:
    // options.kv_rank > 0 is d_c; options.mla_rope_dim() is d_r when options.rope.
    explicit MultiHeadLatentAttention(const AttentionOptions& options);
    // x (B, T, d) → (B, T, d). The explicit form, or the absorbed one when asked or given a
    // cache: then x holds only the new positions and the cache holds keys alone (KVCache::k
    // (B, 1, T, d_c + d_r)), which carry no gradient. capture and residual as GatedAttention::forward.
    // hooks: the points of nn/hooks.h that mean here what they mean there — gate_logits, gate
    // (read), probs and slot (read), z, attn_out; q, k, v and scores (MLA's are not one
    // tensor per head) and edits of gate and probs are refused.
    Tensor forward(const Tensor& x, KVCache* cache = nullptr, AttentionCapture* capture = nullptr,
                   const Tensor& residual = Tensor(), bool absorbed = false, const LayerHooks* hooks = nullptr) const;

    const AttentionOptions& options() const { return options_; }
    RoPE* rope() { return rope_ ? &*rope_ : nullptr; }
    int64_t rope_dim() const { return rope_ ? options_.mla_rope_dim() : 0; }  // d_r: 0 without RoPE

    std::shared_ptr<Linear> w_q, w_qr, w_dkv, w_kr, w_uk, w_uv, w_o, w_g;  // w_qr, w_kr: with RoPE
    std::shared_ptr<RMSNorm> kv_norm;
    Tensor sink;  // ScoreFunction::sink: each head's slot logit b_h (h), init 0

private:
    // q_c (B, H, T, dk), q_rope (B, H, T, d_r), latent (B, T, d_c), k_rope (B, 1, T, d_r) (both
    // undefined without RoPE) → the heads (B, H, T, dk).
    Tensor explicit_heads(const Tensor& q_c, const Tensor& q_rope, const Tensor& latent, const Tensor& k_rope,
                          const SdpaOptions& sdpa, Tensor* probs, Tensor* lse) const;
    Tensor absorbed_heads(const Tensor& q_c, const Tensor& q_rope, const Tensor& latent, const Tensor& k_rope,
                          KVCache* cache, const SdpaOptions& sdpa, Tensor* probs, Tensor* lse) const;
    AttentionOptions options_;
    std::optional<RoPE> rope_;
};

}  // namespace gg::nn
