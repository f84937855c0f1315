// analysis.h — what the paper and its walk-through measure on a trained model (docs/paper.md).
//
// Attention sink (docs/paper.md, "The attention sink"): α_{l,h} = mean over batches and
//   queries i ≥ 1 of the attention that query i of head h in layer l gives to position 0.
//   A head is a sink head when α > threshold (Gu et al. 2024 use 0.3); a layer is a sink
//   layer when the mean of its heads' α is above it.
// The slot and the row sum. The other score functions (tensor/score_functions.h) give a head
//   other places to put its attention, and a first-token metric alone misses them: in Gu et
//   al. 2024 (arXiv 2410.10781, Table 4) a learnable key bias holds the sink of 73.34% of the
//   heads while the first token holds none. So per head, over the same queries 1 … T−1:
//     slot share  softmax1, sink: the mean weight the slot took, 1 − Σ_j w_ij (0 for the others);
//     row sum     the mean Σ_j w_ij, which sigmoid and softpick do not hold at 1 (1 for softmax).
//   A head is a sink head when α or its slot share is above the threshold; for sigmoid and
//   softpick α is read, as Gu et al. read their unnormalised attention ("proxy attention
//   scores", their code), from each row's weights divided by the row's sum: the normalised
//   share (a row of sum 0, softpick's when every score is ≤ 0, gives 0). It is α itself for
//   softmax, softmax1 and sink, whose weights and slot already sum to 1.
// Sink rate (Gu et al. 2024's sink metric Sink^ε_k): the share of (layer, head) pairs whose
//   mean weight on position k is above ε = 0.3. Sink^ε_1 here reads the normalised share, and
//   the slot's rate (their Sink^ε_* of a key bias) the slot share. Their mean takes query k
//   itself too, whose only key at k = 1 is itself; ours starts at query 1, as α does.
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
    std::vector<double> slot_share;         // per head
    std::vector<double> row_sum;            // per head
    std::vector<double> normalised_first_token_share;  // per head: α of the rows over their sums
    double mean_first_token_share = 0;      // mean of α over heads
    double mean_slot_share = 0;
    double mean_row_sum = 0;
    bool sink = false;                      // mean normalised share or mean slot share > threshold
    double entropy = 0;                     // plain attention entropy (nats)
    double gated_entropy = -1;              // H_g for G1 models, −1 otherwise
    double gate_mean = -1;                  // −1 when the layer has no gate
    double gate_below_0_1 = -1;
    double max_abs_hidden = 0;
    double max_abs_hidden_first = 0;        // at position 0 (the BOS token)
};

// A linear-attention layer of a hybrid (Gated DeltaNet) has no attention map to look for a
// sink in; what it carries is its state. Per value head: the Frobenius norm ‖S‖ of the state
// after the last token (mean over the batch) and the mean decay α = e^g over every token, the
// share of the state a token keeps (near 1: a long memory; near 0: it forgets at once).
struct LinearLayerAnalysis {
    int64_t layer = 0;
    std::vector<double> state_norm;  // per head
    std::vector<double> decay;       // per head
    double mean_state_norm = 0, mean_decay = 0;  // over heads
};

struct ModelAnalysis {
    double threshold = 0.3;
    ScoreFunction score_fn = ScoreFunction::softmax;
    std::vector<LayerAnalysis> layers;  // the full-attention layers measured
    std::vector<LinearLayerAnalysis> linear_layers;  // the linear-attention layers measured
    double mean_first_token_share = 0;  // over (full-attention) layers
    double mean_slot_share = 0;         // over layers
    double mean_row_sum = 0;            // over layers
    int64_t sink_layers = 0;            // LayerAnalysis::sink
    int64_t sink_heads = 0;             // (layer, head) pairs with normalised α or slot share > threshold
    int64_t heads = 0;                  // all (layer, head) pairs
    double first_token_sink_rate = 0;   // Sink^ε_1: share of heads with normalised α > threshold
    double slot_sink_rate = 0;          // Sink^ε_*: share of heads with slot share > threshold
    double mean_max_abs_hidden = 0;     // over layers

    std::string to_json() const;
    std::string table() const;  // the per-layer report for a terminal
};

// Per-layer statistics from one forward pass over ids (B, T) without gradients, read through
// run_with_cache (activation_cache.h). layers: which ones to measure (empty: all); the means are
// over the full-attention ones among them, and the linear-attention ones among them (a hybrid's)
// go to linear_layers. hooks: edits to make in the same pass (interventions.h), whose results it
// measures.
ModelAnalysis analyze(const GatedTransformerLM& model, const Tensor& ids, double threshold = 0.3,
                      const std::vector<int64_t>& layers = {}, const Hooks& hooks = {});

// A layer's shares per head (above), over queries 1 … T−1: probs (B, H, T, T) its weights under
// score function f, slot (B, H, T) the slot's weight or undefined (no slot).
struct HeadShares {
    Tensor first_token, slot, row_sum, normalised_first_token;  // (H) each, float64
};
HeadShares head_shares(const Tensor& probs, const Tensor& slot, ScoreFunction f);

// The entropy −Σ_j p_j log p_j of each attention row, in float64: (…, Tk) probabilities → (…).
Tensor attention_row_entropy(const Tensor& probs);
// The per-(query) mean entropy of attention rows, (…, Tk) probabilities.
double attention_entropy(const Tensor& probs);
// H_g above, in float64: probs (B, H, Tq, Tk), gate (B, H, Tq) per-query gate in [0, 1].
double gated_attention_entropy(const Tensor& probs, const Tensor& gate);

}  // namespace gg::nn
