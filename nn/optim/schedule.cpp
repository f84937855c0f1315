// schedule.cpp — lr_at: the warmup + cosine formulas of schedule.h.
#include "nn/optim/schedule.h"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace gg::nn {

double lr_at(const LrSchedule& s, int64_t step) {
    const bool cosine = s.decay == LrSchedule::Decay::cosine;
    if (step < 0 || s.warmup_steps < 0 || (cosine && s.total_steps <= s.warmup_steps))
        throw std::invalid_argument("lr_at: step " + std::to_string(step) + " with warmup_steps " +
                                    std::to_string(s.warmup_steps) + " and total_steps " +
                                    std::to_string(s.total_steps) +
                                    " (need step ≥ 0, warmup ≥ 0 and, for cosine, total > warmup)");
    const bool restart = cosine && s.restart_step > 0;
    if (restart && (s.restart_step < s.warmup_steps || s.restart_step >= s.total_steps))
        throw std::invalid_argument("lr_at: restart_step " + std::to_string(s.restart_step) + " is outside [warmup_steps " +
                                    std::to_string(s.warmup_steps) + ", total_steps " + std::to_string(s.total_steps) + ")");
    if (step < s.warmup_steps) return s.max_lr * double(step + 1) / double(s.warmup_steps);
    if (!cosine) return s.max_lr;
    if (step >= s.total_steps) return s.min_lr;
    // The cosine from (start, from_lr) down to (total_steps, min_lr).
    const bool restarted = restart && step >= s.restart_step;
    const int64_t start = restarted ? s.restart_step : s.warmup_steps;
    const double from_lr = restarted ? s.restart_lr : s.max_lr;
    const double progress = double(step - start) / double(s.total_steps - start);
    return s.min_lr + 0.5 * (from_lr - s.min_lr) * (1 + std::cos(std::numbers::pi * progress));
}

}  // namespace gg::nn
