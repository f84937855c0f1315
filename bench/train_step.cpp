// train_step.cpp — time one training step (forward + backward + AdamW) of a preset model.
//
//   ./build/bench/train_step tiny [steps] [--device cpu|cuda]  → one JSON line: median ms per step, tokens/s
//                                                                (and on cuda the kernels launched per step)
//   ./build/bench/train_step medium --device cuda --precision bf16
//                                                              → the step in mixed precision, as the trainer
//                                                                takes it: forward under gg::Autocast(bf16)
//   ./build/bench/train_step tiny --config                     → the model config JSON (for the PyTorch peer)
//   ./build/bench/train_step small --layers 6 --d-model 256 --heads 8 --seq-len 256 --batch 16
//                                                              → the preset's model with other shapes
//
// bench/compare_train_step.sh runs this and bench/train_step_torch.py on the same shapes;
// tools/gpu-check runs it on the GPU and the CPU; bench/gpu against PyTorch eager (and, in bf16, against
// PyTorch under torch.autocast).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda.h"
#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: train_step tiny|small|medium [steps] [--device cpu|cuda] [--precision f32|bf16]\n"
                     "                  [--layers N] [--d-model N] [--heads N] [--seq-len N] [--batch N] [--config]\n");
        return 2;
    }
    try {
        TrainConfig config = TrainConfig::preset(argv[1]);
        int steps = 20;
        Device device = Device::CPU;
        bool print_config = false;
        // The shape flags replace the preset's; everything else (SwiGLU, RMSNorm, RoPE, the G1
        // gate) stays the preset's model.
        const std::pair<const char*, int64_t*> shape_flags[] = {
            {"--layers", &config.model.n_layers}, {"--d-model", &config.model.d_model},
            {"--heads", &config.model.attn.n_heads}, {"--seq-len", &config.seq_len}, {"--batch", &config.batch_size}};
        for (int i = 2; i < argc; ++i) {
            const auto flag =
                std::ranges::find_if(shape_flags, [&](const auto& f) { return std::strcmp(argv[i], f.first) == 0; });
            if (flag != std::end(shape_flags) && i + 1 < argc) {
                *flag->second = std::atoll(argv[++i]);
            } else if (std::strcmp(argv[i], "--config") == 0) {
                print_config = true;
            } else if (std::strcmp(argv[i], "--precision") == 0 && i + 1 < argc) {
                config.precision = parse_precision(argv[++i]);
            } else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
                const std::string name = argv[++i];
                if (name != "cpu" && name != "cuda") throw std::invalid_argument("--device " + name + ": cpu or cuda");
                device = name == "cuda" ? Device::CUDA : Device::CPU;
            } else if ((steps = std::atoi(argv[i])) <= 0) {
                throw std::invalid_argument(std::string("steps: a positive count, not '") + argv[i] + "'");
            }
        }
        config.model.max_len = config.seq_len;
        config.validate();
        if (print_config) {
            std::printf("%s\n", config.model.to_json().c_str());
            return 0;
        }
        manual_seed(0);
        GatedTransformerLM model(config.model);
        model.to(device);
        AdamW opt(model.parameters(), 1e-3, 0.9, 0.95, 1e-8, 0.1);
        const int64_t B = config.batch_size, T = config.seq_len;
        Generator gen(0);
        // Random tokens: the step's cost does not depend on the text.
        const Tensor ids = randint(0, config.model.vocab_size, {B, T}, gen).to(device);
        const Tensor targets = randint(0, config.model.vocab_size, {B, T}, gen).to(device);
        std::vector<double> ms;
        double last_loss = 0;  // reported, so that a run that diverged (NaN) shows it
        const bool on_cuda = device == Device::CUDA;
        int64_t launches_before = 0;  // cuda::kernel_launches() when the timed steps begin
        for (int s = 0; s < steps + 3; ++s) {  // the first 3 steps warm caches and allocators
            if (on_cuda && s == 3) launches_before = cuda::kernel_launches();
            const auto t0 = std::chrono::steady_clock::now();
            Tensor loss;
            {
                // The trainer's scope (nn/train/trainer.cpp): forward only, backward follows its dtypes.
                const Autocast mixed_precision(config.precision);
                loss = model.forward(ids, targets).loss;
            }
            opt.zero_grad();
            loss.backward();
            clip_grad_norm(opt.params(), 1.0);
            opt.step();
            backend(device).synchronize();  // a GPU step has ended when its kernels have
            const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (s >= 3) ms.push_back(dt);
            last_loss = loss.item();  // after the clock stops
        }
        std::sort(ms.begin(), ms.end());
        const double median = ms[ms.size() / 2];
        const std::string where = on_cuda ? cuda::device_name() : "cpu";
        // Launches cost a GPU step time of their own, whatever the kernels do (cuda/launch.h).
        const std::string launches =
            on_cuda ? ", \"launches_per_step\": " + std::to_string((cuda::kernel_launches() - launches_before) / steps)
                    : "";
        std::printf("{\"impl\": \"gatedgrad\", \"preset\": \"%s\", \"device\": \"%s\", \"params\": %lld, "
                    "\"precision\": \"%s\", \"batch\": %lld, \"seq_len\": %lld, \"median_ms\": %.2f, "
                    "\"tokens_per_s\": %.0f, \"loss\": %.4f%s}\n",
                    argv[1], where.c_str(), static_cast<long long>(model.num_parameters()),
                    precision_name(config.precision), static_cast<long long>(B), static_cast<long long>(T), median,
                    B * T / median * 1000, last_loss, launches.c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "train_step: %s\n", e.what());
        return 1;
    }
}
