// hidden.h — the library's own answers to tutorial 06's exercises, taken away from the code
// that writes them: the build compiles exercises.cpp (and the reference solutions) with this
// header first (-include, tutorials/exercises/meson.build), never check.cpp, which compares
// with them. A call to one of them is a compile error that names the exercise.
#pragma once
#include "gatedgrad.h"

// Functions: declared again, deprecated, and the build makes that warning an error.
namespace gg::nn {
[[deprecated("exercise 06.1 asks you to write this")]] ModelAnalysis analyze(const GatedTransformerLM& model,
                                                                             const Tensor& ids, double threshold);
[[deprecated("exercise 06.2 asks you to write the mask: not the library's attention")]] Tensor
scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options,
                             Tensor* probs, Tensor* lse);
}  // namespace gg::nn
