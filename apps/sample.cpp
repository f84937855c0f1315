// gatedgrad sample — a trained model continues a prompt, byte by byte, attending to a window of
// its training length; a Hugging Face model (--hf) continues it in its own tokens.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "model_options.h"
#include "nn/text/bytes.h"
#include "nn/train/data.h"
#include "nn/train/trainer.h"
#include "nn/transformer.h"
#include "tensor/random.h"

using namespace gg;
using namespace gg::nn;

namespace {

struct SampleArgs {
    CLI::App* cmd = nullptr;
    std::string ckpt, hf, precision = "auto", prompt, prompt_file, device = "cpu";
    SampleOptions options;
    uint64_t seed = 1;
};

void add_sample(CLI::App& app, SampleArgs& a) {
    a.cmd = app.add_subcommand("sample", "continue a prompt with a trained model");
    CLI::Option* ckpt = a.cmd->add_option("--ckpt", a.ckpt, "a checkpoint written by train")->type_name("FILE");
    add_hf_options(a.cmd, a.hf, a.precision)->excludes(ckpt);
    CLI::Option* prompt = a.cmd->add_option("--prompt", a.prompt, "text to continue (after BOS)");
    a.cmd->add_option("--prompt-file", a.prompt_file, "continue the text of this file")
        ->type_name("FILE")
        ->excludes(prompt);
    a.cmd->add_option("--tokens", a.options.max_new_tokens, "bytes to generate")
        ->check(count(0, kMaxSeqLen))
        ->capture_default_str();
    a.cmd->add_option("--temperature", a.options.temperature, "softmax temperature (0: greedy)")
        ->check(kNonNegative)
        ->capture_default_str();
    a.cmd->add_option("--top-k", a.options.top_k, "draw from the K likeliest bytes (0: all)")
        ->check(count(0, LMConfigLimits::vocab_size))
        ->capture_default_str();
    a.cmd->add_option("--context", a.options.context,
                      "each new byte attends to the last N tokens, itself included (default: the model's training "
                      "length); the prompt is cut to its last N - 1 bytes")
        ->check(count(2, kMaxSeqLen));
    a.cmd->add_option("--seed", a.seed, "sampling seed")->check(kSeed)->capture_default_str();
    add_device_option(a.cmd, a.device);
}

// A Hugging Face model continues the prompt in its own tokens; the whole prompt goes in.
int run_sample_hf(const SampleArgs& a, const std::string& text_in) {
    const auto m = open_hf(a.hf, a.precision, a.device, true);
    const std::vector<int64_t> prompt = m->tokenizer->encode_for_model(text_in);
    if (prompt.empty()) throw UsageError("--hf needs a prompt: this tokenizer puts no token before an empty text");
    Generator gen(a.seed);
    std::vector<int64_t> tokens;
    try {
        tokens = generate(*m->model, prompt, a.options, gen);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    const std::string text = text_in + m->tokenizer->decode(tokens);
    std::printf("%s%s", text.c_str(), !text.empty() && text.back() == '\n' ? "" : "\n");
    return 0;
}

int run_sample(const SampleArgs& a) {
    const Device device = parse_device(a.device);
    const std::string text_in = a.prompt_file.empty() ? a.prompt : read_file(a.prompt_file, uint64_t(1) << 30);
    if (!a.hf.empty()) return run_sample_hf(a, text_in);
    if (a.ckpt.empty()) throw UsageError("give --ckpt FILE (a checkpoint of train) or --hf DIR (a Hugging Face model)");
    const auto model = load_model(a.ckpt);
    model->to(device);
    // The model was trained on windows of max_len tokens, BOS first, so by default it attends
    // to as many: the prompt's last max_len - 1 bytes, then a window sliding over what it
    // writes. Time and memory per byte stay fixed; a whole 100 KB prompt took minutes.
    SampleOptions options = a.options;
    if (options.context == 0) options.context = model->config().max_len;
    const auto keep = size_t(options.context - 1);
    std::vector<int64_t> prompt{kBOS};
    if (text_in.size() > keep)
        std::fprintf(stderr, "gatedgrad: note: the prompt is %zu bytes; the model attends to %lld tokens, so only its "
                             "last %zu bytes are given to it (--context)\n",
                     text_in.size(), (long long)options.context, keep);
    for (int64_t id : encode_bytes(text_in.substr(text_in.size() > keep ? text_in.size() - keep : 0)))
        prompt.push_back(id);
    Generator gen(a.seed);
    std::vector<int64_t> tokens;
    try {
        tokens = generate(*model, prompt, options, gen);
    } catch (const std::invalid_argument& e) {  // --tokens beyond the model's positions, or its memory
        throw UsageError(e.what());
    }
    const std::string text = text_in + decode_bytes(tokens);
    std::printf("%s%s", text.c_str(), !text.empty() && text.back() == '\n' ? "" : "\n");
    return 0;
}

}  // namespace

Command sample_command(CLI::App& app) { return make_command<SampleArgs>(app, add_sample, run_sample); }
