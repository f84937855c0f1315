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

}  // namespace exercises
