#include "nn/analysis/plot.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <stdexcept>

// The one place the stb_image_write implementation is compiled. STATIC keeps its symbols
// inside this file, so it never clashes with another copy (Debian also ships libstb.so).
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace gg::nn {

// ---------------------------------------------------------------- files

namespace {

// The data goes to "<path>.tmp.<pid>", is flushed to disk, then renamed over `path`.
void write_file_atomically(const std::string& path, const std::string& bytes) {
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    auto fail = [&](const char* what) {
        const std::string reason = std::strerror(errno);
        std::remove(tmp.c_str());
        throw std::runtime_error("cannot write " + path + ": " + what + ": " + reason);
    };
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) fail("open");
    const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fflush(f) == 0 &&
                         fsync(fileno(f)) == 0;
    if (std::fclose(f) != 0 || !written) fail("write");
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("rename");
}

}  // namespace

void write_text_file(const std::string& path, const std::string& text) { write_file_atomically(path, text); }

std::string csv_table(const std::vector<std::string>& header, const std::vector<std::vector<double>>& rows) {
    std::string out;
    auto cell = [&](size_t i, const std::string& text) {
        if (i > 0) out += ',';
        out += text;
    };
    for (size_t i = 0; i < header.size(); ++i) cell(i, header[i]);
    out += '\n';
    char number[32];
    for (const auto& row : rows) {
        if (row.size() != header.size())
            throw std::invalid_argument("csv_table: a row has " + std::to_string(row.size()) + " values for " +
                                        std::to_string(header.size()) + " columns");
        for (size_t i = 0; i < row.size(); ++i) {
            cell(i, std::string(number, std::to_chars(number, number + sizeof number, row[i]).ptr));
        }
        out += '\n';
    }
    return out;
}

std::vector<double> smooth(const std::vector<double>& y, double weight) {
    std::vector<double> out(y.size(), NAN);
    double s = 0, correction = 1;
    for (size_t t = 0; t < y.size(); ++t) {
        if (!std::isfinite(y[t])) continue;
        s = weight * s + (1 - weight) * y[t];
        correction *= weight;
        out[t] = s / (1 - correction);
    }
    return out;
}

// ---------------------------------------------------------------- heat map

void write_heatmap_png(const std::string& path, const Tensor& matrix, int scale) {
    if (matrix.dim() != 2 || matrix.numel() == 0 || scale < 1 || scale > 64)
        throw std::invalid_argument("write_heatmap_png: " + path + ": need a non-empty (rows, cols) matrix and scale in [1, 64], got " +
                                    shape_str(matrix.shape()) + " and scale " + std::to_string(scale));
    const int64_t rows = matrix.size(0), cols = matrix.size(1);
    const std::vector<double> values = matrix.to(Device::CPU).to_vector<double>();
    // White → light blue → dark blue: three stops, linear between them.
    const double stops[3][3] = {{255, 255, 255}, {107, 174, 214}, {8, 48, 107}};
    const int64_t width = cols * scale, height = rows * scale;
    std::vector<unsigned char> rgb(width * height * 3);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const double v = values[r * cols + c];
            if (std::isnan(v)) throw std::invalid_argument("write_heatmap_png: " + path + ": the matrix holds NaN");
            const double u = 2 * std::clamp(v, 0.0, 1.0);  // position along the two segments
            const int seg = u < 1 ? 0 : 1;
            unsigned char pixel[3];
            for (int k = 0; k < 3; ++k)
                pixel[k] = static_cast<unsigned char>(std::lround(stops[seg][k] + (u - seg) * (stops[seg + 1][k] - stops[seg][k])));
            for (int64_t y = r * scale; y < (r + 1) * scale; ++y)
                for (int64_t x = c * scale; x < (c + 1) * scale; ++x) std::memcpy(&rgb[(y * width + x) * 3], pixel, 3);
        }
    std::string png;
    auto append = [](void* context, void* data, int size) {
        static_cast<std::string*>(context)->append(static_cast<const char*>(data), size);
    };
    if (!stbi_write_png_to_func(append, &png, int(width), int(height), 3, rgb.data(), int(width * 3)))
        throw std::runtime_error("write_heatmap_png: " + path + ": PNG encoding failed");
    write_file_atomically(path, png);
}

// ---------------------------------------------------------------- SVG charts

std::string chart_color(size_t i) {
    static const char* palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
    return palette[i % std::size(palette)];
}

namespace {

template <class... Args>
std::string format(const char* fmt, Args... args) {
    char buffer[256];
    std::snprintf(buffer, sizeof buffer, fmt, args...);
    return buffer;
}

std::string escape(const std::string& text) {
    std::string out;
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string tick_label(double v) { return format("%.4g", v); }

// One axis: its data range after rounding out to whole ticks, and where the ticks are.
struct Axis {
    double lo = 0, hi = 1;
    bool log = false;
    std::vector<double> ticks;
    double fraction(double v) const {  // 0 at lo, 1 at hi
        return log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    }
};

// About five ticks 1, 2 or 5 × 10^k apart, the axis widened to the ticks around [lo, hi].
Axis linear_axis(double lo, double hi) {
    if (!(hi > lo)) {  // one value (or none): give it some room
        const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
        lo -= pad, hi += pad;
    }
    const double raw = (hi - lo) / 5, magnitude = std::pow(10, std::floor(std::log10(raw))), r = raw / magnitude;
    const double step = (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * magnitude;
    const auto first = static_cast<int64_t>(std::floor(lo / step + 1e-9)), last = static_cast<int64_t>(std::ceil(hi / step - 1e-9));
    Axis a{first * step, last * step, false, {}};
    for (int64_t k = first; k <= last; ++k) a.ticks.push_back(k * step);
    return a;
}

// Whole decades around [lo, hi]; over two decades or fewer, 2 and 5 between them too.
Axis log_axis(double lo, double hi) {
    const int first = int(std::floor(std::log10(lo))), last = std::max(first + 1, int(std::ceil(std::log10(hi))));
    Axis a{std::pow(10, first), std::pow(10, last), true, {}};
    const std::vector<double> mantissas = last - first <= 2 ? std::vector<double>{1, 2, 5} : std::vector<double>{1};
    for (int d = first; d <= last; ++d)
        for (double m : mantissas)
            if (m * std::pow(10, d) <= a.hi * (1 + 1e-9)) a.ticks.push_back(m * std::pow(10, d));
    return a;
}

struct LegendEntry {
    std::string label, color;
    enum class Mark { line, point, bar } mark;
};

// The plotting box of a chart and the axes that map data into it.
struct Frame {
    ChartOptions options;
    double left, right, top, bottom;  // pixels
    Axis x, y;

    explicit Frame(const ChartOptions& o)
        : options(o), left(72), right(o.width - 24), top(o.title.empty() ? 20 : 44), bottom(o.height - 56) {}
    double px(double v) const { return left + x.fraction(v) * (right - left); }
    double py(double v) const { return bottom - y.fraction(v) * (bottom - top); }

    // <svg>, the white page, the title, the grid with its tick labels, then the axes on top.
    // With numeric_x false the x axis has no ticks (the bar chart labels its groups itself).
    std::string open(bool numeric_x) const {
        const ChartOptions& o = options;
        std::string s = format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                               "font-family=\"sans-serif\" font-size=\"12\">\n",
                               o.width, o.height, o.width, o.height);
        s += format("<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", o.width, o.height);
        if (!o.title.empty())
            s += format("<text x=\"%.1f\" y=\"26\" text-anchor=\"middle\" font-size=\"15\">", (left + right) / 2) +
                 escape(o.title) + "</text>\n";
        auto line = [](double x1, double y1, double x2, double y2, const char* color) {
            return format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n", x1, y1, x2, y2, color);
        };
        for (double t : y.ticks) {
            s += line(left, py(t), right, py(t), "#e4e4e4");
            s += format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", left - 6, py(t) + 4) + tick_label(t) + "</text>\n";
        }
        if (numeric_x)
            for (double t : x.ticks) {
                s += line(px(t), top, px(t), bottom, "#e4e4e4");
                s += format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", px(t), bottom + 18) + tick_label(t) + "</text>\n";
            }
        s += line(left, top, left, bottom, "black") + line(left, bottom, right, bottom, "black");
        if (!o.y_label.empty())
            s += format("<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\">", (top + bottom) / 2) +
                 escape(o.y_label) + "</text>\n";
        if (!o.x_label.empty())
            s += format("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", (left + right) / 2, o.height - 12) +
                 escape(o.x_label) + "</text>\n";
        return s;
    }

    std::string reference_line() const {
        if (std::isnan(options.reference_y)) return "";
        const double yy = py(options.reference_y);
        return format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-dasharray=\"6 4\"/>\n",
                      left, yy, right, yy) +
               format("<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">", left + 6, yy - 5) + escape(options.reference_label) +
               "</text>\n";
    }

    // A box in the top-right corner with one swatch and label per entry.
    std::string legend(const std::vector<LegendEntry>& entries) const {
        if (entries.empty()) return "";
        size_t longest = 0;
        for (const auto& e : entries) longest = std::max(longest, e.label.size());
        const double row = 18, w = 34 + 7.0 * longest, h = row * entries.size() + 8, x0 = right - w - 8, y0 = top + 8;
        std::string s = format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" "
                               "fill-opacity=\"0.85\" stroke=\"#bbb\"/>\n",
                               x0, y0, w, h);
        for (size_t i = 0; i < entries.size(); ++i) {
            const double yy = y0 + 4 + row * (i + 0.5);
            const std::string& c = entries[i].color;
            switch (entries[i].mark) {
                case LegendEntry::Mark::line:
                    s += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke-width=\"2\" ", x0 + 6, yy, x0 + 24, yy) +
                         "stroke=\"" + c + "\"/>\n";
                    break;
                case LegendEntry::Mark::point:
                    s += format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" ", x0 + 15, yy) + "fill=\"" + c + "\"/>\n";
                    break;
                case LegendEntry::Mark::bar:
                    s += format("<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" ", x0 + 8, yy - 5) + "fill=\"" + c + "\"/>\n";
                    break;
            }
            s += format("<text x=\"%.1f\" y=\"%.1f\">", x0 + 30, yy + 4) + escape(entries[i].label) + "</text>\n";
        }
        return s;
    }
};

}  // namespace

std::string svg_line_chart(const std::vector<Series>& series, const ChartOptions& options) {
    double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
    for (const Series& s : series) {
        if (s.x.size() != s.y.size())
            throw std::invalid_argument("svg_line_chart: series '" + s.label + "' has " + std::to_string(s.x.size()) +
                                        " x values and " + std::to_string(s.y.size()) + " y values");
        for (size_t i = 0; i < s.x.size(); ++i) {
            if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
            if (options.log_x && s.x[i] <= 0)
                throw std::invalid_argument("svg_line_chart: a log x axis needs x > 0; series '" + s.label + "' has x = " +
                                            tick_label(s.x[i]));
            x_lo = std::min(x_lo, s.x[i]), x_hi = std::max(x_hi, s.x[i]);
            y_lo = std::min(y_lo, s.y[i]), y_hi = std::max(y_hi, s.y[i]);
        }
    }
    if (!std::isnan(options.reference_y)) y_lo = std::min(y_lo, options.reference_y), y_hi = std::max(y_hi, options.reference_y);
    if (x_lo > x_hi) x_lo = x_hi = options.log_x ? 1 : 0;  // nothing to draw: still a well-formed empty chart
    if (y_lo > y_hi) y_lo = y_hi = 0;

    Frame f(options);
    f.x = options.log_x ? log_axis(x_lo, x_hi) : linear_axis(x_lo, x_hi);
    f.y = linear_axis(y_lo, y_hi);
    std::string svg = f.open(true) + f.reference_line();
    std::vector<LegendEntry> legend;
    for (size_t i = 0; i < series.size(); ++i) {
        const Series& s = series[i];
        const std::string color = s.color.empty() ? chart_color(i) : s.color;
        const std::string style = "stroke=\"" + color + "\"" + format(" stroke-opacity=\"%.2f\"", s.opacity);
        std::string points;  // the current unbroken run of the line
        auto flush = [&] {
            if (!points.empty()) svg += "<polyline fill=\"none\" stroke-width=\"2\" " + style + " points=\"" + points + "\"/>\n";
            points.clear();
        };
        for (size_t k = 0; k < s.x.size(); ++k) {
            if (!std::isfinite(s.x[k]) || !std::isfinite(s.y[k])) {
                flush();
                continue;
            }
            const double xx = f.px(s.x[k]), yy = f.py(s.y[k]);
            if (s.points)
                svg += format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill-opacity=\"%.2f\" ", xx, yy, s.opacity) +
                       "fill=\"" + color + "\"/>\n";
            else
                points += format(points.empty() ? "%.1f,%.1f" : " %.1f,%.1f", xx, yy);
        }
        flush();
        if (!s.label.empty())
            legend.push_back({s.label, color, s.points ? LegendEntry::Mark::point : LegendEntry::Mark::line});
    }
    return svg + f.legend(legend) + "</svg>\n";
}

std::string svg_bar_chart(const std::vector<std::string>& groups, const std::vector<BarSeries>& series,
                          const ChartOptions& options) {
    double lo = 0, hi = 0;  // bars grow from 0
    for (const BarSeries& s : series) {
        if (s.values.size() != groups.size())
            throw std::invalid_argument("svg_bar_chart: series '" + s.label + "' has " + std::to_string(s.values.size()) +
                                        " values for " + std::to_string(groups.size()) + " groups");
        for (double v : s.values)
            if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    if (!std::isnan(options.reference_y)) lo = std::min(lo, options.reference_y), hi = std::max(hi, options.reference_y);

    Frame f(options);
    f.y = linear_axis(lo, hi);
    std::string svg = f.open(false);
    // Each group gets an equal slot; its bars fill the middle 80% of it side by side.
    const double slot = (f.right - f.left) / double(std::max<size_t>(1, groups.size()));
    const double bar = 0.8 * slot / double(std::max<size_t>(1, series.size()));
    for (size_t g = 0; g < groups.size(); ++g) {
        const double x0 = f.left + slot * g + 0.1 * slot;
        for (size_t i = 0; i < series.size(); ++i) {
            const double v = series[i].values[g];
            if (!std::isfinite(v)) continue;
            const double top = std::min(f.py(v), f.py(0)), height = std::abs(f.py(v) - f.py(0));
            const std::string color = series[i].color.empty() ? chart_color(i) : series[i].color;
            svg += format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" ", x0 + bar * i, top, bar, height) +
                   "fill=\"" + color + "\"><title>" + escape(series[i].label + " " + groups[g] + ": " + tick_label(v)) +
                   "</title></rect>\n";
        }
        svg += format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", f.left + slot * (g + 0.5), f.bottom + 18) +
               escape(groups[g]) + "</text>\n";
    }
    std::vector<LegendEntry> legend;
    for (size_t i = 0; i < series.size(); ++i)
        if (!series[i].label.empty())
            legend.push_back({series[i].label, series[i].color.empty() ? chart_color(i) : series[i].color,
                              LegendEntry::Mark::bar});
    return svg + f.reference_line() + f.legend(legend) + "</svg>\n";
}

}  // namespace gg::nn
