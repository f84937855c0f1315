// The checks of tutorial 02's exercises: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include <algorithm>

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

TEST_CASE("02.4 engine: topological order and backward over scalars") {
    using exercises::ValuePtr;
    // d = c² + a x, c = tanh(b), b = a + x, a = x y: x feeds three values, a and c two each.
    const double x0 = 0.7, y0 = -1.3;
    const ValuePtr x = exercises::input(x0), y = exercises::input(y0);
    const ValuePtr a = x * y, b = a + x, c = exercises::tanh(b), d = c * c + a * x;
    const std::vector<exercises::Value*> values = {x.get(), y.get(), a.get(), b.get(), c.get(), d.get()};

    std::vector<exercises::Value*> order;
    {
        NoGradGuard no_grad;  // scalars only: the library's autograd has nothing to do here
        INFO("exercise 02.4 asks you to write the engine over Values: it runs with the library's autograd off");
        REQUIRE_NOTHROW(order = exercises::topological_order(d.get()));
        REQUIRE_NOTHROW(exercises::backward(d.get()));
        REQUIRE_NOTHROW(exercises::backward(d.get()));  // twice: grads are zeroed first, not added to
    }
    // Every value the root depends on, once each (the two products inside d's sum included),
    // each after its parents, and the root last.
    INFO("topological order of " << order.size() << " values");
    REQUIRE(order.size() == 8);
    REQUIRE(order.back() == d.get());
    for (size_t i = 0; i < order.size(); ++i) {
        CHECK(std::count(order.begin(), order.end(), order[i]) == 1);
        for (const ValuePtr& parent : order[i]->parents) {
            const auto at = std::find(order.begin(), order.end(), parent.get());
            CHECK(at < order.begin() + std::ptrdiff_t(i));
        }
    }
    for (exercises::Value* v : values) CHECK(std::find(order.begin(), order.end(), v) != order.end());

    // The chain rule by hand, value by value, from the root down.
    const double cv = c->data, dd_dc = 2 * cv, dd_db = dd_dc * (1 - cv * cv), dd_da = x0 + dd_db;
    const double dd_dx = a->data + dd_db + dd_da * y0, dd_dy = dd_da * x0;
    CHECK(d->grad == 1.0);
    CHECK(c->grad == doctest::Approx(dd_dc).epsilon(1e-12));
    CHECK(b->grad == doctest::Approx(dd_db).epsilon(1e-12));
    CHECK(a->grad == doctest::Approx(dd_da).epsilon(1e-12));
    CHECK(x->grad == doctest::Approx(dd_dx).epsilon(1e-12));
    CHECK(y->grad == doctest::Approx(dd_dy).epsilon(1e-12));

    // The same function through the library's engine gives the same input gradients.
    Tensor tx = scalar(x0, DType::f64), ty = scalar(y0, DType::f64);
    tx.requires_grad_();
    ty.requires_grad_();
    const Tensor ta = tx * ty, tc = gg::tanh(ta + tx);
    (tc * tc + ta * tx).backward();
    CHECK(x->grad == doctest::Approx(tx.grad().item()).epsilon(1e-12));
    CHECK(y->grad == doctest::Approx(ty.grad().item()).epsilon(1e-12));
}
