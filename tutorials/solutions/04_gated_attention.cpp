// Reference solutions of tutorial 04's exercises (tools/check-exercises builds the checks
// against them). Try the exercises before reading on.
#include <cmath>
#include <limits>

#include "tutorials/04_gated_attention/exercises/exercises.h"

namespace exercises {

namespace {
// (B, T, H·dk) → (B, H, T, dk), and back.
gg::Tensor split_heads(const gg::Tensor& x, int64_t H) { return x.view({x.size(0), x.size(1), H, -1}).transpose(1, 2); }
gg::Tensor merge_heads(const gg::Tensor& x) {
    return x.transpose(1, 2).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}
}  // namespace

gg::Tensor causal_attention(const gg::Tensor& q, const gg::Tensor& k, const gg::Tensor& v) {
    const int64_t T = q.size(2), dk = q.size(3);
    const gg::Tensor logits = gg::matmul(q, k.transpose(2, 3)) / std::sqrt(double(dk));  // (B, H, T, T)
    const gg::Tensor future = gg::triu(gg::ones({T, T}, q.dtype()), 1);                  // 1 where j > i
    const gg::Tensor masked = gg::masked_fill(logits, future, -std::numeric_limits<double>::infinity());
    return gg::matmul(gg::softmax(masked, -1), v);
}

gg::Tensor headwise_g1_forward(const gg::nn::GatedAttention& attn, const gg::Tensor& x) {
    const int64_t H = attn.options().n_heads;
    const gg::Tensor q = split_heads(attn.w_q->forward(x), H), k = split_heads(attn.w_k->forward(x), H),
                     v = split_heads(attn.w_v->forward(x), H);                  // (B, H, T, dk)
    const gg::Tensor gate = split_heads(gg::sigmoid(attn.w_g->forward(x)), H);  // (B, H, T, 1)
    return attn.w_o->forward(merge_heads(causal_attention(q, k, v) * gate));
}

gg::Tensor g2_forward(const gg::nn::GatedAttention& attn, const gg::Tensor& x) {
    const int64_t H = attn.options().n_heads;
    const gg::Tensor gate = split_heads(gg::sigmoid(attn.w_g->forward(x)), H);  // (B, H, T, 1)
    // (g q)·k = g (q·k): scaling the query scales its row of logits.
    const gg::Tensor q = split_heads(attn.w_q->forward(x), H) * gate;
    const gg::Tensor k = split_heads(attn.w_k->forward(x), H), v = split_heads(attn.w_v->forward(x), H);
    return attn.w_o->forward(merge_heads(causal_attention(q, k, v)));
}

}  // namespace exercises
