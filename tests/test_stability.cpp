// nn/analysis/stability.h against a materialised computation: the attention logits
// z = q·k/√dk built from the layer's own weights (after QK-norm and RoPE), their causal
// softmax and its entropy, the gate, and the output log Z, all on the host in float64.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

namespace {

struct Expected {
    double max_logit = -INFINITY, mean_row_max = 0, min_head_entropy = INFINITY;
};

// z (B, H, T, T) → the largest logit any query gives a key it sees (j ≤ i), the mean of each
// row's largest, and the smallest over heads of the mean entropy of rows 1 … T−1.
Expected from_logits(const Tensor& z) {
    const int64_t B = z.size(0), H = z.size(1), T = z.size(2);
    const std::vector<double> v = z.contiguous().to_vector<double>();
    Expected e;
    double rows = 0;
    for (int64_t h = 0; h < H; ++h) {
        double head_entropy = 0;
        for (int64_t b = 0; b < B; ++b)
            for (int64_t i = 0; i < T; ++i) {
                const double* row = v.data() + ((b * H + h) * T + i) * T;
                const double m = *std::max_element(row, row + i + 1);
                double total = 0, entropy = 0;
                for (int64_t j = 0; j <= i; ++j) total += std::exp(row[j] - m);
                for (int64_t j = 0; j <= i; ++j) {
                    const double p = std::exp(row[j] - m) / total;
                    if (p > 0) entropy -= p * std::log(p);
                }
                e.max_logit = std::max(e.max_logit, m);
                e.mean_row_max += m, rows += 1;
                if (i >= 1) head_entropy += entropy / double(B * (T - 1));
            }
        e.min_head_entropy = std::min(e.min_head_entropy, head_entropy);
    }
    e.mean_row_max /= rows;
    return e;
}

}  // namespace

TEST_CASE("stability: logits, entropy, gate and output log Z match a materialised computation") {
    for (const bool qk_norm : {false, true})
        for (const GatePosition gate : {GatePosition::none, GatePosition::sdpa_output}) {
            CAPTURE(qk_norm);
            CAPTURE(gate_position_name(gate));
            LMConfig c;
            c.d_model = 16, c.n_layers = 2, c.attn.n_heads = 2, c.max_len = 12;
            c.attn.qk_norm = qk_norm, c.attn.gate = gate;
            manual_seed(5);
            GatedTransformerLM model(c);
            model.to(DType::f64);
            {  // larger queries and keys than the init's, so that rows are far from uniform
                NoGradGuard no_grad;
                for (const auto& block : model.blocks)
                    for (const auto& w : {block->attn->w_q, block->attn->w_k}) w->weight.copy_(w->weight * 40.0);
            }
            Generator gen(9);
            const Tensor ids = randint(0, 256, {3, 12}, gen);
            const StabilityStats s = measure_stability(model, ids);
            REQUIRE(s.max_attn_logit.size() == 2);

            NoGradGuard no_grad;
            LMCapture capture;
            const LMOutput out = model.forward(ids, Tensor(), nullptr, &capture);
            const int64_t B = 3, T = 12, H = 2, dk = 8;
            Tensor h = model.tok_emb->forward(ids);  // (B, T, d): RoPE models add no positions here
            double max_hidden = 0;
            for (size_t l = 0; l < model.blocks.size(); ++l) {
                CAPTURE(l);
                GatedAttention& attn = *model.blocks[l]->attn;
                const Tensor x = model.blocks[l]->norm1->forward(h);
                const auto heads = [&](const Tensor& y) { return y.reshape({B, T, H, dk}).transpose(1, 2); };
                Tensor q = heads(attn.w_q->forward(x)), k = heads(attn.w_k->forward(x));  // (B, H, T, dk)
                if (attn.q_norm) q = attn.q_norm->forward(q), k = attn.k_norm->forward(k);
                q = attn.rope()->forward(q, 0), k = attn.rope()->forward(k, 0);
                const Tensor z = matmul(q, k.transpose(2, 3)) * (1 / std::sqrt(double(dk)));  // (B, H, T, T)
                const Expected e = from_logits(z);
                MESSAGE("layer " << l << ": largest logit " << e.max_logit << ", smallest head entropy "
                                 << e.min_head_entropy);
                CHECK(s.max_attn_logit[l] == doctest::Approx(e.max_logit).epsilon(1e-9));
                CHECK(s.mean_attn_logit[l] == doctest::Approx(e.mean_row_max).epsilon(1e-9));
                CHECK(s.min_attn_entropy[l] == doctest::Approx(e.min_head_entropy).epsilon(1e-9));
                if (gate == GatePosition::sdpa_output) {
                    REQUIRE(s.gate_mean.size() == 2);
                    CHECK(s.gate_mean[l] == doctest::Approx(mean(sigmoid(attn.w_g->forward(x))).item()).epsilon(1e-12));
                } else {
                    CHECK(s.gate_mean.empty());
                }
                h = capture.hidden[l];
                max_hidden = std::max(max_hidden, amax(abs(h)).item());
            }
            CHECK(s.max_abs_hidden == max_hidden);
            // log Z of every output row, on the host.
            const int64_t V = out.logits.size(2);
            const std::vector<double> y = out.logits.contiguous().to_vector<double>();
            double log_z = 0, max_y = -INFINITY;
            for (int64_t r = 0; r < B * T; ++r) {
                const double* row = y.data() + r * V;
                const double m = *std::max_element(row, row + V);
                double total = 0;
                for (int64_t v = 0; v < V; ++v) total += std::exp(row[v] - m);
                log_z += (m + std::log(total)) / double(B * T);
                max_y = std::max(max_y, m);
            }
            CHECK(s.mean_log_z == doctest::Approx(log_z).epsilon(1e-12));
            CHECK(s.max_output_logit == max_y);
            CHECK(s.largest_attn_logit() == std::max(s.max_attn_logit[0], s.max_attn_logit[1]));
            CHECK(s.smallest_attn_entropy() == std::min(s.min_attn_entropy[0], s.min_attn_entropy[1]));
        }
}

TEST_CASE("stability: a collapsed head reads entropy 0 and a huge logit; bad ids are refused") {
    LMConfig c;
    c.d_model = 16, c.n_layers = 1, c.attn.n_heads = 2, c.max_len = 8;
    manual_seed(2);
    GatedTransformerLM model(c);
    {
        NoGradGuard no_grad;
        model.blocks[0]->attn->w_q->weight.copy_(model.blocks[0]->attn->w_q->weight * 1e4);
        model.blocks[0]->attn->w_k->weight.copy_(model.blocks[0]->attn->w_k->weight * 1e4);
    }
    Generator gen(1);
    const StabilityStats s = measure_stability(model, randint(0, 256, {2, 8}, gen));
    CHECK(s.max_attn_logit[0] > 1e3);
    CHECK(s.min_attn_entropy[0] < 1e-3);
    CHECK_THROWS_WITH_AS(measure_stability(model, randint(0, 256, {8}, gen)), doctest::Contains("(8)"),
                         std::invalid_argument);
}

TEST_CASE("stability: softmax1 and sink read the largest logit through their lse; sigmoid and softpick are refused") {
    // One block, so that its attention sees the same input whatever the score function: the same
    // seed gives the same weights (sink's logits start at 0), hence the same logits.
    const auto largest_logit = [](ScoreFunction f) {
        LMConfig c;
        c.d_model = 16, c.n_layers = 1, c.attn.n_heads = 2, c.max_len = 8, c.attn.score_fn = f;
        manual_seed(3);
        GatedTransformerLM model(c);
        model.to(DType::f64);
        Generator gen(4);
        return measure_stability(model, randint(0, 256, {2, 8}, gen)).max_attn_logit.at(0);
    };
    const double softmax = largest_logit(ScoreFunction::softmax);
    CHECK(largest_logit(ScoreFunction::softmax1) == doctest::Approx(softmax).epsilon(1e-12));
    CHECK(largest_logit(ScoreFunction::sink) == doctest::Approx(softmax).epsilon(1e-12));
    CHECK_THROWS_WITH_AS(largest_logit(ScoreFunction::sigmoid), doctest::Contains("score function sigmoid"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(largest_logit(ScoreFunction::softpick), doctest::Contains("score function softpick"),
                         std::invalid_argument);
}
