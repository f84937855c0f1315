// report.h — one HTML page to look at a run, or at two side by side (`gatedgrad report`): the
// curves of its training log (loss, learning rate, and the stability probes of stability.h when
// the run took them), the attention-sink table of analysis.h, and the attention map of every
// layer and head on one validation sequence, with the gate values beside each map for a gated
// model. Given a baseline and a gated run, every chart, table and map holds both, so that a sink
// (docs/paper.md, "The attention sink") in one and not in the other shows at a glance: a dark
// first column in the baseline's maps, a gate that closes on those queries in the gated one's.
//
// The page stands alone: no server, no network. Its charts are plot.h's SVG, inline; its maps
// are drawn on canvases by the page's own script from the numbers embedded in it as JSON
// (probabilities to 4 decimals). When the script is done it writes "ok: N maps" into the
// hidden element #status, or shows there the first error it met: what a test reads back from
// a headless browser.
//
// A run still training (a log, no checkpoint yet) shows its curves, and says that its sink
// table and maps come with its first checkpoint. A page written with a refresh (report
// --watch) reloads itself, so that an open tab follows the run as TensorBoard's does. A log
// of millions of steps is drawn from a few thousand points per curve (plot.h's downsample),
// and the page says so.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "nn/analysis/analysis.h"
#include "nn/analysis/training_log.h"

namespace gg::nn {

// The attention of one sequence, every layer and head.
struct AttentionMaps {
    std::vector<int64_t> tokens;  // (T) the sequence, BOS first
    // (T) each token as text, from the model's tokenizer (report --prompt); empty: the page names
    // byte-level tokens itself (a byte as its character, 256 as BOS)
    std::vector<std::string> token_texts;
    std::vector<Tensor> probs;    // per layer (H, T, T): query rows, key columns
    std::vector<Tensor> gates;    // per layer (H, T): each head's mean gate value at each query; empty without a gate
};

// One forward pass over ids (1, T) without gradients. A gate shared by several heads (GQA's
// key/value gates, a gate shared across heads) is shown beside each of them; a gate of several
// channels per head (element-wise) is shown as their mean.
AttentionMaps capture_attention_maps(const GatedTransformerLM& model, const Tensor& ids);

// What the page shows of one run; or of one model read on a prompt (report --prompt), which has
// no log: its maps and its sink report are then the prompt's, and the page has no training charts.
struct RunReport {
    std::string name;         // its label: the run's folder
    std::string description;  // the model and its training, one line
    std::string gate;         // the gate position's name (gate_position_name)
    TrainingLog log;
    ModelAnalysis sink;
    std::string sink_data;    // what the sink was measured on: "8 sequences of 64 tokens (BOS first)"
    AttentionMaps maps;
    std::string pending;      // non-empty for a run without a checkpoint yet: why sink and maps are absent
    // The run's settings as config.json holds them, flattened ("model.n_layers" → "2"): the
    // runs table marks those that differ between the runs.
    std::vector<std::pair<std::string, std::string>> settings;
};

struct ReportOptions {
    int refresh_seconds = 0;  // > 0: the page reloads itself this often (report --watch)
    size_t max_points = 4000;  // per curve; longer ones are downsampled
};

// The page: one run, or several compared (the first is drawn left or first in each chart); runs
// with a log each or models on a prompt, not both.
std::string report_html(const std::vector<RunReport>& runs, const ReportOptions& options = {});

}  // namespace gg::nn
