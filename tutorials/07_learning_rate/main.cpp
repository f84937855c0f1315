// Tutorial 07 — learning-rate stability (the paper's Table 4 / Figure 1; docs/paper.md,
// "Training stability and the learning rate").
//
// Does the G1 gate (σ(x W_g) ⊙ SDPA output) let a model train at larger learning rates?
// We sweep the peak learning rate for a standard attention LM and the same LM with the
// gate, on the same data, schedule, steps and seeds, and report for every run its final
// validation loss, largest gradient norm, loss spikes and whether it diverged. Then we search
// for a regime in which the baseline breaks: no gradient clipping, no warmup, a deeper and
// narrower model, bfloat16 matmul inputs, weight decay on matrices only (training.h).
//
// Run from the repository root (two runs at a time, one thread each):
//   OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive ./build/tutorials/tutorial_07_learning_rate
// runs the reference sweep (8 layers of width 64, five rates, two seeds); --regimes all adds the
// search. --quick is a one-minute version; --out DIR writes the results there (the committed
// ones: --out tutorials/07_learning_rate/results); --replot DIR draws the pictures of a regime's
// folder again from its files, without training.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/processes.h"
#include "common/results.h"
#include "common/timing.h"
#include "sweep.h"

using namespace gg::nn;
using namespace tutorial;

namespace {

// 1. The regimes. The reference sweeps every rate; each regime of the search adds one change
//    to the one before it, towards the setting most likely to break a baseline.
std::vector<Regime> all_regimes() {
    const std::vector<double> rates{1e-2, 3e-2, 1e-1, 3e-1, 1.0};  // a search starts at 1e-1
    Regime reference{"reference", "8 layers x 64, clip 1, warmup 10, weight decay 0.1 on all, float32", RunSettings{},
                     rates, true};
    std::vector<Regime> r{reference};
    auto next = [&](std::string name, std::string what, auto change) {
        Regime g = r.back();
        g.name = std::move(name), g.what = std::move(what), g.lrs = rates, g.start = 2, g.every_rate = false;
        change(g.settings);
        r.push_back(g);
    };
    next("no_clip", "no gradient clipping", [](RunSettings& s) { s.clip = 0; });
    next("no_warmup", "+ no warmup", [](RunSettings& s) { s.warmup = 0; });
    next("deep_narrow", "+ 16 layers x 32 (2 heads)", [](RunSettings& s) { s.layers = 16, s.d_model = 32, s.heads = 2; });
    next("bf16", "+ bfloat16 matmul inputs", [](RunSettings& s) { s.bf16 = true; });
    next("decay_matrices", "+ weight decay on matrices only", [](RunSettings& s) { s.decay_matrices_only = true; });
    return r;
}

// 2. A loss spike (our definition, stated in the README): a step whose training loss exceeds
//    the minimum of the previous 20 steps' losses by more than 1 nat. Consecutive such steps
//    are one spike. Hard batches alone (the same ones in every run of a seed) reach 0.85.
constexpr int64_t kSpikeWindow = 20;
constexpr double kSpikeNats = 1.0;

int64_t count_spikes(const std::vector<double>& loss) {
    int64_t spikes = 0;
    bool in_spike = false;
    for (size_t t = 1; t < loss.size(); ++t) {
        const size_t from = t > kSpikeWindow ? t - kSpikeWindow : 0;
        const double running_min = *std::min_element(loss.begin() + from, loss.begin() + t);
        const bool over = loss[t] > running_min + kSpikeNats;
        spikes += over && !in_spike;
        in_spike = over;
    }
    return spikes;
}

// 3. One training run, in a child process: its summary and per-step log as JSON. It diverged
//    when its loss stopped being finite or it ended above the unigram entropy (worse than a
//    model that ignores context).
std::string train_one(const Regime& regime, const Run& r, const std::shared_ptr<const TextDataset>& data,
                      double unigram) {
    RunSettings s = regime.settings;
    s.gated = r.gated, s.lr = r.lr, s.seed = r.seed;
    const RunLog log = train_run(s, data);
    const int64_t warmup = std::min(s.warmup, s.steps - 1);  // gradients after it: the first come from the init
    const auto after = log.grad_norm.begin() + std::min<int64_t>(warmup, std::ssize(log.grad_norm));
    const double max_grad = after == log.grad_norm.end() ? NAN : *std::max_element(after, log.grad_norm.end());
    const int64_t spikes = count_spikes(log.loss);
    const bool diverged = log.nonfinite || !(log.val_loss < unigram);
    std::printf("  %-14s %-8s lr %.1e seed %llu: val loss %.4f, max |g| %8.2f, spikes %lld, %s (%.0f s)\n",
                regime.name.c_str(), r.model().c_str(), r.lr, static_cast<unsigned long long>(r.seed), log.val_loss,
                max_grad, static_cast<long long>(spikes), diverged ? "DIVERGED" : "ok", log.seconds);
    nlohmann::json j = {{"val_loss", log.val_loss}, {"max_grad_norm", max_grad}, {"spikes", spikes},
                        {"diverged", diverged},     {"seconds", log.seconds},    {"loss", log.loss},
                        {"grad_norm", log.grad_norm}};
    return j.dump();
}

// 4. The search for each model's largest stable rate on a regime's grid. A rate is stable
//    when every seed at it neither diverged nor spiked; so seed 1 runs first, and the other
//    seeds only where seed 1 was stable. From the regime's starting rate a model walks up
//    while stable, or down while unstable, and stops where the answer changes: the largest
//    stable rate and the next one up are then measured (stability assumed to get only harder
//    higher up, which the reference sweep of every rate checks). Each wave trains every run
//    still to do, two at a time.
struct Walk {
    size_t k;           // index of the rate being tried
    int direction = 0;  // +1 going up, -1 going down, 0 not yet moved
    bool done = false;
};

void search(const std::vector<Regime>& regimes, int64_t seeds, int jobs, const std::shared_ptr<const TextDataset>& data,
            double unigram, std::vector<Run>& runs, std::vector<nlohmann::json>& results) {
    std::vector<std::array<Walk, 2>> walks;
    for (const Regime& r : regimes) walks.push_back({Walk{r.every_rate ? 0 : r.start}, Walk{r.every_rate ? 0 : r.start}});
    auto ran = [&](size_t g, bool gated, double lr) {
        int64_t n = 0;
        for (const Run& r : runs) n += r.regime == g && r.gated == gated && r.lr == lr;
        return n;
    };
    while (true) {
        std::vector<Run> wave;
        for (size_t g = 0; g < regimes.size(); ++g)
            for (bool gated : {false, true}) {
                const Walk& w = walks[g][gated];
                if (w.done) continue;
                const double lr = regimes[g].lrs[w.k];
                const int64_t from = ran(g, gated, lr) + 1, to = regimes[g].every_rate || from > 1 ? seeds : 1;
                for (int64_t seed = from; seed <= to; ++seed) wave.push_back({g, gated, lr, static_cast<uint64_t>(seed)});
            }
        if (wave.empty()) return;
        for (const std::string& text : run_in_processes(std::ssize(wave), jobs, [&](int64_t i) {
                 return train_one(regimes[wave[i].regime], wave[i], data, unigram);
             }))
            results.push_back(nlohmann::json::parse(text));
        runs.insert(runs.end(), wave.begin(), wave.end());
        for (size_t g = 0; g < regimes.size(); ++g)
            for (bool gated : {false, true}) {
                Walk& w = walks[g][gated];
                if (w.done) continue;
                const double lr = regimes[g].lrs[w.k];
                const bool stable = stable_at(runs, results, g, gated, lr);
                if (stable && ran(g, gated, lr) < seeds) continue;  // seed 1 passed: the others next
                const int step = regimes[g].every_rate ? 1 : stable ? +1 : -1;
                const bool turn = w.direction != 0 && step != w.direction;
                const size_t next = w.k + step;  // wraps below 0 to a huge index
                w.done = turn || next >= regimes[g].lrs.size();
                w.k = next, w.direction = step;
            }
    }
}

}  // namespace

int main(int argc, char** argv) {
    ExperimentOptions options;
    std::vector<std::string> names{"reference"};
    int64_t seeds = 2, steps = 0;
    std::vector<double> lrs;
    CLI::App app{"Tutorial 07: learning-rate sweeps, baseline vs G1, and a search for a regime where the baseline breaks"};
    add_quick_and_out(app, options, "a one-minute version: 4-layer models, 60 steps, 3 rates, one seed",
                      "tutorials/07_learning_rate/results");
    add_sweep_options(app, options, steps, seeds);
    app.add_option("--regimes", names, "reference, no_clip, no_warmup, deep_narrow, bf16, decay_matrices, or all");
    app.add_option("--lrs", lrs, "peak learning rates (instead of each regime's own)");
    add_replot(app, options);
    CLI11_PARSE(app, argc, argv);
    if (!options.replot.empty()) {
        plot_regime(options.replot, read_regime(options.replot));
        std::printf("redrew %s/final_loss_vs_lr.svg, loss_curves.svg from summary.json, runs.csv, steps.csv\n",
                    options.replot.c_str());
        return 0;
    }

    std::vector<Regime> regimes;
    for (const Regime& r : all_regimes())
        if (names == std::vector<std::string>{"all"} || std::count(names.begin(), names.end(), r.name)) regimes.push_back(r);
    if (regimes.size() != names.size() && names != std::vector<std::string>{"all"}) {
        std::fprintf(stderr, "--regimes: unknown name among the ones given\n");
        return 1;
    }
    for (Regime& r : regimes) {
        if (options.quick) {
            r.settings.layers = std::min<int64_t>(r.settings.layers, 4), r.settings.steps = 60;
            r.lrs = {1e-2, 1e-1, 1.0};
            if (!app.count("--seeds")) seeds = 1;
        }
        if (steps > 0) r.settings.steps = steps;
        if (!lrs.empty()) r.lrs = lrs, std::sort(r.lrs.begin(), r.lrs.end());
        if (options.quick || !lrs.empty()) r.start = r.lrs.size() / 2;
    }

    const auto start = Clock::now();
    const auto data = std::make_shared<const TextDataset>(load_documents({kDefaultCorpus}));
    const double unigram = data->unigram_entropy();
    std::printf("every run: SwiGLU FFN, RoPE, gpt2 init, batch 8 x 64 tokens, cosine to 0.1 x peak, AdamW (0.9, 0.95), "
                "seeds 1..%lld\n",
                static_cast<long long>(seeds));
    for (const Regime& r : regimes)
        std::printf("  %-14s %s; %lld steps\n", r.name.c_str(), r.what.c_str(), static_cast<long long>(r.settings.steps));
    std::printf("unigram entropy of the training bytes: %.4f nats (a run that ends above it diverged)\n", unigram);
    std::vector<Run> runs;
    std::vector<nlohmann::json> results;
    search(regimes, seeds, options.jobs, data, unigram, runs, results);

    std::vector<json> summaries;
    for (size_t g = 0; g < regimes.size(); ++g) {
        summaries.push_back(summarise(regimes[g], g, runs, results, unigram, options.quick));
        if (!options.out.empty())
            write_regime_results(std::filesystem::path(options.out) / regimes[g].name, regimes[g], g, runs, results,
                                 unigram, summaries.back());
    }
    print_search_table(regimes, summaries, options.out, options.quick);
    std::printf("%zu runs in %s\n", runs.size(), minutes_and_cpu_minutes(start).c_str());
    return 0;
}
