// Tutorial 08 — where the gate goes and how it is built (the paper's Tables 1–2 and the
// walk-through's ablations, docs/paper.md), plus the gated attention entropy.
//
// Which gate position helps most, and do the gate's function, sharing, initialisation and
// the FFN matter? We train the same small LM (the "tiny" preset, fewer steps) once per
// variant and seed:
//   positions:   baseline, the article's G1..G5, the paper's value / key / query gates (both
//                in docs/paper.md)
//   for G1:      gate function (sigmoid, tanh, relu, silu), sharing (element-wise,
//                head-wise, shared), init (zero, Kaiming, Xavier), with/without SwiGLU FFN
// and report validation loss (mean ± half the seed range), the first-token attention
// share and the gate statistics (analyze() on validation batches).
//
// Run from the repository root (two runs at a time, one thread each; about 15 minutes):
//   OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive ./build/tutorials/tutorial_08_gate_ablation
// --quick is a one-minute version; --out DIR writes the results there (the committed ones:
// --out tutorials/08_gate_ablation/results).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/processes.h"
#include "common/results.h"
#include "common/timing.h"
#include "gatedgrad.h"
#include "report.h"

using namespace gg::nn;
using namespace tutorial;

namespace {

// 1. The variants. The reference gate is the article's G1 with the paper's defaults:
//    sigmoid, element-wise, zero init (σ(0) = ½ at the start), with the SwiGLU FFN. Each
//    G1 ablation changes one of those. (struct Variant is in report.h, with the table.)
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
        {"position (article)", "baseline (no gate)", "base", position(GatePosition::none)},
        {"position (article)", "G1 SDPA output", "G1", position(GatePosition::sdpa_output)},
        {"position (article)", "G2 scores, gate from x", "G2", position(GatePosition::scores_from_x)},
        {"position (article)", "G3 scores, gate from q", "G3", position(GatePosition::scores_from_query)},
        {"position (article)", "G4 residual", "G4", position(GatePosition::residual)},
        {"position (article)", "G5 after W_O", "G5", position(GatePosition::after_merge)},
        {"position (paper)", "value gate", "value", position(GatePosition::value)},
        {"position (paper)", "key gate", "key", position(GatePosition::key)},
        {"position (paper)", "query gate", "query", position(GatePosition::query)},
        {"G1 function", "G1 (tanh+1)/2", "tanh", g1([](AttentionOptions& a) { a.gate_fn = GateFunction::tanh_half; })},
        {"G1 function", "G1 relu", "relu", g1([](AttentionOptions& a) { a.gate_fn = GateFunction::relu; })},
        {"G1 function", "G1 relu, Kaiming init", "relu-K", g1([](AttentionOptions& a) {
             a.gate_fn = GateFunction::relu;
             a.gate_init = GateInit::kaiming;
         })},
        {"G1 function", "G1 silu", "silu", g1([](AttentionOptions& a) { a.gate_fn = GateFunction::silu; })},
        {"G1 sharing", "G1 head-wise", "head", g1([](AttentionOptions& a) { a.sharing = GateSharing::headwise; })},
        {"G1 sharing", "G1 shared by heads", "shared", g1([](AttentionOptions& a) { a.sharing = GateSharing::shared; })},
        {"G1 init", "G1 Kaiming init", "kaim", g1([](AttentionOptions& a) { a.gate_init = GateInit::kaiming; })},
        {"G1 init", "G1 Xavier init", "xav", g1([](AttentionOptions& a) { a.gate_init = GateInit::xavier; })},
        {"FFN", "baseline, no FFN", "b-noF", without_ffn(GatePosition::none)},
        {"FFN", "G1, no FFN", "G1-noF", without_ffn(GatePosition::sdpa_output)},
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

}  // namespace

int main(int argc, char** argv) {
    Settings s;
    ExperimentOptions options;
    CLI::App app{"Tutorial 08: gate position, function, sharing, init and FFN ablations on a small LM"};
    add_quick_and_out(app, options, "a one-minute version: one seed, 30 steps", "tutorials/08_gate_ablation/results");
    add_sweep_options(app, options, s.steps, s.seeds);
    CLI11_PARSE(app, argc, argv);
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

    // 4. The table (mean ± half the range over seeds; report.cpp), and the two published
    //    rankings measured here.
    const std::vector<Row> rows = rows_of(all, runs, results);
    const std::string table_csv = print_table(all, rows, s.seeds);
    std::printf("\nranking by validation loss (lower is better):\n");
    if (options.quick) {  // 30 steps, one seed: too short for an order to mean anything
        std::printf("  (--quick: runs too short to rank; the full run's result is in README.md)\n");
    } else {
        print_ranking("  article's positions (article: G1 > G4 > G2 > G5 > G3): ",
                      {"G1", "G2", "G3", "G4", "G5", "base"}, all, rows);
        print_ranking("  paper's positions (paper: G1 > value >> key, query, dense output = G5): ",
                      {"G1", "value", "key", "query", "G5", "base"}, all, rows);
    }

    // 5. Plain vs gated entropy (nn/analysis/analysis.h) per layer of the trained G1 model,
    //    mean over seeds.
    const size_t L = base.model.n_layers;
    std::vector<double> plain(L, 0), gated(L, 0);
    std::printf("\ntrained G1 model: plain and gated attention entropy per layer (nats, mean over seeds)\n");
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
    // 6. The files: every run, the table, the summary and three pictures (report.cpp).
    write_results(options.out, s.steps, s.seeds, all, runs, results, rows, table_csv, plain, gated);
    std::printf("\nwrote %s/{runs.csv, table.csv, summary.json, loss_vs_baseline.svg, first_token_share.svg, "
                "g1_entropy.svg} in %s\n",
                options.out.c_str(), minutes_and_cpu_minutes(start).c_str());
    return 0;
}
