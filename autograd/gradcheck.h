// gradcheck.h — checks backward() against central finite differences in float64.
//
//   ∂f_i/∂x_j ≈ (f_i(x + ε e_j) − f_i(x − ε e_j)) / 2ε      (error O(ε²))
//
// Small problems compare the whole Jacobian: one backward per output element against
// one pair of forward passes per input element. Large ones compare random projections
// wᵀ J v, which a wrong backward fails just as surely.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace gg {

struct GradcheckOptions {
    double eps = 1e-6;
    double atol = 1e-6;
    double rtol = 1e-5;
    int64_t full_jacobian_limit = 4096;  // outputs × inputs up to this: the whole Jacobian
    int projections = 6;                 // otherwise this many random wᵀ J v
    uint64_t seed = 1234;
};

struct GradcheckResult {
    bool ok;
    double max_error;     // largest |analytic − numeric| seen
    std::string message;  // where it failed, with both values
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// `inputs` must be float64 tensors, on any one device; those with requires_grad are checked.
GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace gg
