// Exercises of tutorial 08 (README.md, "Exercises"): write each function in exercises.cpp,
// then check them with   tools/exercise 08   until it passes.
// exercises.cpp is built without the library's own answers to them (hidden.h).
#pragma once
#include "gatedgrad.h"

namespace exercises {

// 08.1 The gated attention entropy of the README's last section. A G1 head with gate g at a
// query keeps the mass g a_j on key j and sends 1 − g nowhere, so its effective distribution
// is (g a_1, …, g a_T, 1 − g), with entropy
//     H_g = −Σ_j g a_j log(g a_j) − (1 − g) log(1 − g)        (0 log 0 = 0).
// probs (B, H, Tq, Tk): each row sums to 1; gate (B, H, Tq): the head's mean gate at each
// query, in [0, 1]. Return H_g averaged over every (b, h, query), in nats.
double gated_entropy(const gg::Tensor& probs, const gg::Tensor& gate);

}  // namespace exercises
