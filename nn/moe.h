// moe.h — a mixture of SwiGLU experts with top-k routing (the paper's 15B-A2B models
// are such mixtures: docs/paper.md).
//
// For each token x: router probabilities p = softmax(x W_r) over E experts; keep the top
// k, renormalise them to weights w (Σ w = 1); y = Σ_{e in top-k} w_e · expert_e(x).
// Only the chosen experts run, each on the tokens routed to it.
// Load balancing (Switch Transformer, Fedus et al. 2021): aux = E · Σ_e f_e · P_e, where
// f_e is the share of routing slots that went to e (a count, no gradient) and P_e the
// mean router probability of e; it is smallest when both are uniform.
#pragma once
#include "nn/layers.h"

namespace gg::nn {

class MoE : public Module {
public:
    MoE(int64_t dim, int64_t n_experts, int64_t top_k, int64_t hidden);
    // (..., dim) → (..., dim). With aux_loss, also the load-balancing loss of this forward
    // (a scalar), for the caller to add to its loss.
    Tensor forward(const Tensor& x, Tensor* aux_loss = nullptr) const;
    std::shared_ptr<Linear> router;
    std::vector<std::shared_ptr<SwiGLU>> experts;
    int64_t top_k;
};

}  // namespace gg::nn
