// test_cuda_lm.cpp — the whole language model trained on the CUDA device: one training step
// (forward, loss, backward, gradient clipping, AdamW) on Device::CUDA must land on the same
// parameters as the same step on the CPU, within 1e-5 in float32, and must be bitwise the
// same when it is run again (the kernels are deterministic: no float atomics).
//
// meson runs this suite with GATEDGRAD_CUDA=emulator, so on a machine without a GPU the
// step runs through every CUDA kernel family on the CPU emulator; tools/gpu-check runs it
// on a real GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gatedgrad.h"
#include "tests/check.h"
#include "tests/nn_check.h"

using namespace gg;
using namespace gg::nn;
using gg::testing::word_corpus;

namespace {

// Small enough for the emulator, yet every path of the LM: two layers, four query heads
// sharing two key/value heads (GQA), a sliding window shorter than the sequence, RoPE,
// SwiGLU, and a G1 gate when asked.
LMConfig tiny_lm(GatePosition gate) {
    LMConfig c;
    c.vocab_size = 19;
    c.max_len = 12;
    c.d_model = 16;
    c.n_layers = 2;
    c.d_ff = 24;
    c.attn.n_heads = 4;
    c.attn.n_kv_heads = 2;
    c.attn.window = 5;
    c.attn.gate = gate;
    return c;
}

struct StepResult {
    double loss = 0, grad_norm = 0;
    NamedTensors params, grads;  // on the CPU, after the step (grads: before it)
};

// One step of `model` on `device`, from the parameters `start`.
StepResult train_step(const LMConfig& config, const NamedTensors& start, Device device) {
    GatedTransformerLM model(config);
    model.load_state_dict(start);
    model.to(device);
    Generator gen(7);
    const Tensor ids = randint(0, config.vocab_size, {3, 10}, gen).to(device);
    const Tensor targets = randint(0, config.vocab_size, {3, 10}, gen).to(device);

    AdamW opt(model.parameters(), 1e-2, 0.9, 0.95, 1e-8, 0.1);
    const LMOutput out = model.forward(ids, targets);
    out.loss.backward();
    StepResult r;
    for (const auto& [name, p] : model.named_parameters())
        r.grads.emplace_back(name, p.grad().to(Device::CPU).clone());  // a copy: clipping scales in place
    r.grad_norm = clip_grad_norm(model.parameters(), 0.5);  // small: the clipping path runs
    opt.step();
    r.loss = out.loss.item();
    for (const auto& [name, p] : model.named_parameters()) r.params.emplace_back(name, p.detach().to(Device::CPU));
    return r;
}

// max |a − b| over every tensor of two same-named lists, and which tensor it was in.
std::pair<double, std::string> worst(const NamedTensors& a, const NamedTensors& b) {
    REQUIRE(a.size() == b.size());
    std::pair<double, std::string> w{0, ""};
    for (size_t i = 0; i < a.size(); ++i) {
        REQUIRE(a[i].first == b[i].first);
        const double d = testing::max_abs_diff(a[i].second, b[i].second);
        if (!(d <= w.first)) w = {d, a[i].first};
    }
    return w;
}

bool bitwise_equal(const NamedTensors& a, const NamedTensors& b) {
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].second.to_vector<float>() != b[i].second.to_vector<float>()) return false;
    return a.size() == b.size();
}

}  // namespace

TEST_CASE("one LM training step on the CUDA device equals the CPU's, and reruns bitwise") {
    for (GatePosition gate : {GatePosition::none, GatePosition::sdpa_output}) {
        CAPTURE(gate_position_name(gate));
        const LMConfig config = tiny_lm(gate);
        manual_seed(3);
        NamedTensors start;
        {
            const GatedTransformerLM init(config);
            for (const auto& [name, p] : init.named_parameters()) start.emplace_back(name, p.detach().clone());
        }
        const StepResult cpu = train_step(config, start, Device::CPU);
        const StepResult gpu = train_step(config, start, Device::CUDA);
        CHECK(std::isfinite(cpu.loss));
        CHECK(gpu.loss == doctest::Approx(cpu.loss).epsilon(1e-6));
        CHECK(gpu.grad_norm == doctest::Approx(cpu.grad_norm).epsilon(1e-5));
        CHECK(cpu.grad_norm > 0.5);  // clipping did scale the gradients
        const auto [grad_diff, grad_at] = worst(gpu.grads, cpu.grads);
        INFO("largest gradient difference " << grad_diff << " in " << grad_at);
        CHECK(grad_diff < 1e-5);
        const auto [param_diff, param_at] = worst(gpu.params, cpu.params);
        INFO("largest parameter difference " << param_diff << " in " << param_at);
        CHECK(param_diff < 1e-5);
        // The parameters did move: the comparison is not of two untouched copies.
        CHECK(worst(cpu.params, start).first > 1e-3);

        const StepResult again = train_step(config, start, Device::CUDA);
        CHECK(again.loss == gpu.loss);
        CHECK(bitwise_equal(again.grads, gpu.grads));
        CHECK(bitwise_equal(again.params, gpu.params));
    }
}

namespace {

TrainConfig trainer_config(const std::string& out_dir) {
    TrainConfig c;
    c.model.d_model = 16, c.model.n_layers = 1, c.model.attn.n_heads = 2, c.model.max_len = 12;
    c.batch_size = 2, c.seq_len = 12, c.steps = 6, c.warmup = 2, c.lr = 3e-3;
    c.eval_every = 3, c.eval_batches = 1, c.out_dir = out_dir;
    return c;
}

}  // namespace

TEST_CASE("the trainer on the CUDA device follows the CPU's losses, and its checkpoint resumes on the CPU") {
    namespace fs = std::filesystem;
    const auto data = word_corpus(40);
    const fs::path dir = fs::temp_directory_path() / ("gatedgrad_test_cuda_trainer_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    Trainer cpu(trainer_config(""), data);
    const TrainResult on_cpu = cpu.run(true);
    Trainer gpu(trainer_config(dir.string()), data, Device::CUDA);
    CHECK(gpu.device() == Device::CUDA);
    CHECK(gpu.model().parameters()[0].device() == Device::CUDA);
    const TrainResult first_half = gpu.run(true, 3);  // pauses with a checkpoint written from the device
    REQUIRE(first_half.log.size() == 3);
    for (size_t i = 0; i < 3; ++i) CHECK(first_half.log[i].loss == doctest::Approx(on_cpu.log[i].loss).epsilon(1e-5));

    Trainer resumed(trainer_config(""), data);  // on the CPU
    resumed.resume((dir / "model.safetensors").string());
    const TrainResult second_half = resumed.run(true);
    REQUIRE(second_half.log.size() == 3);
    for (size_t i = 0; i < 3; ++i)
        CHECK(second_half.log[i].loss == doctest::Approx(on_cpu.log[i + 3].loss).epsilon(1e-5));
    CHECK(std::isfinite(second_half.final_val_loss));
    fs::remove_all(dir);
}

// Mixed precision through every CUDA kernel family that autocast sends bfloat16 to (the
// mma.sync GEMM, attention, the casts) and those it keeps in float32 (RMSNorm, the loss):
// the same run on the two devices rounds the same values to bfloat16, so their losses agree
// far inside the 0.02 nats that bfloat16 is allowed against float32 (tests/test_bf16.cpp);
// what is left differs only in the order of float32 sums.
TEST_CASE("bf16 training on the CUDA device follows the CPU's bf16 run, and both track float32") {
    const auto data = word_corpus(40);
    TrainConfig mixed = trainer_config(""), single = trainer_config("");
    mixed.steps = single.steps = 12, mixed.eval_every = single.eval_every = 0;
    mixed.precision = DType::bf16;
    Trainer cpu(mixed, data), gpu(mixed, data, Device::CUDA), reference(single, data);
    const TrainResult on_cpu = cpu.run(true), on_gpu = gpu.run(true), in_f32 = reference.run(true);
    REQUIRE(on_gpu.log.size() == 12);
    double worst_devices = 0, worst_f32 = 0;
    for (size_t i = 0; i < 12; ++i) {
        worst_devices = std::max(worst_devices, std::abs(on_gpu.log[i].loss - on_cpu.log[i].loss));
        worst_f32 = std::max(worst_f32, std::abs(on_gpu.log[i].loss - in_f32.log[i].loss));
    }
    MESSAGE("largest loss difference over 12 steps: CUDA-CPU in bf16 " << worst_devices << ", bf16-f32 " << worst_f32);
    CHECK(worst_devices <= 0.005);
    CHECK(worst_f32 <= 0.02);
    CHECK(on_gpu.log.back().loss < on_gpu.log.front().loss);  // it learned
    for (const Tensor& p : gpu.model().parameters()) {
        CHECK(p.dtype() == DType::f32);  // master weights
        CHECK(p.device() == Device::CUDA);
    }
    CHECK(std::abs(on_gpu.final_val_loss - on_cpu.final_val_loss) <= 0.005);
}
