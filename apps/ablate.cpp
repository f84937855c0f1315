// gatedgrad ablate — the paper's interventions on a model (nn/analysis/interventions.h): the loss
// on a text before and after forcing the gates, removing or replacing the first token, ablating
// heads or clamping the massive activations, and the sink report of the model so changed.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "cli.h"
#include "commands.h"
#include "model_options.h"
#include "nn/analysis/activation_cache.h"
#include "nn/analysis/analysis.h"
#include "nn/analysis/interventions.h"

using namespace gg;
using namespace gg::nn;

namespace {

struct AblateArgs {
    CLI::App* cmd = nullptr;
    DataArgs data;
    int64_t batches = 1;
    double threshold = 0.3, force_gate = 1;
    bool drop_first = false, mean_heads = false;
    std::string swap_first, clamp_massive;
    std::vector<std::string> zero_heads;
    std::vector<int64_t> layers;
    MassiveThreshold massive;
};

void add_ablate(CLI::App& app, AblateArgs& a) {
    a.cmd = app.add_subcommand("ablate", "the loss on a text before and after an intervention (forced gates, the "
                                         "first token removed or replaced, heads ablated, massive activations clamped), "
                                         "and the sink report after it");
    a.cmd->footer(
        "The loss is the mean over each sequence's tokens 2 .. T (those with the first token and one more before\n"
        "them), so that --drop-first and --swap-first score the same tokens before and after. --layers picks\n"
        "where --force-gate and --clamp-massive act (default: every layer). Interventions combine.");
    add_data_options(a.cmd, a.data, 4);
    a.cmd->add_option("--batches", a.batches, "batches of the text to run")
        ->check(count(1, TrainConfigLimits::eval_batches))
        ->capture_default_str();
    a.cmd->add_option("--force-gate", a.force_gate, "every gate value set to V (1: the gate open, the paper's ablation)")
        ->check(bounded(0, 1))
        ->type_name("V");
    a.cmd->add_flag("--drop-first", a.drop_first, "remove each sequence's first token");
    a.cmd->add_option("--swap-first", a.swap_first, "replace each sequence's first token by TOKEN (text that is one token)")
        ->type_name("TOKEN");
    a.cmd->add_option("--zero-heads", a.zero_heads, "heads whose output (before W_O) is set to 0, e.g. 0.3,1.0")
        ->delimiter(',')
        ->type_name("L.H,...");
    a.cmd->add_flag("--mean-heads", a.mean_heads, "with --zero-heads: set them to their mean over the batch and "
                                                  "positions instead (mean ablation)");
    a.cmd->add_option("--clamp-massive", a.clamp_massive, "massive residual values (Sun et al. 2024) set to zero or to "
                                                          "their mean over the batch")
        ->check(CLI::IsMember({"zero", "mean"}));
    a.cmd->add_option("--massive-min", a.massive.min_abs, "a massive value's least |h|")
        ->check(kNonNegative)
        ->capture_default_str();
    a.cmd->add_option("--massive-ratio", a.massive.ratio, "a massive value's least |h| over the median |h|")
        ->check(kNonNegative)
        ->capture_default_str();
    a.cmd->add_option("--layers", a.layers, "where --force-gate and --clamp-massive act, e.g. 0,13")
        ->delimiter(',')
        ->check(CLI::NonNegativeNumber);
    a.cmd->add_option("--threshold", a.threshold, "the sink report's threshold")->check(bounded(0, 1))->capture_default_str();
}

// "L.H" → (L, H), L inside the model.
std::pair<int64_t, int64_t> parse_head(const std::string& text, int64_t n_layers) {
    const size_t dot = text.find('.');
    int64_t layer = -1, head = -1;
    try {
        size_t used_l = 0, used_h = 0;
        if (dot != std::string::npos) {
            layer = std::stoll(text.substr(0, dot), &used_l);
            head = std::stoll(text.substr(dot + 1), &used_h);
        }
        if (dot == std::string::npos || used_l != dot || used_h != text.size() - dot - 1) layer = -1;
    } catch (const std::exception&) {
        layer = -1;
    }
    if (layer < 0 || layer >= n_layers || head < 0)
        throw UsageError("--zero-heads: '" + one_line(text) + "' is not LAYER.HEAD with a layer in [0, " +
                         std::to_string(n_layers) + ")");
    return {layer, head};
}

// The edits the options ask for, and what they are in words.
std::pair<Hooks, std::string> interventions(const AblateArgs& a, const LMConfig& c) {
    for (const int64_t l : a.layers)
        if (l >= c.n_layers)
            throw UsageError("--layers: layer " + std::to_string(l) + " is outside [0, " + std::to_string(c.n_layers) + ")");
    if (a.mean_heads && a.zero_heads.empty()) throw UsageError("--mean-heads needs --zero-heads: the heads to ablate");
    Hooks hooks;
    std::string what;
    const auto said = [&what](const std::string& part) { what += (what.empty() ? "" : ", ") + part; };
    if (a.cmd->count("--force-gate")) {
        if (!c.attn.gated()) throw UsageError("--force-gate: this model's attention has no gate");
        force_gate(hooks, a.force_gate, a.layers);
        char text[64];
        std::snprintf(text, sizeof text, "every gate set to %g", a.force_gate);
        said(text);
    }
    if (!a.zero_heads.empty()) {
        std::vector<std::pair<int64_t, int64_t>> heads;
        for (const std::string& h : a.zero_heads) heads.push_back(parse_head(h, c.n_layers));
        try {
            ablate_heads(hooks, heads, a.mean_heads ? Ablation::mean : Ablation::zero, c.attn.n_heads);
        } catch (const std::invalid_argument& e) {
            throw UsageError(std::string("--zero-heads: ") + e.what());
        }
        said(std::to_string(heads.size()) + " heads " + (a.mean_heads ? "mean-ablated" : "zeroed"));
    }
    if (!a.clamp_massive.empty()) {
        clamp_massive(hooks, a.clamp_massive == "zero" ? Ablation::zero : Ablation::mean, a.massive, a.layers);
        said("massive activations set to " + std::string(a.clamp_massive == "zero" ? "0" : "their mean"));
    }
    return {hooks, what};
}

// The mean loss of the targets (N, n) from the last n positions of the model's logits on
// inputs (N, T), --batch sequences per forward pass.
double loss_of(const GatedTransformerLM& model, const Tensor& inputs, const Tensor& targets, const Hooks& hooks,
               int64_t batch) {
    const int64_t N = inputs.size(0), T = inputs.size(1), n = targets.size(1);
    double total = 0;
    for (int64_t start = 0; start < N; start += batch) {
        const int64_t rows = std::min(batch, N - start);
        const Tensor logits = run_with_hooks(model, inputs.narrow(0, start, rows), hooks).logits;  // (rows, T, V)
        total += cross_entropy(logits.narrow(1, T - n, n), targets.narrow(0, start, rows)).item() * double(rows);
    }
    return total / double(N);
}

int run_ablate(AblateArgs& a) {
    if (a.drop_first && !a.swap_first.empty()) throw UsageError("--drop-first and --swap-first: give one of them");
    const ModelOnText m = open_for_data(a.data, Workload::analysis, a.batches);  // the report runs every batch at once
    const GatedTransformerLM& model = m.model();
    auto [hooks, what] = interventions(a, model.config());
    const Tensor windows = text_windows(m, a.data, a.batches);  // (N, T + 1)
    const int64_t T1 = windows.size(1);
    if (T1 < 3)
        throw UsageError("the text gives " + std::to_string(T1) + " tokens: need 3, a first, one before and one scored");
    const Tensor inputs = windows.narrow(1, 0, T1 - 1), targets = windows.narrow(1, 2, T1 - 2);  // (N, T), (N, T − 1)
    Tensor changed = inputs;
    if (a.drop_first) {
        changed = windows.narrow(1, 1, T1 - 2);
        what = "the first token removed" + std::string(what.empty() ? "" : ", ") + what;
    }
    if (!a.swap_first.empty()) {
        if (!m.opened.tokenizer) throw UsageError("--swap-first: this model has no tokenizer to read TOKEN with");
        const std::vector<int64_t> token = m.opened.tokenizer->encode(a.swap_first);
        if (token.size() != 1)
            throw UsageError("--swap-first: '" + one_line(a.swap_first) + "' is " + std::to_string(token.size()) +
                             " tokens for this model's tokenizer, not one");
        changed = inputs.clone();
        changed.narrow(1, 0, 1).fill_(double(token[0]));
        what = "the first token replaced by id " + std::to_string(token[0]) + (what.empty() ? "" : ", ") + what;
    }
    if (what.empty())
        throw UsageError("ablate: give an intervention: --force-gate, --drop-first, --swap-first, --zero-heads or "
                         "--clamp-massive");
    const Autocast precision(m.opened.precision);
    NoGradGuard no_grad;
    const double before = loss_of(model, inputs, targets, {}, a.data.batch);
    const double after = loss_of(model, changed, targets, hooks, a.data.batch);
    const ModelAnalysis report = analyze(model, changed, a.threshold, {}, hooks);
    std::printf("%s: attention %s, %lld sequences of %lld tokens (%s), %lld tokens scored each\n",
                a.data.model.path().c_str(), gate_position_name(model.config().attn.gate).c_str(),
                (long long)inputs.size(0), (long long)inputs.size(1), first_token_note(m, a.data).c_str(),
                (long long)targets.size(1));
    std::printf("intervention: %s\nsink report after it:\n%s", what.c_str(), report.table().c_str());
    std::printf("before: loss %.4f\n", before);
    std::printf("after: loss %.4f\n", after);
    return 0;
}

}  // namespace

Command ablate_command(CLI::App& app) { return make_command<AblateArgs>(app, add_ablate, run_ablate); }
