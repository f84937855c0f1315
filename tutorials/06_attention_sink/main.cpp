// Tutorial 06 — the attention sink (article 4.1) and what the G1 gate does to it.
//
// The question. Softmax weights sum to one, so a head with nothing useful to read must
// still put its attention somewhere; trained LMs park it on the first token, which is
// always there and always the same: an attention sink. With a sigmoid gate on the head's
// output (G1: σ(x W_g) ⊙ softmax(QKᵀ/√dk) V) the head can close instead. Does the sink go?
//
// (a) copy_task.cpp — Bigram-Backcopy (nn/train/synthetic.h): only the queries at trigger
//     tokens need to attend (one token back, to copy it); every other query has nothing
//     useful to read. We train a baseline and a G1 model on the same batches and measure,
//     separately for the two kinds of queries, where attention goes (BOS, the query itself,
//     the previous token) and, for G1, the gate. Two setups: (a1) the standard causal mask,
//     where idle heads park on their own token, and (a2) each query's own key hidden, where
//     they sink on BOS.
// (b) natural_text.cpp — the tiny preset on natural text: the per-layer report of analyze()
//     (SPEC §3) for baseline and G1, at the preset's learning rate and at 3× it; then
//     StreamingLLM's test: a sliding window that hides BOS from late queries.
//
// Run from the repository root (OMP_NUM_THREADS=1: the two parts run side by side):
//   ./build/tutorials/tutorial_06_attention_sink           the full run (both parts), 10 minutes
//   ./build/tutorials/tutorial_06_attention_sink --demo    part (a2), one small model pair, about a minute
//   ./build/tutorials/tutorial_06_attention_sink --quick   both parts, shortened (a smoke test)
// --out DIR writes the results there (the committed ones: --out tutorials/06_attention_sink/results).
// --help lists the rest (--part, --one-process, part (a)'s training options).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "attention_sink.h"
#include "common/options.h"
#include "common/processes.h"
#include "common/timing.h"

using namespace gg;
using namespace tutorial;

// Both parts score a prediction the same way: its cross-entropy in nats, and whether the
// most likely token is the right one. In double precision, from the logits of one row.
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

int main(int argc, char** argv) {
    ExperimentOptions options;
    bool demo = false, one_process = false;
    std::string part = "ab";
    CLI::App app{"Tutorial 06: the attention sink, baseline vs G1 (Bigram-Backcopy and natural text)"};
    app.add_flag("--demo", demo, "part (a2) only: one 1-layer 4-head pair, half the steps, a short table (about a minute)");
    add_quick_and_out(app, options, "both parts, shortened (a smoke test)", "tutorials/06_attention_sink/results");
    app.add_option("--part", part, "which parts to run: a, b or ab")->check(CLI::IsMember({"a", "b", "ab"}));
    app.add_flag("--one-process", one_process, "run part (b) after (a), not beside it in a second process");
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
    line_buffered_stdout();

    // Part (a)'s setups: (a1), (a2) or both, shortened by --demo or --quick, then overridden.
    if (demo && !app.count("--a-setup")) variant = "a2";  // the setup with a sink to show
    std::vector<CopySetup> setups;
    if (variant != "a2") setups.push_back(own_token_visible());
    if (variant != "a1") setups.push_back(own_token_hidden());
    for (CopySetup& s : setups) {
        if (demo) s.points = 1, s.models = {"1x4"}, s.steps /= 2;
        if (options.quick) s.steps = 150, s.points = 3;
        if (*o_steps) s.steps = over.steps;
        if (*o_lr) s.lr = over.lr;
        if (*o_wd) s.weight_decay = over.weight_decay;
        if (*o_batch) s.batch = over.batch;
        if (*o_len) s.seq_len = over.seq_len;
        if (*o_models) s.models = over.models;
        if (*o_pos) s.positions = over.positions;
        if (*o_ffn) s.ffn = over.ffn;
    }
    if (demo) part = "a";

    const auto start = Clock::now();
    const std::function<void()> part_a = [&] {
        for (const CopySetup& setup : setups) copy_task(setup, demo, options.out);
    };
    const std::function<void()> part_b = [&] { natural_text(options.quick, options.out); };
    const bool a = part.find('a') != std::string::npos, b = part.find('b') != std::string::npos;
    if (a && b && !one_process) {
        run_side_by_side({part_a, part_b});  // two cores: (b)'s output is printed after (a)'s
    } else {
        if (a) part_a();
        if (b) part_b();
    }
    std::printf("\ntotal time %.0f s\n", seconds_since(start));
    return 0;
}
