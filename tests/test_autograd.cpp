// test_autograd.cpp — the graph and backward(): hand-worked gradients, accumulation,
// retain_graph, grad mode, views, broadcasting and deep graphs.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gatedgrad.h"
#include "tests/check.h"

using gg::DType;
using gg::Shape;
using gg::Tensor;

// Autograd tests work in float64 on hand-sized values: compare tightly.
std::string mismatch(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
    return gg::testing::mismatch(t, expected, tol);
}

namespace {

// A float64 leaf that requires grad.
Tensor leaf(const std::vector<double>& values, const Shape& shape) {
    return gg::from_vector(values, shape).requires_grad_();
}

}  // namespace

TEST_CASE("autograd: gradients of small expressions, by hand") {
    const Tensor a = leaf({1, 2, 3}, {3}), b = leaf({4, 5, 6}, {3});
    SUBCASE("(a*b + a).sum()") {
        const Tensor y = (a * b + a).sum();
        CHECK(y.item() == 4 + 10 + 18 + 6);
        CHECK(y.requires_grad());
        CHECK_FALSE(y.is_leaf());
        y.backward();
        CHECK(mismatch(a.grad(), {5, 6, 7}) == "");  // b + 1
        CHECK(mismatch(b.grad(), {1, 2, 3}) == "");  // a
    }
    SUBCASE("(a / b - b).mean()") {
        (a / b - b).mean().backward();
        CHECK(mismatch(a.grad(), {1 / 12.0, 1 / 15.0, 1 / 18.0}) == "");      // 1 / (3b)
        CHECK(mismatch(b.grad(), {(-1 / 16.0 - 1) / 3, (-2 / 25.0 - 1) / 3, (-3 / 36.0 - 1) / 3}) == "");  // (−a/b² − 1)/3
    }
    SUBCASE("exp, log, tanh and pow chained") {
        // y = Σ log(a²) + tanh(b)·exp(a):  dy/da = 2/a + tanh(b) e^a,  dy/db = (1 − tanh²b) e^a
        (gg::log(a.pow(2)) + gg::tanh(b) * gg::exp(a)).sum().backward();
        std::vector<double> ga, gb;
        for (int i = 0; i < 3; ++i) {
            const double av = i + 1, bv = i + 4;
            ga.push_back(2 / av + std::tanh(bv) * std::exp(av));
            gb.push_back((1 - std::tanh(bv) * std::tanh(bv)) * std::exp(av));
        }
        CHECK(mismatch(a.grad(), ga) == "");
        CHECK(mismatch(b.grad(), gb) == "");
    }
    SUBCASE("matmul") {
        // y = Σ (A B): dA = 1 Bᵀ (row sums of B), dB = Aᵀ 1 (column sums of A)
        const Tensor A = leaf({1, 2, 3, 4, 5, 6}, {2, 3}), B = leaf({1, 0, -1, 2, 3, 1}, {3, 2});
        gg::matmul(A, B).sum().backward();
        CHECK(mismatch(A.grad(), {1, 1, 4, 1, 1, 4}) == "");
        CHECK(mismatch(B.grad(), {5, 5, 7, 7, 9, 9}) == "");
    }
    // Intermediate tensors get no .grad: only leaves accumulate.
    const Tensor mid = a * 2.0;
    (mid * mid).sum().backward();
    CHECK_FALSE(mid.grad().defined());
}

TEST_CASE("autograd: gradients accumulate across backward calls until zero_grad") {
    const Tensor x = leaf({1, -2}, {2});
    (x * 3.0).sum().backward();
    CHECK(mismatch(x.grad(), {3, 3}) == "");
    (x * x).sum().backward();  // a second graph adds 2x
    CHECK(mismatch(x.grad(), {5, -1}) == "");
    x.zero_grad();
    CHECK_FALSE(x.grad().defined());
    (x * 3.0).sum().backward();
    CHECK(mismatch(x.grad(), {3, 3}) == "");
}

TEST_CASE("autograd: a tensor used more than once sums its gradients") {
    const Tensor x = leaf({0.5, -1.5, 2}, {3});
    (x * x).sum().backward();
    CHECK(mismatch(x.grad(), {1, -3, 4}) == "");
    x.zero_grad();
    // Two branches that meet again: y = Σ (e^x + 3x) · x
    const Tensor branch = gg::exp(x) + x * 3.0;
    (branch * x).sum().backward();
    std::vector<double> expected;
    for (double v : {0.5, -1.5, 2.0}) expected.push_back(std::exp(v) * (1 + v) + 6 * v);
    CHECK(mismatch(x.grad(), expected) == "");
    x.zero_grad();
    // A diamond: one intermediate used by two ops.
    const Tensor h = x * 2.0;
    (h.sigmoid() + h.tanh()).sum().backward();
    std::vector<double> diamond;
    for (double v : {0.5, -1.5, 2.0}) {
        const double s = 1 / (1 + std::exp(-2 * v)), t = std::tanh(2 * v);
        diamond.push_back(2 * (s * (1 - s) + 1 - t * t));
    }
    CHECK(mismatch(x.grad(), diamond) == "");
}

TEST_CASE("autograd: retain_graph allows a second backward; without it the second one throws") {
    const Tensor x = leaf({1, 2}, {2});
    const Tensor y = (x * x).sum();
    y.backward(Tensor(), true);
    y.backward();
    CHECK(mismatch(x.grad(), {4, 8}) == "");  // 2x, twice
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("a second time; its saved tensors were freed (use retain_graph)"),
                         std::logic_error);
    // The graph was freed where the first backward went: a fresh graph still works.
    x.zero_grad();
    (x * x).sum().backward();
    CHECK(mismatch(x.grad(), {2, 4}) == "");
}

TEST_CASE("autograd: cross_entropy's gradient, computed in its forward, survives a retained second backward") {
    // The kernel writes dlogits while it finds the loss; backward hands that buffer on at an
    // upstream gradient of 1 and scales a copy otherwise, so the saved buffer never changes.
    const Tensor logits = leaf({1, 2, 3, 0, 0, 0}, {2, 3});
    const Tensor targets = gg::from_vector(std::vector<int64_t>{2, 0}, {2});
    const auto softmax_minus_onehot = [](const std::vector<double>& row, int target, double scale) {
        double z = 0;
        for (double v : row) z += std::exp(v);
        std::vector<double> d;
        for (size_t c = 0; c < row.size(); ++c) d.push_back((std::exp(row[c]) / z - (int(c) == target)) * scale);
        return d;
    };
    std::vector<double> once = softmax_minus_onehot({1, 2, 3}, 2, 0.5);
    for (double v : softmax_minus_onehot({0, 0, 0}, 0, 0.5)) once.push_back(v);
    const Tensor loss = gg::cross_entropy(logits, targets);
    loss.backward(Tensor(), true);
    CHECK(mismatch(logits.grad(), once) == "");
    loss.backward(gg::full({}, 3.0, DType::f64));  // a non-unit upstream gradient, through the same graph
    std::vector<double> four_times;
    for (double v : once) four_times.push_back(4 * v);
    CHECK(mismatch(logits.grad(), four_times) == "");
    {
        gg::NoGradGuard no_grad;  // no gradient asked for: the loss alone, nothing recorded
        CHECK_FALSE(gg::cross_entropy(logits, targets).requires_grad());
    }
}

TEST_CASE("autograd: backward needs a gradient for a non-scalar output, of the output's shape") {
    const Tensor x = leaf({1, 2, 3}, {3});
    const Tensor y = x * 2.0;
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("a gradient is needed for the non-scalar output of shape (3)"),
                         std::logic_error);
    CHECK_THROWS_WITH_AS(y.backward(gg::ones({2}, DType::f64)),
                         doctest::Contains("backward: gradient (2) float64 for an output (3) float64"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(y.backward(gg::ones({3})),
                         doctest::Contains("backward: gradient (3) float32 for an output (3) float64"),
                         std::invalid_argument);
    Tensor seed = gg::from_vector(std::vector<double>{1, 10, 100}, {3});
    y.backward(seed);
    CHECK(mismatch(x.grad(), {2, 20, 200}) == "");
    // The leaf's .grad is its own tensor, not the seed.
    seed.data<double>()[0] = 1000;
    CHECK(mismatch(x.grad(), {2, 20, 200}) == "");
    // A one-element non-scalar needs no gradient, and a leaf can be the root.
    const Tensor z = leaf({3}, {1, 1});
    (z * z).backward();
    CHECK(mismatch(z.grad(), {6}) == "");
    z.backward(gg::full({1, 1}, 0.5, DType::f64));
    CHECK(mismatch(z.grad(), {6.5}) == "");
}

TEST_CASE("autograd: backward on a tensor that does not require grad throws") {
    const Tensor x = gg::ones({2}, DType::f64);
    CHECK_THROWS_WITH_AS(x.sum().backward(), doctest::Contains("backward: the tensor of shape () does not require grad"),
                         std::logic_error);
    CHECK_THROWS_WITH_AS(Tensor().backward(), doctest::Contains("backward: undefined tensor"), std::invalid_argument);
}

TEST_CASE("autograd: requires_grad_ only on floating tensors") {
    Tensor i = gg::arange(3);
    CHECK_THROWS_WITH_AS(i.requires_grad_(),
                         doctest::Contains("requires_grad_: only floating tensors can require grad, not int64"),
                         std::invalid_argument);
    CHECK_FALSE(i.requires_grad());
    i.requires_grad_(false);  // turning it off is fine
    Tensor f = gg::ones({2});
    CHECK(f.requires_grad_().requires_grad());
    CHECK_FALSE(f.requires_grad_(false).requires_grad());
    // Integer results and comparisons carry no gradient.
    const Tensor x = leaf({1, 2}, {2});
    CHECK_FALSE(gg::gt(x, gg::scalar(1, DType::f64)).requires_grad());
    CHECK_FALSE(x.to(DType::i64).requires_grad());
    CHECK_FALSE(gg::max(x, 0).second.requires_grad());
    CHECK(gg::max(x, 0).first.requires_grad());
}

TEST_CASE("autograd: detach stops gradients and shares storage") {
    const Tensor x = leaf({1, 2, 3}, {3});
    const Tensor d = x.detach();
    CHECK_FALSE(d.requires_grad());
    CHECK(d.is_leaf());
    CHECK(d.shares_storage(x));
    (d * x).sum().backward();  // only the second factor is differentiated
    CHECK(mismatch(x.grad(), {1, 2, 3}) == "");
    CHECK_FALSE(d.grad().defined());
    // Detaching an intermediate cuts the graph above it.
    x.zero_grad();
    const Tensor h = x * 5.0;
    (h.detach() * h).sum().backward();
    CHECK(mismatch(x.grad(), {25, 50, 75}) == "");  // h · dh/dx = 5x · 5
    CHECK_THROWS_WITH_AS((h.detach() * 2.0).sum().backward(), doctest::Contains("does not require grad"),
                         std::logic_error);
}

TEST_CASE("autograd: NoGradGuard records nothing") {
    const Tensor x = leaf({1, 2}, {2});
    CHECK(gg::grad_enabled());
    {
        gg::NoGradGuard guard;
        CHECK_FALSE(gg::grad_enabled());
        const Tensor y = (x * 2.0).exp().sum();
        CHECK_FALSE(y.requires_grad());
        CHECK(y.grad_fn() == nullptr);
        const Tensor v = x.narrow(0, 0, 1);
        CHECK_FALSE(v.requires_grad());
        CHECK(v.grad_fn() == nullptr);
        {
            gg::NoGradGuard nested;
            CHECK_FALSE(gg::grad_enabled());
        }
        CHECK_FALSE(gg::grad_enabled());  // the inner guard restores "off", not "on"
        CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("does not require grad"), std::logic_error);
    }
    CHECK(gg::grad_enabled());
    const Tensor y = x * 2.0;
    CHECK(y.requires_grad());
    REQUIRE(y.grad_fn() != nullptr);
    CHECK(y.grad_fn()->name == "mul");
    CHECK(y.grad_fn()->inputs.size() == 2);
}

TEST_CASE("autograd: gradients flow through views to the base") {
    const Tensor x = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
    SUBCASE("narrow") {
        x.narrow(1, 1, 2).sum().backward();
        CHECK(mismatch(x.grad(), {0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0}) == "");
    }
    SUBCASE("select and a narrow of a narrow") {
        (x.select(0, -1) * 2.0).sum().backward();
        x.narrow(0, 0, 2).narrow(1, 3, 1).sum().backward();
        CHECK(mismatch(x.grad(), {0, 0, 0, 1, 0, 0, 0, 1, 2, 2, 2, 2}) == "");
    }
    SUBCASE("transpose: the gradient of (xᵀ ⊙ w) is wᵀ") {
        const Tensor w = gg::arange(0, 12, 1, DType::f64).view({4, 3});
        (x.t() * w).sum().backward();
        CHECK(mismatch(x.grad(), w.t().contiguous().to_vector<double>()) == "");
    }
    SUBCASE("permute, view, reshape, flatten, unsqueeze, squeeze") {
        const Tensor w = gg::arange(0, 12, 1, DType::f64);
        const Tensor y = x.unsqueeze(0).permute({2, 0, 1}).squeeze(1).reshape({12}).view({2, 6}).flatten();
        (y * w).sum().backward();
        // y = x.t() flattened, so x[i, j] meets w[j * 3 + i].
        std::vector<double> expected(12);
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 4; ++j) expected[i * 4 + j] = j * 3 + i;
        CHECK(mismatch(x.grad(), expected) == "");
    }
    SUBCASE("expand sums the repeats") {
        const Tensor row = leaf({1, 2, 3}, {1, 3});
        const Tensor w = gg::arange(0, 12, 1, DType::f64).view({4, 3});
        (row.expand({4, 3}) * w).sum().backward();
        CHECK(mismatch(row.grad(), {0 + 3 + 6 + 9, 1 + 4 + 7 + 10, 2 + 5 + 8 + 11}) == "");
        row.zero_grad();
        row.expand({2, 5, 3}).sum().backward();  // new leading dims too
        CHECK(mismatch(row.grad(), {10, 10, 10}) == "");
    }
    SUBCASE("contiguous and clone pass the gradient through") {
        (x.t().contiguous() * 2.0).sum().backward();
        x.clone().sum().backward();
        CHECK(mismatch(x.grad(), std::vector<double>(12, 3.0)) == "");
    }
}

TEST_CASE("autograd: broadcast gradients are summed back to each input's shape") {
    const Tensor a = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
    const Tensor row = leaf({1, 10, 100}, {3});
    const Tensor col = leaf({2, 3}, {2, 1});
    const Tensor s = leaf({7}, {});
    ((a * row + col) * s).sum().backward();
    CHECK(a.grad().shape() == Shape{2, 3});
    CHECK(mismatch(a.grad(), {7, 70, 700, 7, 70, 700}) == "");
    CHECK(row.grad().shape() == Shape{3});
    CHECK(mismatch(row.grad(), {7 * 5, 7 * 7, 7 * 9}) == "");  // s · column sums of a
    CHECK(col.grad().shape() == Shape{2, 1});
    CHECK(mismatch(col.grad(), {21, 21}) == "");
    CHECK(s.grad().shape() == Shape{});
    CHECK(mismatch(s.grad(), {1 + 20 + 300 + 4 + 50 + 600 + 3 * 2 + 3 * 3}) == "");
    // Outer-product broadcasting (2, 1) × (1, 3) and a broadcast divisor.
    const Tensor u = leaf({1, 2}, {2, 1}), v = leaf({1, 2, 4}, {1, 3});
    (u / v).sum().backward();
    CHECK(mismatch(u.grad(), {1.75, 1.75}) == "");                        // Σ 1/v
    CHECK(mismatch(v.grad(), {-3, -3 / 4.0, -3 / 16.0}) == "");          // −Σu / v²
    // Scalar operands on the left and right.
    const Tensor t = leaf({2}, {1});
    (3.0 / t + 1.0 - t * 4.0).sum().backward();
    CHECK(mismatch(t.grad(), {-3 / 4.0 - 4}) == "");
}

// Finite differences cannot check a tie (the function has a kink there), so by hand.
TEST_CASE("autograd: ties split the gradient of amax, amin, maximum and minimum") {
    const Tensor x = leaf({1, 3, 3, 0, 0, 2}, {2, 3});
    gg::amax(x, {1}).sum().backward();
    CHECK(mismatch(x.grad(), {0, 0.5, 0.5, 0, 0, 1}) == "");
    x.zero_grad();
    gg::amin(x).backward();  // two zeros share the global minimum
    CHECK(mismatch(x.grad(), {0, 0, 0, 0.5, 0.5, 0}) == "");
    x.zero_grad();
    (gg::amax(x, {0}, true) * 2.0).sum().backward();  // column 2 has no tie with itself: 3 > 2
    CHECK(mismatch(x.grad(), {2, 2, 2, 0, 0, 0}) == "");
    // max(dim) sends the whole gradient to the first maximum, as its index says.
    x.zero_grad();
    gg::max(x, 1).first.sum().backward();
    CHECK(mismatch(x.grad(), {0, 1, 0, 0, 0, 1}) == "");

    const Tensor a = leaf({1, 2, 3}, {3}), b = leaf({1, 5, 0}, {3});
    gg::maximum(a, b).sum().backward();
    CHECK(mismatch(a.grad(), {0.5, 0, 1}) == "");
    CHECK(mismatch(b.grad(), {0.5, 1, 0}) == "");
    a.zero_grad();
    b.zero_grad();
    gg::minimum(a, b).sum().backward();
    CHECK(mismatch(a.grad(), {0.5, 1, 0}) == "");
    CHECK(mismatch(b.grad(), {0.5, 0, 1}) == "");
}

TEST_CASE("autograd: a custom op recorded with gg::record") {
    // y = 3x with a hand-written backward, composed with built-in ops on both sides.
    const Tensor x = leaf({1, 2}, {2});
    auto triple = [](const Tensor& in) {
        Tensor out;
        {
            gg::NoGradGuard no_grad;
            out = in * 3.0;
        }
        return gg::record("triple", out, {in}, [](const Tensor& g) { return std::vector<Tensor>{g * 3.0}; });
    };
    const Tensor y = triple(x * x);
    CHECK(y.grad_fn()->name == "triple");
    y.sum().backward();
    CHECK(mismatch(x.grad(), {6, 12}) == "");
    // A backward that returns the wrong shape is caught, naming the op.
    const Tensor bad = gg::record("bad", (x * 1.0).detach(), {x},
                                  [](const Tensor&) { return std::vector<Tensor>{gg::ones({3}, DType::f64)}; });
    CHECK_THROWS_WITH_AS(bad.sum().backward(),
                         doctest::Contains("'bad' returned a gradient of shape (3) for an input of shape (2)"),
                         std::logic_error);
    // So is one that returns fewer gradients than the op has inputs.
    const Tensor short_of_grads = gg::record("short", (x * 1.0).detach(), {x, x},
                                             [](const Tensor& g) { return std::vector<Tensor>{g}; });
    CHECK_THROWS_WITH_AS(short_of_grads.sum().backward(), doctest::Contains("'short' returned 1 gradients for 2 inputs"),
                         std::logic_error);
}

TEST_CASE("autograd: float32 graphs and dtype conversions") {
    const Tensor x = gg::from_vector(std::vector<float>{1, 2}, {2}).requires_grad_();
    const Tensor y = x.to(DType::f64) * gg::from_vector(std::vector<double>{3, 4}, {2});
    y.sum().backward();
    CHECK(x.grad().dtype() == DType::f32);
    CHECK(mismatch(x.grad(), {3, 4}) == "");
}

TEST_CASE("autograd: a deep chain of 100k ops backpropagates and is freed without stack overflow") {
    const Tensor x = leaf({0.5}, {1});
    {
        Tensor y = x;
        for (int i = 0; i < 50000; ++i) y = (y * 1.0) + 0.0;  // 100k nodes in one chain
        y.sum().backward();
        CHECK(mismatch(x.grad(), {1}) == "");
    }  // the whole graph is released here
    // A graph that is never backpropagated is released just the same.
    {
        Tensor y = x;
        for (int i = 0; i < 100000; ++i) y = y.sigmoid();
        CHECK(y.requires_grad());
    }
    CHECK(mismatch(x.grad(), {1}) == "");
}

TEST_CASE("autograd: writing into a tensor saved for backward makes backward throw, naming the op") {
    const auto saved_by = [](const char* op) {
        return doctest::Contains(doctest::String("a tensor saved by '") + op + "' was modified in place");
    };
    SUBCASE("mul: an input written through data<T>()") {
        const Tensor a = leaf({1, 2}, {2}), b = leaf({3, 4}, {2});
        const Tensor y = a * b;
        b.data<double>()[0] = 5;  // y's gradient for a is b: the old b, which is gone
        CHECK_THROWS_WITH_AS(y.sum().backward(), saved_by("mul"), std::logic_error);
    }
    SUBCASE("exp: its output written through fill_") {
        const Tensor x = leaf({0, 1}, {2});
        const Tensor y = gg::exp(x);
        {
            gg::NoGradGuard no_grad;
            y.fill_(0);
        }
        CHECK_THROWS_WITH_AS(y.sum().backward(), doctest::Contains("'exp' was modified in place after it was saved (version 1, expected 0)"),
                             std::logic_error);
    }
    SUBCASE("a view of a saved tensor, written through its base") {
        const Tensor base = leaf({1, 2, 3, 4}, {4});
        const Tensor v = base.narrow(0, 1, 2);
        const Tensor y = v * v;
        {
            gg::NoGradGuard no_grad;
            base.copy_(gg::zeros({4}, DType::f64));  // the same storage as v
        }
        CHECK_THROWS_WITH_AS(y.sum().backward(), saved_by("mul"), std::logic_error);
    }
    SUBCASE("reads, writes before the op, and ops that save nothing are fine") {
        const Tensor a = leaf({1, 2}, {2}), b = leaf({3, 4}, {2});
        b.data<double>()[1] = 6;  // before mul saves b
        const Tensor y = a * b + a;
        CHECK(b.data<const double>()[1] == 6);  // a read: no version change
        CHECK(b.to_vector<double>()[0] == 3);
        const Tensor z = a + b;                 // add's backward reads no values, as in torch
        y.sum().backward();
        CHECK(mismatch(a.grad(), {4, 7}) == "");
        {
            gg::NoGradGuard no_grad;
            a.copy_(gg::zeros({2}, DType::f64));
        }
        z.sum().backward();
        CHECK(mismatch(b.grad(), {2, 3}) == "");  // a from y, then 1 from z
    }
}

TEST_CASE("autograd: every in-place write bumps the version; reads do not") {
    const Tensor x = gg::zeros({3}, DType::f64);
    CHECK(x.version() == 0);
    x.fill_(1);
    CHECK(x.version() == 1);
    x.copy_(gg::ones({3}, DType::f64));
    CHECK(x.version() == 2);
    x.data<double>()[0] = 2;
    CHECK(x.version() == 3);
    (void)x.data<const double>();
    (void)x.to_vector<double>();
    (void)x.narrow(0, 0, 1).item();
    CHECK(x.version() == 3);
    x.narrow(0, 1, 2).fill_(0);  // a view's write is its base's write
    CHECK(x.version() == 4);
}
