#include "nn/transformer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include "autograd/engine.h"
#include "nn/untrusted.h"

namespace gg::nn {

// ---------------------------------------------------------------- names

namespace {
std::string lowercase(std::string name) {
    std::ranges::transform(name, name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return name;
}
}  // namespace

PositionEncoding parse_position_encoding(const std::string& name) {
    const std::string lower = lowercase(name);
    if (lower == "rope") return PositionEncoding::rope;
    if (lower == "learned") return PositionEncoding::learned;
    throw std::invalid_argument("positions '" + printable(name) + "' is not rope or learned");
}

const char* position_encoding_name(PositionEncoding positions) {
    return positions == PositionEncoding::rope ? "rope" : "learned";
}

LMInit parse_lm_init(const std::string& name) {
    const std::string lower = lowercase(name);
    if (lower == "gpt2") return LMInit::gpt2;
    if (lower == "torch") return LMInit::torch;
    throw std::invalid_argument("init '" + printable(name) + "' is not gpt2 or torch");
}

const char* lm_init_name(LMInit init) { return init == LMInit::gpt2 ? "gpt2" : "torch"; }

std::vector<LayerType> hybrid_layer_types(const std::string& ratio, int64_t n_layers) {
    const size_t colon = ratio.find(':');
    const auto whole = [](const std::string& text) {  // 1 … 1024, or 0 for anything else
        if (text.empty() || text.size() > 4 || !std::ranges::all_of(text, [](unsigned char c) { return std::isdigit(c); }))
            return int64_t(0);
        const int64_t n = std::stoll(text);
        return n <= LMConfigLimits::n_layers ? n : 0;
    };
    const int64_t linear = colon == std::string::npos ? 0 : whole(ratio.substr(0, colon));
    const int64_t full = colon == std::string::npos ? 0 : whole(ratio.substr(colon + 1));
    if (linear < 1 || full < 1)
        throw std::invalid_argument("hybrid '" + printable(ratio) +
                                    "' is not L:F, L linear-attention layers then F full ones, whole numbers ≥ 1 (3:1)");
    if (n_layers % (linear + full) != 0)
        throw std::invalid_argument("hybrid " + ratio + " repeats " + std::to_string(linear + full) +
                                    " layers, which do not divide n_layers " + std::to_string(n_layers));
    std::vector<LayerType> types;
    for (int64_t l = 0; l < n_layers; ++l)
        types.push_back(l % (linear + full) < linear ? LayerType::linear_attention : LayerType::full_attention);
    return types;
}

int64_t LMConfig::latent_rope_dim() const {
    AttentionOptions a = attn;
    a.d_model = d_model;  // the model's width sizes the heads
    return positions == PositionEncoding::rope ? a.mla_rope_dim() : 0;
}

int64_t kv_cache_bytes_per_token(const LMConfig& c, DType dtype) {
    AttentionOptions a = c.attn;
    a.d_model = c.d_model;
    const int64_t numbers = a.kv_rank > 0 ? a.kv_rank + c.latent_rope_dim() : 2 * a.kv_heads() * a.head_dim();
    // A hybrid's linear layers keep a state of fixed size, not a cache that grows per token.
    int64_t full_layers = 0;
    for (int64_t l = 0; l < c.n_layers; ++l) full_layers += c.layer_type(l) == LayerType::full_attention;
    return numbers * full_layers * int64_t(dtype_size(dtype));
}

// ---------------------------------------------------------------- block

namespace {
AttentionOptions block_attention(const LMConfig& c) {
    AttentionOptions a = c.attn;
    a.d_model = c.d_model;
    a.rope = c.positions == PositionEncoding::rope;
    a.qk_norm_eps = c.norm_eps;
    a.qk_norm_zero_centred = c.zero_centred_norm;
    return a;
}
}  // namespace

GatedDeltaNetOptions LMConfig::linear_attention() const {
    GatedDeltaNetOptions o;
    o.d_model = d_model;
    o.n_k_heads = linear_k_heads > 0 ? linear_k_heads : attn.n_heads;
    o.n_v_heads = linear_v_heads;
    o.head_k_dim = linear_k_head_size > 0 ? linear_k_head_size : attn.head_dim();
    o.head_v_dim = linear_v_head_size;
    if (linear_conv_kernel > 0) o.conv_kernel = linear_conv_kernel;
    o.norm_eps = norm_eps;
    return o;
}

TransformerBlock::TransformerBlock(const LMConfig& c, int64_t layer) {
    // A feed_forward block mixes nothing: the FFN below is the whole block (validate() asks for one).
    const LayerType type = c.layer_type(layer);
    if (type != LayerType::feed_forward)
        norm1 = register_module("norm1", std::make_shared<RMSNorm>(c.d_model, c.norm_eps, c.zero_centred_norm));
    if (type == LayerType::linear_attention)
        linear_attn = register_module("linear_attn", std::make_shared<GatedDeltaNet>(c.linear_attention()));
    else if (type == LayerType::full_attention && c.attn.kv_rank > 0)
        mla = register_module("attn", std::make_shared<MultiHeadLatentAttention>(block_attention(c)));
    else if (type == LayerType::full_attention)
        attn = register_module("attn", std::make_shared<GatedAttention>(block_attention(c)));
    if (!c.ffn) return;
    norm2 = register_module("norm2", std::make_shared<RMSNorm>(c.d_model, c.norm_eps, c.zero_centred_norm));
    if (c.n_experts > 0) moe = register_module("moe", std::make_shared<MoE>(c.d_model, c.n_experts, c.top_k, c.ffn_hidden()));
    else ffn = register_module("ffn", std::make_shared<SwiGLU>(c.d_model, c.ffn_hidden()));
}

Tensor TransformerBlock::forward(const Tensor& x_in, LayerCache* cache, BlockCapture capture, Tensor* aux_loss,
                                 const LayerHooks* hooks) const {
    const Tensor x = hook(hooks, HookPoint::resid_pre, x_in);
    // G4's gate reads the raw residual stream x; every other position ignores gate_source.
    // Both residual sums are taken inside the output projections' GEMMs (Linear::forward),
    // but for a hook on mlp_out, which sees the FFN's output alone.
    KVCache* kv = cache ? &cache->kv : nullptr;
    const bool feed_forward = !has_attention() && !linear_attn;
    if (feed_forward && cache) cache->passed += x.size(1);  // its only state: the count
    const Tensor mixed =
        attn          ? attn->forward(norm1->forward(x), kv, x, capture.attention, x, hooks)
        : mla         ? mla->forward(norm1->forward(x), kv, capture.attention, x, false, hooks)
        : linear_attn ? linear_attn->forward(norm1->forward(x), cache ? &cache->linear : nullptr, x, capture.linear)
                      : x;  // feed_forward
    Tensor h = hook(hooks, HookPoint::resid_mid, mixed);
    const bool mlp_hooked = hooks && hooks->any(HookPoint::mlp_out);
    if (ffn && !mlp_hooked) h = ffn->forward(norm2->forward(h), h);
    if (ffn && mlp_hooked) h = h + (*hooks)(HookPoint::mlp_out, ffn->forward(norm2->forward(h)));
    if (moe) h = h + hook(hooks, HookPoint::mlp_out, moe->forward(norm2->forward(h), aux_loss));
    return hook(hooks, HookPoint::resid_post, h);
}

// ---------------------------------------------------------------- language model

namespace {
// Redraws w ~ N(0, std²) in place (its handle, held by its module, stays the same).
void normal_(const Tensor& w, double std) {
    NoGradGuard no_grad;
    w.copy_(init_normal(w.shape(), std));
}

// The gpt2 init of LMInit: σ for every weight, σ/√(2L) for W_O and the FFN's down projection
// W3 (each block adds two such terms to the residual stream, 2L in all, so their variances
// sum to about σ²); the gates and norms keep their own starting values.
void init_gpt2(GatedTransformerLM& m, double std) {
    const double residual_std = std / std::sqrt(2.0 * double(std::max<size_t>(m.blocks.size(), 1)));
    normal_(m.tok_emb->weight, std);
    if (m.pos_emb) normal_(m.pos_emb->weight, std);
    const auto swiglu = [&](const SwiGLU& f) {
        normal_(f.w1->weight, std);
        normal_(f.w2->weight, std);
        normal_(f.w3->weight, residual_std);
    };
    for (const auto& block : m.blocks) {
        if (const auto& a = block->attn) {
            for (const auto& w : {a->w_q, a->w_k, a->w_v}) normal_(w->weight, std);
            normal_(a->w_o->weight, residual_std);
        }
        if (const auto& a = block->mla) {
            for (const auto& w : {a->w_q, a->w_qr, a->w_dkv, a->w_kr, a->w_uk, a->w_uv})
                if (w) normal_(w->weight, std);
            normal_(a->w_o->weight, residual_std);
        }
        if (const auto& a = block->linear_attn) {  // its decay, convolution and norm keep their own
            for (const auto& w : {a->w_q, a->w_k, a->w_v, a->w_z, a->w_beta, a->w_alpha}) normal_(w->weight, std);
            normal_(a->w_o->weight, residual_std);
        }
        if (block->ffn) swiglu(*block->ffn);
        if (block->moe) {
            normal_(block->moe->router->weight, std);
            for (const auto& expert : block->moe->experts) swiglu(*expert);
        }
    }
    if (m.lm_head) normal_(m.lm_head->weight, std);
}
}  // namespace

GatedTransformerLM::GatedTransformerLM(const LMConfig& config, DType dtype) : config_(config) {
    config.validate();
    if (!is_floating(dtype))
        throw std::invalid_argument(std::string("GatedTransformerLM: parameters cannot be ") + dtype_name(dtype));
    check_memory(config);
    config_.attn.d_model = config.d_model;
    // Every weight is drawn in float32, then the init below runs in float32 too when the
    // parameters stay so; a part is converted to `dtype` once nothing more is drawn for it.
    const bool convert = dtype != DType::f32 && config.init != LMInit::gpt2;
    const auto in_dtype = [&](auto module) {
        if (convert) module->to(dtype);
        return module;
    };
    // GPT-2's N(0, 0.02²) start for embeddings keeps early logits small.
    tok_emb = register_module("tok_emb", in_dtype(std::make_shared<Embedding>(config.vocab_size, config.d_model, 0.02)));
    if (config.positions == PositionEncoding::learned)
        pos_emb = register_module("pos_emb", in_dtype(std::make_shared<LearnedPositionalEmbedding>(config.max_len,
                                                                                                    config.d_model)));
    for (int64_t l = 0; l < config.n_layers; ++l)
        blocks.push_back(register_module("layers." + std::to_string(l), in_dtype(std::make_shared<TransformerBlock>(config_, l))));
    norm_f = register_module("norm_f", in_dtype(std::make_shared<RMSNorm>(config.d_model, config.norm_eps, config.zero_centred_norm)));
    if (!config.tie_embeddings)
        lm_head = register_module("lm_head", in_dtype(std::make_shared<Linear>(config.d_model, config.vocab_size, false)));
    if (config.init == LMInit::gpt2) init_gpt2(*this, config.init_std);
    if (dtype != DType::f32 && !convert) to(dtype);
}

namespace {

// ids (B, T) → the last block's output (B, T, d): the whole forward but the unembedding, which
// forward applies to every position and generate to the last only. aux: the MoE blocks'
// load-balancing losses, summed (undefined without any).
Tensor run_blocks(const GatedTransformerLM& model, const Tensor& ids, std::vector<LayerCache>* caches,
                  LMCapture* capture, const Hooks* hooks, Tensor& aux) {
    check_defined(ids, "GatedTransformerLM");
    if (ids.dim() != 2 || ids.dtype() != DType::i64)
        throw std::invalid_argument("GatedTransformerLM: ids must be int64 (B, T), got " + shape_str(ids.shape()) + " " +
                                    dtype_name(ids.dtype()));
    const auto& blocks = model.blocks;
    if (caches && caches->size() != blocks.size()) caches->resize(blocks.size());
    const int64_t T = ids.size(1), past = caches && !caches->empty() ? (*caches)[0].seen() : 0;
    Tensor x = model.tok_emb->forward(ids);  // (B, T, d)
    if (model.pos_emb) x = x + model.pos_emb->forward(T, past);
    if (hooks) hooks->check_layers(int64_t(blocks.size()));
    if (capture) {
        for (const int64_t l : capture->layers)
            if (l < 0 || l >= int64_t(blocks.size()))
                throw std::invalid_argument("GatedTransformerLM: capture layer " + std::to_string(l) + " is outside [0, " +
                                            std::to_string(blocks.size()) + ")");
        capture->attention.assign(blocks.size(), {});
        capture->linear.assign(blocks.size(), {});
        capture->hidden.assign(blocks.size(), {});
    }
    for (size_t l = 0; l < blocks.size(); ++l) {
        Tensor block_aux;  // a MoE block's load-balancing loss
        const bool keep = capture && capture->keeps(l);
        const LayerHooks layer_hooks{hooks, int64_t(l)};
        const BlockCapture block_capture =
            keep ? BlockCapture{&capture->attention[l], &capture->linear[l]} : BlockCapture{};
        x = blocks[l]->forward(x, caches ? &(*caches)[l] : nullptr, block_capture, &block_aux,
                               hooks ? &layer_hooks : nullptr);
        if (keep) capture->hidden[l] = x.detach();
        if (block_aux.defined()) aux = aux.defined() ? aux + block_aux : block_aux;
    }
    return x;
}

}  // namespace

LMOutput GatedTransformerLM::forward(const Tensor& ids, const Tensor& targets, std::vector<LayerCache>* caches,
                                     LMCapture* capture, const Hooks* hooks) const {
    Tensor aux;
    LMOutput out;
    out.logits = unembed(run_blocks(*this, ids, caches, capture, hooks, aux));  // (B, T, V)
    if (targets.defined()) {
        out.loss = cross_entropy(out.logits, targets);
        if (aux.defined()) out.loss = out.loss + aux * config_.aux_loss_weight;
    }
    return out;
}

Tensor GatedTransformerLM::unembed(const Tensor& x) const {
    const Tensor normed = norm_f->forward(x);
    return lm_head ? lm_head->forward(normed) : matmul(normed, tok_emb->weight.t());
}

bool LMCapture::keeps(size_t layer) const {
    return layers.empty() || std::find(layers.begin(), layers.end(), int64_t(layer)) != layers.end();
}

void GatedTransformerLM::set_rope_options(const RopeOptions& options) {
    for (auto& block : blocks)
        if (RoPE* rope = block->attn ? block->attn->rope() : block->mla ? block->mla->rope() : nullptr)
            rope->set_options(options);
}

// ---------------------------------------------------------------- sampling

std::vector<int64_t> generate(const GatedTransformerLM& model, const std::vector<int64_t>& prompt,
                              const SampleOptions& options, Generator& gen) {
    if (prompt.empty()) throw std::invalid_argument("generate: the prompt is empty (start it with BOS)");
    if (options.max_new_tokens < 0 || !(options.temperature >= 0 && std::isfinite(options.temperature)) ||
        options.top_k < 0 || options.context < 0)
        throw std::invalid_argument("generate: max_new_tokens " + std::to_string(options.max_new_tokens) +
                                    ", temperature " + std::to_string(options.temperature) + ", top_k " +
                                    std::to_string(options.top_k) + ", context " + std::to_string(options.context) +
                                    ": need counts ≥ 0 and a finite temperature ≥ 0");
    const LMConfig& c = model.config();
    const auto& can_draw = options.can_draw;
    if (!can_draw.empty() && (int64_t(can_draw.size()) != c.vocab_size ||
                              std::find(can_draw.begin(), can_draw.end(), true) == can_draw.end()))
        throw std::invalid_argument("generate: can_draw has " + std::to_string(can_draw.size()) +
                                    " entries for a vocabulary of " + std::to_string(c.vocab_size) +
                                    " and must allow at least one id");
    const auto P = static_cast<int64_t>(prompt.size()), N = options.max_new_tokens;
    // Every token but the last new one is fed back, so it needs a position.
    if (c.positions == PositionEncoding::learned && P + std::max<int64_t>(std::min(N, c.max_len + 1) - 1, 0) > c.max_len)
        throw std::invalid_argument("generate: a prompt of " + std::to_string(P) + " tokens and " + std::to_string(N) +
                                    " new ones need more positions than the " + std::to_string(c.max_len) +
                                    " learned ones of this model; ask for at most " +
                                    std::to_string(std::max<int64_t>(c.max_len - P + 1, 0)) + " tokens");
    // The KV caches grow to P + N positions, or hold at most the context (the prompt, whole,
    // in the first step).
    const int64_t total = N > INT64_MAX - P ? INT64_MAX : P + N;
    check_memory(c, Workload::inference, 1, options.context > 0 ? std::max(P, std::min(total, options.context)) : total);
    NoGradGuard no_grad;
    // A linear layer's state holds all it keeps of the past in fixed memory: the context bounds
    // only the full layers' keys.
    std::vector<LayerCache> caches(model.blocks.size());
    // Each cache is allocated once: every token but the last new one is fed back.
    const int64_t fed = total == INT64_MAX ? total : total - 1;
    for (LayerCache& cache : caches) {
        cache.kv.keep = options.context;
        cache.kv.reserve = options.context > 0 ? std::max(P, std::min(fed, options.context)) : fed;
    }
    std::vector<int64_t> out;
    const Device device = model.parameters().front().device();  // the tokens go where the model is
    Tensor ids = from_vector(prompt, {1, static_cast<int64_t>(prompt.size())}).to(device);
    for (int64_t step = 0; step < options.max_new_tokens; ++step) {
        // Only the last position is drawn from: the prompt's others need no logits (a
        // 512-token prompt's would take 0.3 GB for a vocabulary of 152k).
        Tensor aux;
        const Tensor x = run_blocks(model, ids, &caches, nullptr, nullptr, aux);  // (1, T, d)
        const Tensor logits = model.unembed(x.narrow(1, x.size(1) - 1, 1));        // (1, 1, V)
        std::vector<double> row = logits.reshape({-1}).to_vector<double>();
        for (size_t i = 0; i < can_draw.size(); ++i)
            if (!can_draw[i]) row[i] = -INFINITY;  // weight 0 below, never the largest
        int64_t next = 0;
        if (options.temperature <= 0) {
            next = std::max_element(row.begin(), row.end()) - row.begin();
        } else {
            // Keep the top_k logits, soften by the temperature, draw from the softmax.
            std::vector<double> sorted = row;
            std::sort(sorted.rbegin(), sorted.rend());
            const double cutoff =
                options.top_k > 0 && options.top_k < int64_t(row.size()) ? sorted[options.top_k - 1] : sorted.back();
            double total = 0;
            for (double& r : row) total += (r = r >= cutoff ? std::exp((r - sorted[0]) / options.temperature) : 0);
            // The id where the running sum passes u; where rounding leaves u past the end, the
            // last id with any weight (never one of weight 0).
            double u = gen.uniform() * total;
            int64_t last = 0;
            for (next = 0; next < int64_t(row.size()); ++next) {
                if (row[size_t(next)] <= 0) continue;
                last = next;
                if ((u -= row[size_t(next)]) < 0) break;
            }
            if (next == int64_t(row.size())) next = last;
        }
        out.push_back(next);
        if (options.on_token) options.on_token(next);
        ids = from_vector(std::vector<int64_t>{next}, {1, 1}).to(device);
    }
    return out;
}

}  // namespace gg::nn
