// gatedgrad sample — a model continues a prompt token by token (a byte model byte by byte),
// attending to a window of its training length, and draws only ids its tokenizer can write.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "cli.h"
#include "commands.h"
#include "model_options.h"
#include "nn/train/trainer.h"
#include "nn/transformer.h"
#include "tensor/random.h"

using namespace gg;
using namespace gg::nn;

namespace {

struct SampleArgs {
    CLI::App* cmd = nullptr;
    ModelArgs model;
    std::string prompt, prompt_file;
    SampleOptions options;
    uint64_t seed = 1;
};

void add_sample(CLI::App& app, SampleArgs& a) {
    a.cmd = app.add_subcommand("sample", "continue a prompt with a trained model");
    add_model_options(a.cmd, a.model);
    CLI::Option* prompt = a.cmd->add_option("--prompt", a.prompt, "text to continue (after BOS, where the tokenizer puts one)");
    a.cmd->add_option("--prompt-file", a.prompt_file, "continue the text of this file")
        ->type_name("FILE")
        ->excludes(prompt);
    a.cmd->add_option("--tokens", a.options.max_new_tokens, "tokens to generate (bytes, for a byte model)")
        ->check(count(0, kMaxSeqLen))
        ->capture_default_str();
    a.cmd->add_option("--temperature", a.options.temperature, "softmax temperature (0: greedy)")
        ->check(kNonNegative)
        ->capture_default_str();
    a.cmd->add_option("--top-k", a.options.top_k, "draw from the K likeliest tokens (0: all)")
        ->check(count(0, LMConfigLimits::vocab_size))
        ->capture_default_str();
    a.cmd->add_option("--context", a.options.context,
                      "each new token attends to the last N tokens, itself included (default: the model's training "
                      "length); the prompt is cut to its last N - 1 tokens")
        ->check(count(2, kMaxSeqLen));
    a.cmd->add_option("--seed", a.seed, "sampling seed")->check(kSeed)->capture_default_str();
}

int run_sample(const SampleArgs& a) {
    const std::string text_in = a.prompt_file.empty() ? a.prompt : read_file(a.prompt_file, uint64_t(1) << 30);
    const OpenedModel m = a.model.open();
    if (!m.tokenizer)
        throw std::runtime_error(a.model.path() + ": no tokenizer to turn the prompt into this model's ids");
    const Autocast precision(m.precision);
    // The model was trained on windows of max_len tokens (a model from elsewhere: its
    // max_position_embeddings), so by default it attends to as many: the prompt's last
    // max_len - 1 tokens after the tokenizer's BOS, then a window sliding over what it writes.
    // Time and memory per token stay fixed; a whole 100 KB prompt took minutes.
    SampleOptions options = a.options;
    if (options.context == 0) options.context = m.model->config().max_len;
    options.can_draw = decodable_ids(m);
    const auto keep = size_t(options.context - 1);
    const std::vector<int64_t> text = m.tokenizer->encode(text_in);
    std::vector<int64_t> prompt;
    if (const auto bos = m.tokenizer->prepended_token()) prompt.push_back(*bos);
    if (text.size() > keep) {
        const char* unit = m.byte_tokens ? "bytes" : "tokens";
        std::fprintf(stderr, "gatedgrad: note: the prompt is %zu %s; the model attends to %lld tokens, so only its "
                             "last %zu %s are given to it (--context)\n",
                     text.size(), unit, (long long)options.context, keep, unit);
    }
    prompt.insert(prompt.end(), text.end() - std::ptrdiff_t(std::min(keep, text.size())), text.end());
    if (prompt.empty()) throw UsageError("this model needs a prompt: its tokenizer puts no token before an empty text");
    Generator gen(a.seed);
    std::vector<int64_t> tokens;
    try {
        tokens = generate(*m.model, prompt, options, gen);
    } catch (const std::invalid_argument& e) {  // --tokens beyond the model's positions, or its memory
        throw UsageError(e.what());
    }
    const std::string out = text_in + m.tokenizer->decode(tokens);
    std::printf("%s%s", out.c_str(), !out.empty() && out.back() == '\n' ? "" : "\n");
    return 0;
}

}  // namespace

Command sample_command(CLI::App& app) { return make_command<SampleArgs>(app, add_sample, run_sample); }
