// test_moe.cpp — MoE against its dense formula Σ_top-k w_e expert_e(x), the load-balancing
// loss by hand, and gradchecks.
#include "tests/nn_check.h"

using namespace gg;
using namespace gg::nn;
using namespace gg::testing;

// ================================================================ MoE

TEST_CASE("nn: MoE equals Σ_top-k w_e expert_e(x) with renormalised router weights") {
    Generator gen(15);
    MoE moe(8, 4, 2, 12);
    CHECK(moe.experts.size() == 4);
    const auto names = names_of(moe);
    CHECK(names.front() == "router.weight");
    CHECK(contains(names, "experts.3.w2.weight"));
    CHECK(names.size() == 1 + 4 * 3);
    CHECK(moe.num_parameters() == 8 * 4 + 4 * 3 * 8 * 12);
    moe.to(DType::f64);
    randomize(moe, gen);
    const Tensor x = randn({2, 5, 8}, gen, DType::f64);
    const Tensor y = moe.forward(x);
    CHECK(y.shape() == x.shape());
    CHECK(max_abs_diff(y, dense_moe(moe, x)) < 1e-12);
    // top_k = E is the full softmax mixture; top_k = 1 one expert with weight 1.
    for (int64_t k : {1, 4}) {
        CAPTURE(k);
        moe.top_k = k;
        CHECK(max_abs_diff(moe.forward(x), dense_moe(moe, x)) < 1e-12);
    }
    CHECK_THROWS_AS(MoE(8, 4, 5, 12), std::invalid_argument);
    CHECK_THROWS_AS(MoE(8, 4, 0, 12), std::invalid_argument);
}

TEST_CASE("nn: MoE load-balancing loss: E Σ f_e P_e by hand, 1 under uniform routing, differentiable in the router") {
    Generator gen(16);
    const int64_t D = 8, E = 4, k = 2;
    MoE moe(D, E, k, 6);
    moe.to(DType::f64);
    randomize(moe, gen);
    const Tensor x = randn({3, 4, D}, gen, DType::f64);
    Tensor aux_loss;
    moe.forward(x, &aux_loss);
    REQUIRE(aux_loss.defined());
    CHECK(aux_loss.numel() == 1);
    {
        const int64_t N = 12;
        const Routing r = route(moe, x.reshape({N, D}));
        std::vector<double> f(E), P(E);
        for (int64_t n = 0; n < N; ++n) {
            for (int64_t e : r.top[n]) f[e] += 1.0 / double(N * k);
            for (int64_t e = 0; e < E; ++e) P[e] += r.probs[n][e] / N;
        }
        double aux = 0;
        for (int64_t e = 0; e < E; ++e) aux += E * f[e] * P[e];
        CHECK(aux_loss.item() == relative(aux, 1e-12));
    }
    // With a zero router every P_e = 1/E; Σ_e f_e = 1 whatever the top-k picks, so
    // aux = E · Σ_e f_e / E = 1.
    {
        MoE uniform(D, E, k, 6);
        uniform.to(DType::f64);
        assign(uniform.router->weight, zeros({E, D}, DType::f64));
        Tensor uniform_aux;
        uniform.forward(x, &uniform_aux);
        CHECK(uniform_aux.item() == relative(1.0, 1e-12));
    }
    // The gradient reaches the router (through P; f is a count) and nothing else.
    const int n = check_gradients(moe, {}, [&](const std::vector<Tensor>&) {
        Tensor aux;
        moe.forward(x, &aux);
        return aux;
    }, only({"router.weight", "experts.0.w1.weight"}));
    CHECK(n == 2);
    moe.zero_grad();
    moe.forward(x, &aux_loss);
    aux_loss.backward();
    CHECK(amax(abs(moe.router->weight.grad())).item() > 1e-6);
    CHECK(!moe.experts[0]->w1->weight.grad().defined());
}

TEST_CASE("nn: MoE gradcheck w.r.t. input, router and expert weights (away from top-k ties)") {
    Generator gen(17);
    const int64_t D = 6;
    MoE moe(D, 4, 2, 8);
    moe.to(DType::f64);
    randomize(moe, gen, 0.8);
    // Pick an input whose top-2 is far from a tie: the choice is piecewise constant.
    Tensor x;
    for (int tries = 0; tries < 100; ++tries) {
        x = randn({2, 3, D}, gen, DType::f64);
        if (route(moe, x.reshape({6, D})).min_gap > 0.02) break;
    }
    REQUIRE(route(moe, x.reshape({6, D})).min_gap > 0.02);
    const int n = check_gradients(moe, {x.clone().requires_grad_()},
                                  [&](const std::vector<Tensor>& in) { return moe.forward(in[0]); });
    CHECK(n == 13);
}
