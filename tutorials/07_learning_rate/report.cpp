// report.cpp — tutorial 07's tables, results files and pictures (study.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "study.h"

namespace tutorial {

using namespace gg::nn;

namespace {

std::vector<const RunResult*> runs_of(const Study& study, size_t variant, double lr) {
    std::vector<const RunResult*> out;
    for (const RunResult& r : study.runs)
        if (r.variant == variant && r.lr == lr) out.push_back(&r);
    return out;
}

// The first probe at or after `step` (the last one if none is).
const Probe& probe_at(const RunResult& r, int64_t step) {
    for (const Probe& p : r.probes)
        if (p.step >= step) return p;
    return r.probes.back();
}

// One variant's sensitivity for each seed: its final losses over the rates against its ℓ_0.
std::vector<double> sensitivity_per_seed(const Study& study, size_t variant) {
    std::vector<double> out;
    for (uint64_t seed = 1; seed <= uint64_t(study.seeds); ++seed) {
        std::vector<double> finals;
        double initial = NAN;
        for (double lr : study.lrs)
            for (const RunResult* r : runs_of(study, variant, lr))
                if (r->seed == seed) finals.push_back(r->val_loss), initial = r->initial_loss;
        out.push_back(lr_sensitivity(finals, initial));
    }
    return out;
}

std::string rate_label(double lr) {
    char s[16];
    std::snprintf(s, sizeof s, "%.0e", lr);
    return s;
}

// --quick's table: at the one rate it trains, every variant's largest attention logit at each
// probe (seed 1), then the final loss, the smallest head entropy and the mean gate.
void print_one_rate(const Study& study) {
    const std::vector<Variant>& vs = variants();
    const double lr = study.lrs.back();
    std::vector<const RunResult*> runs;
    for (size_t v = 0; v < vs.size(); ++v)
        for (const RunResult* r : runs_of(study, v, lr))
            if (r->seed == 1) runs.push_back(r);
    std::printf("\n== lr %s, seed 1: the largest attention logit q.k/sqrt(dk) during training\n%-22s", rate_label(lr).c_str(),
                "step");
    for (const RunResult* r : runs) std::printf(" %13s", vs[r->variant].name.c_str());
    std::printf("\n");
    for (size_t k = 0; k < runs[0]->probes.size(); ++k) {
        std::printf("%-22lld", (long long)runs[0]->probes[k].step);
        for (const RunResult* r : runs) std::printf(" %13.3g", k < r->probes.size() ? r->probes[k].max_logit : NAN);
        std::printf("\n");
    }
    auto row = [&](const char* label, auto value) {
        std::printf("%-22s", label);
        for (const RunResult* r : runs) std::printf(" %13s", value(*r).c_str());
        std::printf("\n");
    };
    row("growth", [](const RunResult& r) { return format_or_dash("%.3gx", r.probes.back().max_logit / r.probes.front().max_logit); });
    row("smallest head entropy", [](const RunResult& r) { return format_or_dash("%.3f", r.probes.back().min_entropy); });
    row("mean gate", [](const RunResult& r) { return format_or_dash("%.3f", r.probes.back().gate_mean); });
    row("final val loss", [](const RunResult& r) { return format_or_dash("%.4f", r.val_loss); });
}

}  // namespace

json report(const Study& study, bool quick) {
    const std::vector<Variant>& vs = variants();
    const RunSettings& s = study.settings;
    json summary = {{"layers", s.layers},   {"d_model", s.d_model},       {"heads", s.heads},
                    {"batch", s.batch},     {"seq_len", s.seq_len},       {"steps", s.steps},
                    {"warmup", s.warmup},   {"clip", s.clip},             {"weight_decay", s.weight_decay},
                    {"independent_wd", s.independent_wd},                 {"z_loss", s.z_loss},
                    {"probe_every", s.probe_every},                       {"seeds", study.seeds},
                    {"precision", precision_name(s.precision)},
                    {"lrs", study.lrs},     {"unigram_entropy", study.unigram}, {"variants", json::array()}};

    std::printf("\n== final validation loss (nats/byte) after %lld steps: mean over seeds\n%-14s",
                (long long)s.steps, "variant");
    for (double lr : study.lrs) std::printf(" %7s", rate_label(lr).c_str());
    std::printf("   diverged  spikes\n");
    for (size_t v = 0; v < vs.size(); ++v) {
        std::printf("%-14s", vs[v].name.c_str());
        int64_t diverged = 0, spikes = 0;
        std::vector<double> means;
        for (double lr : study.lrs) {
            std::vector<double> vals;
            for (const RunResult* r : runs_of(study, v, lr)) {
                vals.push_back(r->val_loss), diverged += r->diverged, spikes += r->spikes;
            }
            means.push_back(average(vals));
            std::printf(" %7.3f", means.back());
        }
        std::printf("   %8lld  %6lld\n", (long long)diverged, (long long)spikes);
        summary["variants"].push_back({{"name", vs[v].name}, {"qk_norm", vs[v].qk_norm}, {"gated", vs[v].gated},
                                       {"mean_val_loss", means}, {"diverged_runs", diverged}, {"spikes", spikes}});
    }

    if (quick) {  // one rate: no sensitivity to measure
        print_one_rate(study);
        std::printf("\n(--quick: one rate and one seed, so no LR sensitivity and no verdict; the full run's are in "
                    "README.md)\n");
        return summary;
    }
    std::printf("\n== LR sensitivity E_eta[min(l_eta, l_0) - l*] (nats; Wortsman et al. 2023): lower is better\n");
    std::printf("%-14s %-20s %7s  %s\n", "variant", "each seed", "mean", "vs baseline");
    std::vector<std::vector<double>> sens;
    for (size_t v = 0; v < vs.size(); ++v) sens.push_back(sensitivity_per_seed(study, v));
    const double base = average(sens[0]);
    for (size_t v = 0; v < vs.size(); ++v) {
        std::string each;
        for (double x : sens[v]) each += (each.empty() ? "" : " / ") + format_or_dash("%.3f", x);
        const double change = average(sens[v]) / base - 1;
        std::printf("%-14s %-20s %7.3f  %s\n", vs[v].name.c_str(), each.c_str(), average(sens[v]),
                    v == 0 ? "-" : format_or_dash("%+.0f%%", 100 * change).c_str());
        summary["variants"][v]["sensitivity"] = sens[v];
        summary["variants"][v]["mean_sensitivity"] = average(sens[v]);
        summary["variants"][v]["change_vs_baseline"] = v == 0 ? NAN : change;
    }

    // The mechanism at the two highest rates: the largest attention logit at the start, after
    // the warmup and at the end, and the smallest attention entropy at the end (means over seeds).
    std::printf("\n== at the two highest rates (means over seeds): largest attention logit at step 0, after the "
                "warmup and at the end; smallest head entropy and mean gate at the end\n");
    std::printf("%-14s %7s %8s %13s %10s %8s %12s %9s\n", "variant", "lr", "logit@0", "logit@warmup", "logit@end",
                "growth", "entropy@end", "gate@end");
    json mechanism = json::array();
    for (size_t k = study.lrs.size() >= 2 ? study.lrs.size() - 2 : 0; k < study.lrs.size(); ++k)
        for (size_t v = 0; v < vs.size(); ++v) {
            std::vector<double> start, early, late, entropy, gate;
            for (const RunResult* r : runs_of(study, v, study.lrs[k])) {
                start.push_back(r->probes.front().max_logit);
                early.push_back(probe_at(*r, s.warmup).max_logit), late.push_back(r->probes.back().max_logit);
                entropy.push_back(r->probes.back().min_entropy), gate.push_back(r->probes.back().gate_mean);
            }
            const double growth = average(late) / average(start);
            std::printf("%-14s %7s %8.3f %13.3g %10.3g %7.3gx %12.3f %9s\n", vs[v].name.c_str(),
                        rate_label(study.lrs[k]).c_str(), average(start), average(early), average(late), growth,
                        average(entropy), format_or_dash("%.3f", average(gate)).c_str());
            mechanism.push_back({{"variant", vs[v].name}, {"lr", study.lrs[k]}, {"logit_start", average(start)},
                                 {"logit_after_warmup", average(early)},
                                 {"logit_end", average(late)}, {"growth", growth}, {"min_entropy_end", average(entropy)},
                                 {"gate_mean_end", average(gate)}});
        }
    summary["mechanism"] = mechanism;

    // The positive control: QK-norm must lower the baseline's sensitivity by ≥ 25%, with every
    // seed of it below every seed of the baseline (more than the spread between seeds).
    const auto verdict = [&](size_t v) {
        const double drop = 1 - average(sens[v]) / base;
        const bool apart = *std::max_element(sens[v].begin(), sens[v].end()) < *std::min_element(sens[0].begin(), sens[0].end());
        return std::make_pair(drop, apart);
    };
    const auto [control_drop, control_apart] = verdict(1);
    const bool control_works = control_drop >= 0.25 && control_apart;
    summary["control_works"] = control_works;
    std::printf("\npositive control: QK-norm lowers the baseline's LR sensitivity by %.0f%% (%s every seed): %s\n",
                100 * control_drop, control_apart ? "below it on" : "not below it on",
                control_works ? "the harness can see an instability that a known fix removes"
                              : "NOT shown (needs >= 25% and every seed below)");
    for (size_t v = 2; v < vs.size(); ++v) {
        const auto [drop, apart] = verdict(v);
        std::printf("%s lowers it by %.0f%% (%s every baseline seed)\n", vs[v].name.c_str(), 100 * drop,
                    apart ? "below" : "not below");
    }
    return summary;
}

void write_results(const std::filesystem::path& dir, const Study& study, const json& summary) {
    std::filesystem::create_directories(dir);
    std::vector<std::vector<double>> runs, probes, steps;
    for (const RunResult& r : study.runs) {
        const double v = double(r.variant), seed = double(r.seed);
        runs.push_back({v, r.lr, seed, r.initial_loss, r.val_loss, double(r.diverged), double(r.spikes), r.max_grad,
                        r.probes.back().max_logit, r.probes.back().min_entropy, r.seconds});
        for (const Probe& p : r.probes)
            probes.push_back({v, r.lr, seed, double(p.step), p.max_logit, p.min_entropy, p.gate_mean, p.log_z,
                              p.max_hidden});
        for (size_t t = 9; t < r.loss.size(); t += 10) steps.push_back({v, r.lr, seed, double(t + 1), r.loss[t]});
    }
    write_file_atomically(dir / "runs.csv", csv_table({"variant", "lr", "seed", "initial_loss", "val_loss", "diverged",
                                                 "spikes", "max_grad_norm", "final_max_attn_logit",
                                                 "final_min_attn_entropy", "seconds"}, runs));
    write_file_atomically(dir / "probes.csv", csv_table({"variant", "lr", "seed", "step", "max_attn_logit",
                                                   "min_attn_entropy", "gate_mean", "mean_log_z", "max_abs_hidden"},
                                                  probes));
    write_file_atomically(dir / "steps.csv", csv_table({"variant", "lr", "seed", "step", "loss"}, steps));
    write_json(dir / "summary.json", summary);
    plot_study(dir, study);
}

void plot_study(const std::filesystem::path& dir, const Study& study) {
    const std::vector<Variant>& vs = variants();
    const RunSettings& s = study.settings;
    // Final loss against the rate: the mean over seeds as a line, every seed as a point.
    std::vector<Series> curves;
    for (size_t v = 0; v < vs.size(); ++v) {
        std::vector<double> x, y;
        for (double lr : study.lrs) {
            std::vector<double> vals;
            for (const RunResult* r : runs_of(study, v, lr)) vals.push_back(r->val_loss);
            x.push_back(lr), y.push_back(average(vals));
        }
        curves.push_back(line(vs[v].name + " (mean over seeds)", x, y, chart_color(v)));
    }
    for (const RunResult& r : study.runs)
        curves.push_back({"", {r.lr}, {r.val_loss}, chart_color(r.variant), true, 0.6, {}});
    ChartOptions chart = chart_options("Final validation loss after " + std::to_string(s.steps) + " steps, " +
                                           std::to_string(s.layers) + " layers x " + std::to_string(s.d_model),
                                       "peak learning rate", "validation loss (nats/byte)", study.unigram,
                                       "unigram entropy (diverged above)");
    chart.log_x = true;
    write_file_atomically(dir / "final_loss_vs_lr.svg", svg_line_chart(curves, chart));

    // The mechanism, seed 1 at the two highest rates: the largest attention logit and the
    // smallest head entropy against the step, both on a log scale (an entropy of exactly 0,
    // a head on one key, drawn at the floor 1e-6). The lower rate in light colours, so that its
    // legend swatch is light too; the baseline as dots drawn last, because G1's curve follows it
    // closely and would hide a line beneath it.
    for (const bool logit : {true, false}) {
        std::vector<Series> lines;
        for (size_t k = study.lrs.size() >= 2 ? study.lrs.size() - 2 : 0; k < study.lrs.size(); ++k)
            for (size_t v = vs.size(); v-- > 0;)
                for (const RunResult* r : runs_of(study, v, study.lrs[k])) {
                    if (r->seed != 1) continue;
                    std::vector<double> x, y;
                    for (const Probe& p : r->probes)
                        x.push_back(double(p.step)),
                            y.push_back(std::log10(logit ? p.max_logit : std::max(p.min_entropy, 1e-6)));
                    const bool light = k + 1 != study.lrs.size();
                    Series l = line(vs[v].name + ", lr " + rate_label(study.lrs[k]) + (v == 0 ? " (dots)" : ""), x, y,
                                    pair_color(v, light));
                    l.points = v == 0;
                    lines.push_back(l);
                }
        chart = logit ? chart_options("Largest attention logit q.k/sqrt(dk), seed 1, two highest rates (light: the "
                                      "lower one)", "step", "log10 of the largest attention logit")
                      : chart_options("Smallest attention entropy of any head, seed 1, two highest rates (light: the "
                                      "lower one)", "step", "log10 of the smallest head entropy (nats; floor 1e-6)");
        write_file_atomically(dir / (logit ? "attn_logit_vs_step.svg" : "entropy_vs_step.svg"), svg_line_chart(lines, chart));
    }
}

Study read_study(const std::filesystem::path& dir) {
    const nlohmann::json summary = read_json(dir / "summary.json");
    Study study;
    RunSettings& s = study.settings;
    s.layers = summary["layers"].get<int64_t>(), s.d_model = summary["d_model"].get<int64_t>();
    s.steps = summary["steps"].get<int64_t>(), s.warmup = summary["warmup"].get<int64_t>();
    study.seeds = summary["seeds"].get<int64_t>();
    study.lrs = json_numbers(summary["lrs"]);
    study.unigram = json_number(summary["unigram_entropy"]);
    const CsvTable runs = read_csv_table(dir / "runs.csv"), probes = read_csv_table(dir / "probes.csv");
    const size_t variant = runs.column("variant"), lr = runs.column("lr"), seed = runs.column("seed"),
                 initial = runs.column("initial_loss"), val = runs.column("val_loss"), div = runs.column("diverged"),
                 spikes = runs.column("spikes"), grad = runs.column("max_grad_norm"), secs = runs.column("seconds");
    for (const std::vector<double>& r : runs.rows)
        study.runs.push_back({size_t(r[variant]), r[lr], uint64_t(r[seed]), r[initial], r[val], r[div] != 0,
                              int64_t(r[spikes]), r[grad], r[secs], {}, {}});
    const size_t p_variant = probes.column("variant"), p_lr = probes.column("lr"), p_seed = probes.column("seed"),
                 p_step = probes.column("step"), logit = probes.column("max_attn_logit"),
                 entropy = probes.column("min_attn_entropy"), gate = probes.column("gate_mean"),
                 log_z = probes.column("mean_log_z"), hidden = probes.column("max_abs_hidden");
    for (const std::vector<double>& p : probes.rows)
        for (RunResult& r : study.runs)
            if (r.variant == size_t(p[p_variant]) && r.lr == p[p_lr] && r.seed == uint64_t(p[p_seed]))
                r.probes.push_back({int64_t(p[p_step]), p[logit], p[entropy], p[gate], p[log_z], p[hidden]});
    for (const RunResult& r : study.runs)
        if (r.probes.empty()) throw std::runtime_error(dir.string() + "/probes.csv: a run of runs.csv has no probes");
    return study;
}

}  // namespace tutorial
