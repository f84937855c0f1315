// trainer.h — the training loop every app and tutorial shares.
//
//   for step in [start, steps):
//       lr ← warmup + cosine schedule;  batch ← sampler (seeded)
//       loss = model(batch) [+ z_loss · mean (log Z)²];  loss.backward();  clip ‖g‖;  AdamW step
//       log (terminal + JSON lines);  validate every eval_every;
//       checkpoint every ckpt_every steps and every ckpt_minutes;  stop when asked to;
//       measure the stability statistics (analysis/stability.h) every probe_every
//
// A checkpoint holds the model, the AdamW state, the step and the sampler's generator
// state, so resuming continues the exact same run: 100 steps + resume + 100 steps gives
// bit-identical losses to 200 steps in one go. A NaN or infinite loss, or an update that
// leaves a weight NaN or infinite, stops training with a message naming the step; the
// last checkpoint written before it is kept (so every checkpoint written can be resumed).
// A stop request (stop_on: an app's Ctrl-C) ends the run at the next step boundary with a
// checkpoint, so the run can be resumed from there; the library installs no signal handler.
//
// Data parallel (distribute): N processes each run this loop on their own slice of every
// global batch of N · batch_size sequences. Every rank draws the whole global batch from the
// same seeded sampler and keeps rows [rank·B, (rank+1)·B), so the sampler state stays the
// same everywhere and N ranks × batch B take the steps one process with batch N·B would:
//
//   rank r:  loss_r = model(batch[rB : (r+1)B]);  backward → g_r
//   all:     g = (1/N) Σ_r g_r   (distributed/gradient_buckets.h)   = ∇ of the mean loss over N·B
//            clip ‖g‖; AdamW step — the same numbers on every rank, so the weights stay equal
//
// Validation batches (of N·B sequences) are dealt out round the ranks and their losses
// summed. Rank 0 alone writes log.jsonl and checkpoints; a checkpoint resumes on as many
// ranks as wrote it (TrainConfig::world_size).
#pragma once
#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/gradient_buckets.h"
#include "distributed/process_group.h"
#include "nn/train/data.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/schedule.h"
#include "nn/analysis/stability.h"
#include "nn/train/train_config.h"
#include "nn/transformer.h"

namespace gg::nn {

class LogFile;  // nn/train/log_file.h

struct StepLog {
    int64_t step;       // 1-based count of steps done
    double loss;        // training loss of this step's batch (nats/token)
    double lr;
    double grad_norm;   // before clipping
    double tokens_per_s;  // of the whole step: every rank's tokens
    double val_loss;    // NaN when not evaluated at this step
    double z_loss = NAN;  // the z-loss term mean (log Z)² of this step's batch, when it is on
    std::optional<StabilityStats> probe;  // at the steps TrainConfig::probe_every names
};

struct TrainResult {
    std::vector<StepLog> log;     // every step
    double final_val_loss = NAN;  // stays NaN when a run stops before its last evaluation
    double seconds = 0;
    bool diverged = false;        // stopped on a NaN/inf loss
    bool stopped = false;         // stopped on request (stop_on), after saving a checkpoint
    // The request's value (an app's signal number) on the lowest rank that was asked, and that rank.
    int stop_reason = 0, stop_rank = -1;
    // Stopped because log.jsonl could not take a step's line (a full disk): the message names
    // the file, the OS error and the checkpoint saved (with that line in it) or kept.
    bool log_failed = false;
    std::string message;          // why it stopped early, if it did
};

// 16 random hex digits from the system's entropy source: a run's id.
std::string new_run_id();

class Trainer {
public:
    // Validates the config and checks that a training step fits in `memory` bytes (0: what
    // this process may use; nn/transformer.h: check_memory), and that `data` has text for one
    // training and one validation batch, before building the model: a run that cannot finish
    // fails here, not after it trained. The model, its
    // optimiser state and every batch live on `device`; checkpoints hold the same bytes
    // whichever device wrote them, so a run can resume on another device.
    Trainer(const TrainConfig& config, std::shared_ptr<const BatchSource> data, Device device = Device::CPU,
            uint64_t memory = 0);
    // Continues from a checkpoint written by this trainer (same config). All or nothing:
    // before anything changes, every floating tensor must be finite, the step counts in
    // range (the run's in [0, TrainConfigLimits::steps], each optimiser step count in
    // [0, the run's]) and the sampler state a valid one (not all zero). When the config's
    // steps differ from those the checkpoint's run planned (a finished run extended), the
    // learning rate goes on from where the checkpoint left it, on a cosine re-stretched to
    // the new end (config().restart_step), and resume_note() says so. A checkpoint whose
    // run_id is not the config's is refused (a file copied in from another run), and so is
    // an out_dir/log.jsonl with a line of another run.
    // A checkpoint of a run on another number of ranks is refused too (its global batch was
    // another size).
    void resume(const std::string& checkpoint_path);
    // Trains data-parallel over `group` (before resume and run; every rank calls it): the
    // config's world_size must be the group's, and every rank's weights become rank 0's.
    void distribute(std::shared_ptr<dist::ProcessGroup> group);
    int rank() const { return group_ ? group_->rank() : 0; }
    int world_size() const { return group_ ? group_->world_size() : 1; }
    // Seconds spent averaging gradients across ranks since the trainer was built (0 in one process).
    double seconds_averaging() const { return buckets_ ? buckets_->seconds_averaging() : 0; }
    const std::string& resume_note() const { return resume_note_; }  // empty: nothing changed
    // Trains up to config.steps, or pauses after step `stop_at` (> 0) with a checkpoint,
    // on the same schedule. `quiet` prints nothing (tests). A resumed run first cuts
    // out_dir/log.jsonl back to the checkpoint's step (cut_log, log_file.h), so no step is
    // logged twice, and a torn last line is left out with a warning on stderr. A line the log
    // cannot take ends the run (TrainResult::log_failed) with a checkpoint where one can still
    // be written; it holds that line, and the resumed run appends it, so no step goes missing.
    TrainResult run(bool quiet = false, int64_t stop_at = 0);
    // run() checks `request` before each step; once it is non-zero, it saves a checkpoint and
    // returns with TrainResult::stopped and the value in stop_reason. A signal handler may set
    // it (to the signal's number): it is lock-free. Data parallel, the ranks share their
    // requests at every step and stop together, naming the lowest rank that was asked.
    void stop_on(const std::atomic<int>& request) { stop_request_ = &request; }
    // Data parallel: how long a collective waits for the other ranks before the job gives up
    // (dist::WaitLimits; a rank stopped or hung). 0, the default: kDefaultRankTimeout seconds
    // or ten times the slowest step so far (evaluation and checkpoints included), whichever
    // is longer. A rank asked to stop waits at most 10 s + twice the slowest step more.
    void set_rank_timeout(double seconds);
    static constexpr double kDefaultRankTimeout = 300;
    // The step of the last checkpoint written or resumed from (-1: none).
    int64_t saved_step() const { return saved_step_; }
    // Mean validation loss over config.eval_batches fixed batches (of N · batch_size
    // sequences; data parallel: shared out among the ranks, every rank gets the mean).
    double evaluate(int64_t seq_len = 0) const;
    // measure_stability on the first validation batch (the same batch at every step; the run
    // measures it on rank 0 only).
    StabilityStats probe() const;
    void save(const std::string& path) const;

    GatedTransformerLM& model() { return *model_; }
    const TrainConfig& config() const { return config_; }
    int64_t step() const { return step_; }
    Device device() const { return device_; }

private:
    void continue_schedule(const TrainConfig& planned);  // resume(): the plan in the checkpoint
    // run()'s parts, in the order a step meets them (trainer.cpp).
    struct Run;
    std::unique_ptr<LogFile> open_log();
    std::optional<StepLog> train_step(Run& r);
    int share_step(StepLog& s, int reason, int& stop_rank);
    bool evaluates_now() const;
    bool record(Run& r, StepLog& s);
    bool checkpoint_due(const Run& r) const;
    void save_now(Run& r);
    void stop_here(Run& r);
    std::string kept() const;
    TrainConfig config_;
    std::shared_ptr<const BatchSource> data_;
    Device device_;
    std::shared_ptr<GatedTransformerLM> model_;
    std::unique_ptr<AdamW> optimizer_;
    Generator sampler_;
    int64_t step_ = 0;
    int64_t saved_step_ = -1;  // the step of the last checkpoint written or resumed from; -1: none
    // The log line of step step_ when log.jsonl could not take it: saved in the checkpoint's
    // metadata ("unlogged_line") and appended by the resumed run. Empty: every step is logged.
    std::string unlogged_line_;
    const std::atomic<int>* stop_request_ = nullptr;
    double rank_timeout_ = 0;  // 0: the default (set_rank_timeout)
    double slowest_step_ = 0;  // seconds, of one pass of run()'s loop
    void update_wait_limits();
    std::string resume_note_;
    std::shared_ptr<dist::ProcessGroup> group_;  // null: one process
    std::unique_ptr<dist::GradientBuckets> buckets_;
};

}  // namespace gg::nn
