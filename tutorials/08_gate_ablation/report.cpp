// report.cpp — tutorial 08's table, rankings and files (report.h).
#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace tutorial {

using namespace gg::nn;

namespace {

// A CSV cell: the number, or empty where the column does not apply (a model without a gate).
std::string cell(double x) { return std::isnan(x) ? std::string() : format_or_dash("%.6f", x); }

}  // namespace

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

void print_ranking(const char* title, std::vector<std::string> names, const std::vector<Variant>& all,
                   const std::vector<Row>& rows) {
    auto loss = [&](const std::string& name) { return rows[index_of(all, name)].loss; };
    std::sort(names.begin(), names.end(), [&](const auto& a, const auto& b) { return loss(a).mean < loss(b).mean; });
    std::printf("%s", title);
    for (size_t k = 0; k < names.size(); ++k)
        std::printf("%s%s %.4f±%.4f", k ? " < " : "", names[k].c_str(), loss(names[k]).mean, loss(names[k]).half_range);
    std::printf("\n");
}

void write_results(const std::filesystem::path& dir, int64_t steps, int64_t seeds, const std::vector<Variant>& all,
                   const std::vector<Run>& runs, const std::vector<nlohmann::json>& results, const std::vector<Row>& rows,
                   const std::string& table_csv, const std::vector<double>& plain, const std::vector<double>& gated) {
    std::filesystem::create_directories(dir);
    std::string runs_csv = csv_line({"variant", "seed", "val_loss", "first_token_share", "sink_head_share", "gate_mean",
                                     "gate_below_0_1", "mean_max_abs_hidden", "seconds"});
    json summary = {{"steps", steps}, {"seeds", seeds}, {"runs", json::array()}};
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
    write_file_atomically(dir / "runs.csv", runs_csv);
    write_file_atomically(dir / "table.csv", table_csv);
    write_json(dir / "summary.json", summary, 1);

    std::vector<std::string> bars;
    // Error bars: half the range over seeds, as in the table (none with one seed).
    std::vector<double> delta, delta_spread, shares, share_spread;
    for (size_t v = 0; v < all.size(); ++v) {
        bars.push_back(all[v].short_name);
        delta.push_back(rows[v].loss.mean - rows[index_of(all, "base")].loss.mean);
        delta_spread.push_back(rows[v].loss.half_range);
        shares.push_back(rows[v].share.mean);
        share_spread.push_back(rows[v].share.half_range);
    }
    ChartOptions chart = chart_options("Validation loss minus the baseline's (mean over seeds, bars: half their range; "
                                       "lower is better)",
                                       "variant (table.csv)", "Δ validation loss (nats/byte)");
    chart.width = 1100;
    write_file_atomically(dir / "loss_vs_baseline.svg",
                    svg_bar_chart(bars, {{"Δ loss vs baseline", delta, "", delta_spread}}, chart));
    chart.title = "First-token attention share (mean over heads, layers, queries and seeds; bars: half the range)";
    chart.y_label = "attention on position 0 (fraction)";
    chart.reference_y = 0.3, chart.reference_label = "sink threshold 0.3";
    write_file_atomically(dir / "first_token_share.svg",
                    svg_bar_chart(bars, {{"first-token share", shares, "", share_spread}}, chart));
    std::vector<std::string> layers;
    for (size_t l = 0; l < plain.size(); ++l) layers.push_back("layer " + std::to_string(l));
    chart = chart_options("Trained G1 model: attention entropy, plain vs gated", "layer",
                          "entropy (nats)");
    write_file_atomically(dir / "g1_entropy.svg",
                    svg_bar_chart(layers, {{"plain entropy", plain, "", {}}, {"gated entropy", gated, "", {}}}, chart));
}

}  // namespace tutorial
