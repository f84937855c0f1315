// report.cpp — tutorial 07's tables and files (sweep.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "sweep.h"

namespace tutorial {

using namespace gg::nn;

bool stable_at(const std::vector<Run>& runs, const std::vector<nlohmann::json>& results, size_t regime, bool gated,
               double lr) {
    for (size_t i = 0; i < runs.size(); ++i)
        if (runs[i].regime == regime && runs[i].gated == gated && runs[i].lr == lr &&
            (results[i]["diverged"].get<bool>() || results[i]["spikes"].get<int64_t>() > 0))
            return false;
    return true;
}

json summarise(const Regime& regime, size_t index, const std::vector<Run>& runs,
               const std::vector<nlohmann::json>& results, double unigram, bool quick) {
    const RunSettings& s = regime.settings;
    std::printf("\n== %s: %s\n%-8s  %8s  %5s  %-15s  %11s  %6s  %s\n", regime.name.c_str(), regime.what.c_str(), "model",
                "peak lr", "seeds", "final val loss", "max |grad|*", "spikes", "diverged");
    json summary = {{"regime", regime.name}, {"what", regime.what},   {"unigram_entropy", unigram},
                    {"steps", s.steps},      {"warmup", s.warmup},     {"layers", s.layers},
                    {"d_model", s.d_model},  {"heads", s.heads},       {"batch", s.batch},
                    {"seq_len", s.seq_len},  {"clip", s.clip},         {"weight_decay", s.weight_decay},
                    {"decay_matrices_only", s.decay_matrices_only},    {"bf16", s.bf16},
                    {"init", s.init},        {"models", json::object()}};
    for (bool gated : {false, true}) {
        const std::string model = gated ? "G1" : "baseline";
        double largest_stable = NAN, first_unstable = NAN;
        json rows = json::array();
        for (double lr : regime.lrs) {
            std::vector<double> vals;
            double max_grad = 0;
            int64_t spikes = 0, diverged = 0, n = 0;
            std::string each;
            for (size_t i = 0; i < runs.size(); ++i) {
                if (runs[i].regime != index || runs[i].gated != gated || runs[i].lr != lr) continue;
                const nlohmann::json& j = results[i];
                vals.push_back(json_number(j["val_loss"]));
                max_grad = std::max(max_grad, json_number(j["max_grad_norm"]));
                spikes += j["spikes"].get<int64_t>();
                diverged += j["diverged"].get<bool>();
                ++n;
                char v[32];
                std::snprintf(v, sizeof v, "%s%.3f", each.empty() ? "" : "/", vals.back());
                each += v;
            }
            if (n == 0) continue;  // above the model's first unstable rate: not run
            const bool stable = diverged == 0 && spikes == 0;
            if (stable && std::isnan(first_unstable)) largest_stable = lr;
            if (!stable && std::isnan(first_unstable)) first_unstable = lr;
            std::printf("%-8s  %8.1e  %5lld  %-15s  %11.2f  %6lld  %lld of %lld\n", model.c_str(), lr, (long long)n,
                        each.c_str(), max_grad, (long long)spikes, (long long)diverged, (long long)n);
            rows.push_back({{"lr", lr}, {"seeds", n}, {"val_loss", vals}, {"mean_val_loss", average(vals)},
                            {"max_grad_norm", max_grad}, {"spikes", spikes}, {"diverged_runs", diverged},
                            {"stable", stable}});
        }
        summary["models"][model] = {{"largest_stable_lr", largest_stable}, {"first_unstable_lr", first_unstable},
                                    {"rates", rows}};
    }
    const double base = json_number(summary["models"]["baseline"]["largest_stable_lr"]);
    const double g1 = json_number(summary["models"]["G1"]["largest_stable_lr"]);
    std::printf("* largest gradient norm (before clipping) after the warmup, over seeds\n");
    if (quick)
        std::printf("(--quick: runs too short to tell stable rates apart; the full run's result is in README.md)\n");
    else
        std::printf("largest stable peak lr (no divergence, no spike, every seed, below the first unstable one): "
                    "baseline %s, G1 %s, ratio %s ('-': none)\n",
                    format_or_dash("%.1e", base).c_str(), format_or_dash("%.1e", g1).c_str(),
                    format_or_dash("%.1f", g1 / base).c_str());
    summary["stable_lr_ratio"] = g1 / base;
    return summary;
}

void write_regime_results(const std::filesystem::path& dir, const Regime& regime, size_t index,
                          const std::vector<Run>& runs, const std::vector<nlohmann::json>& results, double unigram,
                          const json& summary) {
    std::filesystem::create_directories(dir);
    std::vector<std::vector<double>> run_rows, step_rows;
    std::vector<size_t> mine;
    for (size_t i = 0; i < runs.size(); ++i) {
        if (runs[i].regime != index) continue;
        mine.push_back(i);
        const nlohmann::json& j = results[i];
        run_rows.push_back({double(runs[i].gated), runs[i].lr, double(runs[i].seed), json_number(j["val_loss"]),
                            json_number(j["max_grad_norm"]), double(j["spikes"].get<int64_t>()),
                            double(j["diverged"].get<bool>()), j["seconds"].get<double>()});
        const auto loss = json_numbers(j["loss"]), grad = json_numbers(j["grad_norm"]);
        for (size_t t = 0; t < loss.size(); ++t)
            step_rows.push_back({double(runs[i].gated), runs[i].lr, double(runs[i].seed), double(t + 1), loss[t], grad[t]});
    }
    write_text_file(dir / "runs.csv", csv_table({"gated", "lr", "seed", "val_loss", "max_grad_norm", "spikes", "diverged",
                                                 "seconds"}, run_rows));
    write_text_file(dir / "steps.csv", csv_table({"gated", "lr", "seed", "step", "loss", "grad_norm"}, step_rows));
    write_json(dir / "summary.json", summary);
    if (!regime.every_rate) return;

    RegimePlot plot{regime.settings.steps, regime.settings.layers, unigram, regime.lrs, {}};
    for (size_t i : mine)
        plot.runs.push_back({runs[i].gated, runs[i].lr, runs[i].seed, json_number(results[i]["val_loss"]),
                             json_numbers(results[i]["loss"])});
    plot_regime(dir, plot);
}

void plot_regime(const std::filesystem::path& dir, const RegimePlot& plot) {
    // Final loss against the rate: the mean over seeds as a line, every seed as a point.
    std::vector<Series> curves;
    for (bool gated : {false, true}) {
        std::vector<double> x, y;
        for (double lr : plot.lrs) {
            std::vector<double> vals;
            for (const RegimePlot::Point& r : plot.runs)
                if (r.gated == gated && r.lr == lr) vals.push_back(r.val_loss);
            if (vals.empty()) continue;  // above the model's first unstable rate: not run
            x.push_back(lr), y.push_back(average(vals));
        }
        curves.push_back({gated ? "G1 (mean over seeds)" : "baseline (mean over seeds)", x, y,
                          gated ? "#d62728" : "#1f77b4", false, 1, {}});
    }
    for (const RegimePlot::Point& r : plot.runs)
        curves.push_back({"", {r.lr}, {r.val_loss}, r.gated ? "#d62728" : "#1f77b4", true, 0.6, {}});
    ChartOptions chart = chart_options("Final validation loss after " + std::to_string(plot.steps) + " steps, " +
                                           std::to_string(plot.layers) + "-layer LM",
                                       "peak learning rate", "validation loss (nats/byte)", plot.unigram,
                                       "unigram entropy (diverged above)");
    chart.log_x = true;
    write_text_file(dir / "final_loss_vs_lr.svg", svg_line_chart(curves, chart));

    // Training-loss curves (smoothed) of seed 1 at the two largest rates: where spikes show.
    std::vector<Series> lines;
    const auto& lrs = plot.lrs;
    for (size_t k = lrs.size() >= 2 ? lrs.size() - 2 : 0; k < lrs.size(); ++k)
        for (const RegimePlot::Point& r : plot.runs) {
            if (r.lr != lrs[k] || r.seed != 1) continue;
            std::vector<double> steps(r.loss.size());
            for (size_t t = 0; t < r.loss.size(); ++t) steps[t] = double(t + 1);
            char label[64];
            std::snprintf(label, sizeof label, "%s, lr %.1e", r.gated ? "G1" : "baseline", r.lr);
            lines.push_back(line(label, steps, smooth(r.loss, 0.8), chart_color(lines.size())));
        }
    chart = chart_options("Training loss (EMA 0.8), seed 1, two largest rates", "step", "training loss (nats/byte)",
                          plot.unigram, "unigram entropy");
    write_text_file(dir / "loss_curves.svg", svg_line_chart(lines, chart));
}

RegimePlot read_regime(const std::filesystem::path& dir) {
    const nlohmann::json summary = read_json(dir / "summary.json");
    RegimePlot plot;
    plot.steps = summary["steps"].get<int64_t>(), plot.layers = summary["layers"].get<int64_t>();
    plot.unigram = json_number(summary["unigram_entropy"]);
    for (const char* model : {"baseline", "G1"})
        for (const nlohmann::json& row : summary["models"][model]["rates"]) plot.lrs.push_back(row["lr"].get<double>());
    std::sort(plot.lrs.begin(), plot.lrs.end());
    plot.lrs.erase(std::unique(plot.lrs.begin(), plot.lrs.end()), plot.lrs.end());
    const CsvTable runs = read_csv_table(dir / "runs.csv"), steps = read_csv_table(dir / "steps.csv");
    const size_t gated = runs.column("gated"), lr = runs.column("lr"), seed = runs.column("seed"),
                 val_loss = runs.column("val_loss");
    for (const std::vector<double>& r : runs.rows)
        plot.runs.push_back({r[gated] != 0, r[lr], uint64_t(r[seed]), r[val_loss], {}});
    const size_t s_gated = steps.column("gated"), s_lr = steps.column("lr"), s_seed = steps.column("seed"),
                 s_step = steps.column("step"), s_loss = steps.column("loss");
    for (const std::vector<double>& row : steps.rows)
        for (RegimePlot::Point& r : plot.runs)
            if (r.gated == (row[s_gated] != 0) && r.lr == row[s_lr] && r.seed == uint64_t(row[s_seed])) {
                if (row[s_step] != double(r.loss.size() + 1)) throw std::runtime_error("steps.csv: a step missing");
                r.loss.push_back(row[s_loss]);
            }
    return plot;
}

void print_search_table(const std::vector<Regime>& regimes, const std::vector<json>& summaries,
                        const std::filesystem::path& out, bool quick) {
    std::printf("\n== the search: largest stable peak lr (every seed: no divergence, no spike)\n");
    if (quick) std::printf("(--quick: runs too short to rank; the full run's result is in README.md)\n");
    std::printf("%-15s %-45s %10s %10s %6s   %s\n", "regime", "change", "baseline", "G1", "ratio",
                "first unstable: baseline / G1");
    std::vector<std::string> lines{csv_line({"regime", "change", "largest_stable_lr_baseline", "largest_stable_lr_g1",
                                             "ratio", "first_unstable_lr_baseline", "first_unstable_lr_g1"})};
    for (size_t g = 0; g < regimes.size(); ++g) {
        const json& m = summaries[g]["models"];
        const double b = json_number(m["baseline"]["largest_stable_lr"]), g1 = json_number(m["G1"]["largest_stable_lr"]);
        const double ub = json_number(m["baseline"]["first_unstable_lr"]), ug = json_number(m["G1"]["first_unstable_lr"]);
        std::printf("%-15s %-45s %10s %10s %6s   %s / %s\n", regimes[g].name.c_str(), regimes[g].what.c_str(),
                    format_or_dash("%.1e", b).c_str(), format_or_dash("%.1e", g1).c_str(),
                    format_or_dash("%.1f", g1 / b).c_str(), format_or_dash("%.1e", ub).c_str(),
                    format_or_dash("%.1e", ug).c_str());
        lines.push_back(csv_line({regimes[g].name, regimes[g].what, format_or_dash("%g", b), format_or_dash("%g", g1),
                                  format_or_dash("%.2f", g1 / b), format_or_dash("%g", ub), format_or_dash("%g", ug)}));
    }
    std::printf("('-': no stable rate in the sweep, or no unstable one)\n");
    if (out.empty() || regimes.size() < 2) return;
    std::string text;
    for (const std::string& l : lines) text += l;
    std::filesystem::create_directories(out);
    write_text_file((out / "search.csv").string(), text);
}

}  // namespace tutorial
