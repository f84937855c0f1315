// gated_deltanet.h — Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, arXiv 2412.06464), the
// linear attention of Qwen3-Next and Qwen3.5, where it fills three layers in four.
//
// Notation: x (B, T, d); Hk key heads of size dk, Hv value heads of size dv, Hv a multiple of
// Hk (each key head serves r = Hv/Hk value heads, as GQA's kv heads serve query heads); K the
// convolution's kernel, C the chunk size. Per value head, a state matrix S (dk, dv):
//
//   q, k, v = SiLU(conv_K(x W_q ‖ x W_k ‖ x W_v))   a causal depthwise convolution over time
//   q ← q / (‖q‖ √dk),  k ← k / ‖k‖                  L2 norms, ε = 10⁻⁶ under the root
//   β = σ(x W_β),  g = −e^{A_log} · softplus(x W_α + dt_bias),  α = e^g ∈ (0, 1]
//   S_t = α_t S_{t−1} + k_t (β_t (v_t − α_t S_{t−1}ᵀ k_t))ᵀ     the gated delta rule
//   o_t = S_tᵀ q_t
//   y = (RMSNorm(o) ⊙ SiLU(x W_z)) W_o                 the norm per value head, then heads merge
//
// The paper writes the state the other way round, (dv, dk): S_t = S_{t−1} α_t (I − β_t k_t k_tᵀ)
// + β_t v_t k_tᵀ and o_t = S_t q_t. Read it as memory: the state decays by α_t, then the value it
// returns for k_t, α_t S_{t−1}ᵀ k_t, moves a fraction β_t of the way to v_t (the delta rule,
// a step of gradient descent on ½‖Sᵀk − v‖²). Softmax attention keeps every key; this keeps a
// dk × dv matrix per head, so a token costs O(dk·dv) however long the sequence.
//
// Two forms compute the same o (tests/test_gated_deltanet.cpp):
//   recurrent  the equations above, token by token: O(T·dk·dv) work in T dependent steps of
//              vector work. Decoding runs it, one token at a time, with DeltaNetCache.
//   chunked    the sequence cut into chunks of C tokens (paper §3.3, the WY/UT form). Inside a
//              chunk, the values the tokens write are one triangular solve, U = (I + A)⁻¹(βV −
//              ...), and the outputs are a masked C × C attention plus the state's share; only
//              the state passes from chunk to chunk. O(T·(C·(dk + dv) + C² + dk·dv)) work a
//              head: the recurrent form's T·dk·dv, a causal attention within each chunk
//              (T·C·(dk + dv)) and the inverse (C³/3 a chunk, T·C²/3), almost all of it in
//              batched matmuls of C-row blocks, with T/C dependent steps instead of T.
//              Training and prompts run it.
// Backward differentiates through the composed ops of either form (autograd). All of them are
// ops the CUDA backend has too, but the layer is tested on the CPU only so far.
//
// The weights of a Hugging Face checkpoint map onto this module as follows (r = Hv/Hk):
//   Qwen3.5      linear_attn.in_proj_qkv   rows [0, Hk·dk) → w_q, [Hk·dk, 2Hk·dk) → w_k, the
//                                          remaining Hv·dv → w_v
//                linear_attn.in_proj_z → w_z,  in_proj_b → w_beta,  in_proj_a → w_alpha
//   Qwen3-Next   linear_attn.in_proj_qkvz  Hk groups of rows, group i: [q_i (dk) | k_i (dk) |
//                                          v of value heads i·r … i·r + r − 1 (r·dv) | their z (r·dv)]
//                linear_attn.in_proj_ba    Hk groups of 2r rows, group i: [b of those r heads | a of them]
//   both         linear_attn.conv1d.weight (Hk·dk·2 + Hv·dv, 1, K) → conv_weight (…, K), channels
//                                          in the order q ‖ k ‖ v
//                linear_attn.dt_bias → dt_bias,  A_log → A_log  (Hv each)
//                linear_attn.norm.weight → norm.weight  (dv; a plain weight, not 1 + weight)
//                linear_attn.out_proj → w_o
// (tests/reference/gated_deltanet.py writes both layouts; the test reads both through this map.)
#pragma once
#include <memory>
#include <utility>

#include "nn/layers.h"

namespace gg::nn {

enum class DeltaRuleForm { chunked, recurrent };

struct GatedDeltaNetOptions {
    int64_t d_model = 64;
    int64_t n_k_heads = 4;     // Hk, linear_num_key_heads
    int64_t n_v_heads = 0;     // Hv, linear_num_value_heads; 0: Hk. Else a multiple of Hk
    int64_t head_k_dim = 0;    // dk, linear_key_head_dim; 0: d_model / Hk
    int64_t head_v_dim = 0;    // dv, linear_value_head_dim; 0: dk
    int64_t conv_kernel = 4;   // K, linear_conv_kernel_dim
    int64_t chunk_size = 64;   // C, a power of two; a shorter sequence uses the next power of two ≥ T
    double norm_eps = 1e-6;    // of the output's RMSNorm (rms_norm_eps)
    DeltaRuleForm form = DeltaRuleForm::chunked;  // for several tokens at once; one token is one step

    int64_t v_heads() const { return n_v_heads > 0 ? n_v_heads : n_k_heads; }
    int64_t k_dim() const { return head_k_dim > 0 ? head_k_dim : d_model / n_k_heads; }
    int64_t v_dim() const { return head_v_dim > 0 ? head_v_dim : k_dim(); }
    int64_t conv_channels() const { return 2 * n_k_heads * k_dim() + v_heads() * v_dim(); }
};

// The gated delta rule over a sequence, per head: q, k (B, H, T, dk), q already normalised and
// scaled, v (B, H, T, dv), g and beta (B, H, T), g ≤ 0 the log of the decay α; S0 (B, H, dk, dv),
// or undefined for zeros. Returns o (B, H, T, dv) and the state after the last token,
// (B, H, dk, dv). Differentiable in every input, S0 included.
std::pair<Tensor, Tensor> gated_delta_rule_recurrent(const Tensor& q, const Tensor& k, const Tensor& v,
                                                     const Tensor& g, const Tensor& beta, const Tensor& S0 = Tensor());
// The same by chunks of chunk_size tokens (a power of two). Equal to the recurrent form up to
// rounding.
std::pair<Tensor, Tensor> gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v,
                                                   const Tensor& g, const Tensor& beta, const Tensor& S0 = Tensor(),
                                                   int64_t chunk_size = 64);

// What a layer carries from one call to the next while decoding: the inputs its convolution
// still needs and the state matrices. Holds no gradient. Hugging Face's cache keeps the last
// K inputs of the convolution, of which the oldest is never read again; this keeps K − 1.
struct DeltaNetCache {
    Tensor conv;   // (B, K − 1, channels) the last K − 1 inputs of the convolution (q ‖ k ‖ v)
    Tensor state;  // (B, Hv, dk, dv) S after the last token
    int64_t seen() const { return seen_; }  // tokens consumed so far

private:
    friend class GatedDeltaNet;
    int64_t seen_ = 0;
};

// What one forward pass of the layer computed, for analysis (the sink command's report on a
// hybrid's linear layers): owned by the caller, filled in by forward(), no gradient.
struct DeltaNetCapture {
    Tensor decay;  // (B, T, Hv) α_t = e^{g_t}, the share of the state each token keeps
    Tensor state;  // (B, Hv, dk, dv) S after the last token
};

class GatedDeltaNet : public Module {
public:
    explicit GatedDeltaNet(const GatedDeltaNetOptions& options);
    // x (B, T, d) → (B, T, d). With a cache, x holds only the new tokens and the cache moves on
    // past them (a prompt of any length, then tokens one at a time). With a residual (B, T, d),
    // returns residual + the output (W_o's GEMM adds it). With capture, the decays and the last
    // state are kept in it.
    Tensor forward(const Tensor& x, DeltaNetCache* cache = nullptr, const Tensor& residual = Tensor(),
                   DeltaNetCapture* capture = nullptr) const;

    const GatedDeltaNetOptions& options() const { return options_; }

    std::shared_ptr<Linear> w_q, w_k, w_v, w_z, w_beta, w_alpha, w_o;
    Tensor conv_weight;  // (channels, K): channel c's output at t is Σ_j w[c, j] · input[c, t − K + 1 + j]
    Tensor dt_bias;      // (Hv)
    Tensor A_log;        // (Hv) the log of the decay rate A > 0
    std::shared_ptr<RMSNorm> norm;  // over dv, shared by the value heads

private:
    GatedDeltaNetOptions options_;
};

}  // namespace gg::nn
