// Your answers to the exercises of tutorial 04: replace each `throw NotDone` with code.
#include "tutorials/04_gated_attention/exercises/exercises.h"
#include "tutorials/exercises/not_done.h"

namespace exercises {

gg::Tensor causal_attention(const gg::Tensor& q, const gg::Tensor& k, const gg::Tensor& v) {
    throw NotDone("04.1 causal_attention");
}

gg::Tensor headwise_g1_forward(const gg::nn::GatedAttention& attn, const gg::Tensor& x) {
    throw NotDone("04.2 headwise_g1_forward");
}

gg::Tensor g2_forward(const gg::nn::GatedAttention& attn, const gg::Tensor& x) {
    throw NotDone("04.3 g2_forward");
}

}  // namespace exercises
