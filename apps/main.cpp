// gatedgrad — the command line over the library: train a byte-level gated-attention LM,
// evaluate it (also past its training length with a RoPE scaling), sample from it, measure
// its attention sink (nn/analysis/analysis.h), plot loss curves, and put all of it on one
// page (nn/analysis/report.h).
//
//   gatedgrad train --preset tiny --attn g1 --out runs/g1
//   gatedgrad train --preset tiny --data input.txt --out runs/mine     (any text: see train --help)
//   gatedgrad eval  --ckpt runs/g1/model.safetensors --seq-len 256 --rope-scaling yarn
//   gatedgrad sample --ckpt runs/g1/model.safetensors --prompt "The "
//   gatedgrad sink  --ckpt runs/g1/model.safetensors --png runs/g1/attention
//   gatedgrad plot  --out loss.svg runs/baseline/log.jsonl runs/g1/log.jsonl
//   gatedgrad report runs/baseline runs/g1 --out compare.html
//   gatedgrad tokenize --tokenizer Qwen3-0.6B --text "Hello"   (a Hugging Face tokenizer.json's ids)
//
// Exit codes: 0 done; 1 the work failed (a missing corpus, a corrupt checkpoint, a loss
// that went NaN, a run folder in use); 2 the command line is wrong (unknown flag, bad value,
// a model too big for this machine); 130 or 143, train stopped by SIGINT or SIGTERM after
// saving a checkpoint (128 + the signal, as a shell reports it). Each is one line on stderr,
// "gatedgrad: <message>", with anything unprintable escaped: it may quote a file someone
// else wrote.
//
// This file registers the commands and runs the one asked for; each command is its own file
// (commands.h), and what they share is in cli.h and model_options.h.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "distributed/process_group.h"

namespace {

// ---------------------------------------------------------------- typos

// The fewest one-character insertions, deletions, substitutions and swaps of neighbours
// that turn a into b (the optimal-string-alignment distance: "trian" is 1 from "train").
size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));  // d[i][j]: a[0, i) → b[0, j)
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
        for (size_t j = 1; j <= b.size(); ++j) {
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

// "; did you mean X?" for the name nearest to `typed`, when near enough to be a typo (at
// most a third of its letters wrong, dashes aside); else "".
std::string did_you_mean(const std::string& typed, const std::vector<std::string>& names) {
    const size_t letters = typed.size() - std::min(typed.find_first_not_of('-'), typed.size());
    size_t best_distance = std::max<size_t>(1, letters / 3) + 1;  // the first distance too far
    std::string best;
    for (const std::string& name : names)
        if (const size_t d = edit_distance(typed, name); d < best_distance) best = name, best_distance = d;
    return best.empty() ? "" : "; did you mean " + best + "?";
}

// After CLI11 found arguments it did not expect: a suggestion for the first unknown option.
std::string unknown_option_hint(CLI::App& app, int argc, char** argv) {
    CLI::App* cmd = argv[1][0] == '-' ? &app : app.get_subcommand(argv[1]);
    std::vector<std::string> names;
    for (const CLI::Option* opt : cmd->get_options()) {
        for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
        for (const std::string& n : opt->get_snames()) names.push_back("-" + n);
    }
    for (int i = cmd == &app ? 1 : 2; i < argc; ++i) {
        const std::string arg = argv[i], name = arg.substr(0, arg.find('='));
        if (name.size() < 2 || name == "--" || name[0] != '-' || std::isdigit(static_cast<unsigned char>(name[1])) ||
            name[1] == '.')
            continue;  // a value (perhaps a negative number), or the end of the options
        if (!cmd->get_option_no_throw(name)) return did_you_mean(name, names);
    }
    return "";
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"gatedgrad: train and study byte-level language models with gated attention", "gatedgrad"};
    app.require_subcommand(1);
    app.footer("Exit codes: 0 done, 1 the work failed, 2 a bad command line, 130/143 train stopped by SIGINT/SIGTERM\n"
               "(after saving a checkpoint).");
    const std::vector<Command> registered{train_command(app),  eval_command(app),   sample_command(app),
                                          sink_command(app),   plot_command(app),   report_command(app),
                                          export_command(app), tokenize_command(app), import_hf_command(app),
                                          logits_command(app), ablate_command(app), lens_command(app)};

    // Without this, "gatedgrad trian" reads as "A subcommand is required".
    const std::vector<std::string> commands{"train", "eval",     "sample",    "sink",  "plot",
                                            "report", "export", "tokenize", "import-hf", "logits",
                                            "ablate", "lens"};
    if (argc < 2 || (argv[1][0] != '-' && std::find(commands.begin(), commands.end(), argv[1]) == commands.end())) {
        const std::string hint = argc < 2 ? "" : did_you_mean(argv[1], commands);
        std::fprintf(stderr, "gatedgrad: %s%s (see --help)\n",
                     argc < 2 ? "no command given" : ("unknown command '" + std::string(argv[1]) + "'").c_str(),
                     hint.empty() ? "; the commands are train, eval, sample, sink, plot, report, export, tokenize, "
                                                 "import-hf and logits"
                                  : hint.c_str());
        return 2;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (gg::dist::launcher_rank() > 0) return e.get_exit_code() ? 2 : 0;  // every rank parsed the same: rank 0 says it
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
        const std::string hint = dynamic_cast<const CLI::ExtrasError*>(&e) ? unknown_option_hint(app, argc, argv) : "";
        std::fprintf(stderr, "gatedgrad: %s%s (see --help)\n", one_line(e.what()).c_str(), hint.c_str());
        return 2;
    }
    Job job;
    for (const Command& command : registered)
        if (command.cmd->parsed()) return run_command(command.run, job);
    return 2;  // not reached: parse() refuses a command line without exactly one command
}
