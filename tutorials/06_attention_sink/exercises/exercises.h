// Exercises of tutorial 06 (README.md, "Exercises"): write each function in exercises.cpp,
// then check them with   tools/exercise 06   until it passes.
// exercises.cpp is built without the library's own answers to them (hidden.h).
#pragma once
#include <vector>

#include "gatedgrad.h"

namespace exercises {

// 06.1 The first-token share and the sink heads, from a capture. Run the model once on ids
// (B, T) without gradients, with an LMCapture (model.forward(ids, {}, nullptr, &capture)):
// capture.attention[l].probs is layer l's attention, (B, H, T, T), query × key. For each
// layer and head, α is the attention the queries t ≥ 1 give to key 0, averaged over the
// batch and those queries (query 0 can only look at key 0, so it says nothing). A head is a
// sink head when its α is above threshold.
struct SinkReport {
    std::vector<std::vector<double>> alpha;  // [layer][head]
    int64_t sink_heads = 0;                  // (layer, head) pairs with α > threshold
};
SinkReport first_token_report(const gg::nn::GatedTransformerLM& model, const gg::Tensor& ids, double threshold);

// 06.2 StreamingLLM's attention mask (Xiao et al. 2023, arXiv 2309.17453). A sliding window
// lets query i see only keys i − window + 1 … i, so that memory stays bounded however long
// the text; StreamingLLM keeps the first `sinks` keys visible as well, because a model that
// parks its attention on them breaks when they leave the window. Return the (T, T) float32
// mask of what query i (row) may NOT see of key j (column): 1 where j > i (the future), or
// where i − j ≥ window and j ≥ sinks; 0 elsewhere. It goes into masked_fill(logits, mask, −∞).
// window ≥ 1, sinks ≥ 0.
gg::Tensor streaming_mask(int64_t T, int64_t window, int64_t sinks);

}  // namespace exercises
