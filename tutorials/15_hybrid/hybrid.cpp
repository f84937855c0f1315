// hybrid.cpp — the models of tutorial 15, each a setting of the same LMConfig.
#include "hybrid.h"

#include <algorithm>

using namespace gg::nn;

namespace hybrid {

const std::vector<Architecture>& architectures() {
    static const std::vector<Architecture> all{
        {"full", LayerType::full_attention, false},
        {"full + G1", LayerType::full_attention, true},
        {"hybrid 3:1 + G1", LayerType::linear_attention, true},
        {"hybrid 3:1", LayerType::linear_attention, false},
    };
    return all;
}

const std::vector<Architecture>& copy_architectures() {
    static const std::vector<Architecture> all{
        {"FFN-only 3:1", LayerType::feed_forward, false},
        {"FFN-only 3:1 + G1", LayerType::feed_forward, true},
        architectures()[2],
        architectures()[3],
    };
    return all;
}

void Architecture::apply(LMConfig& model) const {
    model.attn.gate = gated ? GatePosition::sdpa_output : GatePosition::none;
    // Qwen3-Next's order: layers 3, 7, ... full, the others Gated DeltaNet of the attention's
    // heads, or the FFN alone
    model.layer_types.clear();
    if (others == LayerType::full_attention) return;
    model.layer_types = hybrid_layer_types(kRatio, model.n_layers);
    std::ranges::replace(model.layer_types, LayerType::linear_attention, others);
}

void Architecture::apply(LMConfig& model, int64_t softmax_layer) const {
    model.attn.gate = gated ? GatePosition::sdpa_output : GatePosition::none;
    model.layer_types.assign(size_t(model.n_layers), others);
    model.layer_types.at(size_t(softmax_layer)) = LayerType::full_attention;
}

std::string CopyLayout::text(const Architecture& a) const {
    std::string s = "[";
    for (int64_t l = 0; l < layers; ++l)
        s += (l ? ", " : "") + std::string(l == softmax_layer ? "full" : kLayerTypes.name(a.others));
    return s + "]";
}

}  // namespace hybrid
