// A first program with gatedgrad, built against the installed library (README.md here):
// a tiny language model with the G1 gate (a sigmoid gate on each head's attention output),
// trained for a few steps on a short text, printing the loss as it falls.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

int main() {
    // Some text to learn from: the model predicts each next byte.
    std::vector<std::string> documents;
    for (int i = 0; i < 40; ++i)
        documents.push_back("Gated attention multiplies each head's output by a sigmoid of the input. " +
                            std::to_string(i) + "\n");
    TextDataset data(documents);

    // The model: 2 blocks of width 32 with 4 heads, RoPE, and the G1 gate (the default).
    LMConfig config;
    config.d_model = 32;
    config.n_layers = 2;
    config.attn.n_heads = 4;
    config.attn.gate = GatePosition::sdpa_output;
    manual_seed(1);
    GatedTransformerLM model(config);
    std::printf("%lld parameters\n", static_cast<long long>(model.num_parameters()));

    // The PyTorch loop: forward, zero_grad, backward, step.
    const int64_t B = 8, T = 32;
    AdamW opt(model.parameters(), 3e-3);
    Generator gen(1);
    for (int step = 1; step <= 30; ++step) {
        const Batch batch = data.train_batch(B, T, gen);  // inputs, targets: (B, T) int64
        const Tensor loss = model.forward(batch.inputs, batch.targets).loss;
        opt.zero_grad();
        loss.backward();
        opt.step();
        if (step == 1 || step % 10 == 0) std::printf("step %2d  loss %.3f nats/byte\n", step, loss.item());
    }
}
