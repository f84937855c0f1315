// plot.h — the analysis pictures (analysis.h): loss curves and per-layer bars as SVG,
// attention heat maps as PNG, and the numbers behind them as CSV.
//
// The SVG is written by hand, one element per line, so a reader can open the file and
// see the chart's parts: axes, grid, ticks, one <polyline> or <rect> per series, error
// bars, legend. Every chart reads on its own: the title wraps to fit, the legend sits
// beside the plot (never over data), and heat maps carry axes and a colour bar.
// Every file is written atomically (temp file + rename): a crashed run never leaves a
// half-written picture behind.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace gg::nn {

struct Series {
    std::string label;          // legend text; empty: not in the legend
    std::vector<double> x, y;   // same length; a non-finite y leaves a gap in the line
    std::string color;          // any SVG colour; empty: chart_color(index of the series)
    bool points = false;        // a circle at each (x, y) instead of a line
    double opacity = 1;
    std::vector<double> y_error;  // empty, or one half-width per point (say the std over seeds): error bars
};

struct BarSeries {
    std::string label;           // legend text
    std::vector<double> values;  // one per group
    std::string color;           // empty: chart_color(index of the series)
    std::vector<double> errors;  // empty, or one half-width per group (say the std over seeds): error bars
};

struct ChartOptions {
    std::string title;             // wrapped onto more lines when it is wider than the chart
    std::string x_label, y_label;  // with their units: "training step", "loss (nats/byte)"
    bool log_x = false;            // equal ratios equal distances (learning-rate sweeps); needs x > 0
    double reference_y = NAN;      // a dashed horizontal line (e.g. the sink threshold); NaN: none
    std::string reference_label;   // its entry in the legend
    int width = 720, height = 440;  // pixels
};

// The i-th colour of a fixed palette that stays readable on white.
std::string chart_color(size_t i);

// Lines (or points) over a shared pair of axes with ticks, grid, title and legend. A log
// x axis spans the data; its ticks are the data's x values when there are few of them.
std::string svg_line_chart(const std::vector<Series>& series, const ChartOptions& options);

// Side-by-side bars: for each group (say "layer 0"), one bar per series (say baseline, G1).
std::string svg_bar_chart(const std::vector<std::string>& groups, const std::vector<BarSeries>& series,
                          const ChartOptions& options);

struct HeatmapOptions {
    std::string title;                                  // wrapped to fit
    std::string x_label = "key position";               // the columns
    std::string y_label = "query position";             // the rows
    std::string value_label = "attention probability";  // the colour bar
};

// Where write_heatmap_png put the matrix in the picture, in pixels.
struct HeatmapLayout {
    int width, height;  // the whole picture
    int map_x, map_y;   // the top-left corner of cell (0, 0)
};

// matrix (rows, cols), values in [0, 1] (clamped), as a PNG: each cell a scale × scale
// square, 0 white and 1 dark blue, framed by the title, both axes with ticks at positions
// and their labels, and a colour bar from 0 to 1. The text is ASCII (stb_easy_font).
// Attention probabilities: rows are queries, columns keys.
HeatmapLayout write_heatmap_png(const std::string& path, const Tensor& matrix, int scale,
                                const HeatmapOptions& options = {});

// Text for SVG or HTML: & < > " written as entities.
std::string escape_xml(const std::string& text);

// A CSV table: a header line, then one line per row (each number in the shortest form that reads back exactly).
std::string csv_table(const std::vector<std::string>& header, const std::vector<std::vector<double>>& rows);

// Exponential moving average with bias correction (as TensorBoard smooths loss curves):
// s_t = w s_{t−1} + (1 − w) y_t, reported as s_t / (1 − w^t). Non-finite values are skipped.
std::vector<double> smooth(const std::vector<double>& y, double weight = 0.9);

// A long series cut to at most max_points for a chart: its points in max_points / 2 runs of
// consecutive points, each drawn as its lowest and its highest y in their order, so that a
// spike of one step in a million still shows. A series of max_points or fewer, or one with
// error bars, comes back as it is.
Series downsample(const Series& series, size_t max_points);

}  // namespace gg::nn
