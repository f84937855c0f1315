// attention_maps.cpp — the heat maps of attention_maps.h.
#include "common/attention_maps.h"

namespace tutorial {

using namespace gg;
using namespace gg::nn;

Tensor per_query_gate(const Tensor& gate) { return mean(gate, {3}); }

void write_head_heatmaps(const std::string& stem, const std::string& model_name, const GatedTransformerLM& model,
                         const Tensor& ids, int64_t layer, int64_t head, int scale) {
    NoGradGuard no_grad;
    LMCapture capture;
    model.forward(ids, Tensor(), nullptr, &capture);
    const AttentionCapture& c = capture.attention[layer];
    const Tensor probs = c.probs.select(0, 0).select(0, head);  // (T, T)
    HeatmapOptions options;
    options.title = model_name + ": layer " + std::to_string(layer) + ", head " + std::to_string(head);
    write_heatmap_png(stem + ".png", probs, scale, options);
    if (c.gate.defined()) {
        options.title += ", times the gate";
        options.value_label = "attention x mean gate";
        write_heatmap_png(stem + "_gated.png", probs * per_query_gate(c.gate).select(0, 0).select(0, head).unsqueeze(1),
                          scale, options);
    }
}

}  // namespace tutorial
