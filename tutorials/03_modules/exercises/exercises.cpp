// Your answers to the exercises of tutorial 03: replace each `throw NotDone` with code.
#include "tutorials/03_modules/exercises/exercises.h"
#include "tutorials/exercises/not_done.h"

namespace exercises {

Affine::Affine(int64_t in_features, int64_t out_features) {
    throw NotDone("03.1 Affine");
}

gg::Tensor Affine::forward(const gg::Tensor& x) const {
    throw NotDone("03.1 Affine::forward");
}

void sgd_momentum_step(const std::vector<gg::Tensor>& params, std::vector<gg::Tensor>& velocity, double lr,
                       double momentum) {
    throw NotDone("03.2 sgd_momentum_step");
}

double clip_grad_norm_by_hand(const std::vector<gg::Tensor>& params, double max_norm) {
    throw NotDone("03.3 clip_grad_norm_by_hand");
}

}  // namespace exercises
