// Exercises of tutorial 01 (README.md, "Exercises"): write each function in exercises.cpp,
// then check them with   tools/exercise 01   until it passes.
// exercises.cpp is built without the library's own answers to them (hidden.h).
#pragma once
#include <vector>

#include "gatedgrad.h"

namespace exercises {

// 01.1 The strides of a contiguous (row-major) tensor of this shape, in elements: the last
// dim has stride 1, and each other dim the product of the sizes after it.
// (2, 3, 4) → (12, 4, 1);  () → ()
gg::Strides contiguous_strides(const gg::Shape& shape);

// 01.2 Where element `index` of x sits in its storage, counted in elements from the start
// of the storage: x.offset() plus each index times its dim's stride. No copies, no data().
int64_t storage_position(const gg::Tensor& x, const std::vector<int64_t>& index);

// 01.3 The shape that a op b has when a and b broadcast: line the shapes up from the
// right; sizes that are equal or 1 match (the result takes the larger), a missing dim
// counts as 1. Throws std::invalid_argument when two sizes differ and neither is 1.
// (Without gg::broadcast_shapes, which is this function.)
// (3, 1) and (4) → (3, 4);  (2, 1, 5) and (3, 1) → (2, 3, 5)
gg::Shape broadcast_shape(const gg::Shape& a, const gg::Shape& b);

}  // namespace exercises
