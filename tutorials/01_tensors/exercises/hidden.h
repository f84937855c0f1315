// hidden.h — the library's own answers to tutorial 01's exercises, taken away from the code
// that writes them: the build compiles exercises.cpp (and the reference solutions) with this
// header first (-include, tutorials/exercises/meson.build), never check.cpp, which compares
// with them. A call to one of them is a compile error that names the exercise.
#pragma once
#include "gatedgrad.h"

// Functions: declared again, deprecated, and the build makes that warning an error.
namespace gg {
[[deprecated("exercise 01.1 asks you to write this")]] Strides contiguous_strides(const Shape& shape);
[[deprecated("exercise 01.3 asks you to write this")]] Shape broadcast_shapes(const Shape& a, const Shape& b,
                                                                              const char* op);
}  // namespace gg

// A member cannot be declared again: its name is replaced, so x.index(...) names nothing.
#define index exercise_01_2_asks_you_to_write_index
