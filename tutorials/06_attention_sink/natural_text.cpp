// natural_text.cpp — tutorial 06, part (b): the attention sink on natural text.
//
// The tiny preset (2 layers, d_model 64, 4 heads) trained on the fortunes corpus, baseline
// and G1, at the preset's learning rate and at 3× it. analyze() (nn/analysis) reports per layer
// how much attention goes to BOS, the sink heads, the gates and the largest activations.
// Then StreamingLLM's test: the same weights with a sliding window, so that
// late queries cannot see BOS — a model that leans on BOS should lose most.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "attention_sink.h"
#include "common/attention_maps.h"
#include "common/results.h"
#include "common/timing.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace {

struct TextRun {
    std::string name;  // "baseline" or "g1"
    double lr = 0;
    double val_loss = 0, seconds = 0;
    ModelAnalysis analysis;
    std::vector<double> curve_step, curve_alpha, curve_val;
    std::shared_ptr<GatedTransformerLM> model;
    std::vector<std::vector<double>> position_loss;  // per window (0: full attention), mean loss at each t
};

// The validation inputs analyze() runs on: `n` fixed batches, (n·B, T).
Tensor analysis_ids(const TextDataset& data, int64_t n, int64_t B, int64_t T) {
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < n; ++i) parts.push_back(data.val_batch(i, B, T).inputs);
    return cat(parts, 0);
}

// The trainings of part (b): the baseline and G1 at the preset's learning rate and at 3× it.
struct TextRunSpec {
    GatePosition gate;
    double lr_scale;
};
const std::vector<TextRunSpec> kTextRuns{{GatePosition::none, 1.0}, {GatePosition::sdpa_output, 1.0},
                                         {GatePosition::none, 3.0}, {GatePosition::sdpa_output, 3.0}};

TrainConfig text_config(const TextRunSpec& spec, int64_t steps) {
    TrainConfig c = TrainConfig::preset("tiny");
    c.model.attn.gate = spec.gate;
    c.lr *= spec.lr_scale;
    c.steps = steps, c.eval_every = 0;
    return c;
}

// Trains one model in a child process, measuring α (mean over layers and heads) and the
// validation loss `points` times along the way; saves it to `checkpoint`.
std::string train_text(const TextRunSpec& spec, int64_t steps, int64_t points, const std::string& checkpoint) {
    const TrainConfig c = text_config(spec, steps);
    const auto data = std::make_shared<TextDataset>(load_documents(c.data));
    const auto start = Clock::now();
    Trainer trainer(c, data);
    const Tensor probe = analysis_ids(*data, 1, c.batch_size, c.seq_len);
    json curve = {{"step", json::array()}, {"mean_alpha", json::array()}, {"val_loss", json::array()}};
    for (int64_t k = 1; k <= points; ++k) {
        trainer.run(true, k * steps / points);
        trainer.model().eval();
        curve["step"].push_back(trainer.step());
        curve["mean_alpha"].push_back(analyze(trainer.model(), probe).mean_first_token_share);
        curve["val_loss"].push_back(trainer.evaluate());
        trainer.model().train();
    }
    trainer.save(checkpoint);
    const double seconds = seconds_since(start);
    std::printf("  trained %-8s lr %.0e (natural text) in %4.0f s\n", gate_position_name(spec.gate).c_str(), c.lr,
                seconds);
    return json{{"checkpoint", checkpoint}, {"seconds", seconds}, {"curve", curve}}.dump();
}

// StreamingLLM's test: the same weights in a model whose attention sees only the last
// `window` keys, so queries t ≥ window cannot see BOS. Fills run.position_loss, one row
// per window (0: full attention), over `batches` validation batches.
void window_losses(TextRun& run, const TextDataset& data, const std::vector<int64_t>& windows, int64_t batches,
                   int64_t B, int64_t T) {
    NoGradGuard no_grad;
    for (int64_t window : windows) {
        LMConfig config = run.model->config();
        config.attn.window = window;
        GatedTransformerLM windowed(config);
        copy_state(windowed.state_dict(), run.model->state_dict(), "tutorial 06", "the trained model", "the windowed one");
        windowed.eval();
        std::vector<double> loss(T, 0.0);
        for (int64_t i = 0; i < batches; ++i) {
            const Batch batch = data.val_batch(i, B, T);
            const TokenScores s = score_tokens(windowed.forward(batch.inputs).logits, batch.targets);
            for (int64_t n = 0; n < B * T; ++n) loss[n % T] += s.loss[n] / double(batches * B);
        }
        run.position_loss.push_back(loss);
    }
}

std::string model_label(const TextRun& run) {
    char b[64];
    std::snprintf(b, sizeof b, "%s, lr %.0e", run.name == "baseline" ? "baseline" : "G1", run.lr);
    return b;
}

void write_text_results(const std::filesystem::path& dir, const TrainConfig& tiny, const TextDataset& data,
                        const std::vector<TextRun>& runs, const std::vector<int64_t>& windows);

}  // namespace

std::vector<TrainingJob> natural_text_jobs(bool quick, const std::string& scratch) {
    const int64_t steps = quick ? 60 : TrainConfig::preset("tiny").steps, points = quick ? 2 : 6;
    std::vector<TrainingJob> jobs;
    for (const TextRunSpec& spec : kTextRuns) {
        const std::string checkpoint = scratch + "/b_" + std::to_string(jobs.size()) + ".safetensors";
        jobs.push_back({checkpoint, [=] { return train_text(spec, steps, points, checkpoint); }});
    }
    return jobs;
}

void natural_text_report(bool quick, const std::vector<std::string>& results, const std::string& out) {
    const TrainConfig tiny = TrainConfig::preset("tiny");
    auto data = std::make_shared<TextDataset>(load_documents(tiny.data));
    const int64_t steps = quick ? 60 : tiny.steps, T = tiny.seq_len;
    std::printf("\n== (b) natural text (%s), tiny preset: d_model %d, %d layers, 4 heads, T = %d, %lld steps\n",
                tiny.data[0].c_str(), int(tiny.model.d_model), int(tiny.model.n_layers), int(T), (long long)steps);
    std::vector<TextRun> runs;
    for (size_t i = 0; i < kTextRuns.size(); ++i) {
        const json j = json::parse(results[i]);
        TextRun run;
        run.name = gate_position_name(kTextRuns[i].gate), run.lr = text_config(kTextRuns[i], steps).lr;
        run.seconds = j["seconds"].get<double>();
        run.curve_step = json_numbers(j["curve"]["step"]);
        run.curve_alpha = json_numbers(j["curve"]["mean_alpha"]);
        run.curve_val = json_numbers(j["curve"]["val_loss"]);
        run.val_loss = run.curve_val.back();
        run.model = load_checkpoint(j["checkpoint"].get<std::string>());
        run.model->eval();
        run.analysis = analyze(*run.model, analysis_ids(*data, 4, tiny.batch_size, T));
        std::printf("  %-8s lr %.0e: %lld steps in %.0f s, validation loss %.4f, mean alpha %.3f, sink heads %lld of "
                    "%lld\n",
                    run.name.c_str(), run.lr, (long long)steps, run.seconds, run.val_loss,
                    run.analysis.mean_first_token_share, (long long)run.analysis.sink_heads,
                    (long long)run.analysis.heads);
        runs.push_back(std::move(run));
    }
    for (TextRun& run : runs) {
        std::printf("\n%s:\n%s", model_label(run).c_str(), run.analysis.table().c_str());
        for (size_t l = 0; l < run.analysis.layers.size(); ++l) {
            std::printf("  layer %d alpha per head:", int(l));
            for (double a : run.analysis.layers[l].first_token_share) std::printf(" %.3f", a);
            std::printf("\n");
        }
    }

    const std::vector<int64_t> windows{0, 32, 16};
    const int64_t eval_batches = quick ? 2 : 8;
    std::printf("\nStreamingLLM test: validation loss at T = %d, %lld batches of %d; with window w the queries t >= w "
                "cannot see BOS.\n'late' is the loss of queries t >= w, next to the same queries with full attention.\n",
                int(T), (long long)eval_batches, int(tiny.batch_size));
    std::printf("  %-20s %8s   %-30s %-30s\n", "model", "full", "window 32: late full -> window", "window 16: late full -> window");
    for (TextRun& run : runs) {
        window_losses(run, *data, windows, eval_batches, tiny.batch_size, T);
        std::printf("  %-20s %8.4f  ", model_label(run).c_str(), mean_range(run.position_loss[0], 0, T));
        for (size_t w = 1; w < windows.size(); ++w) {
            const double full = mean_range(run.position_loss[0], windows[w], T);
            const double win = mean_range(run.position_loss[w], windows[w], T);
            std::printf("  %.4f -> %.4f (%+.4f)     ", full, win, win - full);
        }
        std::printf("\n");
    }
    if (out.empty()) return;
    write_text_results(out, tiny, *data, runs, windows);
    std::printf("\nwrote %s/b_*.{json,csv,svg,png}\n", out.c_str());
}

// ---------------------------------------------------------------- the files of part (b)

namespace {

json text_run_json(const TextRun& run, const std::vector<int64_t>& windows) {
    json j = {{"model", run.name}, {"lr", run.lr}, {"seconds", run.seconds}, {"val_loss", run.val_loss},
              {"analysis", json::parse(run.analysis.to_json())},
              {"curve", {{"step", run.curve_step}, {"mean_alpha", run.curve_alpha}, {"val_loss", run.curve_val}}},
              {"sliding_window", json::array()}};
    const int64_t T = int64_t(run.position_loss[0].size());
    for (size_t w = 0; w < windows.size(); ++w) {
        const int64_t split = windows[w] > 0 ? windows[w] : T / 2;
        j["sliding_window"].push_back({{"window", windows[w]},
                                       {"loss_all", mean_range(run.position_loss[w], 0, T)},
                                       {"late_from", split},
                                       {"loss_late", mean_range(run.position_loss[w], split, T)},
                                       {"loss_late_full_attention", mean_range(run.position_loss[0], split, T)},
                                       {"loss_per_position", run.position_loss[w]}});
    }
    return j;
}

void write_text_results(const std::filesystem::path& dir, const TrainConfig& tiny, const TextDataset& data,
                        const std::vector<TextRun>& runs, const std::vector<int64_t>& windows) {
    std::filesystem::create_directories(dir);
    const int64_t T = tiny.seq_len;
    json j = {{"train", json::parse(tiny.to_json())}, {"runs", json::array()}};
    for (const TextRun& run : runs) j["runs"].push_back(text_run_json(run, windows));
    write_json(dir / "b_natural_text.json", j);

    // Per-layer bars of α (mean over heads), and the per-(layer, head) table as CSV.
    std::vector<std::string> groups;
    std::vector<BarSeries> bars;
    std::vector<std::vector<double>> rows;
    for (const TextRun& run : runs) bars.push_back({model_label(run), {}, "", {}});
    for (size_t l = 0; l < runs[0].analysis.layers.size(); ++l) {
        groups.push_back("layer " + std::to_string(l));
        for (size_t r = 0; r < runs.size(); ++r) {
            const LayerAnalysis& layer = runs[r].analysis.layers[l];
            bars[r].values.push_back(layer.mean_first_token_share);
            for (size_t h = 0; h < layer.first_token_share.size(); ++h)
                rows.push_back({double(runs[r].name != "baseline"), runs[r].lr, double(l), double(h),
                                layer.first_token_share[h], layer.gate_mean, layer.gate_below_0_1, layer.entropy,
                                layer.gated_entropy, layer.max_abs_hidden, layer.max_abs_hidden_first});
        }
    }
    const ChartOptions chart = chart_options("natural text, tiny preset: attention on BOS per layer (mean over heads)",
                                             "model, learning rate and layer",
                                             "alpha (attention on position 0)", 0.3, "sink threshold 0.3");
    write_file_atomically((dir / "b_alpha.svg").string(), svg_bar_chart(groups, bars, chart));
    write_file_atomically((dir / "b_per_head.csv").string(),
                    csv_table({"g1", "lr", "layer", "head", "alpha", "layer_gate_mean", "layer_gate_below_0_1",
                               "layer_entropy", "layer_gated_entropy", "layer_max_abs_hidden",
                               "layer_max_abs_hidden_bos"},
                              rows));

    // α during training, and the loss per position with and without the window.
    std::vector<Series> alpha_lines, window_lines;
    for (const TextRun& run : runs) alpha_lines.push_back(line(model_label(run), run.curve_step, run.curve_alpha));
    write_file_atomically((dir / "b_alpha_curve.svg").string(),
                    svg_line_chart(alpha_lines, chart_options("natural text: attention on BOS during training",
                                                              "training step", "alpha, mean over layers and heads")));
    std::vector<double> positions(T);
    for (int64_t t = 0; t < T; ++t) positions[t] = double(t);
    for (size_t r = 2; r < 4; ++r) {  // 3× the preset's learning rate, where the baseline leans on BOS most
        window_lines.push_back(line(model_label(runs[r]) + ", full attention", positions,
                                    smooth(runs[r].position_loss[0], 0.7), pair_color(r - 2, false)));
        window_lines.push_back(line(model_label(runs[r]) + ", window 16", positions,
                                    smooth(runs[r].position_loss[2], 0.7), pair_color(r - 2, true)));
    }
    write_file_atomically((dir / "b_window.svg").string(),
                    svg_line_chart(window_lines, chart_options("sliding window 16 (BOS invisible to queries t >= 16): "
                                                               "loss per position",
                                                               "query position t", "validation loss (nats, smoothed over t)")));

    // Heat maps, at each learning rate: the baseline's strongest sink head and the same head of G1.
    const Tensor first = analysis_ids(data, 1, tiny.batch_size, T).narrow(0, 0, 1);  // (1, T)
    for (size_t r = 0; r < runs.size(); r += 2) {
        int64_t best_l = 0, best_h = 0;
        const auto& layers = runs[r].analysis.layers;
        for (size_t l = 0; l < layers.size(); ++l)
            for (size_t h = 0; h < layers[l].first_token_share.size(); ++h)
                if (layers[l].first_token_share[h] > layers[best_l].first_token_share[best_h])
                    best_l = int64_t(l), best_h = int64_t(h);
        for (const TextRun* run : {&runs[r], &runs[r + 1]}) {
            char stem[96];
            std::snprintf(stem, sizeof stem, "b_heatmap_%s_lr%.0e_layer%d_head%d", run->name.c_str(), run->lr,
                          int(best_l), int(best_h));
            char name[48];
            std::snprintf(name, sizeof name, "%s, lr %.0e", run->name.c_str(), run->lr);
            write_head_heatmaps((dir / stem).string(), name, *run->model, first, best_l, best_h, 4);
        }
    }
}

}  // namespace
