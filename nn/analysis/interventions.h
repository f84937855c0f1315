// interventions.h — the paper's and its neighbours' causal tests of the attention sink, each a
// set of edits at the hook points of nn/hooks.h (apps/ablate.cpp runs them on a text):
//   force_gate      every gate value set to v in the chosen layers. v = 1 opens the gate: the
//                   paper's gated model run as if ungated (docs/paper.md), which shows how much it
//                   leans on the gate's sparsity.
//   ablate_heads    heads' outputs z (before W_O) replaced by 0, or by their mean over the batch
//                   and positions (mean ablation: the head's typical output, not an unseen 0).
//   clamp_massive   Sun et al. 2024 (arXiv 2402.17762, Section 3): the few residual-stream values
//                   far larger than the rest ("massive activations": |h| > 100 and about 1000
//                   times the median |h|) set to 0, which they find ruins the model, or to their
//                   mean over the batch at the same position and channel, which they find does not.
// Removing or replacing the first token changes the input, not an activation: the caller does it.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "nn/hooks.h"

namespace gg::nn {

// Each gate value of `layers` (empty: all) set to `value`.
void force_gate(Hooks& hooks, double value, const std::vector<int64_t>& layers = {});

enum class Ablation { zero, mean };

// The heads (layer, head) given: their z set to 0, or to its mean over the batch and positions.
// Throws naming a head outside [0, n_heads).
void ablate_heads(Hooks& hooks, const std::vector<std::pair<int64_t, int64_t>>& heads, Ablation how, int64_t n_heads);

// Which residual values count as massive: |h| > min_abs and |h| > ratio × the median |h| of the
// layer's output over the batch (Sun et al.'s 100 and about 1000 by default).
struct MassiveThreshold {
    double min_abs = 100;
    double ratio = 1000;
};

// The massive values of resid_post in `layers` (empty: all) set to 0 (Ablation::zero) or to the
// mean over the batch of resid_post at their position and channel (Ablation::mean).
void clamp_massive(Hooks& hooks, Ablation how, const MassiveThreshold& threshold = {},
                   const std::vector<int64_t>& layers = {});

// Where h (B, T, d) is massive under the threshold: (B, T, d), 1 there and 0 elsewhere.
Tensor massive_mask(const Tensor& h, const MassiveThreshold& threshold);

}  // namespace gg::nn
