// The checks of tutorial 02's exercises: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include "tutorials/02_autograd/exercises/exercises.h"

using namespace gg;

TEST_CASE("02.1 cube: an op with its own backward") {
    Generator gen(2);
    Tensor x = randn({3, 4}, gen, DType::f64);
    x.requires_grad_();
    const Tensor y = exercises::cube(x);
    CHECK(amax(abs(y.detach() - x.detach() * x.detach() * x.detach())).item() < 1e-12);
    INFO("exercise 02.1 asks you to write this op: one node named cube, with your backward");
    REQUIRE(y.grad_fn() != nullptr);
    CHECK(y.grad_fn()->name == "cube");  // one node, not a mul of muls or the library's pow
    const GradcheckResult check = gradcheck([](const std::vector<Tensor>& in) { return exercises::cube(in[0]); }, {x});
    INFO(check.message);
    CHECK(check.ok);
}

TEST_CASE("02.2 logistic_grad_by_hand") {
    Generator gen(3);
    const Tensor x = randn({5, 2}, gen, DType::f64), y = from_vector(std::vector<double>{1, 0, 0, 1, 1}, {5});
    Tensor w = randn({2}, gen, DType::f64), b = scalar(-0.2, DType::f64);
    w.requires_grad_();
    b.requires_grad_();
    const Tensor p = sigmoid(matmul(x, w) + b);
    (-(y * log(p) + (1.0 - y) * log(1.0 - p)).mean()).backward();
    exercises::LogisticGrad by_hand;
    {
        NoGradGuard no_grad;  // autograd off: the formulas work, backward() has no graph to walk
        INFO("exercise 02.2 asks you to write the gradient by the formulas: it runs with autograd off");
        REQUIRE_NOTHROW(by_hand = exercises::logistic_grad_by_hand(x, y, w.detach(), b.detach()));
    }
    REQUIRE(by_hand.dw.shape() == Shape{2});
    REQUIRE(by_hand.db.shape() == Shape{});
    CHECK(amax(abs(by_hand.dw - w.grad())).item() < 1e-12);
    CHECK(std::abs((by_hand.db - b.grad()).item()) < 1e-12);
}

TEST_CASE("02.3 numerical_gradient") {
    Generator gen(4);
    Tensor x = randn({2, 3}, gen, DType::f64);
    const Tensor before = x.clone();
    const auto f = [](const Tensor& t) { return sum(tanh(t) * t).item(); };
    const Tensor numeric = exercises::numerical_gradient(f, x);
    CHECK(amax(abs(x - before)).item() == 0);  // x is as it was
    x.requires_grad_();
    sum(tanh(x) * x).backward();
    REQUIRE(numeric.shape() == x.shape());
    CHECK(amax(abs(numeric - x.grad())).item() < 1e-8);
}
