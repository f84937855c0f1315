// attention_maps.cpp — the heat maps of attention_maps.h.
#include "common/attention_maps.h"

namespace tutorial {

using namespace gg;
using namespace gg::nn;

Tensor per_query_gate(const Tensor& gate) { return mean(gate, {3}); }

void write_head_heatmaps(const std::string& stem, const GatedTransformerLM& model, const Tensor& ids, int64_t layer,
                         int64_t head, int scale) {
    NoGradGuard no_grad;
    LMCapture capture;
    model.forward(ids, Tensor(), nullptr, &capture);
    const AttentionCapture& c = capture.attention[layer];
    const Tensor probs = c.probs.select(0, 0).select(0, head);  // (T, T)
    write_heatmap_png(stem + ".png", probs, scale);
    if (c.gate.defined())
        write_heatmap_png(stem + "_gated.png", probs * per_query_gate(c.gate).select(0, 0).select(0, head).unsqueeze(1),
                          scale);
}

}  // namespace tutorial
