// The checks of tutorial 08's exercises: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include <cmath>

#include "tutorials/08_gate_ablation/exercises/exercises.h"

using namespace gg;

TEST_CASE("08.1 gated_entropy") {
    // An untouched exercise stops here, saying "not done yet" once, not once per check below.
    REQUIRE_NOTHROW(exercises::gated_entropy(full({1, 1, 1, 4}, 0.25, DType::f64), ones({1, 1, 1}, DType::f64)));
    // Cases whose answer is known: a closed gate leaves nothing (0); an open one leaves the
    // plain entropy (ln 4 for even attention over 4 keys); g = ½ on one key gives two halves (ln 2).
    const Tensor even = full({1, 1, 1, 4}, 0.25, DType::f64), one_key = from_vector(std::vector<double>{1, 0, 0}, {1, 1, 1, 3});
    CHECK(exercises::gated_entropy(even, zeros({1, 1, 1}, DType::f64)) == doctest::Approx(0.0));
    CHECK(exercises::gated_entropy(even, ones({1, 1, 1}, DType::f64)) == doctest::Approx(std::log(4.0)));
    CHECK(exercises::gated_entropy(one_key, full({1, 1, 1}, 0.5, DType::f64)) == doctest::Approx(std::log(2.0)));
    // Random causal attention and gates, against the library's (nn/analysis/analysis.h).
    Generator gen(8);
    const int64_t T = 7;
    const Tensor future = triu(ones({T, T}, DType::f64), 1);
    const Tensor probs = softmax(masked_fill(randn({2, 3, T, T}, gen, DType::f64) * 2.0, future, -INFINITY), -1);
    const Tensor gate = sigmoid(randn({2, 3, T}, gen, DType::f64) * 3.0);
    CHECK(exercises::gated_entropy(probs, gate) == doctest::Approx(nn::gated_attention_entropy(probs, gate)).epsilon(1e-10));
}
