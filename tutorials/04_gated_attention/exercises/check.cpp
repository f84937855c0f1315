// The checks of tutorial 04's exercises: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include <set>

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

// Whether an op named `op` is in the graph that made y: its nodes say how y was computed.
bool computed_with(const Tensor& y, const std::string& op) {
    std::vector<std::shared_ptr<Node>> todo = {y.grad_fn()};
    std::set<Node*> seen;
    while (!todo.empty()) {
        const std::shared_ptr<Node> node = todo.back();
        todo.pop_back();
        if (!node || !seen.insert(node.get()).second) continue;
        if (node->name == op) return true;
        for (const Tensor& input : node->inputs) todo.push_back(input.grad_fn());
    }
    return false;
}

// The layer's own attention is the answer these exercises ask for.
void check_not_library_attention(const Tensor& mine, const std::string& exercise) {
    INFO("exercise " << exercise << " asks you to write this: scaled_dot_product_attention computed it");
    CHECK_FALSE(computed_with(mine, "scaled_dot_product_attention"));
}
}  // namespace

TEST_CASE("04.1 causal_attention") {
    Generator gen(7);
    Tensor q = randn({2, 3, 5, 4}, gen), k = randn({2, 3, 5, 4}, gen), v = randn({2, 3, 5, 4}, gen);
    q.requires_grad_();  // so that the result keeps its graph
    const Tensor mine = exercises::causal_attention(q, k, v);
    REQUIRE(mine.shape() == q.shape());
    check_not_library_attention(mine, "04.1");
    CHECK(amax(abs(mine - scaled_dot_product_attention(q, k, v))).item() < 1e-5);
}

TEST_CASE("04.2 headwise_g1_forward") {
    const auto attn = layer(GatePosition::sdpa_output, GateSharing::headwise);
    REQUIRE(attn->w_g->weight.shape() == Shape{2, 16});  // d → H
    const Tensor x = randn({2, 6, 16});
    const Tensor mine = exercises::headwise_g1_forward(*attn, x);
    REQUIRE(mine.shape() == x.shape());
    check_not_library_attention(mine, "04.2");
    CHECK(amax(abs(mine - attn->forward(x))).item() < 1e-5);
}

TEST_CASE("04.3 g2_forward") {
    const auto attn = layer(GatePosition::scores_from_x, GateSharing::elementwise);
    REQUIRE(attn->w_g->weight.shape() == Shape{2, 16});
    const Tensor x = randn({2, 6, 16});
    const Tensor mine = exercises::g2_forward(*attn, x);
    REQUIRE(mine.shape() == x.shape());
    check_not_library_attention(mine, "04.3");
    CHECK(amax(abs(mine - attn->forward(x))).item() < 1e-5);
}
