// The checks of tutorial 03's exercises: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include "tutorials/03_modules/exercises/exercises.h"

using namespace gg;

namespace {
// n parameters of a few shapes with fixed gradients, on fresh storage each call.
std::vector<Tensor> params_with_grads(uint64_t seed, double grad_scale) {
    Generator gen(seed);
    std::vector<Tensor> params;
    for (const Shape& shape : {Shape{3, 2}, Shape{4}, Shape{}}) {
        Tensor p = randn(shape, gen, DType::f64);
        p.requires_grad_();
        p.set_grad(randn(shape, gen, DType::f64) * grad_scale);
        params.push_back(p);
    }
    return params;
}

double max_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, amax(abs(a[i] - b[i])).item());
    return worst;
}
}  // namespace

TEST_CASE("03.1 Affine: a module with registered parameters") {
    exercises::Affine affine(3, 2);
    const nn::NamedTensors named = affine.named_parameters();
    REQUIRE(named.size() == 2);
    CHECK(named[0].first == "weight");
    CHECK(named[0].second.shape() == Shape{2, 3});
    CHECK(named[1].first == "bias");
    CHECK(named[1].second.shape() == Shape{2});
    CHECK(named[0].second.requires_grad());
    manual_seed(3);
    nn::Linear linear(3, 2);
    affine.load_state_dict(linear.state_dict());
    const Tensor x = randn({4, 5, 3});
    CHECK(amax(abs(affine.forward(x) - linear.forward(x))).item() < 1e-6);
    affine.forward(x).sum().backward();
    CHECK(affine.weight.grad().defined());
}

TEST_CASE("03.2 sgd_momentum_step") {
    std::vector<Tensor> mine = params_with_grads(5, 1), theirs = params_with_grads(5, 1);
    std::vector<Tensor> velocity;
    nn::SGD sgd(theirs, 0.1, 0.9);
    for (int step = 0; step < 3; ++step) {
        exercises::sgd_momentum_step(mine, velocity, 0.1, 0.9);
        sgd.step();
    }
    REQUIRE(velocity.size() == mine.size());
    CHECK(max_difference(mine, theirs) < 1e-12);
}

TEST_CASE("03.3 clip_grad_norm_by_hand") {
    for (double scale : {0.01, 10.0}) {  // below the limit: untouched; above: clipped
        CAPTURE(scale);
        std::vector<Tensor> mine = params_with_grads(6, scale), theirs = params_with_grads(6, scale);
        const double norm = exercises::clip_grad_norm_by_hand(mine, 1.0);
        CHECK(norm == doctest::Approx(nn::clip_grad_norm(theirs, 1.0)).epsilon(1e-12));
        std::vector<Tensor> g_mine, g_theirs;
        for (size_t i = 0; i < mine.size(); ++i) g_mine.push_back(mine[i].grad()), g_theirs.push_back(theirs[i].grad());
        CHECK(max_difference(g_mine, g_theirs) < 1e-12);
    }
}
