#include "nn/analysis/plot.h"

#include <algorithm>
#include <cfloat>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

// The one place the stb_image_write implementation is compiled. STATIC keeps its symbols
// inside this file, so it never clashes with another copy (Debian also ships libstb.so).
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb/stb_easy_font.h>  // the heat maps' labels: glyphs as rectangles
#pragma GCC diagnostic pop

#include "nn/files.h"

namespace gg::nn {

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

Series downsample(const Series& series, size_t max_points) {
    const size_t n = series.x.size();
    if (max_points < 2 || n <= max_points || !series.y_error.empty()) return series;
    Series out = series;
    out.x.clear(), out.y.clear();
    const size_t buckets = max_points / 2;
    for (size_t b = 0; b < buckets; ++b) {
        const size_t begin = b * n / buckets, end = (b + 1) * n / buckets;
        size_t lo = end, hi = end;  // the bucket's lowest and highest finite y
        for (size_t i = begin; i < end; ++i) {
            if (!std::isfinite(series.y[i])) continue;
            if (lo == end || series.y[i] < series.y[lo]) lo = i;
            if (hi == end || series.y[i] > series.y[hi]) hi = i;
        }
        if (lo == end) {  // nothing finite here: one gap, as the whole series would have drawn it
            out.x.push_back(series.x[begin]), out.y.push_back(NAN);
            continue;
        }
        for (size_t i : {std::min(lo, hi), std::max(lo, hi)}) {  // in step order, so the line stays a path
            out.x.push_back(series.x[i]), out.y.push_back(series.y[i]);
            if (lo == hi) break;
        }
    }
    return out;
}

// ---------------------------------------------------------------- heat map

namespace {

// White → light blue → dark blue: three stops, linear between them; v clamped to [0, 1].
void heat_color(double v, unsigned char pixel[3]) {
    static const double stops[3][3] = {{255, 255, 255}, {107, 174, 214}, {8, 48, 107}};
    const double u = 2 * std::clamp(v, 0.0, 1.0);  // position along the two segments
    const int seg = u < 1 ? 0 : 1;
    for (int k = 0; k < 3; ++k)
        pixel[k] = static_cast<unsigned char>(std::lround(stops[seg][k] + (u - seg) * (stops[seg + 1][k] - stops[seg][k])));
}

// An RGB picture, white at first, to draw the heat map and its frame into.
struct Canvas {
    int width, height;
    std::vector<unsigned char> rgb;
    Canvas(int w, int h) : width(w), height(h), rgb(size_t(w) * h * 3, 255) {}
    // The pixels [x0, x1) × [y0, y1), clipped to the picture.
    void fill(int x0, int y0, int x1, int y1, const unsigned char color[3]) {
        for (int y = std::max(0, y0); y < std::min(height, y1); ++y)
            for (int x = std::max(0, x0); x < std::min(width, x1); ++x) std::memcpy(&rgb[(size_t(y) * width + x) * 3], color, 3);
    }
};

const unsigned char kBlack[3] = {0, 0, 0};
constexpr int kFontScale = 2;               // each pixel of stb_easy_font's glyphs is 2 × 2 here
constexpr int kTextHeight = 7 * kFontScale;  // a capital letter's height
constexpr int kLineHeight = kTextHeight + 8;

// The font has glyphs for printable ASCII only.
std::string ascii(const std::string& text) {
    std::string out = text;
    for (char& c : out)
        if (c < 32 || c > 126) c = '?';
    return out;
}

int text_width(const std::string& text) {
    std::string t = ascii(text);
    return kFontScale * stb_easy_font_width(t.data());
}

// Text with its top-left corner at (x, y); turned, it reads upwards from y, in the
// kTextHeight pixels left of x.
void draw_text(Canvas& canvas, const std::string& text, int x, int y, bool turned = false) {
    std::string t = ascii(text);
    std::vector<float> quads(t.size() * 16 * 16);  // room for 16 quads (16 floats each) a character
    const int n = stb_easy_font_print(0, 0, t.data(), nullptr, quads.data(), int(quads.size() * sizeof(float)));
    for (int q = 0; q < n; ++q) {
        const float* v = &quads[size_t(q) * 16];  // 4 vertices of x, y, z, rgba: an axis-aligned rectangle
        const int u0 = kFontScale * int(std::lround(std::min({v[0], v[4], v[8], v[12]})));
        const int u1 = kFontScale * int(std::lround(std::max({v[0], v[4], v[8], v[12]})));
        const int w0 = kFontScale * int(std::lround(std::min({v[1], v[5], v[9], v[13]})));
        const int w1 = kFontScale * int(std::lround(std::max({v[1], v[5], v[9], v[13]})));
        if (turned)
            canvas.fill(x + w0 - kTextHeight, y - u1, x + w1 - kTextHeight, y - u0, kBlack);
        else
            canvas.fill(x + u0, y + w0, x + u1, y + w1, kBlack);
    }
}

// The words of `text` in lines of at most max_width pixels (a longer word keeps a line).
template <class Width>
std::vector<std::string> wrap(const std::string& text, double max_width, Width width) {
    std::vector<std::string> lines;
    std::istringstream words(text);
    std::string word;
    while (words >> word) {
        if (!lines.empty() && width(lines.back() + " " + word) <= max_width)
            lines.back() += " " + word;
        else
            lines.push_back(word);
    }
    return lines;
}

// Ticks at 0 and every step (1, 2 or 5 × 10^k, about five of them) below n.
std::vector<int64_t> position_ticks(int64_t n) {
    int64_t step = 1;
    for (int64_t magnitude = 1; step * 5 < n; magnitude *= 10)
        for (int64_t m : {1, 2, 5})
            if (step * 5 < n) step = m * magnitude;
    std::vector<int64_t> ticks;
    for (int64_t t = 0; t < n; t += step) ticks.push_back(t);
    return ticks;
}

}  // namespace

HeatmapLayout write_heatmap_png(const std::string& path, const Tensor& matrix, int scale, const HeatmapOptions& options) {
    if (matrix.dim() != 2 || matrix.numel() == 0 || scale < 1 || scale > 64)
        throw std::invalid_argument("write_heatmap_png: " + path + ": need a non-empty (rows, cols) matrix and scale in [1, 64], got " +
                                    shape_str(matrix.shape()) + " and scale " + std::to_string(scale));
    const int64_t rows = matrix.size(0), cols = matrix.size(1);
    const std::vector<double> values = matrix.to(Device::CPU).to_vector<double>();
    for (double v : values)
        if (std::isnan(v)) throw std::invalid_argument("write_heatmap_png: " + path + ": the matrix holds NaN");

    // Left to right: the y label (turned), tick labels, the map, the colour bar, its labels.
    const std::vector<int64_t> x_ticks = position_ticks(cols), y_ticks = position_ticks(rows);
    int y_tick_width = 0;
    for (int64_t t : y_ticks) y_tick_width = std::max(y_tick_width, text_width(std::to_string(t)));
    const int map_w = int(cols) * scale, map_h = int(rows) * scale, bar_h = std::max(map_h, 120), bar_w = 16;
    const int map_x = 12 + kTextHeight + 12 + y_tick_width + 10;
    const int bar_x = map_x + map_w + 24, bar_label_x = bar_x + bar_w + 10 + text_width("0.5") + 12;
    const int width = std::max(bar_label_x + kTextHeight + 12, text_width(options.x_label) + 24);
    const std::vector<std::string> title = wrap(options.title, width - 24, text_width);
    const int map_y = 12 + int(title.size()) * kLineHeight + (title.empty() ? 0 : 8);
    const int height = map_y + bar_h + 10 + kLineHeight + kLineHeight + 8;

    Canvas canvas(width, height);
    for (size_t i = 0; i < title.size(); ++i)
        draw_text(canvas, title[i], (width - text_width(title[i])) / 2, 12 + int(i) * kLineHeight);
    unsigned char pixel[3];
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            heat_color(values[r * cols + c], pixel);
            canvas.fill(map_x + int(c) * scale, map_y + int(r) * scale, map_x + int(c + 1) * scale, map_y + int(r + 1) * scale,
                        pixel);
        }
    // A frame just outside the map and the bar, so that white cells still show their edge.
    auto frame = [&](int x, int y, int w, int h) {
        canvas.fill(x - 1, y - 1, x + w + 1, y, kBlack), canvas.fill(x - 1, y + h, x + w + 1, y + h + 1, kBlack);
        canvas.fill(x - 1, y - 1, x, y + h + 1, kBlack), canvas.fill(x + w, y - 1, x + w + 1, y + h + 1, kBlack);
    };
    frame(map_x, map_y, map_w, map_h);
    // Ticks mark the middle of their row or column.
    for (int64_t t : x_ticks) {
        const int x = map_x + int(t) * scale + scale / 2;
        canvas.fill(x, map_y + map_h, x + 1, map_y + map_h + 5, kBlack);
        draw_text(canvas, std::to_string(t), x - text_width(std::to_string(t)) / 2, map_y + map_h + 9);
    }
    for (int64_t t : y_ticks) {
        const int y = map_y + int(t) * scale + scale / 2;
        canvas.fill(map_x - 5, y, map_x, y + 1, kBlack);
        draw_text(canvas, std::to_string(t), map_x - 8 - text_width(std::to_string(t)), y - kTextHeight / 2);
    }
    draw_text(canvas, options.x_label, std::max(4, map_x + (map_w - text_width(options.x_label)) / 2),
              map_y + map_h + 9 + kLineHeight);
    draw_text(canvas, options.y_label, 12 + kTextHeight, map_y + (bar_h + text_width(options.y_label)) / 2, true);

    // The colour bar: 1 at the top, 0 at the bottom, ticks at 0, 0.5 and 1.
    for (int y = 0; y < bar_h; ++y) {
        heat_color(1 - double(y) / (bar_h - 1), pixel);
        canvas.fill(bar_x, map_y + y, bar_x + bar_w, map_y + y + 1, pixel);
    }
    frame(bar_x, map_y, bar_w, bar_h);
    for (const auto& [value, label] : {std::pair{0.0, "0"}, {0.5, "0.5"}, {1.0, "1"}}) {
        const int y = map_y + int(std::lround((1 - value) * (bar_h - 1)));
        canvas.fill(bar_x + bar_w, y, bar_x + bar_w + 5, y + 1, kBlack);
        draw_text(canvas, label, bar_x + bar_w + 8, std::clamp(y - kTextHeight / 2, map_y - 4, map_y + bar_h - kTextHeight + 4));
    }
    draw_text(canvas, options.value_label, bar_label_x + kTextHeight, map_y + (bar_h + text_width(options.value_label)) / 2, true);

    std::string png;
    auto append = [](void* context, void* data, int size) {
        static_cast<std::string*>(context)->append(static_cast<const char*>(data), size);
    };
    if (!stbi_write_png_to_func(append, &png, width, height, 3, canvas.rgb.data(), width * 3))
        throw std::runtime_error("write_heatmap_png: " + path + ": PNG encoding failed");
    write_file_atomically(path, png);
    return {width, height, map_x, map_y};
}

// ---------------------------------------------------------------- SVG charts

std::string chart_color(size_t i) {
    static const char* palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
    return palette[i % std::size(palette)];
}

std::string escape_xml(const std::string& text) {
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

namespace {

template <class... Args>
std::string format(const char* fmt, Args... args) {
    char buffer[256];
    std::snprintf(buffer, sizeof buffer, fmt, args...);
    return buffer;
}

std::string tick_label(double v) { return format("%.4g", v); }

// One axis: its data range after rounding out to whole ticks, and where the ticks are.
struct Axis {
    double lo = 0, hi = 1;
    bool log = false;
    std::vector<double> ticks;
    double fraction(double v) const {  // 0 at lo, 1 at hi
        // Halved first: v − lo overflows for values near ±1e308, v/2 − lo/2 cannot.
        return log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v / 2 - lo / 2) / (hi / 2 - lo / 2);
    }
};

// About five ticks 1, 2 or 5 × 10^k apart, the axis widened to the ticks around [lo, hi].
// Any finite lo ≤ hi: the span is taken as hi/5 − lo/5, which does not overflow at ±1e308, and
// a span under 1e-300 (one value, or subnormal ones) is widened first, where 10^k would
// underflow to 0 and the ticks come out NaN.
Axis linear_axis(double lo, double hi) {
    constexpr double kSmallest = 1e-300;
    if (!(hi / 5 - lo / 5 >= kSmallest)) {  // one value (or none): give it some room
        const double pad = std::abs(lo) < 10 * kSmallest ? 1 : std::abs(lo) * 0.1;
        lo = std::max(lo - pad, -DBL_MAX), hi = std::min(hi + pad, DBL_MAX);
    }
    const double raw = hi / 5 - lo / 5, magnitude = std::pow(10, std::floor(std::log10(raw))), r = raw / magnitude;
    const double step = (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * magnitude;
    const auto first = static_cast<int64_t>(std::floor(lo / step + 1e-9)), last = static_cast<int64_t>(std::ceil(hi / step - 1e-9));
    // Near ±DBL_MAX the round tick beyond the data would overflow: there the axis ends at the data.
    Axis a{std::isfinite(first * step) ? first * step : lo, std::isfinite(last * step) ? last * step : hi, false, {}};
    for (int64_t k = first; k <= last; ++k)
        if (std::isfinite(k * step)) a.ticks.push_back(k * step);
    return a;
}

// The x values' range (all > 0), widened by 5% of its span in decades on each side. Few x
// values (a sweep: at most eight) are the ticks themselves; else 1, 2 and 5 × 10^k inside it.
Axis log_axis(std::vector<double> xs) {
    std::sort(xs.begin(), xs.end());
    xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
    if (xs.empty()) xs = {1};
    const double span = std::log10(xs.back()) - std::log10(xs.front()), pad = span > 0 ? 0.05 * span : 0.5;
    Axis a{xs.front() / std::pow(10, pad), xs.back() * std::pow(10, pad), true, {}};
    if (xs.size() <= 8) {
        a.ticks = xs;
        return a;
    }
    for (int d = int(std::floor(std::log10(a.lo))); d <= int(std::ceil(std::log10(a.hi))); ++d)
        for (double m : {1, 2, 5})
            if (m * std::pow(10, d) >= a.lo && m * std::pow(10, d) <= a.hi) a.ticks.push_back(m * std::pow(10, d));
    return a;
}

// The width of text in the charts' sans-serif at `size` pixels: an estimate that errs wide
// (0.62 em a character; UTF-8 continuation bytes are not characters).
double svg_text_width(const std::string& text, double size) {
    size_t characters = 0;
    for (unsigned char c : text) characters += (c & 0xC0) != 0x80;
    return 0.62 * size * double(characters);
}

constexpr double kTitleSize = 15, kTitleLine = 19;

struct LegendEntry {
    std::string label, color;
    enum class Mark { line, point, bar, dashed } mark;
};

// The plotting box of a chart and the axes that map data into it. The title takes as many
// lines as it needs; the legend, if any, stands right of the box, so it never hides data.
struct Frame {
    ChartOptions options;
    std::vector<LegendEntry> entries;
    std::vector<std::string> title;  // its lines
    double legend_width = 0;
    double left, right, top, bottom;  // pixels
    Axis x, y;

    Frame(const ChartOptions& o, std::vector<LegendEntry> legend)
        : options(o), entries(std::move(legend)),
          title(wrap(o.title, o.width - 24, [](const std::string& t) { return svg_text_width(t, kTitleSize); })) {
        // The reference line is named in the legend too, where its label hides nothing.
        if (!std::isnan(o.reference_y) && !o.reference_label.empty())
            entries.push_back({o.reference_label, "#555", LegendEntry::Mark::dashed});
        for (const auto& e : entries) legend_width = std::max(legend_width, 34 + svg_text_width(e.label, 12));
        left = 72, right = o.width - 24 - (legend_width > 0 ? legend_width + 12 : 0);
        top = title.empty() ? 20 : 44 + kTitleLine * double(title.size() - 1), bottom = o.height - 56;
    }
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
        for (size_t i = 0; i < title.size(); ++i)
            s += format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%g\">", o.width / 2.0,
                        26 + kTitleLine * double(i), kTitleSize) +
                 escape_xml(title[i]) + "</text>\n";
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
                 escape_xml(o.y_label) + "</text>\n";
        if (!o.x_label.empty())
            s += format("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", (left + right) / 2, o.height - 12) +
                 escape_xml(o.x_label) + "</text>\n";
        return s;
    }

    std::string reference_line() const {
        if (std::isnan(options.reference_y)) return "";
        const double yy = py(options.reference_y);
        return format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-dasharray=\"6 4\"/>\n",
                      left, yy, right, yy);
    }

    // A vertical error bar from y − e to y + e at x, with caps.
    std::string error_bar(double xx, double value, double e, const std::string& color) const {
        if (!std::isfinite(value) || !std::isfinite(e) || e <= 0) return "";
        const double y0 = py(value - e), y1 = py(value + e);
        return format("<path d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f\" stroke-width=\"1.5\" fill=\"none\" ", xx, y0,
                      y1, xx - 4, y0, xx + 4, xx - 4, y1, xx + 4) +
               "stroke=\"" + color + "\"/>\n";
    }

    // A box right of the plot with one swatch and label per entry.
    std::string legend() const {
        if (entries.empty()) return "";
        const double row = 18, h = row * double(entries.size()) + 8, x0 = right + 12, y0 = top;
        std::string s = format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" stroke=\"#bbb\"/>\n",
                               x0, y0, legend_width, h);
        for (size_t i = 0; i < entries.size(); ++i) {
            const double yy = y0 + 4 + row * (double(i) + 0.5);
            const std::string& c = entries[i].color;
            switch (entries[i].mark) {
                case LegendEntry::Mark::line:
                    s += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke-width=\"2\" ", x0 + 6, yy, x0 + 24, yy) +
                         "stroke=\"" + c + "\"/>\n";
                    break;
                case LegendEntry::Mark::dashed:
                    s += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke-dasharray=\"6 4\" ", x0 + 6, yy,
                                x0 + 24, yy) +
                         "stroke=\"" + c + "\"/>\n";
                    break;
                case LegendEntry::Mark::point:
                    s += format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" ", x0 + 15, yy) + "fill=\"" + c + "\"/>\n";
                    break;
                case LegendEntry::Mark::bar:
                    s += format("<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" ", x0 + 8, yy - 5) + "fill=\"" + c + "\"/>\n";
                    break;
            }
            s += format("<text x=\"%.1f\" y=\"%.1f\">", x0 + 30, yy + 4) + escape_xml(entries[i].label) + "</text>\n";
        }
        return s;
    }
};

}  // namespace

std::string svg_line_chart(const std::vector<Series>& series, const ChartOptions& options) {
    double y_lo = INFINITY, y_hi = -INFINITY;
    std::vector<double> xs;
    std::vector<LegendEntry> legend;
    for (size_t i = 0; i < series.size(); ++i) {
        const Series& s = series[i];
        if (s.x.size() != s.y.size() || (!s.y_error.empty() && s.y_error.size() != s.y.size()))
            throw std::invalid_argument("svg_line_chart: series '" + s.label + "' has " + std::to_string(s.x.size()) +
                                        " x values, " + std::to_string(s.y.size()) + " y values and " +
                                        std::to_string(s.y_error.size()) + " errors");
        for (size_t k = 0; k < s.x.size(); ++k) {
            if (!std::isfinite(s.x[k]) || !std::isfinite(s.y[k])) continue;
            if (options.log_x && s.x[k] <= 0)
                throw std::invalid_argument("svg_line_chart: a log x axis needs x > 0; series '" + s.label + "' has x = " +
                                            tick_label(s.x[k]));
            const double e = s.y_error.empty() || !std::isfinite(s.y_error[k]) ? 0 : std::abs(s.y_error[k]);
            xs.push_back(s.x[k]);
            y_lo = std::min(y_lo, s.y[k] - e), y_hi = std::max(y_hi, s.y[k] + e);
        }
        if (!s.label.empty())
            legend.push_back({s.label, s.color.empty() ? chart_color(i) : s.color,
                              s.points ? LegendEntry::Mark::point : LegendEntry::Mark::line});
    }
    if (!std::isnan(options.reference_y)) y_lo = std::min(y_lo, options.reference_y), y_hi = std::max(y_hi, options.reference_y);
    if (y_lo > y_hi) y_lo = y_hi = 0;  // nothing to draw: still a well-formed empty chart

    Frame f(options, std::move(legend));
    const auto [x_lo, x_hi] = std::minmax_element(xs.begin(), xs.end());
    f.x = options.log_x ? log_axis(xs) : xs.empty() ? linear_axis(0, 0) : linear_axis(*x_lo, *x_hi);
    f.y = linear_axis(y_lo, y_hi);
    std::string svg = f.open(true) + f.reference_line();
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
            if (!s.y_error.empty()) svg += f.error_bar(xx, s.y[k], s.y_error[k], color);
        }
        flush();
    }
    return svg + f.legend() + "</svg>\n";
}

std::string svg_bar_chart(const std::vector<std::string>& groups, const std::vector<BarSeries>& series,
                          const ChartOptions& options) {
    double lo = 0, hi = 0;  // bars grow from 0
    std::vector<LegendEntry> legend;
    for (size_t i = 0; i < series.size(); ++i) {
        const BarSeries& s = series[i];
        if (s.values.size() != groups.size() || (!s.errors.empty() && s.errors.size() != groups.size()))
            throw std::invalid_argument("svg_bar_chart: series '" + s.label + "' has " + std::to_string(s.values.size()) +
                                        " values and " + std::to_string(s.errors.size()) + " errors for " +
                                        std::to_string(groups.size()) + " groups");
        for (size_t g = 0; g < groups.size(); ++g) {
            if (!std::isfinite(s.values[g])) continue;
            const double e = s.errors.empty() || !std::isfinite(s.errors[g]) ? 0 : std::abs(s.errors[g]);
            lo = std::min(lo, s.values[g] - e), hi = std::max(hi, s.values[g] + e);
        }
        if (!s.label.empty()) legend.push_back({s.label, s.color.empty() ? chart_color(i) : s.color, LegendEntry::Mark::bar});
    }
    if (!std::isnan(options.reference_y)) lo = std::min(lo, options.reference_y), hi = std::max(hi, options.reference_y);

    Frame f(options, std::move(legend));
    // Each group gets an equal slot; its bars fill the middle 80% of it side by side. Group
    // names wider than a slot are turned 35°, and the plot rises to make room for them.
    const double slot = (f.right - f.left) / double(std::max<size_t>(1, groups.size()));
    double widest = 0;
    for (const std::string& g : groups) widest = std::max(widest, svg_text_width(g, 12));
    const bool turned = widest > 0.95 * slot;
    if (turned) f.bottom -= std::max(0.0, widest * std::sin(35 * M_PI / 180) - 4);
    f.y = linear_axis(lo, hi);
    std::string svg = f.open(false);
    const double bar = 0.8 * slot / double(std::max<size_t>(1, series.size()));
    for (size_t g = 0; g < groups.size(); ++g) {
        const double x0 = f.left + slot * double(g) + 0.1 * slot;
        for (size_t i = 0; i < series.size(); ++i) {
            const double v = series[i].values[g];
            if (!std::isfinite(v)) continue;
            const double top = std::min(f.py(v), f.py(0)), height = std::abs(f.py(v) - f.py(0));
            const std::string color = series[i].color.empty() ? chart_color(i) : series[i].color;
            svg += format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" ", x0 + bar * double(i), top, bar, height) +
                   "fill=\"" + color + "\"><title>" + escape_xml(series[i].label + " " + groups[g] + ": " + tick_label(v)) +
                   "</title></rect>\n";
            if (!series[i].errors.empty()) svg += f.error_bar(x0 + bar * (double(i) + 0.5), v, series[i].errors[g], "black");
        }
        const double label_x = f.left + slot * (double(g) + 0.5);
        svg += (turned ? format("<text transform=\"translate(%.1f %.1f) rotate(-35)\" text-anchor=\"end\">", label_x + 4,
                                f.bottom + 14)
                       : format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", label_x, f.bottom + 18)) +
               escape_xml(groups[g]) + "</text>\n";
    }
    return svg + f.reference_line() + f.legend() + "</svg>\n";
}

}  // namespace gg::nn
