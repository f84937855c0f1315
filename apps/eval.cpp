// gatedgrad eval — a model's mean next-token loss and perplexity: a checkpoint's on the
// validation text it was trained on, at its training length or a longer one with a RoPE
// rescaling (nn/rope.h); any model's on every token of --data's text, in strided windows as
// Hugging Face's perplexity guide scores a text, or one token at a time through a rolling KV
// cache that drops old positions, keeping the first ones or not (nn/analysis/text_loss.h).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "cli.h"
#include "commands.h"
#include "model_options.h"
#include "nn/analysis/text_loss.h"
#include "nn/rope.h"
#include "tensor/dtype.h"

using namespace gg;
using namespace gg::nn;

namespace {

struct EvalArgs {
    CLI::App* cmd = nullptr;
    DataArgs data;
    int64_t batches = 0, stride = 0;
    int64_t window_cache = 0, keep_first = 0;
    std::string rope_scaling = "none";
    double rope_factor = 0;
};

void add_eval(CLI::App& app, EvalArgs& a) {
    a.cmd = app.add_subcommand("eval", "validation loss and perplexity of a checkpoint, optionally at a longer context; "
                                       "with --data, any model's loss over every token of a text");
    add_data_options(a.cmd, a.data, 8);
    a.cmd->get_option("--seq-len")
        ->description("tokens per sequence (default: the training length); with --data, tokens per window (default: "
                      "the model's context, as much of it as memory allows)");
    a.cmd->get_option("--batch")->description("sequences per batch (default: the training batch; with --data and a "
                                              "model trained elsewhere, 8 windows)");
    a.cmd->add_option("--batches", a.batches, "validation batches (default: as in training); --data's text is "
                                              "scored whole")
        ->check(count(1, TrainConfigLimits::eval_batches));
    a.cmd->add_option("--stride", a.stride, "with --data: tokens of text from one window's start to the next "
                                            "(default: half a window); each token is scored once, after at least "
                                            "window - stride tokens of the text where it has them")
        ->check(count(1, kMaxSeqLen));
    a.cmd->add_option("--window-cache", a.window_cache, "with --data: read the text one token at a time through KV "
                                                        "caches of this many positions that drop the oldest, and "
                                                        "print the loss by position past the cache")
        ->check(count(2, kMaxSeqLen));
    a.cmd->add_option("--keep-first", a.keep_first, "with --window-cache: the first tokens, never dropped "
                                                    "(StreamingLLM's sink tokens); default 0")
        ->check(count(1, kMaxSeqLen));
    a.cmd->add_option("--rope-scaling", a.rope_scaling, "RoPE rescaling for long contexts: none, pi, ntk, yarn")
        ->check(accepted_by(parse_rope_scaling))
        ->capture_default_str();
    a.cmd->add_option("--rope-factor", a.rope_factor, "scaling factor s ≥ 1 (default: --seq-len / training length)")
        ->check(bounded(1, 1e6));
}

// --rope-scaling on the model (the training length of a model from elsewhere: its
// max_position_embeddings); the note the header carries, empty without one.
std::string rescale_rope(const EvalArgs& a, const ModelOnText& m) {
    const RopeScaling scaling = parse_rope_scaling(a.rope_scaling);
    if (scaling == RopeScaling::none) return "";
    GatedTransformerLM& model = m.model();
    if (model.config().positions != PositionEncoding::rope)
        throw UsageError("--rope-scaling needs a model with RoPE positions; this one has learned positions");
    const int64_t L = m.train ? m.train->seq_len : model.config().max_len;
    RopeOptions rope = model.config().attn.rope_options;  // keeps the trained base
    rope.scaling = scaling;
    rope.factor = a.rope_factor > 0 ? a.rope_factor : std::max(1.0, double(a.data.seq_len) / double(L));
    rope.original_length = L;
    model.set_rope_options(rope);
    char note[96];
    std::snprintf(note, sizeof note, " (RoPE scaling %s x%g)", rope_scaling_name(scaling), rope.factor);
    return note;
}

// The validation split of the text a checkpoint was trained on, in its training batches.
int run_eval_validation(EvalArgs& a) {
    if (a.stride > 0 || a.window_cache > 0 || a.keep_first > 0)
        throw UsageError(std::string(a.stride > 0 ? "--stride" : a.window_cache > 0 ? "--window-cache" : "--keep-first") +
                         " is for --data's text; the validation split is read in batches");
    const ModelOnText m = open_for_data(a.data, Workload::inference);
    const Autocast precision(m.opened.precision);
    const int64_t B = a.data.batch, T = a.data.seq_len;
    const std::string scaling_note = rescale_rope(a, m);
    const Tensor windows = text_windows(m, a.data, a.batches > 0 ? a.batches : m.train ? m.train->eval_batches : 1);
    const int64_t n = windows.size(0);  // (n, T + 1)
    NoGradGuard no_grad;
    double total = 0;
    for (int64_t i = 0; i < n; i += B) {
        const Tensor w = windows.narrow(0, i, B);
        total += m.model().forward(w.narrow(1, 0, T), w.narrow(1, 1, T)).loss.item();
    }
    const double loss = total / double(n / B);
    if (!std::isfinite(loss))
        throw std::runtime_error("the validation loss is " + std::to_string(loss) + ": the model" + scaling_note +
                                 " gives non-finite logits on this text");
    std::printf("%s: trained at %lld tokens, evaluated at %lld%s, %lld batches of %lld\n", a.data.model.path().c_str(),
                (long long)m.train->seq_len, (long long)T, scaling_note.c_str(), (long long)(n / B), (long long)B);
    std::printf("validation loss %.4f nats/byte, %.3f bits/byte, perplexity %.3f\n", loss, bits(loss), std::exp(loss));
    return 0;
}

// The window --data's text is read in and the windows per forward pass: --seq-len or the model's
// context; as many windows a pass as --batch asks and memory allows; and where one window
// does not fit, the longest that does, said in `note` with where the window's length comes from.
// A text shorter than the window is one window of the text: memory is counted for that.
struct WindowPlan {
    int64_t window = 0, batch = 1;
    std::string note;
};

WindowPlan plan_windows(const EvalArgs& a, const ModelOnText& m, int64_t text_tokens) {
    const LMConfig& c = m.model().config();
    const bool asked = a.data.seq_len > 0;
    WindowPlan p{asked ? a.data.seq_len : c.max_len, 1, asked ? "--seq-len" : "the model's context"};
    if (c.positions == PositionEncoding::learned && p.window - 1 > c.max_len)
        throw UsageError("--seq-len " + std::to_string(p.window) + " reads " + std::to_string(p.window - 1) +
                         " positions, more than the " + std::to_string(c.max_len) + " learned ones of this model");
    const MemoryLimit limit = memory_limit();
    const auto fits = [&](int64_t batch, int64_t window) {  // a window's last token is only a target
        const int64_t positions = std::max<int64_t>(1, std::min(window, text_tokens) - 1);
        return estimate_memory(c, Workload::inference, batch, positions).total() <= double(limit.bytes);
    };
    p.batch = std::max<int64_t>(1, a.data.batch > 0 ? a.data.batch : m.train ? m.train->batch_size : a.data.default_batch);
    while (p.batch > 1 && !fits(p.batch, p.window)) p.batch = (p.batch + 1) / 2;
    if (fits(1, p.window)) return p;
    if (asked) {  // the user's window: refused with the memory check's own words
        try {
            check_memory(c, Workload::inference, 1, p.window - 1);
        } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
        }
    }
    int64_t low = 1, high = std::min(p.window, text_tokens);  // the longest window that fits lies in [low, high)
    while (high - low > 1) {
        const int64_t mid = (low + high) / 2;
        (fits(1, mid) ? low : high) = mid;
    }
    if (low < 2) check_memory(c, Workload::inference, 1, 1);  // not even 2 tokens: its error says why
    char note[160];
    std::snprintf(note, sizeof note, "%s of %lld, cut by memory: %.1f GiB available (%s)", p.note.c_str(),
                  (long long)p.window, double(limit.bytes) / double(1 << 30), limit.source);
    p.window = low, p.note = note;
    return p;
}

// --data's text one token at a time through rolling caches (nn/analysis/text_loss.h): the
// loss by the position each token is read at, in bands that double from the cache's length,
// since what a dropped sink costs shows once positions pass it.
int run_eval_rolling(const EvalArgs& a, const ModelOnText& m, const std::vector<int64_t>& ids, size_t files) {
    const std::pair<bool, const char*> window_options[] = {{a.stride > 0, "--stride"},
                                                            {a.data.seq_len > 0, "--seq-len"},
                                                            {a.data.batch > 0, "--batch"},
                                                            {a.rope_scaling != "none", "--rope-scaling"}};
    for (const auto& [given, name] : window_options)
        if (given) throw UsageError(std::string(name) + " is for windows; --window-cache reads the text one token at a time");
    if (a.keep_first >= a.window_cache)
        throw UsageError("--keep-first " + std::to_string(a.keep_first) + " must be less than --window-cache " +
                         std::to_string(a.window_cache) + ": the cache also holds the newest tokens");
    const std::optional<int64_t> bos = bos_token(m.opened, a.data.bos);
    std::vector<double> nll;
    try {
        nll = rolling_cache_loss(m.model(), ids, {.cache = a.window_cache, .keep_first = a.keep_first, .bos = bos});
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string(e.what()) + " (--data)");
    }
    const char* unit = m.opened.byte_tokens ? "byte" : "token";
    std::printf("%s: scored %zu of the text's %zu tokens (%zu file%s) one at a time through KV caches of %lld "
                "positions, keeping the first %lld; %s; %s weights\n",
                a.data.model.path().c_str(), nll.size(), ids.size(), files, files == 1 ? "" : "s",
                (long long)a.window_cache, (long long)a.keep_first, first_token_note(m, a.data).c_str(),
                dtype_name(m.model().parameters().front().dtype()));
    std::printf("%-16s %8s %10s\n", "positions", "tokens", "loss");
    double total = 0;
    for (int64_t begin = 1, end = a.window_cache; begin <= int64_t(nll.size()); begin = end, end *= 2) {
        const int64_t last = std::min<int64_t>(end, int64_t(nll.size()) + 1);  // band [begin, last)
        double band = 0;
        for (int64_t p = begin; p < last; ++p) band += nll[size_t(p - 1)];
        total += band;
        const std::string range = std::to_string(begin) + "-" + std::to_string(last - 1);
        std::printf("%-16s %8lld %10.4f%s\n", range.c_str(), (long long)(last - begin), band / double(last - begin),
                    begin == 1 ? "  (nothing dropped yet)" : "");
    }
    const double loss = total / double(nll.size());
    if (!std::isfinite(loss))
        throw std::runtime_error("the loss is " + std::to_string(loss) + ": the model gives non-finite logits on this text");
    std::printf("mean next-token loss %.4f nats/%s, perplexity %.3f\n", loss, unit, std::exp(loss));
    return 0;
}

// Every token of --data's text, once, in strided windows (nn/analysis/text_loss.h).
int run_eval_text(EvalArgs& a) {
    if (a.batches > 0)
        throw UsageError("--batches counts validation batches; --data's text is scored whole (see --stride)");
    const ModelOnText m = open_on_text(a.data);
    const Autocast precision(m.opened.precision);
    size_t files = 0;
    const std::vector<int64_t> ids = text_ids(m.opened, a.data.data, &files);
    if (a.window_cache > 0) return run_eval_rolling(a, m, ids, files);
    if (a.keep_first > 0) throw UsageError("--keep-first keeps tokens in --window-cache's rolling caches; give both");
    const std::optional<int64_t> bos = bos_token(m.opened, a.data.bos);
    const WindowPlan plan = plan_windows(a, m, int64_t(ids.size()) + (bos ? 1 : 0));
    if (a.stride > plan.window - (bos ? 1 : 0))
        throw UsageError("--stride " + std::to_string(a.stride) + " is longer than the " +
                         std::to_string(plan.window - (bos ? 1 : 0)) + " tokens of text in a window of " +
                         std::to_string(plan.window) + ": tokens between windows would never be scored");
    a.data.seq_len = plan.window;  // --rope-factor's default: the window over the training length
    const std::string scaling_note = rescale_rope(a, m);
    TextLoss r;
    try {
        r = text_loss(m.model(), ids, {.window = plan.window, .stride = a.stride, .bos = bos, .batch = plan.batch});
    } catch (const std::invalid_argument& e) {  // a text too short to score
        throw UsageError(std::string(e.what()) + " (--data)");
    }
    if (!std::isfinite(r.loss))
        throw std::runtime_error("the loss is " + std::to_string(r.loss) + ": the model" + scaling_note +
                                 " gives non-finite logits on this text");
    std::printf("%s: scored %lld of the text's %lld tokens (%zu file%s, nothing between them) in %lld window%s of up to "
                "%lld tokens (%s) every %lld; %s%s; %s weights\n",
                a.data.model.path().c_str(), (long long)r.scored, (long long)r.tokens, files, files == 1 ? "" : "s",
                (long long)r.windows, r.windows == 1 ? "" : "s", (long long)plan.window, plan.note.c_str(), (long long)r.stride,
                first_token_note(m, a.data).c_str(), scaling_note.c_str(),
                dtype_name(m.model().parameters().front().dtype()));
    std::printf("mean next-token loss %.4f nats/%s, perplexity %.3f\n", r.loss, m.opened.byte_tokens ? "byte" : "token",
                std::exp(r.loss));
    return 0;
}

int run_eval(EvalArgs& a) { return a.data.data.empty() ? run_eval_validation(a) : run_eval_text(a); }

}  // namespace

Command eval_command(CLI::App& app) { return make_command<EvalArgs>(app, add_eval, run_eval); }
