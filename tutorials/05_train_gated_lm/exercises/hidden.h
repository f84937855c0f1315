// hidden.h — the library's own answers to tutorial 05's exercises, taken away from the code
// that writes them: the build compiles exercises.cpp (and the reference solutions) with this
// header first (-include, tutorials/exercises/meson.build), never check.cpp, which compares
// with them. A use of one of them is a compile error that names the exercise.
#pragma once
#include "gatedgrad.h"

// Functions: declared again, deprecated, and the build makes that warning an error.
namespace gg::nn {
[[deprecated("exercise 05.1 asks you to write this")]] double lr_at(const LrSchedule& schedule, int64_t step);
}  // namespace gg::nn

// A class cannot be declared again: its name is replaced, so gg::nn::AdamW names nothing.
// TextDataset holds the library's unigram_entropy; AdamWStep is what the backend's fused
// AdamW kernel takes.
#define TextDataset exercise_05_2_asks_you_to_write_TextDataset
#define AdamW exercise_05_3_asks_you_to_write_AdamW
#define AdamWStep exercise_05_3_asks_you_to_write_AdamWStep
