// plots.cpp — tutorial 09's pictures (long_context.h), from a run or from its results files.
#include <stdexcept>

#include "common/results.h"
#include "long_context.h"

namespace tutorial {

using namespace gg::nn;

namespace {

// A chart line of one model and method: G1 dark, baseline light, one colour per method.
Series method_line(const Eval& e) {
    const bool g1 = e.model != "baseline";
    return line(std::string(g1 ? "G1" : "baseline") + ", " + rope_scaling_name(kMethods[e.method]), {}, {},
                pair_color(e.method, !g1));
}

}  // namespace

void plot_results(const std::filesystem::path& dir, int64_t L, const std::vector<Eval>& evals) {
    // Loss against evaluation length, one line per model and method.
    std::vector<Series> lengths;
    for (size_t i = 0; i < evals.size(); i += kMultiples.size()) {
        Series s = method_line(evals[i]);
        for (size_t k = 0; k < kMultiples.size(); ++k)
            s.x.push_back(double(evals[i + k].length)), s.y.push_back(evals[i + k].loss_all);
        lengths.push_back(s);
    }
    ChartOptions chart = chart_options("validation loss at longer contexts (trained at T = " + std::to_string(L) + ")",
                                       "evaluation length T (log scale)", "validation loss (nats/byte)");
    chart.log_x = true;
    write_file_atomically((dir / "long_context.svg").string(), svg_line_chart(lengths, chart));

    // Loss per position at 8×: where each method breaks down.
    std::vector<Series> positions;
    for (const Eval& e : evals) {
        if (e.length != kMultiples.back() * L) continue;
        Series s = method_line(e);
        for (int64_t t = 0; t < e.length; ++t) s.x.push_back(double(t));
        s.y = smooth(e.per_position, 0.95);
        positions.push_back(s);
    }
    chart = chart_options("loss per position at T = " + std::to_string(kMultiples.back() * L) + " (trained at " +
                              std::to_string(L) + ")",
                          "position t", "validation loss (nats/byte, smoothed over t)");
    write_file_atomically((dir / "loss_per_position.svg").string(), svg_line_chart(positions, chart));
}

std::vector<Eval> read_evals(const std::filesystem::path& dir, int64_t& L) {
    const nlohmann::json j = read_json(dir / "long_context.json");
    L = j["train"]["seq_len"].get<int64_t>();
    std::vector<Eval> evals;
    for (const nlohmann::json& e : j["evals"]) {
        Eval ev;
        ev.model = e["model"].get<std::string>();
        const RopeScaling method = parse_rope_scaling(e["method"].get<std::string>());
        while (ev.method < kMethods.size() && kMethods[ev.method] != method) ++ev.method;
        if (ev.method == kMethods.size()) throw std::runtime_error("long_context.json: unknown method");
        ev.length = e["length"].get<int64_t>();
        ev.loss_all = json_number(e["loss_all"]);
        ev.loss_beyond = json_number(e["loss_beyond_train_length"]);
        ev.per_position = json_numbers(e["loss_per_position"]);
        evals.push_back(std::move(ev));
    }
    if (evals.size() % kMultiples.size() != 0) throw std::runtime_error("long_context.json: an incomplete sweep");
    return evals;
}

}  // namespace tutorial
