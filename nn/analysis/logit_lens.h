// logit_lens.h — the logit lens (nostalgebraist, "interpreting GPT: the logit lens", 2020): the
// model's own final RMSNorm and unembedding applied to the residual stream after each block, as
// if the model stopped there. Where a prediction forms, its token climbs the ranks layer by layer;
// the last layer's lens is the model's output itself.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "nn/transformer.h"

namespace gg::nn {

struct LensLayer {
    int64_t layer = 0;
    std::vector<int64_t> top_ids;     // the top-k ids at the last position, most probable first
    std::vector<double> top_probs;    // their softmax probabilities
    int64_t target_rank = -1;         // the target's rank (0: the most probable); −1 without a target
    double target_prob = 0;
    Tensor logits;                    // (V) the lens's logits at the last position, float64
};

// Per layer, the lens at the last position of ids (a prompt, BOS first where the model wants one),
// for the next token: its top_k ids and the rank and probability of `target` when given. Throws
// naming the field for an empty prompt, top_k outside [1, V] or a target outside [0, V).
std::vector<LensLayer> logit_lens(const GatedTransformerLM& model, const std::vector<int64_t>& ids, int64_t top_k,
                                  std::optional<int64_t> target = std::nullopt);

}  // namespace gg::nn
