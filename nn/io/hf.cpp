// hf.cpp — Qwen3 checkpoints (config.json + safetensors) to and from GatedTransformerLM.
#include "nn/io/hf.h"

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <utility>

#include "autograd/engine.h"
#include "nn/files.h"
#include "nn/io/checkpoint.h"
#include "nn/io/safetensors.h"
#include "nn/text/byte_tokenizer.h"
#include "nn/text/bytes.h"
#include "nn/untrusted.h"

namespace gg::nn::hf {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void config_error(const std::string& why) { throw std::invalid_argument("config.json: " + why); }

// A field of config.json: its value when present and of the JSON type T reads as, else
// `fallback`; a present field of another type is an error naming it.
template <class T>
T field(const json& j, const char* name, T fallback) {
    const auto it = j.find(name);
    if (it == j.end() || it->is_null()) return fallback;
    const bool ok = std::is_same_v<T, bool>           ? it->is_boolean()
                    : std::is_same_v<T, std::string>  ? it->is_string()
                    : std::is_floating_point_v<T>     ? it->is_number()
                                                      : it->is_number_integer();
    if (!ok) config_error(std::string(name) + " is a JSON " + it->type_name() + ", not the type it needs");
    return it->get<T>();
}

// The fields every family reads alike: sizes, the norm's ε, tying, RoPE's base and scaling,
// the weights' dtype. `top` is the file's outer object (a multimodal wrapper's, where j is its
// text_config), whose tie_word_embeddings and torch_dtype count when j has none.
void read_common(const json& j, const json& top, LMConfig& c, DType& dtype) {
    if (const std::string act = field<std::string>(j, "hidden_act", "silu"); act != "silu")
        config_error("hidden_act '" + printable(act) + "' is not supported (silu)");
    if (field<bool>(j, "attention_bias", false) || field<bool>(j, "qkv_bias", false))
        config_error("attention_bias: projections with biases are not supported");
    if (field<bool>(j, "use_sliding_window", false)) config_error("use_sliding_window is not supported");
    c.vocab_size = field<int64_t>(j, "vocab_size", 0);
    c.d_model = field<int64_t>(j, "hidden_size", 0);
    c.d_ff = field<int64_t>(j, "intermediate_size", 0);
    c.n_layers = field<int64_t>(j, "num_hidden_layers", 0);
    c.max_len = field<int64_t>(j, "max_position_embeddings", 4096);
    c.norm_eps = field<double>(j, "rms_norm_eps", 1e-6);
    const bool tied_outside = field<bool>(top, "tie_word_embeddings", false);
    c.tie_embeddings = field<bool>(j, "tie_word_embeddings", tied_outside);
    if (&top != &j && top.contains("tie_word_embeddings") && c.tie_embeddings != tied_outside)
        config_error("tie_word_embeddings differs between the file and its text_config");
    c.positions = PositionEncoding::rope;
    c.init = LMInit::torch;  // every weight comes from the file: skip GPT-2's second draw
    AttentionOptions& a = c.attn;
    a.n_heads = field<int64_t>(j, "num_attention_heads", 0);
    a.n_kv_heads = field<int64_t>(j, "num_key_value_heads", a.n_heads);
    if (a.n_heads <= 0 || c.d_model <= 0 || c.d_ff <= 0 || c.vocab_size <= 0)
        config_error("hidden_size, intermediate_size, num_attention_heads and vocab_size must be positive integers "
                     "(hidden_size " + std::to_string(c.d_model) + ", intermediate_size " + std::to_string(c.d_ff) +
                     ", num_attention_heads " + std::to_string(a.n_heads) + ", vocab_size " +
                     std::to_string(c.vocab_size) + ")");
    a.head_size = field<int64_t>(j, "head_dim", c.d_model / a.n_heads);
    // RoPE: rope_theta and rope_scaling at the top, or (newer files) one rope_parameters object.
    const auto params = j.find("rope_parameters");
    const bool has_params = params != j.end() && !params->is_null();
    if (has_params && !params->is_object())
        config_error(std::string("rope_parameters is a JSON ") + params->type_name() + ", not an object");
    a.rope_options.base = has_params ? field<double>(*params, "rope_theta", field<double>(j, "rope_theta", 10000.0))
                                     : field<double>(j, "rope_theta", 10000.0);
    const auto s = has_params ? params : j.find("rope_scaling");
    if (s != j.end() && !s->is_null()) {
        const char* key = has_params ? "rope_parameters" : "rope_scaling";
        if (!s->is_object()) config_error(std::string(key) + " is a JSON " + s->type_name() + ", not an object");
        const std::string type = field<std::string>(*s, "rope_type", field<std::string>(*s, "type", "default"));
        RopeOptions& r = a.rope_options;
        if (type == "linear") {
            r.scaling = RopeScaling::interpolation;
            r.factor = field<double>(*s, "factor", 1.0);
        } else if (type == "yarn") {
            r.scaling = RopeScaling::yarn;
            r.factor = field<double>(*s, "factor", 1.0);
            r.original_length = field<int64_t>(*s, "original_max_position_embeddings", c.max_len);
            r.yarn_beta_fast = field<double>(*s, "beta_fast", 32.0);
            r.yarn_beta_slow = field<double>(*s, "beta_slow", 1.0);
            if (s->contains("attention_factor") && !(*s)["attention_factor"].is_null())
                config_error(std::string(key) + ": YaRN's attention_factor is fixed at 0.1 ln(factor) + 1 here");
        } else if (type != "default" && type != "dynamic") {
            config_error(std::string(key) + " type '" + printable(type) + "' is not supported (linear, yarn, dynamic)");
        }
    }
    const std::string outer_dtype = field<std::string>(top, "torch_dtype", field<std::string>(top, "dtype", "float32"));
    const std::string torch_dtype = field<std::string>(j, "torch_dtype", field<std::string>(j, "dtype", outer_dtype));
    if (torch_dtype != "float32" && torch_dtype != "bfloat16")
        config_error("torch_dtype '" + printable(torch_dtype) + "' is not supported (float32, bfloat16)");
    dtype = torch_dtype == "bfloat16" ? DType::bf16 : DType::f32;
}

// Qwen3: the paper authors' gate flags, and the layout of the gate in q_proj.
void read_qwen3(const json& j, Config& out) {
    AttentionOptions& a = out.config.attn;
    a.qk_norm = field<bool>(j, "use_qk_norm", true);  // the authors' flag; transformers' Qwen3 always has it
    const bool headwise = field<bool>(j, "headwise_attn_output_gate", false),
               elementwise = field<bool>(j, "elementwise_attn_output_gate", false);
    if (headwise && elementwise)
        config_error("headwise_attn_output_gate and elementwise_attn_output_gate are both true; a model has one gate");
    a.gate = headwise || elementwise ? GatePosition::sdpa_output : GatePosition::none;
    a.gate_fn = GateFunction::sigmoid;
    a.sharing = headwise ? GateSharing::headwise : GateSharing::elementwise;
    const std::string layout = field<std::string>(j, "gatedgrad_gate_layout", "grouped");
    if (layout != "grouped" && layout != "interleaved")
        config_error("gatedgrad_gate_layout '" + printable(layout) + "' is not grouped or interleaved");
    out.gate_layout = layout == "interleaved" ? GateLayout::interleaved : GateLayout::grouped;
    if (out.gate_layout == GateLayout::interleaved && headwise)
        config_error("the interleaved layout holds an element-wise gate, not a head-wise one");
}

// Qwen3-Next and Qwen3.5: which layers are linear, the linear layers' sizes, partial rotary, the
// gate interleaved in q_proj, zero-centred norms; transformers' defaults where a field is absent.
void read_hybrid(const json& j, Config& out) {
    LMConfig& c = out.config;
    AttentionOptions& a = c.attn;
    a.head_size = field<int64_t>(j, "head_dim", 256);
    a.qk_norm = true;
    c.zero_centred_norm = true;
    a.gate = field<bool>(j, "attn_output_gate", true) ? GatePosition::sdpa_output : GatePosition::none;
    a.gate_fn = GateFunction::sigmoid;
    a.sharing = GateSharing::elementwise;
    if (const std::string layout = field<std::string>(j, "gatedgrad_gate_layout", "interleaved"); layout != "interleaved")
        config_error("gatedgrad_gate_layout '" + printable(layout) +
                     "': Qwen3-Next and Qwen3.5 hold each head's query and gate side by side (interleaved)");
    out.gate_layout = GateLayout::interleaved;

    const std::pair<const char*, int64_t*> sizes[] = {
        {"linear_num_key_heads", &c.linear_k_heads}, {"linear_num_value_heads", &c.linear_v_heads},
        {"linear_key_head_dim", &c.linear_k_head_size}, {"linear_value_head_dim", &c.linear_v_head_size},
        {"linear_conv_kernel_dim", &c.linear_conv_kernel}};
    const int64_t defaults[] = {16, 32, 128, 128, 4};
    for (size_t i = 0; i < std::size(sizes); ++i)
        if ((*sizes[i].second = field<int64_t>(j, sizes[i].first, defaults[i])) < 1)
            config_error(std::string(sizes[i].first) + " " + std::to_string(*sizes[i].second) + " is not a positive integer");
    if (c.linear_v_heads % c.linear_k_heads != 0)
        config_error("linear_num_value_heads " + std::to_string(c.linear_v_heads) +
                     " is not a multiple of linear_num_key_heads " + std::to_string(c.linear_k_heads));

    // partial_rotary_factor at the top (Qwen3-Next) or in rope_parameters (Qwen3.5), 0.25 if neither.
    const double top = field<double>(j, "partial_rotary_factor", 0.25);
    const auto params = j.find("rope_parameters");
    const double partial = params != j.end() && params->is_object() ? field<double>(*params, "partial_rotary_factor", top) : top;
    if (partial != top && j.contains("partial_rotary_factor"))
        config_error("partial_rotary_factor is " + std::to_string(top) + " at the top and " + std::to_string(partial) +
                     " in rope_parameters");
    a.rope_options.partial = partial;

    // layer_types, or every full_attention_interval-th layer full (transformers' rule).
    if (c.n_layers < 0) config_error("num_hidden_layers " + std::to_string(c.n_layers) + " is negative");
    const int64_t interval = field<int64_t>(j, "full_attention_interval", 4);
    if (interval < 1) config_error("full_attention_interval " + std::to_string(interval) + " is not a positive integer");
    std::vector<LayerType> by_interval;
    for (int64_t l = 0; l < std::min(c.n_layers, LMConfigLimits::n_layers + 1); ++l)
        by_interval.push_back((l + 1) % interval == 0 ? LayerType::full_attention : LayerType::linear_attention);
    c.layer_types = by_interval;
    if (const auto types = j.find("layer_types"); types != j.end() && !types->is_null()) {
        if (!types->is_array() || int64_t(types->size()) != c.n_layers)
            config_error("layer_types is not a list of num_hidden_layers (" + std::to_string(c.n_layers) + ") names");
        for (size_t l = 0; l < types->size(); ++l) {
            const json& t = (*types)[l];
            const std::string name = t.is_string() ? t.get<std::string>() : t.dump();
            if (name != "full_attention" && name != "linear_attention")
                config_error("layer_types[" + std::to_string(l) + "] '" + printable(name) +
                             "' is not full_attention or linear_attention");
            c.layer_types[l] = name == "full_attention" ? LayerType::full_attention : LayerType::linear_attention;
        }
        if (j.contains("full_attention_interval") && c.layer_types != by_interval)
            config_error("layer_types and full_attention_interval " + std::to_string(interval) + " name other layers");
    }

    // Qwen3-Next's mixture of experts: layer l is one unless listed in mlp_only_layers, when
    // num_experts > 0 and (l + 1) is a multiple of decoder_sparse_step.
    const int64_t experts = field<int64_t>(j, "num_experts", out.family == Family::qwen3_next ? 512 : 0);
    const int64_t step = field<int64_t>(j, "decoder_sparse_step", 1);
    std::set<int64_t> dense;
    if (const auto m = j.find("mlp_only_layers"); m != j.end() && m->is_array())
        for (const json& l : *m)
            if (l.is_number_integer()) dense.insert(l.get<int64_t>());
    for (int64_t l = 0; experts > 0 && step > 0 && l < int64_t(c.layer_types.size()); ++l)
        if (!dense.count(l) && (l + 1) % step == 0)
            config_error("num_experts " + std::to_string(experts) + ": layer " + std::to_string(l) +
                         " is a mixture of experts, which is not supported (dense models only: num_experts 0, "
                         "or every layer in mlp_only_layers)");
}

}  // namespace

Config parse_config(const std::string& text) {
    json j;
    try {
        j = parse_untrusted_json(text);
    } catch (const std::invalid_argument& e) {
        config_error(e.what());
    }
    if (!j.is_object()) config_error(std::string("is a JSON ") + j.type_name() + ", not an object");
    std::string architecture = field<std::string>(j, "model_type", "");
    if (const auto a = j.find("architectures"); a != j.end() && a->is_array() && !a->empty() && (*a)[0].is_string())
        architecture = (*a)[0].get<std::string>();
    Config out;
    const json* text_model = &j;
    if (architecture == "Qwen3ForCausalLM" || architecture == "qwen3") {
        out.family = Family::qwen3;
    } else if (architecture == "Qwen3NextForCausalLM" || architecture == "qwen3_next") {
        out.family = Family::qwen3_next;
    } else if (architecture == "Qwen3_5ForCausalLM" || architecture == "qwen3_5_text") {
        out.family = Family::qwen3_5;
    } else if (architecture == "Qwen3_5ForConditionalGeneration" || architecture == "qwen3_5") {
        // The multimodal wrapper: the text model's fields in text_config, its weights under
        // model.language_model., beside the vision tower's (model.visual.), which are not read.
        out.family = Family::qwen3_5;
        out.prefix = "model.language_model.";
        const auto t = j.find("text_config");
        if (t == j.end() || !t->is_object()) config_error("text_config: the multimodal wrapper has no text_config object");
        text_model = &*t;
    } else {
        config_error("architecture '" + printable(architecture) +
                     "' is not supported (Qwen3ForCausalLM, with or without the authors' output gate; the dense "
                     "text models of Qwen3NextForCausalLM, Qwen3_5ForCausalLM and Qwen3_5ForConditionalGeneration)");
    }
    read_common(*text_model, j, out.config, out.dtype);
    if (out.family == Family::qwen3) read_qwen3(j, out);
    else read_hybrid(*text_model, out);
    try {
        out.config.validate();
    } catch (const std::invalid_argument& e) {
        config_error(e.what());
    }
    return out;
}

// ---------------------------------------------------------------- the gate inside q_proj

namespace {

// Rows [offset, offset + n) of each of `groups` equal groups of rows of a (rows, d) weight,
// joined: (groups·n, d). How a joined projection is taken apart.
Tensor group_rows(const Tensor& t, int64_t groups, int64_t offset, int64_t n) {
    const int64_t d = t.size(1);
    return t.view({groups, t.size(0) / groups, d}).narrow(1, offset, n).reshape({groups * n, d});
}

}  // namespace

std::pair<Tensor, Tensor> split_q_proj(const Tensor& q_proj, int64_t H, int64_t Hkv, int64_t dk, int64_t w,
                                       GateLayout layout) {
    // grouped: Hkv groups, the queries of its G heads first; interleaved: H groups, [q_h | g_h].
    const int64_t groups = layout == GateLayout::grouped ? Hkv : H, per = H / groups;
    return {group_rows(q_proj, groups, 0, per * dk), group_rows(q_proj, groups, per * dk, per * w)};
}

Tensor join_q_proj(const Tensor& w_q, const Tensor& w_g, int64_t H, int64_t Hkv, int64_t dk, int64_t w,
                   GateLayout layout) {
    const int64_t G = H / Hkv, d = w_q.size(1);
    const int64_t parts = layout == GateLayout::grouped ? Hkv : H, per = layout == GateLayout::grouped ? G : 1;
    return cat({w_q.reshape({parts, per * dk, d}), w_g.reshape({parts, per * w, d})}, 1).reshape({H * (dk + w), d});
}

// ---------------------------------------------------------------- names

namespace {

// Our name → HF's, for every tensor stored whole under a name of its own (not the gate, which
// rides in q_proj, nor the parts of a linear layer's joined projections); `prefix` is the text
// model's (Config::prefix).
std::string hf_name(const std::string& ours, const std::string& prefix = "model.") {
    static const std::pair<const char*, const char*> kLayer[] = {
        {"norm1.weight", "input_layernorm.weight"},       {"norm2.weight", "post_attention_layernorm.weight"},
        {"attn.w_q.weight", "self_attn.q_proj.weight"},   {"attn.w_k.weight", "self_attn.k_proj.weight"},
        {"attn.w_v.weight", "self_attn.v_proj.weight"},   {"attn.w_o.weight", "self_attn.o_proj.weight"},
        {"attn.q_norm.weight", "self_attn.q_norm.weight"}, {"attn.k_norm.weight", "self_attn.k_norm.weight"},
        {"ffn.w1.weight", "mlp.gate_proj.weight"},        {"ffn.w2.weight", "mlp.up_proj.weight"},
        {"ffn.w3.weight", "mlp.down_proj.weight"},        {"linear_attn.w_o.weight", "linear_attn.out_proj.weight"},
        {"linear_attn.dt_bias", "linear_attn.dt_bias"},   {"linear_attn.A_log", "linear_attn.A_log"},
        {"linear_attn.norm.weight", "linear_attn.norm.weight"}};
    if (ours == "tok_emb.weight") return prefix + "embed_tokens.weight";
    if (ours == "norm_f.weight") return prefix + "norm.weight";
    if (ours == "lm_head.weight") return "lm_head.weight";
    if (ours.starts_with("layers.")) {
        const size_t dot = ours.find('.', 7);
        const std::string rest = ours.substr(dot + 1);
        for (const auto& [a, b] : kLayer)
            if (rest == a) return prefix + ours.substr(0, dot + 1) + b;
    }
    return "";
}

// Sizes past which a file of a model folder is refused before it is read, so that no file
// can make the loader read or parse for long: far above any real one.
//   config.json: a few dozen fields, about 1 KB (our fixtures' are 0.9 KB);
//   the index: one line of about 100 bytes per tensor; the limit of a safetensors header
//   (100 MB, the reference implementation's), which lists the same names with more per name.
constexpr uint64_t kMaxConfigBytes = uint64_t(1) << 20;
constexpr uint64_t kMaxIndexBytes = 100'000'000;
const char* const kIndex = "model.safetensors.index.json";

// The weights: every tensor of the folder's safetensors files by name, each file opened
// (and its header read) once. With an index, the files it names, each a file of the folder.
struct Shards {
    std::vector<std::unique_ptr<SafetensorsReader>> files;
    std::map<std::string, const SafetensorsReader*> by_tensor;  // HF name → its file
};

// A name the index may give a shard: a file of the folder itself, never a path out of it
// ("../x", "/etc/x", "sub/x") nor the folder itself, and one that every message can quote as
// it is (no control characters, such as a newline, nor bytes that are not UTF-8).
bool plain_file_name(const std::string& name) {
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
           printable(name, name.size()) == name;
}

// The files the index names, each once, checked to hold the tensors it places in them.
std::vector<std::unique_ptr<SafetensorsReader>> open_indexed(const fs::path& dir) {
    json j;
    try {
        j = parse_untrusted_json(read_file((dir / kIndex).string(), kMaxIndexBytes));
    } catch (const std::invalid_argument& e) {
        throw std::runtime_error(std::string(kIndex) + ": " + e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
        throw std::runtime_error(std::string(kIndex) + ": no weight_map object");
    std::vector<std::unique_ptr<SafetensorsReader>> files;
    std::map<std::string, const SafetensorsReader*> by_file;
    for (const auto& [name, file] : j["weight_map"].items()) {
        if (!file.is_string() || !plain_file_name(file.get<std::string>()))
            throw std::runtime_error(std::string(kIndex) + ": weight_map['" + printable(name) +
                                     "'] is not the name of a file in the folder");
        const std::string& shard = file.get_ref<const std::string&>();
        const SafetensorsReader*& reader = by_file[shard];
        if (!reader) reader = files.emplace_back(std::make_unique<SafetensorsReader>((dir / shard).string())).get();
        if (!reader->find(name))
            throw std::runtime_error(printable(shard) + " holds no tensor '" + printable(name) + "', which " + kIndex +
                                     " places there");
    }
    return files;
}

Shards open_shards(const fs::path& dir) {
    Shards out;
    std::error_code ec;
    if (fs::exists(dir / kIndex, ec)) out.files = open_indexed(dir);
    else if (fs::exists(dir / "model.safetensors", ec))
        out.files.push_back(std::make_unique<SafetensorsReader>((dir / "model.safetensors").string()));
    else throw std::runtime_error(std::string("neither model.safetensors nor ") + kIndex + " is there");
    // A tensor in two files would be read from whichever came first: refused, whatever the
    // index says.
    for (const auto& file : out.files)
        for (const SafetensorsEntry& e : file->entries())
            if (const auto [it, added] = out.by_tensor.emplace(e.name, file.get()); !added) {
                std::string a = fs::path(it->second->path()).filename().string(), b = fs::path(file->path()).filename();
                if (b < a) std::swap(a, b);
                throw std::runtime_error("tensor '" + printable(e.name) + "' is in two files, " + a + " and " + b);
            }
    return out;
}

DType from_safetensors(const std::string& dtype, const std::string& name) {
    if (dtype == "F32") return DType::f32;
    if (dtype == "BF16") return DType::bf16;
    if (dtype == "F64") return DType::f64;
    throw std::runtime_error("tensor '" + printable(name) + "' is " + dtype + ", not F32, BF16 or F64");
}

// Every tensor a model of `parsed` has, under HF's names, with its shape; w is the gate's width
// per head in q_proj (0: no gate, 1: head-wise, dk: element-wise).
std::vector<std::pair<std::string, Shape>> hf_tensors(const Config& parsed, int64_t w) {
    const LMConfig& c = parsed.config;
    const AttentionOptions& a = c.attn;
    const int64_t d = c.d_model, H = a.n_heads, Hkv = a.kv_heads(), dk = a.head_dim(), ff = c.ffn_hidden();
    const GatedDeltaNetOptions o = c.linear_attention();
    const int64_t Hk = o.n_k_heads, Hv = o.v_heads(), lk = o.k_dim(), lv = o.v_dim();
    std::vector<std::pair<std::string, Shape>> out = {{parsed.prefix + "embed_tokens.weight", {c.vocab_size, d}}};
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string p = parsed.prefix + "layers." + std::to_string(l) + ".";
        out.insert(out.end(), {{p + "input_layernorm.weight", {d}},
                               {p + "post_attention_layernorm.weight", {d}},
                               {p + "mlp.gate_proj.weight", {ff, d}},
                               {p + "mlp.up_proj.weight", {ff, d}},
                               {p + "mlp.down_proj.weight", {d, ff}}});
        if (c.layer_type(l) == LayerType::linear_attention) {
            const std::string q = p + "linear_attn.";
            if (parsed.family == Family::qwen3_next)
                out.insert(out.end(), {{q + "in_proj_qkvz.weight", {2 * Hk * lk + 2 * Hv * lv, d}},
                                       {q + "in_proj_ba.weight", {2 * Hv, d}}});
            else
                out.insert(out.end(), {{q + "in_proj_qkv.weight", {2 * Hk * lk + Hv * lv, d}},
                                       {q + "in_proj_z.weight", {Hv * lv, d}},
                                       {q + "in_proj_b.weight", {Hv, d}},
                                       {q + "in_proj_a.weight", {Hv, d}}});
            out.insert(out.end(), {{q + "conv1d.weight", {o.conv_channels(), 1, o.conv_kernel}},
                                   {q + "dt_bias", {Hv}},
                                   {q + "A_log", {Hv}},
                                   {q + "norm.weight", {lv}},
                                   {q + "out_proj.weight", {d, Hv * lv}}});
            continue;
        }
        out.insert(out.end(), {{p + "self_attn.q_proj.weight", {H * (dk + w), d}},
                               {p + "self_attn.k_proj.weight", {Hkv * dk, d}},
                               {p + "self_attn.v_proj.weight", {Hkv * dk, d}},
                               {p + "self_attn.o_proj.weight", {d, H * dk}}});
        if (a.qk_norm) out.insert(out.end(), {{p + "self_attn.q_norm.weight", {dk}}, {p + "self_attn.k_norm.weight", {dk}}});
    }
    out.push_back({parsed.prefix + "norm.weight", {d}});
    if (!c.tie_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, d}});
    return out;
}

const char* family_name(Family family) {
    return family == Family::qwen3 ? "Qwen3" : family == Family::qwen3_next ? "Qwen3-Next" : "Qwen3.5";
}

// Tensors a folder may hold beside the text model, which are not read: RoPE's inv_freq tables
// (older checkpoints), and in the hybrids' folders the multi-token-prediction head (mtp.) and,
// in Qwen3.5's multimodal wrapper, the vision tower (model.visual.).
bool unread(const std::string& name, const Config& parsed) {
    return name.ends_with("rotary_emb.inv_freq") || (parsed.family != Family::qwen3 && name.starts_with("mtp.")) ||
           (parsed.prefix == "model.language_model." && name.starts_with("model.visual."));
}

// The files against config.json, before a byte is allocated for the model: every tensor it
// implies there with its shape, all of one dtype (returned), and no other tensor. The
// headers were checked against the files' sizes when they were opened, so the bytes are there.
DType check_against_config(const Shards& shards, const Config& parsed, int64_t w) {
    const LMConfig& c = parsed.config;
    const auto wanted = hf_tensors(parsed, w);
    std::optional<DType> dtype;
    for (const auto& [name, shape] : wanted) {
        const auto it = shards.by_tensor.find(name);
        if (it == shards.by_tensor.end()) throw std::runtime_error("tensor '" + name + "' is missing");
        const SafetensorsEntry& e = *it->second->find(name);
        if (e.shape != shape)
            throw std::runtime_error("tensor '" + name + "' has shape " + shape_str(e.shape) + " but config.json needs " +
                                     shape_str(shape));
        const DType t = from_safetensors(e.dtype, name);
        if (dtype && t != *dtype)
            throw std::runtime_error("tensor '" + name + "' is " + dtype_name(t) + " but the others are " +
                                     dtype_name(*dtype));
        dtype = t;
    }
    // Tied checkpoints may keep lm_head.weight anyway.
    std::set<std::string> known;
    for (const auto& [name, shape] : wanted) known.insert(name);
    for (const auto& [name, file] : shards.by_tensor)
        if (!known.count(name) && !(c.tie_embeddings && name == "lm_head.weight") && !unread(name, parsed))
            throw std::runtime_error("tensor '" + printable(name) + "' is not part of a " + family_name(parsed.family) +
                                     " model of this config");
    return *dtype;
}

// Where a tensor of ours is in the files: the HF tensor `name` of shape `shape`, whole (no
// `part`), or the rows `part` takes out of it: q_proj's queries or gate, or a piece of a linear
// layer's joined projections (the layouts: nn/gated_deltanet.h).
struct Source {
    std::string name;
    Shape shape;
    std::function<Tensor(const Tensor&)> part;
};

Source source_of(const std::string& ours, const Shape& shape, const Config& parsed, int64_t w, GateLayout layout) {
    const LMConfig& c = parsed.config;
    const AttentionOptions& a = c.attn;
    const int64_t d = c.d_model;
    const size_t dot = ours.starts_with("layers.") ? ours.find('.', 7) : std::string::npos;
    const std::string layer = dot == std::string::npos ? "" : parsed.prefix + ours.substr(0, dot + 1);
    const std::string rest = dot == std::string::npos ? ours : ours.substr(dot + 1);
    const auto rows = [](int64_t groups, int64_t offset, int64_t n) {
        return [=](const Tensor& t) { return group_rows(t, groups, offset, n); };
    };
    if (a.gated() && (rest == "attn.w_q.weight" || rest == "attn.w_g.weight")) {
        const int64_t H = a.n_heads, Hkv = a.kv_heads(), dk = a.head_dim();
        const bool gate = rest == "attn.w_g.weight";
        return {layer + "self_attn.q_proj.weight", {H * (dk + w), d}, [=](const Tensor& t) {
                    const auto [q, g] = split_q_proj(t, H, Hkv, dk, w, layout);
                    return gate ? g : q;
                }};
    }
    const GatedDeltaNetOptions o = c.linear_attention();
    const int64_t Hk = o.n_k_heads, Hv = o.v_heads(), dk = o.k_dim(), dv = o.v_dim(), r = Hv / Hk;
    const std::string p = layer + "linear_attn.";
    if (rest == "linear_attn.conv_weight") {
        const int64_t C = o.conv_channels(), K = o.conv_kernel;
        return {p + "conv1d.weight", {C, 1, K}, [=](const Tensor& t) { return t.reshape({C, K}); }};
    }
    if (parsed.family == Family::qwen3_next) {  // per key head: [q | k | its r heads' v | their z], [b | a]
        const Shape qkvz = {2 * Hk * dk + 2 * Hv * dv, d}, ba = {2 * Hv, d};
        if (rest == "linear_attn.w_q.weight") return {p + "in_proj_qkvz.weight", qkvz, rows(Hk, 0, dk)};
        if (rest == "linear_attn.w_k.weight") return {p + "in_proj_qkvz.weight", qkvz, rows(Hk, dk, dk)};
        if (rest == "linear_attn.w_v.weight") return {p + "in_proj_qkvz.weight", qkvz, rows(Hk, 2 * dk, r * dv)};
        if (rest == "linear_attn.w_z.weight") return {p + "in_proj_qkvz.weight", qkvz, rows(Hk, 2 * dk + r * dv, r * dv)};
        if (rest == "linear_attn.w_beta.weight") return {p + "in_proj_ba.weight", ba, rows(Hk, 0, r)};
        if (rest == "linear_attn.w_alpha.weight") return {p + "in_proj_ba.weight", ba, rows(Hk, r, r)};
    } else {  // q ‖ k ‖ v in one, then z, b and a each on its own
        const Shape qkv = {2 * Hk * dk + Hv * dv, d};
        if (rest == "linear_attn.w_q.weight") return {p + "in_proj_qkv.weight", qkv, rows(1, 0, Hk * dk)};
        if (rest == "linear_attn.w_k.weight") return {p + "in_proj_qkv.weight", qkv, rows(1, Hk * dk, Hk * dk)};
        if (rest == "linear_attn.w_v.weight") return {p + "in_proj_qkv.weight", qkv, rows(1, 2 * Hk * dk, Hv * dv)};
        if (rest == "linear_attn.w_z.weight") return {p + "in_proj_z.weight", shape, {}};
        if (rest == "linear_attn.w_beta.weight") return {p + "in_proj_b.weight", shape, {}};
        if (rest == "linear_attn.w_alpha.weight") return {p + "in_proj_a.weight", shape, {}};
    }
    const std::string name = hf_name(ours, parsed.prefix);
    if (name.empty()) throw std::logic_error("hf: no HF name for " + ours);
    return {name, shape, {}};
}

// A tensor of the files, in its own dtype, read straight into `into` when that is given and
// of that dtype (a contiguous CPU tensor of the tensor's shape), so that loading holds no
// second copy of a weight.
Tensor read_tensor(const Shards& shards, const std::string& name, const Shape& want, const Tensor& into = Tensor()) {
    const SafetensorsReader& file = *shards.by_tensor.at(name);
    const SafetensorsEntry& e = *file.find(name);
    if (e.shape != want)  // check_against_config and the model disagree
        throw std::logic_error("hf: tensor '" + name + "' has shape " + shape_str(e.shape) + ", the model's " +
                               shape_str(want));
    const DType dtype = from_safetensors(e.dtype, name);
    const bool in_place = into.defined() && into.dtype() == dtype && into.is_contiguous() && into.device() == Device::CPU;
    Tensor t = in_place ? into : Tensor::empty(e.shape, dtype);
    file.read(name, t.view_desc().data);
    check_finite({{name, t}}, file.path());
    return t;
}

}  // namespace

std::shared_ptr<GatedTransformerLM> load_folder(const std::string& dir, const LoadOptions& options) {
    try {
        const Config parsed = parse_config(read_file((fs::path(dir) / "config.json").string(), kMaxConfigBytes));
        const GateLayout layout = options.gate_layout.value_or(parsed.gate_layout);
        const LMConfig& c = parsed.config;
        const AttentionOptions& a = c.attn;
        const int64_t w = a.gated() ? (a.sharing == GateSharing::headwise ? 1 : a.head_dim()) : 0;
        const Shards shards = open_shards(dir);
        // The weights' dtype is the files', whatever torch_dtype says.
        const DType file_dtype = check_against_config(shards, parsed, w);
        check_memory(c, Workload::weights, 0, 0, options.memory.value_or(0));
        const DType dtype = options.dtype.value_or(file_dtype);
        // Every weight is read below: drawing random ones first would only cost time.
        const std::shared_ptr<GatedTransformerLM> model = [&] {
            const SkipInit skip_init(dtype);
            return std::make_shared<GatedTransformerLM>(c, dtype);
        }();
        NoGradGuard no_grad;
        std::pair<std::string, Tensor> joined;  // the last joined tensor read: its parts come in a row
        for (const auto& [ours, target] : model->state_dict()) {
            const Source source = source_of(ours, target.shape(), parsed, w, layout);
            if (!source.part) {
                const Tensor read = read_tensor(shards, source.name, target.shape(), target);
                if (read.view_desc().data != target.view_desc().data) target.copy_(read.to(dtype));
                continue;
            }
            if (joined.first != source.name) joined = {source.name, read_tensor(shards, source.name, source.shape)};
            target.copy_(source.part(joined.second).to(dtype));
        }
        model->eval();
        return model;
    } catch (const std::exception& e) {
        throw std::runtime_error("hf: " + dir + ": " + e.what());
    }
}

// ---------------------------------------------------------------- export

std::vector<std::string> save_folder(const GatedTransformerLM& model, const std::string& dir, const SaveOptions& options) {
    const DType dtype = options.dtype;
    const GateLayout layout = options.gate_layout;
    const LMConfig& c = model.config();
    const AttentionOptions& a = c.attn;
    const auto refuse = [&](const std::string& what) {
        throw std::invalid_argument("hf export: " + dir + ": the Qwen3 layout has no " + what);
    };
    if (c.positions != PositionEncoding::rope) refuse("learned positions (it uses RoPE)");
    if (!c.ffn || c.n_experts > 0) refuse(c.ffn ? "MoE FFN" : "attention-only blocks");
    if (std::ranges::find(c.layer_types, LayerType::linear_attention) != c.layer_types.end())
        refuse("linear-attention (Gated DeltaNet) layers of a hybrid");
    if (const auto ff = std::ranges::find(c.layer_types, LayerType::feed_forward); ff != c.layer_types.end())
        refuse("block without attention (layer " + std::to_string(ff - c.layer_types.begin()) + " is feed_forward)");
    if (a.window > 0 || a.exclude_self || !a.causal) refuse("window, exclude_self or non-causal attention");
    if (a.score_fn != ScoreFunction::softmax) refuse("score function " + score_function_name(a.score_fn) + " (softmax only)");
    if (a.kv_rank > 0) refuse("latent attention (kv_rank " + std::to_string(a.kv_rank) + ")");
    if (c.zero_centred_norm) refuse("zero-centred norms (scaled by 1 + weight)");
    if (a.rope_options.partial != 1.0) refuse("partial rotary (partial_rotary_factor " + std::to_string(a.rope_options.partial) + ")");
    const bool gated = a.gated();
    if (gated && !(a.gate == GatePosition::sdpa_output && a.gate_fn == GateFunction::sigmoid &&
                   a.sharing != GateSharing::shared))
        refuse("gate " + gate_position_name(a.gate) + " with " + gate_function_name(a.gate_fn) + ", " +
               gate_sharing_name(a.sharing) + " (only G1 with sigmoid, head-wise or element-wise)");
    if (layout == GateLayout::interleaved && gated && a.sharing == GateSharing::headwise)
        refuse("interleaved head-wise gate");
    const RopeOptions& r = a.rope_options;
    if (r.scaling == RopeScaling::ntk) refuse("static NTK-aware RoPE scaling");
    if (!is_floating(dtype) || dtype == DType::f64) refuse(std::string("dtype ") + dtype_name(dtype) + " (f32, bf16)");

    json rope_scaling = nullptr;
    if (r.scaling == RopeScaling::interpolation) rope_scaling = {{"rope_type", "linear"}, {"factor", r.factor}};
    if (r.scaling == RopeScaling::yarn)
        rope_scaling = {{"rope_type", "yarn"}, {"factor", r.factor}, {"original_max_position_embeddings", r.original_length},
                        {"beta_fast", r.yarn_beta_fast}, {"beta_slow", r.yarn_beta_slow}};
    json config = {{"architectures", {"Qwen3ForCausalLM"}},
                   {"model_type", "qwen3"},
                   {"vocab_size", c.vocab_size},
                   {"hidden_size", c.d_model},
                   {"intermediate_size", c.ffn_hidden()},
                   {"num_hidden_layers", c.n_layers},
                   {"num_attention_heads", a.n_heads},
                   {"num_key_value_heads", a.kv_heads()},
                   {"head_dim", a.head_dim()},
                   {"hidden_act", "silu"},
                   {"max_position_embeddings", c.max_len},
                   {"rms_norm_eps", c.norm_eps},
                   {"rope_theta", r.base},
                   {"rope_scaling", rope_scaling},
                   {"tie_word_embeddings", c.tie_embeddings},
                   {"attention_bias", false},
                   {"attention_dropout", 0.0},
                   {"use_sliding_window", false},
                   {"use_qk_norm", a.qk_norm},
                   {"headwise_attn_output_gate", gated && a.sharing == GateSharing::headwise},
                   {"elementwise_attn_output_gate", gated && a.sharing == GateSharing::elementwise},
                   {"torch_dtype", dtype == DType::bf16 ? "bfloat16" : "float32"}};
    if (c.vocab_size == kByteVocab) config["bos_token_id"] = kBOS;
    if (layout == GateLayout::interleaved && gated) config["gatedgrad_gate_layout"] = "interleaved";

    NamedTensors tensors;
    const int64_t H = a.n_heads, Hkv = a.kv_heads(), dk = a.head_dim();
    const int64_t w = gated ? (a.sharing == GateSharing::headwise ? 1 : dk) : 0;
    const NamedTensors state = model.state_dict();
    const auto find = [&](const std::string& name) {
        for (const auto& [n, t] : state)
            if (n == name) return t;
        throw std::logic_error("hf export: no tensor " + name);
    };
    NoGradGuard no_grad;
    for (const auto& [ours, t] : state) {
        if (ours.ends_with("attn.w_g.weight")) continue;
        Tensor out = t.detach().to(Device::CPU);
        if (ours.ends_with("attn.w_q.weight") && gated) {
            const std::string gate = ours.substr(0, ours.size() - std::string("w_q.weight").size()) + "w_g.weight";
            out = join_q_proj(out, find(gate).detach().to(Device::CPU), H, Hkv, dk, w, layout);
        }
        tensors.emplace_back(hf_name(ours), out.to(dtype));
    }
    // A new folder, renamed into place once complete: nothing of an earlier export (an index,
    // a tokenizer) survives beside these files, and no file of `dir` is written through.
    std::vector<std::string> written = {"config.json", "model.safetensors"};
    if (c.vocab_size == kByteVocab) written.push_back("tokenizer.json");
    write_folder_atomically(dir, options.replace, [&](const std::string& folder) {
        save_tensors((fs::path(folder) / "model.safetensors").string(), tensors, {{"format", "pt"}});
        write_file_atomically((fs::path(folder) / "config.json").string(), config.dump(2) + "\n");
        if (c.vocab_size == kByteVocab)
            write_file_atomically((fs::path(folder) / "tokenizer.json").string(), byte_tokenizer_json() + "\n");
    });
    return written;
}

}  // namespace gg::nn::hf
