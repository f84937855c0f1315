// test_api.cpp — the public API as a libtorch user reaches for it, through the one include:
// a whole program (build, train, save, reload a GatedTransformerLM), Tensor::index,
// copy_ and fill_, and Module::state_dict / load_state_dict / to / named_modules, with
// the errors for mismatched shapes, dtypes and devices.
#include "gatedgrad.h"  // deliberately the only library include: it must be enough

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

using namespace gg;
namespace fs = std::filesystem;

TEST_CASE("api: gatedgrad.h alone builds, trains, saves and reloads a GatedTransformerLM") {
    nn::LMConfig config;
    config.vocab_size = 11, config.max_len = 8, config.d_model = 16, config.n_layers = 2, config.attn.n_heads = 2;
    manual_seed(3);
    auto model = std::make_shared<nn::GatedTransformerLM>(config);
    nn::AdamW opt(model->parameters(), 1e-2);
    const Tensor ids = randint(0, 11, {4, 8}, default_generator());
    const Tensor targets = randint(0, 11, {4, 8}, default_generator());
    double first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
        opt.zero_grad();
        const Tensor loss = model->forward(ids, targets).loss;
        loss.backward();
        nn::clip_grad_norm(opt.params(), 1.0);
        opt.step();
        (step == 0 ? first : last) = loss.item();
    }
    CHECK(last < first - 1.0);  // it memorises the batch

    const fs::path path = fs::temp_directory_path() / ("gatedgrad_api_" + std::to_string(::getpid()) + ".safetensors");
    nn::save(*model, path.string(), {{"config", config.to_json()}});
    nn::Metadata metadata;
    nn::load_tensors(path.string(), &metadata);
    auto reloaded = std::make_shared<nn::GatedTransformerLM>(nn::LMConfig::from_json(metadata.at("config")));
    nn::load(*reloaded, path.string());
    fs::remove(path);
    NoGradGuard no_grad;
    CHECK(amax(abs(reloaded->forward(ids).logits - model->forward(ids).logits)).item() == 0);
}

TEST_CASE("api: index picks positions and ranges as x[i, j] and x[a:b] do, as views") {
    const Tensor x = arange(24, DType::f32).view({2, 3, 4});
    CHECK(x.index({1, 2, 3}).item() == 23);
    CHECK(x.index({-1, -1, -1}).item() == 23);
    CHECK(x.index({0, 1}).to_vector<float>() == std::vector<float>{4, 5, 6, 7});
    const Tensor rows = x.index({1, Slice{1, {}}});  // x[1, 1:]
    CHECK(rows.shape() == Shape{2, 4});
    CHECK(rows.index({0, 0}).item() == 16);
    CHECK(x.index({Slice{{}, -1}, 0}).shape() == Shape{1, 4});  // x[:-1, 0]
    CHECK(x.index({Slice{5, 9}}).shape() == Shape{0, 3, 4});     // clamped as Python does
    CHECK(x.index({0}).shares_storage(x));
    CHECK_THROWS_WITH_AS(x.index({0, 0, 0, 0}), "index: 4 indices for a tensor of shape (2,3,4)", std::invalid_argument);
    CHECK_THROWS_WITH_AS(x.index({0, 3}), "select: index 3 is outside dim 0 of shape (3,4)", std::out_of_range);

    // Differentiable: the gradient lands on the picked elements only.
    const Tensor w = zeros({2, 3}, DType::f64).requires_grad_();
    (w.index({1, Slice{1, {}}}) * 2.0).sum().backward();
    CHECK(w.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0, 2, 2});
}

TEST_CASE("api: copy_ and fill_ write through views, broadcast, convert, and refuse what they cannot do") {
    const Tensor x = zeros({2, 3});
    x.index({1}).copy_(from_vector(std::vector<double>{1, 2, 3}, {3}));  // converts f64 → f32
    x.index({0, 2}).fill_(7);
    CHECK(x.to_vector<float>() == std::vector<float>{0, 0, 7, 1, 2, 3});
    x.t().copy_(from_vector(std::vector<float>{10, 20}, {2}));  // (2) broadcast over the 3 rows of x.t()
    CHECK(x.to_vector<float>() == std::vector<float>{10, 10, 10, 20, 20, 20});
    const Tensor y = arange(4, DType::f32).view({2, 2});
    y.copy_(y.t());  // overlapping source and destination
    CHECK(y.to_vector<float>() == std::vector<float>{0, 2, 1, 3});

    CHECK_THROWS_WITH_AS(x.copy_(zeros({4})), "copy_: shapes (4) and (2,3) do not broadcast (dim 1: 4 vs 3)",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(x.copy_(zeros({2, 2, 3})), "copy_: cannot copy a tensor of shape (2,2,3) into one of shape (2,3)",
                         std::invalid_argument);
    const Tensor p = zeros({2}).requires_grad_();
    CHECK_THROWS_AS(p.copy_(ones({2})), std::logic_error);  // a parameter is written under NoGradGuard
    NoGradGuard no_grad;
    p.copy_(ones({2}));
    CHECK(p.to_vector<float>() == std::vector<float>{1, 1});
}

TEST_CASE("api: Module state_dict / load_state_dict / to / named_modules") {
    nn::LMConfig config;
    config.vocab_size = 7, config.max_len = 4, config.d_model = 8, config.n_layers = 2, config.attn.n_heads = 2;
    config.attn.gate = nn::GatePosition::sdpa_output;
    manual_seed(1);
    nn::GatedTransformerLM a(config);
    manual_seed(2);
    nn::GatedTransformerLM b(config);
    const Tensor ids = from_vector(std::vector<int64_t>{1, 2, 3, 4}, {1, 4});
    NoGradGuard no_grad;
    CHECK(amax(abs(a.forward(ids).logits - b.forward(ids).logits)).item() > 0);
    const Tensor w_before = b.blocks[0]->attn->w_q->weight;
    b.load_state_dict(a.state_dict());
    CHECK(amax(abs(a.forward(ids).logits - b.forward(ids).logits)).item() == 0);
    CHECK(b.blocks[0]->attn->w_q->weight.shares_storage(w_before));  // loaded in place

    // Errors name the tensor and both sides, and change nothing.
    nn::NamedTensors wrong = a.state_dict();
    wrong[0].second = zeros({3, 3});
    const std::string expected = "tensor '" + wrong[0].first + "' has shape (3,3) in the given state but";
    CHECK_THROWS_WITH_AS(b.load_state_dict(wrong), doctest::Contains(expected.c_str()), std::runtime_error);
    wrong = a.state_dict();
    wrong[0].second = wrong[0].second.to(DType::f64);
    CHECK_THROWS_WITH_AS(b.load_state_dict(wrong), doctest::Contains("has dtype float64 in the given state but float32"),
                         std::runtime_error);
    wrong = a.state_dict();
    wrong.pop_back();
    CHECK_THROWS_WITH_AS(b.load_state_dict(wrong), doctest::Contains("is missing from the given state"), std::runtime_error);

    // named_modules: the root, then each child before its own children, dotted names.
    const auto modules = a.named_modules();
    REQUIRE(modules.size() > 4);
    CHECK(modules[0].first == "");
    CHECK(modules[0].second == &a);
    CHECK(modules[1].first == "tok_emb");
    bool found = false;
    for (const auto& [name, m] : modules) found = found || (name == "layers.1.attn.w_g" && m == a.blocks[1]->attn->w_g.get());
    CHECK(found);

    // to(dtype) converts every parameter; to(device) needs that device.
    a.to(DType::f64);
    for (const Tensor& p : a.parameters()) CHECK(p.dtype() == DType::f64);
    CHECK(a.forward(ids).logits.dtype() == DType::f64);
    if (!device_available(Device::CUDA))
        CHECK_THROWS_WITH_AS(a.to(Device::CUDA), doctest::Contains("no CUDA"), std::runtime_error);
}
