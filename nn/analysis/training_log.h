// training_log.h — reading back the log.jsonl that train writes (nn/train/trainer.cpp): one
// JSON object per step, {"step", "loss", "lr", "grad_norm", ...}, with "val_loss" on the steps
// that validated and, every --probe-every steps, the stability probes of stability.h.
// `gatedgrad plot` draws its loss curves from it and `gatedgrad report` all of it.
#pragma once
#include <string>
#include <vector>

#include "nn/analysis/plot.h"
#include "nn/analysis/stability.h"

namespace gg::nn {

struct TrainingLog {
    std::vector<double> step, loss, lr;      // one entry per line; lr NaN where a line has none
    std::vector<double> grad_norm;           // per line, before clipping; NaN where a line has none
    std::vector<double> tokens_per_s;        // per line, all ranks together; NaN where a line has none
    std::vector<double> val_step, val_loss;  // the steps that validated
    std::vector<double> probe_step;          // the steps that probed ...
    std::vector<StabilityStats> probes;      // ... and what they measured
    std::string warning;                     // "PATH:LINE: ..." when a torn last line was left out
};

// The log at `path`. A file that is not one (a line that is not a JSON object with a numeric
// step and loss, a line longer than 1 MiB, probes that are not numbers, no steps at all)
// throws std::runtime_error naming the path and the line. A torn last line (no newline, not a
// log line: a write cut short, nn/train/log_file.h) is left out, and `warning` says so.
TrainingLog read_training_log(const std::string& path);

// The loss curves of one run, all in `color`: the training loss as logged (faint, not in the
// legend), the same smoothed, and the validation points.
std::vector<Series> loss_series(const TrainingLog& log, const std::string& label, const std::string& color);

}  // namespace gg::nn
