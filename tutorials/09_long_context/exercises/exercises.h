// Exercises of tutorial 09 (README.md, "Exercises"): write each function in exercises.cpp,
// then check them with   tools/exercise 09   until it passes.
// exercises.cpp is built without the library's own answers to them (hidden.h).
#pragma once
#include <vector>

#include "gatedgrad.h"

namespace exercises {

// 09.1 The RoPE frequencies θ_c, c < D/2, under each scaling of the README (nn/rope.h says
// the same in symbols). Plain RoPE: θ_c = base^(−2c/D). For a factor s = options.factor:
//   RopeScaling::interpolation: θ_c / s;
//   RopeScaling::ntk:           plain RoPE with the base raised to base · s^(D/(D−2));
//   RopeScaling::yarn:          with r = L θ_c / 2π the turns channel c makes within the
//                               training length L = options.original_length, and
//                               γ = clamp((r − β_slow) / (β_fast − β_slow), 0, 1) (the options'
//                               yarn_beta_slow and yarn_beta_fast): γ θ_c + (1 − γ) θ_c / s.
// head_dim D is even.
std::vector<double> rope_frequencies(int64_t head_dim, const gg::nn::RopeOptions& options);

}  // namespace exercises
