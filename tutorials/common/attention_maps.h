// attention_maps.h — heat maps of one attention head on one sequence (PNG, nn/analysis/plot.h):
// where each query looks, and, for a gated model, how much of that reaches W_O.
#pragma once
#include <string>

#include "gatedgrad.h"

namespace tutorial {

// The G1 gate of every (b, h, t), averaged over the head's dk channels: (B, H, T, dk) → (B, H, T).
gg::Tensor per_query_gate(const gg::Tensor& gate);

// Runs `model` on ids (1, T) and writes head `head` of layer `layer`: `stem`.png, the attention
// probabilities (T, T) with query rows and key columns, each entry a scale × scale square;
// for a gated model also `stem`_gated.png, each query's row times its mean gate. `model_name`
// starts each picture's title ("g1 2x4" → "g1 2x4: layer 0, head 2").
void write_head_heatmaps(const std::string& stem, const std::string& model_name, const gg::nn::GatedTransformerLM& model,
                         const gg::Tensor& ids, int64_t layer, int64_t head, int scale);

}  // namespace tutorial
