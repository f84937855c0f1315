// The checks of tutorial 01's exercises: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include "tutorials/01_tensors/exercises/exercises.h"

using namespace gg;

namespace {
// Every index of a shape, in row-major order.
std::vector<std::vector<int64_t>> all_indices(const Shape& shape) {
    std::vector<std::vector<int64_t>> out{{}};
    for (int64_t size : shape) {
        std::vector<std::vector<int64_t>> longer;
        for (const auto& prefix : out)
            for (int64_t i = 0; i < size; ++i) {
                longer.push_back(prefix);
                longer.back().push_back(i);
            }
        out = longer;
    }
    return out;
}
}  // namespace

TEST_CASE("01.1 contiguous_strides") {
    // An untouched exercise stops here, saying "not done yet" once, not once per check below.
    REQUIRE_NOTHROW(exercises::contiguous_strides({2, 3}));
    for (const Shape& shape : {Shape{5}, Shape{2, 3}, Shape{2, 3, 4}, Shape{4, 1, 6, 2}, Shape{}}) {
        CAPTURE(shape_str(shape));
        CHECK(exercises::contiguous_strides(shape) == zeros(shape).strides());
    }
    // 2⁶⁰ elements, more than any memory holds: strides come from the shape alone.
    INFO("exercise 01.1 asks you to write the strides from the shape, without building a tensor");
    const int64_t n = int64_t(1) << 20;
    CHECK(exercises::contiguous_strides({n, n, n}) == Strides{n * n, n, 1});
}

TEST_CASE("01.2 storage_position") {
    // An untouched exercise stops here, saying "not done yet" once, not once per check below.
    REQUIRE_NOTHROW(exercises::storage_position(arange(6, DType::f32).view({2, 3}), {1, 2}));
    // Each element of base holds its own storage position, so a view's elements say where they sit.
    const Tensor base = arange(24, DType::f32).view({2, 3, 4});
    const std::vector<std::pair<const char*, Tensor>> views = {
        {"base", base},
        {"transpose(0, 2)", base.transpose(0, 2)},
        {"select(1, 2)", base.select(1, 2)},
        {"narrow(2, 1, 2)", base.narrow(2, 1, 2)},
        {"narrow(0, 1, 1).permute({2, 0, 1})", base.narrow(0, 1, 1).permute({2, 0, 1})},
        {"expand", arange(3, DType::f32).view({3, 1}).expand({3, 4})},
    };
    for (const auto& [name, view] : views)
        for (const std::vector<int64_t>& index : all_indices(view.shape())) {
            CAPTURE(name);
            CAPTURE(shape_str(index));
            std::vector<Index> at(index.begin(), index.end());
            CHECK(exercises::storage_position(view, index) == int64_t(view.index(at).item()));
        }
}

TEST_CASE("01.3 broadcast_shape") {
    // An untouched exercise stops here, saying "not done yet" once, not once per check below.
    REQUIRE_NOTHROW(exercises::broadcast_shape({3, 1}, {4}));
    const std::vector<std::pair<Shape, Shape>> pairs = {
        {{3, 1}, {4}}, {{2, 1, 5}, {3, 1}}, {{7}, {7}}, {{}, {2, 3}}, {{1, 1}, {1}}, {{5, 1, 4}, {1, 3, 1}}};
    for (const auto& [a, b] : pairs) {
        CAPTURE(shape_str(a));
        CAPTURE(shape_str(b));
        CHECK(exercises::broadcast_shape(a, b) == (zeros(a) + zeros(b)).shape());
        CHECK(exercises::broadcast_shape(b, a) == (zeros(b) + zeros(a)).shape());
    }
    CHECK_THROWS_AS(exercises::broadcast_shape({3}, {4}), std::invalid_argument);
    CHECK_THROWS_AS(exercises::broadcast_shape({2, 3}, {3, 3}), std::invalid_argument);
    // 2⁶⁰ elements, more than any memory holds: the shape comes from the shapes alone.
    INFO("exercise 01.3 asks you to write the shape from the shapes, without building tensors");
    const int64_t n = int64_t(1) << 40, m = int64_t(1) << 20;
    CHECK(exercises::broadcast_shape({n, 1}, {m}) == Shape{n, m});
}
