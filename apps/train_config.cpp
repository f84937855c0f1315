// The TrainConfig a run of train trains with (train.h): its flags' --help defaults, the base
// and the flags given on top, and what a resumed run may change.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "nn/attention.h"
#include "nn/io/checkpoint.h"
#include "nn/io/safetensors.h"
#include "nn/train/data.h"
#include "nn/transformer.h"
#include "train.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

// Each train option that sets a TrainConfig field, with the field's value as text: the
// --help defaults, and on --resume the architecture a run keeps and the changes it takes.
struct TrainField {
    const char* flag;
    bool architecture;  // part of the model: a resumed run cannot change it
    std::function<std::string(const TrainConfig&)> get;
};

const std::vector<TrainField>& train_fields() {
    const auto text = [](auto value) {
        std::ostringstream out;
        out << value;
        return out.str();
    };
    using C = const TrainConfig&;
    static const std::vector<TrainField> fields = {
        {"--attn", true, [](C c) { return gate_position_name(c.model.attn.gate); }},
        {"--gate-fn", true, [](C c) { return gate_function_name(c.model.attn.gate_fn); }},
        {"--gate-sharing", true, [](C c) { return gate_sharing_name(c.model.attn.sharing); }},
        {"--gate-init", true, [](C c) { return gate_init_name(c.model.attn.gate_init); }},
        {"--layers", true, [=](C c) { return text(c.model.n_layers); }},
        {"--d-model", true, [=](C c) { return text(c.model.d_model); }},
        {"--heads", true, [=](C c) { return text(c.model.attn.n_heads); }},
        {"--kv-heads", true, [=](C c) { return c.model.attn.n_kv_heads ? text(c.model.attn.n_kv_heads) : "--heads"; }},
        {"--qk-norm", true, [](C c) { return c.model.attn.qk_norm ? "on" : "off"; }},
        {"--window", true, [=](C c) { return text(c.model.attn.window); }},
        {"--positions", true, [](C c) { return c.model.positions == PositionEncoding::rope ? "rope" : "learned"; }},
        {"--no-ffn", true, [](C c) { return c.model.ffn ? "off" : "on"; }},
        {"--experts", true, [=](C c) { return text(c.model.n_experts); }},
        {"--top-k", true, [=](C c) { return text(c.model.top_k); }},
        {"--steps", false, [=](C c) { return text(c.steps); }},
        {"--batch", false, [=](C c) { return text(c.batch_size); }},
        {"--seq-len", false, [=](C c) { return text(c.seq_len); }},
        {"--lr", false, [=](C c) { return text(c.lr); }},
        {"--warmup", false, [=](C c) { return text(c.warmup); }},
        {"--weight-decay", false, [=](C c) { return text(c.weight_decay); }},
        {"--independent-wd", false, [](C c) { return c.independent_weight_decay ? "on" : "off"; }},
        {"--z-loss", false, [=](C c) { return text(c.z_loss); }},
        {"--precision", false, [](C c) { return precision_name(c.precision); }},
        {"--clip", false, [=](C c) { return text(c.grad_clip); }},
        {"--seed", false, [=](C c) { return text(c.seed); }},
        {"--eval-every", false, [=](C c) { return text(c.eval_every); }},
        {"--probe-every", false, [=](C c) { return text(c.probe_every); }},
        {"--ckpt-every", false, [=](C c) { return text(c.ckpt_every); }},
        {"--ckpt-minutes", false, [=](C c) { return text(c.ckpt_minutes); }},
        {"--data", false, [](C c) {
             std::string paths;
             for (const std::string& d : c.data) paths += (paths.empty() ? "" : " ") + d;
             return paths;
         }},
        {"--val-fraction", false, [=](C c) { return text(c.split.val_fraction); }},
        {"--split", false, [](C c) { return split_mode_name(c.split.mode); }},
    };
    return fields;
}

}  // namespace

void show_defaults(CLI::App* cmd) {
    const TrainConfig plain, tiny = TrainConfig::preset("tiny"), small = TrainConfig::preset("small");
    for (const auto& [name, architecture, get] : train_fields()) {
        std::string shown = "default " + get(plain);
        if (get(tiny) != get(plain) || get(small) != get(plain)) shown += "; tiny " + get(tiny) + ", small " + get(small);
        CLI::Option* opt = cmd->get_option(name);
        opt->description(opt->get_description() + " (" + shown + ")");
    }
}

std::optional<TrainConfig> run_config(const fs::path& dir) {
    if (fs::exists(dir / "config.json")) return TrainConfig::from_json(read_file((dir / "config.json").string(), kMaxConfigFileBytes));
    const fs::path ckpt = dir / "model.safetensors";
    if (!fs::exists(ckpt)) return std::nullopt;
    const Metadata saved = read_safetensors(ckpt.string()).metadata;
    if (!saved.contains("train_config")) return std::nullopt;
    return TrainConfig::from_json(saved.at("train_config"));
}

TrainConfig train_config(const TrainArgs& a) {
    TrainConfig c;
    bool rescale = true;  // a base the user did not write: --steps may stretch its schedule
    if (!a.config_file.empty()) {
        const std::string text = read_file(a.config_file, kMaxConfigFileBytes);  // unreadable: a runtime error
        try {
            c = TrainConfig::from_json(text);
        } catch (const std::invalid_argument& e) {  // what the user asked for is wrong: a usage error
            throw UsageError(a.config_file + ": " + e.what());
        }
        rescale = false;
    } else if (!a.preset.empty()) {
        c = TrainConfig::preset(a.preset);
    } else if (const std::optional<TrainConfig> run = a.resume ? run_config(a.out) : std::nullopt) {
        c = *run;
        rescale = false;
    }
    const TrainConfig base = c;
    a.overrides->apply(c);
    if (rescale && a.steps->count() && base.steps > 0) {
        // Keep warmup and evaluation the same share of the run (tiny: 30 of 600 steps warm up).
        if (!a.warmup->count()) c.warmup = base.warmup * c.steps / base.steps;
        if (!a.eval_every->count() && base.eval_every > 0) c.eval_every = std::max<int64_t>(1, base.eval_every * c.steps / base.steps);
    }
    // A warmup not given here and this long is the resumed run's or the --config file's (a
    // preset's is rescaled with --steps), perhaps derived from a longer run: say so, and what to pass.
    if (c.steps > 0 && c.warmup >= c.steps)
        throw UsageError("warmup " + std::to_string(c.warmup) + " must be below steps " + std::to_string(c.steps) +
                         " (the cosine schedule needs steps after the warmup)" +
                         (a.warmup->count() ? ""
                                            : "; that warmup is " +
                                                  (a.config_file.empty() ? "the run's (config.json)" : a.config_file + "'s") +
                                                  ": pass --warmup below " + std::to_string(c.steps) + " with --steps"));
    if (c.model.d_model % c.model.attn.n_heads != 0)
        throw UsageError("d-model " + std::to_string(c.model.d_model) + " is not a multiple of heads " +
                         std::to_string(c.model.attn.n_heads));
    c.out_dir = a.out;
    // Saved absolute in config.json and the checkpoint, so that eval and sink find the corpus
    // from any folder.
    for (std::string& path : c.data) path = fs::absolute(path).lexically_normal().string();
    // Every size checked, and the memory of a training step estimated, before anything is built.
    try {
        c.validate();
        check_memory(c.model, Workload::training, c.batch_size, c.seq_len);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    return c;
}

std::string resume_changes(TrainConfig run, TrainConfig given) {
    // config.json spells out the key/value heads that a config may leave to --heads (0).
    for (TrainConfig* c : {&run, &given}) c->model.attn.n_kv_heads = c->model.attn.kv_heads();
    std::string changes;
    for (const auto& [flag, architecture, get] : train_fields()) {
        const std::string was = get(run), now = get(given);
        if (was == now) continue;
        // Learned positions are weights, one per position: their count is architecture too.
        if (architecture || (std::string(flag) == "--seq-len" && run.model.positions == PositionEncoding::learned &&
                             run.model.max_len != given.model.max_len))
            throw UsageError("a resumed run keeps its architecture: " + std::string(flag) + " is " + was +
                             " in the run, " + now + " given");
        changes += (changes.empty() ? "" : ", ") + std::string(flag) + " " + was + " → " + now;
    }
    return changes;
}

std::string fingerprint_change(const std::string& was, const std::string& now) {
    const auto parts = [](const std::string& text) {
        std::vector<std::string> out;
        for (size_t at = 0; at <= text.size();) {
            const size_t end = std::min(text.find("; ", at), text.size());
            out.push_back(text.substr(at, end - at));
            at = end + 2;
        }
        return out;
    };
    const std::vector<std::string> a = parts(was), b = parts(now);
    for (size_t i = 1; i < std::max(a.size(), b.size()); ++i) {
        const std::string x = i < a.size() ? a[i] : "no file", y = i < b.size() ? b[i] : "no file";
        if (x != y) return "file " + std::to_string(i) + " was " + x + " (path, bytes), now " + y;
    }
    return "the same files and sizes, other bytes (" + a[0] + " then, " + b[0] + " now)";
}
