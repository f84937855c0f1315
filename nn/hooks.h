// hooks.h — named points inside every block where a caller may read an activation or replace it,
// as TransformerLens's HookPoints and nnsight's edits: the way to look inside a model and to run
// the paper's interventions (forcing the gates, ablating heads) without a forward of one's own.
//
// In block l, in the order a forward pass reaches them:
//   resid_pre    (B, T, d)              the block's input, the residual stream
//   q            (B, H, T, dk)          the query heads as the scores read them (after QK-norm, a
//   k, v         (B, Hkv, T, dk)        query/key/value gate and RoPE); with a KV cache, the new positions
//   gate_logits  the gate's pre-activation: (B, T, heads·width) x W_g, or G3's (B, H, T, 1) Q_i·w_i
//   gate         (B, heads, T, width)   σ(gate_logits) in the layout it multiplies in (attention.h)
//   scores       (B, H, Tq, Tk)         q·k·scale, −∞ where the mask hides a key
//   probs        (B, H, Tq, Tk)         the weights each value is multiplied by
//   slot         (B, H, Tq)             softmax1's and sink's slot weight, 1 − Σ_j probs (read only)
//   z            (B, T, H, dk)          the heads' outputs after a G1 gate: what W_O reads
//   attn_out     (B, T, d)              the attention's output, before the residual sum
//   resid_mid    (B, T, d)              resid_pre + attn_out
//   mlp_out      (B, T, d)              the FFN's (or MoE's) output
//   resid_post   (B, T, d)              the block's output
// A point the model has not (a gate in a baseline, a slot under softmax) is never called.
//
// Cost. Without hooks, forward passes a null pointer and each point is one null check. The
// fused attention computes no scores and keeps no weights, so:
//   - reading probs or slot keeps the fused kernel, which then writes the weights out (the
//     analysis path of AttentionCapture): no gradient flows through what a reader sees;
//   - reading scores, or editing scores or probs, runs attention as plain ops instead (scores,
//     weights by the score function, weights × V): O(T²) memory per head, and differentiable,
//     so an edit's gradient reaches q, k and the sink logit.
// Every other point is differentiable as it stands: an edit is an op in the graph like any other.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace gg::nn {

enum class HookPoint {
    resid_pre, q, k, v, gate_logits, gate, scores, probs, slot, z, attn_out, resid_mid, mlp_out, resid_post
};

HookPoint parse_hook_point(const std::string& name);  // the names above; throws listing them
std::string hook_point_name(HookPoint p);
const std::vector<HookPoint>& all_hook_points();

// An edit returns the activation or a tensor of its shape that replaces it; a reader only sees it.
// Both get the layer they are called at.
using EditHook = std::function<Tensor(const Tensor& activation, int64_t layer)>;
using ReadHook = std::function<void(const Tensor& activation, int64_t layer)>;

class Hooks {
public:
    // At `point` in the given layers (empty: every layer); hooks at one point run in the order added.
    Hooks& edit(HookPoint point, EditHook fn, std::vector<int64_t> layers = {});
    Hooks& read(HookPoint point, ReadHook fn, std::vector<int64_t> layers = {});

    bool any(HookPoint point, int64_t layer) const;    // any hook, reader or edit
    bool edits(HookPoint point, int64_t layer) const;  // an edit
    // x after every hook at (point, layer) has seen it; throws when an edit changes its shape,
    // or edits slot.
    Tensor run(HookPoint point, int64_t layer, const Tensor& x) const;
    // Throws naming the first hook whose layer is outside [0, n_layers).
    void check_layers(int64_t n_layers) const;

private:
    struct Entry {
        HookPoint point;
        std::vector<int64_t> layers;
        EditHook edit;  // undefined for a reader
        ReadHook read;
        bool at(HookPoint p, int64_t layer) const;
    };
    std::vector<Entry> entries_;
};

// One block's view of the hooks: what GatedAttention and TransformerBlock are given.
struct LayerHooks {
    const Hooks* hooks;  // not null
    int64_t layer;
    bool any(HookPoint p) const { return hooks->any(p, layer); }
    bool edits(HookPoint p) const { return hooks->edits(p, layer); }
    Tensor operator()(HookPoint p, const Tensor& x) const { return hooks->run(p, layer, x); }
};

// x through the hooks at p, or x itself without hooks: the one null check of a forward.
inline Tensor hook(const LayerHooks* hooks, HookPoint p, const Tensor& x) { return hooks ? (*hooks)(p, x) : x; }

}  // namespace gg::nn
