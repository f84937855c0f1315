// test_mla.cpp — multi-head latent attention (nn/mla.h): its formulas by hand, float64
// gradchecks of every parameter, the absorbed form against the explicit one, and cached
// decoding against the full pass.
#include "nn/analysis/analysis.h"
#include "tests/nn_check.h"

using namespace gg;
using namespace gg::nn;
using namespace gg::testing;

namespace {

// d 8, 2 heads of 4, a latent of 3 and a RoPE part of 2: every size different, so a
// transposed or swapped weight cannot pass.
AttentionOptions mla_options(GatePosition gate, ScoreFunction f = ScoreFunction::softmax, bool rope = true) {
    AttentionOptions o;
    o.d_model = 8;
    o.n_heads = 2;
    o.kv_rank = 3;
    o.rope_dim = 2;
    o.rope = rope;
    o.gate = gate;
    o.score_fn = f;
    return o;
}

std::shared_ptr<MultiHeadLatentAttention> random_mla(const AttentionOptions& o, Generator& gen) {
    auto m = std::make_shared<MultiHeadLatentAttention>(o);
    m->to(DType::f64);
    randomize(*m, gen);
    return m;
}

// Decodes x (B, T, d) in blocks of the given lengths through one cache.
Tensor decode(const MultiHeadLatentAttention& m, const Tensor& x, const std::vector<int64_t>& lengths, KVCache& cache) {
    std::vector<Tensor> parts;
    int64_t at = 0;
    for (int64_t len : lengths) {
        parts.push_back(m.forward(x.narrow(1, at, len), &cache));
        at += len;
    }
    return cat(parts, 1);
}

}  // namespace

TEST_CASE("nn: MultiHeadLatentAttention has DeepSeek-V2's weights and computes nn/mla.h's formulas") {
    Generator gen(41);
    const int64_t B = 2, T = 5, d = 8, H = 2, dk = 4, dc = 3, dr = 2;
    const auto m = random_mla(mla_options(GatePosition::none), gen);
    CHECK(names_of(*m) == std::vector<std::string>{"w_q.weight", "w_dkv.weight", "kv_norm.weight", "w_uk.weight",
                                                   "w_uv.weight", "w_o.weight", "w_qr.weight", "w_kr.weight"});
    CHECK(m->w_dkv->weight.shape() == Shape{dc, d});
    CHECK(m->w_uk->weight.shape() == Shape{H * dk, dc});
    CHECK(m->w_kr->weight.shape() == Shape{dr, d});  // one rotary key for all heads
    CHECK(m->w_qr->weight.shape() == Shape{H * dr, d});
    const Tensor x = randn({B, T, d}, gen, DType::f64);
    // By hand: the latent, each head's key and value, the rotary parts, softmax over the causal scores.
    const Tensor c = m->kv_norm->forward(matmul(x, m->w_dkv->weight.t()));                       // (B, T, d_c)
    const Tensor k_c = split_heads(matmul(c, m->w_uk->weight.t()), H);                            // (B, H, T, dk)
    const Tensor v = split_heads(matmul(c, m->w_uv->weight.t()), H);                              // (B, H, T, dk)
    const Tensor k_r = m->rope()->forward(split_heads(matmul(x, m->w_kr->weight.t()), 1));        // (B, 1, T, d_r)
    const Tensor q_c = split_heads(matmul(x, m->w_q->weight.t()), H);                             // (B, H, T, dk)
    const Tensor q_r = m->rope()->forward(split_heads(matmul(x, m->w_qr->weight.t()), H));        // (B, H, T, d_r)
    const Tensor scores = (matmul(q_c, k_c.transpose(-1, -2)) + matmul(q_r, k_r.transpose(-1, -2))) /
                          std::sqrt(double(dk + dr));                                              // (B, H, T, T)
    const Tensor p = softmax(masked_fill(scores, triu(ones({T, T}), 1), -INFINITY), -1);
    const Tensor expected = matmul(merge_heads(matmul(p, v)), m->w_o->weight.t());
    CHECK(max_abs_diff(m->forward(x), expected) < 1e-12);
}

TEST_CASE("nn: MultiHeadLatentAttention gradchecks every parameter, with and without G1, over score functions") {
    Generator gen(42);
    for (GatePosition gate : {GatePosition::none, GatePosition::sdpa_output})
        for (ScoreFunction f : {ScoreFunction::softmax, ScoreFunction::sink, ScoreFunction::sigmoid})
            for (bool absorbed : {false, true}) {
                AttentionOptions o = mla_options(gate, f);
                if (gate == GatePosition::sdpa_output && f == ScoreFunction::sigmoid) o.sharing = GateSharing::headwise;
                CAPTURE(describe(o));
                CAPTURE(absorbed);
                const auto m = random_mla(o, gen);
                const Tensor x = randn({2, 4, 8}, gen, DType::f64).requires_grad_();
                const int n = check_gradients(*m, {x}, [&](const std::vector<Tensor>& in) {
                    return m->forward(in[0], nullptr, nullptr, Tensor(), absorbed);
                });
                CHECK(n == int(m->named_parameters().size()));
                CHECK(n == 8 + int(gate != GatePosition::none) + int(f == ScoreFunction::sink));
            }
}

TEST_CASE("nn: MultiHeadLatentAttention's absorbed form equals its explicit form") {
    Generator gen(43);
    for (ScoreFunction f : kAllScoreFunctions)
        for (GatePosition gate : {GatePosition::none, GatePosition::sdpa_output})
            for (bool rope : {false, true}) {
                const AttentionOptions o = mla_options(gate, f, rope);
                CAPTURE(describe(o));
                const auto m = random_mla(o, gen);
                const Tensor x = randn({2, 6, 8}, gen, DType::f64);
                AttentionCapture full_seen, absorbed_seen, cached_seen;
                const Tensor full = m->forward(x, nullptr, &full_seen);
                const Tensor absorbed = m->forward(x, nullptr, &absorbed_seen, Tensor(), true);
                CHECK(max_abs_diff(absorbed, full) < 1e-12);
                CHECK(max_abs_diff(absorbed_seen.probs, full_seen.probs) < 1e-12);
                if (f == ScoreFunction::sink) CHECK(max_abs_diff(absorbed_seen.slot, full_seen.slot) < 1e-12);
                KVCache cache;
                CHECK(max_abs_diff(m->forward(x, &cache, &cached_seen), full) < 1e-12);  // one block: a whole prompt
                // The cache holds the latent and the rotary key alone: d_c + d_r numbers per token.
                CHECK(cache.k.shape() == Shape{2, 1, 6, 3 + (rope ? 2 : 0)});
                CHECK(!cache.v.defined());
            }
}

TEST_CASE("nn: MultiHeadLatentAttention decoding with a cache equals the full pass") {
    Generator gen(44);
    for (ScoreFunction f : kAllScoreFunctions)
        for (GatePosition gate : {GatePosition::none, GatePosition::sdpa_output})
            for (bool window : {false, true}) {
                AttentionOptions o = mla_options(gate, f);
                if (window) o.window = 3;
                CAPTURE(describe(o));
                const auto m = random_mla(o, gen);
                const Tensor x = randn({2, 7, 8}, gen, DType::f64);
                const Tensor full = m->forward(x);
                KVCache by_token, by_block;
                CHECK(max_abs_diff(decode(*m, x, {1, 1, 1, 1, 1, 1, 1}, by_token), full) < 1e-12);
                CHECK(max_abs_diff(decode(*m, x, {4, 2, 1}, by_block), full) < 1e-12);  // a prompt, then tokens
                CHECK(by_block.seen() == 7);
                if (!window) continue;
                // A cache keeping the window's last 3 latents decodes the same.
                KVCache kept;
                kept.keep = 3;
                CHECK(max_abs_diff(decode(*m, x, {2, 1, 1, 1, 1, 1}, kept), full) < 1e-12);
                CHECK(kept.length() == 3);
            }
}

TEST_CASE("nn: MultiHeadLatentAttention refuses what would stop the absorption, naming the settings") {
    const auto refused = [](AttentionOptions o, const std::string& why) {
        CAPTURE(why);
        CHECK_THROWS_WITH_AS(MultiHeadLatentAttention{o}, doctest::Contains("MultiHeadLatentAttention: kv_rank"),
                             std::invalid_argument);
    };
    AttentionOptions o = mla_options(GatePosition::none);
    o.qk_norm = true;
    refused(o, "QK-norm");
    refused(mla_options(GatePosition::scores_from_x), "a gate on the logits");
    o = mla_options(GatePosition::none);
    o.n_kv_heads = 1;
    refused(o, "kv heads of its own");
    o = mla_options(GatePosition::none);
    o.rope_dim = 3;
    refused(o, "an odd RoPE part");
    o = mla_options(GatePosition::none);
    o.kv_rank = 0;
    refused(o, "no latent");
}

TEST_CASE("nn: a GatedTransformerLM with kv_rank decodes with its cache as its full pass does") {
    LMConfig c;
    c.vocab_size = 11;
    c.d_model = 8;
    c.n_layers = 2;
    c.attn.n_heads = 2;
    c.attn.kv_rank = 4;
    GatedTransformerLM model(c, DType::f64);
    CHECK(model.blocks[0]->mla);
    CHECK(!model.blocks[0]->attn);
    CHECK(model.blocks[0]->mla->rope_dim() == 2);  // head size 4, halved
    const Tensor ids = from_vector(std::vector<int64_t>{1, 5, 2, 7, 3, 9}, {1, 6});
    const Tensor full = model.forward(ids).logits;
    std::vector<LayerCache> caches(2);
    std::vector<Tensor> parts{model.forward(ids.narrow(1, 0, 3), Tensor(), &caches).logits};
    for (int64_t t = 3; t < 6; ++t) parts.push_back(model.forward(ids.narrow(1, t, 1), Tensor(), &caches).logits);
    CHECK(max_abs_diff(cat(parts, 1), full) < 1e-12);
    // Per token: the latent and the rotary key, (4 + 2) numbers × 2 layers × 4 bytes; GQA's
    // 2 × 2 heads × 4 × 2 layers × 4 bytes.
    CHECK(kv_cache_bytes_per_token(c, DType::f32) == (4 + 2) * 2 * 4);
    c.attn.kv_rank = 0;
    CHECK(kv_cache_bytes_per_token(c, DType::f32) == 2 * 2 * 4 * 2 * 4);
    c.layer_types = {LayerType::linear_attention, LayerType::full_attention};  // a linear layer's state does not grow
    CHECK(kv_cache_bytes_per_token(c, DType::f32) == 2 * 2 * 4 * 1 * 4);
    // In a hybrid, the full layers are latent ones: decoding still equals the full pass.
    c.attn.kv_rank = 4;
    GatedTransformerLM hybrid(c, DType::f64);
    CHECK((hybrid.blocks[0]->linear_attn && hybrid.blocks[1]->mla));
    std::vector<LayerCache> layer_caches(2);
    std::vector<Tensor> steps{hybrid.forward(ids.narrow(1, 0, 3), Tensor(), &layer_caches).logits};
    for (int64_t t = 3; t < 6; ++t) steps.push_back(hybrid.forward(ids.narrow(1, t, 1), Tensor(), &layer_caches).logits);
    CHECK(max_abs_diff(cat(steps, 1), hybrid.forward(ids).logits) < 1e-12);
}

TEST_CASE("nn: the sink report reads a latent-attention model through its hooks; points it has not are refused") {
    LMConfig c;
    c.vocab_size = 11;
    c.d_model = 8;
    c.attn.n_heads = 2;
    c.attn.kv_rank = 4;
    c.attn.score_fn = ScoreFunction::sink;  // with the default G1 gate
    GatedTransformerLM model(c, DType::f64);
    const Tensor ids = from_vector(std::vector<int64_t>{1, 5, 2, 7, 3, 9}, {1, 6});
    const ModelAnalysis report = analyze(model, ids);
    REQUIRE(report.layers.size() == 2);
    CHECK(report.mean_slot_share > 0);  // the sink logit's slot, read from the fused pass
    CHECK(report.layers[0].gate_mean == doctest::Approx(0.5));  // G1's zero init: σ(0)
    Hooks q_hook;
    q_hook.read(HookPoint::q, [](const Tensor&, int64_t) {});
    CHECK_THROWS_WITH_AS(model.forward(ids, Tensor(), nullptr, nullptr, &q_hook),
                         doctest::Contains("MultiHeadLatentAttention: no hook point q"), std::invalid_argument);
}
