// copy_task.cpp — tutorial 06, part (a): the attention sink on Bigram-Backcopy.
//
// The task (nn/train/synthetic.h): a Markov chain over 64 tokens, except that right after a
// trigger token comes a copy of the token before it. So the query at a trigger must read one
// position back, and every other query has nothing useful to read. We train a baseline and
// a G1 model on the same batches and measure, for the two kinds of query separately, where
// the attention goes: BOS (α), the query's own token, the previous token; and for G1, the gate.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
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

// Sums over one kind of query (trigger or not), positions t ≥ 1 (query 0 is BOS itself).
// Per (layer, head): attention on key 0 (α), on the query's own key t, on key t − 1; the gate.
struct QueryClass {
    double count = 0, loss = 0, hits = 0, oracle_loss = 0;
    // alpha_gated: α times the query's mean gate (α alone for the baseline) — the share of what
    // reaches W_O that comes from BOS.
    std::vector<double> alpha, alpha_gated, self, previous, gate;

    void resize(size_t n) {
        for (auto* v : {&alpha, &alpha_gated, &self, &previous, &gate}) v->assign(n, 0);
    }
    double mean_of(const std::vector<double>& v, size_t i) const { return v[i] / count; }
    double mean_all(const std::vector<double>& v) const {  // over queries, heads and layers
        double s = 0;
        for (double x : v) s += x;
        return s / count / double(v.size());
    }
};

struct CopyReport {
    int64_t L = 0, H = 0;
    bool gated = false;
    QueryClass trigger, other;
    double layer_mean(const QueryClass& c, const std::vector<double>& v, int64_t l) const {
        double s = 0;
        for (int64_t h = 0; h < H; ++h) s += c.mean_of(v, l * H + h);
        return s / double(H);
    }
};

// Runs the model over `batches` validation batches with capture on and sorts every query
// t ≥ 1 by whether its input token is a trigger.
CopyReport measure_copy(GatedTransformerLM& model, const BigramBackcopy& data, int64_t batches, int64_t B, int64_t T) {
    NoGradGuard no_grad;
    model.eval();
    CopyReport r;
    r.L = model.config().n_layers, r.H = model.config().attn.n_heads, r.gated = model.config().attn.gated();
    const int64_t L = r.L, H = r.H;
    r.trigger.resize(L * H), r.other.resize(L * H);
    for (int64_t i = 0; i < batches; ++i) {
        const Batch batch = data.val_batch(i, B, T);
        LMCapture capture;
        const TokenScores scores = score_tokens(model.forward(batch.inputs, Tensor(), nullptr, &capture).logits, batch.targets);
        const std::vector<int64_t> x = batch.inputs.to_vector<int64_t>(), y = batch.targets.to_vector<int64_t>();
        std::vector<std::vector<float>> probs(L), gates(L);
        for (int64_t l = 0; l < L; ++l) {
            const AttentionCapture& c = capture.attention[l];
            probs[l] = c.probs.to_vector<float>();                               // (B, H, T, T)
            if (r.gated) gates[l] = per_query_gate(c.gate).to_vector<float>();  // (B, H, T)
        }
        for (int64_t b = 0; b < B; ++b)
            for (int64_t t = 1; t < T; ++t) {
                const int64_t n = b * T + t;
                const bool trig = data.is_trigger(x[n]);
                QueryClass& q = trig ? r.trigger : r.other;
                q.count += 1;
                q.loss += scores.loss[n];
                q.hits += scores.hit[n];
                // the best possible loss: 0 for a copy, −log P(next | token) for the chain
                q.oracle_loss += trig ? 0.0 : -std::log(data.transition(x[n], y[n]));
                for (int64_t l = 0; l < L; ++l)
                    for (int64_t h = 0; h < H; ++h) {
                        const float* row = probs[l].data() + ((b * H + h) * T + t) * T;  // query t's keys
                        const size_t i = l * H + h;
                        const double g = r.gated ? gates[l][(b * H + h) * T + t] : 1.0;
                        q.alpha[i] += row[0];
                        q.alpha_gated[i] += row[0] * g;
                        q.self[i] += row[t];
                        q.previous[i] += row[t - 1];
                        q.gate[i] += g;
                    }
            }
    }
    return r;
}

// A model shape: layers × heads.
struct ModelShape {
    int64_t layers = 1, heads = 4;
    std::string name() const { return std::to_string(layers) + "-layer " + std::to_string(heads) + "-head"; }
    std::string stem() const { return std::to_string(layers) + "x" + std::to_string(heads); }
};

ModelShape parse_shape(const std::string& text) {
    ModelShape s;
    if (std::sscanf(text.c_str(), "%" SCNd64 "x%" SCNd64, &s.layers, &s.heads) != 2 || s.layers < 1 || s.heads < 1 || 64 % s.heads)
        throw std::invalid_argument("model shape '" + text + "' is not LAYERSxHEADS with heads dividing 64");
    return s;
}

// α of a query that spreads its attention evenly over the keys it sees, averaged over the
// queries t = 1 … T−1: 1/(t+1) keys with its own, 1/t without.
double even_alpha(const CopySetup& s) {
    double sum = 0;
    for (int64_t t = 1; t < s.seq_len; ++t) sum += 1.0 / double(s.exclude_self ? t : t + 1);
    return sum / double(s.seq_len - 1);
}

struct CopyRun {
    std::string name;  // "baseline" or "g1"
    ModelShape shape;
    CopyReport report;
    ModelAnalysis analysis;  // analyze()'s per-layer report (SPEC §3) on the same validation batches
    std::vector<double> curve_step, curve_trigger_loss, curve_other_loss, curve_alpha_other, curve_alpha_trigger,
        curve_gate_other, curve_gate_trigger;
    double seconds = 0;
    std::shared_ptr<GatedTransformerLM> model;
};

TrainConfig copy_config(const BigramBackcopy& data, const CopySetup& setup, const ModelShape& shape, GatePosition gate) {
    TrainConfig c;
    c.model.vocab_size = data.vocab_size();
    c.model.d_model = 64, c.model.n_layers = shape.layers, c.model.attn.n_heads = shape.heads;
    c.model.attn.gate = gate;
    c.model.ffn = setup.ffn;
    c.model.attn.exclude_self = setup.exclude_self;
    c.model.positions = setup.positions == "learned" ? PositionEncoding::learned : PositionEncoding::rope;
    c.batch_size = setup.batch, c.seq_len = setup.seq_len, c.model.max_len = setup.seq_len;
    c.steps = setup.steps, c.lr = setup.lr, c.weight_decay = setup.weight_decay, c.warmup = 30;
    c.eval_every = 0, c.eval_batches = 4, c.seed = 1;
    return c;
}

// Trains one model, measuring the two kinds of queries `points` times along the way
// (Trainer::run pauses and continues on the same schedule, see trainer.h).
CopyRun train_copy(const std::shared_ptr<BigramBackcopy>& data, const CopySetup& setup, const ModelShape& shape,
                   GatePosition gate, bool verbose) {
    const TrainConfig c = copy_config(*data, setup, shape, gate);
    CopyRun run;
    run.name = gate_position_name(gate), run.shape = shape;
    const auto start = Clock::now();
    Trainer trainer(c, data);
    for (int64_t k = 1; k <= setup.points; ++k) {
        trainer.run(true, k * setup.steps / setup.points);
        const CopyReport r = measure_copy(trainer.model(), *data, 2, c.batch_size, c.seq_len);
        run.curve_step.push_back(double(trainer.step()));
        run.curve_trigger_loss.push_back(r.trigger.loss / r.trigger.count);
        run.curve_other_loss.push_back(r.other.loss / r.other.count);
        run.curve_alpha_other.push_back(r.other.mean_all(r.other.alpha));
        run.curve_alpha_trigger.push_back(r.trigger.mean_all(r.trigger.alpha));
        run.curve_gate_other.push_back(r.gated ? r.other.mean_all(r.other.gate) : NAN);
        run.curve_gate_trigger.push_back(r.gated ? r.trigger.mean_all(r.trigger.gate) : NAN);
        if (verbose)
            std::printf("  %s %-8s step %4lld  post-trigger loss %.3f  other loss %.3f  alpha other %.3f  "
                        "alpha trigger %.3f\n",
                        shape.name().c_str(), run.name.c_str(), (long long)trainer.step(),
                        run.curve_trigger_loss.back(), run.curve_other_loss.back(), run.curve_alpha_other.back(),
                        run.curve_alpha_trigger.back());
    }
    run.report = measure_copy(trainer.model(), *data, 8, c.batch_size, c.seq_len);
    run.seconds = seconds_since(start);
    run.model = std::make_shared<GatedTransformerLM>(c.model);
    copy_state(run.model->state_dict(), trainer.model().state_dict(), "tutorial 06", "the trainer", "the copy");
    run.model->eval();
    std::vector<Tensor> ids;
    for (int64_t i = 0; i < 8; ++i) ids.push_back(data->val_batch(i, c.batch_size, c.seq_len).inputs);
    run.analysis = analyze(*run.model, cat(ids, 0));
    return run;
}

void print_copy_table(const CopyRun& base, const CopyRun& g1, double even) {
    const CopyReport &b = base.report, &g = g1.report;
    auto row = [](const char* label, double x, double y) { std::printf("  %-40s %9.3f %9.3f\n", label, x, y); };
    std::printf("  %-40s %9s %9s\n", "", "baseline", "G1");
    row("post-trigger loss (nats)", b.trigger.loss / b.trigger.count, g.trigger.loss / g.trigger.count);
    row("post-trigger accuracy", b.trigger.hits / b.trigger.count, g.trigger.hits / g.trigger.count);
    row("other-position loss (nats)", b.other.loss / b.other.count, g.other.loss / g.other.count);
    row("alpha (on BOS), non-trigger queries", b.other.mean_all(b.other.alpha), g.other.mean_all(g.other.alpha));
    row("alpha (on BOS), trigger queries", b.trigger.mean_all(b.trigger.alpha), g.trigger.mean_all(g.trigger.alpha));
    row("alpha x gate, non-trigger queries", b.other.mean_all(b.other.alpha_gated), g.other.mean_all(g.other.alpha_gated));
    row("attention on itself, non-trigger queries", b.other.mean_all(b.other.self), g.other.mean_all(g.other.self));
    row("attention on t-1, trigger queries", b.trigger.mean_all(b.trigger.previous), g.trigger.mean_all(g.trigger.previous));
    std::printf("  %-40s %9s %9.3f\n", "G1 mean gate, non-trigger queries", "-", g.other.mean_all(g.other.gate));
    std::printf("  %-40s %9s %9.3f\n", "G1 mean gate, trigger queries", "-", g.trigger.mean_all(g.trigger.gate));
    std::printf("  (means over heads and layers; even attention would give alpha %.3f; best possible: post-trigger\n"
                "   loss 0, other-position loss %.3f; %d trigger and %d other queries; trained in %.0f s and %.0f s)\n",
                even, b.other.oracle_loss / b.other.count, int(b.trigger.count), int(b.other.count), base.seconds,
                g1.seconds);
}

void print_per_head(const CopyRun& run) {
    const CopyReport& r = run.report;
    std::printf("  %s %s, per head: alpha non-trigger / alpha trigger / self non-trigger / t-1 trigger%s\n",
                run.shape.name().c_str(), run.name.c_str(), r.gated ? " / gate non-trigger / gate trigger" : "");
    for (int64_t l = 0; l < r.L; ++l)
        for (int64_t h = 0; h < r.H; ++h) {
            const size_t i = l * r.H + h;
            std::printf("    layer %d head %d: %.3f / %.3f / %.3f / %.3f", int(l), int(h),
                        r.other.mean_of(r.other.alpha, i), r.trigger.mean_of(r.trigger.alpha, i),
                        r.other.mean_of(r.other.self, i), r.trigger.mean_of(r.trigger.previous, i));
            if (r.gated)
                std::printf(" / %.3f / %.3f", r.other.mean_of(r.other.gate, i), r.trigger.mean_of(r.trigger.gate, i));
            std::printf("\n");
        }
}

void write_copy_results(const std::filesystem::path& dir, const CopySetup& setup, const BigramBackcopy& data,
                        const std::vector<CopyRun>& runs);

}  // namespace

void copy_task(const CopySetup& setup, bool demo, const std::string& out) {
    auto data = std::make_shared<BigramBackcopy>();
    std::printf("== (%s) Bigram-Backcopy: 64 tokens + BOS, 4 likely successors each, triggers", setup.name.c_str());
    for (int64_t t : data->trigger_tokens()) std::printf(" %d", int(t));
    std::printf("\n   %s\n", setup.exclude_self ? "each query's own key hidden (query t sees keys 0 .. t-1; BOS sees itself)"
                                                  : "the standard causal mask (query t sees keys 0 .. t)");
    std::printf("   d_model 64, %s, %s positions; %lld steps of %lld x %lld tokens, lr %.0e, weight decay %.2g; baseline and "
                "G1 on the same seed and batches\n",
                setup.ffn ? "SwiGLU FFN" : "attention only (no FFN)", setup.positions == "rope" ? "RoPE" : "learned",
                (long long)setup.steps, (long long)setup.batch, (long long)setup.seq_len, setup.lr, setup.weight_decay);
    std::vector<CopyRun> runs;  // pairs: baseline, G1
    for (const std::string& m : setup.models)
        for (GatePosition gate : {GatePosition::none, GatePosition::sdpa_output})
            runs.push_back(train_copy(data, setup, parse_shape(m), gate, !demo));
    for (size_t i = 0; i < runs.size(); i += 2) {
        std::printf("\n%s model, 8 validation batches:\n", runs[i].shape.name().c_str());
        print_copy_table(runs[i], runs[i + 1], even_alpha(setup));
        if (demo) continue;
        print_per_head(runs[i]), print_per_head(runs[i + 1]);
        for (const CopyRun* run : {&runs[i], &runs[i + 1]})
            std::printf("  %s %s, analyze() over all queries:\n%s", run->shape.name().c_str(), run->name.c_str(),
                        run->analysis.table().c_str());
    }
    if (out.empty()) return;
    write_copy_results(out, setup, *data, runs);
    std::printf("\nwrote %s/%s_*.{json,csv,svg,png}\n", out.c_str(), setup.name.c_str());
}

// ---------------------------------------------------------------- the files of part (a)

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
    json curve = {{"step", run.curve_step},
                  {"trigger_loss", run.curve_trigger_loss},
                  {"other_loss", run.curve_other_loss},
                  {"alpha_other", run.curve_alpha_other},
                  {"alpha_trigger", run.curve_alpha_trigger}};
    if (r.gated) curve["gate_other"] = run.curve_gate_other, curve["gate_trigger"] = run.curve_gate_trigger;
    return {{"model", run.name},
            {"layers", run.shape.layers},
            {"heads", run.shape.heads},
            {"seconds", run.seconds},
            {"analysis", json::parse(run.analysis.to_json())},
            {"trigger_queries", query_class_json(r.trigger, r.L, r.H, r.gated)},
            {"other_queries", query_class_json(r.other, r.L, r.H, r.gated)},
            {"curve", curve}};
}

// The head of layer l with the largest v[l·H + h]: with trigger.previous, the head that
// copies; with other.self, the head that parks non-trigger queries on themselves.
int64_t top_head(const CopyReport& r, const std::vector<double>& v, int64_t l) {
    int64_t best = 0;
    for (int64_t h = 1; h < r.H; ++h)
        if (v[l * r.H + h] > v[l * r.H + best]) best = h;
    return best;
}

void write_copy_results(const std::filesystem::path& dir, const CopySetup& setup, const BigramBackcopy& data,
                        const std::vector<CopyRun>& runs) {
    std::filesystem::create_directories(dir);
    const auto file = [&](const std::string& rest) { return (dir / (setup.name + "_" + rest)).string(); };
    json j = {{"task", {{"vocab", 64}, {"bos", data.bos()}, {"successors", 4}, {"triggers", data.trigger_tokens()}}},
              {"even_attention_alpha", even_alpha(setup)},
              {"train", json::parse(copy_config(data, setup, parse_shape(setup.models[0]), GatePosition::none).to_json())},
              {"runs", json::array()}};
    for (const CopyRun& run : runs) j["runs"].push_back(copy_run_json(run));
    write_json(file("bigram_backcopy.json"), j);

    // Per layer (mean over heads): α for the two kinds of query, and G1's gate.
    const std::string title = "Bigram-Backcopy (" + setup.name + (setup.exclude_self ? ", own key hidden)" : ", standard mask)");
    std::vector<std::string> groups;
    std::vector<BarSeries> bars{{"baseline, non-trigger queries", {}, "#9ecae1", {}},
                                {"baseline, trigger queries", {}, "#08519c", {}},
                                {"G1, non-trigger queries", {}, "#fdae6b", {}},
                                {"G1, trigger queries", {}, "#d94801", {}},
                                {"G1, non-trigger queries, alpha x gate", {}, "#fdd0a2", {}}};
    std::vector<BarSeries> gate_bars{{"G1 gate, non-trigger queries", {}, "#fdae6b", {}},
                                     {"G1 gate, trigger queries", {}, "#d94801", {}}};
    std::vector<std::vector<double>> rows;
    for (size_t i = 0; i < runs.size(); i += 2) {
        const CopyReport &b = runs[i].report, &g = runs[i + 1].report;
        for (int64_t l = 0; l < b.L; ++l) {
            groups.push_back(runs[i].shape.stem() + " layer " + std::to_string(l));
            bars[0].values.push_back(b.layer_mean(b.other, b.other.alpha, l));
            bars[1].values.push_back(b.layer_mean(b.trigger, b.trigger.alpha, l));
            bars[2].values.push_back(g.layer_mean(g.other, g.other.alpha, l));
            bars[3].values.push_back(g.layer_mean(g.trigger, g.trigger.alpha, l));
            bars[4].values.push_back(g.layer_mean(g.other, g.other.alpha_gated, l));
            gate_bars[0].values.push_back(g.layer_mean(g.other, g.other.gate, l));
            gate_bars[1].values.push_back(g.layer_mean(g.trigger, g.trigger.gate, l));
            rows.push_back({double(b.L), double(b.H), double(l), bars[0].values.back(), bars[1].values.back(),
                            bars[2].values.back(), bars[3].values.back(), b.layer_mean(b.other, b.other.self, l),
                            g.layer_mean(g.other, g.other.self, l), gate_bars[0].values.back(),
                            gate_bars[1].values.back(), bars[4].values.back()});
        }
    }
    ChartOptions chart = chart_options(title + ": attention on BOS per layer (mean over heads)",
                                       "model (layers x heads) and layer",
                                       "alpha (attention on position 0)", 0.3, "sink threshold 0.3");
    write_text_file(file("alpha.svg"), svg_bar_chart(groups, bars, chart));
    chart.title = title + ": G1 gate per layer (mean over heads and channels)";
    chart.y_label = "mean gate", chart.reference_y = NAN;
    write_text_file(file("gate.svg"), svg_bar_chart(groups, gate_bars, chart));
    write_text_file(file("per_layer.csv"),
                    csv_table({"layers", "heads", "layer", "alpha_other_baseline", "alpha_trigger_baseline",
                               "alpha_other_g1", "alpha_trigger_g1", "self_other_baseline", "self_other_g1",
                               "gate_other_g1", "gate_trigger_g1", "alpha_times_gate_other_g1"},
                              rows));

    // Training curves: post-trigger loss; α on non-trigger queries; G1's gate on both kinds.
    std::vector<Series> loss_lines, alpha_lines, gate_lines;
    for (size_t i = 0; i < runs.size(); ++i) {
        const CopyRun& run = runs[i];
        const bool baseline = run.name == "baseline";
        const std::string label = run.shape.stem() + " " + (baseline ? "baseline" : "G1");
        loss_lines.push_back(line(label, run.curve_step, run.curve_trigger_loss, pair_color(i / 2, baseline)));
        alpha_lines.push_back(line(label, run.curve_step, run.curve_alpha_other, pair_color(i / 2, baseline)));
        if (!baseline) {
            gate_lines.push_back(line(label + ", non-trigger", run.curve_step, run.curve_gate_other, pair_color(i / 2, true)));
            gate_lines.push_back(line(label + ", trigger", run.curve_step, run.curve_gate_trigger, pair_color(i / 2, false)));
        }
    }
    auto curve = [&](const std::string& name, const std::vector<Series>& lines, const std::string& what,
                     const std::string& y_label) {
        write_text_file(file(name), svg_line_chart(lines, chart_options(title + ": " + what, "training step", y_label)));
    };
    curve("trigger_loss.svg", loss_lines, "loss on post-trigger positions (the copy)", "cross-entropy (nats)");
    curve("alpha_curve.svg", alpha_lines, "attention on BOS from non-trigger queries", "alpha, mean over layers and heads");
    curve("gate_curve.svg", gate_lines, "G1 mean gate on the two kinds of query", "mean gate");

    // Heat maps of the first and the last layer of every model: the head that copies and the
    // one that parks most (with the own key hidden: the one with the most attention on BOS).
    const Tensor ids = data.val_batch(0, 1, setup.seq_len).inputs;  // (1, T)
    for (const CopyRun& run : runs) {
        auto heatmap = [&](int64_t l, int64_t h) {
            const std::string stem = "heatmap_" + run.shape.stem() + "_" + run.name + "_layer" + std::to_string(l) +
                                     "_head" + std::to_string(h);
            write_head_heatmaps(file(stem), run.name + " " + run.shape.stem(), *run.model, ids, l, h,
                                int(256 / setup.seq_len));  // 4 px at T = 64
        };
        const QueryClass& other = run.report.other;
        for (int64_t l : {int64_t(0), run.report.L - 1}) {
            const int64_t copier = top_head(run.report, run.report.trigger.previous, l);
            const int64_t parker = top_head(run.report, setup.exclude_self ? other.alpha : other.self, l);
            heatmap(l, copier);
            if (parker != copier) heatmap(l, parker);
            if (run.report.L == 1) break;
        }
    }
}

}  // namespace
