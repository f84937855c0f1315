// The checks of tutorial 06's exercises: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "tutorials/06_attention_sink/exercises/exercises.h"

using namespace gg;

TEST_CASE("06.1 first_token_report") {
    // A small random model, 2 layers × 4 heads, with the default gate (G1); α does not
    // depend on the gate, which acts after the softmax.
    nn::LMConfig config;
    config.vocab_size = 17;
    config.max_len = 12;
    config.d_model = 16;
    config.n_layers = 2;
    config.attn.n_heads = 4;
    config.init_std = 0.5;  // large weights: heads far from even attention, and unlike each other
    manual_seed(6);
    const nn::GatedTransformerLM model(config);
    Generator gen(7);
    const Tensor ids = randint(0, config.vocab_size, {3, 12}, gen);

    const nn::ModelAnalysis expected = nn::analyze(model, ids, 0.3);
    // A threshold between the heads' shares, so that some heads are sinks and some are not.
    std::vector<double> all;
    for (const nn::LayerAnalysis& layer : expected.layers)
        all.insert(all.end(), layer.first_token_share.begin(), layer.first_token_share.end());
    std::sort(all.begin(), all.end());
    const double threshold = (all[3] + all[4]) / 2;
    const nn::ModelAnalysis reference = nn::analyze(model, ids, threshold);

    exercises::SinkReport report;
    {
        NoGradGuard no_grad;
        report = exercises::first_token_report(model, ids, threshold);
    }
    REQUIRE(report.alpha.size() == reference.layers.size());
    for (size_t l = 0; l < report.alpha.size(); ++l) {
        REQUIRE(report.alpha[l].size() == reference.layers[l].first_token_share.size());
        for (size_t h = 0; h < report.alpha[l].size(); ++h) {
            INFO("layer " << l << ", head " << h);
            CHECK(report.alpha[l][h] == doctest::Approx(reference.layers[l].first_token_share[h]).epsilon(1e-5));
        }
    }
    CHECK(report.sink_heads == reference.sink_heads);
    CHECK(report.sink_heads == 4);  // the threshold splits the eight heads four and four
}

TEST_CASE("06.2 streaming_mask") {
    // The mask by its definition, one element at a time.
    const auto expected = [](int64_t T, int64_t window, int64_t sinks) {
        std::vector<double> hidden(size_t(T * T));
        for (int64_t i = 0; i < T; ++i)
            for (int64_t j = 0; j < T; ++j) hidden[size_t(i * T + j)] = j > i || (i - j >= window && j >= sinks);
        return from_vector(hidden, {T, T});
    };
    for (const auto& [T, window, sinks] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 1, 0}, {6, 6, 0}, {6, 10, 2}, {8, 3, 0}, {8, 3, 1}, {9, 2, 4}, {12, 4, 2}, {5, 1, 0}}) {
        INFO("T " << T << ", window " << window << ", sinks " << sinks);
        const Tensor mask = exercises::streaming_mask(T, window, sinks);
        REQUIRE(mask.shape() == Shape{T, T});
        CHECK(amax(abs(mask.to(DType::f64) - expected(T, window, sinks))).item() == 0);
    }
    // Without sinks it is the library's sliding window: the same attention through the mask.
    Generator gen(62);
    const int64_t T = 10, window = 3;
    const Tensor q = randn({2, 2, T, 8}, gen, DType::f64), k = randn({2, 2, T, 8}, gen, DType::f64),
                 v = randn({2, 2, T, 8}, gen, DType::f64);
    const Tensor mask = exercises::streaming_mask(T, window, 0).to(DType::f64);
    const Tensor logits = matmul(q, k.transpose(2, 3)) / std::sqrt(8.0);
    const Tensor ours = matmul(softmax(masked_fill(logits, mask, -INFINITY), -1), v);
    nn::SdpaOptions options;
    options.window = window;
    CHECK(amax(abs(ours - nn::scaled_dot_product_attention(q, k, v, options))).item() < 1e-12);
}
