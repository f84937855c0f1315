// test_lm_reference.cpp — the whole GatedTransformerLM against an independent PyTorch model.
//
// tests/reference/make_lm_fixtures.py writes the language model again in plain PyTorch
// (float64), runs one batch forwards and backwards and stores the weights, the batch, the
// loss, every parameter's gradient and the config. Here gatedgrad builds the model from
// that config, takes the same weights and must give the same loss and gradients: in
// float64 to near rounding (measured: ~1e-16 on the loss, ~1e-15 on gradients, so the
// tolerances below leave a wide margin for other BLAS builds and thread counts), and in
// float32 to what float32 rounding allows (measured: ~1e-7 and ~1e-6).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nn/io/checkpoint.h"
#include "nn/io/safetensors.h"
#include "nn/transformer.h"

namespace {

using gg::DType;
using gg::Tensor;
using gg::nn::GatedTransformerLM;

// One fixture file: the model's inputs and PyTorch's answers.
struct Reference {
    gg::nn::LMConfig config;
    gg::nn::NamedTensors weights;             // every parameter, under gatedgrad's dotted name
    Tensor ids, targets;                      // (B, T) int64
    double loss = 0;
    std::map<std::string, Tensor> gradients;  // parameter name → ∂loss/∂parameter, float64
};

// Tests run with the source root as working directory (tests/meson.build).
Reference read_reference(const std::string& path) {
    Reference r;
    r.config = gg::nn::LMConfig::from_json(gg::read_safetensors(path).metadata.at("config"));
    for (const auto& [name, t] : gg::nn::load_tensors(path)) {
        if (name == "ids") r.ids = t;
        else if (name == "targets") r.targets = t;
        else if (name == "loss") r.loss = t.item();
        else if (name.starts_with("grad.")) r.gradients[name.substr(5)] = t;
        else r.weights.emplace_back(name, t);
    }
    return r;
}

std::set<std::string> names(const gg::nn::NamedTensors& tensors) {
    std::set<std::string> out;
    for (const auto& [name, t] : tensors) out.insert(name);
    return out;
}

// The model of the fixture's config in float64, holding the fixture's weights.
std::shared_ptr<GatedTransformerLM> load_model(const Reference& r) {
    auto model = std::make_shared<GatedTransformerLM>(r.config);
    model->to(DType::f64);
    CHECK(names(model->named_parameters()) == names(r.weights));
    CHECK(names(model->named_parameters()).size() == r.gradients.size());
    gg::nn::copy_state(model->named_parameters(), r.weights, "lm reference", "the fixture", "the model");
    return model;
}

// max |actual − expected| / max |expected|: the error measured against the tensor's scale.
double relative_error(const Tensor& actual, const Tensor& expected) {
    const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
    double error = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        error = std::max(error, std::isnan(a[i]) ? INFINITY : std::abs(a[i] - e[i]));
        scale = std::max(scale, std::abs(e[i]));
    }
    return error / scale;
}

// Runs the batch forwards and backwards in the model's current dtype and checks the loss
// and every parameter's gradient against PyTorch's float64 values.
void check_against_reference(const GatedTransformerLM& model, const Reference& r, double loss_tol, double grad_tol) {
    const Tensor loss = model.forward(r.ids, r.targets).loss;
    const double loss_error = std::abs(loss.item() - r.loss) / std::abs(r.loss);
    CHECK_MESSAGE(loss_error <= loss_tol, "gatedgrad loss " << std::setprecision(17) << loss.item() << ", PyTorch "
                                                            << r.loss);
    loss.backward();

    std::string worst_name;
    double worst = 0;
    for (const auto& [name, p] : model.named_parameters()) {
        const std::string param_name = name;  // doctest captures it in a lambda
        INFO("gradient of " << param_name);
        REQUIRE(p.grad().defined());
        const Tensor& expected = r.gradients.at(name);
        REQUIRE(p.grad().shape() == expected.shape());
        const double error = relative_error(p.grad(), expected);
        CHECK(error <= grad_tol);
        if (error >= worst) worst = error, worst_name = name;
    }
    MESSAGE("loss relative error " << loss_error << "; worst gradient relative error " << worst << " (" << worst_name
                                   << ")");
}

}  // namespace

TEST_CASE("lm reference: G1 gate, GQA, QK-norm, RoPE, SwiGLU in float64 match PyTorch") {
    const Reference r = read_reference("tests/reference/lm_g1.safetensors");
    REQUIRE(r.config.attn.gate == gg::nn::GatePosition::sdpa_output);
    REQUIRE(r.config.attn.kv_heads() < r.config.attn.n_heads);
    const auto model = load_model(r);
    check_against_reference(*model, r, 1e-10, 1e-8);
}

TEST_CASE("lm reference: the ungated baseline in float64 matches PyTorch") {
    const Reference r = read_reference("tests/reference/lm_baseline.safetensors");
    REQUIRE(r.config.attn.gate == gg::nn::GatePosition::none);
    const auto model = load_model(r);
    check_against_reference(*model, r, 1e-10, 1e-8);
}

TEST_CASE("lm reference: the G1 model in float32 stays within float32 rounding of PyTorch's float64") {
    const Reference r = read_reference("tests/reference/lm_g1.safetensors");
    const auto model = load_model(r);
    model->to(DType::f32);
    check_against_reference(*model, r, 1e-5, 1e-4);
}
