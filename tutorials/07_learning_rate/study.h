// study.h — what tutorial 07's files share: the four variants, one run's settings and
// result, the two measures of the study (spikes, LR sensitivity), and the report.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/results.h"
#include "gatedgrad.h"

namespace tutorial {

// The four models of the study: the baseline, the known fix (QK-norm: the positive control),
// the G1 gate, and both (the paper's own setting: its models all use QK-norm).
struct Variant {
    std::string name;
    bool qk_norm, gated;
};
const std::vector<Variant>& variants();

// One training run's settings; everything but the variant, the rate and the seed is shared.
struct RunSettings {
    int64_t layers = 8, d_model = 64, heads = 4;
    int64_t batch = 8, seq_len = 64;
    int64_t steps = 2000, warmup = 100;  // warmup: 5% of the run
    double clip = 1.0;                   // gradient-norm clipping (the trainer's default)
    double weight_decay = 0;             // AdamW's λ; with independent_wd, λ·s_t per step
    bool independent_wd = false;
    double z_loss = 0;                   // off: it is a fix for the output logits, not studied here
    gg::DType precision = gg::DType::f32;  // bf16: mixed precision (gg::Autocast), as the paper trains
    int64_t probe_every = 50;            // stability statistics (nn/analysis/stability.h)
    Variant variant{"baseline", false, false};
    double lr = 1e-2;
    uint64_t seed = 1;                   // initial weights and batch order

    gg::nn::TrainConfig train_config() const;
};

// What one run gives back (as JSON from its child process, then parsed).
struct Probe {
    int64_t step;                      // 0: before the first update
    double max_logit, min_entropy;     // over layers: the largest attention logit, the smallest head entropy
    double gate_mean, log_z, max_hidden;  // gate_mean NaN without a gate
};
struct RunResult {
    size_t variant;
    double lr;
    uint64_t seed;
    double initial_loss;  // ℓ_0: the validation loss before training
    double val_loss;      // after the last step; NaN when the loss stopped being finite
    bool diverged;        // not finite, or ended above the unigram entropy
    int64_t spikes;
    double max_grad;      // largest gradient norm (before clipping) after the warmup
    double seconds;
    std::vector<double> loss;  // training loss per step
    std::vector<Probe> probes;
};

// A loss spike: a step whose training loss exceeds the minimum of the previous 20 steps by
// more than 1 nat; consecutive such steps are one spike. In the earlier study's smooth runs
// (results/history/) hard batches alone lifted the loss by up to 0.85 nats.
int64_t count_spikes(const std::vector<double>& loss);

// Wortsman et al. 2023 (arXiv 2309.14322), LR sensitivity: E_η[min(ℓ_η, ℓ_0) − ℓ*] over the
// swept rates η, with ℓ_η the final loss at η (a diverged run counts as ℓ_0: it learned
// nothing), ℓ_0 the loss before training and ℓ* the best final loss over the rates. 0: every
// rate as good as the best; ℓ_0 − ℓ*: only the best rate learned anything.
double lr_sensitivity(const std::vector<double>& final_loss, double initial_loss);

// The tables (printed) and the results folder: runs.csv, probes.csv, steps.csv, summary.json
// and the pictures. `quick` (one rate) prints every variant's logit growth at that rate in place
// of the sensitivity and the verdict.
struct Study {
    RunSettings settings;            // shared by every run (variant, lr and seed per run)
    std::vector<double> lrs;         // ascending
    int64_t seeds = 2;
    double unigram = 0;              // unigram entropy of the training bytes (diverged above)
    std::vector<RunResult> runs;
};
json report(const Study& study, bool quick);
void write_results(const std::filesystem::path& dir, const Study& study, const json& summary);
// final_loss_vs_lr.svg, attn_logit_vs_step.svg, entropy_vs_step.svg of a study, in dir.
void plot_study(const std::filesystem::path& dir, const Study& study);
// The Study a results folder holds (summary.json, runs.csv, probes.csv, steps.csv), for --replot.
Study read_study(const std::filesystem::path& dir);

}  // namespace tutorial
