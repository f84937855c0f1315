// copy_task.cpp — tutorial 06, part (a): the attention sink on Bigram-Backcopy.
//
// The task (nn/train/synthetic.h): a Markov chain over 64 tokens, except that right after a
// trigger token comes a copy of the token before it. So the query at a trigger must read one
// position back, and every other query has nothing useful to read. We train a baseline and
// a G1 model on the same batches and measure, for the two kinds of query separately, where
// the attention goes: BOS (α), the query's own token, the previous token; for G1, the gate;
// and how large the value vector is at BOS next to the other tokens (the "value drain").
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
    // The value drain: per (layer, head), the mean ‖v‖ of BOS's value vector and of the other
    // positions' (v = W_V RMSNorm(x) of the head; a sink whose value is small adds little).
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

// The value vectors of layer l, (B, T, H, dk) as floats: the layer's input is the embedding for
// l = 0 and the previous block's output after that.
std::vector<float> layer_values(const GatedTransformerLM& model, const Tensor& ids, const LMCapture& capture,
                                int64_t l) {
    Tensor x = l == 0 ? model.tok_emb->forward(ids) : capture.hidden[l - 1];  // (B, T, d)
    if (l == 0 && model.pos_emb) x = x + model.pos_emb->forward(ids.size(1));
    const TransformerBlock& block = *model.blocks[l];
    return block.attn->w_v->forward(block.norm1->forward(x)).to_vector<float>();  // (B, T, H·dk)
}

// Runs the model over `batches` validation batches with capture on and sorts every query
// t ≥ 1 by whether its input token is a trigger.
CopyReport measure_copy(const GatedTransformerLM& model, const BigramBackcopy& data, int64_t batches, int64_t B,
                        int64_t T) {
    NoGradGuard no_grad;
    CopyReport r;
    r.L = model.config().n_layers, r.H = model.config().attn.n_heads, r.gated = model.config().attn.gated();
    const int64_t L = r.L, H = r.H, dk = model.config().d_model / H;
    r.trigger.resize(L * H), r.other.resize(L * H);
    r.value_bos.assign(L * H, 0), r.value_other.assign(L * H, 0);
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
            const std::vector<float> v = layer_values(model, batch.inputs, capture, l);  // (B, T, H, dk)
            for (int64_t b = 0; b < B; ++b)
                for (int64_t t = 0; t < T; ++t)
                    for (int64_t h = 0; h < H; ++h) {
                        const float* row = v.data() + ((b * T + t) * H + h) * dk;
                        double sq = 0;
                        for (int64_t e = 0; e < dk; ++e) sq += double(row[e]) * row[e];
                        (t == 0 ? r.value_bos : r.value_other)[l * H + h] +=
                            std::sqrt(sq) / double(t == 0 ? B * batches : B * (T - 1) * batches);
                    }
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
    int64_t layers = 1, heads = 1;
    std::string name() const { return std::to_string(layers) + "-layer " + std::to_string(heads) + "-head"; }
    std::string stem() const { return std::to_string(layers) + "x" + std::to_string(heads); }
};

ModelShape parse_shape(const std::string& text, int64_t d_model) {
    ModelShape s;
    if (std::sscanf(text.c_str(), "%" SCNd64 "x%" SCNd64, &s.layers, &s.heads) != 2 || s.layers < 1 || s.heads < 1 ||
        d_model % s.heads)
        throw std::invalid_argument("model shape '" + text + "' is not LAYERSxHEADS with heads dividing d_model " +
                                    std::to_string(d_model));
    return s;
}

BigramBackcopyOptions task_options(const CopySetup& s) {
    BigramBackcopyOptions o;
    o.concentration = s.concentration, o.successors = s.successors, o.triggers = s.triggers;
    return o;
}

std::string task_description(const CopySetup& s, const BigramBackcopy& data) {
    char rows[96];
    if (s.concentration > 0)
        std::snprintf(rows, sizeof rows, "each row of the chain from Dirichlet(%.2g) over all tokens", s.concentration);
    else
        std::snprintf(rows, sizeof rows, "%d likely successors per token", int(s.successors));
    std::string text = "64 tokens + BOS, " + std::string(rows) + ", triggers";
    for (int64_t t : data.trigger_tokens()) text += ' ' + std::to_string(t);
    return text;
}

// α of a query that spreads its attention evenly over the keys it sees, averaged over the
// queries t = 1 … T−1: 1/(t+1) keys with its own, 1/t without.
double even_alpha(const CopySetup& s) {
    double sum = 0;
    for (int64_t t = 1; t < s.seq_len; ++t) sum += 1.0 / double(s.exclude_self ? t : t + 1);
    return sum / double(s.seq_len - 1);
}

TrainConfig copy_config(const CopySetup& s, const ModelShape& shape, GatePosition gate, int64_t seed) {
    TrainConfig c;
    c.model.vocab_size = 65;
    c.model.d_model = s.d_model, c.model.n_layers = shape.layers, c.model.attn.n_heads = shape.heads;
    c.model.attn.gate = gate;
    c.model.ffn = s.ffn;
    c.model.init = s.init == "torch" ? LMInit::torch : LMInit::gpt2;
    c.model.attn.exclude_self = s.exclude_self;
    c.model.positions = s.positions == "learned" ? PositionEncoding::learned : PositionEncoding::rope;
    c.batch_size = s.batch, c.seq_len = s.seq_len, c.model.max_len = s.seq_len;
    c.steps = s.steps, c.lr = s.lr, c.weight_decay = s.weight_decay, c.warmup = s.warmup;
    c.eval_every = 0, c.eval_batches = 4, c.seed = uint64_t(seed);
    return c;
}

// One model of the setup: which shape, baseline or G1, which seed. Index order: shape, seed, gate.
struct CopyRunSpec {
    ModelShape shape;
    GatePosition gate;
    int64_t seed;
    std::string label() const {
        return shape.stem() + " " + (gate == GatePosition::none ? "baseline" : "G1") + " seed " + std::to_string(seed);
    }
};

std::vector<CopyRunSpec> run_specs(const CopySetup& s) {
    std::vector<CopyRunSpec> specs;
    for (const std::string& m : s.models)
        for (int64_t seed = 1; seed <= s.seeds; ++seed)
            for (GatePosition gate : {GatePosition::none, GatePosition::sdpa_output})
                specs.push_back({parse_shape(m, s.d_model), gate, seed});
    return specs;
}

// The curve measured along the training, on 2 validation batches: means over layers and heads.
const std::vector<std::string> kCurveKeys{"step",       "trigger_loss", "other_loss",  "alpha_other", "alpha_trigger",
                                          "gate_other", "gate_trigger", "value_bos",   "value_other"};

// Trains one model in a child process, measuring `points` times along the way (Trainer::run
// pauses and continues on the same schedule, see trainer.h); saves it to `checkpoint`.
std::string train_copy(const CopySetup& s, const CopyRunSpec& spec, const std::string& checkpoint) {
    const auto data = std::make_shared<BigramBackcopy>(task_options(s));
    const TrainConfig c = copy_config(s, spec.shape, spec.gate, spec.seed);
    const auto start = Clock::now();
    Trainer trainer(c, data);
    json curve;
    for (const std::string& key : kCurveKeys) curve[key] = json::array();
    for (int64_t k = 1; k <= s.points; ++k) {
        trainer.run(true, k * s.steps / s.points);
        trainer.model().eval();
        const CopyReport r = measure_copy(trainer.model(), *data, 2, c.batch_size, c.seq_len);
        trainer.model().train();
        const std::vector<double> values{double(trainer.step()),
                                         r.trigger.loss / r.trigger.count,
                                         r.other.loss / r.other.count,
                                         r.other.mean_all(r.other.alpha),
                                         r.trigger.mean_all(r.trigger.alpha),
                                         r.gated ? r.other.mean_all(r.other.gate) : NAN,
                                         r.gated ? r.trigger.mean_all(r.trigger.gate) : NAN,
                                         CopyReport::mean(r.value_bos),
                                         CopyReport::mean(r.value_other)};
        for (size_t i = 0; i < kCurveKeys.size(); ++i) curve[kCurveKeys[i]].push_back(values[i]);
    }
    trainer.save(checkpoint);
    const double seconds = seconds_since(start);
    std::printf("  trained %-20s in %4.0f s: alpha at non-trigger queries %.3f\n", spec.label().c_str(), seconds,
                curve["alpha_other"].back().get<double>());
    return json{{"checkpoint", checkpoint}, {"seconds", seconds}, {"curve", curve}}.dump();
}

// What the parent knows of one trained model: the child's curve, and its own measurement.
struct CopyRun {
    CopyRunSpec spec;
    double seconds = 0;
    json curve;
    CopyReport report;
    ModelAnalysis analysis;  // analyze()'s per-layer report on the same validation batches
    std::shared_ptr<GatedTransformerLM> model;
    std::vector<double> curve_of(const std::string& key) const { return json_numbers(curve[key]); }
};

void print_copy_table(const CopyRun& base, const CopyRun& g1, double even) {
    const CopyReport &b = base.report, &g = g1.report;
    auto row = [](const char* label, double x, double y) { std::printf("  %-44s %9.3f %9.3f\n", label, x, y); };
    std::printf("  %-44s %9s %9s\n", "", "baseline", "G1");
    row("post-trigger loss (nats)", b.trigger.loss / b.trigger.count, g.trigger.loss / g.trigger.count);
    row("post-trigger accuracy", b.trigger.hits / b.trigger.count, g.trigger.hits / g.trigger.count);
    row("other-position loss (nats)", b.other.loss / b.other.count, g.other.loss / g.other.count);
    row("alpha (on BOS), non-trigger queries", b.other.mean_all(b.other.alpha), g.other.mean_all(g.other.alpha));
    row("alpha (on BOS), trigger queries", b.trigger.mean_all(b.trigger.alpha), g.trigger.mean_all(g.trigger.alpha));
    row("alpha x gate, non-trigger queries", b.other.mean_all(b.other.alpha_gated), g.other.mean_all(g.other.alpha_gated));
    row("attention on itself, non-trigger queries", b.other.mean_all(b.other.self), g.other.mean_all(g.other.self));
    row("attention on t-1, trigger queries", b.trigger.mean_all(b.trigger.previous), g.trigger.mean_all(g.trigger.previous));
    row("|v| at BOS", CopyReport::mean(b.value_bos), CopyReport::mean(g.value_bos));
    row("|v| at other tokens (mean)", CopyReport::mean(b.value_other), CopyReport::mean(g.value_other));
    std::printf("  %-44s %9s %9.3f\n", "G1 mean gate, non-trigger queries", "-", g.other.mean_all(g.other.gate));
    std::printf("  %-44s %9s %9.3f\n", "G1 mean gate, trigger queries", "-", g.trigger.mean_all(g.trigger.gate));
    std::printf("  (means over heads and layers; even attention would give alpha %.3f; best possible: post-trigger\n"
                "   loss 0, other-position loss %.3f; %d trigger and %d other queries; trained in %.0f s and %.0f s)\n",
                even, b.other.oracle_loss / b.other.count, int(b.trigger.count), int(b.other.count), base.seconds,
                g1.seconds);
}

void print_per_head(const CopyRun& run) {
    const CopyReport& r = run.report;
    std::printf("  %s, per head: alpha non-trigger / alpha trigger / self non-trigger / t-1 trigger / |v| BOS / "
                "|v| other%s\n",
                run.spec.label().c_str(), r.gated ? " / gate non-trigger / gate trigger" : "");
    for (int64_t l = 0; l < r.L; ++l)
        for (int64_t h = 0; h < r.H; ++h) {
            const size_t i = l * r.H + h;
            std::printf("    layer %d head %d: %.3f / %.3f / %.3f / %.3f / %.3f / %.3f", int(l), int(h),
                        r.other.mean_of(r.other.alpha, i), r.trigger.mean_of(r.trigger.alpha, i),
                        r.other.mean_of(r.other.self, i), r.trigger.mean_of(r.trigger.previous, i), r.value_bos[i],
                        r.value_other[i]);
            if (r.gated)
                std::printf(" / %.3f / %.3f", r.other.mean_of(r.other.gate, i), r.trigger.mean_of(r.trigger.gate, i));
            std::printf("\n");
        }
}

// Attention on BOS and G1's gate during training, one pair (baseline, G1) of one seed.
void print_curves(const CopyRun& base, const CopyRun& g1) {
    std::printf("  during training (2 validation batches): alpha at non-trigger queries, baseline / G1; G1 gate at "
                "non-trigger / trigger queries\n");
    const auto step = base.curve_of("step"), ab = base.curve_of("alpha_other"), ag = g1.curve_of("alpha_other"),
               go = g1.curve_of("gate_other"), gt = g1.curve_of("gate_trigger");
    for (size_t k = 0; k < step.size(); ++k)
        std::printf("    step %5d: alpha %.3f / %.3f   gate %.3f / %.3f\n", int(step[k]), ab[k], ag[k], go[k], gt[k]);
}

// The head of layer l with the largest v[l·H + h]: with trigger.previous, the head that
// copies; with other.alpha, the head that parks non-trigger queries on BOS most.
int64_t top_head(const CopyReport& r, const std::vector<double>& v, int64_t l) {
    int64_t best = 0;
    for (int64_t h = 1; h < r.H; ++h)
        if (v[l * r.H + h] > v[l * r.H + best]) best = h;
    return best;
}

// One attention map of each model as text: the first 20 positions of the validation sequence
// with the most triggers there, layer 0, the head that parks most on BOS; one row per query,
// one column per key, darker characters for more attention. For G1 the row ends with the
// query's mean gate: near 0 where the head has nothing to do, open where it copies.
void print_attention_text(const CopyRun& base, const CopyRun& g1, const BigramBackcopy& data, const CopySetup& setup) {
    const int64_t T = std::min<int64_t>(20, setup.seq_len);
    const Batch batch = data.val_batch(0, setup.batch, setup.seq_len);
    const std::vector<int64_t> x = batch.inputs.to_vector<int64_t>();  // (B, seq_len)
    int64_t row = 0, most = -1;
    for (int64_t b = 0; b < setup.batch; ++b) {
        int64_t n = 0;
        for (int64_t t = 1; t < T; ++t) n += data.is_trigger(x[b * setup.seq_len + t]);
        if (n > most) most = n, row = b;
    }
    const Tensor ids = batch.inputs.narrow(0, row, 1).narrow(1, 0, T).contiguous();  // (1, T)
    struct Map {
        std::vector<float> probs, gate;  // (T, T) of one head; its (T) per-query gates, empty for the baseline
        int64_t head;
    };
    auto map_of = [&](const CopyRun& run) {
        NoGradGuard no_grad;
        LMCapture capture;
        run.model->forward(ids, Tensor(), nullptr, &capture);
        const AttentionCapture& c = capture.attention[0];
        Map m{{}, {}, top_head(run.report, run.report.other.alpha, 0)};
        m.probs = c.probs.select(0, 0).select(0, m.head).contiguous().to_vector<float>();  // (T, T)
        if (run.report.gated) m.gate = per_query_gate(c.gate).select(0, 0).select(0, m.head).contiguous().to_vector<float>();
        return m;
    };
    const Map b = map_of(base), g = map_of(g1);
    static const char shades[] = " .:-=+*#%@";  // attention 0 … 1 in tenths
    auto cells = [&](const Map& m, int64_t t) {
        std::string s;
        for (int64_t k = 0; k < T; ++k) s += shades[std::min(9, int(m.probs[t * T + k] * 10))];
        return s;
    };
    std::printf("  attention as text: layer 0, head %d (baseline) and %d (G1), one validation sequence, positions 0 .. %d;\n"
                "  a row per query, a column per key 0 .. %d, ' .:-=+*#%%@' for attention 0 .. 1; T: a trigger (must copy)\n",
                int(b.head), int(g.head), int(T - 1), int(T - 1));
    std::printf("  %-9s %-*s   %-*s   %s\n", "query", int(T), "baseline", int(T), "G1", "G1 gate");
    std::string keys;  // the key positions, last digit
    for (int64_t k = 0; k < T; ++k) keys += char('0' + k % 10);
    std::printf("  %-9s %s   %s\n", "key", keys.c_str(), keys.c_str());
    const std::vector<int64_t> tokens = ids.to_vector<int64_t>();
    for (int64_t t = 1; t < T; ++t) {
        const bool trig = data.is_trigger(tokens[t]);
        std::printf("  %3d %-5s %s   %s   %.3f\n", int(t), trig ? "T" : "", cells(b, t).c_str(), cells(g, t).c_str(),
                    g.gate[t]);
    }
}

void write_copy_results(const std::filesystem::path& dir, const CopySetup& setup, const BigramBackcopy& data,
                        const std::vector<CopyRun>& runs);

}  // namespace

std::vector<TrainingJob> copy_task_jobs(const CopySetup& setup, const std::string& scratch) {
    std::vector<TrainingJob> jobs;
    for (const CopyRunSpec& spec : run_specs(setup)) {
        const std::string checkpoint = scratch + "/" + setup.name + "_" + std::to_string(jobs.size()) + ".safetensors";
        jobs.push_back({checkpoint, [=] { return train_copy(setup, spec, checkpoint); }});
    }
    return jobs;
}

void copy_task_report(const CopySetup& setup, const std::vector<std::string>& results, bool demo,
                      const std::string& out) {
    const BigramBackcopy data(task_options(setup));
    std::printf("\n== (%s) Bigram-Backcopy: %s\n", setup.name.c_str(), task_description(setup, data).c_str());
    std::printf("   %s\n", setup.exclude_self ? "each query's own key hidden (query t sees keys 0 .. t-1; BOS sees itself)"
                                              : "the ordinary causal mask (query t sees keys 0 .. t)");
    std::printf("   d_model %d, %s, %s init, %s positions; %lld steps of %lld x %lld tokens, lr %.0e, warmup %lld, weight "
                "decay %.2g; baseline and G1 on the same seed and batches\n",
                int(setup.d_model), setup.ffn ? "SwiGLU FFN" : "attention only (no FFN)", setup.init.c_str(),
                setup.positions == "rope" ? "RoPE" : "learned", (long long)setup.steps, (long long)setup.batch,
                (long long)setup.seq_len, setup.lr, (long long)setup.warmup, setup.weight_decay);
    const std::vector<CopyRunSpec> specs = run_specs(setup);
    std::vector<CopyRun> runs;
    for (size_t i = 0; i < specs.size(); ++i) {
        CopyRun run;
        run.spec = specs[i];
        const json j = json::parse(results[i]);
        run.seconds = j["seconds"].get<double>(), run.curve = j["curve"];
        run.model = load_model(j["checkpoint"].get<std::string>());
        run.model->eval();
        run.report = measure_copy(*run.model, data, 8, setup.batch, setup.seq_len);
        std::vector<Tensor> ids;
        for (int64_t b = 0; b < 8; ++b) ids.push_back(data.val_batch(b, setup.batch, setup.seq_len).inputs);
        run.analysis = analyze(*run.model, cat(ids, 0));
        runs.push_back(std::move(run));
    }
    for (size_t i = 0; i < runs.size(); i += 2) {
        std::printf("\n%s model, seed %d, 8 validation batches:\n", runs[i].spec.shape.name().c_str(), int(runs[i].spec.seed));
        print_copy_table(runs[i], runs[i + 1], even_alpha(setup));
        print_curves(runs[i], runs[i + 1]);
        if (demo) {
            print_attention_text(runs[i], runs[i + 1], data, setup);
            continue;
        }
        print_per_head(runs[i]), print_per_head(runs[i + 1]);
        for (const CopyRun* run : {&runs[i], &runs[i + 1]})
            std::printf("  %s, analyze() over all queries:\n%s", run->spec.label().c_str(), run->analysis.table().c_str());
    }
    if (out.empty()) return;
    write_copy_results(out, setup, data, runs);
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
    write_text_file(file("alpha.svg"), svg_bar_chart(groups, bars, chart));
    write_text_file(file("per_layer.csv"),
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
        write_text_file(file(name), svg_line_chart(lines, chart_options(title + ": " + what, "training step", y_label,
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
            heatmap(l, copier);
            if (parker != copier) heatmap(l, parker);
            if (run.report.L == 1) break;
        }
    }
}

}  // namespace
