// The model's settings (nn/config_fields.h): LMConfig's rows, and its JSON and checks read
// off them.
#include "nn/config_fields.h"

#include <nlohmann/json.hpp>

#include "nn/json_fields.h"

namespace gg::nn {

// ---------------------------------------------------------------- the rows

const Fields<LMConfig>& lm_config_fields() {
    using L = LMConfig;
    using A = AttentionOptions;
    using R = RopeOptions;
    using Limit = LMConfigLimits;
    constexpr Resume keep = Resume::architecture;
    static const Fields<LMConfig> rows = {
        // key, where it lives and its check, train's flag, help, what a resumed run may do
        {"vocab_size", at<&L::vocab_size>({1, Limit::vocab_size}), nullptr, "tokens the model knows", keep},
        // train's --seq-len sets it; a resumed run judges it there (apps/train_config.cpp)
        {"max_len", at<&L::max_len>({1, Limit::max_len}), nullptr, "positions the model has (learned positions)",
         Resume::not_compared},
        {"d_model", at<&L::d_model>({1, Limit::d_model}), "--d-model", "model width", keep},
        {"n_layers", at<&L::n_layers>({0, Limit::n_layers}), "--layers", "transformer blocks", keep},
        {"layer_types", at<&L::layer_types>(kLayerTypes), nullptr,
         "each layer's token mixer, full_attention, linear_attention (Gated DeltaNet) or feed_forward (none: "
         "the FFN alone); none: all full",
         keep},
        {"linear_k_heads", at<&L::linear_k_heads>({0, Limit::d_model}), nullptr,
         "a linear layer's key heads (0: n_heads)", keep},
        {"linear_v_heads", at<&L::linear_v_heads>({0, Limit::d_model}), nullptr,
         "a linear layer's value heads, a multiple of its key heads (0: as many as key heads)", keep},
        {"linear_k_head_size", at<&L::linear_k_head_size>({0, Limit::d_model}), nullptr,
         "a linear layer's key head size (0: the attention's head size)", keep},
        {"linear_v_head_size", at<&L::linear_v_head_size>({0, Limit::d_model}), nullptr,
         "a linear layer's value head size (0: its key head size)", keep},
        {"linear_conv_kernel", at<&L::linear_conv_kernel>({0, 64}), nullptr,
         "taps of a linear layer's causal convolution (0: 4)", keep},
        {"n_heads", at<&L::attn, &A::n_heads>({1, Limit::d_model}), "--heads", "attention heads", keep},
        {"n_kv_heads", at<&L::attn, &A::n_kv_heads>({0, Limit::d_model}, "--heads"), "--kv-heads",
         "key/value heads for grouped-query attention (must divide --heads)", keep},
        {"head_size", at<&L::attn, &A::head_size>({0, Limit::d_model}), nullptr,
         "each head's size (0: d_model / heads)", keep},
        {"gate", at<&L::attn, &A::gate>(parse_gate_position, gate_position_name), "--attn",
         "gate position: baseline, g1 (sdpa), value, key, query, g5 (output): the paper's G1-G5; "
         "scores-x, scores-query, residual: the walk-through's G2-G4 (also article-g2..article-g4; a bare g2..g4 "
         "is refused: it names two gates, docs/paper.md)",
         keep},
        {"gate_fn", at<&L::attn, &A::gate_fn>(parse_gate_function, gate_function_name), "--gate-fn",
         "gate function: sigmoid, tanh, relu, silu, none", keep},
        {"gate_sharing", at<&L::attn, &A::sharing>(parse_gate_sharing, gate_sharing_name), "--gate-sharing",
         "gate sharing: elementwise, headwise, shared", keep},
        {"gate_init", at<&L::attn, &A::gate_init>(parse_gate_init, gate_init_name), "--gate-init",
         "gate weight init: zero, normal, kaiming, xavier", keep},
        {"gate_init_std", at<&L::attn, &A::gate_init_std>({0, 1e3}), nullptr, "σ of the normal gate init", keep},
        {"qk_norm", at<&L::attn, &A::qk_norm>(), "--qk-norm", "RMSNorm on each query and key head", keep},
        {"window", at<&L::attn, &A::window>({0, Limit::window}), "--window",
         "sliding-window attention over the last N keys (0: full)", keep},
        {"exclude_self", at<&L::attn, &A::exclude_self>(), nullptr, "hide each query's own key", keep},
        {"score_fn", at<&L::attn, &A::score_fn>(parse_score_function, score_function_name), "--score-fn",
         "how a row of attention scores becomes weights: softmax, softmax1 (a slot of logit 0), sink (a learnable "
         "slot logit per head), sigmoid (bias -log n), softpick",
         keep},
        {"kv_rank", at<&L::attn, &A::kv_rank>({0, Limit::d_model}), "--kv-rank",
         "multi-head latent attention (DeepSeek-V2): keys and values from a latent of this size, cached alone "
         "(0: off)",
         keep},
        {"rope_dim", at<&L::attn, &A::rope_dim>({0, Limit::d_model}), "--rope-dim",
         "with --kv-rank: size of the decoupled RoPE part of each query and the shared key (0: head size / 2)", keep},
        {"positions", at<&L::positions>(parse_position_encoding, position_encoding_name), "--positions",
         "position encoding: rope or learned", keep},
        {"rope_base", at<&L::attn, &A::rope_options, &R::base>({1, 1e12, true}), nullptr, "RoPE's base", keep},
        {"partial_rotary_factor", at<&L::attn, &A::rope_options, &R::partial>({0, 1, true}), nullptr,
         "the share of each head's channels RoPE turns (Qwen3-Next: 0.25)", keep},
        {"rope_scaling", at<&L::attn, &A::rope_options, &R::scaling>(parse_rope_scaling, rope_scaling_name), nullptr,
         "RoPE's long-context scaling: none, pi, ntk, yarn", keep},
        {"rope_factor", at<&L::attn, &A::rope_options, &R::factor>({1, 1e6}), nullptr,
         "how many times the training length the scaling reaches", keep},
        {"rope_original_length", at<&L::attn, &A::rope_options, &R::original_length>({0, Limit::max_len}), nullptr,
         "YaRN's training length", keep},
        {"rope_beta_fast", at<&L::attn, &A::rope_options, &R::yarn_beta_fast>({0, 1e6, true}), nullptr,
         "YaRN: channels turning more than this keep their frequency", keep},
        {"rope_beta_slow", at<&L::attn, &A::rope_options, &R::yarn_beta_slow>({0, 1e6, true}), nullptr,
         "YaRN: channels turning less than this are slowed down in full", keep},
        {"ffn", at<&L::ffn>(false), "--no-ffn", "attention-only blocks (no feed-forward)", keep},
        {"d_ff", at<&L::d_ff>({0, Limit::d_ff}), nullptr, "SwiGLU's hidden size (0: 8/3 d_model)", keep},
        {"n_experts", at<&L::n_experts>({0, Limit::n_experts}), "--experts",
         "mixture of N SwiGLU experts as the feed-forward (0: dense)", keep},
        {"top_k", at<&L::top_k>({1, Limit::n_experts}), "--top-k", "experts per token", keep},
        {"aux_loss_weight", at<&L::aux_loss_weight>({0, 1e6}), nullptr, "weight of the experts' balance loss"},
        {"tie_embeddings", at<&L::tie_embeddings>(), nullptr, "the output layer shares the token embedding", keep},
        {"norm_eps", at<&L::norm_eps>({0, 1}), nullptr, "RMSNorm's ε", keep},
        {"zero_centred_norm", at<&L::zero_centred_norm>(), nullptr,
         "the norms scale by 1 + weight, the weight starting at 0 (Qwen3-Next, Qwen3.5)", keep},
        {"init", at<&L::init>(parse_lm_init, lm_init_name), nullptr, "gpt2 or torch initialisation (LMConfig::init)",
         keep},
        {"init_std", at<&L::init_std>({0, 1e3}), nullptr, "σ of the gpt2 init", keep},
    };
    return rows;
}

LMConfig spelled_out(LMConfig c) {
    c.attn.n_kv_heads = c.attn.kv_heads();
    c.d_ff = c.ffn_hidden();
    return c;
}

// ---------------------------------------------------------------- JSON and checks

std::string LMConfig::to_json() const {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    write_fields(lm_config_fields(), spelled_out(*this), j);
    return j.dump();
}

LMConfig LMConfig::from_json(const std::string& text) {
    JsonFields fields("LMConfig", text);
    LMConfig c;
    read_fields(fields, lm_config_fields(), c);
    fields.finish();
    c.validate();
    return c;
}

void LMConfig::validate() const {
    const std::string what = "LMConfig";
    check_fields(lm_config_fields(), *this, what);
    // What ties fields together.
    Range<int64_t>{1, d_model}.check(what, "n_heads", attn.n_heads);
    Range<int64_t>{0, attn.n_heads}.check(what, "n_kv_heads", attn.n_kv_heads);
    if (ffn && n_experts > 0) Range<int64_t>{1, n_experts}.check(what, "top_k", top_k);
    const auto fail = [&](const std::string& why) { throw std::invalid_argument(what + ": " + why); };
    if (attn.head_size == 0 && d_model % attn.n_heads != 0)
        fail("n_heads " + std::to_string(attn.n_heads) + " does not divide d_model " + std::to_string(d_model) +
             " (or set head_size)");
    if (attn.n_heads % attn.kv_heads() != 0)
        fail("n_kv_heads " + std::to_string(attn.kv_heads()) + " does not divide n_heads " + std::to_string(attn.n_heads));
    if (positions == PositionEncoding::rope && attn.head_dim() % 2 != 0)
        fail("RoPE needs an even head size, but it is " + std::to_string(attn.head_dim()));
    if (attn.kv_rank > 0 && (attn.qk_norm || (attn.gated() && attn.gate != GatePosition::sdpa_output) ||
                             attn.kv_heads() != attn.n_heads))
        fail("kv_rank " + std::to_string(attn.kv_rank) + " (latent attention) takes no QK-norm, no kv heads of its "
             "own and no gate but g1 (qk_norm " + std::to_string(attn.qk_norm) + ", n_kv_heads " +
             std::to_string(attn.kv_heads()) + ", gate " + gate_position_name(attn.gate) + ")");
    if (attn.kv_rank > 0 && latent_rope_dim() % 2 != 0)
        fail("RoPE needs an even rope_dim, but it is " + std::to_string(latent_rope_dim()));
    if (attn.kv_rank > 0 && attn.rope_options.partial != 1.0)  // its rotary key has a size of its own
        fail("kv_rank " + std::to_string(attn.kv_rank) + " (latent attention) sizes its rotary key with rope_dim, "
             "not partial_rotary_factor " + std::to_string(attn.rope_options.partial));
    const int64_t head = attn.head_size > 0 ? attn.head_size : d_model / attn.n_heads;
    if (const auto turned = int64_t(double(head) * attn.rope_options.partial);
        positions == PositionEncoding::rope && (turned < 2 || turned % 2 != 0))
        fail("partial_rotary_factor " + std::to_string(attn.rope_options.partial) + " turns " + std::to_string(turned) +
             " of the head's " + std::to_string(head) + " channels; RoPE needs an even number ≥ 2");
    if (!layer_types.empty() && int64_t(layer_types.size()) != n_layers)
        fail("layer_types names " + std::to_string(layer_types.size()) + " layers, but n_layers is " +
             std::to_string(n_layers));
    for (size_t l = 0; l < layer_types.size(); ++l)
        if (layer_types[l] == LayerType::feed_forward && !ffn)
            fail("layer " + std::to_string(l) + " is feed_forward, a block of its FFN alone, but ffn is off");
    if (const GatedDeltaNetOptions o = linear_attention(); o.v_heads() % o.n_k_heads != 0)
        fail("linear_v_heads " + std::to_string(o.v_heads()) + " is not a multiple of linear_k_heads " +
             std::to_string(o.n_k_heads));
    if (attn.exclude_self && attn.window == 1) fail("exclude_self needs a window of 0 or at least 2, not 1");
    if (attn.head_size > 0 && attn.gated() && attn.n_heads * attn.head_size != d_model &&
        (attn.gate == GatePosition::residual || attn.gate == GatePosition::after_merge))
        fail("gate " + gate_position_name(attn.gate) + " gates d_model as n_heads chunks of head_size, but " +
             std::to_string(attn.n_heads) + " × " + std::to_string(attn.head_size) + " is not d_model " +
             std::to_string(d_model));
}

// ---------------------------------------------------------------- precision

DType parse_precision(const std::string& name) {
    if (name == "f32" || name == "float32") return DType::f32;
    if (name == "bf16" || name == "bfloat16") return DType::bf16;
    throw std::invalid_argument("precision '" + printable(name) + "' is not one of f32, bf16");
}

const char* precision_name(DType precision) {
    return precision == DType::bf16 ? "bf16" : precision == DType::f32 ? "f32" : dtype_name(precision);
}

}  // namespace gg::nn
