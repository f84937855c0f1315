// Tutorial 08 — where the gate goes and how it is built (the article's 2.3 and 5.x, the
// paper's Tables 1–2), plus the article's 7.3 gated attention entropy.
//
// Which gate position helps most, and do the gate's function, sharing, initialisation and
// the FFN matter? We train the same small LM (the "tiny" preset, fewer steps) once per
// variant and seed:
//   positions:   baseline, the article's G1..G5, the paper's value / key / query gates
//   for G1:      gate function (sigmoid, tanh, relu, silu), sharing (element-wise,
//                head-wise, shared), init (zero, Kaiming, Xavier), with/without SwiGLU FFN
// and report validation loss (mean ± half the seed range), the first-token attention
// share and the gate statistics (analyze() on validation batches).
//
// Run from the repository root (two runs at a time, one thread each; about 15 minutes):
//   OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive ./build/tutorials/tutorial_08_gate_ablation
// --quick is a one-minute version; --out DIR writes the results there (the committed ones:
// --out tutorials/08_gate_ablation/results); --replot DIR draws DIR's pictures again from its
// summary.json, without training.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/processes.h"
#include "common/results.h"
#include "ablation.h"
#include "common/timing.h"
#include "gatedgrad.h"

using namespace gg::nn;
using namespace tutorial;

namespace {

// 1. The variants. The reference gate is the article's G1 with the paper's defaults:
//    sigmoid, element-wise, zero init (σ(0) = ½ at the start), with the SwiGLU FFN. Each
//    G1 ablation changes one of those.
struct Variant {
    std::string group;       // which question the row answers
    std::string name;        // as printed in the table
    std::string short_name;  // under a bar in the pictures
    std::function<void(LMConfig&)> set;  // applied to the tiny preset's model
};

std::vector<Variant> variants() {
    auto position = [](GatePosition p) { return [p](LMConfig& m) { m.attn.gate = p; }; };
    auto without_ffn = [](GatePosition p) { return [p](LMConfig& m) { m.attn.gate = p, m.ffn = false; }; };
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
        {"FFN (5.4)", "baseline, no FFN", "b-noF", without_ffn(GatePosition::none)},
        {"FFN (5.4)", "G1, no FFN", "G1-noF", without_ffn(GatePosition::sdpa_output)},
    };
}

// 2. The training: the tiny preset, shortened, validated once at the end.
struct Settings {
    int64_t steps = 300, seeds = 2, analysis_batches = 4;
};

TrainConfig train_config(const Settings& s, const Variant& v, uint64_t seed) {
    TrainConfig c = TrainConfig::preset("tiny");
    c.warmup = c.warmup * s.steps / c.steps;  // the preset's share of the run (30 of 600)
    c.steps = s.steps;
    c.eval_every = 0;
    c.seed = seed;
    v.set(c.model);
    return c;
}

// 3. One run in a child process: train, then analyze() the trained model on validation batches.
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

struct Run {
    size_t variant;
    uint64_t seed;
};

// 4. Per variant, over seeds: mean ± half the range.
struct Row {
    Spread loss, share, gate, sparse, hidden;
};

std::vector<Row> rows_of(const std::vector<Variant>& all, const std::vector<Run>& runs,
                         const std::vector<nlohmann::json>& results) {
    auto values = [&](size_t v, const char* key) {
        std::vector<double> out;
        for (size_t i = 0; i < runs.size(); ++i)
            if (runs[i].variant == v && !results[i][key].is_null()) out.push_back(results[i][key].get<double>());
        return out;
    };
    std::vector<Row> rows;
    for (size_t v = 0; v < all.size(); ++v)
        rows.push_back({spread(values(v, "val_loss")), spread(values(v, "first_token_share")),
                        spread(values(v, "gate_mean")), spread(values(v, "gate_below_0_1")),
                        spread(values(v, "max_abs_hidden"))});
    return rows;
}

// A CSV cell: the number, or empty where the column does not apply (a model without a gate).
std::string cell(double x) { return std::isnan(x) ? std::string() : format_or_dash("%.6f", x); }

// Prints the table and returns it as CSV.
std::string print_table(const std::vector<Variant>& all, const std::vector<Row>& rows, int64_t seeds) {
    std::printf("\n%-24s  %-18s  %-17s  %-9s  %-8s  %-6s  %s\n", "variant", "val loss (nats)", "first-token share",
                "gate mean", "gate<0.1", "max|h|", "group");
    std::string csv = csv_line({"group", "variant", "val_loss_mean", "val_loss_half_range", "first_token_share",
                                "first_token_share_half_range", "gate_mean", "gate_below_0_1", "mean_max_abs_hidden"});
    for (size_t v = 0; v < all.size(); ++v) {
        const Row& r = rows[v];
        if (v > 0 && all[v].group != all[v - 1].group) std::printf("\n");
        std::printf("%-24s  %.4f ± %-9s  %.3f ± %-9s  %-9s  %-8s  %6.2f  %s\n", all[v].name.c_str(), r.loss.mean,
                    format_or_dash("%.4f", r.loss.half_range).c_str(), r.share.mean,
                    format_or_dash("%.3f", r.share.half_range).c_str(), format_or_dash("%.3f", r.gate.mean).c_str(),
                    format_or_dash("%.3f", r.sparse.mean).c_str(), r.hidden.mean, all[v].group.c_str());
        csv += csv_line({all[v].group, all[v].name, cell(r.loss.mean), cell(r.loss.half_range), cell(r.share.mean),
                         cell(r.share.half_range), cell(r.gate.mean), cell(r.sparse.mean), cell(r.hidden.mean)});
    }
    std::printf("(± is half the range over %lld seeds; the other columns are means over seeds, and gate statistics\n"
                " over gated layers; max|h| is the largest |hidden state| of each block's output, averaged over layers)\n",
                (long long)seeds);
    return csv;
}

size_t index_of(const std::vector<Variant>& all, const std::string& short_name) {
    for (size_t v = 0; v < all.size(); ++v)
        if (all[v].short_name == short_name) return v;
    throw std::logic_error("no variant " + short_name);
}

// The variants `names`, best (lowest validation loss) first.
void print_ranking(const char* title, std::vector<std::string> names, const std::vector<Variant>& all,
                   const std::vector<Row>& rows) {
    auto loss = [&](const std::string& name) { return rows[index_of(all, name)].loss; };
    std::sort(names.begin(), names.end(), [&](const auto& a, const auto& b) { return loss(a).mean < loss(b).mean; });
    std::printf("%s", title);
    for (size_t k = 0; k < names.size(); ++k)
        std::printf("%s%s %.4f±%.4f", k ? " < " : "", names[k].c_str(), loss(names[k]).mean, loss(names[k]).half_range);
    std::printf("\n");
}

std::vector<VariantBar> bars_of(const std::vector<Variant>& all, const std::vector<Row>& rows) {
    std::vector<VariantBar> bars;
    for (size_t v = 0; v < all.size(); ++v) bars.push_back({all[v].short_name, rows[v].loss, rows[v].share});
    return bars;
}

// 5. The files: every run, the table, the summary and three pictures.
void write_results(const std::filesystem::path& dir, const Settings& s, const std::vector<Variant>& all,
                   const std::vector<Run>& runs, const std::vector<nlohmann::json>& results, const std::vector<Row>& rows,
                   const std::string& table_csv, const std::vector<double>& plain, const std::vector<double>& gated) {
    std::filesystem::create_directories(dir);
    std::string runs_csv = csv_line({"variant", "seed", "val_loss", "first_token_share", "sink_head_share", "gate_mean",
                                     "gate_below_0_1", "mean_max_abs_hidden", "seconds"});
    json summary = {{"steps", s.steps}, {"seeds", s.seeds}, {"runs", json::array()}};
    for (size_t i = 0; i < runs.size(); ++i) {
        const nlohmann::json& j = results[i];
        auto num = [&](const char* key) { return cell(json_number(j[key])); };
        runs_csv += csv_line({all[runs[i].variant].name, std::to_string(runs[i].seed), num("val_loss"),
                              num("first_token_share"), num("sink_head_share"), num("gate_mean"), num("gate_below_0_1"),
                              num("max_abs_hidden"), num("seconds")});
        json r = {{"group", all[runs[i].variant].group}, {"variant", all[runs[i].variant].name}, {"seed", runs[i].seed}};
        r.update(j);
        summary["runs"].push_back(r);
    }
    summary["g1_entropy"] = {{"plain", plain}, {"gated", gated}};
    write_text_file(dir / "runs.csv", runs_csv);
    write_text_file(dir / "table.csv", table_csv);
    write_json(dir / "summary.json", summary, 1);

    plot_results(dir, bars_of(all, rows), plain, gated);
}

// --replot: the pictures of dir again, from the runs in its summary.json.
void replot(const std::filesystem::path& dir, const std::vector<Variant>& all) {
    const SummaryRuns s = read_summary(dir);
    std::vector<Run> runs;
    for (size_t i = 0; i < s.variant.size(); ++i) {
        size_t v = 0;
        while (v < all.size() && all[v].name != s.variant[i]) ++v;
        if (v == all.size()) throw std::runtime_error("summary.json: no variant " + s.variant[i]);
        runs.push_back({v, s.seed[i]});
    }
    plot_results(dir, bars_of(all, rows_of(all, runs, s.results)), s.plain, s.gated);
}

}  // namespace

int main(int argc, char** argv) {
    Settings s;
    ExperimentOptions options;
    CLI::App app{"Tutorial 08: gate position, function, sharing, init and FFN ablations on a small LM"};
    add_quick_and_out(app, options, "a one-minute version: one seed, 30 steps", "tutorials/08_gate_ablation/results");
    add_sweep_options(app, options, s.steps, s.seeds);
    add_replot(app, options);
    CLI11_PARSE(app, argc, argv);
    if (!options.replot.empty()) {
        replot(options.replot, variants());
        std::printf("redrew %s/{loss_vs_baseline,first_token_share,g1_entropy}.svg from summary.json\n",
                    options.replot.c_str());
        return 0;
    }
    if (options.quick) {  // smaller defaults; options given on the command line still win
        if (!app.count("--steps")) s.steps = 30;
        if (!app.count("--seeds")) s.seeds = 1;
        s.analysis_batches = 1;
    }

    const auto start = Clock::now();
    const auto data = std::make_shared<const TextDataset>(load_documents({kDefaultCorpus}));
    const std::vector<Variant> all = variants();
    std::vector<Run> runs;
    for (uint64_t seed = 1; seed <= uint64_t(s.seeds); ++seed)
        for (size_t v = 0; v < all.size(); ++v) runs.push_back({v, seed});
    const TrainConfig base = train_config(s, all[0], 1);
    std::printf("model: tiny preset, %lld layers, d_model %lld, %lld heads, RoPE; batch %lld x %lld tokens\n",
                (long long)base.model.n_layers, (long long)base.model.d_model, (long long)base.model.attn.n_heads,
                (long long)base.batch_size, (long long)base.seq_len);
    std::printf("schedule: %lld steps, lr %g, warmup %lld, cosine to 0.1 x peak; analysis on %lld validation batches\n",
                (long long)base.steps, base.lr, (long long)base.warmup, (long long)s.analysis_batches);
    std::printf("%zu variants x %lld seeds = %zu runs, %d at a time:\n", all.size(), (long long)s.seeds, runs.size(),
                options.jobs);

    std::vector<nlohmann::json> results;
    for (const std::string& text : run_in_processes(std::ssize(runs), options.jobs, [&](int64_t i) {
             return train_one(s, all[runs[i].variant], runs[i].seed, data);
         }))
        results.push_back(nlohmann::json::parse(text));

    // The table, and the two published rankings measured here.
    const std::vector<Row> rows = rows_of(all, runs, results);
    const std::string table_csv = print_table(all, rows, s.seeds);
    std::printf("\nranking by validation loss (lower is better):\n");
    print_ranking("  article's positions (article: G1 > G4 > G2 > G5 > G3): ", {"G1", "G2", "G3", "G4", "G5", "base"},
                  all, rows);
    print_ranking("  paper's positions (paper: G1 > value >> key, query, dense output = G5): ",
                  {"G1", "value", "key", "query", "G5", "base"}, all, rows);

    // Article 7.3: plain vs gated entropy per layer of the trained G1 model (mean over seeds).
    const size_t L = base.model.n_layers;
    std::vector<double> plain(L, 0), gated(L, 0);
    std::printf("\narticle 7.3, trained G1 model: attention entropy per layer (nats, mean over seeds)\n");
    std::printf("layer  plain entropy  gated entropy\n");
    for (size_t l = 0; l < L; ++l) {
        for (size_t i = 0; i < runs.size(); ++i)
            if (runs[i].variant == index_of(all, "G1")) {
                plain[l] += results[i]["entropy"][l].get<double>() / double(s.seeds);
                gated[l] += results[i]["gated_entropy"][l].get<double>() / double(s.seeds);
            }
        std::printf("%5zu  %13.3f  %13.3f\n", l, plain[l], gated[l]);
    }

    if (options.out.empty()) {
        std::printf("\nfinished in %s\n", minutes_and_cpu_minutes(start).c_str());
        return 0;
    }
    write_results(options.out, s, all, runs, results, rows, table_csv, plain, gated);
    std::printf("\nwrote %s/{runs.csv, table.csv, summary.json, loss_vs_baseline.svg, first_token_share.svg, "
                "g1_entropy.svg} in %s\n",
                options.out.c_str(), minutes_and_cpu_minutes(start).c_str());
    return 0;
}
