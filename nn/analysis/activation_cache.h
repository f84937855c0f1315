// activation_cache.h — TransformerLens's run_with_cache and run_with_hooks over the hook points
// of nn/hooks.h: one forward pass that keeps the activations asked for, and one that runs
// hooks which may edit them (the interventions of apps/ablate.cpp).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nn/hooks.h"
#include "nn/transformer.h"

namespace gg::nn {

// What a run_with_cache pass kept: (point, layer) → the activation, detached, in the dtype asked for.
struct ActivationCache {
    std::map<std::pair<HookPoint, int64_t>, Tensor> entries;

    bool has(HookPoint point, int64_t layer) const { return entries.contains({point, layer}); }
    const Tensor& at(HookPoint point, int64_t layer) const;  // throws naming what was not kept
    uint64_t bytes() const;                                   // what the kept tensors take
    std::string memory() const;  // "N activations, X MiB (dtype)", for a program to print
};

// The bytes run_with_cache will keep for ids (B, T) of `model` (the gate and its logits counted
// at their largest layout, H·dk per token).
uint64_t cache_bytes(const LMConfig& config, const std::vector<HookPoint>& points, size_t layers, int64_t B, int64_t T,
                     DType dtype);

// One forward pass of ids (B, T) that keeps `points` at `layers` (empty: all) in `dtype`
// (bfloat16 halves float32's memory; float64 for checks). Throws before the pass when the
// cache would not fit in memory_budget(), naming its size. The pass records a graph as any
// forward does (wrap it in NoGradGuard for none). hooks: edits (and readers) to run in the same
// pass, before the cache reads a point, so the cache sees their results. output: the pass's logits.
ActivationCache run_with_cache(const GatedTransformerLM& model, const Tensor& ids, const std::vector<HookPoint>& points,
                               const std::vector<int64_t>& layers = {}, DType dtype = DType::f32,
                               const Hooks& hooks = {}, LMOutput* output = nullptr);

// The forward pass with hooks: model.forward(ids, targets) with every hook at its points.
LMOutput run_with_hooks(const GatedTransformerLM& model, const Tensor& ids, const Hooks& hooks,
                        const Tensor& targets = Tensor());

}  // namespace gg::nn
