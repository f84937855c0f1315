// Reference solutions of tutorial 03's exercises (tools/check-exercises builds the checks
// against them). Try the exercises before reading on.
#include <cmath>

#include "tutorials/03_modules/exercises/exercises.h"

namespace exercises {

Affine::Affine(int64_t in_features, int64_t out_features) {
    weight = gg::zeros({out_features, in_features});
    bias = gg::zeros({out_features});
    register_parameter("weight", weight);
    register_parameter("bias", bias);
}

gg::Tensor Affine::forward(const gg::Tensor& x) const { return gg::matmul(x, weight.t()) + bias; }

void sgd_momentum_step(const std::vector<gg::Tensor>& params, std::vector<gg::Tensor>& velocity, double lr,
                       double momentum) {
    gg::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
        if (velocity.size() == i) velocity.push_back(params[i].grad().clone());  // buf = g at the first step
        else velocity[i].copy_(velocity[i] * momentum + params[i].grad());
        params[i].copy_(params[i] - velocity[i] * lr);
    }
}

double clip_grad_norm_by_hand(const std::vector<gg::Tensor>& params, double max_norm) {
    gg::NoGradGuard no_grad;
    double squares = 0;
    for (const gg::Tensor& p : params) squares += gg::sum(p.grad() * p.grad()).item();
    const double norm = std::sqrt(squares);
    if (norm > max_norm)
        for (const gg::Tensor& p : params) p.grad().copy_(p.grad() * (max_norm / (norm + 1e-6)));
    return norm;
}

}  // namespace exercises
