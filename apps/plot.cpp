// gatedgrad plot — the loss curves of one or more runs in one SVG: the training loss, smoothed,
// and the validation points, read from each run's log.jsonl (nn/analysis/training_log.h).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "nn/analysis/plot.h"
#include "nn/files.h"
#include "nn/analysis/report.h"
#include "nn/analysis/training_log.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

struct PlotArgs {
    CLI::App* cmd = nullptr;
    std::vector<std::string> logs, labels;
    std::string out, title = "loss";
};

void add_plot(CLI::App& app, PlotArgs& a) {
    a.cmd = app.add_subcommand("plot", "loss curves of one or more runs (training loss, smoothed, and validation points)");
    a.cmd->add_option("LOG", a.logs, "log.jsonl files written by train")->type_name("LOG.jsonl")->required();
    a.cmd->add_option("--out", a.out, "the SVG to write")->type_name("FILE.svg")->required();
    a.cmd->add_option("--labels", a.labels, "one legend label per log, comma-separated (default: the run's folder)")
        ->delimiter(',')
        ->type_name("A,B,...");
    a.cmd->add_option("--title", a.title, "chart title")->capture_default_str();
}

int run_plot(const PlotArgs& a) {
    if (!a.labels.empty() && a.labels.size() != a.logs.size())
        throw UsageError("--labels has " + std::to_string(a.labels.size()) + " labels for " + std::to_string(a.logs.size()) +
                         " logs");
    std::vector<Series> series;
    size_t longest = 0;  // steps in the longest log
    for (size_t i = 0; i < a.logs.size(); ++i) {
        const TrainingLog log = read_training_log(a.logs[i]);
        if (!log.warning.empty()) std::fprintf(stderr, "gatedgrad: warning: %s\n", log.warning.c_str());
        const fs::path path(a.logs[i]);
        std::string label = !a.labels.empty() ? a.labels[i] : path.parent_path().filename().string();
        if (label.empty()) label = path.stem().string();
        longest = std::max(longest, log.step.size());
        for (Series& s : loss_series(log, label, chart_color(i))) series.push_back(downsample(s, ReportOptions{}.max_points));
    }
    ChartOptions chart;
    chart.title = a.title;
    chart.x_label = "training step";
    chart.y_label = "loss (nats/byte)";
    write_file_atomically(a.out, svg_line_chart(series, chart));
    const size_t points = ReportOptions{}.max_points;
    std::printf("wrote %s (%zu run%s%s)\n", a.out.c_str(), a.logs.size(), a.logs.size() == 1 ? "" : "s",
                longest <= points ? ""
                                  : ("; " + std::to_string(longest) + " steps drawn as " + std::to_string(points) +
                                     " points a curve, each run of consecutive steps as its lowest and highest value")
                                        .c_str());
    return 0;
}

}  // namespace

Command plot_command(CLI::App& app) { return make_command<PlotArgs>(app, add_plot, run_plot); }
