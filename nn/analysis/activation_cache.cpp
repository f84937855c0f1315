#include "nn/analysis/activation_cache.h"

#include <cstdio>
#include <stdexcept>

namespace gg::nn {

const Tensor& ActivationCache::at(HookPoint point, int64_t layer) const {
    const auto found = entries.find({point, layer});
    if (found == entries.end())
        throw std::invalid_argument("ActivationCache: " + hook_point_name(point) + " at layer " + std::to_string(layer) +
                                    " was not kept (the model has no such point there, or the cache was not asked for it)");
    return found->second;
}

uint64_t ActivationCache::bytes() const {
    uint64_t total = 0;
    for (const auto& [key, t] : entries) total += uint64_t(t.numel()) * dtype_size(t.dtype());
    return total;
}

std::string ActivationCache::memory() const {
    char text[96];
    std::snprintf(text, sizeof text, "%zu activations, %.2f MiB (%s)", entries.size(), double(bytes()) / (1 << 20),
                  entries.empty() ? "-" : dtype_name(entries.begin()->second.dtype()));
    return text;
}

uint64_t cache_bytes(const LMConfig& c, const std::vector<HookPoint>& points, size_t layers, int64_t B, int64_t T,
                     DType dtype) {
    const double H = double(c.attn.n_heads), dk = double(c.attn.head_dim()), tokens = double(B) * double(T);
    double per_layer = 0;  // elements
    for (const HookPoint p : points) {
        switch (p) {
            case HookPoint::resid_pre: case HookPoint::resid_mid: case HookPoint::resid_post:
            case HookPoint::attn_out: case HookPoint::mlp_out: per_layer += tokens * double(c.d_model); break;
            case HookPoint::q: case HookPoint::z: case HookPoint::gate_logits: case HookPoint::gate:
                per_layer += tokens * H * dk; break;
            case HookPoint::k: case HookPoint::v: per_layer += tokens * double(c.attn.kv_heads()) * dk; break;
            case HookPoint::scores: case HookPoint::probs: per_layer += tokens * H * double(T); break;
            case HookPoint::slot: per_layer += tokens * H; break;
        }
    }
    return uint64_t(per_layer * double(layers) * double(dtype_size(dtype)));
}

ActivationCache run_with_cache(const GatedTransformerLM& model, const Tensor& ids, const std::vector<HookPoint>& points,
                               const std::vector<int64_t>& layers, DType dtype, const Hooks& hooks, LMOutput* output) {
    const int64_t L = int64_t(model.blocks.size());
    for (const int64_t l : layers)
        if (l < 0 || l >= L)
            throw std::invalid_argument("run_with_cache: capture layer " + std::to_string(l) + " is outside [0, " +
                                        std::to_string(L) + ")");
    if (!is_floating(dtype)) throw std::invalid_argument(std::string("run_with_cache: cannot keep ") + dtype_name(dtype));
    if (ids.dim() != 2) throw std::invalid_argument("run_with_cache: ids must be (B, T), got " + shape_str(ids.shape()));
    const uint64_t need = cache_bytes(model.config(), points, layers.empty() ? size_t(L) : layers.size(), ids.size(0),
                                      ids.size(1), dtype);
    if (need > memory_budget())
        throw std::invalid_argument("run_with_cache: keeping " + std::to_string(points.size()) + " points over " +
                                    shape_str(ids.shape()) + " tokens needs " + std::to_string(need >> 20) +
                                    " MiB, more than this process may use; ask for fewer points, layers or tokens, or "
                                    "bfloat16");
    ActivationCache cache;
    Hooks all = hooks;
    for (const HookPoint p : points)
        all.read(p, [&cache, p, dtype](const Tensor& x, int64_t layer) {
            cache.entries[{p, layer}] = x.detach().to(dtype).clone();  // a copy: later ops may reuse x's buffer
        }, layers);
    LMOutput out = model.forward(ids, Tensor(), nullptr, nullptr, &all);
    if (output) *output = out;
    return cache;
}

LMOutput run_with_hooks(const GatedTransformerLM& model, const Tensor& ids, const Hooks& hooks, const Tensor& targets) {
    return model.forward(ids, targets, nullptr, nullptr, &hooks);
}

}  // namespace gg::nn
