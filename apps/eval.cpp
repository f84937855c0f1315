// gatedgrad eval — a model's mean next-token loss and perplexity: a checkpoint's on the
// validation text it was trained on, or any model's on --data's text in its own tokens; at its
// training length or a longer one with a RoPE rescaling (nn/rope.h).
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
#include "nn/rope.h"
#include "tensor/dtype.h"

using namespace gg;
using namespace gg::nn;

namespace {

struct EvalArgs {
    CLI::App* cmd = nullptr;
    DataArgs data;
    int64_t batches = 0;
    std::string rope_scaling = "none";
    double rope_factor = 0;
};

void add_eval(CLI::App& app, EvalArgs& a) {
    a.cmd = app.add_subcommand("eval", "validation loss and perplexity of a checkpoint, optionally at a longer context");
    add_data_options(a.cmd, a.data, 8);
    a.cmd->add_option("--batches", a.batches, "validation batches (default: as in training; 4 for a model trained "
                                              "elsewhere)")
        ->check(count(1, TrainConfigLimits::eval_batches));
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

int run_eval(EvalArgs& a) {
    const ModelOnText m = open_for_data(a.data, Workload::inference);
    const Autocast precision(m.opened.precision);
    const int64_t B = a.data.batch, T = a.data.seq_len;
    const std::string scaling_note = rescale_rope(a, m);
    const int64_t batches = a.batches > 0 ? a.batches : m.train ? m.train->eval_batches : 4;
    const Tensor windows = text_windows(m, a.data, batches);  // (n, L + 1)
    const int64_t n = windows.size(0), L = windows.size(1) - 1;
    NoGradGuard no_grad;
    double total = 0;
    for (int64_t i = 0; i < n; i += B) {
        const Tensor w = windows.narrow(0, i, std::min(B, n - i));
        total += m.model().forward(w.narrow(1, 0, L), w.narrow(1, 1, L)).loss.item() * double(w.size(0));
    }
    const double loss = total / double(n);
    const bool validation = a.data.data.empty();
    if (!std::isfinite(loss))
        throw std::runtime_error("the " + std::string(validation ? "validation " : "") + "loss is " +
                                 std::to_string(loss) + ": the model" + scaling_note +
                                 " gives non-finite logits on this text");
    const std::string& name = a.data.model.path();
    if (validation) {
        std::printf("%s: trained at %lld tokens, evaluated at %lld%s, %lld batches of %lld\n", name.c_str(),
                    (long long)m.train->seq_len, (long long)T, scaling_note.c_str(), (long long)(n / B), (long long)B);
        std::printf("validation loss %.4f nats/byte, %.3f bits/byte, perplexity %.3f\n", loss, bits(loss),
                    std::exp(loss));
        return 0;
    }
    const char* unit = m.opened.byte_tokens ? "byte" : "token";
    std::printf("%s: %lld sequences of %lld tokens (%s)%s, %s weights\n", name.c_str(), (long long)n, (long long)L,
                first_token_note(m, a.data).c_str(), scaling_note.c_str(),
                dtype_name(m.model().parameters().front().dtype()));
    std::printf("mean next-token loss %.4f nats/%s, perplexity %.3f\n", loss, unit, std::exp(loss));
    return 0;
}

}  // namespace

Command eval_command(CLI::App& app) { return make_command<EvalArgs>(app, add_eval, run_eval); }
