// nn/hooks.h and nn/analysis/activation_cache.h: hooks that only look, and edits that return
// what they were given, leave the logits as they were (the edits move attention onto plain ops,
// which must equal the fused kernel for every score function); the cache keeps what was asked
// in the shapes hooks.h gives; edits replace activations; gradients flow through an edit:
// float64 gradchecks through a replacing hook and through an activation patched in from
// another run.
// Then the interventions of nn/analysis/interventions.h, and the logit lens, whose last layer
// must give the model's own logits.
#include <cmath>

#include "tests/nn_check.h"

using namespace gg;
using gg::testing::kAllScoreFunctions;
using gg::testing::max_abs_diff;
using namespace gg::nn;

namespace {

// Two layers of 4 query heads over 2 kv heads (GQA), QK-norm, RoPE, in float64.
std::unique_ptr<GatedTransformerLM> tiny_lm(GatePosition gate, ScoreFunction f = ScoreFunction::softmax,
                                            GateSharing sharing = GateSharing::elementwise, int64_t experts = 0) {
    LMConfig c;
    c.vocab_size = 20, c.max_len = 16, c.d_model = 16, c.n_layers = 2, c.d_ff = 24, c.n_experts = experts;
    c.attn.n_heads = 4, c.attn.n_kv_heads = 2, c.attn.qk_norm = true, c.attn.rope = true;
    c.attn.gate = gate, c.attn.sharing = sharing, c.attn.score_fn = f;
    auto model = std::make_unique<GatedTransformerLM>(c);
    model->to(DType::f64);
    Generator gen(3);
    gg::testing::randomize(*model, gen, 0.4);
    return model;
}

Tensor some_ids(int64_t B = 2, int64_t T = 6) {
    Generator gen(4);
    return randint(0, 20, {B, T}, gen);
}

Tensor logits_of(const GatedTransformerLM& m, const Tensor& ids, const Hooks* hooks = nullptr) {
    return m.forward(ids, Tensor(), nullptr, nullptr, hooks).logits;
}

// A hook at every point of every layer that returns the activation unchanged: an edit (which
// takes the plain-ops attention and the unfused G1 gate) or a reader.
Hooks identity_hooks(bool edit) {
    Hooks hooks;
    for (const HookPoint p : all_hook_points()) {
        if (p == HookPoint::slot || !edit) hooks.read(p, [](const Tensor&, int64_t) {});
        else hooks.edit(p, [](const Tensor& x, int64_t) { return x; });
    }
    return hooks;
}

}  // namespace

TEST_CASE("hooks: hooks that return what they see leave the logits as they were, for every gate and score function") {
    const GatePosition gates[] = {GatePosition::none,           GatePosition::sdpa_output, GatePosition::scores_from_x,
                                  GatePosition::scores_from_query, GatePosition::residual, GatePosition::after_merge,
                                  GatePosition::value};
    const Tensor ids = some_ids();
    for (const GatePosition g : gates)
        for (const ScoreFunction f : kAllScoreFunctions) {
            CAPTURE(gate_position_name(g));
            CAPTURE(score_function_name(f));
            const auto model = tiny_lm(g, f);
            if (model->blocks[0]->attn->sink.defined()) {  // a sink logit away from 0
                NoGradGuard no_grad;
                for (const auto& block : model->blocks)
                    block->attn->sink.copy_(from_vector(std::vector<double>{0.5, -1, 2, 0}, {4}));
            }
            // Not bit for bit: a hook on attn_out or mlp_out sees the output alone, so the residual
            // is added after W_O's GEMM rather than inside it, which rounds differently.
            const Tensor plain = logits_of(*model, ids);
            const Hooks readers = identity_hooks(false), edits = identity_hooks(true);
            CHECK(max_abs_diff(logits_of(*model, ids, &readers), plain) < 1e-12);
            CHECK(max_abs_diff(logits_of(*model, ids, &edits), plain) < 1e-12);
        }
}

TEST_CASE("hooks: a MoE block and a head-wise G1 gate pass their points too") {
    const Tensor ids = some_ids();
    for (const int64_t experts : {0, 3}) {
        const auto model = tiny_lm(GatePosition::sdpa_output, ScoreFunction::softmax,
                                   experts ? GateSharing::elementwise : GateSharing::headwise, experts);
        const Hooks edits = identity_hooks(true);
        CHECK(max_abs_diff(logits_of(*model, ids, &edits), logits_of(*model, ids)) < 1e-12);
    }
}

TEST_CASE("hooks: run_with_cache keeps what was asked, in the shapes of hooks.h, and its readings agree") {
    const auto model = tiny_lm(GatePosition::sdpa_output, ScoreFunction::sink);
    const Tensor ids = some_ids();  // (2, 6)
    NoGradGuard no_grad;
    LMOutput out;
    const ActivationCache cache = run_with_cache(*model, ids, all_hook_points(), {1}, DType::f64, {}, &out);
    CHECK(max_abs_diff(out.logits, logits_of(*model, ids)) < 1e-12);
    CHECK(!cache.has(HookPoint::resid_pre, 0));  // layer 0 was not asked for
    const std::pair<HookPoint, Shape> shapes[] = {
        {HookPoint::resid_pre, {2, 6, 16}}, {HookPoint::q, {2, 4, 6, 4}},      {HookPoint::k, {2, 2, 6, 4}},
        {HookPoint::v, {2, 2, 6, 4}},       {HookPoint::gate_logits, {2, 6, 16}}, {HookPoint::gate, {2, 4, 6, 4}},
        {HookPoint::scores, {2, 4, 6, 6}},  {HookPoint::probs, {2, 4, 6, 6}},  {HookPoint::slot, {2, 4, 6}},
        {HookPoint::z, {2, 6, 4, 4}},       {HookPoint::attn_out, {2, 6, 16}}, {HookPoint::resid_mid, {2, 6, 16}},
        {HookPoint::mlp_out, {2, 6, 16}},   {HookPoint::resid_post, {2, 6, 16}}};
    for (const auto& point_shape : shapes) {  // plain names: clang 14's CAPTURE cannot name a structured binding
        const HookPoint p = point_shape.first;
        CAPTURE(hook_point_name(p));
        CHECK(cache.at(p, 1).shape() == point_shape.second);
    }
    CHECK(cache.entries.size() == std::size(shapes));
    const auto at = [&](HookPoint p) { return cache.at(p, 1); };
    // The stream adds up, the weights and the slot make 1, the scores give the weights.
    CHECK(max_abs_diff(at(HookPoint::resid_mid), at(HookPoint::resid_pre) + at(HookPoint::attn_out)) < 1e-12);
    CHECK(max_abs_diff(at(HookPoint::resid_post), at(HookPoint::resid_mid) + at(HookPoint::mlp_out)) < 1e-12);
    CHECK(max_abs_diff(sum(at(HookPoint::probs), {-1}) + at(HookPoint::slot), ones({2, 4, 6}, DType::f64)) < 1e-12);
    CHECK(max_abs_diff(at(HookPoint::gate), sigmoid(at(HookPoint::gate_logits)).view({2, 6, 4, 4}).transpose(1, 2)) < 1e-12);
    // The same pass without scores keeps the fused kernel; its weights are the same.
    const ActivationCache fused = run_with_cache(*model, ids, {HookPoint::probs, HookPoint::slot}, {1}, DType::f64);
    CHECK(max_abs_diff(fused.at(HookPoint::probs, 1), at(HookPoint::probs)) < 1e-12);
    CHECK(max_abs_diff(fused.at(HookPoint::slot, 1), at(HookPoint::slot)) < 1e-12);
    // bfloat16 storage: a quarter of float64's bytes, the values rounded to 8 bits.
    const ActivationCache small = run_with_cache(*model, ids, all_hook_points(), {1}, DType::bf16);
    CHECK(small.bytes() * 4 == cache.bytes());
    CHECK(small.bytes() == cache_bytes(model->config(), all_hook_points(), 1, 2, 6, DType::bf16));
    CHECK(max_abs_diff(small.at(HookPoint::resid_post, 1).to(DType::f64), at(HookPoint::resid_post)) <
          amax(abs(at(HookPoint::resid_post))).item() / 128);
    CHECK(small.memory().find("14 activations") == 0);
}

TEST_CASE("hooks: an edit replaces the activation downstream") {
    const auto model = tiny_lm(GatePosition::sdpa_output);
    const Tensor ids = some_ids();
    NoGradGuard no_grad;
    // The last block's output set to 0: the final RMSNorm of 0 is 0, so are the logits.
    Hooks zero;
    zero.edit(HookPoint::resid_post, [](const Tensor& x, int64_t) { return zeros_like(x); }, {1});
    CHECK(amax(abs(logits_of(*model, ids, &zero))).item() == 0);
    // Every gate at 1 is the ungated model with the same weights.
    Hooks open;
    open.edit(HookPoint::gate, [](const Tensor& g, int64_t) { return ones_like(g); });
    const auto ungated = tiny_lm(GatePosition::none);
    for (const auto& [name, p] : ungated->named_parameters())
        for (const auto& [gated_name, q] : model->named_parameters())
            if (name == gated_name) gg::testing::assign(p, q);
    CHECK(max_abs_diff(logits_of(*model, ids, &open), logits_of(*ungated, ids)) < 1e-12);
    // Weights edited to put everything on the first token: without a gate, every head then
    // outputs position 0's value at every position.
    const auto baseline = tiny_lm(GatePosition::none);
    Hooks first;
    first.edit(HookPoint::probs, [](const Tensor& p, int64_t) {
        return cat({ones_like(p.narrow(3, 0, 1)), zeros_like(p.narrow(3, 1, p.size(3) - 1))}, 3);
    });
    Tensor z;  // (B, T, H, dk)
    first.read(HookPoint::z, [&z](const Tensor& x, int64_t) { z = x; }, {0});
    run_with_hooks(*baseline, ids, first);
    CHECK(max_abs_diff(z, z.narrow(1, 0, 1).expand(z.shape())) == 0);
    CHECK(max_abs_diff(z.narrow(1, 0, 1), z.narrow(1, 1, 1)) == 0);
    const ActivationCache plain = run_with_cache(*baseline, ids, {HookPoint::z}, {0}, DType::f64);
    const Tensor plain_z = plain.at(HookPoint::z, 0);
    CHECK(max_abs_diff(plain_z.narrow(1, 0, 1), plain_z.narrow(1, 1, 1)) > 1e-3);  // as it is without the edit
}

TEST_CASE("hooks: float64 gradchecks through replacing hooks: a scale on z, and edited attention weights") {
    const auto model = tiny_lm(GatePosition::sdpa_output, ScoreFunction::sink);
    const Tensor ids = some_ids(1, 5), targets = some_ids(1, 5);
    // Each head's output scaled by a number (B·T·H of them), the inputs checked.
    Generator gen(8);
    const Tensor scale = (randn({1, 5, 4, 1}, gen, DType::f64) + 1.0).requires_grad_();
    const GradcheckResult through_z = gradcheck(
        [&](const std::vector<Tensor>& in) {
            Hooks hooks;
            hooks.edit(HookPoint::z, [&](const Tensor& z, int64_t) { return z * in[0]; }, {1});
            return run_with_hooks(*model, ids, hooks, targets).loss;
        },
        {scale});
    CHECK_MESSAGE(through_z.ok, through_z.message);
    // Weights mixed with a uniform row: the plain-ops attention, whose gradient reaches W_Q,
    // W_K and the sink logit through the scores, and the edit's own tensor.
    Hooks mixed;
    mixed.edit(HookPoint::probs, [](const Tensor& p, int64_t) { return p * 0.7 + 0.3 / double(p.size(3)); }, {0});
    gg::testing::check_gradients(*model, {}, [&](const std::vector<Tensor>&) {
        return run_with_hooks(*model, ids, mixed, targets).loss;
    }, gg::testing::only({"layers.0.attn.w_q.weight", "layers.0.attn.w_k.weight", "layers.0.attn.sink"}));
    // Scores edited (a bias on the first key): the same path from the scores' side.
    Hooks biased;
    biased.edit(HookPoint::scores, [](const Tensor& s, int64_t) {
        return cat({s.narrow(3, 0, 1) + 1.5, s.narrow(3, 1, s.size(3) - 1)}, 3);
    });
    const int n = gg::testing::check_gradients(*model, {}, [&](const std::vector<Tensor>&) {
        return run_with_hooks(*model, ids, biased, targets).loss;
    }, gg::testing::only({"layers.1.attn.w_k.weight", "layers.1.attn.sink", "layers.1.attn.w_g.weight"}));
    CHECK(n == 3);
}

TEST_CASE("hooks: patching with gradients: the loss of a run with a clean run's resid_mid patched in") {
    const auto model = tiny_lm(GatePosition::sdpa_output);
    const Tensor clean = some_ids(1, 5), targets = some_ids(1, 5);
    Tensor corrupt = clean.clone();
    corrupt.narrow(1, 0, 1).fill_(7);
    Tensor patch;  // (1, 5, 16) the clean run's resid_mid at layer 0
    {
        NoGradGuard no_grad;
        patch = run_with_cache(*model, clean, {HookPoint::resid_mid}, {0}, DType::f64).at(HookPoint::resid_mid, 0);
    }
    // The patch at position 2 makes the corrupt run's loss a function of it, checked in float64;
    // patching every position gives the clean run back.
    const auto patched_loss = [&](const Tensor& value, int64_t position) {
        Hooks hooks;
        hooks.edit(HookPoint::resid_mid, [&](const Tensor& x, int64_t) {
            return position < 0 ? value : cat({x.narrow(1, 0, position), value.narrow(1, position, 1),
                                               x.narrow(1, position + 1, x.size(1) - position - 1)}, 1);
        }, {0});
        return run_with_hooks(*model, corrupt, hooks, targets).loss;
    };
    const GradcheckResult r =
        gradcheck([&](const std::vector<Tensor>& in) { return patched_loss(in[0], 2); }, {patch.clone().requires_grad_()});
    CHECK_MESSAGE(r.ok, r.message);
    CHECK(patched_loss(patch, -1).item() == doctest::Approx(model->forward(clean, targets).loss.item()).epsilon(1e-12));
    CHECK(std::abs(patched_loss(patch, 2).item() - model->forward(corrupt, targets).loss.item()) > 1e-6);
}

TEST_CASE("hooks: bad hooks are refused with one line") {
    const auto model = tiny_lm(GatePosition::sdpa_output);
    const Tensor ids = some_ids();
    Hooks wrong_shape;
    wrong_shape.edit(HookPoint::attn_out, [](const Tensor& x, int64_t) { return x.narrow(1, 0, 2); });
    CHECK_THROWS_WITH_AS(run_with_hooks(*model, ids, wrong_shape),
                         "hook attn_out at layer 0: an edit returned (2,2,16) for an activation (2,6,16)",
                         std::invalid_argument);
    Hooks far;
    far.read(HookPoint::q, [](const Tensor&, int64_t) {}, {2});
    CHECK_THROWS_WITH_AS(run_with_hooks(*model, ids, far), "hook q: layer 2 is outside [0, 2)", std::invalid_argument);
    CHECK_THROWS_WITH_AS(Hooks().edit(HookPoint::slot, [](const Tensor& x, int64_t) { return x; }),
                         doctest::Contains("slot is read only"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_hook_point("attn"), doctest::Contains("hook point 'attn' is not one of resid_pre, q"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(run_with_cache(*model, ids, {HookPoint::q}, {5}),
                         "run_with_cache: capture layer 5 is outside [0, 2)", std::invalid_argument);
    CHECK(parse_hook_point("gate_logits") == HookPoint::gate_logits);
    for (const HookPoint p : all_hook_points()) CHECK(parse_hook_point(hook_point_name(p)) == p);
}

TEST_CASE("interventions: heads ablated to 0 or their mean, massive values found and clamped") {
    const auto model = tiny_lm(GatePosition::sdpa_output);
    const Tensor ids = some_ids();
    NoGradGuard no_grad;
    for (const Ablation how : {Ablation::zero, Ablation::mean}) {
        Hooks hooks;
        ablate_heads(hooks, {{1, 2}}, how, 4);
        const ActivationCache plain = run_with_cache(*model, ids, {HookPoint::z}, {1}, DType::f64);
        const ActivationCache cut = run_with_cache(*model, ids, {HookPoint::z}, {1}, DType::f64, hooks);
        const Tensor before = plain.at(HookPoint::z, 1), after = cut.at(HookPoint::z, 1);  // (B, T, H, dk)
        const Tensor want = how == Ablation::zero ? zeros({2, 6, 1, 4}, DType::f64)
                                                  : mean(before.narrow(2, 2, 1), {0, 1}, true).expand({2, 6, 1, 4});
        CHECK(max_abs_diff(after.narrow(2, 2, 1), want) < 1e-12);
        CHECK(max_abs_diff(after.narrow(2, 0, 2), before.narrow(2, 0, 2)) == 0);  // the other heads as they were
    }
    CHECK_THROWS_WITH_AS([] { Hooks h; ablate_heads(h, {{0, 4}}, Ablation::zero, 4); }(),
                         "ablate_heads: head 0.4 is outside [0, 4)", std::invalid_argument);
    // |h| of 1 … 8 and one of 900: the median is 5, so 900 passes 100 and 100 × 5 but not the
    // default 1000 × 5; with a ratio of 1.5 and no least size, 8 > 7.5 does too.
    const Tensor h = from_vector(std::vector<double>{1, -2, 3, 4, -5, 6, 7, -8, 900}, {1, 3, 3});
    CHECK(massive_mask(h, {}).to_vector<double>() == std::vector<double>(9, 0));
    CHECK(massive_mask(h, {.min_abs = 100, .ratio = 100}).to_vector<double>() == std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 1});
    CHECK(massive_mask(h, {.min_abs = 0, .ratio = 1.5}).to_vector<double>() == std::vector<double>{0, 0, 0, 0, 0, 0, 0, 1, 1});
    Hooks clamp;
    clamp_massive(clamp, Ablation::zero, {.min_abs = 0, .ratio = 3}, {0});
    const ActivationCache plain = run_with_cache(*model, ids, {HookPoint::resid_post}, {0}, DType::f64);
    const ActivationCache clamped = run_with_cache(*model, ids, {HookPoint::resid_post}, {0}, DType::f64, clamp);
    const Tensor mask = massive_mask(plain.at(HookPoint::resid_post, 0), {.min_abs = 0, .ratio = 3});
    CHECK(sum(mask).item() > 0);
    CHECK(max_abs_diff(clamped.at(HookPoint::resid_post, 0), plain.at(HookPoint::resid_post, 0) * (1.0 - mask)) == 0);
}

TEST_CASE("logit lens: the last layer's lens is the model's logits, and ranks follow the probabilities") {
    const auto model = tiny_lm(GatePosition::sdpa_output, ScoreFunction::softmax1);
    const std::vector<int64_t> prompt{3, 14, 15, 9, 2};
    const std::vector<LensLayer> lens = logit_lens(*model, prompt, 4, 7);
    REQUIRE(lens.size() == 2);
    const Tensor logits = model->forward(from_vector(prompt, {1, 5})).logits.select(1, 4).reshape({20});  // (V)
    CHECK(max_abs_diff(lens[1].logits, logits) == 0);
    for (const LensLayer& row : lens) {
        CAPTURE(row.layer);
        const std::vector<double> p = softmax(row.logits, -1).to_vector<double>();
        CHECK(row.top_ids.size() == 4);
        CHECK(row.top_ids[0] == std::max_element(p.begin(), p.end()) - p.begin());
        CHECK(std::is_sorted(row.top_probs.rbegin(), row.top_probs.rend()));
        CHECK(row.target_prob == p[7]);
        CHECK(row.target_rank == std::count_if(p.begin(), p.end(), [&](double x) { return x > p[7]; }));
    }
    CHECK(max_abs_diff(lens[0].logits, lens[1].logits) > 1e-3);  // layer 0's residual predicts otherwise
    CHECK_THROWS_WITH_AS(logit_lens(*model, prompt, 0), doctest::Contains("top_k 0"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(logit_lens(*model, prompt, 3, 20), doctest::Contains("target 20"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(logit_lens(*model, {}, 3), doctest::Contains("0 prompt tokens"), std::invalid_argument);
}
