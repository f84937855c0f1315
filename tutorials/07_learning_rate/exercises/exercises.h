// Exercises of tutorial 07 (README.md, "Exercises"): write each function in exercises.cpp,
// then check them with   tools/exercise 07   until it passes.
#pragma once
#include <cstdint>
#include <vector>

namespace exercises {

// 07.1 A loss-spike detector over a training curve, by the README's definition: step t ≥ 1
// is over when loss[t] exceeds the minimum of the previous 20 steps (steps t−20 … t−1, fewer
// at the start) by more than 1 nat; a run of consecutive steps that are over is one spike.
// Return the number of spikes. (Tutorial 07's study.h has its own; the check does not link
// it.)
int64_t count_loss_spikes(const std::vector<double>& loss);

}  // namespace exercises
