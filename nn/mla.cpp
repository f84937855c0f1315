#include "nn/mla.h"

#include <cmath>
#include <stdexcept>

namespace gg::nn {

MultiHeadLatentAttention::MultiHeadLatentAttention(const AttentionOptions& options) : options_(options) {
    const AttentionOptions& o = options;
    const int64_t d = o.d_model, H = o.n_heads, dc = o.kv_rank;
    const int64_t dk = H > 0 && (o.head_size > 0 || d % H == 0) ? o.head_dim() : 0;
    const int64_t dr = o.rope ? o.mla_rope_dim() : 0;
    const bool gate_ok = !o.gated() || o.gate == GatePosition::sdpa_output;
    if (dc <= 0 || dk <= 0 || o.rope_dim < 0 || dr % 2 != 0 || (o.rope && dr == 0) ||
        (o.n_kv_heads != 0 && o.n_kv_heads != H) || o.qk_norm || !gate_ok)
        throw std::invalid_argument(
            "MultiHeadLatentAttention: kv_rank " + std::to_string(dc) + ", d_model " + std::to_string(d) +
            ", n_heads " + std::to_string(H) + ", head_size " + std::to_string(o.head_size) + ", rope_dim " +
            std::to_string(dr) + ", n_kv_heads " + std::to_string(o.n_kv_heads) + ", qk_norm " +
            std::to_string(o.qk_norm) + ", gate " + gate_position_name(o.gate) +
            ": need kv_rank > 0, heads dividing d_model (or a head size), an even RoPE part > 0, no kv heads of "
            "its own (every head reads the latent), no QK-norm and no gate but g1");
    w_q = register_module("w_q", std::make_shared<Linear>(d, H * dk, false));
    w_dkv = register_module("w_dkv", std::make_shared<Linear>(d, dc, false));
    kv_norm = register_module("kv_norm", std::make_shared<RMSNorm>(dc, o.qk_norm_eps));
    w_uk = register_module("w_uk", std::make_shared<Linear>(dc, H * dk, false));
    w_uv = register_module("w_uv", std::make_shared<Linear>(dc, H * dk, false));
    w_o = register_module("w_o", std::make_shared<Linear>(H * dk, d, false));
    if (o.rope) {
        w_qr = register_module("w_qr", std::make_shared<Linear>(d, H * dr, false));
        w_kr = register_module("w_kr", std::make_shared<Linear>(d, dr, false));
        rope_.emplace(dr, o.rope_options);
    }
    if (o.score_fn == ScoreFunction::sink) {
        sink = zeros({H});
        register_parameter("sink", sink);
    }
    if (o.gated()) w_g = register_module("w_g", make_gate_projection(o));
}

Tensor MultiHeadLatentAttention::forward(const Tensor& x, KVCache* cache, AttentionCapture* capture,
                                         const Tensor& residual, bool absorbed, const LayerHooks* hooks) const {
    check_defined(x, "MultiHeadLatentAttention");
    if (x.dim() != 3 || x.size(2) != options_.d_model)
        throw std::invalid_argument("MultiHeadLatentAttention: expected x (B, T, " + std::to_string(options_.d_model) +
                                    "), got " + shape_str(x.shape()));
    const AttentionOptions& o = options_;
    const int64_t B = x.size(0), T = x.size(1), H = o.n_heads, dk = o.head_dim(), dr = rope_dim();
    const int64_t past = cache ? cache->seen() : 0;  // the position of x's first token
    const auto hooked = [&](HookPoint p) { return hooks && hooks->any(p); };
    for (HookPoint p : {HookPoint::q, HookPoint::k, HookPoint::v, HookPoint::scores})
        if (hooked(p)) throw std::invalid_argument("MultiHeadLatentAttention: no hook point " + hook_point_name(p));
    for (HookPoint p : {HookPoint::gate, HookPoint::probs})
        if (hooks && hooks->edits(p))
            throw std::invalid_argument("MultiHeadLatentAttention: hook point " + hook_point_name(p) + " is read only");
    if (cache && cache->keep_first > 0)
        throw std::invalid_argument("MultiHeadLatentAttention: a KV cache keeping its first " +
                                    std::to_string(cache->keep_first) + " positions is not supported");

    // Every projection of x in one GEMM: q^C, the latent, and with RoPE q^R and k^R, and the gate logits.
    std::vector<const Linear*> projections{w_q.get(), w_dkv.get()};
    if (rope_) projections.insert(projections.end(), {w_qr.get(), w_kr.get()});
    if (w_g) projections.push_back(w_g.get());
    const std::vector<Tensor> projected = fused_linear(x, projections);
    const Tensor q = to_heads(projected[0], H);              // (B, H, T, dk)
    const Tensor latent = kv_norm->forward(projected[1]);    // (B, T, d_c)
    const Tensor q_rope = rope_ ? rope_->forward(to_heads(projected[2], H), past) : Tensor();  // (B, H, T, d_r)
    const Tensor k_rope = rope_ ? rope_->forward(to_heads(projected[3], 1), past) : Tensor();  // (B, 1, T, d_r)
    const Tensor gate_logits = w_g ? hook(hooks, HookPoint::gate_logits, projected.back()) : Tensor();  // (B, T, H·dk)

    // Scores over the whole query [q^C; q^R]: 1/√(dk + d_r), DeepSeek-V2's scale.
    const SdpaOptions sdpa{.causal = o.causal, .window = o.window, .scale = 1.0 / std::sqrt(double(dk + dr)),
                           .exclude_self = o.exclude_self, .score_fn = o.score_fn, .sink = sink};
    Tensor probs, lse, gate;
    const bool weights = capture || hooked(HookPoint::probs) || hooked(HookPoint::slot);
    Tensor* probs_out = weights ? &probs : nullptr;
    Tensor* lse_out = weights ? &lse : nullptr;
    const Tensor heads = absorbed || cache ? absorbed_heads(q, q_rope, latent, k_rope, cache, sdpa, probs_out, lse_out)
                               : explicit_heads(q, q_rope, latent, k_rope, sdpa, probs_out, lse_out);  // (B, H, T, dk)
    const Tensor slot = weights ? slot_weight(o.score_fn, sink, lse) : Tensor();  // (B, H, T)
    if (hooked(HookPoint::probs)) hook(hooks, HookPoint::probs, probs);
    if (slot.defined() && hooked(HookPoint::slot)) hook(hooks, HookPoint::slot, slot);
    const bool gate_seen = capture || hooked(HookPoint::gate);
    Tensor merged = w_g ? gate_and_merge_heads(o, gate_logits, heads, gate_seen ? &gate : nullptr)
                        : heads.transpose(1, 2).reshape({B, T, H * dk});  // (B, T, H·dk)
    if (gate.defined() && hooked(HookPoint::gate)) hook(hooks, HookPoint::gate, gate);
    if (hooked(HookPoint::z)) merged = hook(hooks, HookPoint::z, merged.view({B, T, H, dk})).reshape({B, T, H * dk});
    if (capture)
        *capture = {probs.detach(), lse, slot, gate.defined() ? gate.detach() : Tensor()};
    // A hook on attn_out sees the attention's output alone; otherwise W_O's GEMM adds the residual.
    if (!hooked(HookPoint::attn_out)) return w_o->forward(merged, residual);  // (B, T, d)
    const Tensor y = hook(hooks, HookPoint::attn_out, w_o->forward(merged));
    return residual.defined() ? residual + y : y;
}

// Every head's key and value made from the latent, then attention as usual.
Tensor MultiHeadLatentAttention::explicit_heads(const Tensor& q_c, const Tensor& q_rope, const Tensor& latent,
                                                const Tensor& k_rope, const SdpaOptions& sdpa, Tensor* probs,
                                                Tensor* lse) const {
    const int64_t H = options_.n_heads, dk = q_c.size(3);
    const std::vector<Tensor> kv = fused_linear(latent, {w_uk.get(), w_uv.get()});
    Tensor q = q_c, k = to_heads(kv[0], H), v = to_heads(kv[1], H);  // (B, H, T, dk)
    if (rope_) {
        const Shape rope_shape{k.size(0), H, k.size(2), k_rope.size(3)};  // (B, H, T, d_r)
        q = cat({q, q_rope}, 3);
        k = cat({k, k_rope.expand(rope_shape)}, 3);  // the one rotary key, shared by every head
        // The attention op takes keys and values of one width: v gets d_r zero columns, whose
        // outputs are dropped below.
        v = cat({v, zeros(rope_shape, v.dtype(), v.device())}, 3);
    }
    return scaled_dot_product_attention(q, k, v, sdpa, probs, lse).narrow(3, 0, dk);  // (B, H, T, dk)
}

// The absorbed form: W_UK moved onto the query, W_UV applied after the weighted sum, and
// attention run over the cached latents [c; k^R] (B, 1, T_cached, d_c + d_r).
Tensor MultiHeadLatentAttention::absorbed_heads(const Tensor& q_c, const Tensor& q_rope, const Tensor& latent,
                                                const Tensor& k_rope, KVCache* cache, const SdpaOptions& sdpa,
                                                Tensor* probs, Tensor* lse) const {
    const int64_t B = latent.size(0), T = latent.size(1), H = options_.n_heads, dk = q_c.size(3), dc = latent.size(2);
    const Tensor c = latent.view({B, 1, T, dc});  // (B, 1, T, d_c)
    Tensor keys = rope_ ? cat({c, k_rope}, 3) : c;  // (B, 1, T, d_c + d_r)
    if (cache) {
        cache->append(keys, Tensor());
        keys = cache->k;  // (B, 1, T_cached, d_c + d_r)
    }
    // q^C_i W_UK,i: (B, H, T, dk) @ (H, dk, d_c) → (B, H, T, d_c)
    const Tensor q_latent = matmul(q_c, w_uk->weight.view({H, dk, dc}));
    const Tensor q = rope_ ? cat({q_latent, q_rope}, 3) : q_latent;  // (B, H, T, d_c + d_r)
    // The keys serve as the values too: the first d_c columns of the weighted sum are Σ_j p_j c_j,
    // the rest (k^R's) are dropped.
    const Tensor summed = scaled_dot_product_attention(q, keys, keys, sdpa, probs, lse).narrow(3, 0, dc);
    // W_UV,i after the sum: (B, H, T, d_c) @ (H, d_c, dk) → (B, H, T, dk)
    return matmul(summed, w_uv->weight.view({H, dk, dc}).transpose(1, 2));
}

}  // namespace gg::nn
