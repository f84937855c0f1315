#include "nn/analysis/interventions.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"

namespace gg::nn {

void force_gate(Hooks& hooks, double value, const std::vector<int64_t>& layers) {
    hooks.edit(HookPoint::gate, [value](const Tensor& gate, int64_t) {
        return full(gate.shape(), value, gate.dtype(), gate.device());
    }, layers);
}

void ablate_heads(Hooks& hooks, const std::vector<std::pair<int64_t, int64_t>>& heads, Ablation how, int64_t n_heads) {
    for (const auto& layer_head : heads) {
        const int64_t layer = layer_head.first, head = layer_head.second;  // plain names: a lambda captures them
        if (head < 0 || head >= n_heads)
            throw std::invalid_argument("ablate_heads: head " + std::to_string(layer) + "." + std::to_string(head) +
                                        " is outside [0, " + std::to_string(n_heads) + ")");
        hooks.edit(HookPoint::z, [head, how](const Tensor& z, int64_t) {  // (B, T, H, dk)
            const Tensor mine = z.narrow(2, head, 1);                      // (B, T, 1, dk)
            const Tensor value = how == Ablation::zero ? zeros_like(mine) : mean(mine, {0, 1}, true).expand(mine.shape());
            return cat({z.narrow(2, 0, head), value, z.narrow(2, head + 1, z.size(2) - head - 1)}, 2);
        }, {layer});
    }
}

Tensor massive_mask(const Tensor& h, const MassiveThreshold& threshold) {
    const Tensor size = abs(h.detach());
    std::vector<double> values = size.to_vector<double>();
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
    const double median = values[values.size() / 2];
    const double above = std::max(threshold.min_abs, threshold.ratio * median);
    return gt(size, full({}, above, size.dtype(), size.device())).to(h.dtype());
}

void clamp_massive(Hooks& hooks, Ablation how, const MassiveThreshold& threshold, const std::vector<int64_t>& layers) {
    hooks.edit(HookPoint::resid_post, [how, threshold](const Tensor& h, int64_t) {  // (B, T, d)
        const Tensor massive = massive_mask(h, threshold);
        const Tensor value = how == Ablation::zero ? zeros_like(h) : mean(h, {0}, true).expand(h.shape());
        return h * (1.0 - massive) + value * massive;
    }, layers);
}

}  // namespace gg::nn
