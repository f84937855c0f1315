// test_text_loss.cpp — the strided whole-text loss (nn/analysis/text_loss.h) against each token
// scored alone: token t belongs to the first window that ends past it, and its loss is that of
// a forward pass over the window's text up to t (attention is causal), BOS first when there is one.
// The rolling-cache loss against the same, each token's context being what the caches hold.
#include <cmath>

#include "tests/nn_check.h"

using namespace gg;
using namespace gg::nn;
using namespace gg::testing;

namespace {

// The mean NLL over the tokens the strided scheme scores, one forward pass per token.
double token_by_token(const GatedTransformerLM& model, const std::vector<int64_t>& x, int64_t window, int64_t stride,
                      std::optional<int64_t> bos, int64_t* scored) {
    const int64_t N = int64_t(x.size()), C = window - (bos ? 1 : 0);  // text per window
    double total = 0;
    *scored = 0;
    for (int64_t t = bos ? 0 : 1; t < N; ++t) {
        // The first window [k·stride, k·stride + C) that reaches past t.
        const int64_t k = std::max<int64_t>(0, (t + 1 - C + stride - 1) / stride);
        const int64_t begin = k * stride;
        if (!bos && t == begin) continue;  // a window's first token, with nothing before it
        std::vector<int64_t> ids;
        if (bos) ids.push_back(*bos);
        for (int64_t j = begin; j < t; ++j) ids.push_back(x[size_t(j)]);  // the context of x[t]
        const Tensor logits = model.forward(from_vector(ids, {1, int64_t(ids.size())})).logits;  // (1, L, V)
        const Tensor last = logits.select(1, int64_t(ids.size()) - 1).reshape({1, -1});
        total += cross_entropy(last, from_vector(std::vector<int64_t>{x[size_t(t)]}, {1})).item();
        ++*scored;
    }
    return total / double(*scored);
}

// A model's weights drawn at random (±0.3), in eval mode; n random ids below a vocabulary.
void random_model(GatedTransformerLM& model, Generator& gen) {
    randomize(model, gen, 0.3);
    model.eval();
}
std::vector<int64_t> random_ids(int64_t n, const LMConfig& c, Generator& gen) {
    std::vector<int64_t> x(size_t(n), 0);
    for (int64_t& id : x) id = int64_t(gen.uniform() * double(c.vocab_size - 1));
    return x;
}

// A two-layer model whose first layer reads every position (a linear layer's state, or a full
// layer left whole): rolled[t], the loss of the token after position t read through a cache of
// K positions keeping the first F on the second layer, is that of the second layer reading, as
// a fresh pass, the first layer's outputs at the positions its cache holds, from a causal pass
// over the whole text x.
void check_second_layer_reads_what_it_holds(const GatedTransformerLM& model, const std::vector<int64_t>& x,
                                            const std::vector<double>& rolled, int64_t K, int64_t F) {
    const int64_t N = int64_t(x.size()), d = model.config().d_model;
    LMCapture capture;
    model.forward(from_vector(x, {1, N}), Tensor(), nullptr, &capture);
    // (N, d): the first layer's output at each position, which depends on every token before it
    const std::vector<float> first_out = capture.hidden[0].to_vector<float>();
    REQUIRE(int64_t(rolled.size()) == N - 1);
    for (int64_t t = 0; t + 1 < N; ++t) {
        const int64_t recent = std::min<int64_t>(t + 1 - std::min<int64_t>(t + 1, F), K - F);
        std::vector<int64_t> held;
        for (int64_t j = 0; j < std::min<int64_t>(t + 1, F); ++j) held.push_back(j);
        for (int64_t j = t + 1 - recent; j <= t; ++j) held.push_back(j);
        std::vector<float> rows;
        for (const int64_t j : held) rows.insert(rows.end(), first_out.begin() + j * d, first_out.begin() + (j + 1) * d);
        const int64_t n = int64_t(held.size());
        const Tensor h = model.blocks[1]->forward(from_vector(rows, {1, n, d}));  // (1, n, d)
        const Tensor last = model.unembed(h.select(1, n - 1));                    // (1, V)
        const double want = cross_entropy(last, from_vector(std::vector<int64_t>{x[size_t(t + 1)]}, {1})).item();
        CHECK(rolled[size_t(t)] == doctest::Approx(want).epsilon(1e-4));
    }
}

// Each token's loss in `losses` is that of one causal pass over the whole text x.
void check_is_causal_pass(const GatedTransformerLM& model, const std::vector<int64_t>& x, const std::vector<double>& losses,
                          double epsilon) {
    const int64_t N = int64_t(x.size());
    const Tensor ids = from_vector(x, {1, N});
    const Tensor logits = model.forward(ids.narrow(1, 0, N - 1)).logits;  // (1, N - 1, V)
    for (int64_t t = 0; t < N - 1; ++t)
        CHECK(losses[size_t(t)] ==
              doctest::Approx(cross_entropy(logits.select(1, t), ids.narrow(1, t + 1, 1).reshape({1})).item()).epsilon(epsilon));
}

}  // namespace

TEST_CASE("text_loss: every token scored once, with the context of the first window that ends past it") {
    LMConfig c = small_lm();
    c.max_len = 64;
    manual_seed(51);
    Generator gen(51);
    GatedTransformerLM model(c);
    random_model(model, gen);
    const std::vector<int64_t> x = random_ids(37, c, gen);
    NoGradGuard no_grad;
    struct Case {
        int64_t window, stride;
        std::optional<int64_t> bos;
    };
    for (const Case& k : {Case{10, 3, {}}, Case{10, 9, {}}, Case{10, 10, {}}, Case{8, 1, {}}, Case{10, 4, int64_t(22)},
                          Case{10, 9, int64_t(22)}, Case{2, 1, int64_t(22)}, Case{64, 0, {}}}) {
        CAPTURE(k.window);
        CAPTURE(k.stride);
        CAPTURE(k.bos.has_value());
        const int64_t stride = k.stride > 0 ? k.stride : (k.window - (k.bos ? 1 : 0)) / 2;
        int64_t scored = 0;
        const double want = token_by_token(model, x, std::min<int64_t>(k.window, 37), stride, k.bos, &scored);
        for (int64_t batch : {1, 3}) {
            const TextLoss got = text_loss(model, x, {.window = k.window, .stride = k.stride, .bos = k.bos, .batch = batch});
            CHECK(got.loss == doctest::Approx(want).epsilon(1e-5));
            CHECK(got.scored == scored);
            CHECK(got.tokens == 37);
            CHECK(got.stride == stride);
        }
    }
    // Windows that overlap score every token but the first (all of them after a BOS).
    CHECK(text_loss(model, x, {.window = 10, .stride = 5}).scored == 36);
    CHECK(text_loss(model, x, {.window = 10, .stride = 5, .bos = int64_t(22)}).scored == 37);
    // A window as long as the text is one forward pass.
    const Tensor ids = from_vector(x, {1, 37});
    const double whole = cross_entropy(model.forward(ids.narrow(1, 0, 36)).logits, ids.narrow(1, 1, 36)).item();
    CHECK(text_loss(model, x, {.window = 37}).loss == doctest::Approx(whole).epsilon(1e-6));
    CHECK(text_loss(model, x, {.window = 37}).windows == 1);

    CHECK_THROWS_WITH_AS(text_loss(model, x, {.window = 1}), doctest::Contains("at least 2"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(text_loss(model, x, {.window = 10, .stride = 11}), doctest::Contains("stride 11 is longer"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(text_loss(model, {5}, {.window = 10}), doctest::Contains("the text has 1 tokens"),
                         std::invalid_argument);
    CHECK(text_loss(model, {5}, {.window = 10, .bos = int64_t(22)}).scored == 1);
}

TEST_CASE("rolling_cache_loss: a cache that holds the whole text is the causal pass; a smaller one reads what it holds") {
    LMConfig c = small_lm();
    c.max_len = 64;
    Generator gen(52);
    GatedTransformerLM model(c);
    random_model(model, gen);
    const std::vector<int64_t> x = random_ids(30, c, gen);
    NoGradGuard no_grad;
    const std::vector<double> whole = rolling_cache_loss(model, x, {.cache = 64});
    REQUIRE(whole.size() == 29);
    check_is_causal_pass(model, x, whole, 1e-5);
    CHECK(rolling_cache_loss(model, x, {.cache = 64, .bos = int64_t(22)}).size() == 30);

    // One layer: keys and values depend on their own token, so the token after position t reads
    // as a fresh pass over the first F and the newest K − F tokens (RoPE at cache positions).
    LMConfig one = c;
    one.n_layers = 1;
    GatedTransformerLM shallow(one);
    random_model(shallow, gen);
    const int64_t K = 6, F = 2;
    const std::vector<double> rolled = rolling_cache_loss(shallow, x, {.cache = K, .keep_first = F});
    const std::vector<double> dropped = rolling_cache_loss(shallow, x, {.cache = K});
    double apart = 0;
    for (int64_t t = 0; t < 29; ++t) {
        const int64_t recent = std::min<int64_t>(t + 1 - std::min<int64_t>(t + 1, F), K - F);
        std::vector<int64_t> held(x.begin(), x.begin() + std::min<int64_t>(t + 1, F));
        held.insert(held.end(), x.begin() + (t + 1 - recent), x.begin() + t + 1);
        const Tensor h = from_vector(held, {1, int64_t(held.size())});
        const Tensor last = shallow.forward(h).logits.select(1, int64_t(held.size()) - 1);  // (1, V)
        const double want = cross_entropy(last, from_vector(std::vector<int64_t>{x[size_t(t + 1)]}, {1})).item();
        CHECK(rolled[size_t(t)] == doctest::Approx(want).epsilon(1e-5));
        apart = std::max(apart, std::abs(dropped[size_t(t)] - rolled[size_t(t)]));
    }
    CHECK(apart > 1e-3);  // keeping the first tokens changes what is read past the cache

    CHECK_THROWS_WITH_AS(rolling_cache_loss(model, x, {.cache = 1}), doctest::Contains("a cache of 1"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(rolling_cache_loss(model, x, {.cache = 4, .keep_first = 4}), doctest::Contains("keep_first < cache"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(rolling_cache_loss(model, {5}, {.cache = 4}), doctest::Contains("the text has 1 tokens"),
                         std::invalid_argument);
    LMConfig learned = c;
    learned.positions = PositionEncoding::learned, learned.max_len = 20;
    CHECK_THROWS_WITH_AS(rolling_cache_loss(GatedTransformerLM(learned), x, {.cache = 4}),
                         doctest::Contains("29 positions, more than the 20 learned"), std::invalid_argument);
}

TEST_CASE("rolling_cache_loss on a hybrid: its linear layers keep their whole state, only its full layers' caches drop") {
    LMConfig c = small_lm();
    c.max_len = 64;
    c.layer_types = {LayerType::linear_attention, LayerType::full_attention};
    Generator gen(53);
    GatedTransformerLM model(c);
    random_model(model, gen);
    const std::vector<int64_t> x = random_ids(30, c, gen);
    NoGradGuard no_grad;
    const int64_t K = 6;
    for (const int64_t F : {0, 1})
        check_second_layer_reads_what_it_holds(model, x, rolling_cache_loss(model, x, {.cache = K, .keep_first = F}), K, F);
    // Windowing its full layer by name is the default reading; a linear layer cannot be windowed.
    CHECK(rolling_cache_loss(model, x, {.cache = K, .windowed = std::vector<int64_t>{1}}) ==
          rolling_cache_loss(model, x, {.cache = K}));
    CHECK_THROWS_WITH_AS(rolling_cache_loss(model, x, {.cache = K, .windowed = std::vector<int64_t>{0}}),
                         doctest::Contains("windowed layer 0 is not a full-attention layer"), std::invalid_argument);
    // Only linear layers: nothing to drop, so a cache of 4 reads as the causal pass over the whole text.
    LMConfig linear = c;
    linear.layer_types = {LayerType::linear_attention, LayerType::linear_attention};
    GatedTransformerLM deltanet(linear);
    random_model(deltanet, gen);
    check_is_causal_pass(deltanet, x, rolling_cache_loss(deltanet, x, {.cache = 4}), 1e-4);
}

TEST_CASE("rolling_cache_loss windowed on some layers: the others read every position") {
    LMConfig c = small_lm();
    c.max_len = 64;
    Generator gen(54);
    GatedTransformerLM model(c);
    random_model(model, gen);
    const std::vector<int64_t> x = random_ids(30, c, gen);
    NoGradGuard no_grad;
    // Layer 0 left whole is a causal pass over the text; layer 1 reads the newest K of its outputs.
    const int64_t K = 6;
    for (const int64_t F : {0, 1}) {
        const std::vector<double> second =
            rolling_cache_loss(model, x, {.cache = K, .keep_first = F, .windowed = std::vector<int64_t>{1}});
        check_second_layer_reads_what_it_holds(model, x, second, K, F);
    }
    // No layer windowed: the causal pass over the whole text, however small the cache.
    const std::vector<double> none = rolling_cache_loss(model, x, {.cache = 4, .windowed = std::vector<int64_t>{}});
    REQUIRE(none.size() == 29);
    check_is_causal_pass(model, x, none, 1e-5);
    // Windowing layer 0 as well is the default, every full layer windowed; and it differs.
    const std::vector<double> both = rolling_cache_loss(model, x, {.cache = K, .windowed = std::vector<int64_t>{0, 1}});
    CHECK(both == rolling_cache_loss(model, x, {.cache = K}));
    const std::vector<double> second = rolling_cache_loss(model, x, {.cache = K, .windowed = std::vector<int64_t>{1}});
    double apart = 0;
    for (size_t t = 0; t < both.size(); ++t) apart = std::max(apart, std::abs(both[t] - second[t]));
    CHECK(apart > 1e-3);

    for (const int64_t layer : {-1, 2}) {
        const std::string message = "windowed layer " + std::to_string(layer) + " is not a full-attention layer of the model's 2";
        CHECK_THROWS_WITH_AS(rolling_cache_loss(model, x, {.cache = K, .windowed = std::vector<int64_t>{layer}}),
                             doctest::Contains(message.c_str()), std::invalid_argument);
    }
}
