// hidden.h — the library's own answers to tutorial 03's exercises, taken away from the code
// that writes them: the build compiles exercises.cpp (and the reference solutions) with this
// header first (-include, tutorials/exercises/meson.build), never check.cpp, which compares
// with them. A use of one of them is a compile error that names the exercise.
#pragma once
#include "gatedgrad.h"

// Functions: declared again, deprecated, and the build makes that warning an error.
namespace gg::nn {
[[deprecated("exercise 03.3 asks you to write this")]] double clip_grad_norm(const std::vector<Tensor>& params,
                                                                             double max_norm);
}  // namespace gg::nn

// A class cannot be declared again: its name is replaced, so gg::nn::Linear names nothing.
// SGDStep is what the backend's fused SGD kernel takes.
#define Linear exercise_03_1_asks_you_to_write_Linear
#define SGD exercise_03_2_asks_you_to_write_SGD
#define SGDStep exercise_03_2_asks_you_to_write_SGDStep
