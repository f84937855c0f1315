#include "nn/analysis/training_log.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace gg::nn {

namespace {

// A field of numbers (one per layer), as StabilityStats::to_json writes it, where null is
// how JSON writes a NaN; false when the field is there but is not an array of numbers.
bool read_numbers(const nlohmann::json& j, const char* name, std::vector<double>& out) {
    if (!j.contains(name)) return true;
    if (!j[name].is_array()) return false;
    for (const auto& v : j[name]) {
        if (!v.is_number() && !v.is_null()) return false;
        out.push_back(v.is_null() ? NAN : v.get<double>());
    }
    return true;
}

bool read_number(const nlohmann::json& j, const char* name, double& out) {
    if (!j.contains(name)) return true;
    if (!j[name].is_number() && !j[name].is_null()) return false;
    out = j[name].is_null() ? NAN : j[name].get<double>();
    return true;
}

}  // namespace

TrainingLog read_training_log(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw std::runtime_error("cannot read " + path + ": not a regular file");
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    TrainingLog log;
    std::string line;
    // Line by line, each at most kMaxLine bytes (a log line is under 200 bytes, and about 100
    // more per layer with probes: some 100 KB at LMConfigLimits' 1024 layers): a file that is
    // one endless line fails there instead of being read whole.
    constexpr size_t kMaxLine = size_t(1) << 20;
    int number = 0;
    bool whole = false;  // the line read ends in a newline
    const auto where = [&] { return path + ":" + std::to_string(number) + ": "; };
    const auto next_line = [&] {
        line.clear();
        ++number;
        int c = 0;
        while ((c = in.get()) != EOF && c != '\n') {
            if (line.size() == kMaxLine)
                throw std::runtime_error(where() + "a line longer than " + std::to_string(kMaxLine) +
                                         " bytes (not a training log)");
            line += static_cast<char>(c);
        }
        whole = c == '\n';
        return whole || !line.empty();
    };
    while (next_line()) {
        if (line.empty()) continue;
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j.contains("loss") || !j["step"].is_number() ||
            !j["loss"].is_number()) {
            if (!whole) {  // a write cut short (log_file.h): the lines before it are whole
                log.warning = where() + "the last line is torn (" + std::to_string(line.size()) +
                              " bytes, no newline, not a log line): left out";
                break;
            }
            throw std::runtime_error(where() + "not a training log line (want step and loss)");
        }
        log.step.push_back(j["step"].get<double>());
        log.loss.push_back(j["loss"].get<double>());
        const auto optional = [&](const char* name) { return j.contains(name) && j[name].is_number() ? j[name].get<double>() : NAN; };
        log.lr.push_back(optional("lr"));
        log.grad_norm.push_back(optional("grad_norm"));
        log.tokens_per_s.push_back(optional("tokens_per_s"));
        if (j.contains("val_loss") && j["val_loss"].is_number()) {
            log.val_step.push_back(log.step.back());
            log.val_loss.push_back(j["val_loss"].get<double>());
        }
        if (j.contains("max_attn_logit")) {  // a probe (stability.h)
            StabilityStats s;
            const bool ok = read_numbers(j, "max_attn_logit", s.max_attn_logit) &&
                            read_numbers(j, "mean_attn_logit", s.mean_attn_logit) &&
                            read_numbers(j, "min_attn_entropy", s.min_attn_entropy) &&
                            read_numbers(j, "gate_mean", s.gate_mean) && read_number(j, "max_abs_hidden", s.max_abs_hidden) &&
                            read_number(j, "max_output_logit", s.max_output_logit) &&
                            read_number(j, "mean_log_z", s.mean_log_z);
            if (!ok) throw std::runtime_error(where() + "a stability probe that is not numbers");
            log.probe_step.push_back(log.step.back());
            log.probes.push_back(std::move(s));
        }
    }
    if (log.step.empty()) throw std::runtime_error(path + ": no training steps in it");
    return log;
}

std::vector<Series> loss_series(const TrainingLog& log, const std::string& label, const std::string& color) {
    // label, x, y, colour, points?, opacity, error bars
    std::vector<Series> series{{"", log.step, log.loss, color, false, 0.25, {}},
                               {label + " train (smoothed)", log.step, smooth(log.loss), color, false, 1, {}}};
    if (!log.val_step.empty()) series.push_back({label + " validation", log.val_step, log.val_loss, color, true, 1, {}});
    return series;
}

}  // namespace gg::nn
