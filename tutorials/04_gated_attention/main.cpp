// Tutorial 04 — one gated attention layer: its gate values and its attention.
//
// Build and run from the repository root:
//   tools/build tutorial_04_gated_attention && ./build/tutorials/tutorial_04_gated_attention
#include <cstdio>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

int main() {
    manual_seed(0);
    const int64_t B = 1, T = 6, d = 16, H = 2;
    // G1: head_i = σ(x W_g,i) ⊙ softmax(Q_i K_iᵀ / √dk) V_i, one gate per channel of each head.
    AttentionOptions options;
    options.d_model = d, options.n_heads = H, options.gate = GatePosition::sdpa_output;
    GatedAttention gated(options);

    const Tensor x = randn({B, T, d});  // (B, T, d)
    AttentionCapture seen;              // receives the pass's probabilities and gate values
    const Tensor y = gated.forward(x, nullptr, Tensor(), &seen);  // (B, T, d)
    std::printf("x %s -> y %s, W_g %s\n", shape_str(x.shape()).c_str(), shape_str(y.shape()).c_str(),
                shape_str(gated.w_g->weight.shape()).c_str());
    std::printf("gate values %s (B, heads, T, dk), mean %.3f: W_g starts at 0 and sigma(0) = 0.5\n",
                shape_str(seen.gate.shape()).c_str(), mean(seen.gate).item());

    // The ungated layer with the same Q, K, V, O weights: at init G1 is exactly half of it.
    AttentionOptions no_gate = options;
    no_gate.gate = GatePosition::none;
    GatedAttention plain(no_gate);
    NamedTensors shared;
    for (const auto& [name, p] : gated.named_parameters())
        if (name != "w_g.weight") shared.emplace_back(name, p);
    plain.load_state_dict(shared);
    std::printf("max |y_gated - 0.5 * y_plain| = %.2g\n\n", amax(abs(y - plain.forward(x) * 0.5)).item());

    // Attention of head 0: row i is how query i spreads over keys 0..i (causal).
    const Tensor probs = seen.probs;  // (B, H, T, T)
    std::printf("head 0 attention (rows: queries, columns: keys)\n");
    for (int64_t i = 0; i < T; ++i) {
        for (int64_t j = 0; j < T; ++j) std::printf(" %.2f", probs.index({0, 0, i, j}).item());
        std::printf("\n");
    }

    // Give W_g some weight: each query's gate now depends on its own token x_i only, so the
    // layer can keep one head's output for some tokens and drop it for others.
    {
        NoGradGuard no_grad;
        const Tensor w = randn(gated.w_g->weight.shape()) * 0.5;
        gated.w_g->weight.copy_(w);
    }
    AttentionCapture seen2;
    const Tensor y2 = gated.forward(x, nullptr, Tensor(), &seen2);
    const Tensor per_query = mean(seen2.gate, {3});  // (B, H, T): mean gate per head and query
    std::printf("\nafter W_g ~ N(0, 0.25): mean gate per query (rows: heads)\n");
    for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < T; ++i) std::printf(" %.2f", per_query.index({0, h, i}).item());
        std::printf("\n");
    }
    std::printf("attention probabilities changed by %.2g (the gate acts after softmax)\n",
                amax(abs(seen2.probs - probs)).item());
    std::printf("output changed by up to %.3f\n", amax(abs(y2 - y)).item());
    std::printf("\nparameters: gated %lld, plain %lld (the gate adds d x d = %lld)\n",
                static_cast<long long>(gated.num_parameters()), static_cast<long long>(plain.num_parameters()),
                static_cast<long long>(d * d));
}
