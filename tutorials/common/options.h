// options.h — the command line the experiment tutorials share (CLI11):
//
//   --quick     the whole experiment shortened: a smoke test of a minute or a few
//   --out DIR   write the results (JSON, CSV, SVG, PNG) to DIR. Without it nothing is
//               written, so a re-run never overwrites the committed results/ unless asked
//               to, e.g. --out tutorials/07_learning_rate/results
//   --replot DIR  draw DIR's pictures again from its results files (no training)
//   --jobs N    runs trained at the same time, one process each (where there are many)
//   --steps N, --seeds N   training steps per run, and seeds 1 … N at every setting
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace tutorial {

struct ExperimentOptions {
    bool quick = false;
    std::string out;  // empty: no files
    std::string replot;  // non-empty: redraw the pictures of this folder from its results files, no training
    int jobs = 2;     // two cores, one thread per run
};

// Adds --quick and --out; `results` names the tutorial's committed results folder in the help.
void add_quick_and_out(CLI::App& app, ExperimentOptions& options, const std::string& quick_help,
                       const std::string& results);
// Adds --replot DIR: the pictures of DIR drawn again from the results files a run wrote there
// (the same plotting code as the run; no training), e.g. after the plotting code changed.
void add_replot(CLI::App& app, ExperimentOptions& options);
// Adds --jobs, and for a sweep of many short runs --steps (per run) and --seeds (1 … N at
// every setting).
void add_sweep_options(CLI::App& app, ExperimentOptions& options, int64_t& steps, int64_t& seeds);

// Progress lines appear as they happen, even when standard output is a pipe.
void line_buffered_stdout();

}  // namespace tutorial
