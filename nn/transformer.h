// transformer.h — the pre-norm block and the language model built from it.
//
//   block:  h = x + Attn(RMSNorm(x))           (G4: x + σ(x W_g) ⊙ Attn(RMSNorm(x)))
//           or, in a linear-attention layer of a hybrid, h = x + GatedDeltaNet(RMSNorm(x))
//           y = h + FFN(RMSNorm(h))            FFN = SwiGLU, or a MoE of SwiGLU experts
//   model:  ids → token embedding (+ learned positions, or RoPE inside attention)
//           → blocks → RMSNorm → lm_head → logits; loss = cross-entropy (+ MoE balance loss)
#pragma once
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/mla.h"
#include "nn/gated_deltanet.h"
#include "nn/moe.h"
#include "nn/memory.h"
#include "nn/names.h"

namespace gg::nn {

enum class PositionEncoding { learned, rope };
// Names in configs and on command lines: "rope", "learned", any case.
PositionEncoding parse_position_encoding(const std::string& name);
const char* position_encoding_name(PositionEncoding positions);

// How a language model's weights start:
//   gpt2  — as GPT-2 and Qwen: every weight N(0, σ²), σ = init_std; the projections that
//           write into the residual stream (W_O, the FFN's down projection) N(0, (σ/√(2L))²);
//           norms at 1, gates per their own init option. The default.
//   torch — each Linear as torch.nn.Linear, U(±1/√fan_in); embeddings N(0, 0.02²). With it
//           the attention output starts ~5× larger than the embedding in the residual stream.
enum class LMInit { gpt2, torch };
LMInit parse_lm_init(const std::string& name);  // "gpt2", "torch", any case
const char* lm_init_name(LMInit init);

// What mixes the tokens in a layer: full (softmax-family) attention, with the gate and the
// options of LMConfig::attn, or Gated DeltaNet linear attention (nn/gated_deltanet.h). The
// hybrids of Qwen3-Next and Qwen3.5 put three linear layers before each full one; their
// configs name each layer's type with these names. feed_forward mixes nothing: the block is
// its FFN alone, each position on its own. It is no architecture's layer (no Hugging Face
// config names it): a control that leaves a model's few attention layers all the copying, as
// tutorial 15 needs one whose softmax layer sits where a hybrid's does.
enum class LayerType { full_attention, linear_attention, feed_forward };
inline const Names<LayerType> kLayerTypes{"layer type",
                                          {{"full_attention", LayerType::full_attention},
                                           {"linear_attention", LayerType::linear_attention},
                                           {"feed_forward", LayerType::feed_forward}}};

// The layer types of a hybrid of n_layers written "L:F": L linear-attention layers, then F
// full-attention ones, repeated. 3:1 is Qwen3-Next's and Qwen3.5's (their config's
// full_attention_interval 4: layer i is full when (i + 1) mod 4 is 0, so layers 3, 7, ...) and
// Kimi Linear's. Throws std::invalid_argument naming the ratio unless L, F ≥ 1 are whole numbers
// and L + F divides n_layers.
std::vector<LayerType> hybrid_layer_types(const std::string& ratio, int64_t n_layers);

struct LMConfig {
    int64_t vocab_size = 257;  // 256 bytes + BOS
    int64_t max_len = 128;     // learned positions; also the training context
    int64_t d_model = 64;
    int64_t n_layers = 2;
    AttentionOptions attn;     // d_model is kept equal to the model's
    // One per layer, or empty: every layer full attention. A linear layer's sizes are the
    // linear_* fields below.
    std::vector<LayerType> layer_types;
    PositionEncoding positions = PositionEncoding::rope;
    bool ffn = true;           // false: attention-only blocks (tutorial 08's FFN ablation)
    int64_t d_ff = 0;          // SwiGLU hidden size; 0 picks 8/3·d rounded up to a multiple of 8
    int64_t n_experts = 0;     // > 0: MoE FFN with this many experts
    int64_t top_k = 2;
    double aux_loss_weight = 0.01;
    bool tie_embeddings = false;
    double norm_eps = 1e-6;
    bool zero_centred_norm = false;  // every norm but a linear layer's output norm scales by 1 + weight (RMSNorm)
    // A linear layer's sizes (Qwen3-Next's linear_num_key_heads, ...); 0: attn's heads and
    // head size, as many value heads as key heads, a kernel of 4.
    int64_t linear_k_heads = 0, linear_v_heads = 0, linear_k_head_size = 0, linear_v_head_size = 0,
            linear_conv_kernel = 0;
    LMInit init = LMInit::gpt2;
    double init_std = 0.02;    // σ of the gpt2 init

    int64_t ffn_hidden() const { return d_ff > 0 ? d_ff : (8 * d_model / 3 + 7) / 8 * 8; }
    // Multi-head latent attention's rotary part d_r (nn/mla.h): attn.rope_dim, else half a head
    // of this model's width; 0 with learned positions.
    int64_t latent_rope_dim() const;
    LayerType layer_type(int64_t layer) const {
        return layer_types.empty() ? LayerType::full_attention : layer_types[size_t(layer)];
    }
    GatedDeltaNetOptions linear_attention() const;  // a linear layer's options
    // The JSON of the fields, as the table of settings gives them (nn/config_fields.h).
    std::string to_json() const;
    // Throws naming the bad field: a wrong JSON type, or a value validate() refuses.
    static LMConfig from_json(const std::string& json);
    // Checks every field against its row's range (nn/config_fields.h) and the fields against
    // each other (heads dividing d_model, ...); throws std::invalid_argument naming the field,
    // its value and what it must be. A config read from a file or a command line passes here
    // before any tensor of its size is made.
    void validate() const;
};

// The bounds of the fields' ranges: far beyond any model this library can train, far below
// where sizes overflow or a config alone could ask for terabytes.
struct LMConfigLimits {
    static constexpr int64_t vocab_size = int64_t(1) << 20, max_len = int64_t(1) << 20, d_model = int64_t(1) << 16,
                             n_layers = 1024, d_ff = int64_t(1) << 20, n_experts = 1024, window = int64_t(1) << 30;
};

// What decoding keeps per token, in bytes of `dtype`, over all layers: 2 · h_kv · dk (a key
// and a value per kv head) for standard and grouped-query attention, d_c + d_r (the latent
// and the rotary key, nn/mla.h) with kv_rank; a hybrid's linear layers keep none (their state does not grow).
int64_t kv_cache_bytes_per_token(const LMConfig& config, DType dtype);

// What a layer carries from one decoding step to the next: a full-attention layer its keys and
// values, a linear one its state (the other stays empty), a feed-forward one only the count of
// tokens it has passed, which gives the next tokens their positions.
struct LayerCache {
    KVCache kv;
    DeltaNetCache linear;
    int64_t passed = 0;  // a feed_forward layer's tokens
    int64_t seen() const { return std::max({kv.seen(), linear.seen(), passed}); }  // tokens consumed so far
};

// What a block computed in one forward pass, for analysis: a full-attention layer fills
// attention, a linear one linear.
struct BlockCapture {
    AttentionCapture* attention = nullptr;
    DeltaNetCapture* linear = nullptr;
};

class TransformerBlock : public Module {
public:
    // The block of layer `layer` of the config (its type: LMConfig::layer_type).
    TransformerBlock(const LMConfig& config, int64_t layer = 0);
    // (B, T, d) → (B, T, d); capture receives the attention's probabilities and gates, or the
    // linear layer's decays and state.
    // aux_loss: where a MoE block puts its load-balancing loss (left undefined by dense blocks).
    // hooks: this block's points of nn/hooks.h (a linear-attention block has resid_pre,
    // resid_mid, mlp_out and resid_post; its mixer has no attention points; a feed_forward
    // block's resid_mid is its input).
    Tensor forward(const Tensor& x, LayerCache* cache = nullptr, BlockCapture capture = {},
                   Tensor* aux_loss = nullptr, const LayerHooks* hooks = nullptr) const;
    // Whether the block mixes tokens by softmax attention (attn or mla), so has a map to read.
    bool has_attention() const { return attn || mla; }
    std::shared_ptr<RMSNorm> norm1, norm2;        // norm1: none in a feed_forward block
    std::shared_ptr<GatedAttention> attn;           // one of attn / mla / linear_attn, or none (feed_forward)
    std::shared_ptr<MultiHeadLatentAttention> mla;  // when the config's attn.kv_rank > 0
    std::shared_ptr<GatedDeltaNet> linear_attn;     // a linear_attention layer of a hybrid
    std::shared_ptr<SwiGLU> ffn;  // one of ffn / moe, or neither
    std::shared_ptr<MoE> moe;
};

// GatedAttention + MoE FFN (as in the paper's 15B-A2B models): a TransformerBlock whose
// config has experts.
using GatedAttentionMoEBlock = TransformerBlock;

// What one forward pass of the LM computed, layer by layer, for analysis (analysis/analysis.h).
// Owned by the caller and passed to forward(); costs memory only when passed.
struct LMCapture {
    std::vector<AttentionCapture> attention;  // per full-attention layer: probabilities (B, H, T, T) and gates
    std::vector<DeltaNetCapture> linear;      // per linear-attention layer: decays and last state
    std::vector<Tensor> hidden;               // per layer: (B, T, d) after the block
    // Which layers to keep, set before the pass; empty: all. The others' entries stay
    // undefined. A layer's probabilities take 4·B·H·T² bytes: 67 MB for 16 × 256 tokens of
    // 16 heads, 1.9 GB over Qwen3-1.7B's 28 layers.
    std::vector<int64_t> layers;
    bool keeps(size_t layer) const;
};

struct LMOutput {
    Tensor logits;  // (B, T, V)
    Tensor loss;    // scalar; undefined without targets
};

class GatedTransformerLM : public Module {
public:
    // Validates the config and checks that its weights fit in this machine's memory first.
    // dtype: the parameters' dtype. Each part is converted as soon as it is built, so a
    // bfloat16 model (a real checkpoint about to be loaded) never holds all its weights in
    // float32 at once.
    explicit GatedTransformerLM(const LMConfig& config, DType dtype = DType::f32);
    // ids (B, T) int64; targets (B, T) int64 or undefined. With caches (one per layer),
    // ids are the next positions after what the caches hold.
    // With capture, each layer's attention probabilities, gates and output are kept in it.
    // With hooks, every block runs them at its points (nn/hooks.h; run_with_hooks in
    // nn/analysis/activation_cache.h).
    LMOutput forward(const Tensor& ids, const Tensor& targets = Tensor(), std::vector<LayerCache>* caches = nullptr,
                     LMCapture* capture = nullptr, const Hooks* hooks = nullptr) const;
    const LMConfig& config() const { return config_; }
    // The final RMSNorm and the unembedding: the last block's output (…, d) → logits (…, V).
    // The logit lens (nn/analysis/logit_lens.h) applies it to every block's.
    Tensor unembed(const Tensor& x) const;

    // Switch every layer's RoPE scaling (long-context evaluation).
    void set_rope_options(const RopeOptions& options);

    std::shared_ptr<Embedding> tok_emb;
    std::shared_ptr<LearnedPositionalEmbedding> pos_emb;
    std::vector<std::shared_ptr<TransformerBlock>> blocks;
    std::shared_ptr<RMSNorm> norm_f;
    std::shared_ptr<Linear> lm_head;  // shares tok_emb's weight when tied

private:
    LMConfig config_;
};

struct SampleOptions {
    int64_t max_new_tokens = 100;
    double temperature = 1.0;  // 0: greedy; finite
    int64_t top_k = 0;         // 0: all tokens
    // Each new token attends to at most this many, itself included (KVCache::keep): time
    // per token and memory stay fixed however many are drawn. 0: to every token so far.
    int64_t context = 0;
    // Per id, whether it may be drawn (greedy, top-k or not): false for the rows of a real
    // checkpoint's embedding that pad it past its tokenizer (nn/io/model.h decodable_ids).
    // Empty: every id.
    std::vector<bool> can_draw{};
    // Called with each new id as soon as it is drawn, before the next forward pass (a printer
    // that streams the text, or a clock); none: nothing is called.
    std::function<void(int64_t)> on_token{};
};

// Continues `prompt` token by token with a KV cache; returns only the new tokens, exactly
// max_new_tokens of them. With learned positions the prompt and the new tokens (all but
// the last, which is never fed back) must fit in max_len, or it throws before starting.
// The prompt goes in whole, in one forward pass; options.context bounds what comes after.
std::vector<int64_t> generate(const GatedTransformerLM& model, const std::vector<int64_t>& prompt,
                              const SampleOptions& options, Generator& gen = default_generator());

}  // namespace gg::nn
