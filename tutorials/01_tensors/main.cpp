// Tutorial 01 — tensors: a shape and strides over shared storage.
//
// Build and run from the repository root:
//   tools/build tutorial_01_tensors && ./build/tutorials/tutorial_01_tensors
#include <iostream>

#include "gatedgrad.h"

int main() {
    std::cout << std::boolalpha;

    // 1. A tensor is a block of memory plus a shape and strides: element [i, j] of x lives
    //    at i * strides[0] + j * strides[1] in its storage.
    gg::Tensor x = gg::arange(6, gg::DType::f32).view({2, 3});
    std::cout << "x:\n" << x << "\n";
    std::cout << "x.strides() = " << gg::shape_str(x.strides()) << "\n\n";

    // 2. Views make a new shape and strides over the *same* storage: nothing is copied.
    const gg::Tensor xt = x.t();                   // (3, 2), strides swapped
    const gg::Tensor second_row = x.select(0, 1);  // (3)
    std::cout << "xt = x.t():\n" << xt << "\n";
    std::cout << "xt.strides() = " << gg::shape_str(xt.strides()) << ", contiguous: " << xt.is_contiguous()
              << ", shares storage with x: " << xt.shares_storage(x) << "\n";

    //    So a write through the base is seen by every view of it.
    x.index({1, 1}).fill_(40);  // x[1, 1] = 40
    std::cout << "after x[1, 1] = 40, second_row = " << second_row << "\nand xt:\n" << xt << "\n";

    //    contiguous() copies a view into fresh row-major storage, which no longer follows x.
    std::cout << "xt.contiguous() shares storage with x: " << xt.contiguous().shares_storage(x) << "\n\n";

    // 3. Broadcasting: shapes line up from the right and size-1 dims stretch, so
    //    (3, 1) + (4) → (3, 4), without copying either operand.
    const gg::Tensor column = gg::from_vector(std::vector<float>{0, 10, 20}, {3, 1});
    const gg::Tensor row = gg::arange(4, gg::DType::f32);
    std::cout << "column (3, 1) + row (4):\n" << column + row << "\n\n";

    // 4. Reductions: over some dims (keepdim leaves them as size 1) or over all of them.
    std::cout << "x.sum({0}) = " << x.sum({0}) << "\n";
    std::cout << "x.sum({1}, /*keepdim=*/true):\n" << x.sum({1}, true) << "\n";
    std::cout << "x.mean() = " << x.mean() << "\n\n";

    // 5. Matrix product: (2, 3) @ (3, 2) → (2, 2). The transposed view goes to BLAS as it is.
    std::cout << "x @ x.t():\n" << gg::matmul(x, xt) << "\n\n";

    // 6. Printing shows the shape and dtype; past 1000 elements it elides, as PyTorch does.
    gg::Generator gen(0);
    std::cout << "randn(40, 40):\n" << gg::randn({40, 40}, gen) << "\n";
}
