// Reference solutions of tutorial 07's exercises (tools/check-exercises builds the checks
// against them). Try the exercises before reading on.
#include "tutorials/07_learning_rate/exercises/exercises.h"

#include <algorithm>

namespace exercises {

int64_t count_loss_spikes(const std::vector<double>& loss) {
    constexpr size_t window = 20;
    constexpr double nats = 1.0;
    int64_t spikes = 0;
    bool in_spike = false;  // whether step t − 1 was over
    for (size_t t = 1; t < loss.size(); ++t) {
        const size_t from = t > window ? t - window : 0;
        const double lowest = *std::min_element(loss.begin() + std::ptrdiff_t(from), loss.begin() + std::ptrdiff_t(t));
        const bool over = loss[t] > lowest + nats;
        spikes += over && !in_spike;  // a spike is counted where it starts
        in_spike = over;
    }
    return spikes;
}

}  // namespace exercises
