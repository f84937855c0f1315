// Exercises of tutorial 04 (README.md, "Exercises"): write each function in exercises.cpp,
// then check them with   tools/exercise 04   until it passes.
#pragma once

#include "gatedgrad.h"

namespace exercises {

// 04.1 Causal attention from matmul and softmax (not nn::scaled_dot_product_attention):
//     softmax(Q Kᵀ / √dk + M) V,   M[i][j] = −∞ where key j comes after query i (j > i).
// q, k, v (B, H, T, dk) → (B, H, T, dk)
gg::Tensor causal_attention(const gg::Tensor& q, const gg::Tensor& k, const gg::Tensor& v);

// 04.2 A head-wise gate: G1 with one gate per head instead of one per channel,
//     head_i ← σ(x W_g,i) ⊙ head_i,  W_g: d → H  (σ(x W_g,i) a scalar per query and head).
// Write the forward of `attn`, a GatedAttention built with gate G1 and sharing headwise
// (no RoPE, no QK-norm, causal), from its weights: attn.w_q, w_k, w_v, w_o, w_g (Linear
// layers without bias) and your causal_attention: the check finds the library's attention
// (attn.forward, nn::scaled_dot_product_attention) in the graph of a result that used it.
// x (B, T, d) → (B, T, d), equal to attn.forward(x).
gg::Tensor headwise_g1_forward(const gg::nn::GatedAttention& attn, const gg::Tensor& x);

// 04.3 The G2 position: the gate scales each query's attention logits, before softmax,
//     logits_i ← (Q_i K_iᵀ / √dk) ⊙ σ(x W_g,i),  W_g: d → H,
// i.e. one gate per query and head, which is the same as scaling the query vector. Write
// the forward of `attn`, built with gate G2 (otherwise as in 04.2), from its weights.
gg::Tensor g2_forward(const gg::nn::GatedAttention& attn, const gg::Tensor& x);

}  // namespace exercises
