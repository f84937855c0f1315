// remedies.cpp — the nine models of tutorial 14, each a setting of the same LMConfig
// (docs/paper.md maps each to its equation and source).
#include "remedies.h"

using namespace gg;
using namespace gg::nn;

namespace sink_remedies {

const std::vector<Remedy>& remedies() {
    using S = ScoreFunction;
    constexpr GatePosition g1 = GatePosition::sdpa_output;
    static const std::vector<Remedy> all{
        {"baseline"},
        {"G1", g1},
        {"G1 + QK-norm", g1, true},
        {"sink logit", GatePosition::none, false, S::sink},
        {"softmax1", GatePosition::none, false, S::softmax1},
        {"sigmoid", GatePosition::none, false, S::sigmoid},
        {"softpick", GatePosition::none, false, S::softpick},
        {"MLA", GatePosition::none, false, S::softmax, true},
        {"MLA + G1", g1, false, S::softmax, true},
    };
    return all;
}

void Remedy::apply(LMConfig& model) const {
    model.attn.gate = gate;
    model.attn.qk_norm = qk_norm;
    model.attn.score_fn = score_fn;
    // the latent: a quarter of the width, against the heads' 2·d numbers of keys and values
    model.attn.kv_rank = latent ? model.d_model / 4 : 0;
}

}  // namespace sink_remedies
