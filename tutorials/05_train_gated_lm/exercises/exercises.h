// Exercises of tutorial 05 (README.md, "Exercises"): write each function in exercises.cpp,
// then check them with   tools/exercise 05   until it passes.
// exercises.cpp is built without the library's own answers to them (hidden.h).
#pragma once
#include <cstdint>
#include <vector>

#include "gatedgrad.h"

namespace exercises {

// 05.1 The trainer's learning rate at `step` (0-based: the step about to be taken), as
// nn/optim/schedule.h writes it: a linear warmup to max_lr over `warmup` steps, then a
// cosine from max_lr down to min_lr at step `total`, and min_lr after it.
double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double max_lr, double min_lr);

// 05.2 The unigram baseline the trainer prints: the entropy, in nats per byte, of the byte
// frequencies of `bytes` (values 0-255): −Σ_b f_b log f_b. The loss of the best model that
// ignores context.
double unigram_entropy(const std::vector<int64_t>& bytes);

// 05.3 One AdamW step for one parameter, as nn::AdamW (nn/optim/optimizer.h) takes it:
//     p *= 1 − lr · weight_decay
//     m  = β1 m + (1 − β1) g          v = β2 v + (1 − β2) g²
//     p -= lr · m̂ / (√v̂ + ε),   m̂ = m / (1 − β1ᵗ),  v̂ = v / (1 − β2ᵗ)
// t counts from 1; m and v start as zeros shaped as p. Update p, m and v in place.
struct AdamWSettings {
    double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.1;
};
void adamw_step(const gg::Tensor& p, const gg::Tensor& grad, const gg::Tensor& m, const gg::Tensor& v, int64_t t,
                const AdamWSettings& s);

}  // namespace exercises
