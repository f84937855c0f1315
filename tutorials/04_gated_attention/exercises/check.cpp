// The checks of tutorial 04's exercises: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include "tutorials/04_gated_attention/exercises/exercises.h"

using namespace gg;
using namespace gg::nn;

namespace {
// A 2-head layer with the given gate, its W_g random (at init it is 0: every gate ½).
std::unique_ptr<GatedAttention> layer(GatePosition gate, GateSharing sharing) {
    manual_seed(4);
    AttentionOptions options;
    options.d_model = 16, options.n_heads = 2, options.gate = gate, options.sharing = sharing;
    auto attn = std::make_unique<GatedAttention>(options);
    NoGradGuard no_grad;
    attn->w_g->weight.copy_(randn(attn->w_g->weight.shape()));
    return attn;
}
}  // namespace

TEST_CASE("04.1 causal_attention") {
    Generator gen(7);
    const Tensor q = randn({2, 3, 5, 4}, gen), k = randn({2, 3, 5, 4}, gen), v = randn({2, 3, 5, 4}, gen);
    const Tensor mine = exercises::causal_attention(q, k, v);
    REQUIRE(mine.shape() == q.shape());
    CHECK(amax(abs(mine - scaled_dot_product_attention(q, k, v))).item() < 1e-5);
}

TEST_CASE("04.2 headwise_g1_forward") {
    const auto attn = layer(GatePosition::sdpa_output, GateSharing::headwise);
    REQUIRE(attn->w_g->weight.shape() == Shape{2, 16});  // d → H
    const Tensor x = randn({2, 6, 16});
    const Tensor mine = exercises::headwise_g1_forward(*attn, x);
    REQUIRE(mine.shape() == x.shape());
    CHECK(amax(abs(mine - attn->forward(x))).item() < 1e-5);
}

TEST_CASE("04.3 g2_forward") {
    const auto attn = layer(GatePosition::scores_from_x, GateSharing::elementwise);
    REQUIRE(attn->w_g->weight.shape() == Shape{2, 16});
    const Tensor x = randn({2, 6, 16});
    const Tensor mine = exercises::g2_forward(*attn, x);
    REQUIRE(mine.shape() == x.shape());
    CHECK(amax(abs(mine - attn->forward(x))).item() < 1e-5);
}
