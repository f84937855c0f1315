// report.cpp — the page of report.h: the HTML around plot.h's charts and the numbers as JSON, which
// the script of report.js draws the attention maps from.
#include "nn/analysis/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "autograd/engine.h"
#include "nn/analysis/plot.h"
#include "nn/analysis/report_script.h"

namespace gg::nn {

AttentionMaps capture_attention_maps(const GatedTransformerLM& model, const Tensor& ids) {
    if (ids.dim() != 2 || ids.size(0) != 1 || ids.size(1) < 2)
        throw std::invalid_argument("capture_attention_maps: need ids (1, T) with T ≥ 2, got " + shape_str(ids.shape()));
    NoGradGuard no_grad;
    LMCapture capture;
    model.forward(ids, Tensor(), nullptr, &capture);
    AttentionMaps maps;
    maps.tokens = ids.to(Device::CPU).select(0, 0).to_vector<int64_t>();
    const int64_t T = ids.size(1);
    for (const AttentionCapture& layer : capture.attention) {
        if (!layer.probs.defined()) continue;  // a linear-attention layer of a hybrid: no map
        const Tensor probs = layer.probs.select(0, 0).to(Device::CPU);  // (H, T, T)
        maps.probs.push_back(probs);
        if (!layer.gate.defined()) continue;
        // (1, G, T, width) → (G, T); G is H, the key/value heads (GQA) or 1 (shared): head h reads group h·G/H.
        const Tensor per_group = mean(layer.gate.select(0, 0).to(Device::CPU).to(DType::f32), {2});
        const int64_t H = probs.size(0), G = per_group.size(0);
        std::vector<Tensor> heads;
        for (int64_t h = 0; h < H; ++h) heads.push_back(per_group.select(0, h * G / H).view({1, T}));
        maps.gates.push_back(cat(heads, 0));  // (H, T)
    }
    return maps;
}

namespace {

// Probabilities and gates to 4 decimals: what a colour can show, and a page a few times smaller.
nlohmann::json rounded(const Tensor& t) {
    nlohmann::json values = nlohmann::json::array();
    for (double v : t.contiguous().to_vector<double>()) values.push_back(std::round(v * 1e4) / 1e4);
    return values;
}

// The numbers the script draws from: per run its tokens, every layer's maps (each head's
// T × T probabilities row by row, and its T gate values) and the sink report of analysis.h.
nlohmann::json page_data(const std::vector<RunReport>& runs) {
    nlohmann::json out = {{"runs", nlohmann::json::array()}};
    for (const RunReport& run : runs) {
        if (!run.pending.empty()) continue;  // no checkpoint yet: nothing to draw
        nlohmann::json layers = nlohmann::json::array();
        for (size_t l = 0; l < run.maps.probs.size(); ++l) {
            nlohmann::json probs = nlohmann::json::array(), gates = nullptr;
            for (int64_t h = 0; h < run.maps.probs[l].size(0); ++h) probs.push_back(rounded(run.maps.probs[l].select(0, h)));
            if (l < run.maps.gates.size()) {
                gates = nlohmann::json::array();
                for (int64_t h = 0; h < run.maps.gates[l].size(0); ++h) gates.push_back(rounded(run.maps.gates[l].select(0, h)));
            }
            layers.push_back({{"probs", probs}, {"gates", gates}});
        }
        out["runs"].push_back({{"name", run.name},
                               {"gate", run.gate},
                               {"tokens", run.maps.tokens},
                               {"token_texts", run.maps.token_texts.empty() ? nlohmann::json(nullptr)
                                                                           : nlohmann::json(run.maps.token_texts)},
                               {"layers", layers},
                               {"sink", nlohmann::json::parse(run.sink.to_json())},
                               {"sink_data", run.sink_data}});
    }
    return out;
}

// JSON inside <script>: every '<' (only ever inside a string) written as \u003c, so that no
// run name can close the element early.
std::string script_json(const nlohmann::json& j) {
    const std::string text = j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    std::string out;
    for (char c : text) out += c == '<' ? std::string("\\u003c") : std::string(1, c);
    return out;
}

std::string number(double v, const char* fmt = "%.4f") {
    if (!std::isfinite(v)) return "–";
    char text[32];
    std::snprintf(text, sizeof text, fmt, v);
    return text;
}

// One curve per run of a value the log holds at some steps, at most max_points of it.
Series run_curve(const RunReport& run, size_t i, const std::vector<double>& x, std::vector<double> y, size_t max_points) {
    return downsample({run.name, x, std::move(y), chart_color(i), x.size() == 1, 1, {}}, max_points);
}

std::string chart(const std::vector<Series>& series, const std::string& title, const std::string& y_label, int width = 560,
                  int height = 360) {
    ChartOptions options;
    options.title = title;
    options.x_label = "training step";
    options.y_label = y_label;
    options.width = width, options.height = height;
    return "<figure>" + svg_line_chart(series, options) + "</figure>\n";
}

// What the page says of a log too long to draw every step: how it was cut (downsample).
std::string downsample_note(const std::vector<RunReport>& runs, size_t max_points) {
    std::string longest;
    size_t steps = 0;
    for (const RunReport& run : runs)
        if (run.log.step.size() > max_points && run.log.step.size() > steps) steps = run.log.step.size(), longest = run.name;
    if (steps == 0) return "";
    return "<p class=\"note\">Each curve is drawn from at most " + std::to_string(max_points) + " points: " +
           escape_xml(longest) + "'s log has " + std::to_string(steps) + " steps, so every run of " +
           std::to_string((steps + max_points / 2 - 1) / (max_points / 2)) +
           " consecutive steps is drawn as its lowest and its highest value (a one-step spike still shows; "
           "the smoothed loss is smoothed over every step first). The numbers in the table are the log's own.</p>\n";
}

// The training section: loss and learning rate, gradient norm and throughput, then the
// stability probes of the runs that took them.
std::string training_charts(const std::vector<RunReport>& runs, size_t max_points) {
    std::vector<Series> loss, lr, grad_norm, speed;
    for (size_t i = 0; i < runs.size(); ++i) {
        const TrainingLog& log = runs[i].log;
        for (Series& s : loss_series(log, runs[i].name, chart_color(i))) loss.push_back(downsample(s, max_points));
        lr.push_back(run_curve(runs[i], i, log.step, log.lr, max_points));
        grad_norm.push_back(run_curve(runs[i], i, log.step, log.grad_norm, max_points));
        speed.push_back(run_curve(runs[i], i, log.step, log.tokens_per_s, max_points));
    }
    std::string html = downsample_note(runs, max_points) + "<div class=\"row\">\n" +
                       chart(loss, "loss", "loss (nats/byte)") + chart(lr, "learning rate", "learning rate") +
                       chart(grad_norm, "gradient norm (before clipping to --grad-clip)", "‖g‖₂") +
                       chart(speed, "throughput (all ranks together)", "tokens/s") + "</div>\n";

    using Reading = double (*)(const StabilityStats&);
    const struct {
        const char* title;
        const char* y_label;
        Reading read;
    } probes[] = {
        {"largest attention logit (any layer)", "max q·k/√dk",
         [](const StabilityStats& s) { return s.largest_attn_logit(); }},
        {"smallest attention entropy (any layer's lowest head)", "entropy (nats)",
         [](const StabilityStats& s) { return s.smallest_attn_entropy(); }},
        {"largest activation", "max |h|", [](const StabilityStats& s) { return s.max_abs_hidden; }},
        {"output log Z (0: a normalised softmax)", "mean log Z", [](const StabilityStats& s) { return s.mean_log_z; }},
        {"mean gate value (gated runs)", "gate", [](const StabilityStats& s) {
             double total = 0;
             for (double g : s.gate_mean) total += g / double(s.gate_mean.size());
             return s.gate_mean.empty() ? NAN : total;
         }},
    };
    bool any = false;
    std::string probe_charts;
    for (const auto& probe : probes) {
        std::vector<Series> series;
        for (size_t i = 0; i < runs.size(); ++i) {
            std::vector<double> y;
            for (const StabilityStats& s : runs[i].log.probes) y.push_back(probe.read(s));
            if (std::any_of(y.begin(), y.end(), [](double v) { return std::isfinite(v); }))
                series.push_back(run_curve(runs[i], i, runs[i].log.probe_step, y, max_points));
        }
        if (series.empty()) continue;
        any = true;
        probe_charts += chart(series, probe.title, probe.y_label, 390, 300);  // three to a row
    }
    if (any)
        html += "<h3>Stability probes</h3>\n<p>Read every <code>--probe-every</code> steps on a fixed validation batch "
                "(nn/analysis/stability.h): attention logits that keep growing and entropies that fall to 0 come "
                "before a run at too high a learning rate diverges.</p>\n<div class=\"row\">\n" +
                probe_charts + "</div>\n";
    return html;
}

// The first-token share of each layer, one bar per run, against the sink threshold; a run whose
// score function has a slot (softmax1, sink) has a second bar, the slot's share, where its sink
// may sit instead.
std::string sink_chart(const std::vector<RunReport>& runs) {
    // Named by the model's index of the layer: a hybrid's full-attention layers are 3, 7, ...
    const RunReport* most = &runs[0];
    for (const RunReport& run : runs)
        if (run.sink.layers.size() > most->sink.layers.size()) most = &run;
    std::vector<std::string> groups;
    for (const LayerAnalysis& l : most->sink.layers) groups.push_back("layer " + std::to_string(l.layer));
    std::vector<BarSeries> bars;
    double threshold = NAN;
    for (size_t i = 0; i < runs.size(); ++i) {
        if (!runs[i].pending.empty()) continue;
        if (std::isnan(threshold)) threshold = runs[i].sink.threshold;
        const ModelAnalysis& sink = runs[i].sink;
        const auto series = [&](const std::string& name, size_t color, double LayerAnalysis::*share) {
            BarSeries s{name, {}, chart_color(color), {}};
            for (size_t l = 0; l < groups.size(); ++l) s.values.push_back(l < sink.layers.size() ? sink.layers[l].*share : NAN);
            bars.push_back(s);
        };
        series(runs[i].name, i, &LayerAnalysis::mean_first_token_share);  // the run's colour in every chart
        if (has_slot(sink.score_fn))
            series(runs[i].name + ": slot", runs.size() + i, &LayerAnalysis::mean_slot_share);
    }
    ChartOptions options;
    options.title = "attention on the first token (and the slot), mean over heads";
    options.x_label = "layer";
    options.y_label = "share of the attention";
    options.reference_y = threshold;
    options.reference_label = "sink threshold";
    options.width = 560, options.height = 360;
    return "<figure>" + svg_bar_chart(groups, bars, options) + "</figure>\n";
}

// One run's value of a setting: "absent" where its config.json has no such field.
std::string setting_value(const RunReport& run, const std::string& name) {
    for (const auto& [n, v] : run.settings)
        if (n == name) return v;
    return "absent";
}

// The settings in which the runs differ, by name, in the first run's order, then the others'.
std::vector<std::string> differing_settings(const std::vector<RunReport>& runs) {
    std::vector<std::string> names, differ;
    for (const RunReport& run : runs)
        for (const auto& [name, value] : run.settings)
            if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    for (const std::string& name : names)
        if (std::any_of(runs.begin(), runs.end(),
                        [&](const RunReport& run) { return setting_value(run, name) != setting_value(runs.front(), name); }))
            differ.push_back(name);
    return differ;
}

// One row per run; compared runs get a last column of the settings (config.json) in which
// they differ, marked, so that two long descriptions need not be read word by word.
std::string runs_table(const std::vector<RunReport>& runs) {
    const bool compared = runs.size() > 1;
    const std::vector<std::string> differ = compared ? differing_settings(runs) : std::vector<std::string>{};
    std::string html = "<table>\n<tr><th class=\"left\">run</th><th class=\"left\">attention</th><th class=\"left\">model and training</th><th>steps</th>"
                       "<th>last train loss</th><th>last validation loss</th>" +
                       std::string(compared ? "<th class=\"left\">differs (config.json)</th>" : "") + "</tr>\n";
    for (const RunReport& run : runs) {
        const TrainingLog& log = run.log;
        std::string diff;
        for (const std::string& name : differ)
            diff += std::string(diff.empty() ? "" : " ") + "<mark>" + escape_xml(name + " " + setting_value(run, name)) + "</mark>";
        if (compared && diff.empty()) diff = "nothing: the same settings";
        const bool gate_differs = compared && std::any_of(runs.begin(), runs.end(), [&](const RunReport& r) { return r.gate != run.gate; });
        html += "<tr><td class=\"left\">" + escape_xml(run.name) + "</td><td class=\"left\">" +
                (gate_differs ? "<mark>" + escape_xml(run.gate) + "</mark>" : escape_xml(run.gate)) +
                "</td><td class=\"left\">" +
                escape_xml(run.description) + "</td><td>" + number(log.step.back(), "%.0f") + "</td><td>" +
                number(log.loss.back()) + "</td><td>" + (log.val_loss.empty() ? "–" : number(log.val_loss.back())) +
                "</td>" + (compared ? "<td class=\"left diff\">" + diff + "</td>" : "") + "</tr>\n";
    }
    return html + "</table>\n";
}

// One row per model read on a prompt: what it is and what it read.
std::string models_table(const std::vector<RunReport>& runs) {
    std::string html = "<table>\n<tr><th class=\"left\">model</th><th class=\"left\">attention</th>"
                       "<th class=\"left\">architecture</th><th class=\"left\">read</th></tr>\n";
    for (const RunReport& run : runs)
        html += "<tr><td class=\"left\">" + escape_xml(run.name) + "</td><td class=\"left\">" + escape_xml(run.gate) +
                "</td><td class=\"left\">" + escape_xml(run.description) + "</td><td class=\"left\">" +
                escape_xml(run.sink_data) + "</td></tr>\n";
    return html + "</table>\n";
}

// What the measured sink tables say, in words: which runs have sink layers and how many. Only
// what these numbers show; the paper's claim (a baseline has a sink, G1 none) is for the reader
// to check against it.
std::string sink_verdict(const std::vector<const RunReport*>& runs, const std::string& noun) {
    const auto count = [](const RunReport& run) {
        return std::to_string(run.sink.sink_layers) + " of " + std::to_string(run.sink.layers.size()) + " layers";
    };
    const double threshold = runs.front()->sink.threshold;
    // What a sink layer's mean is above: α, or α or the slot's share once a run has a slot.
    const bool slot = std::ranges::any_of(runs, [](const RunReport* run) {
        return has_slot(run->sink.score_fn);
    });
    const std::string above = slot ? "mean α or slot share" : "mean α";
    std::vector<const RunReport*> with, without;
    for (const RunReport* run : runs) (run->sink.sink_layers > 0 ? with : without).push_back(run);
    char t[32];
    std::snprintf(t, sizeof t, "%g", threshold);
    if (with.empty())
        return (runs.size() == 1 ? "This " + noun + " has no" : "Neither " + noun + " has a") +
               " sink layer here: every layer's " + above + " is at or below the threshold " + t + ".";
    if (runs.size() == 1) return "This " + noun + " has a sink in " + count(*with.front()) + " (" + above + " above " + t + ").";
    if (without.empty())
        return "Both " + noun + "s have sink layers: " + runs[0]->name + " in " + count(*runs[0]) + ", " + runs[1]->name + " in " +
               count(*runs[1]) + " (" + above + " above " + t + ").";
    return with.front()->name + " has a sink in " + count(*with.front()) + " and " + without.front()->name +
           " in none: its bars stand above the threshold " + t + " where " + without.front()->name + "'s do not.";
}

}  // namespace

std::string report_html(const std::vector<RunReport>& runs, const ReportOptions& options) {
    if (runs.empty()) throw std::invalid_argument("report_html: no runs");
    const bool trained = !runs.front().log.step.empty();  // runs with logs, or models read on a prompt
    std::vector<const RunReport*> measured;
    for (const RunReport& run : runs) {
        if (run.log.step.empty() == trained)
            throw std::invalid_argument("report_html: run '" + run.name + (trained ? "' has no log" : "' has a log") +
                                        " and '" + runs.front().name + (trained ? "' has one" : "' has none"));
        if (!trained && !run.pending.empty())
            throw std::invalid_argument("report_html: model '" + run.name + "' without a log needs its maps");
        if (!run.pending.empty()) continue;
        if (run.maps.probs.empty() || run.sink.layers.size() != run.maps.probs.size())
            throw std::invalid_argument("report_html: run '" + run.name + "' needs maps and a sink report of every layer");
        measured.push_back(&run);
    }
    std::string names;
    for (const RunReport& run : runs) names += (names.empty() ? "" : " vs ") + run.name;

    std::string html = "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    if (options.refresh_seconds > 0)
        html += "<meta http-equiv=\"refresh\" content=\"" + std::to_string(options.refresh_seconds) + "\">\n";
    html += "<title>gatedgrad report: " + escape_xml(names) + "</title>\n<style>" + kReportStyle + "</style>\n</head>\n<body>\n";
    html += "<h1>gatedgrad report: " + escape_xml(names) + "</h1>\n";
    if (!measured.empty()) html += "<p id=\"status\" hidden>drawing the attention maps…</p>\n";
    if (options.refresh_seconds > 0)
        html += "<p class=\"note\">A live page: <code>gatedgrad report --watch " + std::to_string(options.refresh_seconds) +
                "</code> writes it again as the runs go on, and it reloads itself every " +
                std::to_string(options.refresh_seconds) + " s.</p>\n";
    if (!trained) html += "<h2>Models</h2>\n" + models_table(runs);
    if (trained)
        html += "<h2>Runs</h2>\n" + runs_table(runs) +
                "<h2>Training</h2>\n<p>The training loss at every step (faint), smoothed, and the validation loss where "
                "the run measured it; the learning rate of the schedule (warmup, cosine); the gradient's norm, which "
                "spikes before a run goes unstable; and the tokens per second.</p>\n" +
                training_charts(runs, options.max_points);
    html += "<h2>Attention sink</h2>\n<p>For each layer and head, α is the mean attention that queries 1 … T−1 give to "
            "position 0 (the first token: the BOS of our models, the text's own first token in a Qwen3 text); a layer whose mean α is above the threshold is a sink layer (nn/analysis/analysis.h, "
            "docs/paper.md). A head with nothing to look at parks its attention there; a gate lets it send nothing "
            "instead, and so do two score functions: softmax1 and a sink logit give each row a slot that takes what the "
            "keys leave out of 1, and a layer whose mean slot share is above the threshold is a sink layer too. Sigmoid "
            "and softpick weights need not sum to 1: their row sums are shown, and their α is read from each row over "
            "its sum, as Gu et al. 2024 (arXiv 2410.10781) read them. The sink rate is theirs: the share of heads whose "
            "α, or slot share, is above the threshold.</p>\n";
    for (const RunReport& run : runs)
        if (!run.pending.empty()) html += "<p class=\"note\">" + escape_xml(run.name) + ": " + escape_xml(run.pending) + "</p>\n";
    if (measured.empty()) return html + "</body>\n</html>\n";
    html += "<p id=\"sink-verdict\">" + escape_xml(sink_verdict(measured, trained ? "run" : "model")) + "</p>\n<div class=\"row\">\n" + sink_chart(runs) +
            "</div>\n<div class=\"row\" id=\"sink-tables\"></div>\n";
    html += std::string("<h2>Attention maps</h2>\n<p>") +
            (trained ? "The first validation sequence" : "The prompt, token by token,") +
            " through each model: the attention probability that each query (row) gives each key (column). A sink shows "
            "as a dark first column. Point at a map to read a cell, its query and key tokens marked in the text above "
            "it. Choose a layer and a head, or click a small map below; the address remembers the choice "
            "(<code>#layer=1&amp;head=0</code>).</p>\n<p>layer <select id=\"layer\"></select> head <select id=\"head\"></select></p>\n"
            "<div class=\"row\" id=\"maps\"></div>\n<h3>Every layer and head</h3>\n<div class=\"row\" id=\"thumbs\"></div>\n";
    html += "<script type=\"application/json\" id=\"data\">" + script_json(page_data(runs)) + "</script>\n";
    html += std::string("<script>") + kReportScript + "</script>\n</body>\n</html>\n";
    return html;
}

}  // namespace gg::nn
