// options.cpp — the shared options of options.h.
#include "common/options.h"

#include <cstdio>

namespace tutorial {

void add_quick_and_out(CLI::App& app, ExperimentOptions& options, const std::string& quick_help,
                       const std::string& results) {
    app.add_flag("--quick", options.quick, quick_help);
    app.add_option("--out", options.out, "write the results to this folder (none without it; committed: " + results + ")");
}

void add_replot(CLI::App& app, ExperimentOptions& options) {
    app.add_option("--replot", options.replot,
                   "draw the pictures of this results folder again from its JSON/CSV files, without training")
        ->check(CLI::ExistingDirectory);
}

void add_sweep_options(CLI::App& app, ExperimentOptions& options, int64_t& steps, int64_t& seeds) {
    app.add_option("--jobs", options.jobs, "runs trained at the same time (one process each)")->check(CLI::PositiveNumber);
    app.add_option("--steps", steps, "training steps per run")->check(CLI::PositiveNumber);
    app.add_option("--seeds", seeds, "seeds 1 ... N at every setting")->check(CLI::PositiveNumber);
}

void line_buffered_stdout() { std::setvbuf(stdout, nullptr, _IOLBF, 0); }

}  // namespace tutorial
