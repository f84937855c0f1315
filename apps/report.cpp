// gatedgrad report — one HTML page (nn/analysis/report.h) on a run or on two side by side: loss
// and learning-rate curves, stability probes, the sink table and every attention map; with
// --watch, a page that follows a run while it trains. With --prompt, the page of a model (--hf
// or --ckpt) reading one text: its attention maps over the prompt's tokens and their sink report.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "cli.h"
#include "commands.h"
#include "model_options.h"
#include "nn/analysis/analysis.h"
#include "nn/analysis/plot.h"
#include "nn/files.h"
#include "nn/analysis/report.h"
#include "nn/analysis/training_log.h"
#include "nn/attention.h"
#include "nn/train/trainer.h"
#include "nn/transformer.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

struct ReportArgs {
    CLI::App* cmd = nullptr;
    std::vector<std::string> runs;
    ModelArgs model;  // with --prompt
    std::string out, prompt, bos = "auto";
    int64_t batches = 4, map_tokens = 128, watch = 0;
    double threshold = 0.3;
};

void add_report(CLI::App& app, ReportArgs& a) {
    a.cmd = app.add_subcommand("report", "one HTML page to look at a run, or at two side by side: loss and learning-rate "
                                         "curves, stability probes, the sink table and every attention map");
    a.cmd->add_option("RUN_DIR", a.runs, "one or two folders written by train (log.jsonl in each; model.safetensors "
                                         "once the run has saved one)");
    a.cmd->add_option("--out", a.out, "the page to write (default: report.html in the first RUN_DIR)")->type_name("FILE.html");
    a.cmd->add_option("--prompt", a.prompt, "instead of RUN_DIR: the page of the model of --hf or --ckpt reading this "
                                            "text, its tokens shown as text on the maps");
    a.cmd->add_option("--bos", a.bos, "with --prompt, before it: auto (what the tokenizer's post-processor puts), "
                                      "always, never")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
    a.cmd->add_option("--batches", a.batches, "validation batches the sink table averages over, as sink --batches")
        ->check(count(1, TrainConfigLimits::eval_batches))
        ->capture_default_str();
    a.cmd->add_option("--threshold", a.threshold, "a layer is a sink layer when its mean share is above this")
        ->check(bounded(0, 1))
        ->capture_default_str();
    a.cmd->add_option("--map-tokens", a.map_tokens,
                      "the attention maps show the first N tokens of the first validation sequence (at most the "
                      "training length; the page holds N x N numbers per head); a --prompt may be N tokens at most")
        ->check(count(2, 512))
        ->capture_default_str();
    a.cmd->add_option("--watch", a.watch,
                      "a live page: write it again every N seconds, and the page reloads itself as often, until "
                      "every run has finished (its last step logged and saved) or Ctrl-C")
        ->check(count(1, 86400))
        ->type_name("SECONDS");
    add_model_options(a.cmd, a.model);
    a.cmd->footer(
        "The page (nn/analysis/report.h) needs no server and no network: open it in any browser. It shows each run's\n"
        "loss and learning rate from DIR/log.jsonl, the stability probes when the run took them (train --probe-every),\n"
        "the sink report of `gatedgrad sink` (first-token share per layer, on the validation text at the training\n"
        "length), and the attention map of every layer and head, the head chosen on the page, with the gate's value\n"
        "at each query beside it for a gated model. Two runs, say a baseline and G1, are drawn side by side, and the\n"
        "runs table marks the settings in which they differ. A run still training, with no checkpoint yet, shows its\n"
        "curves; its sink table and maps come with its first checkpoint.\n"
        "  gatedgrad report runs/baseline runs/g1 --out compare.html\n"
        "  gatedgrad report runs/g1 --watch 30     # while it trains: open runs/g1/report.html, it follows the run\n"
        "With --prompt, the page is a model's reading of one text (--hf DIR or --ckpt FILE): each layer's and head's\n"
        "attention over the prompt's tokens, which the pointer on a map names, the gate at each query, and the\n"
        "sink report of that one sequence (first-token share; the slot's share or the row sum where the score\n"
        "function has one).\n"
        "  gatedgrad report --hf models/gated/1B_gate_elementwise --prompt \"The gate closes.\" --out gate.html");
}

// A run's settings as its config.json holds them, one "name value" pair per field, for the runs
// table to mark what two runs do not share. The id and the folder differ between any two runs.
std::vector<std::pair<std::string, std::string>> run_settings(const std::string& config_json) {
    std::vector<std::pair<std::string, std::string>> out;
    const nlohmann::json flat = nlohmann::json::parse(config_json).flatten();
    for (const auto& [pointer, value] : flat.items()) {
        const std::string name = pointer.substr(1);  // "/model/n_layers" → "model.n_layers"
        if (name == "run_id" || name == "out_dir") continue;
        std::string dotted;
        for (char c : name) dotted += c == '/' ? '.' : c;
        out.emplace_back(dotted, value.is_string() ? value.get<std::string>() : value.dump());
    }
    return out;
}

// describe()'s terminal lines, each with its padding, as one line.
std::string joined_lines(const std::string& text) {
    std::string out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        std::string words;
        std::istringstream in(line);
        for (std::string word; in >> word;) words += (words.empty() ? "" : " ") + word;
        out += (out.empty() ? "" : "; ") + words;
    }
    return out;
}

// What a run folder holds and when it last changed: a watched page measures a checkpoint again
// only when it was replaced.
struct RunFiles {
    fs::path dir, ckpt, log, config;
    bool has_ckpt = false;
    fs::file_time_type ckpt_time{};
};

RunFiles run_files(const std::string& folder) {
    RunFiles f{fs::path(folder), fs::path(folder) / "model.safetensors", fs::path(folder) / "log.jsonl",
               fs::path(folder) / "config.json"};
    std::error_code ec;
    if (!fs::is_directory(f.dir, ec)) throw std::runtime_error(folder + ": not a run folder (no such directory)");
    if (!fs::exists(f.log, ec)) throw std::runtime_error(folder + ": not a run folder: no log.jsonl in it");
    f.has_ckpt = fs::exists(f.ckpt, ec);
    if (f.has_ckpt) f.ckpt_time = fs::last_write_time(f.ckpt, ec);
    return f;
}

// One run's curves, sink report and maps, measured as sink measures them; a run without a
// checkpoint yet gets its curves and its config.json's description. `last` is this run's
// previous report (report --watch): its sink and maps are kept while the checkpoint is the same.
RunReport measure_run(const RunFiles& f, const ReportArgs& a, const RunReport* last, fs::file_time_type last_ckpt_time) {
    RunReport run;
    run.log = read_training_log(f.log.string());
    if (!run.log.warning.empty()) std::fprintf(stderr, "gatedgrad: warning: %s\n", run.log.warning.c_str());
    run.name = f.dir.lexically_normal().filename().string();
    if (run.name.empty()) run.name = f.dir.lexically_normal().parent_path().filename().string();  // "runs/g1/"
    if (!f.has_ckpt) {
        std::error_code ec;
        if (fs::exists(f.config, ec)) {
            const std::string json = read_file(f.config.string(), kMaxConfigFileBytes);
            const TrainConfig config = TrainConfig::from_json(json);
            run.gate = gate_position_name(config.model.attn.gate);
            run.settings = run_settings(json);
            run.description = joined_lines(describe(config, GatedTransformerLM(config.model).num_parameters()));
        } else {
            run.gate = "unknown";
            run.description = "no config.json in the folder";
        }
        run.pending = "no checkpoint yet (still training?): its sink table and attention maps come with its first "
                      "model.safetensors (train --ckpt-every, --ckpt-minutes, or the end of the run).";
        return run;
    }
    DataArgs data;
    data.model.ckpt = f.ckpt.string(), data.model.device = a.model.device, data.model.precision = a.model.precision;
    const ModelOnText m = open_for_data(data, Workload::analysis, a.batches);  // every batch in one forward
    if (!m.train) throw std::runtime_error(f.ckpt.string() + ": no training config in it (not a checkpoint of train)");
    run.gate = gate_position_name(m.model().config().attn.gate);
    run.description = joined_lines(describe(*m.train, m.model().num_parameters()));
    run.settings = run_settings(m.train->to_json());
    if (last && last->pending.empty() && last_ckpt_time == f.ckpt_time) {
        run.sink = last->sink, run.maps = last->maps, run.sink_data = last->sink_data;
        return run;
    }
    const Tensor windows = text_windows(m, data, a.batches);  // (n·B, T + 1)
    const Tensor ids = windows.narrow(1, 0, windows.size(1) - 1);
    const Autocast precision(m.opened.precision);
    run.sink = analyze(m.model(), ids, a.threshold);
    run.maps = capture_attention_maps(m.model(), ids.narrow(0, 0, 1).narrow(1, 0, std::min(a.map_tokens, ids.size(1))));
    run.sink_data = std::to_string(ids.size(0)) + " validation sequences of " + std::to_string(ids.size(1)) +
                    " tokens (BOS first); the maps show the first " + std::to_string(run.maps.tokens.size()) +
                    " tokens of the first one";
    return run;
}

// A run is over when it has logged its last step and saved a checkpoint: a watched page then
// stops reloading. Its config.json says how many steps it takes.
bool finished(const RunFiles& f, const RunReport& run) {
    std::error_code ec;
    if (!f.has_ckpt || !fs::exists(f.config, ec)) return false;
    return run.log.step.back() >= double(TrainConfig::from_json(read_file(f.config.string(), kMaxConfigFileBytes)).steps);
}

// A model without a training context in one line: its shape, its gate and its weights' dtype.
std::string model_line(const GatedTransformerLM& model) {
    const LMConfig& c = model.config();
    return std::to_string(c.n_layers) + " layers, " + std::to_string(c.attn.n_heads) + " query heads of " +
           std::to_string(c.attn.head_dim()) + ", " + std::to_string(c.attn.kv_heads()) + " KV heads, d_model " +
           std::to_string(c.d_model) + ", vocab " + std::to_string(c.vocab_size) + ", " +
           std::to_string(model.num_parameters()) + " parameters in " + dtype_name(model.parameters().front().dtype());
}

// The page of one model reading --prompt: the maps over its tokens, named by the tokenizer, and
// the sink report of that one sequence.
RunReport measure_prompt(const ReportArgs& a) {
    const OpenedModel m = a.model.open();
    const std::vector<int64_t> ids = prompt_ids(m, a.prompt, a.bos, Workload::analysis, 2);  // a query past the first
    const int64_t T = int64_t(ids.size());
    if (T > a.map_tokens)
        throw UsageError("--prompt is " + std::to_string(T) + " tokens, more than --map-tokens " +
                         std::to_string(a.map_tokens) + " (the page holds T x T numbers per head)");
    const GatedTransformerLM& model = *m.model;
    RunReport run;
    run.name = fs::path(a.model.path()).lexically_normal().filename().string();
    if (run.name.empty()) run.name = fs::path(a.model.path()).lexically_normal().parent_path().filename().string();
    run.gate = gate_position_name(model.config().attn.gate);
    const std::optional<TrainConfig> train = training_context(m);
    run.description = train ? joined_lines(describe(*train, model.num_parameters())) : model_line(model);
    const bool has_bos = bos_token(m, a.bos).has_value();
    run.sink_data = "the prompt, " + std::to_string(T) + " tokens (" +
                    (has_bos ? "BOS first" : "no BOS: its own first token") + ", --bos " + a.bos + ")";
    const Autocast precision(m.precision);
    const Tensor x = from_vector(ids, {1, T}).to(device_of(model));  // (1, T)
    run.sink = analyze(model, x, a.threshold);
    run.maps = capture_attention_maps(model, x);
    for (int64_t t = 0; t < T; ++t)
        run.maps.token_texts.push_back(t == 0 && has_bos ? "BOS" : token_text(m, ids[size_t(t)]));
    return run;
}

// report --prompt: refuses what only a run folder has (--watch, --batches), then writes the page.
int run_prompt_report(const ReportArgs& a) {
    if (!a.runs.empty()) throw UsageError("--prompt reads the model of --hf or --ckpt, not a RUN_DIR: give one or the other");
    if (a.out.empty()) throw UsageError("--prompt needs --out FILE.html: the page has no run folder to go in");
    if (a.watch > 0) throw UsageError("--watch follows a run folder as it trains: not with --prompt");
    if (a.cmd->count("--batches") > 0) throw UsageError("--batches averages over validation batches: not with --prompt");
    const RunReport run = measure_prompt(a);
    write_file_atomically(a.out, report_html({run}));
    size_t maps = 0;
    for (const Tensor& layer : run.maps.probs) maps += size_t(layer.size(0));
    std::printf("wrote %s (%s on %s: %zu attention maps)\n", a.out.c_str(), run.name.c_str(), run.sink_data.c_str(), maps);
    return 0;
}

int run_report(const ReportArgs& a) {
    if (a.cmd->count("--prompt") > 0) return run_prompt_report(a);
    if (a.cmd->count("--bos") > 0) throw UsageError("--bos puts a token before --prompt: give --prompt");
    if (!a.model.path().empty())
        throw UsageError("--hf and --ckpt name the model that reads --prompt; a run folder's page needs neither");
    if (a.runs.empty()) throw UsageError("give one or two RUN_DIR, or --prompt TEXT with --hf DIR or --ckpt FILE");
    if (a.runs.size() > 2)
        throw UsageError("report takes one or two run folders, got " + std::to_string(a.runs.size()));
    const std::string out = !a.out.empty() ? a.out : (fs::path(a.runs.front()) / "report.html").string();
    std::vector<RunReport> runs;
    std::vector<fs::file_time_type> ckpt_times(a.runs.size());
    for (;;) {
        std::vector<RunReport> now;
        bool all_finished = true;
        for (size_t i = 0; i < a.runs.size(); ++i) {
            const RunFiles f = run_files(a.runs[i]);
            now.push_back(measure_run(f, a, i < runs.size() ? &runs[i] : nullptr, ckpt_times[i]));
            ckpt_times[i] = f.ckpt_time;
            all_finished = all_finished && finished(f, now.back());
        }
        runs = std::move(now);
        if (runs.size() == 2 && runs[0].name == runs[1].name) runs[0].name += " (1)", runs[1].name += " (2)";
        ReportOptions options;
        if (a.watch > 0 && !all_finished) options.refresh_seconds = int(a.watch);
        write_file_atomically(out, report_html(runs, options));
        size_t maps = 0;
        std::string steps;
        for (const RunReport& run : runs) {
            for (const Tensor& layer : run.maps.probs) maps += size_t(layer.size(0));
            steps += (steps.empty() ? "" : ", ") + run.name + " at step " + std::to_string(int64_t(run.log.step.back()));
        }
        std::printf("wrote %s (%zu run%s, %zu attention maps%s)\n", out.c_str(), runs.size(), runs.size() == 1 ? "" : "s",
                    maps, a.watch > 0 ? ("; " + steps).c_str() : "");
        if (a.watch == 0) return 0;
        if (all_finished) {
            std::printf("every run has finished: the page no longer reloads\n");
            return 0;
        }
        std::fflush(stdout);
        ::sleep(unsigned(a.watch));
    }
}

}  // namespace

Command report_command(CLI::App& app) { return make_command<ReportArgs>(app, add_report, run_report); }
