// Tutorial 02 — autograd: record an expression, backpropagate, check the gradient.
//
// Build and run from the repository root:
//   tools/build tutorial_02_autograd && ./build/tutorials/tutorial_02_autograd
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "gatedgrad.h"

// A tensor's values to 6 decimals, "(a, b, c)" (a scalar: just its value): enough digits to
// check the hand calculation in README.md, which the tensor printout's 4 do not give.
std::string six_digits(const gg::Tensor& t) {
    const std::vector<double> values = t.to_vector<double>();
    std::string text;
    char number[32];
    for (double v : values) {
        std::snprintf(number, sizeof number, "%.6f", v);
        text += (text.empty() ? "" : ", ") + std::string(number);
    }
    return t.dim() == 0 ? text : "(" + text + ")";
}

// A one-neuron logistic regression and its binary cross-entropy on N points:
//   p_i = σ(x_i · w + b),   L = −(1/N) Σ_i [ y_i log p_i + (1 − y_i) log(1 − p_i) ]
// x (N, 2), y (N), w (2), b () → L ()
gg::Tensor logistic_loss(const gg::Tensor& x, const gg::Tensor& y, const gg::Tensor& w, const gg::Tensor& b) {
    const gg::Tensor p = gg::sigmoid(gg::matmul(x, w) + b);  // (N)
    return -(y * gg::log(p) + (1.0 - y) * gg::log(1.0 - p)).mean();
}

int main() {
    // Three points and their labels, in float64 so that finite differences are accurate.
    const gg::Tensor x = gg::from_vector(std::vector<double>{1.0, 2.0, -1.0, 0.5, 0.5, -1.5}, {3, 2});
    const gg::Tensor y = gg::from_vector(std::vector<double>{1, 0, 1}, {3});
    // requires_grad marks the parameters: every op that uses them records itself.
    gg::Tensor w = gg::from_vector(std::vector<double>{0.5, -0.3}, {2});
    gg::Tensor b = gg::scalar(0.1, gg::DType::f64);
    w.requires_grad_();
    b.requires_grad_();

    // 1. Forward: each op computes its value and hangs a Node on it (its inputs and a
    //    closure that turns the output's gradient into the inputs' gradients).
    const gg::Tensor loss = logistic_loss(x, y, w, b);
    std::cout << "loss = " << loss << "\n";
    std::cout << "the last op that made it: " << loss.grad_fn()->name << "\n\n";

    // 2. Backward: one sweep from the loss back to the leaves fills w.grad() and b.grad().
    loss.backward();
    std::cout << "backward: dL/dw = " << w.grad() << "\n";
    std::cout << "backward: dL/db = " << b.grad() << "\n\n";

    // 3. The same gradient by hand (README): dL/dw = xᵀ (p − y) / N and dL/db = Σ (p − y) / N,
    //    with every intermediate printed to 6 digits, to check the README's arithmetic.
    const gg::Tensor z = (gg::matmul(x, w) + b).detach();
    const gg::Tensor p = gg::sigmoid(z);
    const gg::Tensor dw = gg::matmul(p - y, x) / 3.0, db = (p - y).sum() / 3.0;
    const double by_hand_error = std::max(gg::amax(gg::abs(dw - w.grad())).item(), std::abs((db - b.grad()).item()));
    std::printf("by hand:  z = x w + b             = %s\n", six_digits(z).c_str());
    std::printf("          p = sigmoid(z)          = %s\n", six_digits(p).c_str());
    std::printf("          p - y                   = %s\n", six_digits(p - y).c_str());
    std::printf("          dL/dw = x^T (p - y) / 3 = %s\n", six_digits(dw).c_str());
    std::printf("          dL/db = sum(p - y) / 3  = %s\n", six_digits(db).c_str());
    std::printf("backward() to 6 digits:    dL/dw = %s, dL/db = %s\n", six_digits(w.grad()).c_str(),
                six_digits(b.grad()).c_str());
    std::printf("max |backward - by hand| = %.1e\n\n", by_hand_error);

    // 4. gradcheck compares backward() with central differences (f(x+ε) − f(x−ε)) / 2ε.
    const gg::GradcheckResult check = gg::gradcheck(
        [&](const std::vector<gg::Tensor>& in) { return logistic_loss(x, y, in[0], in[1]); }, {w, b});
    std::printf("gradcheck: %s, max |backward - finite differences| = %.1e\n\n",
                check.ok ? "ok" : check.message.c_str(), check.max_error);

    // 5. NoGradGuard: while it lives nothing is recorded. Parameter updates and evaluation
    //    run under it, so that they do not grow the graph.
    {
        gg::NoGradGuard no_grad;
        const gg::Tensor w_next = w - 0.5 * w.grad(), b_next = b - 0.5 * b.grad();  // one gradient-descent step
        const gg::Tensor loss_next = logistic_loss(x, y, w_next, b_next);
        std::cout << "under NoGradGuard: w_next = " << w_next << "\n";
        std::printf("w_next.requires_grad() = %s; the step lowers the loss from %.6f to %.6f\n",
                    w_next.requires_grad() ? "true" : "false", loss.item(), loss_next.item());
    }
    std::printf("outside it again: (w * 2).requires_grad() = %s\n", (w * 2.0).requires_grad() ? "true" : "false");

    return by_hand_error < 1e-12 && check.ok ? 0 : 1;
}
