// copy_task_report.cpp — tutorial 06, part (a): the report of a setup, once its trainings have
// run (copy_task.h): the parent loads each model and measures it, then prints per model shape
// and seed the baseline-vs-G1 table, the curves of the training, and per head or (--demo) the
// attention as text.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/attention_maps.h"
#include "copy_task.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace {

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

}  // namespace

void copy_task_report(const CopySetup& setup, const std::vector<std::string>& results, bool demo,
                      const std::string& out) {
    const BigramBackcopy data(task_options(setup));
    std::printf("\n== (%s) Bigram-Backcopy: %s\n", setup.name.c_str(), task_description(setup, data).c_str());
    std::printf("   %s\n", setup.exclude_self ? "each query's own key hidden (query t sees keys 0 .. t-1; BOS sees itself)"
                                              : "the ordinary causal mask (query t sees keys 0 .. t)");
    std::printf("   d_model %d, %s, %s init, %s positions; %lld steps of %lld x %lld tokens, lr %.0e, warmup %lld, weight "
                "decay %.2g; baseline and G1 on the same seed and batches\n",
                int(setup.d_model), setup.ffn ? "SwiGLU FFN" : "attention only (no FFN)", lm_init_name(setup.init),
                setup.positions == PositionEncoding::rope ? "RoPE" : "learned", (long long)setup.steps,
                (long long)setup.batch, (long long)setup.seq_len, setup.lr, (long long)setup.warmup, setup.weight_decay);
    const std::vector<CopyRunSpec> specs = run_specs(setup);
    std::vector<CopyRun> runs;
    for (size_t i = 0; i < specs.size(); ++i) {
        CopyRun run;
        run.spec = specs[i];
        const json j = json::parse(results[i]);
        run.seconds = j["seconds"].get<double>(), run.curve = j["curve"];
        run.model = load_checkpoint(j["checkpoint"].get<std::string>());
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
