// gatedgrad sink — the attention-sink report (nn/analysis/analysis.h; tutorial 06): per layer,
// the attention queries give to the first token, the attention entropy and the gate's values,
// with heat maps of every head; of any model on its validation text, on --data's text in its
// own tokens, or on random ones.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "cli.h"
#include "commands.h"
#include "model_options.h"
#include "nn/analysis/analysis.h"
#include "nn/analysis/plot.h"
#include "nn/files.h"
#include "nn/attention.h"
#include "nn/transformer.h"
#include "tensor/random.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

struct SinkArgs {
    CLI::App* cmd = nullptr;
    DataArgs data;
    int64_t batches = 4;
    double threshold = 0.3;
    std::string png_dir, json_file;
    bool random_tokens = false;  // Gu et al.'s probe: do sinks form without any text?
    std::vector<int64_t> layers;  // which layers to capture and report; empty: all
    uint64_t seed = 1;
};

void add_sink(CLI::App& app, SinkArgs& a) {
    a.cmd = app.add_subcommand("sink", "attention-sink report: per layer, the attention queries give to the first token");
    a.cmd->footer(
        "Columns, one row per layer (nn/analysis/analysis.h; tutorial 06):\n"
        "  first-token share  mean attention that queries 1..T-1 give to position 0 (BOS), alpha\n"
        "  sink               whether the layer's alpha is above --threshold\n"
        "  entropy            mean entropy -sum p log p of the attention rows (nats; 0: one key only)\n"
        "  gated-entropy      the same, counting a closed gate's share as attention sent nowhere (G1)\n"
        "  gate-mean, gate<0.1  the mean gate value and the share of gate values below 0.1\n"
        "  max|h|, max|h@0|   largest |value| of the layer's output, anywhere and at position 0");
    add_data_options(a.cmd, a.data, 4);
    a.cmd->add_option("--batches", a.batches, "validation batches to average over")
        ->check(count(1, TrainConfigLimits::eval_batches))
        ->capture_default_str();
    a.cmd->add_option("--threshold", a.threshold, "a layer is a sink layer when its mean share is above this")
        ->check(bounded(0, 1))
        ->capture_default_str();
    a.cmd->add_option("--png", a.png_dir,
                      "write DIR/layer<l>_head<h>.png heat maps of the first sequence, and first_token_share.svg/.csv")
        ->type_name("DIR");
    a.cmd->add_option("--json", a.json_file, "write the report as JSON")->type_name("FILE");
    a.cmd->add_flag("--random-tokens", a.random_tokens,
                    "uniformly random token ids instead of text (Gu et al. 2024's probe)");
    a.cmd->add_option("--seed", a.seed, "with --random-tokens: the ids' seed")->check(kSeed)->capture_default_str();
    a.cmd->add_option("--layers", a.layers, "report only these layers, e.g. 0,13,27: each kept layer's probabilities "
                                            "take 4·sequences·heads·T² bytes")
        ->delimiter(',')
        ->check(CLI::NonNegativeNumber);
}

// Heat maps of the first sequence's attention, and the per-layer bars of the first-token share.
void write_sink_pictures(GatedTransformerLM& model, const Tensor& ids, const ModelAnalysis& analysis,
                         const std::string& dir_name) {
    const fs::path dir(dir_name);
    fs::create_directories(dir);
    const int64_t T = ids.size(1);
    LMCapture capture;
    for (const LayerAnalysis& layer : analysis.layers) capture.layers.push_back(layer.layer);  // those measured
    {
        NoGradGuard no_grad;
        model.forward(ids.narrow(0, 0, 1), Tensor(), nullptr, &capture);  // (1, T)
    }
    const int scale = int(std::clamp<int64_t>(256 / T, 1, 64));  // about 256 pixels a side
    for (size_t l = 0; l < model.blocks.size(); ++l) {
        if (!capture.keeps(l) || !model.blocks[l]->has_attention()) continue;  // linear, feed_forward: no map
        const Tensor probs = capture.attention[l].probs.select(0, 0);  // (H, T, T): query rows, key columns
        for (int64_t h = 0; h < probs.size(0); ++h) {
            HeatmapOptions options;
            options.title = "layer " + std::to_string(l) + ", head " + std::to_string(h) + " (" +
                            gate_position_name(model.config().attn.gate) + ")";
            write_heatmap_png((dir / ("layer" + std::to_string(l) + "_head" + std::to_string(h) + ".png")).string(),
                              probs.select(0, h), scale, options);
        }
    }

    std::vector<std::string> groups, header{"layer"};
    std::vector<BarSeries> heads;
    std::vector<std::vector<double>> rows;
    for (size_t l = 0; l < analysis.layers.size(); ++l) {
        const LayerAnalysis& layer = analysis.layers[l];
        groups.push_back("layer " + std::to_string(layer.layer));
        heads.resize(layer.first_token_share.size());
        rows.push_back({double(layer.layer)});
        for (size_t h = 0; h < layer.first_token_share.size(); ++h) {
            heads[h].label = "head " + std::to_string(h);
            heads[h].values.push_back(layer.first_token_share[h]);
            rows.back().push_back(layer.first_token_share[h]);
        }
        rows.back().push_back(layer.mean_first_token_share);
    }
    for (size_t h = 0; h < heads.size(); ++h) header.push_back("head" + std::to_string(h));
    header.push_back("mean");
    ChartOptions chart;
    chart.title = "attention on the first token (" + gate_position_name(model.config().attn.gate) + ")";
    chart.x_label = "layer";
    chart.y_label = "mean attention to position 0 (fraction)";
    chart.reference_y = analysis.threshold;
    chart.reference_label = "sink threshold";
    write_file_atomically((dir / "first_token_share.svg").string(), svg_bar_chart(groups, heads, chart));
    write_file_atomically((dir / "first_token_share.csv").string(), csv_table(header, rows));
}

int run_sink(SinkArgs& a) {
    const ModelOnText m = open_for_data(a.data, Workload::analysis, a.batches);  // every batch in one forward
    const Autocast precision(m.opened.precision);
    const int64_t B = a.data.batch, T = a.data.seq_len;
    Tensor ids;  // (n·B, T)
    std::string first;
    if (a.random_tokens) {
        // Ids the tokenizer knows: a checkpoint's padding rows were never trained on.
        const int64_t V = m.opened.tokenizer ? m.opened.tokenizer->vocab_size() : m.model().config().vocab_size;
        Generator gen(a.seed);
        ids = randint(0, V, {B * a.batches, T}, gen).to(device_of(m.model()));
        first = "random ids";
    } else {
        const Tensor windows = text_windows(m, a.data, a.batches);  // (n·B, T + 1)
        ids = windows.narrow(1, 0, windows.size(1) - 1);
        first = first_token_note(m, a.data);
    }
    const ModelAnalysis analysis = analyze(m.model(), ids, a.threshold, a.layers);
    std::printf("%s: attention %s, %lld sequences of %lld tokens (%s)\n", a.data.model.path().c_str(),
                gate_position_name(m.model().config().attn.gate).c_str(), (long long)ids.size(0),
                (long long)ids.size(1), first.c_str());
    std::printf("%s", analysis.table().c_str());
    if (!a.png_dir.empty()) {  // first: --json may point into this folder
        write_sink_pictures(m.model(), ids, analysis, a.png_dir);
        std::printf("wrote %s/layer<l>_head<h>.png, first_token_share.svg, first_token_share.csv\n", a.png_dir.c_str());
    }
    if (!a.json_file.empty()) {
        write_file_atomically(a.json_file, analysis.to_json() + "\n");
        std::printf("wrote %s\n", a.json_file.c_str());
    }
    return 0;
}

}  // namespace

Command sink_command(CLI::App& app) { return make_command<SinkArgs>(app, add_sink, run_sink); }
