// Tutorial 07's pieces (tutorials/07_learning_rate/training.h): the bfloat16 rounding op and
// its straight-through gradient, and the tutorial's training loop against the trainer's.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "07_learning_rate/training.h"
#include "tests/check.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;
using gg::testing::max_abs_diff;

namespace {
float from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }
}  // namespace

TEST_CASE("round_to_bf16: nearest bfloat16, ties to even, specials kept, float32 and float64 alike") {
    // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 (bf16 keeps 7 fraction bits): to even, 1.
    // 1 + 3·2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to even, 1 + 2^-6.
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> x{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -3.0f, 0.0f,
                               from_bits(0x3F80FFFFu), inf, -inf, 1e-40f};
    const std::vector<float> want{1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -3.0f, 0.0f,
                                  from_bits(0x3F810000u), inf, -inf, from_bits(std::bit_cast<uint32_t>(1e-40f) & 0xFFFF0000u)};
    const std::vector<float> got = round_to_bf16(from_vector(x, {9})).to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i) {
        CAPTURE(i);
        CHECK(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]));
    }
    CHECK(std::isnan(round_to_bf16(from_vector(std::vector<float>{NAN}, {1})).item()));
    const std::vector<double> d = round_to_bf16(from_vector(std::vector<double>{1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8}, {2}))
                                      .to_vector<double>();
    CHECK(d == std::vector<double>{1.0, 1.0 + 0x1p-6});
    CHECK_THROWS_AS(round_to_bf16(zeros({2}, DType::i64)), std::invalid_argument);
}

TEST_CASE("round_to_bf16: the gradient passes straight through (float64, checked against finite differences)") {
    // On bfloat16 values the rounding is the identity, so f(round(x)) and f(x) agree there, and
    // a straight-through gradient must equal f's own gradient — which gradcheck verifies by
    // central differences. Off the grid the gradient is still f'(round(x)): ∂round/∂x = 1.
    Generator gen(3);
    const Tensor w = randn({3, 5}, gen, DType::f64);
    const auto f = [&](const Tensor& x) { return sum(tanh(x) * w); };
    const Tensor on_grid = round_to_bf16(randn({3, 5}, gen, DType::f64));
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return f(in[0]); }, {on_grid.clone().requires_grad_()}).ok);
    const Tensor a = on_grid.clone().requires_grad_(), b = on_grid.clone().requires_grad_();
    f(round_to_bf16(a)).backward();
    f(b).backward();
    CHECK(max_abs_diff(a.grad(), b.grad()) == 0);
    const Tensor off = randn({3, 5}, gen, DType::f64).requires_grad_();
    sum(round_to_bf16(off) * w).backward();
    CHECK(max_abs_diff(off.grad(), w) == 0);
}

TEST_CASE("round_matmul_inputs_to_bf16: every Linear of the model rounds its input") {
    LMConfig c;
    c.vocab_size = 17, c.d_model = 16, c.n_layers = 2, c.attn.n_heads = 2;
    manual_seed(1);
    GatedTransformerLM model(c);
    const Tensor ids = from_vector(std::vector<int64_t>{16, 3, 5, 7, 1, 2}, {1, 6});
    const Tensor plain = model.forward(ids).logits;
    round_matmul_inputs_to_bf16(model);
    int hooked = 0;
    for (const auto& [name, m] : model.named_modules())
        if (const auto* l = dynamic_cast<const Linear*>(m)) hooked += bool(l->input_transform);
    CHECK(hooked == 2 * (5 + 3) + 1);  // per block: w_q, w_k, w_v, w_o, w_g and the FFN's three; lm_head
    const double diff = max_abs_diff(model.forward(ids).logits, plain);
    CHECK(diff > 0);
    CHECK(diff < 0.05);  // bf16 keeps about 3 significant digits
}

TEST_CASE("train_run: with decay on all parameters and float32 it is the trainer's run, bit for bit") {
    std::vector<std::string> docs;
    Generator gen(5);
    for (int d = 0; d < 40; ++d) {
        std::string doc;
        for (int w = 0; w < 30; ++w) doc += std::string(1 + gen.randint(0, 5), char('a' + gen.randint(0, 8))) + " ";
        docs.push_back(doc);
    }
    const auto data = std::make_shared<const TextDataset>(docs);
    RunSettings s;
    s.layers = 2, s.d_model = 16, s.heads = 2, s.steps = 12, s.warmup = 3, s.batch = 4, s.seq_len = 16;
    for (bool gated : {false, true}) {
        CAPTURE(gated);
        s.gated = gated;
        Trainer trainer(s.train_config(), data);
        const TrainResult want = trainer.run(true);
        const RunLog got = train_run(s, data);
        REQUIRE(got.loss.size() == want.log.size());
        for (size_t t = 0; t < got.loss.size(); ++t) {
            CHECK(got.loss[t] == want.log[t].loss);
            CHECK(got.grad_norm[t] == want.log[t].grad_norm);
        }
        CHECK(got.val_loss == want.final_val_loss);
        // Decay on matrices only changes the run; bf16 inputs too, a little.
        RunSettings m = s;
        m.decay_matrices_only = true;
        CHECK(train_run(m, data).val_loss != want.final_val_loss);
        m = s, m.bf16 = true;
        const RunLog rounded = train_run(m, data);
        CHECK(rounded.val_loss != want.final_val_loss);
        CHECK(std::abs(rounded.val_loss - want.final_val_loss) < 0.1);
    }
}
