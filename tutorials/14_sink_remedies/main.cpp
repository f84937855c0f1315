// Tutorial 14 — the sink remedies side by side (docs/paper.md, "The remedies for the sink").
//
// The question. Tutorials 06 and 07 asked the paper's own question: does the G1 gate remove
// the attention sink and tame a high learning rate? The field gives other answers too: QK-norm,
// a learned sink logit per head (gpt-oss), softmax1, sigmoid attention, softpick, and latent
// attention (MLA) with or without the gate. Which one does what? We train all nine on the same
// tasks and read them with the same measures:
//   (a) Bigram-Backcopy, tutorial 06's strong sink: where idle queries put their weight — BOS,
//       the slot, nowhere (a row sum below 1), or behind a closed gate (idle_queries.cpp)
//   (b) tutorial 07's 8-layer LM at a learning rate too high for the baseline: final loss and
//       largest attention logit (high_rate.cpp)
//   (c) the same models' largest activation |h| (high_rate.cpp)
//   (d) (a)'s and (b)'s models read through a KV cache that drops old tokens, BOS with them or
//       not (common/eviction.cpp)
// and print one table (table.cpp); the README sets it beside what the literature reports.
//
// Run from the repository root (OMP_NUM_THREADS=1: two trainings at a time, one thread each):
//   ./build/tutorials/tutorial_14_sink_remedies           all four parts, as committed
//   ./build/tutorials/tutorial_14_sink_remedies --quick   part (a) and (d), seed 1, 300 steps
// --out DIR writes results.json there (the committed ones: --out tutorials/14_sink_remedies/results).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/processes.h"
#include "common/timing.h"
#include "remedies.h"

using namespace tutorial;
using namespace sink_remedies;

int main(int argc, char** argv) {
    ExperimentOptions options;
    std::string part = "abcd";
    int64_t seeds = 5, steps = 0, lm_seeds = 2, lm_steps = 500;
    double lm_lr = 1e-1;
    CLI::App app{"Tutorial 14: the sink remedies side by side"};
    add_quick_and_out(app, options, "parts (a) and (d) on seed 1, 300 steps (about 2 minutes on 2 cores)",
                      "tutorials/14_sink_remedies/results");
    app.add_option("--jobs", options.jobs, "trainings at the same time (one process each)")->check(CLI::PositiveNumber);
    app.add_option("--part", part, "abcd: every part; ad: Bigram-Backcopy and the rolling cache only")
        ->check(CLI::IsMember({"abcd", "ad"}));
    app.add_option("--seeds", seeds, "parts (a), (d): seeds 1 ... N")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--steps", steps, "parts (a), (d): training steps (600; --quick 300)")->check(CLI::PositiveNumber);
    app.add_option("--lm-seeds", lm_seeds, "parts (b), (c): seeds 1 ... N")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--lm-steps", lm_steps, "parts (b), (c): training steps")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--lm-lr", lm_lr, "parts (b), (c): peak learning rate")->check(CLI::PositiveNumber)->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    line_buffered_stdout();

    Runs runs;
    runs.setup = idle_setup(options.quick);
    runs.setup.seeds = options.quick && !app.count("--seeds") ? 1 : seeds;
    if (steps > 0) runs.setup.steps = steps, runs.setup.warmup = std::max<int64_t>(1, steps / 20);
    const bool lm = part == "abcd" && !options.quick;
    // 07's --quick setting: its rate 0.1 is too high for the baseline, 500 steps (07: 2000).
    RunSettings& h = runs.high_rate;
    h.steps = lm_steps, h.warmup = std::max<int64_t>(1, lm_steps / 20), h.lr = lm_lr;
    const int64_t R = std::ssize(remedies());
    std::printf("(a, d) Bigram-Backcopy as tutorial 06's a3: 1 layer, 1 head, d %lld; %lld steps at lr %g, weight "
                "decay %g; seeds 1-%lld; the cache holds %lld of %lld tokens\n",
                (long long)runs.setup.d_model, (long long)runs.setup.steps, runs.setup.lr, runs.setup.weight_decay,
                (long long)runs.setup.seeds, (long long)runs.eviction.cache, (long long)runs.eviction.length);
    if (lm)
        std::printf("(b, c, d) tutorial 07's LM: %lld layers x %lld, %lld heads; %lld steps at lr %g; seeds 1-%lld\n",
                    (long long)h.layers, (long long)h.d_model, (long long)h.heads, (long long)h.steps, h.lr,
                    (long long)lm_seeds);

    // Every training, two at a time: (a, d) for each remedy and seed, then (b, c, d).
    const auto start = Clock::now();
    const int64_t n_idle = R * runs.setup.seeds, n = n_idle + (lm ? R * lm_seeds : 0);
    std::printf("%lld trainings, %d at a time:\n", (long long)n, options.jobs);
    const std::vector<std::string> results = run_in_processes(n, options.jobs, [&](int64_t i) {
        if (i < n_idle) return train_idle(runs.setup, runs.eviction, remedies()[i % R], i / R + 1);
        RunSettings s = h;
        s.seed = uint64_t((i - n_idle) / R + 1);
        return train_high_rate(s, runs.eviction, remedies()[(i - n_idle) % R]);
    });
    runs.idle.assign(R, {}), runs.high.assign(lm ? R : 0, {});
    for (int64_t i = 0; i < n; ++i)
        (i < n_idle ? runs.idle[i % R] : runs.high[(i - n_idle) % R]).push_back(results[i]);
    report(runs, options.out);
    std::printf("\ntotal time %s\n", minutes_and_cpu_minutes(start).c_str());
    return 0;
}
