// Bigram-Backcopy (nn/train/synthetic.h): the sequences follow the task's rules, and a short
// training run shows the mechanism tutorial 06(a) is about — an idle head parks on its own
// token when it can, sinks on BOS when it cannot, and a G1 head closes its gate instead.
#include <doctest/doctest.h>

#include <cmath>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

TEST_CASE("synthetic: Bigram-Backcopy starts with BOS, copies after triggers, follows the chain elsewhere") {
    const BigramBackcopy data;  // 64 tokens, 4 successors, 3 triggers
    CHECK(data.bos() == 64);
    CHECK(data.vocab_size() == 65);
    CHECK(data.trigger_tokens().size() == 3);
    for (int64_t a = 0; a < 64; ++a) {
        double row = 0;
        int successors = 0;
        for (int64_t b = 0; b < 64; ++b) row += data.transition(a, b), successors += data.transition(a, b) > 0;
        CHECK(std::abs(row - 1.0) < 1e-12);
        CHECK(successors == 4);
    }
    Generator gen(3);
    const Batch batch = data.train_batch(32, 64, gen);
    const std::vector<int64_t> x = batch.inputs.to_vector<int64_t>(), y = batch.targets.to_vector<int64_t>();
    int copies = 0;
    for (int64_t b = 0; b < 32; ++b) {
        const int64_t* xs = x.data() + b * 64;
        const int64_t* ys = y.data() + b * 64;
        CHECK(xs[0] == data.bos());
        CHECK(!data.is_trigger(ys[0]));
        for (int64_t t = 0; t + 1 < 64; ++t) CHECK(ys[t] == xs[t + 1]);  // targets are the inputs shifted
        for (int64_t t = 1; t < 64; ++t) {
            CHECK(xs[t] != data.bos());
            if (data.is_trigger(xs[t])) {
                CHECK(ys[t] == xs[t - 1]);
                CHECK(!data.is_trigger(xs[t - 1]));
                ++copies;
            } else {
                CHECK(data.transition(xs[t], ys[t]) > 0);
            }
        }
    }
    CHECK(copies > 0);
    // Validation batches are fixed: the same i gives the same batch, another i another one.
    const auto ids = [&](int64_t i) { return data.val_batch(i, 4, 16).inputs.to_vector<int64_t>(); };
    CHECK(ids(2) == ids(2));
    CHECK(ids(2) != ids(3));
    CHECK_THROWS_WITH_AS(BigramBackcopy({.vocab = 8, .triggers = 4}), doctest::Contains("triggers 4"),
                         std::invalid_argument);
}

namespace {

// Means over the non-trigger (idle) and the trigger queries t ≥ 1 of one trained 1-layer,
// 1-head model: attention on BOS (α), attention on the query itself, and the gate.
struct Idle {
    double alpha_idle = 0, self_idle = 0, gate_idle = 0, gate_trigger = 0;
};

Idle measure(GatedTransformerLM& model, const BigramBackcopy& data, int64_t B, int64_t T) {
    NoGradGuard no_grad;
    model.eval();
    const Batch batch = data.val_batch(0, B, T);
    LMCapture capture;
    model.forward(batch.inputs, Tensor(), nullptr, &capture);
    const AttentionCapture& c = capture.attention[0];
    const std::vector<float> p = c.probs.to_vector<float>();  // (B, 1, T, T)
    std::vector<float> g;
    if (c.gate.defined()) g = mean(c.gate, {3}).to_vector<float>();  // (B, 1, T)
    const std::vector<int64_t> x = batch.inputs.to_vector<int64_t>();
    Idle r;
    double idle = 0, trigger = 0;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 1; t < T; ++t) {
            const float* row = p.data() + (b * T + t) * T;
            const double gate = g.empty() ? 1.0 : g[b * T + t];
            if (data.is_trigger(x[b * T + t])) {
                trigger += 1, r.gate_trigger += gate;
            } else {
                idle += 1, r.alpha_idle += row[0], r.self_idle += row[t], r.gate_idle += gate;
            }
        }
    r.alpha_idle /= idle, r.self_idle /= idle, r.gate_idle /= idle, r.gate_trigger /= trigger;
    return r;
}

Idle train_and_measure(const std::shared_ptr<BigramBackcopy>& data, GatePosition gate, bool exclude_self) {
    TrainConfig c;
    c.model.vocab_size = data->vocab_size();
    c.model.d_model = 64, c.model.n_layers = 1, c.model.attn.n_heads = 1, c.model.ffn = false;
    c.model.attn.gate = gate, c.model.attn.exclude_self = exclude_self;
    // nn.Linear's init, under which the value path carries each token's identity and an
    // idle head can park on its own token (tutorial 06's contrast case).
    c.model.init = LMInit::torch;
    c.batch_size = 32, c.seq_len = c.model.max_len = 16;
    c.steps = 400, c.lr = 3e-3, c.weight_decay = 0, c.warmup = 30, c.eval_every = 0, c.eval_batches = 1, c.seed = 1;
    Trainer trainer(c, data);
    trainer.run(/*quiet=*/true);
    return measure(trainer.model(), *data, 64, 16);
}

}  // namespace

TEST_CASE("synthetic: with a Dirichlet concentration every row spreads over all tokens") {
    BigramBackcopyOptions o;
    o.concentration = 0.3;
    o.triggers = 4;
    const BigramBackcopy data(o);
    CHECK(data.trigger_tokens().size() == 4);
    double entropy = 0;
    for (int64_t a = 0; a < 64; ++a) {
        double row = 0;
        for (int64_t b = 0; b < 64; ++b) {
            const double p = data.transition(a, b);
            CHECK(p > 0);
            row += p;
            entropy -= p * std::log(p) / 64;
        }
        CHECK(std::abs(row - 1.0) < 1e-12);
    }
    // E[H] of a symmetric Dirichlet(α) over V outcomes is ψ(Vα + 1) − ψ(α + 1): 3.13 nats at
    // α = 0.3, V = 64; the successors form gives about 1.1.
    CHECK(entropy > 2.9);
    CHECK(entropy < 3.35);
    o.concentration = -1;
    CHECK_THROWS_AS(BigramBackcopy{o}, std::invalid_argument);
}

TEST_CASE("synthetic: (torch init) an idle head parks on itself, or on BOS once its own key is hidden; G1 closes its gate") {
    const auto data = std::make_shared<BigramBackcopy>();
    // Even attention over keys 0 … t−1 would give α = mean of 1/t over t = 1 … 15 = 0.221.
    const Idle visible = train_and_measure(data, GatePosition::none, false);
    CAPTURE(visible.alpha_idle);
    CAPTURE(visible.self_idle);
    CHECK(visible.self_idle > 0.8);
    CHECK(visible.alpha_idle < 0.1);
    const Idle hidden = train_and_measure(data, GatePosition::none, true);
    CAPTURE(hidden.alpha_idle);
    CHECK(hidden.self_idle == 0.0);
    CHECK(hidden.alpha_idle > 0.5);
    const Idle gated = train_and_measure(data, GatePosition::sdpa_output, true);
    CAPTURE(gated.gate_idle);
    CAPTURE(gated.gate_trigger);
    CHECK(gated.gate_idle < gated.gate_trigger - 0.05);
}
