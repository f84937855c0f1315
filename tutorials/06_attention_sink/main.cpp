// Tutorial 06 — the attention sink (docs/paper.md) and what the G1 gate does to it.
//
// The question. Softmax weights sum to one, so a head with nothing useful to read must
// still put its attention somewhere; trained LMs park it on the first token, which is
// always there and always the same: an attention sink. With a sigmoid gate on the head's
// output (G1: σ(x W_g) ⊙ softmax(QKᵀ/√dk) V) the head can close instead. Does the sink go?
//
// (a) copy_task*.cpp — Bigram-Backcopy (nn/train/synthetic.h): only the queries at trigger
//     tokens need to attend (one token back, to copy it); every other query has nothing
//     useful to read. We train a baseline and a G1 model on the same batches and measure,
//     separately for the two kinds of queries, where attention goes (BOS, the query itself,
//     the previous token) and, for G1, the gate. Two setups: (a1) the standard causal mask,
//     where idle heads park on their own token, and (a2) each query's own key hidden, where
//     they sink on BOS. A third, (a3), is (a1) at a higher rate with weight decay, where the
//     baseline's sink is strong on every seed: the main demo's.
// (b) natural_text.cpp — the tiny preset on natural text: the per-layer report of analyze()
//     (nn/analysis) for baseline and G1, at the preset's learning rate and at 3× it; then
//     StreamingLLM's test: a sliding window that hides BOS from late queries.
//
// Run from the repository root (OMP_NUM_THREADS=1: the two parts run side by side):
//   ./build/tutorials/tutorial_06_attention_sink           the full run (both parts), 10 minutes
//   ./build/tutorials/tutorial_06_attention_sink --demo    part (a3) only, seed 1, with attention maps as text
//   ./build/tutorials/tutorial_06_attention_sink --quick   both parts, shortened (a smoke test)
// --out DIR writes the results there (the committed ones: --out tutorials/06_attention_sink/results).
// --help lists the rest (--part, --one-process, part (a)'s training options).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "apps/config_options.h"
#include "attention_sink.h"
#include "common/options.h"
#include "common/processes.h"
#include "common/timing.h"

using namespace gg;
using namespace tutorial;

int main(int argc, char** argv) {
    ExperimentOptions options;
    bool demo = false;
    std::string part = "ab";
    CLI::App app{"Tutorial 06: the attention sink, baseline vs G1 (Bigram-Backcopy and natural text)"};
    app.add_flag("--demo", demo, "part (a3) only, seed 1: a short table and the attention as text (the main demo)");
    add_quick_and_out(app, options, "both parts, shortened (a smoke test)", "tutorials/06_attention_sink/results");
    app.add_option("--jobs", options.jobs, "trainings at the same time (one process each)")->check(CLI::PositiveNumber);
    app.add_option("--part", part, "which parts to run: a, b or ab")->check(CLI::IsMember({"a", "b", "ab"}));
    // Part (a)'s options (one per row of copy_setup_fields()) override the same field of every
    // setup that runs.
    std::string variant = "both";
    app.add_option("--a-setup", variant,
                   "part (a): a1 (ordinary causal mask), a2 (own key hidden), both, or a3 (a1 at lr 1e-2, weight "
                   "decay 0.1: the demo's strong sink)")
        ->check(CLI::IsMember({"a1", "a2", "both", "a3"}));
    ConfigOptions<CopySetup> overrides(&app, copy_setup_fields(), "a-", "part (a): ");
    CLI11_PARSE(app, argc, argv);
    line_buffered_stdout();

    // Part (a)'s setups: (a1), (a2), both, or (a3); one seed for --demo, shortened by --quick,
    // then overridden.
    if (demo && !app.count("--a-setup")) variant = "a3";
    std::vector<CopySetup> setups;
    if (variant == "a3") setups.push_back(strong_sink());
    if (variant == "a1" || variant == "both") setups.push_back(ordinary_mask());
    if (variant == "a2" || variant == "both") setups.push_back(own_key_hidden());
    for (CopySetup& s : setups) {
        if (demo) s.seeds = 1, s.points /= 2;
        if (options.quick) s.seeds = 1, s.steps = 150, s.points = 3, s.models = {s.models[0]};
        overrides.apply(s);
        s.points = std::max<int64_t>(1, std::min(s.points, s.steps));
    }
    if (demo) part = "a";
    const bool a = part.find('a') != std::string::npos, b = part.find('b') != std::string::npos;

    // Every training of both parts, two at a time; the checkpoints go to a scratch folder.
    const auto start = Clock::now();
    const std::filesystem::path scratch = std::filesystem::temp_directory_path() /
                                          ("gatedgrad_tutorial06_" + std::to_string(getpid()));
    std::filesystem::create_directories(scratch);
    std::vector<TrainingJob> jobs;
    std::vector<size_t> first;  // where each setup's (then part (b)'s) jobs start
    for (const CopySetup& s : a ? setups : std::vector<CopySetup>{}) {
        first.push_back(jobs.size());
        try {
            for (TrainingJob& job : copy_task_jobs(s, scratch.string())) jobs.push_back(std::move(job));
        } catch (const std::invalid_argument& e) {  // a model shape the width does not allow
            std::fprintf(stderr, "tutorial 06: %s\n", e.what());
            std::filesystem::remove_all(scratch);
            return 2;
        }
    }
    first.push_back(jobs.size());
    if (b)
        for (TrainingJob& job : natural_text_jobs(options.quick, scratch.string())) jobs.push_back(std::move(job));
    std::printf("%zu trainings, %d at a time:\n", jobs.size(), options.jobs);
    const std::vector<std::string> results =
        run_in_processes(std::ssize(jobs), options.jobs, [&](int64_t i) { return jobs[i].run(); });
    const auto slice = [&](size_t from, size_t to) {
        return std::vector<std::string>(results.begin() + from, results.begin() + to);
    };

    // The reports, in the parent, from the saved models.
    if (a)
        for (size_t k = 0; k < setups.size(); ++k) copy_task_report(setups[k], slice(first[k], first[k + 1]), demo, options.out);
    if (b) natural_text_report(options.quick, slice(first.back(), results.size()), options.out);
    std::filesystem::remove_all(scratch);
    std::printf("\ntotal time %s\n", minutes_and_cpu_minutes(start).c_str());
    return 0;
}
