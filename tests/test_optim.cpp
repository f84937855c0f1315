// test_optim.cpp — optimisers against PyTorch, clipping, schedules, state round trips.
//
// tests/reference/make_adamw_fixture.py stores torch.optim.AdamW and SGD trajectories:
// initial parameters, the gradient fed at every step and the parameters after it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "gatedgrad.h"
#include "tests/check.h"

using namespace gg;
using gg::testing::max_abs_diff;
using gg::nn::AdamW;
using gg::nn::LrSchedule;
using gg::nn::Optimizer;
using gg::nn::SGD;

namespace {

// Tests run with the source root as working directory (tests/meson.build).
const std::map<std::string, Tensor>& fixtures() {
    static const auto file = [] {
        const nn::NamedTensors tensors = nn::load_tensors("tests/reference/optim.safetensors");
        return std::map<std::string, Tensor>(tensors.begin(), tensors.end());
    }();
    return file;
}

const Tensor& fixture(const std::string& name) {
    INFO("fixture entry " << name);
    const auto it = fixtures().find(name);
    REQUIRE(it != fixtures().end());
    return it->second;
}

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>;
constexpr int kSteps = 10;  // as STEPS in the script
constexpr int kParams = 2;

// Replays the stored gradients of `name` through our optimiser and returns the largest
// |ours − torch| over all parameters and steps. The parameters must be updated in place.
double replay(const std::string& name, const MakeOptimizer& make) {
    std::vector<Tensor> params;
    for (int i = 0; i < kParams; ++i)
        params.push_back(fixture(name + ".param." + std::to_string(i)).clone().requires_grad_());
    const void* storage = params[0].view_desc().data;
    const auto opt = make(params);
    double worst = 0;
    for (int step = 0; step < kSteps; ++step) {
        for (int i = 0; i < kParams; ++i)
            params[i].set_grad(fixture(name + ".grad." + std::to_string(step) + "." + std::to_string(i)));
        opt->step();
        for (int i = 0; i < kParams; ++i)
            worst = std::max(worst, max_abs_diff(params[i], fixture(name + ".after." + std::to_string(step) + "." +
                                                                    std::to_string(i))));
    }
    CHECK(params[0].view_desc().data == storage);
    return worst;
}

const MakeOptimizer torch_adamw = [](std::vector<Tensor> ps) {
    return std::make_unique<AdamW>(std::move(ps), 1e-2, 0.9, 0.999, 1e-8, 0.1);
};
const MakeOptimizer torch_sgd = [](std::vector<Tensor> ps) { return std::make_unique<SGD>(std::move(ps), 1e-2, 0.9, 0.1); };

// Bit-for-bit equality of values (and shapes).
bool same(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}

}  // namespace

TEST_CASE("optim: AdamW matches torch.optim.AdamW") {
    const double f64 = replay("adamw", torch_adamw);
    const double f32 = replay("adamw_f32", torch_adamw);
    MESSAGE("max |gatedgrad − torch| over 10 AdamW steps: float64 " << f64 << ", float32 " << f32);
    CHECK(f64 <= 1e-12);
    CHECK(f32 <= 1e-6);
}

// The float32 update runs in whichever of its compiled forms the CPU takes (AVX-512, AVX2 or
// the baseline: cpu/fused.cpp). Each must give the same bits as the plain loop below, the
// same operations in the same order, each rounded to float: so a run's weights do not depend
// on the CPU. A fused multiply-add that the compiler slipped into one form would round once
// where the others round twice.
TEST_CASE("optim: AdamW's float32 update gives the same bits on every CPU") {
    const int64_t n = 1003;  // not a multiple of any vector width
    Generator gen(11);
    Tensor p = randn({n}, gen).requires_grad_();
    std::vector<float> ref = p.to_vector<float>(), m(n, 0.0f), v(n, 0.0f);
    const double lr = 3e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, wd = 0.1;
    AdamW opt({p}, lr, beta1, beta2, eps, wd);
    for (int t = 1; t <= 3; ++t) {
        const Tensor g = randn({n}, gen);
        p.set_grad(g);
        opt.step();
        const std::vector<float> gv = g.to_vector<float>();
        const double bc1 = 1 - std::pow(beta1, double(t)), bc2 = 1 - std::pow(beta2, double(t));
        const float decay = float(1 - lr * wd), step_size = float(lr / bc1), bc2_sqrt = float(std::sqrt(bc2));
        const float b1 = float(beta1), b2 = float(beta2), c1 = float(1 - beta1), c2 = float(1 - beta2);
        for (int64_t j = 0; j < n; ++j) {
            volatile float x = ref[j] * decay;  // volatile: each product rounded on its own
            ref[j] = x;
            volatile float a = b1 * m[j], b = c1 * gv[j];
            m[j] = a + b;
            volatile float gg = c2 * gv[j];
            volatile float c = b2 * v[j], d = gg * gv[j];
            v[j] = c + d;
            volatile float denom = std::sqrt(v[j]) / bc2_sqrt;
            const float den = denom + float(eps);
            volatile float up = step_size * m[j];
            ref[j] -= up / den;
        }
        const std::vector<float> got = p.to_vector<float>();
        int64_t differ = 0;
        for (int64_t j = 0; j < n; ++j) differ += got[j] != ref[j];
        INFO("step " << t);
        CHECK(differ == 0);
    }
}

TEST_CASE("optim: SGD with momentum matches torch.optim.SGD") {
    const double diff = replay("sgd", torch_sgd);
    MESSAGE("max |gatedgrad − torch| over 10 SGD steps: " << diff);
    CHECK(diff <= 1e-12);
}

TEST_CASE("optim: parameters without a gradient are skipped and keep their own step count") {
    Tensor a = randn({3}, default_generator(), DType::f64).requires_grad_();
    Tensor b = randn({3}, default_generator(), DType::f64).requires_grad_();
    const Tensor b_before = b.clone(), g = full({3}, 0.5, DType::f64);
    AdamW opt({a, b}, 0.1);
    a.set_grad(g);
    opt.step();
    opt.step();
    CHECK(same(b, b_before));
    CHECK(opt.state_dict()[0].second.item() == 2);  // step.0
    CHECK(opt.state_dict()[3].second.item() == 0);  // step.1

    // b's first step is a first step (bias correction with t = 1), as in a fresh optimiser.
    Tensor c = b_before.clone().requires_grad_();
    AdamW fresh({c}, 0.1);
    opt.zero_grad();
    CHECK_FALSE(a.grad().defined());
    b.set_grad(g);
    c.set_grad(g);
    opt.step();
    fresh.step();
    CHECK(same(b, c));
}

TEST_CASE("optim: AdamW's weight decay, tied to the rate or independent of it") {
    // With a zero gradient m = v = 0 and the Adam update is 0: only the decay moves p.
    const std::vector<double> start{1.0, -2.0, 4.0};
    const auto one_step = [&](double lr, double peak) {
        Tensor p = gg::from_vector(start, {3}).requires_grad_();
        AdamW opt({p}, lr, 0.9, 0.999, 1e-8, 0.1);
        opt.decay_peak_lr = peak;
        p.set_grad(zeros({3}, DType::f64));
        opt.step();
        return p.to_vector<double>();
    };
    for (size_t i = 0; i < start.size(); ++i) {
        CAPTURE(i);
        CHECK(one_step(0.5, 0)[i] == doctest::Approx(start[i] * (1 - 0.5 * 0.1)).epsilon(1e-15));  // 1 − lr·λ
        // Independent: 1 − λ·lr/peak, the schedule's factor s_t = 0.5/2 = 0.25 times λ...
        CHECK(one_step(0.5, 2.0)[i] == doctest::Approx(start[i] * (1 - 0.1 * 0.25)).epsilon(1e-15));
        // ... and at the peak the same λ whatever the peak is: lr 100 removes 10%, not 1000%.
        CHECK(one_step(100, 100)[i] == doctest::Approx(start[i] * (1 - 0.1)).epsilon(1e-15));
    }
    // With a gradient, the Adam part is unchanged: only the decay factor differs.
    Tensor a = gg::from_vector(start, {3}).requires_grad_(), b = gg::from_vector(start, {3}).requires_grad_();
    AdamW tied({a}, 0.5, 0.9, 0.999, 1e-8, 0.0), independent({b}, 0.5, 0.9, 0.999, 1e-8, 0.0);
    independent.decay_peak_lr = 2.0;
    a.set_grad(full({3}, 0.3, DType::f64)), b.set_grad(full({3}, 0.3, DType::f64));
    tied.step(), independent.step();
    CHECK(same(a, b));  // λ = 0: identical
}

TEST_CASE("optim: clip_grad_norm") {
    Tensor a = zeros({2}, DType::f64).requires_grad_(), b = zeros({1}).requires_grad_();
    Tensor no_grad = zeros({4}).requires_grad_();
    const auto set_grads = [&] {
        a.set_grad(from_vector(std::vector<double>{3, 4}, {2}));
        b.set_grad(from_vector(std::vector<float>{12}, {1}));
    };

    SUBCASE("above max_norm: every gradient scaled by max_norm / (norm + 1e-6)") {
        set_grads();
        CHECK(nn::clip_grad_norm({a, b, no_grad}, 6.5) == 13);  // √(9 + 16 + 144)
        const double scale = 6.5 / (13 + 1e-6);
        CHECK(a.grad().to_vector<double>() == std::vector<double>{3 * scale, 4 * scale});
        CHECK(b.grad().item() == doctest::Approx(12 * scale).epsilon(1e-7));
        CHECK_FALSE(no_grad.grad().defined());
    }
    SUBCASE("at or below max_norm: untouched") {
        for (double max_norm : {13.0, 100.0}) {
            set_grads();
            CHECK(nn::clip_grad_norm({a, b}, max_norm) == 13);
            CHECK(a.grad().to_vector<double>() == std::vector<double>{3, 4});
            CHECK(b.grad().item() == 12);
        }
    }
}

TEST_CASE("optim: learning-rate schedules") {
    const LrSchedule cosine{.decay = LrSchedule::Decay::cosine, .max_lr = 1.0, .min_lr = 0.1, .warmup_steps = 10, .total_steps = 110};
    CHECK(nn::lr_at(cosine, 0) == doctest::Approx(0.1));   // (0 + 1) / 10 of max
    CHECK(nn::lr_at(cosine, 4) == doctest::Approx(0.5));
    CHECK(nn::lr_at(cosine, 9) == doctest::Approx(1.0));   // warmup ends at max_lr...
    CHECK(nn::lr_at(cosine, 10) == doctest::Approx(1.0));  // ...where the cosine starts
    CHECK(nn::lr_at(cosine, 60) == doctest::Approx(0.55)); // halfway: the mean of max and min
    CHECK(nn::lr_at(cosine, 35) == doctest::Approx(0.1 + 0.45 * (1 + std::cos(std::numbers::pi / 4))));
    CHECK(nn::lr_at(cosine, 110) == doctest::Approx(0.1));
    CHECK(nn::lr_at(cosine, 5000) == doctest::Approx(0.1));

    const LrSchedule constant{.decay = LrSchedule::Decay::constant, .max_lr = 3e-4, .warmup_steps = 100};
    CHECK(nn::lr_at(constant, 0) == doctest::Approx(3e-6));
    CHECK(nn::lr_at(constant, 99) == doctest::Approx(3e-4));
    CHECK(nn::lr_at(constant, 12345) == doctest::Approx(3e-4));
    CHECK(nn::lr_at({.decay = LrSchedule::Decay::constant, .max_lr = 0.5}, 0) == 0.5);  // no warmup

    CHECK_THROWS_AS(nn::lr_at(cosine, -1), std::invalid_argument);
    CHECK_THROWS_AS(nn::lr_at({.warmup_steps = 10, .total_steps = 10}, 50), std::invalid_argument);  // cosine over nothing
}

TEST_CASE("optim: a restarted cosine goes on from where the run stood, down to min_lr at the new end") {
    // A 110-step run stopped at step 60 (lr 0.55), then extended to 210 steps.
    LrSchedule extended{.decay = LrSchedule::Decay::cosine, .max_lr = 1.0, .min_lr = 0.1, .warmup_steps = 10,
                        .total_steps = 210, .restart_step = 60, .restart_lr = 0.55};
    CHECK(nn::lr_at(extended, 60) == doctest::Approx(0.55));                 // no jump
    CHECK(nn::lr_at(extended, 135) == doctest::Approx(0.1 + 0.225));         // halfway from 0.55 to 0.1
    CHECK(nn::lr_at(extended, 209) == doctest::Approx(0.1).epsilon(1e-3));
    CHECK(nn::lr_at(extended, 210) == doctest::Approx(0.1));
    CHECK(nn::lr_at(extended, 5) == doctest::Approx(0.6));                   // the warmup is untouched
    // A finished run (at min_lr) extended stays at min_lr: the cosine from 0.1 to 0.1 is flat.
    extended.restart_lr = 0.1;
    CHECK(nn::lr_at(extended, 100) == doctest::Approx(0.1));
    extended.restart_step = 5;  // inside the warmup
    CHECK_THROWS_WITH_AS(nn::lr_at(extended, 100), doctest::Contains("restart_step 5"), std::invalid_argument);
    extended.restart_step = 210;
    CHECK_THROWS_AS(nn::lr_at(extended, 100), std::invalid_argument);
}

TEST_CASE("optim: resuming from state_dict gives the same parameters as not stopping") {
    for (const auto& [name, make] : {std::pair{"AdamW", torch_adamw}, std::pair{"SGD", torch_sgd}}) {
        const std::string optimizer = name;  // doctest captures it in a lambda
        CAPTURE(optimizer);
        const auto train = [&](const std::vector<Tensor>& params, Optimizer& opt, int from, int to) {
            for (int step = from; step < to; ++step) {
                for (int i = 0; i < kParams; ++i)
                    params[i].set_grad(fixture("adamw.grad." + std::to_string(step) + "." + std::to_string(i)));
                opt.step();
            }
        };
        const auto fresh_params = [] {
            std::vector<Tensor> ps;
            for (int i = 0; i < kParams; ++i) ps.push_back(fixture("adamw.param." + std::to_string(i)).clone().requires_grad_());
            return ps;
        };

        const std::vector<Tensor> straight = fresh_params();
        train(straight, *make(straight), 0, kSteps);

        // Stop halfway, keep copies of the parameters and the optimiser state...
        const std::vector<Tensor> first = fresh_params();
        const auto first_opt = make(first);
        train(first, *first_opt, 0, kSteps / 2);
        nn::NamedTensors saved;
        for (const auto& [key, t] : first_opt->state_dict()) saved.emplace_back(key, t.clone());

        // ...and carry on in a new optimiser on new parameters.
        std::vector<Tensor> resumed;
        for (const Tensor& p : first) resumed.push_back(p.detach().clone().requires_grad_());
        const auto resumed_opt = make(resumed);
        resumed_opt->load_state_dict(saved);
        train(resumed, *resumed_opt, kSteps / 2, kSteps);
        for (int i = 0; i < kParams; ++i) CHECK(same(resumed[i], straight[i]));
    }
}

TEST_CASE("optim: load_state_dict checks names and shapes before changing anything") {
    Tensor p = randn({2, 3}).requires_grad_();
    AdamW opt({p});
    nn::NamedTensors state;
    for (const auto& [key, t] : opt.state_dict()) state.emplace_back(key, full(t.shape(), 7, t.dtype()));
    state[2].second = zeros({3, 2});  // exp_avg_sq.0, checked after step.0 and exp_avg.0
    try {
        opt.load_state_dict(state);
        FAIL("no error");
    } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()) ==
              "AdamW: load_state_dict: tensor 'exp_avg_sq.0' has shape (3,2) in the given state but (2,3) in the optimiser");
    }
    for (const auto& [key, t] : opt.state_dict()) CHECK(same(t, zeros_like(t)));

    state.pop_back();
    CHECK_THROWS_WITH_AS(opt.load_state_dict(state), doctest::Contains("'exp_avg_sq.0'"), std::runtime_error);
}

TEST_CASE("optim: AdamW and SGD minimise a quadratic") {
    // f(x) = Σ c_i (x_i − t_i)², with curvatures c spanning two decades.
    const Tensor target = from_vector(std::vector<double>{1.5, -2.0, 0.25, 3.0}, {4});
    const Tensor curvature = from_vector(std::vector<double>{0.1, 1.0, 3.0, 10.0}, {4});
    const auto minimise = [&](const std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>& make, int steps) {
        Tensor x = zeros({4}, DType::f64).requires_grad_();
        const auto opt = make({x});
        for (int step = 0; step < steps; ++step) {
            opt->zero_grad();
            sum(curvature * pow(x - target, 2)).backward();
            opt->step();
        }
        return max_abs_diff(x, target);
    };
    CHECK(minimise([](auto ps) { return std::make_unique<AdamW>(std::move(ps), 0.05, 0.9, 0.999, 1e-8, 0.0); }, 2000) < 1e-3);
    CHECK(minimise([](auto ps) { return std::make_unique<SGD>(std::move(ps), 0.02, 0.9); }, 500) < 1e-6);
}

TEST_CASE("optim: bad arguments are errors naming the optimiser") {
    Tensor p = randn({2, 3}).requires_grad_();
    CHECK_THROWS_WITH_AS(AdamW({p}, 1e-3, 1.0), doctest::Contains("AdamW: beta1"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(SGD({p}, -1.0), doctest::Contains("SGD: lr"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(SGD({}, 0.1), doctest::Contains("SGD: empty parameter list"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(SGD({p.t()}, 0.1), doctest::Contains("not contiguous"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(SGD({zeros({2}, DType::i64)}, 0.1), doctest::Contains("not floating"), std::invalid_argument);

    AdamW opt({p});
    p.set_grad(zeros({2, 3}, DType::f64));
    CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("AdamW: parameter 0 ((2,3) float32) has a gradient ((2,3) float64"),
                         std::invalid_argument);
}

TEST_CASE("optim: a step between forward and backward makes that backward an error, not a wrong gradient") {
    manual_seed(3);
    gg::nn::Linear layer(3, 2);
    const Tensor x = randn({4, 3});
    SGD opt(layer.parameters(), 0.1);
    layer.forward(x).sum().backward();  // gradients for the step below
    const Tensor loss = layer.forward(x).sum();
    opt.step();  // writes the weight that loss's matmul saved
    CHECK_THROWS_WITH_AS(loss.backward(), doctest::Contains("a tensor saved by 'matmul' was modified in place"),
                         std::logic_error);
    // In the usual order nothing is stale.
    opt.zero_grad();
    layer.forward(x).sum().backward();
    opt.step();
}
