// check.h — comparisons the test suites share.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace gg::testing {

// The device a suite's tensors live on: the CPU, or Device::CUDA when GATEDGRAD_TEST_DEVICE
// is "cuda". meson runs the gradient checks a second time that way, on the emulated device
// (GATEDGRAD_CUDA=emulator), so every backward is checked through the CUDA kernels too.
inline Device test_device() {
    const char* name = std::getenv("GATEDGRAD_TEST_DEVICE");
    return name && std::string(name) == "cuda" ? Device::CUDA : Device::CPU;
}
inline Tensor on_test_device(const Tensor& t) { return t.to(test_device()); }

// "" when `t` holds `expected` (row-major) within tol (relative above 1, absolute below),
// else the first difference, so that CHECK(mismatch(...) == "") prints it.
inline std::string mismatch(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
    if (!t.defined()) return "undefined tensor";
    const std::vector<double> v = t.to_vector<double>();
    if (v.size() != expected.size())
        return "has " + std::to_string(v.size()) + " elements, expected " + std::to_string(expected.size());
    for (size_t i = 0; i < v.size(); ++i)
        if (!(std::abs(v[i] - expected[i]) <= tol * std::max(1.0, std::abs(expected[i]))))
            return "element " + std::to_string(i) + " is " + std::to_string(v[i]) + ", expected " +
                   std::to_string(expected[i]);
    return "";
}

// max |a − b| over same-shaped tensors of any dtype.
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
    return worst;
}

}  // namespace gg::testing
