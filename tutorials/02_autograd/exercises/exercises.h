// Exercises of tutorial 02 (README.md, "Exercises"): write each function in exercises.cpp,
// then check them with   tools/exercise 02   until it passes.
#pragma once
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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

// 02.4 The engine itself, on scalars (micrograd's engine.py, in C++). A Value is one number
// of a graph: the ops below (given) compute it from its parents and install its backward
// step, which adds its share of the gradient into its parents' grad (chain rule, +=, since a
// value may feed several others). Write the two functions that make backward() work:
//   topological_order(root): every value the root depends on, the root included, each once,
//     each after all of its parents (a depth-first walk that appends a value after its
//     parents, remembering which it has visited);
//   backward(root): zero every grad, set root's grad to 1, then call backward_step of each
//     value in the reverse of that order, so that a value's grad is complete before it is
//     passed on. No tensors here: the check runs it with the library's autograd off.
struct Value;
using ValuePtr = std::shared_ptr<Value>;
struct Value {
    double data = 0;
    double grad = 0;
    std::string op;                        // "" for an input, else "+", "*" or "tanh"
    std::vector<ValuePtr> parents;         // what this value was computed from
    std::function<void()> backward_step;   // adds this->grad × ∂this/∂parent to each parent's grad
};
// The ops, given: each builds its output and installs the local chain rule. The backward
// steps hold plain pointers to their own value, so that a value does not own itself.
inline ValuePtr input(double data) { return std::make_shared<Value>(Value{data, 0, "", {}, [] {}}); }
inline ValuePtr operator+(const ValuePtr& a, const ValuePtr& b) {
    auto out = std::make_shared<Value>(Value{a->data + b->data, 0, "+", {a, b}, {}});
    out->backward_step = [o = out.get(), a = a.get(), b = b.get()] {  // ∂(a + b)/∂a = ∂(a + b)/∂b = 1
        a->grad += o->grad;
        b->grad += o->grad;
    };
    return out;
}
inline ValuePtr operator*(const ValuePtr& a, const ValuePtr& b) {
    auto out = std::make_shared<Value>(Value{a->data * b->data, 0, "*", {a, b}, {}});
    out->backward_step = [o = out.get(), a = a.get(), b = b.get()] {  // ∂(ab)/∂a = b, ∂(ab)/∂b = a
        a->grad += b->data * o->grad;
        b->grad += a->data * o->grad;
    };
    return out;
}
inline ValuePtr tanh(const ValuePtr& a) {
    auto out = std::make_shared<Value>(Value{std::tanh(a->data), 0, "tanh", {a}, {}});
    out->backward_step = [o = out.get(), a = a.get()] { a->grad += (1 - o->data * o->data) * o->grad; };
    return out;
}
std::vector<Value*> topological_order(Value* root);
void backward(Value* root);

}  // namespace exercises
