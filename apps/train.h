// What the files of train share: its arguments (train.cpp registers them), the config they
// make (train_config.cpp), and how a run stops and agrees with its ranks (train_job.cpp).
#pragma once
#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cli.h"
#include "config_options.h"
#include "nn/train/trainer.h"

struct TrainArgs {
    CLI::App* cmd = nullptr;
    std::string preset, config_file, out, device = "cpu";
    std::string hybrid;  // "L:F": the model's layer_types (hybrid_layer_types)
    bool resume = false, force = false, quiet = false, allow_data_change = false;
    double rank_timeout = 0;  // 0: Trainer's default
    // One option for each setting with a flag (nn/config_fields.h), given on top of the base config.
    std::unique_ptr<ConfigOptions<gg::nn::TrainConfig>> options;
    CLI::Option *steps = nullptr, *warmup = nullptr, *eval_every = nullptr;  // --steps rescales the others
};

// ---------------------------------------------------------------- train_config.cpp

// The config a run in `dir` was started with: its config.json or, where that is gone, the
// one its checkpoint holds; none when neither is there.
std::optional<gg::nn::TrainConfig> run_config(const std::filesystem::path& dir);

// The config of a run: a base (preset, --config file, the resumed run's config or the
// defaults), then every flag given on top.
gg::nn::TrainConfig train_config(const TrainArgs& a);

// What a resumed run may and may not change, against the config it was started with.
// Throws a UsageError naming the first architecture field that differs; returns the
// settings that change, "--lr 0.003 → 0.01, --steps 6 → 12", or "".
std::string resume_changes(gg::nn::TrainConfig run, gg::nn::TrainConfig given);

// The first part of two CorpusFingerprint texts that differs, for the error that refuses it.
std::string fingerprint_change(const std::string& was, const std::string& now);

// ---------------------------------------------------------------- train_job.cpp

// The first SIGINT or SIGTERM asks the trainer to stop at the next step boundary (stop_requested,
// cli.h); a second one ends the process at once.
void stop_on_signals();

// The signal that stopped the run and where it came from, for the line that says so.
std::string stop_cause(const Job& job, int signal, int rank, int my_rank);

// Every rank runs the same checks before the first step. When any fails, every rank stops:
// the lowest rank that failed rethrows its error (one line on stderr), the others exit with
// its code without a word; `undo` (rank 0: remove the folder this run made) runs first. When
// all pass, an error on one rank alone ends the whole job from here on (Job::abort_on_error).
void agree_to_start(Job& job, std::exception_ptr failure, const std::function<void()>& undo);

// One GPU per rank: rank k of a machine sees only the k-th of the GPUs it could see (before
// anything touches CUDA), as device 0.
void one_gpu_per_rank(int local_rank);

// The run's id as rank 0 drew it: 16 hex digits sent as two exact 32-bit halves.
std::string rank0_run_id(gg::dist::ProcessGroup& ranks, const std::string& mine);

// Every rank's settings against rank 0's (distributed/agreement.h), before the first collective whose
// size depends on them: the whole config, the data, the step it starts at, the run it resumes.
// On a difference every rank stops; rank 0 names the field (exit 2 for a setting of the command
// line or config file, 1 for the data or the checkpoint's state).
void check_ranks_agree(gg::dist::ProcessGroup& ranks, const TrainArgs& a, const gg::nn::Trainer& trainer, const std::string& resumed_id,
                       const std::function<void()>& undo);
