// gatedgrad lens — the logit lens (nn/analysis/logit_lens.h): what each layer's residual stream
// would predict for the token after a prompt, through the model's own final norm and unembedding.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "cli.h"
#include "commands.h"
#include "model_options.h"
#include "nn/analysis/logit_lens.h"
#include "nn/untrusted.h"

using namespace gg;
using namespace gg::nn;

namespace {

struct LensArgs {
    CLI::App* cmd = nullptr;
    ModelArgs model;
    std::string prompt, target, bos = "auto";
    int64_t top_k = 5;
};

void add_lens(CLI::App& app, LensArgs& a) {
    a.cmd = app.add_subcommand("lens", "the logit lens: each layer's prediction for the token after a prompt, through "
                                       "the model's final norm and unembedding");
    a.cmd->footer("One row per layer: the top --top-k tokens at the prompt's last position with their probabilities,\n"
                  "and with --target that token's rank (0: the most probable) and probability. The last layer's\n"
                  "row is the model's own prediction.");
    add_model_options(a.cmd, a.model);
    a.cmd->add_option("--prompt", a.prompt, "the text to read")->required();
    a.cmd->add_option("--top-k", a.top_k, "tokens to list per layer")->check(count(1, 100))->capture_default_str();
    a.cmd->add_option("--target", a.target, "a token (text that is one token) whose rank to follow")->type_name("TOKEN");
    a.cmd->add_option("--bos", a.bos, "before the prompt: auto (what the tokenizer's post-processor puts), always, never")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
}

// A token as text between quotes, escaped; its id where the model has no tokenizer.
std::string quoted(const OpenedModel& m, int64_t id) {
    const bool known = m.tokenizer && id < m.tokenizer->vocab_size();
    return known ? "'" + token_text(m, id) + "'" : token_text(m, id);
}

int run_lens(const LensArgs& a) {
    const OpenedModel m = a.model.open();
    const std::vector<int64_t> ids = prompt_ids(m, a.prompt, a.bos, Workload::inference);
    const LMConfig& c = m.model->config();
    if (a.top_k > c.vocab_size)
        throw UsageError("--top-k " + std::to_string(a.top_k) + " is more than the " + std::to_string(c.vocab_size) +
                         " tokens of this model");
    std::optional<int64_t> target;
    if (!a.target.empty()) {
        const std::vector<int64_t> token = m.tokenizer->encode(a.target);
        if (token.size() != 1)
            throw UsageError("--target: '" + printable(a.target) + "' is " + std::to_string(token.size()) +
                             " tokens for this model's tokenizer, not one");
        target = token[0];
    }
    const Autocast precision(m.precision);
    const std::vector<LensLayer> lens = logit_lens(*m.model, ids, a.top_k, target);
    std::printf("%s: %zu tokens, the lens at the last one, %s\n", a.model.path().c_str(), ids.size(),
                quoted(m, ids.back()).c_str());
    std::printf("layer  %s%s\n", target ? ("target " + quoted(m, *target) + " rank, p;  ").c_str() : "",
                ("top " + std::to_string(a.top_k) + " (p)").c_str());
    for (const LensLayer& row : lens) {
        std::string line;
        char cell[64];
        if (target) {
            std::snprintf(cell, sizeof cell, "%6lld %.4f;  ", (long long)row.target_rank, row.target_prob);
            line += cell;
        }
        for (size_t i = 0; i < row.top_ids.size(); ++i) {
            std::snprintf(cell, sizeof cell, " (%.3f)", row.top_probs[i]);
            line += (i ? "  " : "") + quoted(m, row.top_ids[i]) + cell;
        }
        std::printf("%5lld  %s\n", (long long)row.layer, line.c_str());
    }
    return 0;
}

}  // namespace

Command lens_command(CLI::App& app) { return make_command<LensArgs>(app, add_lens, run_lens); }
