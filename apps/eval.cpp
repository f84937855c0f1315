// gatedgrad eval — the validation loss and perplexity of a checkpoint on the text it was trained
// on (or --data's), at its training length or a longer one with a RoPE rescaling (nn/rope.h);
// with --hf, a Hugging Face model's mean next-token loss on windows of --data's text.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

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
    add_data_options(a.cmd, a.data);
    a.cmd->add_option("--batches", a.batches, "validation batches (default: as in training)")
        ->check(count(1, TrainConfigLimits::eval_batches));
    a.cmd->add_option("--rope-scaling", a.rope_scaling, "RoPE rescaling for long contexts: none, pi, ntk, yarn")
        ->check(accepted_by(parse_rope_scaling))
        ->capture_default_str();
    a.cmd->add_option("--rope-factor", a.rope_factor, "scaling factor s ≥ 1 (default: --seq-len / training length)")
        ->check(bounded(1, 1e6));
}

int run_eval_hf(const DataArgs& a, int64_t batches) {
    const auto m = open_hf(a.hf, a.precision, a.device, true);
    const int64_t B = a.batch > 0 ? a.batch : 8, T = a.seq_len > 0 ? a.seq_len : 256;
    const Tensor windows = hf_windows(*m, a.data, B * (batches > 0 ? batches : 4), T);  // (n, T + 1)
    const int64_t n = windows.size(0), L = windows.size(1) - 1;
    NoGradGuard no_grad;
    double total = 0;
    for (int64_t i = 0; i < n; i += B) {
        const Tensor w = windows.narrow(0, i, std::min(B, n - i));
        const double loss = m->model->forward(w.narrow(1, 0, L), w.narrow(1, 1, L)).loss.item();
        total += loss * double(w.size(0));
    }
    const double loss = total / double(n);
    if (!std::isfinite(loss)) throw std::runtime_error("the loss is " + std::to_string(loss) + ": non-finite logits");
    std::printf("%s: %lld sequences of %lld tokens (%s), %s weights\n", a.hf.c_str(), (long long)n, (long long)L,
                m->tokenizer->prepended_token() ? "BOS first" : "no BOS: the text's own first token",
                dtype_name(m->model->parameters().front().dtype()));
    std::printf("mean next-token loss %.4f nats/token, perplexity %.3f\n", loss, std::exp(loss));
    return 0;
}

int run_eval(EvalArgs& a) {
    if (!a.data.hf.empty()) return run_eval_hf(a.data, a.batches);
    Checkpoint ck = open_for_data(a.data, Workload::inference);
    const int64_t B = a.data.batch, T = a.data.seq_len, L = ck.train.seq_len;
    const RopeScaling scaling = parse_rope_scaling(a.rope_scaling);
    std::string scaling_note;
    if (scaling != RopeScaling::none) {
        if (ck.model->config().positions != PositionEncoding::rope)
            throw UsageError("--rope-scaling needs a model with RoPE positions; this one has learned positions");
        RopeOptions rope = ck.model->config().attn.rope_options;  // keeps the trained base
        rope.scaling = scaling;
        rope.factor = a.rope_factor > 0 ? a.rope_factor : std::max(1.0, double(T) / double(L));
        rope.original_length = L;
        ck.model->set_rope_options(rope);
        char note[96];
        std::snprintf(note, sizeof note, " (RoPE scaling %s x%g)", rope_scaling_name(scaling), rope.factor);
        scaling_note = note;
    }
    const TextDataset data = validation_text(ck, a.data);
    const int64_t n = validation_batch_count(data, a.batches > 0 ? a.batches : ck.train.eval_batches, B, T);
    ck.model->eval();
    NoGradGuard no_grad;
    const Device device = device_of(*ck.model);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
        const Batch b = data.val_batch(i, B, T);
        total += ck.model->forward(b.inputs.to(device), b.targets.to(device)).loss.item();
    }
    const double loss = total / double(n);
    if (!std::isfinite(loss))
        throw std::runtime_error("the validation loss is " + std::to_string(loss) + ": the model" + scaling_note +
                                 " gives non-finite logits on this text");
    std::printf("%s: trained at %lld tokens, evaluated at %lld%s, %lld batches of %lld\n", a.data.ckpt.c_str(),
                (long long)L, (long long)T, scaling_note.c_str(), (long long)n, (long long)B);
    std::printf("validation loss %.4f nats/byte, %.3f bits/byte, perplexity %.3f\n", loss, bits(loss), std::exp(loss));
    return 0;
}

}  // namespace

Command eval_command(CLI::App& app) { return make_command<EvalArgs>(app, add_eval, run_eval); }
