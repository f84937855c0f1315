// The commands of gatedgrad, one file each: <command>_command registers the command's options
// on the program (its add_<command>) and returns the subcommand with what runs it once parsed
// (its run_<command>). main.cpp registers them all and runs the one on the command line.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <type_traits>

struct Job;  // cli.h

struct Command {
    CLI::App* cmd;
    std::function<int(Job&)> run;
};

// A command from its Args struct, its add_ and its run_: the Args live as long as the command.
// A run_ that takes the Job too (train: it starts one under mpirun) is given it.
template <class Args, class Add, class Run>
Command make_command(CLI::App& app, Add add, Run run) {
    auto a = std::make_shared<Args>();
    add(app, *a);
    return {a->cmd, [a, run](Job& job) {
                if constexpr (std::is_invocable_v<Run, Args&, Job&>)
                    return run(*a, job);
                else
                    return run(*a);
            }};
}

Command train_command(CLI::App& app);      // train.cpp
Command eval_command(CLI::App& app);       // eval.cpp
Command sample_command(CLI::App& app);     // sample.cpp
Command sink_command(CLI::App& app);       // sink.cpp
Command plot_command(CLI::App& app);       // plot.cpp
Command report_command(CLI::App& app);     // report.cpp
Command export_command(CLI::App& app);     // export.cpp
Command tokenize_command(CLI::App& app);   // tokenize.cpp
Command import_hf_command(CLI::App& app);  // import_hf.cpp
Command logits_command(CLI::App& app);     // logits.cpp
Command ablate_command(CLI::App& app);     // ablate.cpp
Command lens_command(CLI::App& app);       // lens.cpp
