// hidden.h — the library's own answers to tutorial 08's exercises, taken away from the code
// that writes them: the build compiles exercises.cpp (and the reference solutions) with this
// header first (-include, tutorials/exercises/meson.build), never check.cpp, which compares
// with them. A call to one of them is a compile error that names the exercise.
#pragma once
#include "gatedgrad.h"

// Functions: declared again, deprecated, and the build makes that warning an error.
namespace gg::nn {
[[deprecated("exercise 08.1 asks you to write this")]] double gated_attention_entropy(const Tensor& probs,
                                                                                     const Tensor& gate);
}  // namespace gg::nn
