// ablation.h — tutorial 08's pictures (plots.cpp), drawn from a run or from its results files.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "common/results.h"

namespace tutorial {

// One bar of the pictures: a variant's loss and first-token share over seeds.
struct VariantBar {
    std::string short_name;  // under the bar; "base" is the baseline
    Spread loss, share;
};

// loss_vs_baseline.svg, first_token_share.svg and g1_entropy.svg (plain and gated attention
// entropy per layer of the trained G1 model) in dir.
void plot_results(const std::filesystem::path& dir, const std::vector<VariantBar>& bars,
                  const std::vector<double>& plain, const std::vector<double>& gated);

// What summary.json holds: every run's numbers under its variant's name, and the entropies.
struct SummaryRuns {
    std::vector<std::string> variant;  // per run
    std::vector<uint64_t> seed;
    std::vector<nlohmann::json> results;  // val_loss, first_token_share, gate_mean, …
    std::vector<double> plain, gated;
};
SummaryRuns read_summary(const std::filesystem::path& dir);

}  // namespace tutorial
