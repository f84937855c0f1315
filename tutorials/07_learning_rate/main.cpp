// Tutorial 07 — learning-rate stability (the paper's Table 4 / Figure 1; docs/paper.md,
// "Training stability and the learning rate").
//
// Does the G1 gate (σ(x W_g) ⊙ SDPA output) let a model train at larger learning rates? We
// train four variants — baseline, baseline + QK-norm (the known fix: our positive control),
// G1, G1 + QK-norm — at seven peak rates from 1e-3 to 1, on the same seeds and batches, and
// measure for every run its final validation loss and, every 50 steps, the signals of the
// instability that small models show at high rates (nn/analysis/stability.h): the largest
// attention logit q·k/√dk and the smallest attention entropy. Per variant we then compute
// Wortsman et al.'s LR sensitivity (study.h): how much loss a badly chosen rate costs.
//
// Run from the repository root (two runs at a time, one thread each):
//   OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive ./build/tutorials/tutorial_07_learning_rate
// --quick is a two-minute version (one rate, 500 steps); --out DIR writes the results there
// (the committed ones: --out tutorials/07_learning_rate/results); --replot DIR draws a results
// folder's pictures again from its files; --device cuda trains on the GPU (then --jobs 1).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/processes.h"
#include "common/timing.h"
#include "study.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace {

// 1. One run: the library's trainer with probes every probe_every steps, in a child process.
//    ℓ_0 (the loss before training) and a probe at step 0 come first: the starting point of
//    the sensitivity and of the logit growth.
std::string train_one(const RunSettings& s, const std::shared_ptr<const TextDataset>& data, double unigram,
                      Device device) {
    Trainer trainer(s.train_config(), data, device);
    const double initial_loss = trainer.evaluate();
    std::vector<std::pair<int64_t, StabilityStats>> probes{{0, trainer.probe()}};
    const TrainResult r = trainer.run(/*quiet=*/true);
    std::vector<double> loss, grad;
    for (const StepLog& step : r.log) {
        loss.push_back(step.loss), grad.push_back(step.grad_norm);
        if (step.probe) probes.emplace_back(step.step, *step.probe);
    }
    const auto after_warmup = grad.begin() + std::min<int64_t>(s.warmup, std::ssize(grad));
    const double max_grad = after_warmup == grad.end() ? NAN : *std::max_element(after_warmup, grad.end());
    const bool diverged = r.diverged || !(r.final_val_loss < unigram);
    const int64_t spikes = count_spikes(loss);
    const StabilityStats& last = probes.back().second;
    std::printf("  %-16s lr %.0e seed %llu: val loss %.4f, largest attention logit %9.3g, smallest entropy %.3f, "
                "spikes %lld%s (%.0f s)\n",
                s.variant.name.c_str(), s.lr, (unsigned long long)s.seed, r.final_val_loss, last.largest_attn_logit(),
                last.smallest_attn_entropy(), (long long)spikes, diverged ? ", DIVERGED" : "", r.seconds);
    nlohmann::json probe_rows = nlohmann::json::array();
    for (const auto& [step, p] : probes) {
        const double gate = p.gate_mean.empty() ? NAN : average(p.gate_mean);
        probe_rows.push_back({step, p.largest_attn_logit(), p.smallest_attn_entropy(), gate, p.mean_log_z,
                              p.max_abs_hidden});
    }
    return nlohmann::json{{"initial_loss", initial_loss}, {"val_loss", r.final_val_loss}, {"diverged", diverged},
                          {"spikes", spikes},             {"max_grad", max_grad},         {"seconds", r.seconds},
                          {"loss", loss},                 {"probes", probe_rows}}
        .dump();
}

RunResult parse_run(const std::string& text, size_t variant, double lr, uint64_t seed) {
    const nlohmann::json j = nlohmann::json::parse(text);
    RunResult r{variant, lr, seed, json_number(j["initial_loss"]), json_number(j["val_loss"]), j["diverged"].get<bool>(),
                j["spikes"].get<int64_t>(), json_number(j["max_grad"]), j["seconds"].get<double>(),
                json_numbers(j["loss"]), {}};
    for (const nlohmann::json& p : j["probes"])
        r.probes.push_back({p[0].get<int64_t>(), json_number(p[1]), json_number(p[2]), json_number(p[3]),
                            json_number(p[4]), json_number(p[5])});
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    line_buffered_stdout();
    ExperimentOptions options;
    int64_t seeds = 2, steps = 0;
    std::vector<double> lrs{1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0};  // half-decades
    std::string device_name = "cpu";
    Study study;
    RunSettings& s = study.settings;
    CLI::App app{"Tutorial 07: learning-rate sensitivity of baseline, QK-norm, G1 and G1 + QK-norm"};
    add_quick_and_out(app, options, "the four variants at lr 1e-1 for 500 steps, one seed (two minutes on 2 cores)",
                      "tutorials/07_learning_rate/results");
    add_sweep_options(app, options, steps, seeds);
    app.add_option("--lrs", lrs, "peak learning rates (default: 1e-3 to 1 in half-decades)");
    app.add_option("--weight-decay", s.weight_decay, "AdamW's weight decay λ")->capture_default_str();
    app.add_flag("--independent-wd", s.independent_wd, "weight decay independent of the rate (λ·s_t per step)");
    app.add_option("--z-loss", s.z_loss, "z-loss coefficient")->capture_default_str();
    std::string precision = "f32";
    app.add_option("--precision", precision, "f32, or bf16: every run in mixed precision (gg::Autocast)")
        ->check([](const std::string& v) {
            try {
                parse_precision(v);
                return std::string();
            } catch (const std::exception& e) {
                return std::string(e.what());
            }
        })
        ->capture_default_str();
    app.add_option("--layers", s.layers, "transformer blocks")->capture_default_str();
    app.add_option("--d-model", s.d_model, "model width")->capture_default_str();
    app.add_option("--batch", s.batch, "sequences per batch")->capture_default_str();
    app.add_option("--device", device_name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
    add_replot(app, options);
    CLI11_PARSE(app, argc, argv);
    s.precision = parse_precision(precision);
    if (!options.replot.empty()) {
        plot_study(options.replot, read_study(options.replot));
        std::printf("redrew the pictures of %s from its summary.json, runs.csv, probes.csv, steps.csv\n",
                    options.replot.c_str());
        return 0;
    }
    // --quick: the four variants at one rate that is too high for the baseline, a quarter of
    // the steps. It shows the lesson's direction (the baseline's logits grow by orders of
    // magnitude and it ends worst, QK-norm best, G1 between), not the sensitivity over rates.
    if (options.quick) {
        s.steps = 500, s.warmup = 25;
        if (!app.count("--lrs")) lrs = {1e-1};
        if (!app.count("--seeds")) seeds = 1;
    }
    if (steps > 0) s.steps = steps, s.warmup = std::max<int64_t>(1, steps / 20);
    std::sort(lrs.begin(), lrs.end());
    study.lrs = lrs, study.seeds = seeds;
    const Device device = device_name == "cuda" ? Device::CUDA : Device::CPU;

    // 2. The runs: every variant at every rate and seed. A seed fixes the initial weights
    //    and the batch order, the same for all four variants.
    const auto start = Clock::now();
    const auto data = std::make_shared<const TextDataset>(load_documents({kDefaultCorpus}));
    study.unigram = data->unigram_entropy();
    std::printf("every run: %lld layers x %lld, %lld heads, SwiGLU, RoPE, gpt2 init; batch %lld x %lld tokens; "
                "%lld steps, warmup %lld, cosine to 0.1 x peak; AdamW (0.9, 0.95), weight decay %g%s; clip %g%s; "
                "seeds 1..%lld\n",
                (long long)s.layers, (long long)s.d_model, (long long)s.heads, (long long)s.batch,
                (long long)s.seq_len, (long long)s.steps, (long long)s.warmup, s.weight_decay,
                s.independent_wd ? " (independent of the rate)" : "", s.clip,
                (s.z_loss > 0 ? ", z-loss " + std::to_string(s.z_loss) : std::string()).c_str(), (long long)seeds);
    if (s.precision == DType::bf16) std::printf("mixed precision: GEMMs and attention in bfloat16 (gg::Autocast)\n");
    std::printf("unigram entropy of the training bytes: %.4f nats (a run that ends above it diverged)\n", study.unigram);
    struct Job {
        size_t variant;
        double lr;
        uint64_t seed;
    };
    std::vector<Job> jobs;
    for (uint64_t seed = 1; seed <= uint64_t(seeds); ++seed)
        for (double lr : lrs)
            for (size_t v = 0; v < variants().size(); ++v) jobs.push_back({v, lr, seed});
    std::printf("%zu runs, %d at a time:\n", jobs.size(), options.jobs);
    const std::vector<std::string> out = run_in_processes(std::ssize(jobs), options.jobs, [&](int64_t i) {
        RunSettings run = s;
        run.variant = variants()[jobs[i].variant], run.lr = jobs[i].lr, run.seed = jobs[i].seed;
        return train_one(run, data, study.unigram, device);
    });
    for (size_t i = 0; i < jobs.size(); ++i)
        study.runs.push_back(parse_run(out[i], jobs[i].variant, jobs[i].lr, jobs[i].seed));

    // 3. The report: final loss per rate, LR sensitivity, the control's verdict, the mechanism.
    const json summary = report(study, options.quick);
    if (!options.out.empty()) write_results(options.out, study, summary);
    std::printf("%zu runs in %s\n", jobs.size(), minutes_and_cpu_minutes(start).c_str());
    return 0;
}
