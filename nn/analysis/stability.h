// stability.h — the signals that a model is heading for trouble at a high learning rate,
// read from one forward pass without gradients (tutorial 07; Wortsman et al. 2023,
// "Small-scale proxies for large-scale Transformer training instabilities", arXiv 2309.14322).
//
// Attention-logit growth. A head's softmax exponentiates z_ij = q_i·k_j/√dk (after QK-norm
//   and RoPE). Nothing bounds z without QK-norm, and a head that needs to "do nothing" can
//   only park its weight on one key by making that key's logit ever larger (Bondarenko et al.
//   2023, arXiv 2306.12929). Once |z| is large the softmax is one-hot and its gradient vanishes.
//   We read z from what the attention kernel already returns: p_ij = exp(z_ij − lse_i), so
//   the largest logit of row i is lse_i + log max_j p_ij, exact for any row (its largest p is
//   at least 1/Tk, so it never underflows) without materialising z. That holds for the score
//   functions softmax, softmax1 and sink (their lse counts the slot); measure_stability refuses
//   sigmoid and softpick, whose weights are not e^{z − lse}.
// Attention-entropy collapse. H = −Σ_j p_ij log p_ij of each row, averaged over the queries
//   of a head; a head whose mean H falls to 0 looks at one key only. We take the smallest head.
// Output-logit divergence. log Z = log Σ_v exp(y_v) of the output softmax; the loss does not
//   care where Z sits, so it can drift far from 1 (log Z from 0), which the z-loss
//   coef·(log Z)² holds back (trainer.h).
#pragma once
#include <string>
#include <vector>

#include "nn/transformer.h"

namespace gg::nn {

struct StabilityStats {
    // Per layer (one entry for each block):
    std::vector<double> max_attn_logit;    // max over batch, heads, queries and the keys each sees
    std::vector<double> mean_attn_logit;   // each row's largest logit, averaged over batch, heads and queries
    std::vector<double> min_attn_entropy;  // the smallest head's mean row entropy (nats), queries 1 … T−1
    std::vector<double> gate_mean;         // the mean gate value; empty for a model without a gate
    // Over the whole model:
    double max_abs_hidden = 0;    // largest |h| of any block's output (massive activations)
    double max_output_logit = 0;  // largest output logit y_v
    double mean_log_z = 0;        // log Z of the output softmax, averaged over positions

    double largest_attn_logit() const;    // max over layers of max_attn_logit
    double smallest_attn_entropy() const;  // min over layers of min_attn_entropy
    std::string to_json() const;           // one JSON object with the fields above
};

// The statistics of one forward pass over ids (B, T), T ≥ 2, with the model as it is
// (train or eval mode alike: no dropout here). Cost: one forward pass that keeps every
// layer's attention probabilities (B, H, T, T).
StabilityStats measure_stability(const GatedTransformerLM& model, const Tensor& ids);

}  // namespace gg::nn
