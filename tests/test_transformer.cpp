// test_transformer.cpp — TransformerBlock and GatedTransformerLM against their formulas,
// gradchecks, the config JSON, and KV-cache decoding against the full forward.
#include "tests/nn_check.h"

using namespace gg;
using namespace gg::nn;
using namespace gg::testing;

// ================================================================ blocks and the language model

TEST_CASE("nn: TransformerBlock is x + attn(norm1 x), then h + ffn(norm2 h); G4's gate reads the raw x") {
    Generator gen(18);
    for (int variant = 0; variant < 3; ++variant) {  // SwiGLU, MoE, attention only
        LMConfig c = small_lm();
        c.n_experts = variant == 1 ? 3 : 0;
        c.ffn = variant != 2;
        CAPTURE(variant);
        TransformerBlock block(c);
        CHECK(bool(block.ffn) == (variant == 0));
        CHECK(bool(block.moe) == (variant == 1));
        CHECK(bool(block.norm2) == (variant != 2));
        CHECK(block.attn->rope() != nullptr);  // LMConfig's default positions: RoPE in attention
        block.to(DType::f64);
        randomize(block, gen);
        const Tensor x = randn({2, 5, 16}, gen, DType::f64) * 3.0;
        const Tensor h = x + block.attn->forward(block.norm1->forward(x));
        Tensor expected = h;
        if (block.ffn) expected = h + block.ffn->forward(block.norm2->forward(h));
        if (block.moe) expected = h + dense_moe(*block.moe, block.norm2->forward(h));
        CHECK(max_abs_diff(block.forward(x), expected) < 1e-12);
    }

    LMConfig c = small_lm(GatePosition::residual);
    TransformerBlock block(c);
    block.to(DType::f64);
    randomize(block, gen);
    const Tensor x = randn({2, 5, 16}, gen, DType::f64) * 3.0;
    const Tensor normed = block.norm1->forward(x);
    const Tensor attn = reference_attention(*block.attn, normed, x).y;  // x + σ(x W_g) ⊙ Attn(norm(x))
    const Tensor h = x + attn;
    AttentionCapture seen;
    CHECK(max_abs_diff(block.forward(x, nullptr, {&seen}), h + block.ffn->forward(block.norm2->forward(h))) < 1e-10);
    CHECK(max_abs_diff(merge_heads(seen.gate), sigmoid(matmul(x, block.attn->w_g->weight.t()))) < 1e-12);
    // A gate reading norm(x) instead would give other numbers.
    CHECK(max_abs_diff(attn, reference_attention(*block.attn, normed).y) > 1e-3);
}

TEST_CASE("nn: TransformerBlock gradcheck: SwiGLU, MoE and attention-only blocks") {
    Generator gen(19);
    for (int variant = 0; variant < 3; ++variant) {
        LMConfig c = small_lm(variant == 2 ? GatePosition::residual : GatePosition::sdpa_output);
        c.d_model = 8;
        c.attn.n_heads = 2;
        c.attn.n_kv_heads = 1;
        c.attn.qk_norm = variant == 0;
        c.d_ff = 8;
        c.n_experts = variant == 1 ? 3 : 0;
        c.ffn = variant != 2;
        CAPTURE(variant);
        TransformerBlock block(c);
        block.to(DType::f64);
        randomize(block, gen);
        Tensor x = randn({1, 4, 8}, gen, DType::f64);
        if (block.moe) {  // keep the routing away from ties
            for (int tries = 0; tries < 100; ++tries) {
                const Tensor h = x + block.attn->forward(block.norm1->forward(x), nullptr, x);
                if (route(*block.moe, block.norm2->forward(h).reshape({4, 8})).min_gap > 0.02) break;
                x = randn({1, 4, 8}, gen, DType::f64);
            }
        }
        const int n = check_gradients(block, {x.clone().requires_grad_()},
                                      [&](const std::vector<Tensor>& in) { return block.forward(in[0]); });
        CHECK(n == int(block.named_parameters().size()));
    }
}

TEST_CASE("nn: GatedTransformerLM parameter names and counts") {
    const int64_t V = 23, L = 12, d = 16, H = 4, dk = 4, ff = 24, layers = 2;
    {
        LMConfig c = small_lm();
        c.positions = PositionEncoding::learned;
        c.attn.n_kv_heads = 2;
        c.attn.qk_norm = true;
        GatedTransformerLM model(c);
        const auto names = names_of(model);
        for (const char* name : {"tok_emb.weight", "pos_emb.weight", "layers.0.norm1.weight", "layers.0.attn.w_q.weight",
                                 "layers.0.attn.w_k.weight", "layers.0.attn.w_v.weight", "layers.0.attn.w_o.weight",
                                 "layers.0.attn.w_g.weight", "layers.0.attn.q_norm.weight", "layers.0.attn.k_norm.weight",
                                 "layers.0.norm2.weight", "layers.0.ffn.w1.weight", "layers.0.ffn.w2.weight",
                                 "layers.0.ffn.w3.weight", "layers.1.attn.w_g.weight", "norm_f.weight", "lm_head.weight"})
            CHECK_MESSAGE(contains(names, name), name);
        CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
        const int64_t block = d + d * H * dk + 2 * d * 2 * dk + H * dk * d + d * H * dk + 2 * dk + d + 3 * d * ff;
        CHECK(names.size() == 2 + layers * 12 + 2);
        CHECK(model.num_parameters() == V * d + L * d + layers * block + d + V * d);
        CHECK(model.blocks[0]->attn->w_k->weight.shape() == Shape{2 * dk, d});
        CHECK(model.pos_emb->weight.shape() == Shape{L, d});
        CHECK(!model.blocks[0]->attn->rope());  // learned positions: no RoPE
    }
    {
        LMConfig c = small_lm(GatePosition::scores_from_query);
        c.tie_embeddings = true;
        c.ffn = false;
        GatedTransformerLM model(c);
        const auto names = names_of(model);
        CHECK(!contains(names, "lm_head.weight"));
        CHECK(!contains(names, "pos_emb.weight"));
        CHECK(contains(names, "layers.1.attn.w_g_query"));
        CHECK(!contains(names, "layers.0.norm2.weight"));
        const int64_t block = d + 4 * d * d + H * dk;
        CHECK(model.num_parameters() == V * d + layers * block + d);
    }
    {
        LMConfig c = small_lm(GatePosition::after_merge);
        c.attn.sharing = GateSharing::headwise;
        c.n_experts = 3;
        GatedTransformerLM model(c);
        const auto names = names_of(model);
        CHECK(contains(names, "layers.1.moe.router.weight"));
        CHECK(contains(names, "layers.1.moe.experts.2.w3.weight"));
        const int64_t block = d + 4 * d * d + d * H + d + d * 3 + 3 * 3 * d * ff;
        CHECK(model.num_parameters() == V * d + layers * block + d + V * d);
    }
    LMConfig c;
    c.d_model = 64;
    CHECK(c.ffn_hidden() == 176);  // 8/3 · 64 = 170.7, up to a multiple of 8
    c.d_model = 48;
    CHECK(c.ffn_hidden() == 128);
    c.d_ff = 100;
    CHECK(c.ffn_hidden() == 100);
}

TEST_CASE("nn: GatedTransformerLM forward is embed (+ positions), blocks, RMSNorm, lm_head; loss is CE + aux") {
    Generator gen(20);
    for (bool learned : {false, true})
        for (bool tied : {false, true}) {
            CAPTURE(learned);
            CAPTURE(tied);
            LMConfig c = small_lm();
            c.positions = learned ? PositionEncoding::learned : PositionEncoding::rope;
            c.tie_embeddings = tied;
            c.n_experts = 2;
            c.aux_loss_weight = 0.3;
            GatedTransformerLM model(c);
            model.to(DType::f64);
            randomize(model, gen, 0.3);
            const Tensor ids = randint(0, c.vocab_size, {2, 6}, gen), targets = randint(0, c.vocab_size, {2, 6}, gen);
            const LMOutput out = model.forward(ids, targets);
            REQUIRE(out.logits.shape() == Shape{2, 6, c.vocab_size});

            Tensor x = model.tok_emb->forward(ids);
            if (learned) x = x + model.pos_emb->weight.narrow(0, 0, 6);
            double aux = 0;
            for (const auto& block : model.blocks) {
                Tensor block_aux;
                x = block->forward(x, nullptr, {}, &block_aux);
                aux += block_aux.item();
            }
            x = model.norm_f->forward(x);
            const Tensor W = tied ? model.tok_emb->weight : model.lm_head->weight;
            const Tensor logits = matmul(x, W.t());
            CHECK(max_abs_diff(out.logits, logits) < 1e-12);

            const auto Lg = logits.to_vector<double>();
            const auto tg = targets.to_vector<int64_t>();
            double ce = 0;
            for (int64_t r = 0; r < 12; ++r) {
                double top = -INFINITY, total = 0;
                for (int64_t v = 0; v < c.vocab_size; ++v) top = std::max(top, Lg[r * c.vocab_size + v]);
                for (int64_t v = 0; v < c.vocab_size; ++v) total += std::exp(Lg[r * c.vocab_size + v] - top);
                ce += (top + std::log(total) - Lg[r * c.vocab_size + tg[r]]) / 12;
            }
            CHECK(out.loss.item() == relative(ce + 0.3 * aux, 1e-12));
            CHECK(!model.forward(ids).loss.defined());
        }
}

TEST_CASE("nn: GatedTransformerLM gradcheck of the loss w.r.t. a few parameters") {
    Generator gen(21);
    struct Variant {
        PositionEncoding positions;
        bool tied;
        int64_t experts;
        GatePosition gate;
        std::set<std::string> params;
    };
    const Variant variants[] = {
        {PositionEncoding::learned, false, 0, GatePosition::sdpa_output,
         {"tok_emb.weight", "pos_emb.weight", "layers.0.attn.w_g.weight", "layers.1.attn.w_q.weight",
          "layers.0.ffn.w1.weight", "layers.1.norm2.weight", "norm_f.weight", "lm_head.weight"}},
        {PositionEncoding::rope, true, 0, GatePosition::residual,
         {"tok_emb.weight", "layers.0.attn.w_g.weight", "layers.1.attn.w_k.weight", "layers.1.norm1.weight"}},
        {PositionEncoding::rope, false, 3, GatePosition::scores_from_x,
         {"layers.0.moe.router.weight", "layers.1.moe.experts.1.w3.weight", "layers.1.attn.w_g.weight",
          "lm_head.weight"}},
    };
    for (const Variant& v : variants) {
        LMConfig c = small_lm(v.gate);
        c.d_model = 8;
        c.attn.n_heads = 2;
        c.d_ff = 8;
        c.positions = v.positions;
        c.tie_embeddings = v.tied;
        c.n_experts = v.experts;
        c.aux_loss_weight = 0.5;
        CAPTURE(c.to_json());
        GatedTransformerLM model(c);
        model.to(DType::f64);
        randomize(model, gen, 0.5);
        const Tensor ids = randint(0, c.vocab_size, {2, 5}, gen), targets = randint(0, c.vocab_size, {2, 5}, gen);
        GradcheckOptions options;
        options.full_jacobian_limit = 64;  // small tensors element by element, the rest by projections
        const int n = check_gradients(
            model, {}, [&](const std::vector<Tensor>&) { return model.forward(ids, targets).loss; }, only(v.params),
            options);
        CHECK(n == int(v.params.size()));
    }
}

TEST_CASE("nn: LMConfig JSON round trip and field errors") {
    LMConfig c;
    c.vocab_size = 99;
    c.max_len = 77;
    c.d_model = 24;
    c.n_layers = 3;
    c.attn.n_heads = 6;
    c.attn.n_kv_heads = 3;
    c.attn.gate = GatePosition::scores_from_query;
    c.attn.gate_fn = GateFunction::silu;
    c.attn.sharing = GateSharing::headwise;
    c.attn.gate_init = GateInit::xavier;
    c.attn.gate_init_std = 0.125;
    c.attn.qk_norm = true;
    c.attn.window = 5;
    c.attn.exclude_self = true;
    c.attn.rope_options.base = 50000;
    c.positions = PositionEncoding::learned;
    c.ffn = false;
    c.d_ff = 40;
    c.n_experts = 4;
    c.top_k = 1;
    c.aux_loss_weight = 0.25;
    c.tie_embeddings = true;
    c.norm_eps = 1e-5;
    const LMConfig r = LMConfig::from_json(c.to_json());
    CHECK(r.vocab_size == 99);
    CHECK(r.max_len == 77);
    CHECK(r.d_model == 24);
    CHECK(r.n_layers == 3);
    CHECK(r.attn.n_heads == 6);
    CHECK(r.attn.kv_heads() == 3);
    CHECK(r.attn.gate == GatePosition::scores_from_query);
    CHECK(r.attn.gate_fn == GateFunction::silu);
    CHECK(r.attn.sharing == GateSharing::headwise);
    CHECK(r.attn.gate_init == GateInit::xavier);
    CHECK(r.attn.gate_init_std == 0.125);
    CHECK(r.attn.qk_norm);
    CHECK(r.attn.window == 5);
    CHECK(r.attn.exclude_self);
    CHECK(r.attn.rope_options.base == 50000);
    CHECK(r.positions == PositionEncoding::learned);
    CHECK(!r.ffn);
    CHECK(r.ffn_hidden() == 40);
    CHECK(r.n_experts == 4);
    CHECK(r.top_k == 1);
    CHECK(r.aux_loss_weight == 0.25);
    CHECK(r.tie_embeddings);
    CHECK(r.norm_eps == 1e-5);
    CHECK(r.to_json() == c.to_json());
    // Defaults survive too (every field is written).
    CHECK(LMConfig::from_json(LMConfig().to_json()).to_json() == LMConfig().to_json());
    CHECK(LMConfig::from_json("{}").to_json() == LMConfig().to_json());

    CHECK_THROWS_WITH_AS(LMConfig::from_json(R"({"d_model": "wide"})"), doctest::Contains("d_model"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(LMConfig::from_json(R"({"qk_norm": 3.5})"), doctest::Contains("qk_norm"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(LMConfig::from_json(R"({"gate": "g9"})"), doctest::Contains("g9"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(LMConfig::from_json(R"({"positions": "sinusoidal"})"), doctest::Contains("sinusoidal"),
                         std::invalid_argument);
    CHECK_THROWS_AS(LMConfig::from_json("not json"), std::invalid_argument);
    CHECK_THROWS_AS(LMConfig::from_json("[1, 2]"), std::invalid_argument);
}

// ================================================================ decoding

namespace {
// Logits of the whole sequence against feeding it in chunks through per-layer KV caches.
void check_incremental_decoding(const LMConfig& c, uint64_t seed) {
    CAPTURE(c.to_json());
    manual_seed(seed);
    Generator gen(seed);
    GatedTransformerLM model(c);
    randomize(model, gen, 0.3);
    model.eval();
    const Tensor ids = randint(0, c.vocab_size, {2, 9}, gen);
    const Tensor full = model.forward(ids).logits;
    std::vector<LayerCache> caches;
    std::vector<Tensor> parts;
    int64_t at = 0;
    for (int64_t len : {4, 2, 1, 1, 1}) {
        parts.push_back(model.forward(ids.narrow(1, at, len), Tensor(), &caches).logits);
        at += len;
    }
    REQUIRE(caches.size() == size_t(c.n_layers));
    CHECK(caches[1].kv.length() == 9);
    const double diff = max_abs_diff(cat(parts, 1), full);
    CHECK(diff < 1e-5);
    CHECK(amax(abs(full)).item() > 0.1);  // the logits are not trivially small
}
}  // namespace

TEST_CASE("nn: KV-cache decoding equals the full forward (float32, 1e-5)") {
    LMConfig c = small_lm(GatePosition::none);
    SUBCASE("baseline") { check_incremental_decoding(c, 31); }
    SUBCASE("G1") {
        c.attn.gate = GatePosition::sdpa_output;
        check_incremental_decoding(c, 32);
    }
    SUBCASE("G1 + GQA + RoPE + window + QK-norm") {
        c.attn.gate = GatePosition::sdpa_output;
        c.attn.n_kv_heads = 2;
        c.attn.window = 3;
        c.attn.qk_norm = true;
        check_incremental_decoding(c, 33);
    }
    SUBCASE("learned positions") {
        c.attn.gate = GatePosition::sdpa_output;
        c.positions = PositionEncoding::learned;
        check_incremental_decoding(c, 34);
    }
    SUBCASE("G4 with MoE blocks and tied embeddings") {
        c.attn.gate = GatePosition::residual;
        c.n_experts = 3;
        c.tie_embeddings = true;
        check_incremental_decoding(c, 35);
    }
}

namespace {

// A model of `c` with random weights (randomize, scale 0.3) in eval mode, for sampling from.
std::shared_ptr<GatedTransformerLM> random_model(const LMConfig& c, uint64_t seed) {
    manual_seed(seed);
    Generator gen(seed);
    auto model = std::make_shared<GatedTransformerLM>(c);
    randomize(*model, gen, 0.3);
    model->eval();
    return model;
}

}  // namespace

TEST_CASE("nn: generate with temperature 0 is greedy decoding of the full forward") {
    for (PositionEncoding positions : {PositionEncoding::rope, PositionEncoding::learned}) {
        LMConfig c = small_lm();
        c.positions = positions;
        c.max_len = 16;
        c.attn.n_kv_heads = 2;
        const std::shared_ptr<GatedTransformerLM> owner = random_model(c, 41);
        const GatedTransformerLM& model = *owner;
        const std::vector<int64_t> prompt{1, 7, 3};
        SampleOptions greedy;
        greedy.max_new_tokens = 6;
        greedy.temperature = 0;
        const std::vector<int64_t> out = generate(model, prompt, greedy);
        REQUIRE(out.size() == 6);
        std::vector<int64_t> streamed;  // on_token sees each id as it is drawn, in order
        greedy.on_token = [&](int64_t id) { streamed.push_back(id); };
        CHECK(generate(model, prompt, greedy) == out);
        CHECK(streamed == out);
        std::vector<int64_t> seq = prompt;
        for (int64_t next : out) {
            const Tensor logits = model.forward(from_vector(seq, {1, int64_t(seq.size())})).logits;  // (1, T, V)
            const auto row = logits.select(1, int64_t(seq.size()) - 1).reshape({-1}).to_vector<double>();
            CHECK(next == std::max_element(row.begin(), row.end()) - row.begin());
            seq.push_back(next);
        }
        // Sampling: the same generator state gives the same tokens; top_k = 1 is greedy.
        SampleOptions sample;
        sample.max_new_tokens = 6;
        sample.temperature = 1.5;
        Generator g1(5), g2(5);
        const auto s1 = generate(model, prompt, sample, g1), s2 = generate(model, prompt, sample, g2);
        CHECK(s1 == s2);
        for (int64_t t : s1) CHECK((t >= 0 && t < c.vocab_size));
        sample.top_k = 1;
        CHECK(generate(model, prompt, sample, g1) == out);
        if (positions == PositionEncoding::learned) {
            // Learned positions end at max_len: the 16 positions hold the prompt and all
            // but the last new token. Asking for more is an error, not a shorter answer.
            const std::vector<int64_t> long_prompt(13, 2);
            greedy.max_new_tokens = 50;
            CHECK_THROWS_WITH_AS(generate(model, long_prompt, greedy), doctest::Contains("ask for at most 4 tokens"),
                                 std::invalid_argument);
            greedy.max_new_tokens = 4;
            CHECK(generate(model, long_prompt, greedy).size() == 4);
        } else {
            greedy.max_new_tokens = 50;  // RoPE has no last position
            CHECK(generate(model, prompt, greedy).size() == 50);
        }
        SampleOptions hot;
        hot.temperature = INFINITY;
        CHECK_THROWS_WITH_AS(generate(model, prompt, hot), doctest::Contains("finite temperature"), std::invalid_argument);
    }
    LMConfig c = small_lm();
    GatedTransformerLM model(c);
    CHECK_THROWS_AS(generate(model, {}, SampleOptions{}), std::invalid_argument);
}

TEST_CASE("nn: generate never draws an id that can_draw rules out: greedy, top-k or from the whole softmax") {
    const LMConfig c = small_lm();
    const std::shared_ptr<GatedTransformerLM> owner = random_model(c, 43);
    const GatedTransformerLM& model = *owner;
    const std::vector<int64_t> prompt{1, 7, 3};
    SampleOptions greedy, top_k, full;
    greedy.temperature = 0, top_k.top_k = 3, full.temperature = 0.7;
    // Rule out every id each way draws without a rule (a checkpoint's padding rows, say).
    SampleOptions* ways[] = {&greedy, &top_k, &full};
    std::vector<bool> can_draw(size_t(c.vocab_size), true);
    for (SampleOptions* o : ways) {
        o->max_new_tokens = 8;
        Generator g(9);
        for (int64_t id : generate(model, prompt, *o, g)) can_draw[size_t(id)] = false;
    }
    REQUIRE(std::count(can_draw.begin(), can_draw.end(), true) > 5);
    for (SampleOptions* o : ways) {
        o->can_draw = can_draw;
        Generator g(9);
        for (int64_t id : generate(model, prompt, *o, g)) CHECK(can_draw[size_t(id)]);
    }
    // Greedy takes the likeliest of the ids it may draw.
    const auto row = model.forward(from_vector(prompt, {1, 3})).logits.select(1, 2).reshape({-1}).to_vector<double>();
    int64_t best = -1;
    for (int64_t id = 0; id < c.vocab_size; ++id)
        if (can_draw[size_t(id)] && (best < 0 || row[size_t(id)] > row[size_t(best)])) best = id;
    greedy.max_new_tokens = 1;
    CHECK(generate(model, prompt, greedy) == std::vector<int64_t>{best});
    greedy.can_draw.assign(size_t(c.vocab_size), false);
    CHECK_THROWS_WITH_AS(generate(model, prompt, greedy), doctest::Contains("must allow at least one id"),
                         std::invalid_argument);
    greedy.can_draw.resize(3, true);
    CHECK_THROWS_WITH_AS(generate(model, prompt, greedy), doctest::Contains("can_draw has 3 entries"),
                         std::invalid_argument);
}

TEST_CASE("nn: the gpt2 init draws N(0, σ²), σ/√(2L) for the residual projections; torch init is nn.Linear's") {
    LMConfig c;
    c.vocab_size = 300, c.d_model = 128, c.n_layers = 4, c.attn.n_heads = 4, c.attn.gate = GatePosition::sdpa_output;
    const auto std_of = [](const Tensor& w) {
        const auto v = w.to_vector<double>();
        double s = 0;
        for (double x : v) s += x * x;
        return std::sqrt(s / double(v.size()));
    };
    manual_seed(4);
    const GatedTransformerLM gpt2(c);
    CHECK(std_of(gpt2.tok_emb->weight) == doctest::Approx(0.02).epsilon(0.03));
    CHECK(std_of(gpt2.blocks[1]->attn->w_q->weight) == doctest::Approx(0.02).epsilon(0.03));
    CHECK(std_of(gpt2.blocks[1]->ffn->w1->weight) == doctest::Approx(0.02).epsilon(0.03));
    CHECK(std_of(gpt2.lm_head->weight) == doctest::Approx(0.02).epsilon(0.03));
    const double residual = 0.02 / std::sqrt(8.0);
    CHECK(std_of(gpt2.blocks[2]->attn->w_o->weight) == doctest::Approx(residual).epsilon(0.03));
    CHECK(std_of(gpt2.blocks[3]->ffn->w3->weight) == doctest::Approx(residual).epsilon(0.03));
    CHECK(amax(abs(gpt2.blocks[0]->attn->w_g->weight)).item() == 0);   // the gate keeps its zero init
    CHECK(amax(abs(gpt2.blocks[0]->norm1->weight - 1.0)).item() == 0);  // norms start at 1

    c.init = LMInit::torch;
    manual_seed(4);
    const GatedTransformerLM torch_init(c);
    // U(±1/√fan_in) has std 1/√(3 fan_in).
    CHECK(std_of(torch_init.blocks[1]->attn->w_q->weight) == doctest::Approx(1 / std::sqrt(3.0 * 128)).epsilon(0.03));
    CHECK(std_of(torch_init.tok_emb->weight) == doctest::Approx(0.02).epsilon(0.03));
    CHECK(LMConfig::from_json(c.to_json()).init == LMInit::torch);
    CHECK_THROWS_WITH_AS(LMConfig::from_json(R"({"init": "xavier"})"), "LMConfig: init 'xavier' is not gpt2 or torch",
                         std::invalid_argument);
}
