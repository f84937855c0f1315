// dispatch_floating.h — the dtype switch of the kernel families that take only floating
// tensors (softmax, cross-entropy, RMSNorm, the optimisers): their ops reject int64 before a
// kernel is reached, so only float and double kernels are built.
#pragma once
#include "tensor/dtype.h"

namespace gg::cuda {

// Calls f.template operator()<T>() with T = float for f32, double otherwise.
template <class F>
void dispatch_floating(DType dtype, F&& f) {
    if (dtype == DType::f32) f.template operator()<float>();
    else f.template operator()<double>();
}

}  // namespace gg::cuda
