// hf.h — Hugging Face checkpoints in and out: Qwen3 models, with or without the paper's gate, and
// (in only) the dense hybrids of Qwen3-Next and Qwen3.5.
//
// A checkpoint folder holds config.json (the architecture and its sizes) and the weights, in
// model.safetensors or sharded over several files that model.safetensors.index.json lists.
// Qwen3 is the block of transformer.h with a head size of its own, GQA, QK-norm before RoPE,
// RoPE with θ = 1e6 and no bias anywhere:
//   ours                       HF
//   tok_emb.weight             model.embed_tokens.weight
//   layers.N.norm1.weight      model.layers.N.input_layernorm.weight
//   layers.N.attn.w_q / w_g    model.layers.N.self_attn.q_proj.weight (the gate folded in)
//   layers.N.attn.w_k/w_v/w_o  model.layers.N.self_attn.k_proj / v_proj / o_proj.weight
//   layers.N.attn.q/k_norm     model.layers.N.self_attn.q_norm / k_norm.weight
//   layers.N.norm2.weight      model.layers.N.post_attention_layernorm.weight
//   layers.N.ffn.w1 / w2 / w3  model.layers.N.mlp.gate_proj / up_proj / down_proj.weight
//   norm_f.weight              model.norm.weight
//   lm_head.weight             lm_head.weight (absent when tie_word_embeddings)
//
// The gate (the paper's G1, σ(x W_g) ⊙ head output) as the authors' modeling_qwen3.py stores it
// (config.json: headwise_attn_output_gate or elementwise_attn_output_gate): q_proj gains the
// gate's rows, and its output, seen as (B, T, n_kv, ·), holds per KV group first the queries of
// the group's G = h / n_kv heads, then their G gates (head-wise: 1 value per head; element-wise:
// dk per head). Transformers' Qwen3-Next interleaves them per head instead, [q_h | g_h]. Both
// are the same numbers in other rows, so reading one as the other gives a model that runs and
// is wrong: the layout is an explicit choice (GateLayout), tested both ways.
//
// The hybrids of Qwen3-Next and Qwen3.5 (their dense text models; tests/reference/hf_hybrid.py
// is the reference) are this block with, per layer_types (or every full_attention_interval-th
// layer full, 4 when neither is given), Gated DeltaNet in the other layers:
//   layers.N.linear_attn.*     model.layers.N.linear_attn.*, as nn/gated_deltanet.h maps them:
//                              Qwen3.5's in_proj_qkv / in_proj_z / in_proj_b / in_proj_a, or
//                              Qwen3-Next's in_proj_qkvz / in_proj_ba joined per key head
// and in the full layers the gate always there, element-wise and interleaved ([q_h | g_h],
// config.json's attn_output_gate), partial rotary (partial_rotary_factor, at the top or in
// rope_parameters; 0.25 when absent), and every norm but the linear layers' output norm
// zero-centred (1 + weight, LMConfig::zero_centred_norm). Sizes absent from config.json take
// transformers' defaults (head_dim 256, linear_num_key_heads 16, ...). Qwen3.5's multimodal
// wrapper (Qwen3_5ForConditionalGeneration) keeps the text model's fields in text_config and
// its weights under model.language_model. instead of model.; its vision tower (model.visual.*)
// is not read, nor the multi-token-prediction head (mtp.*) either family may hold. Its RoPE is
// sectioned by axis (mrope_section); text alone puts a token at one position on every axis,
// which is plain RoPE. A Qwen3-Next config with mixture-of-experts layers (num_experts > 0,
// the default, on layers outside mlp_only_layers) is refused, as are Qwen3.5's MoE models.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "nn/transformer.h"

namespace gg::nn::hf {

enum class GateLayout {
    grouped,      // the authors' Qwen3: per KV group, its heads' queries, then their gates
    interleaved,  // Qwen3-Next: per head, its query then its gate
};

// The families of models read here: Qwen3 (the block above), and the hybrids of Qwen3-Next
// and Qwen3.5, which differ in how their linear layers' projections are stored (below).
enum class Family { qwen3, qwen3_next, qwen3_5 };

// What config.json says, in the library's terms.
struct Config {
    LMConfig config;
    GateLayout gate_layout = GateLayout::grouped;
    DType dtype = DType::f32;  // of the weights in the files (torch_dtype, checked against them)
    Family family = Family::qwen3;
    std::string prefix = "model.";  // of the text model's weights ("model.language_model." in a wrapper)
};

// config.json's text → the model it describes. Throws std::invalid_argument with one line naming
// the field for an architecture other than these, an activation other than SiLU, biases, a
// sliding window, a rope_scaling it cannot map, layer types that are neither or disagree with
// full_attention_interval, experts, or sizes LMConfig::validate() refuses.
//   rope_scaling: linear → position interpolation; yarn → YaRN (factor, original length, β);
//   dynamic → none, which is exact up to max_position_embeddings (HF rescales only past it).
// A field "gatedgrad_gate_layout": "interleaved" selects that layout in a Qwen3 folder (for
// tests and Qwen3-Next style exports); without it the authors' grouped layout is read. The
// hybrids hold the interleaved one only: "grouped" there is refused.
Config parse_config(const std::string& config_json);

struct LoadOptions {
    // The parameters' dtype: empty keeps the file's (BF16 stays BF16 in memory: run it under
    // Autocast(bf16)); f32 widens a BF16 checkpoint (exact, twice the memory).
    std::optional<DType> dtype{};
    std::optional<GateLayout> gate_layout{};  // overrides config.json's
    std::optional<uint64_t> memory{};         // the bytes the model may take; empty: what this process may use
};

// Reads DIR/config.json and the weights into a new model. Before anything is allocated, every
// tensor the config implies is checked to be in the files with its shape and one dtype (and
// no other tensor to be there), and the model to fit in `memory`; then each is read straight
// into the model's memory and checked for finite values. config.json (at most 1 MiB) and
// model.safetensors.index.json (100 MB) are read only when they are regular files; the index
// may name only files of DIR, and a tensor in two of them is refused. Errors are
// std::runtime_error with one line "hf: DIR: ..." naming the file, tensor or field.
std::shared_ptr<GatedTransformerLM> load_folder(const std::string& dir, const LoadOptions& options = {});

struct SaveOptions {
    DType dtype = DType::f32;  // of the weights in model.safetensors: f32 or bf16
    GateLayout gate_layout = GateLayout::grouped;
    bool replace = false;  // when DIR holds anything: replace it (what it holds is removed) or refuse
};

// Writes `model` as a new folder DIR in the same layout: config.json (Qwen3ForCausalLM, with the
// authors' gate flags when gated) and model.safetensors; for a byte-level model (vocab 257,
// BOS 256) also tokenizer.json: the byte tokenizer of train/data.h as a byte-level BPE with no
// merges whose post-processor puts BOS first. Returns the names of the files written. The
// folder is filled beside DIR and renamed into place (nn/files.h: write_folder_atomically), so
// DIR holds the whole export or what it held before, and nothing else. Throws
// std::invalid_argument naming what the Qwen3 layout cannot hold (learned positions, MoE, a
// gate other than G1 with σ, NTK scaling, a feed_forward layer...), std::runtime_error when DIR holds anything and
// `replace` is not set, or on an I/O error.
std::vector<std::string> save_folder(const GatedTransformerLM& model, const std::string& dir, const SaveOptions& options = {});

// q_proj's rows ↔ W_Q's and W_g's, for h heads of dk over n_kv groups, gate width w (1 or dk).
// q_proj (h·dk + h·w, d) → {W_Q (h·dk, d), W_g (h·w, d)}, and back.
std::pair<Tensor, Tensor> split_q_proj(const Tensor& q_proj, int64_t heads, int64_t kv_heads, int64_t head_size,
                                       int64_t gate_width, GateLayout layout);
Tensor join_q_proj(const Tensor& w_q, const Tensor& w_g, int64_t heads, int64_t kv_heads, int64_t head_size,
                   int64_t gate_width, GateLayout layout);

}  // namespace gg::nn::hf
