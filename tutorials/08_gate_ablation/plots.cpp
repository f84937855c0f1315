// plots.cpp — tutorial 08's pictures (ablation.h).
#include <stdexcept>

#include "ablation.h"

namespace tutorial {

using namespace gg::nn;

void plot_results(const std::filesystem::path& dir, const std::vector<VariantBar>& rows,
                  const std::vector<double>& plain, const std::vector<double>& gated) {
    double base = NAN;
    for (const VariantBar& r : rows)
        if (r.short_name == "base") base = r.loss.mean;
    if (std::isnan(base)) throw std::logic_error("no baseline among the variants");
    std::vector<std::string> bars;
    // Error bars: half the range over seeds, as in the table (none with one seed).
    std::vector<double> delta, delta_spread, shares, share_spread;
    for (const VariantBar& r : rows) {
        bars.push_back(r.short_name);
        delta.push_back(r.loss.mean - base);
        delta_spread.push_back(r.loss.half_range);
        shares.push_back(r.share.mean);
        share_spread.push_back(r.share.half_range);
    }
    ChartOptions chart = chart_options("Validation loss minus the baseline's (mean over seeds, bars: half their range; "
                                       "lower is better)",
                                       "variant (table.csv)", "Δ validation loss (nats/byte)");
    chart.width = 1100;
    write_text_file(dir / "loss_vs_baseline.svg",
                    svg_bar_chart(bars, {{"Δ loss vs baseline", delta, "", delta_spread}}, chart));
    chart.title = "First-token attention share (mean over heads, layers, queries and seeds; bars: half the range)";
    chart.y_label = "attention on position 0 (fraction)";
    chart.reference_y = 0.3, chart.reference_label = "sink threshold 0.3";
    write_text_file(dir / "first_token_share.svg",
                    svg_bar_chart(bars, {{"first-token share", shares, "", share_spread}}, chart));
    std::vector<std::string> layers;
    for (size_t l = 0; l < plain.size(); ++l) layers.push_back("layer " + std::to_string(l));
    chart = chart_options("Trained G1 model: attention entropy, plain vs gated (article 7.3)", "layer",
                          "entropy (nats)");
    write_text_file(dir / "g1_entropy.svg",
                    svg_bar_chart(layers, {{"plain entropy", plain, "", {}}, {"gated entropy", gated, "", {}}}, chart));
}

SummaryRuns read_summary(const std::filesystem::path& dir) {
    const nlohmann::json j = read_json(dir / "summary.json");
    SummaryRuns s;
    for (const nlohmann::json& r : j["runs"]) {
        s.variant.push_back(r["variant"].get<std::string>());
        s.seed.push_back(r["seed"].get<uint64_t>());
        s.results.push_back(r);
    }
    s.plain = json_numbers(j["g1_entropy"]["plain"]), s.gated = json_numbers(j["g1_entropy"]["gated"]);
    return s;
}

}  // namespace tutorial
