// copy_task_files.cpp — tutorial 06, part (a): the files of a setup (copy_task.h), written
// with --out: the numbers of every model as JSON, the per-layer means as CSV, the charts of α
// per layer and along the training, and attention heat maps of seed 1.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/attention_maps.h"
#include "copy_task.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace {

json query_class_json(const QueryClass& q, int64_t L, int64_t H, bool gated) {
    json j = {{"queries", q.count},
              {"loss", q.loss / q.count},
              {"accuracy", q.hits / q.count},
              {"oracle_loss", q.oracle_loss / q.count},
              {"alpha", q.mean_all(q.alpha)},
              {"attention_to_self", q.mean_all(q.self)},
              {"attention_to_previous", q.mean_all(q.previous)}};
    if (gated) j["gate"] = q.mean_all(q.gate), j["alpha_times_gate"] = q.mean_all(q.alpha_gated);
    json layers = json::array();
    for (int64_t l = 0; l < L; ++l) {
        json heads = json::array();
        for (int64_t h = 0; h < H; ++h) {
            const size_t i = l * H + h;
            json head = {{"alpha", q.mean_of(q.alpha, i)},
                         {"attention_to_self", q.mean_of(q.self, i)},
                         {"attention_to_previous", q.mean_of(q.previous, i)}};
            if (gated) head["gate"] = q.mean_of(q.gate, i);
            heads.push_back(head);
        }
        layers.push_back(heads);
    }
    j["per_layer_head"] = layers;
    return j;
}

json copy_run_json(const CopyRun& run) {
    const CopyReport& r = run.report;
    return {{"model", run.spec.gate == GatePosition::none ? "baseline" : "g1"},
            {"layers", run.spec.shape.layers},
            {"heads", run.spec.shape.heads},
            {"seed", run.spec.seed},
            {"seconds", run.seconds},
            {"value_norm_bos", r.value_bos},
            {"value_norm_other", r.value_other},
            {"analysis", json::parse(run.analysis.to_json())},
            {"trigger_queries", query_class_json(r.trigger, r.L, r.H, r.gated)},
            {"other_queries", query_class_json(r.other, r.L, r.H, r.gated)},
            {"curve", run.curve}};
}

}  // namespace

void write_copy_results(const std::filesystem::path& dir, const CopySetup& setup, const BigramBackcopy& data,
                        const std::vector<CopyRun>& runs) {
    std::filesystem::create_directories(dir);
    const auto file = [&](const std::string& rest) { return (dir / (setup.name + "_" + rest)).string(); };
    json task = {{"vocab", 64}, {"bos", data.bos()}, {"concentration", setup.concentration},
                 {"successors", setup.concentration > 0 ? 64 : setup.successors}, {"triggers", data.trigger_tokens()}};
    json j = {{"task", task},
              {"even_attention_alpha", even_alpha(setup)},
              {"train", json::parse(copy_config(setup, runs[0].spec.shape, GatePosition::none, 1).to_json())},
              {"runs", json::array()}};
    for (const CopyRun& run : runs) j["runs"].push_back(copy_run_json(run));
    write_json(file("bigram_backcopy.json"), j);

    // Per layer (mean over heads), one group per model shape, seed and layer.
    const std::string title = "Bigram-Backcopy (" + setup.name + (setup.exclude_self ? ", own key hidden)" : ", ordinary mask)");
    std::vector<std::string> groups;
    std::vector<BarSeries> bars{{"baseline, non-trigger queries", {}, "#9ecae1", {}},
                                {"baseline, trigger queries", {}, "#08519c", {}},
                                {"G1, non-trigger queries", {}, "#fdae6b", {}},
                                {"G1, trigger queries", {}, "#d94801", {}},
                                {"G1, non-trigger queries, alpha x gate", {}, "#fdd0a2", {}}};
    std::vector<std::vector<double>> rows;
    for (size_t i = 0; i < runs.size(); i += 2) {
        const CopyReport &b = runs[i].report, &g = runs[i + 1].report;
        for (int64_t l = 0; l < b.L; ++l) {
            groups.push_back(runs[i].spec.shape.stem() + " seed " + std::to_string(runs[i].spec.seed) + " layer " +
                             std::to_string(l));
            bars[0].values.push_back(b.layer_mean(b.other, b.other.alpha, l));
            bars[1].values.push_back(b.layer_mean(b.trigger, b.trigger.alpha, l));
            bars[2].values.push_back(g.layer_mean(g.other, g.other.alpha, l));
            bars[3].values.push_back(g.layer_mean(g.trigger, g.trigger.alpha, l));
            bars[4].values.push_back(g.layer_mean(g.other, g.other.alpha_gated, l));
            double vb = 0, vo = 0, gvb = 0, gvo = 0;
            for (int64_t h = 0; h < b.H; ++h)
                vb += b.value_bos[l * b.H + h] / double(b.H), vo += b.value_other[l * b.H + h] / double(b.H),
                    gvb += g.value_bos[l * b.H + h] / double(b.H), gvo += g.value_other[l * b.H + h] / double(b.H);
            rows.push_back({double(b.L), double(b.H), double(runs[i].spec.seed), double(l), bars[0].values.back(),
                            bars[1].values.back(), bars[2].values.back(), bars[3].values.back(),
                            b.layer_mean(b.other, b.other.self, l), g.layer_mean(g.other, g.other.self, l),
                            g.layer_mean(g.other, g.other.gate, l), g.layer_mean(g.trigger, g.trigger.gate, l),
                            bars[4].values.back(), vb, vo, gvb, gvo});
        }
    }
    ChartOptions chart = chart_options(title + ": attention on BOS per layer (mean over heads)",
                                       "model (layers x heads) and layer",
                                       "alpha (attention on position 0)", 0.3, "sink threshold 0.3");
    write_file_atomically(file("alpha.svg"), svg_bar_chart(groups, bars, chart));
    write_file_atomically(file("per_layer.csv"),
                    csv_table({"layers", "heads", "seed", "layer", "alpha_other_baseline", "alpha_trigger_baseline",
                               "alpha_other_g1", "alpha_trigger_g1", "self_other_baseline", "self_other_g1",
                               "gate_other_g1", "gate_trigger_g1", "alpha_times_gate_other_g1", "value_bos_baseline",
                               "value_other_baseline", "value_bos_g1", "value_other_g1"},
                              rows));

    // Training curves of every model: α on non-trigger queries; G1's gate on both kinds of query.
    std::vector<Series> alpha_lines, gate_lines;
    for (size_t i = 0; i < runs.size(); ++i) {
        const CopyRun& run = runs[i];
        const bool baseline = run.spec.gate == GatePosition::none;
        const std::string label = run.spec.label();
        const auto step = run.curve_of("step");
        alpha_lines.push_back(line(label, step, run.curve_of("alpha_other"), pair_color(i / 2, baseline)));
        if (!baseline) {
            gate_lines.push_back(line(label + ", non-trigger", step, run.curve_of("gate_other"), pair_color(i / 2, true)));
            gate_lines.push_back(line(label + ", trigger", step, run.curve_of("gate_trigger"), pair_color(i / 2, false)));
        }
    }
    auto curve = [&](const std::string& name, const std::vector<Series>& lines, const std::string& what,
                     const std::string& y_label, double reference) {
        write_file_atomically(file(name), svg_line_chart(lines, chart_options(title + ": " + what, "training step", y_label,
                                                                        reference, std::isnan(reference) ? "" : "even attention")));
    };
    curve("alpha_curve.svg", alpha_lines, "attention on BOS from non-trigger queries", "alpha, mean over layers and heads",
          even_alpha(setup));
    curve("gate_curve.svg", gate_lines, "G1 mean gate on the two kinds of query", "mean gate", NAN);

    // Heat maps of seed 1, first and last layer: the head that copies and the one that parks
    // most on BOS.
    const Tensor ids = data.val_batch(0, 1, setup.seq_len).inputs;  // (1, T)
    for (const CopyRun& run : runs) {
        if (run.spec.seed != 1) continue;
        auto heatmap = [&](int64_t l, int64_t h) {
            const std::string model = run.spec.gate == GatePosition::none ? "baseline" : "g1";
            const std::string stem = "heatmap_" + run.spec.shape.stem() + "_" + model + "_layer" + std::to_string(l) +
                                     "_head" + std::to_string(h);
            write_head_heatmaps(file(stem), model + " " + run.spec.shape.stem(), *run.model, ids, l, h,
                                int(256 / setup.seq_len));  // 4 px at T = 64
        };
        for (int64_t l : {int64_t(0), run.report.L - 1}) {
            const int64_t copier = top_head(run.report, run.report.trigger.previous, l);
            const int64_t parker = top_head(run.report, run.report.other.alpha, l);
            heatmap(run.report.layers[l], copier);
            if (parker != copier) heatmap(run.report.layers[l], parker);
            if (run.report.L == 1) break;
        }
    }
}
