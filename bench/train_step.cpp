// train_step.cpp — time one training step (forward + backward + AdamW) of a preset model.
//
//   ./build/bench/train_step tiny [steps]      → one JSON line: median ms per step, tokens/s
//   ./build/bench/train_step tiny --config     → the model config JSON (for the PyTorch peer)
//
// bench/compare_train_step.sh runs this and bench/train_step_torch.py on the same shapes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: train_step tiny|small [steps | --config]\n");
        return 2;
    }
    try {
        const TrainConfig config = TrainConfig::preset(argv[1]);
        if (argc > 2 && std::strcmp(argv[2], "--config") == 0) {
            std::printf("%s\n", config.model.to_json().c_str());
            return 0;
        }
        const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
        manual_seed(0);
        GatedTransformerLM model(config.model);
        AdamW opt(model.parameters(), 1e-3, 0.9, 0.95, 1e-8, 0.1);
        const int64_t B = config.batch_size, T = config.seq_len;
        Generator gen(0);
        // Random tokens: the step's cost does not depend on the text.
        const Tensor ids = randint(0, config.model.vocab_size, {B, T}, gen);
        const Tensor targets = randint(0, config.model.vocab_size, {B, T}, gen);
        std::vector<double> ms;
        for (int s = 0; s < steps + 3; ++s) {  // the first 3 steps warm caches and allocators
            const auto t0 = std::chrono::steady_clock::now();
            const Tensor loss = model.forward(ids, targets).loss;
            opt.zero_grad();
            loss.backward();
            clip_grad_norm(opt.params(), 1.0);
            opt.step();
            const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (s >= 3) ms.push_back(dt);
        }
        std::sort(ms.begin(), ms.end());
        const double median = ms[ms.size() / 2];
        std::printf("{\"impl\": \"gatedgrad\", \"preset\": \"%s\", \"params\": %lld, \"median_ms\": %.2f, "
                    "\"tokens_per_s\": %.0f}\n",
                    argv[1], static_cast<long long>(model.num_parameters()), median, B * T / median * 1000);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "train_step: %s\n", e.what());
        return 1;
    }
}
