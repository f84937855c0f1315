// Tutorial 05 — train a small gated language model with the Trainer.
//
// Build and run from the repository root (about a minute on 2 cores; --steps N for more):
//   tools/build tutorial_05_train_gated_lm && OMP_NUM_THREADS=1 ./build/tutorials/tutorial_05_train_gated_lm
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

int main(int argc, char** argv) {
    // 1. The configuration: the `tiny` preset (2 layers, d 64, 4 heads, RoPE, SwiGLU) with
    //    the G1 gate, which is the default attention.
    TrainConfig config = TrainConfig::preset("tiny");
    config.steps = argc > 2 && std::strcmp(argv[1], "--steps") == 0 ? std::atoi(argv[2]) : 200;
    config.eval_every = config.steps / 2;
    config.log_every = config.steps / 4;

    // 2. The data: fortunes, split into training and validation text; each sequence is
    //    BOS followed by 63 bytes.
    auto data = std::make_shared<TextDataset>(load_documents(config.data));
    std::printf("%zu training bytes, %zu validation bytes; unigram baseline %.3f nats/byte\n",
                data->train_stream().size(), data->val_stream().size(), data->unigram_entropy());

    // 3. Train: AdamW, warmup then cosine, gradient clipping, periodic validation.
    Trainer trainer(config, data);
    std::printf("%lld parameters, %lld steps of %lld x %lld tokens\n",
                static_cast<long long>(trainer.model().num_parameters()), static_cast<long long>(config.steps),
                static_cast<long long>(config.batch_size), static_cast<long long>(config.seq_len));
    const TrainResult result = trainer.run();
    std::printf("validation loss %.3f nats/byte = %.3f bits/byte (unigram: %.3f bits/byte) in %.0f s\n",
                result.final_val_loss, result.final_val_loss / M_LN2, data->unigram_entropy() / M_LN2, result.seconds);

    // 4. Look inside: how much attention goes to the BOS token, and what the gates do.
    trainer.model().eval();
    const ModelAnalysis report = analyze(trainer.model(), data->val_batch(0, 8, config.seq_len).inputs);
    std::printf("\n%s", report.table().c_str());

    // 5. Sample a continuation (the KV cache makes each new byte one short forward pass).
    Generator gen(1);
    std::vector<int64_t> prompt{kBOS};
    for (int64_t b : encode_bytes("The ")) prompt.push_back(b);
    const auto text = generate(trainer.model(), prompt, {80, 0.8, 0}, gen);
    std::printf("\nsample: The %s\n", decode_bytes(text).c_str());
}
