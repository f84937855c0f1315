// analysis.h — what the paper and its walk-through measure on a trained model (docs/paper.md).
//
// Attention sink (docs/paper.md, "The attention sink"): α_{l,h} = mean over batches and
//   queries i ≥ 1 of the attention that query i of head h in layer l gives to position 0.
//   A head is a sink head when α > threshold (Gu et al. 2024 use 0.3); a layer is a sink
//   layer when the mean of its heads' α is above it.
// Attention entropy: H = −Σ_j a_j log a_j per query row, averaged.
//   Gated entropy (the walk-through's "effective attention entropy", docs/paper.md): its
//   code renormalises g ⊙ a over keys, which for a gate that is one number per query (G1
//   reads only the query's token) gives back H exactly. We take the reading its text
//   describes instead: the gate keeps mass g on the keys and sends 1 − g nowhere, so the
//   effective distribution is (g a_1, …, g a_T, 1 − g) and
//   H_g = −Σ_j g a_j log(g a_j) − (1 − g) log(1 − g), with g the mean gate of the head at
//   that query. It falls towards 0 as the gate closes.
// Gate statistics: mean gate and the share of gate values below 0.1 (sparsity).
// Massive activations: max |h| of each block's output, overall and at position 0.
#pragma once
#include <string>
#include <vector>

#include "nn/transformer.h"

namespace gg::nn {

struct LayerAnalysis {
    int64_t layer = 0;                      // its index in the model
    std::vector<double> first_token_share;  // α per head
    double mean_first_token_share = 0;      // mean of α over heads
    double entropy = 0;                     // plain attention entropy (nats)
    double gated_entropy = -1;              // H_g for G1 models, −1 otherwise
    double gate_mean = -1;                  // −1 when the layer has no gate
    double gate_below_0_1 = -1;
    double max_abs_hidden = 0;
    double max_abs_hidden_first = 0;        // at position 0 (the BOS token)
};

struct ModelAnalysis {
    double threshold = 0.3;
    std::vector<LayerAnalysis> layers;
    double mean_first_token_share = 0;  // over layers
    int64_t sink_layers = 0;            // layers with mean α > threshold
    int64_t sink_heads = 0;             // (layer, head) pairs with α > threshold
    int64_t heads = 0;                  // all (layer, head) pairs
    double mean_max_abs_hidden = 0;     // over layers

    std::string to_json() const;
    std::string table() const;  // the per-layer report for a terminal
};

// Per-layer statistics from one forward pass over ids (B, T) without gradients.
// layers: which ones to measure (empty: all); the means are over those.
ModelAnalysis analyze(const GatedTransformerLM& model, const Tensor& ids, double threshold = 0.3,
                      const std::vector<int64_t>& layers = {});

// The entropy −Σ_j p_j log p_j of each attention row: (…, Tk) probabilities → (…).
Tensor attention_row_entropy(const Tensor& probs);
// The per-(query) mean entropy of attention rows, (…, Tk) probabilities.
double attention_entropy(const Tensor& probs);
// H_g above: probs (B, H, Tq, Tk), gate (B, H, Tq) per-query gate in [0, 1].
double gated_attention_entropy(const Tensor& probs, const Tensor& gate);

}  // namespace gg::nn
