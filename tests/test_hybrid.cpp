// test_hybrid.cpp — the hybrid language model: Gated DeltaNet layers (nn/gated_deltanet.h)
// between full-attention ones, as LMConfig::layer_types orders them, and feed_forward layers
// (the FFN alone) in their place. The layer types of a ratio, the config's checks, a float64
// gradcheck of every parameter, cached decoding against the full pass, greedy sampling, and
// the sink analysis on the full layers with the linear layers' state and decay beside it; a
// feed_forward layer's blocks, training step and checkpoint.
#include <algorithm>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "nn/analysis/analysis.h"
#include "tests/nn_check.h"

using namespace gg;
using namespace gg::nn;
using gg::testing::check_gradients;
using gg::testing::max_abs_diff;
using gg::testing::randomize;
using gg::testing::small_lm;

namespace {
constexpr LayerType lin = LayerType::linear_attention, att = LayerType::full_attention, ffn = LayerType::feed_forward;

LMConfig hybrid_lm(int64_t n_layers) {
    LMConfig c = small_lm();
    c.n_layers = n_layers;
    c.layer_types = hybrid_layer_types("3:1", n_layers);
    return c;
}
}  // namespace

TEST_CASE("hybrid: a ratio L:F gives L linear layers then F full ones, as Qwen3-Next's interval 4 does") {
    CHECK(hybrid_layer_types("3:1", 8) == std::vector<LayerType>{lin, lin, lin, att, lin, lin, lin, att});
    CHECK(hybrid_layer_types("1:2", 3) == std::vector<LayerType>{lin, att, att});
    // Qwen3NextConfig: layer i is full attention when (i + 1) % full_attention_interval == 0.
    const std::vector<LayerType> types = hybrid_layer_types("3:1", 48);
    for (size_t i = 0; i < types.size(); ++i) CHECK((types[i] == att) == ((i + 1) % 4 == 0));

    for (const char* bad : {"3", "3:0", "0:1", "x:1", "3:1:1", "-3:1", "3:", "", "99999:1"})
        CHECK_THROWS_WITH_AS(hybrid_layer_types(bad, 4),
                             doctest::Contains(("hybrid '" + std::string(bad) + "' is not L:F").c_str()), std::invalid_argument);
    CHECK_THROWS_WITH_AS(hybrid_layer_types("3:1", 6), "hybrid 3:1 repeats 4 layers, which do not divide n_layers 6",
                         std::invalid_argument);
}

TEST_CASE("hybrid: layer_types is a row of the config: JSON, checks, and the blocks it makes") {
    LMConfig c = hybrid_lm(4);
    CHECK(c.to_json().find(R"("layer_types":["linear_attention","linear_attention","linear_attention","full_attention"])") !=
          std::string::npos);
    CHECK(LMConfig::from_json(c.to_json()).layer_types == c.layer_types);
    CHECK(LMConfig::from_json("{}").layer_types.empty());  // a config written before: every layer full
    CHECK_THROWS_WITH_AS(LMConfig::from_json(R"({"layer_types": ["full_attention", "mamba"]})"),
                         doctest::Contains("layer type 'mamba' is not one of full_attention, linear_attention, feed_forward"),
                         std::invalid_argument);
    c.layer_types.pop_back();
    CHECK_THROWS_WITH_AS(c.validate(), "LMConfig: layer_types names 3 layers, but n_layers is 4", std::invalid_argument);

    const GatedTransformerLM model(hybrid_lm(4));
    for (size_t l = 0; l < 4; ++l) {
        CHECK(bool(model.blocks[l]->attn) == (l == 3));
        CHECK(bool(model.blocks[l]->linear_attn) == (l != 3));
    }
    const GatedDeltaNetOptions& o = model.blocks[0]->linear_attn->options();
    CHECK(o.n_k_heads == 4);  // as many heads as the attention, of its head size
    CHECK(o.k_dim() == 4);
    const std::vector<std::string> names = gg::testing::names_of(model);
    CHECK(gg::testing::contains(names, "layers.0.linear_attn.A_log"));
    CHECK(gg::testing::contains(names, "layers.3.attn.w_q.weight"));
    CHECK(!gg::testing::contains(names, "layers.0.attn.w_q.weight"));
}

TEST_CASE("hybrid: the linear layers' sizes and zero-centred norms are rows of the config, as Qwen3.5 sets them") {
    LMConfig c = hybrid_lm(4);
    c.attn.qk_norm = true;
    c.linear_k_heads = 2, c.linear_v_heads = 4, c.linear_k_head_size = 8, c.linear_v_head_size = 6;
    c.linear_conv_kernel = 3;
    c.zero_centred_norm = true;
    const LMConfig back = LMConfig::from_json(c.to_json());
    CHECK(back.linear_v_head_size == 6);
    CHECK(back.zero_centred_norm);
    const GatedTransformerLM model(back);
    const GatedDeltaNetOptions& o = model.blocks[0]->linear_attn->options();
    CHECK(o.n_k_heads == 2);
    CHECK(o.v_heads() == 4);
    CHECK(o.k_dim() == 8);
    CHECK(o.v_dim() == 6);
    CHECK(o.conv_kernel == 3);
    // Every norm of the model starts at 0 (a scale of 1 + 0), but the linear layer's output norm.
    for (const Tensor& w : {model.norm_f->weight, model.blocks[0]->norm1->weight, model.blocks[3]->norm2->weight,
                            model.blocks[3]->attn->q_norm->weight, model.blocks[3]->attn->k_norm->weight})
        CHECK(max_abs_diff(w, zeros(w.shape())) == 0);
    CHECK(max_abs_diff(model.blocks[0]->linear_attn->norm->weight, ones({6})) == 0);
    c.linear_v_heads = 3;
    CHECK_THROWS_WITH_AS(c.validate(), "LMConfig: linear_v_heads 3 is not a multiple of linear_k_heads 2",
                         std::invalid_argument);
}

TEST_CASE("hybrid: float64 gradcheck of the loss w.r.t. every parameter of a tiny hybrid LM") {
    Generator gen(46);
    LMConfig c = small_lm(GatePosition::sdpa_output);
    c.d_model = 8;
    c.attn.n_heads = 2;
    c.d_ff = 8;
    c.layer_types = {lin, att};
    SUBCASE("a feed_forward layer before the full one") { c.layer_types = {ffn, att}; }
    GatedTransformerLM model(c);
    model.to(DType::f64);
    randomize(model, gen, 0.5);
    // T = 5: the chunked form pads to a chunk of 8.
    const Tensor ids = randint(0, c.vocab_size, {2, 5}, gen), targets = randint(0, c.vocab_size, {2, 5}, gen);
    GradcheckOptions options;
    options.full_jacobian_limit = 64;  // small tensors element by element, the rest by projections
    const int n = check_gradients(
        model, {}, [&](const std::vector<Tensor>&) { return model.forward(ids, targets).loss; }, {}, options);
    CHECK(n == int(model.parameters().size()));
    CHECK(n > (c.layer_types[0] == lin ? 20 : 12));  // both kinds of block, every weight of each
}

TEST_CASE("hybrid: decoding with the caches (keys and values, DeltaNet states) equals the full pass, float64") {
    Generator gen(7);
    LMConfig c = hybrid_lm(4);
    SUBCASE("Gated DeltaNet layers") {}
    SUBCASE("feed_forward layers, learned positions: layer 0's count of tokens places the next ones") {
        std::ranges::replace(c.layer_types, lin, ffn);
        c.positions = PositionEncoding::learned;
    }
    GatedTransformerLM model(c);
    model.to(DType::f64);
    randomize(model, gen, 0.3);
    model.eval();
    const Tensor ids = randint(0, c.vocab_size, {2, 9}, gen);
    const Tensor full_pass = model.forward(ids).logits;
    std::vector<LayerCache> caches;
    std::vector<Tensor> parts;
    int64_t at = 0;
    for (int64_t len : {4, 2, 1, 1, 1}) {  // a prompt, then a pair, then token by token
        parts.push_back(model.forward(ids.narrow(1, at, len), Tensor(), &caches).logits);
        at += len;
    }
    CHECK(caches[0].seen() == 9);
    CHECK(caches[0].kv.length() == 0);   // neither a linear layer nor a feed_forward one keeps keys
    CHECK(caches[3].kv.length() == 9);
    CHECK(!caches[3].linear.state.defined());
    CHECK(max_abs_diff(cat(parts, 1), full_pass) < 1e-10);
    CHECK(amax(abs(full_pass)).item() > 0.1);  // the logits are not trivially small
}

TEST_CASE("hybrid: greedy sampling with the caches picks each token the full pass would") {
    Generator gen(8);
    GatedTransformerLM model(hybrid_lm(4));
    model.to(DType::f64);
    randomize(model, gen, 0.5);
    model.eval();
    SampleOptions options;
    options.max_new_tokens = 6;
    options.temperature = 0;
    const std::vector<int64_t> prompt{3, 1, 4, 1};
    const std::vector<int64_t> drawn = generate(model, prompt, options);
    REQUIRE(drawn.size() == 6);
    std::vector<int64_t> seq = prompt;
    seq.insert(seq.end(), drawn.begin(), drawn.end() - 1);
    const Tensor logits = model.forward(from_vector(seq, {1, int64_t(seq.size())})).logits;  // (1, T, V)
    const std::vector<double> values = logits.reshape({-1}).to_vector<double>();
    const size_t V = size_t(logits.size(2));
    std::vector<int64_t> best;  // the full pass's choice after each token from the prompt's last on
    for (size_t t = prompt.size() - 1; t < seq.size(); ++t)
        best.push_back(std::max_element(values.begin() + t * V, values.begin() + (t + 1) * V) - (values.begin() + t * V));
    CHECK(best == drawn);
}

TEST_CASE("hybrid: the sink analysis measures the full layers and reports the linear layers' state and decay") {
    Generator gen(9);
    GatedTransformerLM model(hybrid_lm(4));
    randomize(model, gen, 0.3);
    // Layer 1's decay rate A = e^{A_log} = 400 makes α = e^{−A·softplus(·)} about 0: it forgets at once.
    {
        NoGradGuard no_grad;
        model.blocks[1]->linear_attn->A_log.fill_(std::log(400.0));
    }
    const Tensor ids = randint(0, 23, {2, 10}, gen);
    const ModelAnalysis a = analyze(model, ids);
    REQUIRE(a.layers.size() == 1);
    CHECK(a.layers[0].layer == 3);
    CHECK(a.heads == 4);
    REQUIRE(a.linear_layers.size() == 3);
    for (size_t l = 0; l < 3; ++l) {
        const LinearLayerAnalysis& x = a.linear_layers[l];
        CHECK(x.layer == int64_t(l));
        REQUIRE(x.decay.size() == 4);
        CHECK(x.mean_state_norm > 0);
        CHECK(x.mean_decay >= 0);
        CHECK(x.mean_decay < 1);
    }
    CHECK(a.linear_layers[1].mean_decay < 0.05);
    CHECK(a.linear_layers[0].mean_decay > 0.1);
    CHECK(a.table().find("linear layer  state norm  decay") != std::string::npos);
    CHECK(a.to_json().find("\"linear_layers\"") != std::string::npos);
    // Only the linear layers asked for.
    const ModelAnalysis some = analyze(model, ids, 0.3, {1});
    CHECK(some.layers.empty());
    REQUIRE(some.linear_layers.size() == 1);
    CHECK(some.linear_layers[0].mean_decay == doctest::Approx(a.linear_layers[1].mean_decay));
}

TEST_CASE("hybrid: a feed_forward layer is its FFN alone: its blocks, a training step, a checkpoint, the analysis") {
    Generator gen(10);
    LMConfig c = hybrid_lm(4);
    std::ranges::replace(c.layer_types, lin, ffn);
    CHECK(c.to_json().find(R"("layer_types":["feed_forward","feed_forward","feed_forward","full_attention"])") !=
          std::string::npos);
    GatedTransformerLM model(c);
    for (size_t l = 0; l < 3; ++l) {
        CHECK(!model.blocks[l]->has_attention());
        CHECK(!model.blocks[l]->linear_attn);
        CHECK(!model.blocks[l]->norm1);  // nothing of attention is made
        CHECK(model.blocks[l]->ffn);
    }
    CHECK(model.blocks[3]->has_attention());
    const std::vector<std::string> names = gg::testing::names_of(model);
    CHECK(gg::testing::contains(names, "layers.0.ffn.w1.weight"));
    CHECK(!gg::testing::contains(names, "layers.0.norm1.weight"));

    // One AdamW step on a batch lowers its loss, every parameter having had a gradient.
    const Tensor ids = randint(0, c.vocab_size, {2, 10}, gen), targets = randint(0, c.vocab_size, {2, 10}, gen);
    AdamW optimizer(model.parameters(), 1e-2);
    const Tensor loss = model.forward(ids, targets).loss;
    loss.backward();
    for (const Tensor& p : model.parameters()) CHECK(p.grad().defined());
    optimizer.step();
    CHECK(model.forward(ids, targets).loss.item() < loss.item());

    // A checkpoint keeps the layer types in its config and the weights.
    const std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("gg_test_feed_forward_" + std::to_string(getpid()) + ".safetensors");
    save(model, path.string(), {{"config", c.to_json()}});
    const std::shared_ptr<GatedTransformerLM> loaded = load_checkpoint(path.string());
    std::filesystem::remove(path);
    CHECK(loaded->config().layer_types == c.layer_types);
    CHECK(max_abs_diff(loaded->forward(ids).logits, model.forward(ids).logits) == 0);

    // The sink analysis reads the one attention layer, and there is no linear layer to report.
    const ModelAnalysis a = analyze(model, ids);
    REQUIRE(a.layers.size() == 1);
    CHECK(a.layers[0].layer == 3);
    CHECK(a.linear_layers.empty());

    c.ffn = false;
    CHECK_THROWS_WITH_AS(c.validate(), "LMConfig: layer 0 is feed_forward, a block of its FFN alone, but ffn is off",
                         std::invalid_argument);
}
