// training.cpp — the run of training.h.
#include "training.h"

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace tutorial {

using namespace gg;
using namespace gg::nn;

namespace {
// float32 → the nearest bfloat16 (the upper 16 bits), ties to even; NaN and ±inf unchanged.
float bf16_nearest(float x) {
    if (!std::isfinite(x)) return x;
    uint32_t bits = std::bit_cast<uint32_t>(x);
    bits += 0x7FFFu + ((bits >> 16) & 1u);  // round half to even on the 16 bits dropped
    return std::bit_cast<float>(bits & 0xFFFF0000u);
}
}  // namespace

Tensor round_to_bf16(const Tensor& x) {
    const bool f64 = x.dtype() == DType::f64;
    if (!f64 && x.dtype() != DType::f32)
        throw std::invalid_argument(std::string("round_to_bf16: expected a float32 or float64 tensor, got ") + dtype_name(x.dtype()));
    Tensor out;
    if (f64) {  // through float32, as a float64 → bf16 conversion would
        std::vector<double> v = x.to_vector<double>();
        for (double& e : v) e = bf16_nearest(float(e));
        out = from_vector(v, x.shape(), x.device());
    } else {
        std::vector<float> v = x.to_vector<float>();
        for (float& e : v) e = bf16_nearest(e);
        out = from_vector(v, x.shape(), x.device());
    }
    return record("round_to_bf16", out, {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

void round_matmul_inputs_to_bf16(GatedTransformerLM& model) {
    std::vector<Linear*> linears;
    for (const auto& block : model.blocks) {
        for (const auto& l : {block->attn->w_q, block->attn->w_k, block->attn->w_v, block->attn->w_o, block->attn->w_g})
            if (l) linears.push_back(l.get());
        if (block->ffn) linears.insert(linears.end(), {block->ffn->w1.get(), block->ffn->w2.get(), block->ffn->w3.get()});
    }
    if (model.lm_head) linears.push_back(model.lm_head.get());
    for (Linear* l : linears) l->input_transform = round_to_bf16;
}

TrainConfig RunSettings::train_config() const {
    TrainConfig c;
    c.model.n_layers = layers, c.model.d_model = d_model, c.model.attn.n_heads = heads;
    c.model.init = init == "torch" ? LMInit::torch : LMInit::gpt2;
    c.model.attn.gate = gated ? GatePosition::sdpa_output : GatePosition::none;
    c.model.max_len = c.seq_len = seq_len;
    c.batch_size = batch, c.steps = steps, c.warmup = warmup, c.lr = lr, c.seed = seed;
    c.grad_clip = clip, c.weight_decay = weight_decay;
    c.eval_every = 0;  // validate once, at the end
    return c;
}

RunLog train_run(const RunSettings& s, const std::shared_ptr<const BatchSource>& data) {
    const TrainConfig c = s.train_config();
    const auto start = std::chrono::steady_clock::now();
    manual_seed(c.seed);  // the initial weights, as the trainer draws them
    GatedTransformerLM model(c.model);
    if (s.bf16) round_matmul_inputs_to_bf16(model);
    // Two parameter groups: AdamW decays the first only. Matrices (dim ≥ 2: projections,
    // embeddings) vs vectors (norm gains, biases) when decay_matrices_only.
    std::vector<Tensor> decayed, kept, all = model.parameters();
    for (const Tensor& p : all) (s.decay_matrices_only && p.dim() < 2 ? kept : decayed).push_back(p);
    std::vector<std::unique_ptr<AdamW>> groups;
    groups.push_back(std::make_unique<AdamW>(decayed, c.lr, c.beta1, c.beta2, 1e-8, c.weight_decay));
    if (!kept.empty()) groups.push_back(std::make_unique<AdamW>(kept, c.lr, c.beta1, c.beta2, 1e-8, 0.0));
    const int64_t warmup = std::max<int64_t>(0, std::min(c.warmup, c.steps - 1));  // as the trainer clamps it
    const LrSchedule schedule{LrSchedule::Decay::cosine, c.lr, c.lr * c.min_lr_ratio, warmup, c.steps};
    Generator sampler(c.seed);
    RunLog log;
    model.train();
    for (int64_t step = 0; step < c.steps; ++step) {
        for (auto& group : groups) group->lr = lr_at(schedule, step);
        const Batch batch = data->train_batch(c.batch_size, c.seq_len, sampler);
        const Tensor loss = model.forward(batch.inputs, batch.targets).loss;
        const double value = loss.item();
        if (!std::isfinite(value)) {
            log.nonfinite = true;
            break;
        }
        model.zero_grad();
        loss.backward();
        log.loss.push_back(value);
        log.grad_norm.push_back(clip_grad_norm(all, c.grad_clip > 0 ? c.grad_clip : INFINITY));
        for (auto& group : groups) group->step();
    }
    if (!log.nonfinite) {  // Trainer::evaluate: the mean over the first eval_batches validation batches
        NoGradGuard no_grad;
        model.eval();
        const int64_t n = std::min(c.eval_batches, data->val_batches(c.batch_size, c.seq_len));
        double total = 0;
        for (int64_t i = 0; i < n; ++i) {
            const Batch b = data->val_batch(i, c.batch_size, c.seq_len);
            total += model.forward(b.inputs, b.targets).loss.item();
        }
        log.val_loss = total / double(n);
    }
    log.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return log;
}

}  // namespace tutorial
