// results.h — writing an experiment's results: JSON files, CSV lines with text fields,
// the numbers of a table, and the pieces of a chart the tutorials repeat.
//
// Pictures and plain numeric CSV come from the library (nn/analysis/plot.h); this adds what
// only the experiments need. JSON has no NaN: nlohmann writes NaN as null, and
// json_number() reads null back as NaN.
#pragma once
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nn/analysis/plot.h"
#include "nn/files.h"

namespace tutorial {

using json = nlohmann::ordered_json;  // keys stay in the order they were written

// Writes j to `path` (atomically, as every file of plot.h), indented, with a final newline.
void write_json(const std::filesystem::path& path, const json& j, int indent = 2);

// Reading back what a run wrote, so that its pictures can be drawn again without training
// (--replot): the whole of a JSON file; a numeric CSV of csv_table (nn/analysis/plot.h), whose
// numbers read back exactly ("nan" as NaN). Both throw std::runtime_error naming the path.
nlohmann::json read_json(const std::filesystem::path& path);
struct CsvTable {
    std::vector<std::string> header;
    std::vector<std::vector<double>> rows;
    size_t column(const std::string& name) const;  // its index; throws when there is none
};
CsvTable read_csv_table(const std::filesystem::path& path);

// One CSV line; a field holding a comma or a quote is quoted (RFC 4180), as our variant
// names have commas.
std::string csv_line(const std::vector<std::string>& fields);

// x printed with `format`, or "-" when x is NaN (a column that does not apply to a row).
std::string format_or_dash(const char* format, double x);

// A number that may have grown by orders of magnitude (an attention logit at a too-high rate),
// as a reader takes it in: 12.3, or 4.6e+07 once it has.
std::string growth_text(double x);

double json_number(const nlohmann::json& j);                // null → NaN
std::vector<double> json_numbers(const nlohmann::json& j);  // an array, null → NaN

// What the children of run_in_processes (processes.h) returned, one JSON text per run, parsed;
// and one measure of those runs, runs[i][key] for each i (null → NaN).
std::vector<json> parse_all(const std::vector<std::string>& texts);
std::vector<double> values_of(const std::vector<json>& runs, const std::string& key);

// The mean of v[from, to), and of all of v (NaN when empty).
double mean_range(const std::vector<double>& v, int64_t from, int64_t to);
double average(const std::vector<double>& v);

// The mean over seeds and half their range: the "± spread" of a table.
struct Spread {
    double mean = NAN, half_range = NAN;
};
Spread spread(const std::vector<double>& v);

// Colour i of a few dark/light pairs: G1 dark, baseline light, so a legend tells them apart.
std::string pair_color(size_t i, bool light);

// A chart's options (nn/analysis/plot.h) in one call; a dashed line at reference_y unless it is NaN.
gg::nn::ChartOptions chart_options(const std::string& title, const std::string& x_label, const std::string& y_label,
                                   double reference_y = NAN, const std::string& reference_label = "");

// A line of a chart, in one call.
gg::nn::Series line(const std::string& label, const std::vector<double>& x, const std::vector<double>& y,
                    const std::string& color = "");

}  // namespace tutorial
