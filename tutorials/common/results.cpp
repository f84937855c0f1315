// results.cpp — the helpers of results.h.
#include "common/results.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tutorial {

void write_json(const std::filesystem::path& path, const json& j, int indent) {
    gg::nn::write_file_atomically(path.string(), j.dump(indent) + "\n");
}

namespace {

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::vector<std::string> split(const std::string& line, char sep) {
    std::vector<std::string> fields{""};
    for (char c : line) {
        if (c == sep) fields.emplace_back();
        else fields.back().push_back(c);
    }
    return fields;
}

}  // namespace

nlohmann::json read_json(const std::filesystem::path& path) {
    try {
        return nlohmann::json::parse(read_text(path));
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(path.string() + ": " + e.what());
    }
}

size_t CsvTable::column(const std::string& name) const {
    for (size_t i = 0; i < header.size(); ++i)
        if (header[i] == name) return i;
    throw std::runtime_error("no column " + name);
}

CsvTable read_csv_table(const std::filesystem::path& path) {
    std::istringstream in(read_text(path));
    CsvTable table;
    std::string line;
    if (!std::getline(in, line)) throw std::runtime_error(path.string() + ": empty");
    table.header = split(line, ',');
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        std::vector<double>& row = table.rows.emplace_back();
        for (const std::string& field : split(line, ',')) {
            double x = NAN;
            const bool negative = !field.empty() && field[0] == '-';
            const char* first = field.data() + negative;  // from_chars takes no sign of "-nan"
            const auto [end, error] = std::from_chars(first, field.data() + field.size(), x);
            if (error != std::errc() || end != field.data() + field.size())
                throw std::runtime_error(path.string() + ": not a number: " + field);
            row.push_back(negative ? -x : x);
        }
        if (row.size() != table.header.size()) throw std::runtime_error(path.string() + ": a row of the wrong length");
    }
    return table;
}

std::string csv_line(const std::vector<std::string>& fields) {
    std::string line;
    for (size_t i = 0; i < fields.size(); ++i) {
        if (i) line.push_back(',');
        const std::string& f = fields[i];
        if (f.find_first_of(",\"") == std::string::npos) {
            line.append(f);
            continue;
        }
        line.push_back('"');
        for (char c : f) {
            if (c == '"') line.push_back('"');  // a quote inside a quoted field is doubled
            line.push_back(c);
        }
        line.push_back('"');
    }
    return line + "\n";
}

std::string format_or_dash(const char* format, double x) {
    if (std::isnan(x)) return "-";
    char text[64];
    std::snprintf(text, sizeof text, format, x);
    return text;
}

std::string growth_text(double x) { return format_or_dash(std::abs(x) < 1e4 ? "%.1f" : "%.2g", x); }

double json_number(const nlohmann::json& j) { return j.is_null() ? NAN : j.get<double>(); }

std::vector<double> json_numbers(const nlohmann::json& j) {
    std::vector<double> out;
    for (const nlohmann::json& x : j) out.push_back(json_number(x));
    return out;
}

std::vector<json> parse_all(const std::vector<std::string>& texts) {
    std::vector<json> out;
    for (const std::string& t : texts) out.push_back(json::parse(t));
    return out;
}

std::vector<double> values_of(const std::vector<json>& runs, const std::string& key) {
    std::vector<double> v;
    for (const json& run : runs) v.push_back(json_number(run[key]));
    return v;
}

double mean_range(const std::vector<double>& v, int64_t from, int64_t to) {
    double s = 0;
    for (int64_t t = from; t < to; ++t) s += v[t];
    return s / double(to - from);
}

double average(const std::vector<double>& v) { return v.empty() ? NAN : mean_range(v, 0, std::ssize(v)); }

Spread spread(const std::vector<double>& v) {
    if (v.empty()) return {};
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return {average(v), (*hi - *lo) / 2};
}

std::string pair_color(size_t i, bool light) {
    static const char* dark[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"};
    static const char* pale[] = {"#9ecae1", "#f4a582", "#a1d99b", "#fdd0a2"};
    return light ? pale[i % 4] : dark[i % 4];
}

gg::nn::ChartOptions chart_options(const std::string& title, const std::string& x_label, const std::string& y_label,
                                   double reference_y, const std::string& reference_label) {
    gg::nn::ChartOptions options;
    options.title = title, options.x_label = x_label, options.y_label = y_label;
    options.reference_y = reference_y, options.reference_label = reference_label;
    return options;
}

gg::nn::Series line(const std::string& label, const std::vector<double>& x, const std::vector<double>& y,
                    const std::string& color) {
    return {label, x, y, color, false, 1.0, {}};
}

}  // namespace tutorial
