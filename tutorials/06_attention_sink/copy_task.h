// copy_task.h — what the files of part (a), Bigram-Backcopy, share: the models a setup
// trains, what is measured for each kind of query, and what the parent knows of each
// trained model.
//   copy_task.cpp          the task and the training of each model (measured along the way)
//   copy_task_measures.cpp measure_copy: where the attention of each kind of query goes
//   copy_task_report.cpp   the tables, the curves and the attention as text
//   copy_task_files.cpp    the files of part (a): JSON, CSV, charts and heat maps
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attention_sink.h"
#include "common/results.h"

// A model shape: layers × heads.
struct ModelShape {
    int64_t layers = 1, heads = 1;
    std::string name() const { return std::to_string(layers) + "-layer " + std::to_string(heads) + "-head"; }
    std::string stem() const { return std::to_string(layers) + "x" + std::to_string(heads); }
};

// One model of the setup: which shape, baseline or G1, which seed. Index order: shape, seed, gate.
struct CopyRunSpec {
    ModelShape shape;
    gg::nn::GatePosition gate;
    int64_t seed;
    std::string label() const {
        return shape.stem() + " " + (gate == gg::nn::GatePosition::none ? "baseline" : "G1") + " seed " +
               std::to_string(seed);
    }
};
std::vector<CopyRunSpec> run_specs(const CopySetup& s);

// The setup's task, and the training of one of its models.
gg::nn::BigramBackcopyOptions task_options(const CopySetup& s);
gg::nn::TrainConfig copy_config(const CopySetup& s, const ModelShape& shape, gg::nn::GatePosition gate, int64_t seed);
// α of a query that spreads its attention evenly over the keys it sees, averaged over the
// queries t = 1 … T−1.
double even_alpha(const CopySetup& s);

// Sums over one kind of query (trigger or not), positions t ≥ 1 (query 0 is BOS itself).
// Per (layer, head): attention on key 0 (α), on the query's own key t, on key t − 1, on its
// top key (whichever holds the most); the gate.
struct QueryClass {
    double count = 0, loss = 0, hits = 0, oracle_loss = 0;
    // alpha_gated: α times the query's mean gate (α alone for the baseline) — the share of what
    // reaches W_O that comes from BOS. row_sum: Σ_j of the query's weights, 1 for softmax, less
    // where a slot (softmax1, sink) took the rest, anything for sigmoid and softpick; and
    // alpha_normalised, α over the row sum (Gu et al.'s reading of unnormalised weights; 0 for a
    // row of sum 0): tutorial 14 compares the score functions with these.
    std::vector<double> alpha, alpha_gated, self, previous, gate, row_sum, alpha_normalised;
    // A sink need not sit on BOS: a query may park on any key whose value is small. top: the
    // query's largest weight over its keys, whichever key it is (near 1 when it parks on one key,
    // near 1/(t+1) when it spreads; α, self and previous beside it say whether that key is one of
    // theirs). value_top: ‖v‖ of that key; value_rest: the mean ‖v‖ of its other keys (NaN where
    // the values are unknown, as value_bos): their ratio is the top key's value drain.
    std::vector<double> top, value_top, value_rest;

    void resize(size_t n) {
        for (auto* v : {&alpha, &alpha_gated, &self, &previous, &gate, &row_sum, &alpha_normalised, &top, &value_top,
                        &value_rest})
            v->assign(n, 0);
    }
    // Adds the attention of query t of head i (i = l·H + h): row, its weights on keys 0 … t
    // (t + 1 ≥ 2 of them); g, its gate (1 without G1); value_norms, ‖v_j‖ of keys 0 … t, or
    // empty where unknown. Counts no query: the caller adds 1 to count once for all heads.
    void add(size_t i, std::span<const float> row, double g, std::span<const double> value_norms);
    double mean_of(const std::vector<double>& v, size_t i) const { return v[i] / count; }
    double mean_all(const std::vector<double>& v) const {  // over queries, heads and layers
        double s = 0;
        for (double x : v) s += x;
        return s / count / double(v.size());
    }
};

struct CopyReport {
    // layers: the model's layers measured, its full-attention ones (a hybrid's linear layers have
    // no attention map; nn/transformer.h); L of them, each of H heads. Index i = l·H + h below
    // counts l over these layers.
    std::vector<int64_t> layers;
    int64_t L = 0, H = 0;
    bool gated = false;
    QueryClass trigger, other;
    // The value drain: per (layer, head), the mean ‖v‖ of BOS's value vector and of the other
    // positions' (v = W_V RMSNorm(x) of the head; a sink whose value is small adds little). NaN
    // for multi-head latent attention, whose values come from the latent (nn/mla.h).
    std::vector<double> value_bos, value_other;
    double layer_mean(const QueryClass& c, const std::vector<double>& v, int64_t l) const {
        double s = 0;
        for (int64_t h = 0; h < H; ++h) s += c.mean_of(v, l * H + h);
        return s / double(H);
    }
    static double mean(const std::vector<double>& v) {
        double s = 0;
        for (double x : v) s += x;
        return s / double(v.size());
    }
};

// Runs the model over `batches` validation batches (B, T) with capture on and sorts every
// query t ≥ 1 by whether its input token is a trigger.
CopyReport measure_copy(const gg::nn::GatedTransformerLM& model, const gg::nn::BigramBackcopy& data, int64_t batches,
                        int64_t B, int64_t T);

// One model trained on the setup's task to its last step, with `configure` applied to its
// LMConfig, and measured by measure_copy over 4 validation batches: what the tutorials that
// compare settings on this task (14, 15) train for each of their rows.
struct TrainedCopy {
    std::shared_ptr<gg::nn::BigramBackcopy> data;
    gg::nn::TrainConfig config;
    std::unique_ptr<gg::nn::Trainer> trainer;
    CopyReport report;
    const gg::nn::GatedTransformerLM& model() const { return trainer->model(); }
};
TrainedCopy train_and_measure(const CopySetup& s, const ModelShape& shape, int64_t seed,
                              const std::function<void(gg::nn::LMConfig&)>& configure);

// The head of layer l with the largest v[l·H + h]: with trigger.previous, the head that
// copies; with other.alpha, the head that parks non-trigger queries on BOS most.
int64_t top_head(const CopyReport& r, const std::vector<double>& v, int64_t l);

// What the parent knows of one trained model: the child's curve, and its own measurement.
struct CopyRun {
    CopyRunSpec spec;
    double seconds = 0;
    tutorial::json curve;
    CopyReport report;
    gg::nn::ModelAnalysis analysis;  // analyze()'s per-layer report on the same validation batches
    std::shared_ptr<gg::nn::GatedTransformerLM> model;
    std::vector<double> curve_of(const std::string& key) const { return tutorial::json_numbers(curve[key]); }
};

// The files of part (a) in dir, each named "<setup>_…": the numbers (bigram_backcopy.json,
// per_layer.csv), the charts of α and of the gate, and heat maps of seed 1.
void write_copy_results(const std::filesystem::path& dir, const CopySetup& setup, const gg::nn::BigramBackcopy& data,
                        const std::vector<CopyRun>& runs);
