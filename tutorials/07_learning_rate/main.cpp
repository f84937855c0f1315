// Tutorial 07 — learning-rate stability (the article's 4.3, the paper's Table 4 / Figure 1).
//
// Does the G1 gate (σ(x W_g) ⊙ SDPA output) let a model train at larger learning rates?
// We sweep the peak learning rate for a standard attention LM and the same LM with the
// gate, on the same data, schedule, steps and seeds, and report for every run its final
// validation loss, largest gradient norm, loss spikes and whether it diverged. A deep,
// narrow model (8 layers of width 64) makes stability the bottleneck.
//
// Run from the repository root (two runs at a time, one thread each; about 15 minutes):
//   OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive ./build/tutorials/tutorial_07_learning_rate
// --quick is a one-minute version; --out DIR writes the results there (the committed ones:
// --out tutorials/07_learning_rate/results).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/processes.h"
#include "common/results.h"
#include "common/timing.h"
#include "gatedgrad.h"

using namespace gg::nn;
using namespace tutorial;

namespace {

// 1. The sweep: every rate × seed × {baseline, G1}. A seed fixes the initial weights and
//    the batch order, the same for both models.
struct Sweep {
    std::vector<double> lrs{3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0};
    int64_t seeds = 2;  // seeds 1 … seeds at every rate
    int64_t steps = 300, warmup = 10, batch = 8, seq_len = 64;
    double clip = 1.0;  // gradient-norm clipping; 0: none
    int64_t layers = 8, d_model = 64, heads = 4;
};

struct Run {
    bool gated;
    double lr;
    uint64_t seed;
    std::string model() const { return gated ? "G1" : "baseline"; }
};

TrainConfig train_config(const Sweep& s, const Run& r) {
    TrainConfig c;
    c.model.n_layers = s.layers, c.model.d_model = s.d_model, c.model.attn.n_heads = s.heads;
    c.model.attn.gate = r.gated ? GatePosition::sdpa_output : GatePosition::none;
    c.model.max_len = c.seq_len = s.seq_len;
    c.batch_size = s.batch, c.steps = s.steps, c.warmup = s.warmup, c.lr = r.lr, c.seed = r.seed;
    c.grad_clip = s.clip;
    c.eval_every = 0;  // validate once, at the end
    return c;
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

// 3. One training run, in a child process: its summary and per-step log as JSON.
std::string train_one(const Sweep& s, const Run& r, const std::shared_ptr<const TextDataset>& data, double unigram) {
    Trainer trainer(train_config(s, r), data);
    const TrainResult result = trainer.run(/*quiet=*/true);
    std::vector<double> loss, grad_norm;
    for (const StepLog& l : result.log) loss.push_back(l.loss), grad_norm.push_back(l.grad_norm);
    const double val = result.diverged ? NAN : result.final_val_loss;
    // After the warmup: the first steps' gradients come from the initialisation, the same at every rate.
    const int64_t warmup = std::min(s.warmup, s.steps - 1);  // as the trainer clamps it
    const auto after_warmup = grad_norm.begin() + std::min<int64_t>(warmup, std::ssize(grad_norm));
    const double max_grad = after_warmup == grad_norm.end() ? NAN : *std::max_element(after_warmup, grad_norm.end());
    const int64_t spikes = count_spikes(loss);
    const bool diverged = result.diverged || !(val < unigram);  // worse than ignoring the context
    std::printf("  %-8s lr %.1e seed %llu: val loss %.4f, max |g| %6.2f, spikes %lld, %s (%.0f s)\n", r.model().c_str(),
                r.lr, static_cast<unsigned long long>(r.seed), val, max_grad, static_cast<long long>(spikes),
                diverged ? "DIVERGED" : "ok", result.seconds);
    nlohmann::json j = {{"val_loss", val}, {"max_grad_norm", max_grad}, {"spikes", spikes}, {"diverged", diverged},
                        {"seconds", result.seconds}, {"loss", loss}, {"grad_norm", grad_norm}};
    return j.dump();
}

// 4. The table, per model and rate (over seeds: each loss, the worst gradient, all spikes).
//    A rate is stable for a model when every seed finished below the unigram baseline
//    without a loss spike. Returns the summary; `mean_loss` gets each model's line.
json summarise(const Sweep& s, const std::vector<Run>& runs, const std::vector<nlohmann::json>& results,
               double unigram, std::vector<Series>& mean_loss) {
    std::printf("\n%-8s  %8s  %5s  %-15s  %11s  %6s  %s\n", "model", "peak lr", "seeds", "final val loss",
                "max |grad|*", "spikes", "diverged");
    json summary = {{"unigram_entropy", unigram}, {"steps", s.steps}, {"warmup", s.warmup}, {"layers", s.layers},
                    {"d_model", s.d_model},       {"heads", s.heads}, {"batch", s.batch},   {"seq_len", s.seq_len},
                    {"models", json::object()}};
    for (bool gated : {false, true}) {
        const std::string model = gated ? "G1" : "baseline";
        std::vector<double> means;
        double largest_stable = NAN;
        json rows = json::array();
        for (double lr : s.lrs) {
            std::vector<double> vals;
            double max_grad = 0;
            int64_t spikes = 0, diverged = 0, n = 0;
            std::string each;
            for (size_t i = 0; i < runs.size(); ++i) {
                if (runs[i].gated != gated || runs[i].lr != lr) continue;
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
            means.push_back(average(vals));
            const bool stable = diverged == 0 && spikes == 0;
            if (stable) largest_stable = lr;
            std::printf("%-8s  %8.1e  %5lld  %-15s  %11.2f  %6lld  %lld of %lld\n", model.c_str(), lr, (long long)n,
                        each.c_str(), max_grad, (long long)spikes, (long long)diverged, (long long)n);
            rows.push_back({{"lr", lr}, {"seeds", n}, {"val_loss", vals}, {"max_grad_norm", max_grad}, {"spikes", spikes},
                            {"diverged_runs", diverged}, {"stable", stable}});
        }
        summary["models"][model] = {{"largest_stable_lr", largest_stable}, {"rates", rows}};
        mean_loss.push_back({model + " (mean over seeds)", s.lrs, means, gated ? "#d62728" : "#1f77b4", false, 1, {}});
    }
    const double stable_base = summary["models"]["baseline"]["largest_stable_lr"].get<double>();
    const double stable_g1 = summary["models"]["G1"]["largest_stable_lr"].get<double>();
    std::printf("* largest gradient norm (before clipping) after the warmup, over seeds\n");
    std::printf("\nlargest stable peak lr (no divergence, no spike, every seed): baseline %.1e, G1 %.1e, ratio %.1f\n",
                stable_base, stable_g1, stable_g1 / stable_base);
    summary["stable_lr_ratio"] = stable_g1 / stable_base;
    return summary;
}

// 5. The files: per-run and per-step CSVs, the summary, two pictures.
void write_results(const std::filesystem::path& dir, const Sweep& s, const std::vector<Run>& runs,
                   const std::vector<nlohmann::json>& results, double unigram, const json& summary,
                   std::vector<Series> curves) {
    std::filesystem::create_directories(dir);
    std::vector<std::vector<double>> run_rows, step_rows;
    for (size_t i = 0; i < runs.size(); ++i) {
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

    for (bool gated : {false, true})  // every seed as a point under the mean curve
        for (size_t i = 0; i < runs.size(); ++i)
            if (runs[i].gated == gated)
                curves.push_back({"", {runs[i].lr}, {json_number(results[i]["val_loss"])}, gated ? "#d62728" : "#1f77b4",
                                  true, 0.6, {}});
    ChartOptions chart =
        chart_options("Final validation loss after " + std::to_string(s.steps) + " steps, " + std::to_string(s.layers) +
                          "-layer LM",
                      "peak learning rate", "validation loss (nats/byte)", unigram, "unigram entropy (diverged above)");
    chart.log_x = true;
    write_text_file(dir / "final_loss_vs_lr.svg", svg_line_chart(curves, chart));

    // Training-loss curves (smoothed) of seed 1 at the two largest rates: where spikes show.
    std::vector<Series> lines;
    for (size_t k = s.lrs.size() >= 2 ? s.lrs.size() - 2 : 0; k < s.lrs.size(); ++k)
        for (size_t i = 0; i < runs.size(); ++i) {
            if (runs[i].lr != s.lrs[k] || runs[i].seed != 1) continue;
            const auto loss = json_numbers(results[i]["loss"]);
            std::vector<double> steps(loss.size());
            for (size_t t = 0; t < loss.size(); ++t) steps[t] = double(t + 1);
            char label[64];
            std::snprintf(label, sizeof label, "%s, lr %.1e", runs[i].model().c_str(), runs[i].lr);
            lines.push_back(line(label, steps, smooth(loss, 0.8), chart_color(lines.size())));
        }
    chart = chart_options("Training loss (EMA 0.8), seed 1, two largest rates", "training step", "training loss (nats/byte)",
                          unigram, "unigram entropy");
    write_text_file(dir / "loss_curves.svg", svg_line_chart(lines, chart));
}

}  // namespace

int main(int argc, char** argv) {
    Sweep s;
    ExperimentOptions options;
    CLI::App app{"Tutorial 07: final loss, gradient norms and loss spikes over a learning-rate sweep, baseline vs G1"};
    add_quick_and_out(app, options, "a one-minute version: 3 rates, 4 layers, 60 steps", "tutorials/07_learning_rate/results");
    add_sweep_options(app, options, s.steps, s.seeds);
    app.add_option("--lrs", s.lrs, "peak learning rates");
    app.add_option("--clip", s.clip, "clip the gradient norm to this (0: no clipping)")->check(CLI::NonNegativeNumber);
    CLI11_PARSE(app, argc, argv);
    if (options.quick) {  // smaller defaults; options given on the command line still win
        if (!app.count("--lrs")) s.lrs = {1e-2, 1e-1, 1.0};
        if (!app.count("--steps")) s.steps = 60;
        if (!app.count("--seeds")) s.seeds = 1;
        s.layers = 4;
    }
    std::sort(s.lrs.begin(), s.lrs.end());

    const auto start = Clock::now();
    const auto data = std::make_shared<const TextDataset>(load_documents({kDefaultCorpus}));
    const double unigram = data->unigram_entropy();
    std::vector<Run> runs;
    for (double lr : s.lrs)
        for (int64_t seed = 1; seed <= s.seeds; ++seed)
            for (bool gated : {false, true}) runs.push_back({gated, lr, static_cast<uint64_t>(seed)});
    std::printf("model: %lld layers, d_model %lld, %lld heads, SwiGLU FFN, RoPE; batch %lld x %lld tokens\n",
                (long long)s.layers, (long long)s.d_model, (long long)s.heads, (long long)s.batch, (long long)s.seq_len);
    char clip[64] = "no gradient clipping";
    if (s.clip > 0) std::snprintf(clip, sizeof clip, "clip %.1f", s.clip);
    std::printf("schedule: %lld steps, linear warmup %lld, cosine to 0.1 x peak; AdamW (0.9, 0.95), weight decay 0.1, "
                "%s\n",
                (long long)s.steps, (long long)s.warmup, clip);
    std::printf("unigram entropy of the training bytes: %.4f nats (a run that ends above it diverged)\n", unigram);
    std::printf("%zu runs, %d at a time:\n", runs.size(), options.jobs);

    std::vector<nlohmann::json> results;
    for (const std::string& text : run_in_processes(std::ssize(runs), options.jobs,
                                                    [&](int64_t i) { return train_one(s, runs[i], data, unigram); }))
        results.push_back(nlohmann::json::parse(text));

    std::vector<Series> curves;
    const json summary = summarise(s, runs, results, unigram, curves);
    if (options.out.empty()) {
        std::printf("in %s\n", minutes_and_cpu_minutes(start).c_str());
        return 0;
    }
    write_results(options.out, s, runs, results, unigram, summary, curves);
    std::printf("wrote %s/{runs.csv, steps.csv, summary.json, final_loss_vs_lr.svg, loss_curves.svg}\nin %s\n",
                options.out.c_str(), minutes_and_cpu_minutes(start).c_str());
    return 0;
}
