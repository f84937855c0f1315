// The settings of a training run (train_config.h): TrainConfig's rows, its JSON and checks
// read off them, its presets and its schedule.
#include "nn/train/train_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "nn/json_fields.h"

namespace gg::nn {

// ---------------------------------------------------------------- the rows

const Fields<TrainConfig>& train_config_fields() {
    using T = TrainConfig;
    using Limit = TrainConfigLimits;
    constexpr Resume record = Resume::not_compared, may_change = Resume::may_change;
    static const Fields<TrainConfig> rows = {
        // key, where it lives and its check, train's flag, help, what a resumed run may do
        {"batch_size", at<&T::batch_size>({1, Limit::batch_size}), "--batch",
         "sequences per batch (per rank under mpirun: N ranks train on N x this)"},
        // train checks it on its own, first: a run resumes on the ranks it began on
        {"world_size", at<&T::world_size>({1, Limit::world_size}), nullptr, "ranks (processes) the run trains on", record},
        {"seq_len", at<&T::seq_len>({2, LMConfigLimits::max_len}), "--seq-len", "tokens per sequence, BOS included"},
        {"steps", at<&T::steps>({0, Limit::steps}), "--steps", "training steps"},
        {"lr", at<&T::lr>({0, INFINITY, true}), "--lr", "peak learning rate"},
        {"min_lr_ratio", at<&T::min_lr_ratio>({0, 1}), nullptr, "the cosine ends at lr times this"},
        {"warmup", at<&T::warmup>({0, Limit::steps}), "--warmup", "linear warmup steps"},
        {"weight_decay", at<&T::weight_decay>({0}), "--weight-decay", "AdamW weight decay"},
        {"independent_weight_decay", at<&T::independent_weight_decay>(), "--independent-wd",
         "weight decay independent of the learning rate: each step keeps 1 - weight_decay * lr/peak of every "
         "weight (Wortsman et al. 2023), not 1 - lr * weight_decay"},
        {"precision", at<&T::precision>(parse_precision, precision_name), "--precision",
         "f32, or bf16: mixed precision as torch.autocast (matmuls and attention in bfloat16 with float32 sums; "
         "norms, softmax, the loss, the weights and AdamW's moments in float32)"},
        {"z_loss", at<&T::z_loss>({0}), "--z-loss",
         "add this times the mean (log Z)^2 of the output softmax to the loss (0: off)"},
        {"beta1", at<&T::beta1>({0, 1, false, true}), nullptr, "AdamW's β1"},
        {"beta2", at<&T::beta2>({0, 1, false, true}), nullptr, "AdamW's β2"},
        {"grad_clip", at<&T::grad_clip>({0}), "--clip", "clip the gradient norm to this (0: off)"},
        {"eval_every", at<&T::eval_every>({0, Limit::steps}), "--eval-every", "validate every N steps (and at the end)"},
        {"eval_batches", at<&T::eval_batches>({1, Limit::eval_batches}), nullptr, "batches of a validation"},
        {"log_every", at<&T::log_every>({0, Limit::steps}), nullptr, "print a line every N steps"},
        {"probe_every", at<&T::probe_every>({0, Limit::steps}), "--probe-every",
         "every N steps, write the largest attention logit, smallest attention entropy, mean gate, output "
         "log Z and largest activation of a fixed validation batch into log.jsonl (0: never; not with --score-fn "
         "sigmoid or softpick)"},
        {"ckpt_every", at<&T::ckpt_every>({0, Limit::steps}), "--ckpt-every",
         "checkpoint every N steps (0: only at the end)"},
        {"ckpt_minutes", at<&T::ckpt_minutes>({0}), "--ckpt-minutes",
         "also checkpoint when M minutes have passed since the last checkpoint (0: never)", may_change, "M"},
        {"seed", at<&T::seed>({}), "--seed", "initialisation and batch order"},
        {"out_dir", at<&T::out_dir>(), nullptr, "where checkpoints and log.jsonl go", record},
        {"data", at<&T::data>(), "--data", "text files or folders of them (see Data below)", may_change, "PATH"},
        {"val_fraction", at<&T::split, &CorpusSplit::val_fraction>({0, 0.5, true}), "--val-fraction",
         "share of the text kept for validation"},
        {"split", at<&T::split, &CorpusSplit::mode>(parse_split_mode, split_mode_name), "--split",
         "where validation text is cut off: auto, documents or bytes"},
        // The run's record, which train and the trainer check on their own.
        {"data_fingerprint", at<&T::data_fingerprint>(), nullptr, "the files, sizes and hash the run trains on", record},
        {"run_id", at<&T::run_id>(), nullptr, "the run's name in its checkpoints and log lines", record},
        {"restart_step", at<&T::restart_step>({0, Limit::steps}), nullptr, "where a lengthened run's cosine restarts",
         record},
        {"restart_lr", at<&T::restart_lr>({0}), nullptr, "the learning rate it restarts from", record},
    };
    return rows;
}

const Fields<TrainConfig>& run_fields() {
    static const Fields<TrainConfig> rows = [] {
        Fields<TrainConfig> all = lift(lm_config_fields(), &TrainConfig::model);
        all.insert(all.end(), train_config_fields().begin(), train_config_fields().end());
        return all;
    }();
    return rows;
}

// ---------------------------------------------------------------- JSON and checks

std::string TrainConfig::to_json() const {
    // The model's fields in alphabetical order, as config.json has always had them.
    nlohmann::ordered_json j = {{"model", nlohmann::json::parse(model.to_json())}};
    write_fields(train_config_fields(), *this, j);
    return j.dump(2);
}

TrainConfig TrainConfig::from_json(const std::string& text) {
    JsonFields fields("train config", text);
    TrainConfig c;
    if (std::string model; fields.read_object("model", model)) c.model = LMConfig::from_json(model);
    read_fields(fields, train_config_fields(), c);
    fields.finish();
    c.validate();
    return c;
}

void TrainConfig::validate() const {
    model.validate();
    check_fields(train_config_fields(), *this, "train config");
    const auto fail = [](const std::string& why) { throw std::invalid_argument("train config: " + why); };
    if (data.empty()) fail("data names no corpus");
    if (model.positions == PositionEncoding::learned && seq_len > model.max_len)
        fail("seq_len " + std::to_string(seq_len) + " exceeds the model's max_len " + std::to_string(model.max_len) +
             " (learned positions)");
}

LrSchedule TrainConfig::schedule() const {
    // A warmup longer than the run would leave no room for the decay.
    const int64_t warm = std::max<int64_t>(0, std::min(warmup, steps - 1));
    return {LrSchedule::Decay::cosine, lr, lr * min_lr_ratio, warm, steps, restart_step, restart_lr};
}

TrainConfig TrainConfig::preset(const std::string& given) {
    std::string name = given;  // case-insensitive, as the gate names
    std::ranges::transform(name, name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    TrainConfig c;
    if (name == "tiny") {  // ~0.14M parameters: a couple of minutes on 2 cores
        c.model.d_model = 64, c.model.n_layers = 2, c.model.attn.n_heads = 4;
        c.batch_size = 16, c.seq_len = 64, c.steps = 600, c.lr = 3e-3, c.warmup = 30;
    } else if (name == "small") {  // ~0.9M parameters
        c.model.d_model = 128, c.model.n_layers = 4, c.model.attn.n_heads = 4;
        c.batch_size = 16, c.seq_len = 128, c.steps = 2000, c.lr = 2e-3, c.warmup = 100;
    } else if (name == "medium") {  // ~15M parameters, context 256: a GPU's model (tools/demo --device cuda)
        c.model.d_model = 384, c.model.n_layers = 8, c.model.attn.n_heads = 6;
        c.batch_size = 32, c.seq_len = 256, c.steps = 3000, c.lr = 1e-3, c.warmup = 200;
    } else {
        throw std::invalid_argument("preset '" + given + "' is not one of tiny, small, medium");
    }
    c.model.max_len = c.seq_len;
    c.eval_every = c.steps / 4;
    return c;
}

}  // namespace gg::nn
