// Tutorial 15 — the shipped hybrid against full attention.
//
// The question. Qwen3-Next and Qwen3.5 ship the paper's G1 gate in a hybrid: three Gated
// DeltaNet (linear attention) layers before each full-attention one. Does the sink the gate
// removes still form on the few softmax layers left, does the gate still remove it, and what
// does the hybrid buy? We train full-attention and 3:1 hybrid models of the same size, with and
// without G1 on the full-attention layers, and read them with tutorials 06 and 07's measures:
//   (a) Bigram-Backcopy, tutorial 06's strong sink, on four layers: α on BOS and the gate at
//       idle queries of the full-attention layers, copy accuracy, against a control whose
//       other layers are FFNs alone (copy_task.cpp)
//   (b) tutorial 07's 8-layer LM at a learning rate too high for its baseline: final loss, the
//       full layers' largest attention logit and share on BOS, and what dropping BOS from their
//       KV caches costs, as tutorial 14's part (d) measures it (high_rate.cpp)
//   (c) tokens/s and decoding memory against sequence length, the full model against the
//       hybrid (throughput.cpp)
// and print the tables (table.cpp).
//
// Run from the repository root (OMP_NUM_THREADS=1: two trainings at a time, one thread each):
//   ./build/tutorials/tutorial_15_hybrid           all three parts
//   ./build/tutorials/tutorial_15_hybrid --quick   part (a), seed 1, 100 steps
//   ... --parts a --copy-layers 4 --softmax-layer 0   part (a) with its softmax layer first
// --out DIR writes results.json there (tutorials/15_hybrid/results: the README says what ran).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/processes.h"
#include "common/timing.h"
#include "hybrid.h"

using namespace tutorial;
using namespace hybrid;

int main(int argc, char** argv) {
    ExperimentOptions options;
    int64_t seeds = 0, steps = 0, lm_seeds = 2, lm_steps = 500;
    double lr = 0, lm_lr = 1e-1;
    Throughput throughput;
    CopyLayout layout;
    int64_t softmax_layer = -1;
    bool controls_only = false;
    std::string parts = "abc";
    CLI::App app{"Tutorial 15: the shipped hybrid against full attention"};
    add_quick_and_out(app, options, "part (a) on seed 1, 100 steps",
                      "tutorials/15_hybrid/results");
    app.add_option("--jobs", options.jobs, "trainings at the same time (one process each)")->check(CLI::PositiveNumber);
    app.add_option("--parts", parts, "which parts to run, any of a, b and c (--quick: a)")
        ->check([](const std::string& p) {
            return !p.empty() && p.find_first_not_of("abc") == std::string::npos ? ""
                                                                                  : "takes letters of abc, not '" + p + "'";
        })
        ->capture_default_str();
    app.add_option("--seeds", seeds, "part (a): seeds 1 ... N (2; --quick 1)")->check(CLI::PositiveNumber);
    app.add_option("--steps", steps, "part (a): training steps (600; --quick 100)")->check(CLI::PositiveNumber);
    app.add_option("--lr", lr, "part (a): peak learning rate (06's 1e-2)")->check(CLI::PositiveNumber);
    app.add_option("--copy-layers", layout.layers, "part (a): layers, one of them softmax attention")
        ->check(CLI::Range(1, 16))
        ->capture_default_str();
    app.add_option("--softmax-layer", softmax_layer, "part (a): which layer, 0 ... layers - 1 (the last)");
    app.add_flag("--controls-only", controls_only, "part (a): the FFN-only control and its G1, not the hybrids");
    app.add_option("--lm-seeds", lm_seeds, "part (b): seeds 1 ... N")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--lm-steps", lm_steps, "part (b): training steps")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--lm-lr", lm_lr, "part (b): peak learning rate")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--max-t", throughput.max_t, "part (c): the longest sequence (T = 256, 512, ... up to it)")
        ->check(CLI::Range(256, 1 << 16))
        ->capture_default_str();
    app.add_option("--reps", throughput.reps, "part (c): timed passes per model and T")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    line_buffered_stdout();
    layout.softmax_layer = softmax_layer < 0 ? layout.layers - 1 : softmax_layer;
    if (softmax_layer < -1 || layout.softmax_layer >= layout.layers) {
        std::fprintf(stderr, "tutorial_15_hybrid: --softmax-layer %lld is not one of the %lld layers (0 ... %lld)\n",
                     (long long)softmax_layer, (long long)layout.layers, (long long)layout.layers - 1);
        return 1;
    }

    Runs runs;
    runs.setup = copy_setup(options.quick);
    runs.layout = layout;
    if (seeds > 0) runs.setup.seeds = seeds;
    if (steps > 0) runs.setup.steps = steps, runs.setup.warmup = std::max<int64_t>(1, steps / 20);
    if (lr > 0) runs.setup.lr = lr;
    // 07's --quick setting: its rate 0.1 is too high for the baseline, 500 steps (07: 2000).
    RunSettings& h = runs.high_rate;
    h.steps = lm_steps, h.warmup = std::max<int64_t>(1, lm_steps / 20), h.lr = lm_lr;
    if (options.quick) parts = "a";
    const auto part = [&](char p) { return parts.find(p) != std::string::npos; };
    // copy_architectures() lists the two controls first
    const int64_t Ma = controls_only ? 2 : std::ssize(copy_architectures()), M = std::ssize(architectures());
    if (part('a'))
        std::printf("(a) Bigram-Backcopy as tutorial 06's a3 on %lld layer%s of 1 head, the softmax one layer %lld, "
                    "d %lld; %lld steps at lr %g, weight decay %g; seeds 1-%lld\n",
                    (long long)layout.layers, layout.layers == 1 ? "" : "s", (long long)layout.softmax_layer,
                    (long long)runs.setup.d_model, (long long)runs.setup.steps, runs.setup.lr, runs.setup.weight_decay,
                    (long long)runs.setup.seeds);
    if (part('b'))
        std::printf("(b) tutorial 07's LM: %lld layers x %lld, %lld heads; %lld steps at lr %g; seeds 1-%lld; the "
                    "full layers' caches hold %lld of %lld tokens\n",
                    (long long)h.layers, (long long)h.d_model, (long long)h.heads, (long long)h.steps, h.lr,
                    (long long)lm_seeds, (long long)runs.eviction.cache, (long long)runs.eviction.length);
    if (part('c'))
        std::printf("(c) (b)'s models, T = 256 ... %lld, %lld passes each\n", (long long)throughput.max_t,
                    (long long)throughput.reps);

    // Every training, two at a time: (a) for each model and seed, then (b); then (c) alone.
    const auto start = Clock::now();
    const int64_t n_copy = part('a') ? Ma * runs.setup.seeds : 0, n = n_copy + (part('b') ? M * lm_seeds : 0);
    std::printf("%lld trainings, %d at a time:\n", (long long)n, options.jobs);
    const std::vector<std::string> results = run_in_processes(n, options.jobs, [&](int64_t i) {
        if (i < n_copy) return train_copy(runs.setup, layout, copy_architectures()[i % Ma], i / Ma + 1);
        RunSettings s = h;
        s.seed = uint64_t((i - n_copy) / M + 1);
        return train_high_rate(s, runs.eviction, architectures()[(i - n_copy) % M]);
    });
    runs.copy.assign(part('a') ? Ma : 0, {}), runs.high.assign(part('b') ? M : 0, {});
    for (int64_t i = 0; i < n; ++i)
        (i < n_copy ? runs.copy[i % Ma] : runs.high[(i - n_copy) % M]).push_back(results[i]);
    if (part('c')) {
        std::printf("(c) alone:\n");
        runs.throughput = run_in_processes(1, 1, [&](int64_t) { return measure_throughput(h, throughput); }).front();
    }
    report(runs, options.out);
    std::printf("\ntotal time %s\n", minutes_and_cpu_minutes(start).c_str());
    return 0;
}
