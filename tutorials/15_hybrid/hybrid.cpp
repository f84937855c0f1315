// hybrid.cpp — the models of tutorial 15, each a setting of the same LMConfig.
#include "hybrid.h"

using namespace gg::nn;

namespace hybrid {

const std::vector<Architecture>& architectures() {
    static const std::vector<Architecture> all{
        {"full", false, false},
        {"full + G1", false, true},
        {"hybrid 3:1 + G1", true, true},
        {"hybrid 3:1", true, false},
    };
    return all;
}

void Architecture::apply(LMConfig& model) const {
    model.attn.gate = gated ? GatePosition::sdpa_output : GatePosition::none;
    // Qwen3-Next's order: layers 3, 7, ... full, the rest Gated DeltaNet of the attention's heads
    model.layer_types = hybrid ? hybrid_layer_types(kRatio, model.n_layers) : std::vector<LayerType>{};
}

}  // namespace hybrid
