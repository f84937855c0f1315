// nn/analysis/analysis.h counts the slot: the sink report of models whose attention is known in
// closed form. With W_Q = 0 every score is 0, so query i, which sees its n = i + 1 keys, gives
// each of them  softmax 1/n,  softmax1 1/(n + 1),  sink 1/(e^b + n),  sigmoid σ(−log n) = 1/(n + 1),
// softpick ReLU(e^0 − 1) = 0;  and the slot takes 1/(n + 1) (softmax1) or e^b/(e^b + n) (sink).
// A sink logit above every score parks the attention in the slot, where a first-token metric
// cannot see it (Gu et al. 2024, arXiv 2410.10781, Table 4): the report must call it a sink.
// And a softmax model whose queries all look at BOS is reported as it always was.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

namespace {

constexpr int64_t kT = 8;

// One layer of 2 heads, learned positions set to 0, in float64.
std::unique_ptr<GatedTransformerLM> tiny_model(ScoreFunction f) {
    LMConfig c;
    c.d_model = 8, c.n_layers = 1, c.attn.n_heads = 2, c.max_len = kT, c.attn.score_fn = f;
    c.positions = PositionEncoding::learned;
    manual_seed(5);
    NoGradGuard no_grad;  // the weights are set in place
    auto model = std::make_unique<GatedTransformerLM>(c);
    model->to(DType::f64);
    model->pos_emb->weight.fill_(0);
    return model;
}

Tensor some_ids() {
    Generator gen(6);
    return cat({full({2, 1}, 256, DType::i64), randint(0, 256, {2, kT - 1}, gen)}, 1);  // (2, T), BOS first
}

// The mean over queries i = 1 … T−1 of share(n), n = i + 1 the keys query i sees.
template <class F>
double over_queries(F share) {
    double total = 0;
    for (int64_t i = 1; i < kT; ++i) total += share(double(i + 1));
    return total / double(kT - 1);
}

}  // namespace

TEST_CASE("sink report: every score function's first-token share, slot share and row sum in closed form") {
    NoGradGuard no_grad;  // the weights are set in place
    const double b = std::log(20.0);  // the sink logit: the slot weighs as much as 20 keys of score 0
    struct Case {
        ScoreFunction f;
        double first, slot, row_sum, normalised;
    };
    const Case cases[] = {
        {ScoreFunction::softmax, over_queries([](double n) { return 1 / n; }), 0, 1,
         over_queries([](double n) { return 1 / n; })},
        {ScoreFunction::softmax1, over_queries([](double n) { return 1 / (n + 1); }),
         over_queries([](double n) { return 1 / (n + 1); }), over_queries([](double n) { return n / (n + 1); }),
         over_queries([](double n) { return 1 / (n + 1); })},
        {ScoreFunction::sink, over_queries([](double n) { return 1 / (20 + n); }),
         over_queries([](double n) { return 20 / (20 + n); }), over_queries([](double n) { return n / (20 + n); }),
         over_queries([](double n) { return 1 / (20 + n); })},
        // Sigmoid's weights over their row sum are softmax's: 1/n.
        {ScoreFunction::sigmoid, over_queries([](double n) { return 1 / (n + 1); }), 0,
         over_queries([](double n) { return n / (n + 1); }), over_queries([](double n) { return 1 / n; })},
        // Every softpick row is 0: nothing anywhere, no share of it on the first token.
        {ScoreFunction::softpick, 0, 0, 0, 0},
    };
    for (const Case& c : cases) {
        CAPTURE(score_function_name(c.f));
        const auto owner = tiny_model(c.f);
        GatedTransformerLM& model = *owner;
        model.blocks[0]->attn->w_q->weight.fill_(0);
        if (c.f == ScoreFunction::sink) model.blocks[0]->attn->sink.fill_(b);
        const ModelAnalysis report = analyze(model, some_ids());
        REQUIRE(report.layers.size() == 1);
        const LayerAnalysis& layer = report.layers[0];
        CHECK(report.score_fn == c.f);
        for (int64_t h = 0; h < 2; ++h) {
            CHECK(layer.first_token_share[h] == doctest::Approx(c.first).epsilon(1e-12));
            CHECK(layer.slot_share[h] == doctest::Approx(c.slot).epsilon(1e-12));
            CHECK(layer.row_sum[h] == doctest::Approx(c.row_sum).epsilon(1e-12));
            CHECK(layer.normalised_first_token_share[h] == doctest::Approx(c.normalised).epsilon(1e-12));
        }
        CHECK(layer.mean_slot_share == doctest::Approx(c.slot).epsilon(1e-12));
        CHECK(layer.mean_row_sum == doctest::Approx(c.row_sum).epsilon(1e-12));
    }
}

TEST_CASE("sink report: a sink logit that holds the attention is a sink, though the first token holds none") {
    NoGradGuard no_grad;  // the weights are set in place
    const auto owner = tiny_model(ScoreFunction::sink);
    GatedTransformerLM& model = *owner;
    model.blocks[0]->attn->w_q->weight.fill_(0);
    model.blocks[0]->attn->sink.fill_(std::log(20.0));
    const ModelAnalysis report = analyze(model, some_ids());
    // The trap: by the first token alone, no head is a sink (α ≈ 0.04).
    CHECK(report.mean_first_token_share < 0.05);
    CHECK(report.first_token_sink_rate == 0);
    // The slot holds about 0.81 of every row, and the report says so.
    CHECK(report.mean_slot_share > 0.8);
    CHECK(report.slot_sink_rate == 1);
    CHECK(report.sink_heads == 2);
    CHECK(report.heads == 2);
    CHECK(report.sink_layers == 1);
    CHECK(report.layers[0].sink);
    const std::string table = report.table();
    INFO(table);
    CHECK(table.find("layer  first-token share   slot  sink") == 0);
    CHECK(table.find("0.040  0.805   yes") != std::string::npos);
    CHECK(table.find("mean first-token share 0.040, slot share 0.805; sink layers 1 of 1; "
                     "sink heads (alpha or slot > 0.30) 2 of 2\n") != std::string::npos);
    CHECK(table.find("sink rate (Gu et al. 2024, heads above 0.30): first token 0.0%, slot 100.0%\n") !=
          std::string::npos);
    CHECK(report.to_json().find("\"slot_sink_rate\": 1.0") != std::string::npos);

    // At b = −30 the slot holds nothing: no sink anywhere.
    model.blocks[0]->attn->sink.fill_(-30);
    const ModelAnalysis none = analyze(model, some_ids());
    CHECK(none.mean_slot_share < 1e-12);
    CHECK(none.sink_heads == 0);
    CHECK(none.sink_layers == 0);
}

TEST_CASE("sink report: a softmax model whose queries all look at BOS is reported as before the slot") {
    NoGradGuard no_grad;  // the weights are set in place
    // Every token embeds as e0, BOS as e0 + e1; W_Q reads e0 and W_K reads e1 into every
    // coordinate, so every query meets BOS's key with a score of about 23 and every other key
    // with 0.
    const auto owner = tiny_model(ScoreFunction::softmax);
    GatedTransformerLM& model = *owner;
    std::vector<double> embedding(257 * 8, 0.0), w_q(8 * 8, 0.0), w_k(8 * 8, 0.0);
    for (int64_t t = 0; t < 257; ++t) embedding[t * 8] = 1;
    embedding[256 * 8 + 1] = 1;
    for (int64_t o = 0; o < 8; ++o) w_q[o * 8 + 0] = 1, w_k[o * 8 + 1] = 1;  // (out, in)
    model.tok_emb->weight.copy_(from_vector(embedding, {257, 8}).to(DType::f64));
    model.blocks[0]->attn->w_q->weight.copy_(from_vector(w_q, {8, 8}).to(DType::f64));
    model.blocks[0]->attn->w_k->weight.copy_(from_vector(w_k, {8, 8}).to(DType::f64));
    const Tensor ids = some_ids();
    const ModelAnalysis report = analyze(model, ids);

    // α as it was always computed: the weight on key 0 of queries 1 … T−1, averaged.
    LMCapture capture;
    model.forward(ids, Tensor(), nullptr, &capture);
    const std::vector<double> alpha =
        mean(capture.attention[0].probs.narrow(2, 1, kT - 1).select(3, 0), {0, 2}).to_vector<double>();
    for (int64_t h = 0; h < 2; ++h) {
        CHECK(alpha[h] > 0.999);
        CHECK(report.layers[0].first_token_share[h] == alpha[h]);
        CHECK(report.layers[0].normalised_first_token_share[h] == alpha[h]);
        CHECK(report.layers[0].slot_share[h] == 0);
    }
    CHECK(report.sink_heads == 2);
    CHECK(report.sink_layers == 1);
    CHECK(report.first_token_sink_rate == 1);
    CHECK(report.slot_sink_rate == 0);
    // The table of every softmax model: no slot or row-sum column, no rate line (the count of
    // sink heads is the rate), the summary line unchanged.
    const std::string table = report.table();
    INFO(table);
    CHECK(table.find("layer  first-token share  sink  entropy  gated-entropy  gate-mean  gate<0.1  max|h|  max|h@0|\n"
                     "    0              1.000   yes") == 0);
    CHECK(table.ends_with("\nmean first-token share 1.000; sink layers 1 of 1; sink heads (alpha > 0.30) 2 of 2\n"));
}
