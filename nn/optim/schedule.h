// schedule.h — learning-rate schedules: linear warmup, then constant or cosine decay.
#pragma once
#include <cstdint>

namespace gg::nn {

// Learning rate as a function of the step (0-based: the step about to be taken).
//   warmup:   step < warmup_steps            lr = max_lr · (step + 1) / warmup_steps
//   constant: after warmup                   lr = max_lr
//   cosine:   warmup_steps ≤ step < total    p  = (step − warmup_steps) / (total_steps − warmup_steps)
//                                            lr = min_lr + ½ (max_lr − min_lr)(1 + cos πp)
//             step ≥ total_steps             lr = min_lr
// The warmup's last step reaches max_lr, and the cosine starts from it (p = 0).
//
// A run extended (or shortened) after it started restarts the cosine where it stands, so
// the learning rate does not jump back up the new, longer curve (Trainer::resume):
//   restart:  restart_step ≤ step < total    p  = (step − restart_step) / (total_steps − restart_step)
//                                            lr = min_lr + ½ (restart_lr − min_lr)(1 + cos πp)
// Steps before restart_step were taken under the run's first plan; lr_at does not redo them.
struct LrSchedule {
    enum class Decay { constant, cosine };
    Decay decay = Decay::cosine;
    double max_lr = 1e-3;
    double min_lr = 0;          // cosine only
    int64_t warmup_steps = 0;
    int64_t total_steps = 0;    // cosine only: where the decay reaches min_lr
    int64_t restart_step = 0;   // cosine only: 0 none, else in [warmup_steps, total_steps)
    double restart_lr = 0;      // the learning rate at restart_step
};
double lr_at(const LrSchedule& schedule, int64_t step);

}  // namespace gg::nn
