// Tutorial 03 — modules: parameters with names, an optimiser, a checkpoint.
//
// Build and run from the repository root:
//   tools/build tutorial_03_modules && ./build/tutorials/tutorial_03_modules
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "gatedgrad.h"

using namespace gg;

// A module registers its parameters and sub-modules; the base class then knows their
// dotted names, counts them, converts them and saves them.
// x (N, 1) → y (N, 1):  y = W2 silu(W1 x + b1) + b2, with RMSNorm before W2.
class TinyMLP : public nn::Module {
public:
    TinyMLP()
        : fc1(register_module("fc1", std::make_shared<nn::Linear>(1, 32))),
          norm(register_module("norm", std::make_shared<nn::RMSNorm>(32))),
          fc2(register_module("fc2", std::make_shared<nn::Linear>(32, 1))) {}
    Tensor forward(const Tensor& x) const { return fc2->forward(norm->forward(silu(fc1->forward(x)))); }
    std::shared_ptr<nn::Linear> fc1;
    std::shared_ptr<nn::RMSNorm> norm;
    std::shared_ptr<nn::Linear> fc2;
};

int main() {
    manual_seed(0);
    TinyMLP model;
    for (const auto& [name, p] : model.named_parameters()) std::printf("%-12s %s\n", name.c_str(), shape_str(p.shape()).c_str());
    std::printf("%lld parameters\n\n", static_cast<long long>(model.num_parameters()));

    // Fit y = sin(3x) on [-1, 1]: the PyTorch loop, step for step.
    std::vector<float> xs, ys;
    for (int i = 0; i < 64; ++i) xs.push_back(-1 + i / 32.0f), ys.push_back(std::sin(3 * xs.back()));
    const Tensor x = from_vector(xs, {64, 1}), y = from_vector(ys, {64, 1});
    nn::AdamW opt(model.parameters(), 1e-2);
    for (int step = 0; step <= 300; ++step) {
        const Tensor loss = mean(pow(model.forward(x) - y, 2));
        opt.zero_grad();
        loss.backward();
        opt.step();
        if (step % 100 == 0) std::printf("step %3d  mse %.5f\n", step, loss.item());
    }

    // Save, load into a fresh model, and check it computes the same thing.
    const std::string path = (std::filesystem::temp_directory_path() / "tutorial_03.safetensors").string();
    nn::save(model, path, {{"note", "tutorial 03"}});
    TinyMLP copy;
    nn::load(copy, path);
    const double diff = amax(abs(copy.forward(x) - model.forward(x))).item();
    std::printf("\nsaved and reloaded %lld bytes of safetensors; the copy differs by %g\n",
                static_cast<long long>(std::filesystem::file_size(path)), diff);
    std::filesystem::remove(path);
}
