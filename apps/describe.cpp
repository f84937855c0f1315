// The lines train prints about a run before its first step, and report shows (cli.h): the
// common settings in sentences, then every other one that is away from its default, read off
// the table of settings (nn/config_fields.h), so that a field added there is shown without a
// word here.
#include <cstdio>
#include <set>
#include <string>

#include "cli.h"
#include "nn/attention.h"
#include "nn/transformer.h"
#include "nn/train/train_config.h"

using namespace gg;
using namespace gg::nn;

namespace {
// MLA's point, in numbers: what decoding caches per token beside what these heads would cache.
std::string latent_line(const LMConfig& m) {
    if (m.attn.kv_rank == 0) return "";
    LMConfig plain = m;
    plain.attn.kv_rank = 0;
    const int64_t rope_dim = m.latent_rope_dim();
    return "latent    MLA, kv rank " + std::to_string(m.attn.kv_rank) +
           (rope_dim > 0 ? ", rope dim " + std::to_string(rope_dim) : "") + ": KV cache " +
           std::to_string(kv_cache_bytes_per_token(m, DType::f32)) + " bytes per token in float32, " +
           std::to_string(kv_cache_bytes_per_token(plain, DType::f32)) + " with these heads' own keys and values\n";
}
}  // namespace

std::string describe(const TrainConfig& c, int64_t parameters) {
    const LMConfig& m = c.model;
    const AttentionOptions& at = m.attn;
    std::string gate = gate_position_name(at.gate);
    if (at.gate != GatePosition::none)
        gate += " (" + gate_function_name(at.gate_fn) + ", " + gate_sharing_name(at.sharing) + ", init " +
                gate_init_name(at.gate_init) + ")";
    std::string ffn = !m.ffn ? "none" : m.n_experts > 0 ? std::to_string(m.n_experts) + " experts, top " + std::to_string(m.top_k)
                                                        : "SwiGLU " + std::to_string(m.ffn_hidden());
    // A hybrid, or layers without attention: which layers are full attention, what the rest are.
    std::string layers = std::to_string(m.n_layers) + " layers", full;
    int64_t linear = 0, feed_forward = 0;
    for (int64_t l = 0; l < int64_t(m.layer_types.size()); ++l)
        if (m.layer_type(l) == LayerType::linear_attention) ++linear;
        else if (m.layer_type(l) == LayerType::feed_forward) ++feed_forward;
        else full += (full.empty() ? "" : " ") + std::to_string(l);
    if (linear + feed_forward > 0)
        layers += " (" + (linear > 0 ? std::to_string(linear) + " Gated DeltaNet, " : std::string()) +
                  (feed_forward > 0 ? std::to_string(feed_forward) + " FFN only, " : std::string()) +
                  "full attention at " + (full.empty() ? "none" : full) + ")";
    std::string data;
    for (const std::string& d : c.data) data += (data.empty() ? "" : " ") + d;
    char text[1024];
    std::snprintf(text, sizeof text,
                  "model     %s, d_model %lld, %lld heads (%lld kv), attention %s%s%s, %s positions, FFN %s\n"
                  "          %lld parameters\n"
                  "training  %lld steps, batch %s%lld x %lld tokens, lr %g (warmup %lld, cosine to %g), weight decay %g, "
                  "clip %g, seed %llu\n"
                  "          validate every %lld steps, checkpoint every %lld (0: at the end) and every %g minutes\n",
                  layers.c_str(), (long long)m.d_model, (long long)at.n_heads, (long long)at.kv_heads(), gate.c_str(),
                  at.qk_norm ? ", qk-norm" : "", at.window > 0 ? (", window " + std::to_string(at.window)).c_str() : "",
                  m.positions == PositionEncoding::rope ? "RoPE" : "learned", ffn.c_str(), (long long)parameters,
                  (long long)c.steps,
                  c.world_size > 1 ? (std::to_string(c.world_size) + " ranks x ").c_str() : "", (long long)c.batch_size,
                  (long long)c.seq_len, c.lr, (long long)c.warmup,
                  c.lr * c.min_lr_ratio, c.weight_decay, c.grad_clip, (unsigned long long)c.seed, (long long)c.eval_every,
                  (long long)c.ckpt_every, c.ckpt_minutes);
    // Then every other setting of the table that is not its default: those the sentences above
    // do not write (tests/test_config_fields.cpp changes each alone and looks).
    std::set<std::string> shown = {"n_layers", "d_model", "n_heads", "n_kv_heads", "gate", "qk_norm", "window",
                                   "positions", "ffn", "steps", "batch_size", "seq_len", "lr", "warmup", "min_lr_ratio",
                                   "weight_decay", "grad_clip", "seed", "eval_every", "ckpt_every", "ckpt_minutes", "data"};
    if (at.gate != GatePosition::none) shown.insert({"gate_fn", "gate_sharing", "gate_init"});
    if (m.ffn) shown.insert({"n_experts", m.n_experts > 0 ? "top_k" : "d_ff"});
    if (at.kv_rank > 0) shown.insert({"kv_rank", "rope_dim"});
    if (linear + feed_forward > 0) shown.insert("layer_types");
    std::string other;
    for (const auto& [field, was, now] : differences(run_fields(), TrainConfig(), c))
        if (!shown.contains(field->key)) other += (other.empty() ? "" : ", ") + name(*field) + " " + now;
    return text + latent_line(m) + (other.empty() ? "" : "other     " + other + "\n") + "data      " + data + "\n";
}
