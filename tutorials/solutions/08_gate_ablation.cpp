// Reference solutions of tutorial 08's exercises (tools/check-exercises builds the checks
// against them). Try the exercises before reading on.
#include "tutorials/08_gate_ablation/exercises/exercises.h"

namespace exercises {

namespace {
// x log x, with 0 log 0 = 0 (its limit): the masked keys of a causal row have probability 0.
gg::Tensor xlogx(const gg::Tensor& x) {
    const gg::Tensor positive = gg::gt(x, gg::zeros_like(x));
    return gg::where(positive, x * gg::log(gg::where(positive, x, gg::ones_like(x))), gg::zeros_like(x));
}
}  // namespace

double gated_entropy(const gg::Tensor& probs, const gg::Tensor& gate) {
    const gg::Tensor g = gate.unsqueeze(-1);                    // (B, H, Tq, 1)
    const gg::Tensor kept = -gg::sum(xlogx(g * probs), {-1});   // (B, H, Tq): the mass on the keys
    const gg::Tensor dropped = -xlogx(1.0 - gate);              // (B, H, Tq): the mass sent nowhere
    return gg::mean(kept + dropped).item();
}

}  // namespace exercises
