// Tutorial 06 — the attention sink (article 4.1) and what the G1 gate does to it.
//
// (a) Bigram-Backcopy (nn/train/synthetic.h): only the queries at trigger tokens need to attend
//     (one token back, to copy it); every other query has nothing useful to read. We train
//     a baseline and a G1 model on the same batches and measure, separately for the two
//     kinds of queries, where attention goes (BOS, the query itself, the previous token)
//     and, for G1, the gate. Two setups: (a1) the standard causal mask, where idle heads
//     park on their own token, and (a2) each query's own key hidden, where they sink on BOS.
// (b) Natural text with the tiny preset: the per-layer report of analyze() (SPEC §3) for
//     baseline and G1, at the preset's learning rate and at 3× it; then StreamingLLM's
//     test: a sliding window that hides BOS from late queries.
//
// Run from the repository root (OMP_NUM_THREADS=1: the two parts run side by side):
//   ./build/tutorials/tutorial_06_attention_sink           full run (both parts), writes results/
//   ./build/tutorials/tutorial_06_attention_sink --demo    part (a), one small model pair, about a minute
//   ./build/tutorials/tutorial_06_attention_sink --quick   both parts, shortened (a smoke test)
// --help lists the rest (--part, --out, part (a)'s training options). The full run writes
// tutorials/06_attention_sink/results; --demo and --quick write files only when --out is given.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "gatedgrad.h"

namespace fs = std::filesystem;
using namespace gg;
using namespace gg::nn;
using json = nlohmann::ordered_json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Series line(const std::string& label, const std::vector<double>& x, const std::vector<double>& y,
            const std::string& color = "") {
    return {label, x, y, color, false, 1.0};
}

// Colour i of a few dark/light pairs: G1 dark, baseline light, so the legend tells them apart.
std::string pair_color(size_t i, bool light) {
    static const char* dark[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"};
    static const char* pale[] = {"#9ecae1", "#f4a582", "#a1d99b", "#fdd0a2"};
    return light ? pale[i % 4] : dark[i % 4];
}

// Cross-entropy and argmax hit of every position: logits (B, T, V), targets (B, T).
struct TokenScores {
    std::vector<double> loss;  // (B·T) nats
    std::vector<bool> hit;     // (B·T)
};

TokenScores score_tokens(const Tensor& logits, const Tensor& targets) {
    const int64_t V = logits.size(2), N = logits.size(0) * logits.size(1);
    const std::vector<float> z = logits.to_vector<float>();
    const std::vector<int64_t> y = targets.to_vector<int64_t>();
    TokenScores s{std::vector<double>(N), std::vector<bool>(N)};
    for (int64_t n = 0; n < N; ++n) {
        const float* row = z.data() + n * V;
        const int64_t best = std::max_element(row, row + V) - row;
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - row[best]);
        s.loss[n] = std::log(sum) + row[best] - row[y[n]];  // log Σ e^z − z_target
        s.hit[n] = best == y[n];
    }
    return s;
}

// The G1 gate of every (b, h, t), averaged over the head's dk channels: (B, H, T, dk) → (B, H, T).
Tensor per_query_gate(const Tensor& gate) { return mean(gate, {3}); }

// ================================================================= (a) Bigram-Backcopy

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
    json to_json(int64_t L, int64_t H, bool gated) const {
        json j = {{"queries", count},          {"loss", loss / count},   {"accuracy", hits / count},
                  {"oracle_loss", oracle_loss / count}, {"alpha", mean_all(alpha)}, {"attention_to_self", mean_all(self)},
                  {"attention_to_previous", mean_all(previous)}};
        if (gated) j["gate"] = mean_all(gate), j["alpha_times_gate"] = mean_all(alpha_gated);
        json layers = json::array();
        for (int64_t l = 0; l < L; ++l) {
            json heads = json::array();
            for (int64_t h = 0; h < H; ++h) {
                const size_t i = l * H + h;
                json head = {{"alpha", mean_of(alpha, i)},
                             {"attention_to_self", mean_of(self, i)},
                             {"attention_to_previous", mean_of(previous, i)}};
                if (gated) head["gate"] = mean_of(gate, i);
                heads.push_back(head);
            }
            layers.push_back(heads);
        }
        j["per_layer_head"] = layers;
        return j;
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

// A model shape of part (a): layers × heads.
struct ModelShape {
    int64_t layers = 1, heads = 4;
    std::string name() const { return std::to_string(layers) + "-layer " + std::to_string(heads) + "-head"; }
    std::string stem() const { return std::to_string(layers) + "x" + std::to_string(heads); }
};

// Part (a)'s training setup. The full run trains two: (a1) with the standard causal mask,
// and (a2) with each query's own key hidden (SdpaOptions::exclude_self), on shorter
// sequences and without weight decay — the setup in which the baseline does sink on BOS.
struct CopySetup {
    std::string name;                                      // "a1" or "a2": the files' prefix
    std::vector<std::string> models{"1x4", "2x4", "1x1"};  // layers x heads
    int64_t steps = 1000, batch = 16, seq_len = 64, points = 10;
    double lr = 3e-3, weight_decay = 0.1;
    bool ffn = false;
    bool exclude_self = false;
    std::string positions = "rope";  // or "learned"
};

CopySetup own_token_visible() { return {.name = "a1"}; }
CopySetup own_token_hidden() {
    return {.name = "a2", .steps = 2000, .batch = 64, .seq_len = 16, .weight_decay = 0.0, .exclude_self = true};
}

// α of a query that spreads its attention evenly over the keys it sees, averaged over the
// queries t = 1 … T−1: 1/(t+1) keys with its own, 1/t without.
double even_alpha(const CopySetup& s) {
    double sum = 0;
    for (int64_t t = 1; t < s.seq_len; ++t) sum += 1.0 / double(s.exclude_self ? t : t + 1);
    return sum / double(s.seq_len - 1);
}

ModelShape parse_shape(const std::string& text) {
    ModelShape s;
    if (std::sscanf(text.c_str(), "%" SCNd64 "x%" SCNd64, &s.layers, &s.heads) != 2 || s.layers < 1 || s.heads < 1 || 64 % s.heads)
        throw std::invalid_argument("model shape '" + text + "' is not LAYERSxHEADS with heads dividing 64");
    return s;
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
    const auto t0 = std::chrono::steady_clock::now();
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
    run.seconds = seconds_since(t0);
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

// Heat maps of one head on the first validation sequence: the attention probabilities, and
// for G1 also the gated ones (each query row times its mean gate: what reaches W_O).
void write_copy_heatmaps(const fs::path& dir, const std::string& prefix, const CopyRun& run, const BigramBackcopy& data,
                         int64_t T, int64_t l, int64_t h) {
    NoGradGuard no_grad;
    const Tensor ids = data.val_batch(0, 1, T).inputs;  // (1, T)
    LMCapture capture;
    run.model->forward(ids, Tensor(), nullptr, &capture);
    const AttentionCapture& c = capture.attention[l];
    const Tensor probs = c.probs.select(0, 0).select(0, h);  // (T, T): query rows, key columns
    const std::string stem = prefix + "_heatmap_" + run.shape.stem() + "_" + run.name + "_layer" + std::to_string(l) + "_head" +
                             std::to_string(h);
    const int64_t cell = 256 / T;  // pixels per entry: 4 at T = 64, 16 at T = 16
    write_heatmap_png((dir / (stem + ".png")).string(), probs, cell);
    if (c.gate.defined())
        write_heatmap_png((dir / (stem + "_gated.png")).string(),
                          probs * per_query_gate(c.gate).select(0, 0).select(0, h).unsqueeze(1), cell);
}

// The head of layer l with the largest v[l·H + h]: with trigger.previous, the head that
// copies; with other.self, the head that parks non-trigger queries on themselves.
int64_t top_head(const CopyReport& r, const std::vector<double>& v, int64_t l) {
    int64_t best = 0;
    for (int64_t h = 1; h < r.H; ++h)
        if (v[l * r.H + h] > v[l * r.H + best]) best = h;
    return best;
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
            {"trigger_queries", r.trigger.to_json(r.L, r.H, r.gated)},
            {"other_queries", r.other.to_json(r.L, r.H, r.gated)},
            {"curve", curve}};
}

struct Args {
    bool quick = false, demo = false, one_process = false;
    std::string part = "ab";
    std::string out;  // empty: no files
    std::vector<CopySetup> copies;  // part (a)'s setups, in order
};

void part_a(const Args& args, const CopySetup& setup) {
    auto data = std::make_shared<BigramBackcopy>();
    const std::string& prefix = setup.name;
    std::printf("== (%s) Bigram-Backcopy: 64 tokens + BOS, 4 likely successors each, triggers", prefix.c_str());
    for (int64_t t : data->trigger_tokens()) std::printf(" %d", int(t));
    std::printf("\n   %s\n", setup.exclude_self ? "each query's own key hidden (query t sees keys 0 .. t-1; BOS sees itself)"
                                                  : "the standard causal mask (query t sees keys 0 .. t)");
    std::printf("   d_model 64, %s, %s positions; %lld steps of %lld x %lld tokens, lr %.0e, weight decay %.2g; baseline and "
                "G1 on the same seed and batches\n",
                setup.ffn ? "SwiGLU FFN" : "attention only (no FFN)", setup.positions == "rope" ? "RoPE" : "learned",
                (long long)setup.steps, (long long)setup.batch,
                (long long)setup.seq_len, setup.lr, setup.weight_decay);
    std::vector<CopyRun> runs;  // pairs: baseline, G1
    for (const std::string& m : setup.models)
        for (GatePosition gate : {GatePosition::none, GatePosition::sdpa_output})
            runs.push_back(train_copy(data, setup, parse_shape(m), gate, !args.demo));
    for (size_t i = 0; i < runs.size(); i += 2) {
        std::printf("\n%s model, 8 validation batches:\n", runs[i].shape.name().c_str());
        print_copy_table(runs[i], runs[i + 1], even_alpha(setup));
        if (args.demo) continue;
        print_per_head(runs[i]), print_per_head(runs[i + 1]);
        for (const CopyRun* run : {&runs[i], &runs[i + 1]})
            std::printf("  %s %s, analyze() over all queries:\n%s", run->shape.name().c_str(), run->name.c_str(),
                        run->analysis.table().c_str());
    }
    if (args.out.empty()) return;

    const fs::path dir(args.out);
    fs::create_directories(dir);
    json j = {{"task", {{"vocab", 64}, {"bos", data->bos()}, {"successors", 4}, {"triggers", data->trigger_tokens()}}},
              {"even_attention_alpha", even_alpha(setup)},
              {"train", json::parse(copy_config(*data, setup, parse_shape(setup.models[0]), GatePosition::none).to_json())},
              {"runs", json::array()}};
    for (const CopyRun& run : runs) j["runs"].push_back(copy_run_json(run));
    const auto file = [&](const std::string& rest) { return (dir / (prefix + "_" + rest)).string(); };
    write_text_file(file("bigram_backcopy.json"), j.dump(2) + "\n");

    const std::string title = "Bigram-Backcopy (" + prefix + (setup.exclude_self ? ", own key hidden)" : ", standard mask)");
    // Per layer (mean over heads): α for the two kinds of query, and G1's gate.
    std::vector<std::string> groups;
    std::vector<BarSeries> bars{{"baseline, non-trigger queries", {}, "#9ecae1"},
                                {"baseline, trigger queries", {}, "#08519c"},
                                {"G1, non-trigger queries", {}, "#fdae6b"},
                                {"G1, trigger queries", {}, "#d94801"},
                                {"G1, non-trigger queries, alpha x gate", {}, "#fdd0a2"}};
    std::vector<BarSeries> gate_bars{{"G1 gate, non-trigger queries", {}, "#fdae6b"},
                                     {"G1 gate, trigger queries", {}, "#d94801"}};
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
    ChartOptions chart;
    chart.title = title + ": attention on BOS per layer (mean over heads; model layers x heads)";
    chart.y_label = "alpha (attention on position 0)";
    chart.reference_y = 0.3, chart.reference_label = "sink threshold 0.3";
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
        const std::string label = run.shape.stem() + " " + (run.name == "baseline" ? "baseline" : "G1");
        const bool baseline = run.name == "baseline";
        loss_lines.push_back(line(label, run.curve_step, run.curve_trigger_loss, pair_color(i / 2, baseline)));
        alpha_lines.push_back(line(label, run.curve_step, run.curve_alpha_other, pair_color(i / 2, baseline)));
        if (!baseline) {
            gate_lines.push_back(line(label + ", non-trigger", run.curve_step, run.curve_gate_other, pair_color(i / 2, true)));
            gate_lines.push_back(line(label + ", trigger", run.curve_step, run.curve_gate_trigger, pair_color(i / 2, false)));
        }
    }
    ChartOptions curve;
    curve.x_label = "training step";
    curve.title = title + ": loss on post-trigger positions (the copy)";
    curve.y_label = "cross-entropy (nats)";
    write_text_file(file("trigger_loss.svg"), svg_line_chart(loss_lines, curve));
    curve.title = title + ": attention on BOS from non-trigger queries";
    curve.y_label = "alpha, mean over layers and heads";
    write_text_file(file("alpha_curve.svg"), svg_line_chart(alpha_lines, curve));
    curve.title = title + ": G1 mean gate on the two kinds of query";
    curve.y_label = "mean gate";
    write_text_file(file("gate_curve.svg"), svg_line_chart(gate_lines, curve));

    // Heat maps of the first and the last layer of every model: the head that copies and the
    // one that parks most (with the own key hidden: the one with the most attention on BOS).
    for (const CopyRun& run : runs) {
        const QueryClass& other = run.report.other;
        for (int64_t l : {int64_t(0), run.report.L - 1}) {
            const int64_t copier = top_head(run.report, run.report.trigger.previous, l);
            const int64_t parker = top_head(run.report, setup.exclude_self ? other.alpha : other.self, l);
            write_copy_heatmaps(dir, prefix, run, *data, setup.seq_len, l, copier);
            if (parker != copier) write_copy_heatmaps(dir, prefix, run, *data, setup.seq_len, l, parker);
            if (run.report.L == 1) break;
        }
    }
    std::printf("\nwrote %s/%s_*.{json,csv,svg,png}\n", args.out.c_str(), prefix.c_str());
}

// ================================================================= (b) natural text

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

TextRun train_text(const std::shared_ptr<TextDataset>& data, GatePosition gate, double lr_scale, int64_t steps,
                   int64_t points) {
    TrainConfig c = TrainConfig::preset("tiny");
    c.model.attn.gate = gate;
    c.lr *= lr_scale;
    c.steps = steps, c.eval_every = 0;
    TextRun run;
    run.name = gate_position_name(gate), run.lr = c.lr;
    const auto t0 = std::chrono::steady_clock::now();
    Trainer trainer(c, data);
    const Tensor probe = analysis_ids(*data, 1, c.batch_size, c.seq_len);
    for (int64_t k = 1; k <= points; ++k) {
        trainer.run(true, k * steps / points);
        trainer.model().eval();
        run.curve_step.push_back(double(trainer.step()));
        run.curve_alpha.push_back(analyze(trainer.model(), probe).mean_first_token_share);
        run.curve_val.push_back(trainer.evaluate());
    }
    run.val_loss = run.curve_val.back();
    run.seconds = seconds_since(t0);
    run.model = std::make_shared<GatedTransformerLM>(c.model);
    copy_state(run.model->state_dict(), trainer.model().state_dict(), "tutorial 06", "the trainer", "the copy");
    run.model->eval();
    run.analysis = analyze(*run.model, analysis_ids(*data, 4, c.batch_size, c.seq_len));
    std::printf("  %-8s lr %.0e: %lld steps in %.0f s, validation loss %.4f, mean alpha %.3f, sink heads %lld of %lld\n",
                run.name.c_str(), run.lr, (long long)steps, run.seconds, run.val_loss,
                run.analysis.mean_first_token_share, (long long)run.analysis.sink_heads,
                (long long)run.analysis.heads);
    return run;
}

// StreamingLLM (article 8.2): the same weights in a model whose attention sees only the last
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

// Mean of v[from, to).
double mean_range(const std::vector<double>& v, int64_t from, int64_t to) {
    double s = 0;
    for (int64_t t = from; t < to; ++t) s += v[t];
    return s / double(to - from);
}

std::string model_label(const TextRun& run) {
    char b[64];
    std::snprintf(b, sizeof b, "%s, lr %.0e", run.name == "baseline" ? "baseline" : "G1", run.lr);
    return b;
}

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

// Heat maps of layer l, head h on the first validation sequence (and, for G1, gated rows).
void write_text_heatmaps(const fs::path& dir, const TextRun& run, const Tensor& ids, int64_t l, int64_t h) {
    NoGradGuard no_grad;
    LMCapture capture;
    run.model->forward(ids.narrow(0, 0, 1), Tensor(), nullptr, &capture);
    const AttentionCapture& c = capture.attention[l];
    const Tensor probs = c.probs.select(0, 0).select(0, h);  // (T, T)
    char stem[96];
    std::snprintf(stem, sizeof stem, "b_heatmap_%s_lr%.0e_layer%d_head%d", run.name.c_str(), run.lr, int(l), int(h));
    write_heatmap_png((dir / (std::string(stem) + ".png")).string(), probs, 4);
    if (c.gate.defined())
        write_heatmap_png((dir / (std::string(stem) + "_gated.png")).string(),
                          probs * per_query_gate(c.gate).select(0, 0).select(0, h).unsqueeze(1), 4);
}

void part_b(const Args& args) {
    const TrainConfig tiny = TrainConfig::preset("tiny");
    auto data = std::make_shared<TextDataset>(load_documents(tiny.data));
    const int64_t steps = args.quick ? 60 : tiny.steps, points = args.quick ? 2 : 6, T = tiny.seq_len;
    std::printf("\n== (b) natural text (%s), tiny preset: d_model %d, %d layers, 4 heads, T = %d, %lld steps\n",
                tiny.data[0].c_str(), int(tiny.model.d_model), int(tiny.model.n_layers), int(T), (long long)steps);
    std::vector<TextRun> runs;
    for (double scale : {1.0, 3.0})
        for (GatePosition gate : {GatePosition::none, GatePosition::sdpa_output})
            runs.push_back(train_text(data, gate, scale, steps, points));
    for (TextRun& run : runs) {
        std::printf("\n%s:\n%s", model_label(run).c_str(), run.analysis.table().c_str());
        for (size_t l = 0; l < run.analysis.layers.size(); ++l) {
            std::printf("  layer %d alpha per head:", int(l));
            for (double a : run.analysis.layers[l].first_token_share) std::printf(" %.3f", a);
            std::printf("\n");
        }
    }

    const std::vector<int64_t> windows{0, 32, 16};
    const int64_t eval_batches = args.quick ? 2 : 8;
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
    if (args.out.empty()) return;

    const fs::path dir(args.out);
    fs::create_directories(dir);
    json j = {{"train", json::parse(tiny.to_json())}, {"runs", json::array()}};
    for (const TextRun& run : runs) j["runs"].push_back(text_run_json(run, windows));
    write_text_file((dir / "b_natural_text.json").string(), j.dump(2) + "\n");

    // Per-layer bars of α (mean over heads), and the per-(layer, head) table as CSV.
    std::vector<std::string> groups;
    std::vector<BarSeries> bars;
    std::vector<std::vector<double>> rows;
    for (const TextRun& run : runs) bars.push_back({model_label(run), {}, ""});
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
    ChartOptions chart;
    chart.title = "natural text, tiny preset: attention on BOS per layer (mean over heads)";
    chart.y_label = "alpha (attention on position 0)";
    chart.reference_y = 0.3, chart.reference_label = "sink threshold 0.3";
    write_text_file((dir / "b_alpha.svg").string(), svg_bar_chart(groups, bars, chart));
    write_text_file((dir / "b_per_head.csv").string(),
                    csv_table({"g1", "lr", "layer", "head", "alpha", "layer_gate_mean", "layer_gate_below_0_1",
                               "layer_entropy", "layer_gated_entropy", "layer_max_abs_hidden",
                               "layer_max_abs_hidden_bos"},
                              rows));

    // α during training, and the loss per position with and without the window.
    std::vector<Series> alpha_lines, window_lines;
    for (const TextRun& run : runs) alpha_lines.push_back(line(model_label(run), run.curve_step, run.curve_alpha));
    ChartOptions curve;
    curve.title = "natural text: attention on BOS during training";
    curve.x_label = "training step", curve.y_label = "alpha, mean over layers and heads";
    write_text_file((dir / "b_alpha_curve.svg").string(), svg_line_chart(alpha_lines, curve));
    std::vector<double> positions(T);
    for (int64_t t = 0; t < T; ++t) positions[t] = double(t);
    for (size_t r = 2; r < 4; ++r) {  // 3× the preset's learning rate, where the baseline leans on BOS most
        window_lines.push_back(line(model_label(runs[r]) + ", full attention", positions,
                                    smooth(runs[r].position_loss[0], 0.7), pair_color(r - 2, false)));
        window_lines.push_back(line(model_label(runs[r]) + ", window 16", positions,
                                    smooth(runs[r].position_loss[2], 0.7), pair_color(r - 2, true)));
    }
    curve.title = "sliding window 16 (BOS invisible to queries t >= 16): loss per position";
    curve.x_label = "query position t", curve.y_label = "validation loss (nats, smoothed over t)";
    curve.reference_y = NAN;
    write_text_file((dir / "b_window.svg").string(), svg_line_chart(window_lines, curve));

    // Heat maps, at each learning rate: the baseline's strongest sink head and the same head of G1.
    const Tensor ids = analysis_ids(*data, 1, tiny.batch_size, T);
    for (size_t r = 0; r < runs.size(); r += 2) {
        int64_t best_l = 0, best_h = 0;
        const auto& layers = runs[r].analysis.layers;
        for (size_t l = 0; l < layers.size(); ++l)
            for (size_t h = 0; h < layers[l].first_token_share.size(); ++h)
                if (layers[l].first_token_share[h] > layers[best_l].first_token_share[best_h])
                    best_l = int64_t(l), best_h = int64_t(h);
        write_text_heatmaps(dir, runs[r], ids, best_l, best_h);
        write_text_heatmaps(dir, runs[r + 1], ids, best_l, best_h);
    }
    std::printf("\nwrote %s/b_*.{json,csv,svg,png}\n", args.out.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    Args args;
    CLI::App app{"Tutorial 06: the attention sink, baseline vs G1 (Bigram-Backcopy and natural text)"};
    app.add_flag("--demo", args.demo, "part (a2) only: one 1-layer 4-head pair, half the steps, a short table (about a minute)");
    app.add_flag("--quick", args.quick, "both parts, shortened (a smoke test)");
    app.add_option("--part", args.part, "which parts to run: a, b or ab")->check(CLI::IsMember({"a", "b", "ab"}));
    app.add_option("--out", args.out, "results folder (default for the full run: tutorials/06_attention_sink/results)");
    app.add_flag("--one-process", args.one_process, "run part (b) after (a), not beside it in a second process");
    // Part (a)'s options override the same field of every setup that runs.
    std::string variant = "both";
    CopySetup over;
    app.add_option("--a-setup", variant, "part (a): a1 (standard causal mask), a2 (own key hidden) or both")
        ->check(CLI::IsMember({"a1", "a2", "both"}));
    auto* o_steps = app.add_option("--a-steps", over.steps, "part (a): training steps")->check(CLI::PositiveNumber);
    auto* o_lr = app.add_option("--a-lr", over.lr, "part (a): peak learning rate")->check(CLI::PositiveNumber);
    auto* o_wd = app.add_option("--a-weight-decay", over.weight_decay, "part (a): AdamW weight decay")
                     ->check(CLI::NonNegativeNumber);
    auto* o_batch = app.add_option("--a-batch", over.batch, "part (a): sequences per batch")->check(CLI::PositiveNumber);
    auto* o_len = app.add_option("--a-seq-len", over.seq_len, "part (a): tokens per sequence")->check(CLI::Range(4, 512));
    auto* o_models = app.add_option("--a-models", over.models, "part (a): model shapes LAYERSxHEADS, e.g. 1x4 2x4 1x1");
    auto* o_pos = app.add_option("--a-positions", over.positions, "part (a): rope or learned (absolute) positions")
                      ->check(CLI::IsMember({"rope", "learned"}));
    auto* o_ffn = app.add_flag("--a-ffn", over.ffn, "part (a): blocks with the SwiGLU FFN (default: attention only)");
    CLI11_PARSE(app, argc, argv);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they happen, even in a pipe
    if (args.demo && !app.count("--a-setup")) variant = "a2";  // the setup with a sink to show
    if (variant != "a2") args.copies.push_back(own_token_visible());
    if (variant != "a1") args.copies.push_back(own_token_hidden());
    for (CopySetup& s : args.copies) {
        if (args.demo) s.points = 1, s.models = {"1x4"}, s.steps /= 2;
        if (args.quick) s.steps = 150, s.points = 3;
        if (*o_steps) s.steps = over.steps;
        if (*o_lr) s.lr = over.lr;
        if (*o_wd) s.weight_decay = over.weight_decay;
        if (*o_batch) s.batch = over.batch;
        if (*o_len) s.seq_len = over.seq_len;
        if (*o_models) s.models = over.models;
        if (*o_pos) s.positions = over.positions;
        if (*o_ffn) s.ffn = over.ffn;
    }
    if (args.demo) args.part = "a";
    if (args.out.empty() && !args.quick && !args.demo) args.out = "tutorials/06_attention_sink/results";
    const auto t0 = std::chrono::steady_clock::now();
    const bool a = args.part.find('a') != std::string::npos, b = args.part.find('b') != std::string::npos;
    if (a && b && !args.one_process) {
        // Two cores: part (b) trains in a child process at the same time as (a); its output
        // goes to a temporary file and is printed after (a)'s.
        std::FILE* b_output = std::tmpfile();
        std::fflush(stdout);
        const pid_t child = fork();
        if (child < 0) throw std::runtime_error("tutorial 06: fork failed");
        if (child == 0) {
            dup2(fileno(b_output), STDOUT_FILENO);
            int status = 0;
            try {
                part_b(args);
            } catch (const std::exception& e) {
                std::printf("part (b) failed: %s\n", e.what());
                status = 1;
            }
            std::fflush(stdout);
            _exit(status);
        }
        for (const CopySetup& setup : args.copies) part_a(args, setup);
        int status = 0;
        waitpid(child, &status, 0);
        std::rewind(b_output);
        char buffer[4096];
        for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, b_output)) > 0;) std::fwrite(buffer, 1, n, stdout);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    } else {
        if (a)
            for (const CopySetup& setup : args.copies) part_a(args, setup);
        if (b) part_b(args);
    }
    std::printf("\ntotal time %.0f s\n", seconds_since(t0));
    return 0;
}
