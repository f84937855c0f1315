// sweep.h — what tutorial 07's files share: a regime (a training setup swept over learning
// rates), one run of it, and the tables and files of report.cpp.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/results.h"
#include "training.h"

namespace tutorial {

// A training setup, swept over peak learning rates: baseline and G1, seeds 1 … N at every rate.
struct Regime {
    std::string name, what;  // a folder name; what it changes from the regime before it
    RunSettings settings;    // gated, lr and seed are set per run
    std::vector<double> lrs;
    bool every_rate = false;  // false: a search from lrs[start] for each model's largest stable rate
    size_t start = 0;
};

struct Run {
    size_t regime;  // index into the regimes
    bool gated;
    double lr;
    uint64_t seed;
    std::string model() const { return gated ? "G1" : "baseline"; }
};

// A rate is stable for a model when every seed at that rate neither diverged nor spiked.
bool stable_at(const std::vector<Run>& runs, const std::vector<nlohmann::json>& results, size_t regime, bool gated,
               double lr);

// The table of one regime, per model and rate (over seeds: each loss, the worst gradient, all
// spikes), and its summary: each model's largest stable rate, the ratio of the two. With
// quick (--quick: runs too short to mean anything) it prints a caveat instead of that verdict.
json summarise(const Regime& regime, size_t index, const std::vector<Run>& runs,
               const std::vector<nlohmann::json>& results, double unigram, bool quick);
// runs.csv, steps.csv, summary.json of one regime in dir; for a regime that sweeps every rate,
// also the final loss against the rate and the loss curves at the two largest rates.
void write_regime_results(const std::filesystem::path& dir, const Regime& regime, size_t index,
                          const std::vector<Run>& runs, const std::vector<nlohmann::json>& results, double unigram,
                          const json& summary);
// What the two pictures of a regime that sweeps every rate are drawn from: the run's results,
// or the regime's files read back (--replot), so that both draw with the same code.
struct RegimePlot {
    int64_t steps = 0, layers = 0;  // of every run
    double unigram = 0;             // the unigram entropy: a run that ends above it diverged
    std::vector<double> lrs;        // the swept rates, ascending
    struct Point {
        bool gated;
        double lr;
        uint64_t seed;
        double val_loss;
        std::vector<double> loss;  // training loss per step
    };
    std::vector<Point> runs;  // in the order of runs.csv
};
// final_loss_vs_lr.svg (final loss against the rate) and loss_curves.svg (the loss curves at
// the two largest rates) in dir.
void plot_regime(const std::filesystem::path& dir, const RegimePlot& plot);
// A regime's summary.json, runs.csv and steps.csv in dir, read back.
RegimePlot read_regime(const std::filesystem::path& dir);

// The search in one table, printed (after a caveat with quick); also search.csv in `out`
// unless it is empty.
void print_search_table(const std::vector<Regime>& regimes, const std::vector<json>& summaries,
                        const std::filesystem::path& out, bool quick);

}  // namespace tutorial
