// eviction.h — a trained model read through a KV cache that drops old positions, the first
// token with them or not (StreamingLLM, arXiv 2309.17453; the seed article's §1.1: a sliding
// window that loses the sink collapses). Tutorial 14 part (d) and tutorial 15 part (b) measure
// with it what losing BOS costs a model.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "common/results.h"
#include "gatedgrad.h"

namespace tutorial {

// The sequences are 4 times tutorials 06 and 07's training length of 64.
struct Eviction {
    int64_t cache = 16;      // positions each full-attention layer's KV cache holds
    int64_t length = 256;    // tokens per sequence read (BOS first)
    int64_t sequences = 8;
    // The full-attention layers whose caches drop positions (rolling_cache_loss's windowed);
    // unset: all of them.
    std::optional<std::vector<int64_t>> windowed{};
};

// The mean loss per token of `data`'s validation sequences within the cache and past it, with
// BOS dropped (keep_first 0) and kept (keep_first 1; NaN for a latent attention cache, which
// cannot keep first positions), as JSON fields loss_within_cache, loss_past_cache_first_dropped
// and loss_past_cache_first_kept. A hybrid's linear layers (Gated DeltaNet) keep their whole
// state: only its full-attention layers' caches drop positions, BOS among them (only those of
// eviction.windowed when it is set).
json eviction_losses(const gg::nn::GatedTransformerLM& model, const gg::nn::BatchSource& data, const Eviction& eviction,
                     bool latent);

}  // namespace tutorial
