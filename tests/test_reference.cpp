// test_reference.cpp — gatedgrad against PyTorch 1.13 on the same inputs.
//
// tests/reference/make_core_fixtures.py stores, for each case, the inputs, PyTorch's
// output and the gradients of the inputs. Here every case is recomputed with gatedgrad
// ops and backward() and compared element by element.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <string>
#include <vector>

#include "gatedgrad.h"

namespace {

// Tests run with the source root as working directory (tests/meson.build).
const gg::SafetensorsFile& fixtures() {
    static const gg::SafetensorsFile file = gg::read_safetensors("tests/reference/core.safetensors");
    return file;
}

template <class T>
gg::Tensor tensor_from_bytes(const gg::SafetensorsEntry& e) {
    std::vector<T> values(e.bytes.size() / sizeof(T));
    std::memcpy(values.data(), e.bytes.data(), e.bytes.size());  // the file and this machine are little-endian
    return gg::from_vector(values, e.shape);
}

// The fixture entry `name` as a tensor of its own dtype and shape.
gg::Tensor load(const std::string& name) {
    const gg::SafetensorsEntry* e = fixtures().find(name);
    INFO("fixture entry " << name);
    REQUIRE(e != nullptr);
    if (e->dtype == "F32") return tensor_from_bytes<float>(*e);
    if (e->dtype == "F64") return tensor_from_bytes<double>(*e);
    REQUIRE(e->dtype == "I64");
    return tensor_from_bytes<int64_t>(*e);
}

// Equal shapes and dtypes, and every element within tol · max(1, |expected|), where tol
// is what the dtype's rounding allows after a few operations.
void check_close(const gg::Tensor& actual, const gg::Tensor& expected, const std::string& what) {
    INFO(what);
    REQUIRE(actual.defined());
    REQUIRE(actual.shape() == expected.shape());
    REQUIRE(actual.dtype() == expected.dtype());
    const double tol = expected.dtype() == gg::DType::f32 ? 1e-5 : 1e-10;
    const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
    size_t worst = 0;
    double worst_ratio = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double error = std::abs(a[i] - e[i]);
        const double ratio = std::isnan(error) ? INFINITY : error / (tol * std::max(1.0, std::abs(e[i])));
        if (ratio > worst_ratio) worst = i, worst_ratio = ratio;
    }
    INFO("worst element " << worst << std::setprecision(17) << ": gatedgrad " << a[worst] << ", PyTorch " << e[worst]);
    CHECK(worst_ratio <= 1.0);
}

using CaseFn = std::function<gg::Tensor(const std::vector<gg::Tensor>&)>;

// Loads `case_name`'s inputs, runs f forwards and backwards (from the stored upstream
// gradient, or from 1 when the output is a scalar), and checks the output and the
// gradient of every floating input against PyTorch's.
void check_case(const std::string& case_name, const std::vector<std::string>& input_names, const CaseFn& f) {
    std::vector<gg::Tensor> inputs;
    for (const std::string& name : input_names) {
        gg::Tensor x = load(case_name + "." + name);
        if (gg::is_floating(x.dtype())) x.requires_grad_();
        inputs.push_back(x);
    }
    const gg::Tensor out = f(inputs);
    check_close(out, load(case_name + ".out"), case_name + " output");
    out.backward(out.dim() == 0 ? gg::Tensor() : load(case_name + ".grad_out"));
    for (size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i].requires_grad())
            check_close(inputs[i].grad(), load(case_name + ".grad." + input_names[i]),
                        case_name + " gradient of " + input_names[i]);
}

}  // namespace

TEST_CASE("reference: matmul, 2-d, batched with broadcast, and with a shared weight") {
    const CaseFn matmul = [](const std::vector<gg::Tensor>& x) { return gg::matmul(x[0], x[1]); };
    for (const std::string name : {"matmul_2d_f32", "matmul_2d_f64", "matmul_batched_f32", "matmul_batched_f64",
                             "matmul_shared_weight_f64"}) {
        CAPTURE(name);
        check_case(name, {"a", "b"}, matmul);
    }
}

TEST_CASE("reference: softmax and log_softmax along the last and the first dim") {
    for (int64_t dim : {-1, 0}) {
        CAPTURE(dim);
        const std::string suffix = "_dim" + std::to_string(dim);
        check_case("softmax" + suffix, {"x"}, [dim](const auto& x) { return gg::softmax(x[0], dim); });
        check_case("log_softmax" + suffix, {"x"}, [dim](const auto& x) { return gg::log_softmax(x[0], dim); });
    }
}

TEST_CASE("reference: cross_entropy with ignored targets") {
    // logits (2, 3, 5), targets (2, 3) with two entries -100: the mean is over the other four.
    check_case("cross_entropy", {"logits", "targets"}, [](const auto& x) { return gg::cross_entropy(x[0], x[1]); });
}

TEST_CASE("reference: a broadcast expression") {
    // a (4, 1, 3), b (5, 1), c (3) → (4, 5, 3); each gradient sums over the dims its input was broadcast along.
    check_case("broadcast_expression", {"a", "b", "c"}, [](const auto& x) {
        const gg::Tensor &a = x[0], &b = x[1], &c = x[2];
        return (a * b + c).sigmoid() / (1.0 + a.exp());
    });
}

TEST_CASE("reference: gelu, silu and rsqrt") {
    check_case("gelu", {"x"}, [](const auto& x) { return gg::gelu(x[0]); });
    check_case("silu", {"x"}, [](const auto& x) { return gg::silu(x[0]); });
    check_case("rsqrt", {"x"}, [](const auto& x) { return gg::rsqrt(x[0]); });
}
