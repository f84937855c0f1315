// Tutorial 08 — where the gate goes and how it is built (the article's 2.3 and 5.x, the
// paper's Tables 1–2), plus the article's 7.3 gated attention entropy.
//
// Trains the same small LM (the "tiny" preset, fewer steps) once per variant and seed:
//   positions:   baseline, the article's G1..G5, the paper's value / key / query gates
//   for G1:      gate function (sigmoid, tanh, relu, silu), sharing (element-wise,
//                head-wise, shared), init (zero, Kaiming, Xavier), with/without SwiGLU FFN
// and reports validation loss (mean ± half the seed range), the first-token attention
// share and the gate statistics (analyze() on validation batches).
//
// Build and run from the repository root (two runs at a time, one thread each):
//   meson setup build && meson compile -C build
//   OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive ./build/tutorials/tutorial_08_gate_ablation
// Writes tutorials/08_gate_ablation/results/{runs.csv,table.csv,summary.json,loss_vs_baseline.svg,
// first_token_share.svg,g1_entropy.svg}; --quick (about a minute) writes to build/tutorials/08_quick/.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../07_learning_rate/run_pool.h"
#include "nn/analysis/analysis.h"
#include "nn/train/data.h"
#include "nn/analysis/plot.h"
#include "nn/train/trainer.h"

using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

struct Variant {
    std::string group;  // which question the row answers
    std::string name;   // as printed in the table
    std::string short_name;  // under a bar in the pictures
    std::function<void(LMConfig&)> set;  // applied to the tiny preset's model
};

// The reference gate is the article's G1 with the paper's defaults: sigmoid, element-wise,
// zero init (σ(0) = ½ at the start), with the SwiGLU FFN. Each G1 ablation changes one of those.
std::vector<Variant> variants() {
    auto position = [](GatePosition p) { return [p](LMConfig& m) { m.attn.gate = p; }; };
    auto g1 = [](std::function<void(AttentionOptions&)> change) {
        return [change](LMConfig& m) {
            m.attn.gate = GatePosition::sdpa_output;
            change(m.attn);
        };
    };
    return {
        {"position (article 2.1)", "baseline (no gate)", "base", position(GatePosition::none)},
        {"position (article 2.1)", "G1 SDPA output", "G1", position(GatePosition::sdpa_output)},
        {"position (article 2.1)", "G2 scores, gate from x", "G2", position(GatePosition::scores_from_x)},
        {"position (article 2.1)", "G3 scores, gate from q", "G3", position(GatePosition::scores_from_query)},
        {"position (article 2.1)", "G4 residual", "G4", position(GatePosition::residual)},
        {"position (article 2.1)", "G5 after W_O", "G5", position(GatePosition::after_merge)},
        {"position (paper)", "value gate", "value", position(GatePosition::value)},
        {"position (paper)", "key gate", "key", position(GatePosition::key)},
        {"position (paper)", "query gate", "query", position(GatePosition::query)},
        {"G1 function (5.1)", "G1 (tanh+1)/2", "tanh", g1([](AttentionOptions& a) { a.gate_fn = GateFunction::tanh_half; })},
        {"G1 function (5.1)", "G1 relu", "relu", g1([](AttentionOptions& a) { a.gate_fn = GateFunction::relu; })},
        {"G1 function (5.1)", "G1 relu, Kaiming init", "relu-K", g1([](AttentionOptions& a) {
             a.gate_fn = GateFunction::relu;
             a.gate_init = GateInit::kaiming;
         })},
        {"G1 function (5.1)", "G1 silu", "silu", g1([](AttentionOptions& a) { a.gate_fn = GateFunction::silu; })},
        {"G1 sharing (5.2)", "G1 head-wise", "head", g1([](AttentionOptions& a) { a.sharing = GateSharing::headwise; })},
        {"G1 sharing (5.2)", "G1 shared by heads", "shared", g1([](AttentionOptions& a) { a.sharing = GateSharing::shared; })},
        {"G1 init (5.3)", "G1 Kaiming init", "kaim", g1([](AttentionOptions& a) { a.gate_init = GateInit::kaiming; })},
        {"G1 init (5.3)", "G1 Xavier init", "xav", g1([](AttentionOptions& a) { a.gate_init = GateInit::xavier; })},
        {"FFN (5.4)", "baseline, no FFN", "b-noF", [](LMConfig& m) {
             m.attn.gate = GatePosition::none;
             m.ffn = false;
         }},
        {"FFN (5.4)", "G1, no FFN", "G1-noF", [](LMConfig& m) {
             m.attn.gate = GatePosition::sdpa_output;
             m.ffn = false;
         }},
    };
}

struct Settings {
    int64_t steps = 300, seeds = 2, analysis_batches = 4;
    int jobs = 2;
    std::string out = "tutorials/08_gate_ablation/results";
};

TrainConfig train_config(const Settings& s, const Variant& v, uint64_t seed) {
    TrainConfig c = TrainConfig::preset("tiny");
    c.warmup = c.warmup * s.steps / c.steps;  // the preset's share of the run (30 of 600)
    c.steps = s.steps;
    c.eval_every = 0;  // validate once, at the end
    c.seed = seed;
    v.set(c.model);
    return c;
}

// One run in a child process: train, then analyze() the trained model on validation batches.
std::string train_one(const Settings& s, const Variant& v, uint64_t seed, const std::shared_ptr<const TextDataset>& data) {
    const TrainConfig config = train_config(s, v, seed);
    Trainer trainer(config, data);
    const TrainResult result = trainer.run(/*quiet=*/true);
    if (result.diverged) throw std::runtime_error(v.name + ": " + result.message);

    trainer.model().eval();
    const int64_t n = std::min(s.analysis_batches, data->val_batches(config.batch_size, config.seq_len));
    double share = 0, gate = 0, sparse = 0, sink_heads = 0, hidden = 0;
    const size_t L = trainer.model().blocks.size();
    std::vector<double> entropy(L, 0), gated_entropy(L, 0);
    int64_t gated_layers = 0;
    for (int64_t i = 0; i < n; ++i) {
        const ModelAnalysis a = analyze(trainer.model(), data->val_batch(i, config.batch_size, config.seq_len).inputs);
        share += a.mean_first_token_share / n;
        sink_heads += double(a.sink_heads) / double(a.heads) / n;
        hidden += a.mean_max_abs_hidden / n;
        gated_layers = 0;
        for (size_t l = 0; l < L; ++l) {
            const LayerAnalysis& layer = a.layers[l];
            entropy[l] += layer.entropy / n;
            gated_entropy[l] += layer.gated_entropy / n;
            if (layer.gate_mean < 0) continue;  // no gate in this layer
            gate += layer.gate_mean / double(L) / n;
            sparse += layer.gate_below_0_1 / double(L) / n;
            ++gated_layers;
        }
    }
    auto or_null = [&](double x) { return gated_layers ? nlohmann::json(x) : nlohmann::json(nullptr); };
    std::printf("  %-24s seed %llu: val loss %.4f, first-token share %.3f, gate mean %s (%.0f s)\n", v.name.c_str(),
                static_cast<unsigned long long>(seed), result.final_val_loss, share,
                gated_layers ? std::to_string(gate).substr(0, 5).c_str() : "-", result.seconds);
    nlohmann::json j = {{"val_loss", result.final_val_loss}, {"first_token_share", share},
                        {"sink_head_share", sink_heads}, {"gate_mean", or_null(gate)},
                        {"gate_below_0_1", or_null(sparse)}, {"max_abs_hidden", hidden}, {"seconds", result.seconds},
                        {"entropy", entropy}};
    if (config.model.attn.gate == GatePosition::sdpa_output) j["gated_entropy"] = gated_entropy;
    return j.dump();
}

struct Stats {
    double mean = NAN, spread = NAN;  // spread: half the range over seeds
};
Stats stats(const std::vector<double>& v) {
    if (v.empty()) return {};
    double sum = 0;
    for (double x : v) sum += x;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return {sum / double(v.size()), (*hi - *lo) / 2};
}

// One CSV line; a field holding a comma or a quote is quoted (RFC 4180), as our names have commas.
std::string csv_line(const std::vector<std::string>& fields) {
    std::string line;
    for (size_t i = 0; i < fields.size(); ++i) {
        const std::string& f = fields[i];
        std::string cell = f;
        if (f.find_first_of(",\"") != std::string::npos) {
            cell = "\"";
            for (char c : f) cell += c == '"' ? std::string("\"\"") : std::string(1, c);
            cell += "\"";
        }
        line += (i ? "," : "") + cell;
    }
    return line + "\n";
}

std::string fmt(const char* format, double x) {
    if (std::isnan(x)) return "-";
    char text[64];
    std::snprintf(text, sizeof text, format, x);
    return text;
}

}  // namespace

int main(int argc, char** argv) {
    Settings s;
    bool quick = false;
    std::string out;
    CLI::App app{"Tutorial 08: gate position, function, sharing, init and FFN ablations on a small LM"};
    app.add_flag("--quick", quick, "a one-minute version: one seed, 30 steps");
    app.add_option("--jobs", s.jobs, "runs trained at the same time (one process each)")->check(CLI::PositiveNumber);
    app.add_option("--out", out, "output folder (default: tutorials/08_gate_ablation/results)");
    app.add_option("--steps", s.steps, "training steps per run")->check(CLI::PositiveNumber);
    app.add_option("--seeds", s.seeds, "seeds per variant")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    if (quick) {  // smaller defaults; options given on the command line still win
        if (!app.count("--steps")) s.steps = 30;
        if (!app.count("--seeds")) s.seeds = 1;
        s.analysis_batches = 1;
        s.out = "build/tutorials/08_quick";
    }
    if (!out.empty()) s.out = out;

    const auto start = std::chrono::steady_clock::now();
    const auto data = std::make_shared<const TextDataset>(load_documents({kDefaultCorpus}));
    const std::vector<Variant> all = variants();
    struct Run {
        size_t variant;
        uint64_t seed;
    };
    std::vector<Run> runs;
    for (uint64_t seed = 1; seed <= uint64_t(s.seeds); ++seed)
        for (size_t v = 0; v < all.size(); ++v) runs.push_back({v, seed});
    const TrainConfig base = train_config(s, all[0], 1);
    std::printf("model: tiny preset, %lld layers, d_model %lld, %lld heads, RoPE; batch %lld x %lld tokens\n",
                (long long)base.model.n_layers, (long long)base.model.d_model, (long long)base.model.attn.n_heads,
                (long long)base.batch_size, (long long)base.seq_len);
    std::printf("schedule: %lld steps, lr %g, warmup %lld, cosine to 0.1 x peak; analysis on %lld validation batches\n",
                (long long)base.steps, base.lr, (long long)base.warmup, (long long)s.analysis_batches);
    std::printf("%zu variants x %lld seeds = %zu runs, %d at a time:\n", all.size(), (long long)s.seeds, runs.size(), s.jobs);

    const std::vector<std::string> texts = tutorial::run_in_processes(
        static_cast<int64_t>(runs.size()), s.jobs,
        [&](int64_t i) { return train_one(s, all[runs[i].variant], runs[i].seed, data); });
    std::vector<nlohmann::json> results;
    for (const std::string& t : texts) results.push_back(nlohmann::json::parse(t));

    // ---- per variant: mean ± half range over seeds
    auto values = [&](size_t v, const char* key) {
        std::vector<double> out;
        for (size_t i = 0; i < runs.size(); ++i)
            if (runs[i].variant == v && !results[i][key].is_null()) out.push_back(results[i][key].get<double>());
        return out;
    };
    std::vector<Stats> loss(all.size()), share(all.size()), gate(all.size()), sparse(all.size()), hidden(all.size());
    for (size_t v = 0; v < all.size(); ++v) {
        loss[v] = stats(values(v, "val_loss"));
        share[v] = stats(values(v, "first_token_share"));
        gate[v] = stats(values(v, "gate_mean"));
        sparse[v] = stats(values(v, "gate_below_0_1"));
        hidden[v] = stats(values(v, "max_abs_hidden"));
    }
    std::printf("\n%-24s  %-18s  %-17s  %-9s  %-8s  %-6s  %s\n", "variant", "val loss (nats)", "first-token share",
                "gate mean", "gate<0.1", "max|h|", "group");
    std::string table_csv = csv_line({"group", "variant", "val_loss_mean", "val_loss_half_range", "first_token_share",
                                      "first_token_share_half_range", "gate_mean", "gate_below_0_1", "mean_max_abs_hidden"});
    std::string group;
    for (size_t v = 0; v < all.size(); ++v) {
        if (all[v].group != group) std::printf("%s", group.empty() ? "" : "\n");
        group = all[v].group;
        std::printf("%-24s  %.4f ± %-9s  %.3f ± %-9s  %-9s  %-8s  %6.2f  %s\n", all[v].name.c_str(), loss[v].mean,
                    fmt("%.4f", loss[v].spread).c_str(), share[v].mean, fmt("%.3f", share[v].spread).c_str(),
                    fmt("%.3f", gate[v].mean).c_str(), fmt("%.3f", sparse[v].mean).c_str(), hidden[v].mean, group.c_str());
        auto cell = [](double x) { return std::isnan(x) ? std::string() : fmt("%.6f", x); };  // empty: no gate
        table_csv += csv_line({all[v].group, all[v].name, cell(loss[v].mean), cell(loss[v].spread), cell(share[v].mean),
                               cell(share[v].spread), cell(gate[v].mean), cell(sparse[v].mean), cell(hidden[v].mean)});
    }
    std::printf("(± is half the range over %lld seeds; the other columns are means over seeds, and gate statistics\n"
                " over gated layers; max|h| is the largest |hidden state| of each block's output, averaged over layers)\n",
                (long long)s.seeds);

    // ---- the two published rankings, measured here
    auto index_of = [&](const std::string& short_name) {
        for (size_t v = 0; v < all.size(); ++v)
            if (all[v].short_name == short_name) return v;
        throw std::logic_error("no variant " + short_name);
    };
    auto ranking = [&](const char* title, std::vector<std::string> names) {
        std::sort(names.begin(), names.end(),
                  [&](const std::string& a, const std::string& b) { return loss[index_of(a)].mean < loss[index_of(b)].mean; });
        std::printf("%s", title);
        for (size_t k = 0; k < names.size(); ++k) {
            const size_t v = index_of(names[k]);
            std::printf("%s%s %.4f±%.4f", k ? " < " : "", names[k].c_str(), loss[v].mean, loss[v].spread);
        }
        std::printf("\n");
    };
    std::printf("\nranking by validation loss (lower is better):\n");
    ranking("  article's positions (article: G1 > G4 > G2 > G5 > G3): ", {"G1", "G2", "G3", "G4", "G5", "base"});
    ranking("  paper's positions (paper: G1 > value >> key, query, dense output = G5): ",
            {"G1", "value", "key", "query", "G5", "base"});

    // ---- 7.3: plain vs gated entropy per layer of the trained G1 model (mean over seeds)
    const size_t g1 = index_of("G1");
    const size_t L = base.model.n_layers;
    std::vector<double> plain(L, 0), gated(L, 0);
    std::printf("\narticle 7.3, trained G1 model: attention entropy per layer (nats, mean over seeds)\n");
    std::printf("layer  plain entropy  gated entropy\n");
    for (size_t l = 0; l < L; ++l) {
        for (size_t i = 0; i < runs.size(); ++i)
            if (runs[i].variant == g1) {
                plain[l] += results[i]["entropy"][l].get<double>() / double(s.seeds);
                gated[l] += results[i]["gated_entropy"][l].get<double>() / double(s.seeds);
            }
        std::printf("%5zu  %13.3f  %13.3f\n", l, plain[l], gated[l]);
    }

    // ---- files
    const fs::path dir = s.out;
    fs::create_directories(dir);
    std::string runs_csv = csv_line({"variant", "seed", "val_loss", "first_token_share", "sink_head_share", "gate_mean",
                                     "gate_below_0_1", "mean_max_abs_hidden", "seconds"});
    nlohmann::ordered_json summary = {{"steps", s.steps}, {"seeds", s.seeds}, {"runs", nlohmann::ordered_json::array()}};
    for (size_t i = 0; i < runs.size(); ++i) {
        const nlohmann::json& j = results[i];
        auto num = [&](const char* key) { return j[key].is_null() ? std::string("") : fmt("%.6f", j[key].get<double>()); };
        runs_csv += csv_line({all[runs[i].variant].name, std::to_string(runs[i].seed), num("val_loss"),
                              num("first_token_share"), num("sink_head_share"), num("gate_mean"), num("gate_below_0_1"),
                              num("max_abs_hidden"), num("seconds")});
        nlohmann::ordered_json r = {{"group", all[runs[i].variant].group}, {"variant", all[runs[i].variant].name},
                                    {"seed", runs[i].seed}};
        r.update(j);
        summary["runs"].push_back(r);
    }
    summary["g1_entropy"] = {{"plain", plain}, {"gated", gated}};
    write_text_file(dir / "runs.csv", runs_csv);
    write_text_file(dir / "table.csv", table_csv);
    write_text_file(dir / "summary.json", summary.dump(1) + "\n");

    std::vector<std::string> bars;
    std::vector<double> delta, shares;
    for (size_t v = 0; v < all.size(); ++v) {
        bars.push_back(all[v].short_name);
        delta.push_back(loss[v].mean - loss[index_of("base")].mean);
        shares.push_back(share[v].mean);
    }
    ChartOptions chart;
    chart.width = 1100;
    chart.title = "Validation loss minus the baseline's (mean over seeds; lower is better)";
    chart.y_label = "Δ validation loss (nats/byte)";
    write_text_file(dir / "loss_vs_baseline.svg", svg_bar_chart(bars, {{"Δ loss vs baseline", delta, ""}}, chart));
    chart.title = "First-token attention share (mean over heads, layers, queries; seeds)";
    chart.y_label = "attention on position 0";
    chart.reference_y = 0.3;
    chart.reference_label = "sink threshold 0.3";
    write_text_file(dir / "first_token_share.svg", svg_bar_chart(bars, {{"first-token share", shares, ""}}, chart));
    std::vector<std::string> layers;
    for (size_t l = 0; l < L; ++l) layers.push_back("layer " + std::to_string(l));
    ChartOptions entropy_chart;
    entropy_chart.title = "Trained G1 model: attention entropy, plain vs gated (article 7.3)";
    entropy_chart.y_label = "entropy (nats)";
    write_text_file(dir / "g1_entropy.svg",
                    svg_bar_chart(layers, {{"plain entropy", plain, ""}, {"gated entropy", gated, ""}}, entropy_chart));

    const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 60;
    const double cpu_minutes = tutorial::children_cpu_seconds() / 60;
    std::printf("\nwrote %s/{runs.csv, table.csv, summary.json, loss_vs_baseline.svg, first_token_share.svg, "
                "g1_entropy.svg} in %.1f min (%.1f CPU-min)\n",
                s.out.c_str(), minutes, cpu_minutes);
    return 0;
}
