// hidden.h — the library's own answers to tutorial 09's exercises, taken away from the code
// that writes them: the build compiles exercises.cpp (and the reference solutions) with this
// header first (-include, tutorials/exercises/meson.build), never check.cpp, which compares
// with them. A use of one of them is a compile error that names the exercise.
#pragma once
#include "gatedgrad.h"

// A member cannot be declared again: its name is replaced, so rope.frequencies() names
// nothing.
#define frequencies exercise_09_1_asks_you_to_write_frequencies
