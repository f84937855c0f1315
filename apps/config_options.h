// config_options.h — command-line options from the library's own descriptions: validators for
// a range (Range, nn/config_fields.h) and for the names a parser knows, and a config table's
// rows as options, each with its type, its check and its help line, applied on top of a
// config. train takes every row that has a flag; tutorial 06 its own setup's rows under a prefix.
#pragma once
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <variant>
#include <vector>

#include "nn/config_fields.h"

// ---------------------------------------------------------------- validators

// Accepts a value when the library's own parser does (parse_gate_position, ...), so the
// command line and config files know the same names and say the same thing about bad ones.
template <class Parse>
CLI::Validator accepted_by(Parse parse) {
    return CLI::Validator(
        [parse](std::string& value) -> std::string {
            try {
                parse(value);
                return "";
            } catch (const std::exception& e) {
                return e.what();
            }
        },
        "");
}

// A finite number in `range`. A value that is not a number passes here and fails in CLI11's
// own conversion, which says so.
inline CLI::Validator in_range(gg::nn::Range<double> range) {
    return CLI::Validator(
        [=](std::string& value) -> std::string {
            char* end = nullptr;
            const double x = std::strtod(value.c_str(), &end);
            if (end == value.c_str() || *end != '\0' || range.contains(x)) return "";
            return "must be " + range.words() + ", got " + value;
        },
        "");
}
// A finite number in [low, high] (above low when `strict`).
inline CLI::Validator bounded(double low, double high = INFINITY, bool strict = false) {
    return in_range({low, high, strict});
}
inline const CLI::Validator kNonNegative = bounded(0), kPositive = bounded(0, INFINITY, true);

// A whole number in `range`, in decimal. CLI11's own conversion would take 010 as octal,
// saturate 99999999999999999999 to INT64_MAX and wrap -1 into an unsigned seed; so the value
// is parsed here, exactly, and handed on in plain decimal.
template <class T>
CLI::Validator whole(gg::nn::Range<T> range) {
    return CLI::Validator(
        [=](std::string& value) -> std::string {
            T x{};
            const char *first = value.data(), *last = value.data() + value.size();
            if (first != last && *first == '+') ++first;
            const auto [stop, err] = std::from_chars(first, last, x);
            if (err == std::errc() && stop == last && range.contains(x)) {
                value = std::to_string(x);
                return "";
            }
            return "must be " + range.words() + ", got " + value;
        },
        "");
}
inline CLI::Validator count(int64_t low, int64_t high) { return whole<int64_t>({low, high}); }
inline const CLI::Validator kSeed = whole<uint64_t>({});

// ---------------------------------------------------------------- a table's rows as options

// One option for each row given: named by its flag ("--heads"), or by its key where it has
// none ("--init"); under a prefix, "--a-heads". Each takes its row's type (INT, FLOAT, TEXT; a
// switch's flag takes nothing, a switch named by its key true or false), is checked by its
// row's range or parser, and says its row's help.
template <class Config>
class ConfigOptions {
public:
    ConfigOptions(CLI::App* cmd, const gg::nn::Fields<Config>& fields, const std::string& prefix = "",
                  const std::string& help_prefix = "") {
        for (const gg::nn::Field<Config>& field : fields) {
            std::string name = field.flag ? std::string(field.flag).substr(2) : field.key;
            for (char& ch : name)
                if (ch == '_') ch = '-';
            CLI::Option* opt = add(cmd, field, "--" + prefix + name, help_prefix + (field.help ? field.help : ""));
            if (field.metavar) opt->type_name(field.metavar);
        }
    }

    // Every option given, onto `c`, in the rows' order.
    void apply(Config& c) const {
        for (const Given& given : options_)
            if (given.option->count()) given.set(c);
    }

    // The option of the row with this key.
    CLI::Option* option(const std::string& key) const {
        for (const Given& given : options_)
            if (key == given.field.key) return given.option;
        throw std::invalid_argument("no option for the config field '" + key + "'");
    }

    // Appends each option's default to its help line: its value in `plain`, and in the presets
    // when one differs: "(default 300; tiny 600, small 2000)".
    void show_defaults(const Config& plain, const std::vector<std::pair<std::string, Config>>& presets) {
        for (const Given& given : options_) {
            const std::string value = text(given.field, plain);
            std::string shown = "default " + value, others;
            bool differ = false;
            for (const auto& [name, preset] : presets) {
                differ = differ || text(given.field, preset) != value;
                others += (others.empty() ? "; " : ", ") + name + " " + text(given.field, preset);
            }
            if (differ) shown += others;
            given.option->description(given.option->get_description() + " (" + shown + ")");
        }
    }

private:
    struct Given {
        gg::nn::Field<Config> field;
        CLI::Option* option;
        std::function<void(Config&)> set;
    };

    CLI::Option* add(CLI::App* cmd, const gg::nn::Field<Config>& field, const std::string& name, const std::string& help) {
        using namespace gg::nn;
        CLI::Option* opt = std::visit(
            [&](const auto& v) -> CLI::Option* {
                using V = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<V, Switch<Config>>) {
                    if (field.flag) {
                        options_.push_back({field, nullptr, [v](Config& c) { v.member.at(c) = v.flag_sets; }});
                        return cmd->add_flag(name, help);
                    }
                    auto value = std::make_shared<bool>();  // named by its key: says which, true or false
                    options_.push_back({field, nullptr, [v, value](Config& c) { v.member.at(c) = *value; }});
                    return cmd->add_option(name, *value, help);
                } else if constexpr (is_choice<V>) {
                    auto value = std::make_shared<decltype(v.name(std::declval<const Config&>()))>();
                    options_.push_back({field, nullptr, [v, value](Config& c) { v.set(c, *value); }});
                    return cmd->add_option(name, *value, help)->check(accepted_by(v.parse));
                } else {
                    using T = std::decay_t<decltype(v.member.get(std::declval<const Config&>()))>;
                    auto value = std::make_shared<T>();
                    options_.push_back({field, nullptr, [v, value](Config& c) { v.member.at(c) = *value; }});
                    CLI::Option* o = cmd->add_option(name, *value, help);
                    if constexpr (std::is_floating_point_v<T>) o->check(in_range(v.range));
                    else if constexpr (std::is_integral_v<T>) o->check(whole<T>(v.range));
                    return o;
                }
            },
            field.value);
        options_.back().option = opt;
        return opt;
    }

    std::vector<Given> options_;
};

// The rows that have a flag: train's options.
template <class Config>
gg::nn::Fields<Config> with_flags(const gg::nn::Fields<Config>& fields) {
    gg::nn::Fields<Config> out;
    for (const gg::nn::Field<Config>& field : fields)
        if (field.flag) out.push_back(field);
    return out;
}
