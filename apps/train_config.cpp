// The TrainConfig a run of train trains with (train.h): the base and the flags given on top,
// and what a resumed run may change (the table of settings, nn/config_fields.h, says which).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "nn/config_fields.h"
#include "nn/io/checkpoint.h"
#include "nn/io/safetensors.h"
#include "nn/train/data.h"
#include "nn/train/train_config.h"
#include "nn/transformer.h"
#include "train.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

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
    a.options->apply(c);
    if (a.options->option("seq_len")->count()) c.model.max_len = c.seq_len;
    try {
        if (!a.hybrid.empty()) c.model.layer_types = hybrid_layer_types(a.hybrid, c.model.n_layers);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--hybrid: ") + e.what());
    }
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
    c.out_dir = a.out;
    // Saved absolute in config.json and the checkpoint, so that eval and sink find the corpus
    // from any folder.
    for (std::string& path : c.data) path = fs::absolute(path).lexically_normal().string();
    // Every size checked, the fields against each other, and the memory of a training step
    // estimated, before anything is built.
    try {
        c.validate();
        check_memory(c.model, Workload::training, c.batch_size, c.seq_len);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    return c;
}

std::string resume_changes(TrainConfig run, TrainConfig given) {
    // config.json spells out the sizes a config may leave to a rule (the key/value heads, d_ff).
    for (TrainConfig* c : {&run, &given}) c->model = spelled_out(c->model);
    std::string changes;
    for (const auto& [field, was, now] : differences(run_fields(), run, given)) {
        // --seq-len sets max_len too; learned positions are weights, one per position: their count is architecture too.
        if (field->resume == Resume::architecture ||
            (std::string(field->key) == "seq_len" && run.model.positions == PositionEncoding::learned &&
             run.model.max_len != given.model.max_len))
            throw UsageError("a resumed run keeps its architecture: " + name(*field) + " is " + was + " in the run, " + now +
                             " given");
        changes += (changes.empty() ? "" : ", ") + name(*field) + " " + was + " → " + now;
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
