// train_config.h — the settings of a training run: TrainConfig, and its rows in the table of
// settings (nn/config_fields.h explains the rows, and how to add one).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/config_fields.h"
#include "nn/optim/schedule.h"
#include "nn/train/data.h"
#include "nn/transformer.h"
#include "tensor/dtype.h"

namespace gg::nn {

struct TrainConfig {
    LMConfig model;
    int64_t batch_size = 16;  // sequences per step on each rank: N · batch_size in all
    int64_t world_size = 1;   // ranks (processes) the run trains on; see Trainer::distribute
    int64_t seq_len = 64;  // T; also model.max_len for learned positions
    int64_t steps = 300;
    double lr = 3e-3;
    double min_lr_ratio = 0.1;  // cosine ends at lr · this
    int64_t warmup = 30;
    double weight_decay = 0.1;
    // false: AdamW decays p by lr·weight_decay per step (torch's AdamW); true: by
    // weight_decay · lr/peak, independent of the peak rate (AdamW::decay_peak_lr).
    bool independent_weight_decay = false;
    // f32, or bf16: mixed precision, every forward under gg::Autocast (autograd/autocast.h):
    // GEMMs and attention in bfloat16, the rest, the parameters and AdamW's moments float32.
    DType precision = DType::f32;
    double z_loss = 0;  // coefficient of the z-loss mean (log Z)² added to the loss (ops.h); 0: none
    double beta1 = 0.9, beta2 = 0.95;
    double grad_clip = 1.0;  // 0: off
    int64_t eval_every = 100;
    int64_t eval_batches = 8;
    int64_t log_every = 10;
    // Every this many steps (and after the last), measure_stability on the first validation
    // batch: into the StepLog and the JSON lines. 0: never.
    int64_t probe_every = 50;
    int64_t ckpt_every = 0;  // 0: only at the end
    double ckpt_minutes = 5;  // also checkpoint when this long has passed since the last one (0: never)
    uint64_t seed = 1;       // model init and batch order
    std::string out_dir;     // checkpoints and log.jsonl go here; empty: nowhere
    std::vector<std::string> data{kDefaultCorpus};
    CorpusSplit split;       // how data is cut into training and validation text
    std::string data_fingerprint;  // CorpusFingerprint::text() of the data the run trains on
    // Names one run across its config.json, checkpoints and log lines (new_run_id()), so a
    // checkpoint copied in from another run is refused on resume. Empty: runs from before ids.
    std::string run_id;
    // Set by Trainer::resume when a run is resumed with a different number of steps: the
    // cosine restarts at this step from this learning rate (schedule.h). 0: never restarted.
    int64_t restart_step = 0;
    double restart_lr = 0;

    LrSchedule schedule() const;  // warmup + cosine (with the restart, if any) over `steps`
    std::string to_json() const;
    // Fields not given keep defaults; throws naming a field of the wrong type or one
    // validate() refuses.
    static TrainConfig from_json(const std::string& json);
    static TrainConfig preset(const std::string& name);     // "tiny", "small", "medium"
    // Checks every field against its row's range (and model.validate()), and the fields that
    // go together; throws std::invalid_argument naming the field, its value and its range.
    void validate() const;
};

struct TrainConfigLimits {
    static constexpr int64_t steps = 1'000'000'000'000;  // also warmup, eval_every, log_every, ckpt_every
    static constexpr int64_t batch_size = int64_t(1) << 16, eval_batches = int64_t(1) << 20;
    static constexpr int64_t world_size = int64_t(1) << 16;
};

// TrainConfig's own rows, in the order of its JSON (after "model"): nn/train/train_config.cpp.
const Fields<TrainConfig>& train_config_fields();

// Every setting of a run, as rows of a TrainConfig: the model's (lm_config_fields()), then
// the training's. The command line, the resume check and train's description read these.
const Fields<TrainConfig>& run_fields();

}  // namespace gg::nn
