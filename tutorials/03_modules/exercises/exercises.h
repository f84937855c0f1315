// Exercises of tutorial 03 (README.md, "Exercises"): write each function in exercises.cpp,
// then check them with   tools/exercise 03   until it passes.
// exercises.cpp is built without the library's own answers to them (hidden.h).
#pragma once
#include <vector>

#include "gatedgrad.h"

namespace exercises {

// 03.1 A module of your own: y = x Wᵀ + b, with W (out, in) and b (out) registered as the
// parameters "weight" and "bias" (so that nn::Linear's state_dict loads into it). Any
// initial values will do: the check loads a Linear's. x (..., in) → (..., out)
class Affine : public gg::nn::Module {
public:
    Affine(int64_t in_features, int64_t out_features);
    gg::Tensor forward(const gg::Tensor& x) const;
    gg::Tensor weight, bias;
};

// 03.2 One step of SGD with momentum, as torch.optim.SGD (and nn::SGD) take it:
//     buf = momentum · buf + g;   p -= lr · buf
// velocity holds one buffer per parameter, shaped as it; it starts empty: the first step
// fills it with copies of the gradients. Update p in place (under a NoGradGuard).
void sgd_momentum_step(const std::vector<gg::Tensor>& params, std::vector<gg::Tensor>& velocity, double lr,
                       double momentum);

// 03.3 Gradient clipping, as nn::clip_grad_norm: the L2 norm of all gradients together,
// ‖(g_1, …, g_n)‖; when it exceeds max_norm, multiply every gradient in place by
// max_norm / (norm + 1e-6). Returns the norm before clipping.
double clip_grad_norm_by_hand(const std::vector<gg::Tensor>& params, double max_norm);

}  // namespace exercises
