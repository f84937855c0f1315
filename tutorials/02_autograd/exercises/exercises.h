// Exercises of tutorial 02 (README.md, "Exercises"): write each function in exercises.cpp,
// then check them with   tools/exercise 02   until it passes.
#pragma once
#include <functional>

#include "gatedgrad.h"

namespace exercises {

// 02.1 x³ as one new op with its own backward, as the library writes its ops
// (autograd/elementwise.cpp): compute the value under a gg::NoGradGuard, then hang a node
// on it with gg::record("cube", value, {x}, backward), where backward maps the output's
// gradient g to {3 x² g}. The check runs gg::gradcheck on it.
gg::Tensor cube(const gg::Tensor& x);

// 02.2 The gradient of the tutorial's logistic loss by the formulas in README.md, without
// backward() (the check runs it under a NoGradGuard):
//     p = σ(x w + b),  dL/dw = xᵀ (p − y) / N,  dL/db = Σ (p − y) / N.
// x (N, 2), y (N), w (2), b () → dw (2), db ()
struct LogisticGrad {
    gg::Tensor dw, db;
};
LogisticGrad logistic_grad_by_hand(const gg::Tensor& x, const gg::Tensor& y, const gg::Tensor& w, const gg::Tensor& b);

// 02.3 The gradient of a scalar function by central differences, as gradcheck does it:
// element j of the result is (f(x + ε e_j) − f(x − ε e_j)) / 2ε. x is float64; leave it as
// you found it (perturb a clone). → a float64 tensor shaped as x
gg::Tensor numerical_gradient(const std::function<double(const gg::Tensor&)>& f, const gg::Tensor& x, double eps = 1e-6);

}  // namespace exercises
