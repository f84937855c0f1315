// training.h — tutorial 07's training run: the library's training loop (nn/train/trainer.h)
// with the knobs the stability search turns, and an emulation of bfloat16 matmul inputs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gatedgrad.h"

namespace tutorial {

// x rounded to the nearest bfloat16 (8 significand bits, round to nearest even, as a GPU's
// float → bf16 conversion), kept in x's dtype. The gradient passes straight through (∂/∂x = 1),
// as in mixed-precision training, where the float master weights get the bf16 gradients.
// An emulation on the host (to_vector / from_vector): slow, and only for small models.
gg::Tensor round_to_bf16(const gg::Tensor& x);

// Sets every Linear of the model (attention projections and gates, FFN, lm_head) to round its
// input to bfloat16 first: the inputs of every matmul with a weight. The attention products
// QKᵀ and PV inside the fused kernel stay in float32.
void round_matmul_inputs_to_bf16(gg::nn::GatedTransformerLM& model);

// One training run's settings: the model and what the search varies.
struct RunSettings {
    int64_t layers = 8, d_model = 64, heads = 4;
    std::string init = "gpt2";  // or "torch" (LMConfig::init)
    bool gated = false;         // the G1 gate (SDPA output, element-wise sigmoid) or none
    int64_t steps = 200, warmup = 10, batch = 8, seq_len = 64;
    double lr = 1e-2;
    double clip = 1.0;          // gradient-norm clipping; 0: none
    double weight_decay = 0.1;
    bool decay_matrices_only = false;  // false: AdamW decays every parameter, as the trainer does
    bool bf16 = false;                 // round_matmul_inputs_to_bf16
    uint64_t seed = 1;                 // initial weights and batch order

    gg::nn::TrainConfig train_config() const;  // the trainer's config of the same run
};

struct RunLog {
    std::vector<double> loss, grad_norm;  // every step; grad_norm before clipping
    double val_loss = NAN;                // NaN when the loss stopped being finite
    bool nonfinite = false;
    double seconds = 0;
};

// Trainer::run's loop (schedule, batches, AdamW, clipping, final validation), step for step;
// with weight decay on all parameters and no bf16 it gives the trainer's numbers bit for bit
// (tested). Decay on matrices only: two AdamW groups, matrices with weight_decay, the rest without.
RunLog train_run(const RunSettings& s, const std::shared_ptr<const gg::nn::BatchSource>& data);

}  // namespace tutorial
