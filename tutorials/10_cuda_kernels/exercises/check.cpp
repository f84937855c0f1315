// The checks of tutorial 10's exercises, in the CUDA emulator: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gatedgrad.h"
#include "tutorials/10_cuda_kernels/exercises/exercises.h"

TEST_CASE("10.1 block_max") {
    gg::Generator gen(10);
    for (int n : {0, 1, 7, 256, 1000, 5000}) {
        CAPTURE(n);
        const std::vector<float> x = n ? (gg::randn({n}, gen) - 3.0).to_vector<float>() : std::vector<float>{};  // mostly negative
        float out = 0;
        gg::cuda::launch("block_max", exercises::block_max, dim3(1), dim3(256), 0, n, x.data(), &out);
        CHECK(out == (n ? *std::max_element(x.begin(), x.end()) : -INFINITY));
    }
}

TEST_CASE("10.2 softmax_rows") {
    gg::Generator gen(11);
    const int rows = 5;
    for (int cols : {1, 37, 128, 300}) {
        CAPTURE(cols);
        const gg::Tensor x = gg::randn({rows, cols}, gen) * 20.0;  // large logits: exp must not overflow
        const std::vector<float> in = x.to_vector<float>();
        std::vector<float> out(in.size());
        gg::cuda::launch("softmax_rows", exercises::softmax_rows, dim3(rows), dim3(128), 0, rows, cols, in.data(),
                         out.data());
        const std::vector<float> expected = gg::softmax(x, -1).to_vector<float>();
        float worst = 0;
        for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - expected[i]));
        CHECK(worst < 1e-6f);
    }
}
