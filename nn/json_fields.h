// json_fields.h — reading a JSON config object into C++ fields, with one-line errors.
//
// LMConfig and TrainConfig are stored as JSON (checkpoint metadata, config.json). Both
// read them the same way: the text is parsed as untrusted (nn/untrusted.h: bounded depth,
// no repeated keys); a field that is absent keeps its default; one of the wrong type is an
// error naming the config, the field and the JSON type it had (never the value itself: a
// hostile file could make that megabytes long); an integer field takes only a whole number
// its C++ type can hold (1e6 is one; 1.5, 1e300 and -1 for an unsigned field are not);
// finish() rejects fields nobody read, so a typo is an error rather than a silently
// ignored setting. A config's rows (nn/config_fields.h) are read and written here too.
#pragma once
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

#include <nlohmann/json.hpp>

#include "nn/config_fields.h"
#include "nn/untrusted.h"

namespace gg::nn {

class JsonFields {
public:
    // `what` names the config in messages ("LMConfig", "train config").
    JsonFields(std::string what, const std::string& text) : what_(std::move(what)) {
        try {
            json_ = parse_untrusted_json(text);
        } catch (const std::invalid_argument& e) {
            fail(e.what());
        }
        if (!json_.is_object()) fail(std::string("a JSON ") + json_.type_name() + ", not an object");
        for (const auto& item : json_.items()) unread_.insert(item.key());
    }

    template <class T>
    void read(const char* name, T& out) {
        unread_.erase(name);
        if (!json_.contains(name)) return;
        const nlohmann::json& value = json_.at(name);
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            // nlohmann would convert 1e300 to an integer by a cast whose result is undefined.
            if (!value.is_number()) fail(std::string("field '") + name + "' has the wrong type (" + value.type_name() + ")");
            const bool fits = value.is_number_unsigned()  ? value.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max())
                              : value.is_number_integer() ? std::is_signed_v<T> || value.get<int64_t>() >= 0
                                                          : whole_number_in<T>(value.get<double>());
            if (!fits) fail(std::string("field '") + name + "' is not a whole number in the range of its type");
            out = value.is_number_float() ? static_cast<T>(value.get<double>()) : value.get<T>();
        } else {
            try {
                value.get_to(out);
            } catch (const nlohmann::json::exception&) {
                fail(std::string("field '") + name + "' has the wrong type (" + value.type_name() + ")");
            }
        }
    }

    // The JSON of a nested object field (for configs inside configs); absent: false.
    bool read_object(const char* name, std::string& text) {
        unread_.erase(name);
        if (!json_.contains(name)) return false;
        if (!json_.at(name).is_object()) fail(std::string("field '") + name + "' is not an object");
        text = json_.at(name).dump();
        return true;
    }

    void finish() const {
        if (!unread_.empty()) fail("unknown field '" + printable(*unread_.begin()) + "'");
    }

    [[noreturn]] void fail(const std::string& msg) const { throw std::invalid_argument(what_ + ": " + msg); }

private:
    template <class T>
    static bool whole_number_in(double x) {
        // The bounds as doubles: 2^63 for int64 is exact, and x must be strictly below it.
        return x == std::trunc(x) && x >= double(std::numeric_limits<T>::min()) &&
               x < 2.0 * double(std::numeric_limits<T>::max() / 2 + 1);
    }

    std::string what_;
    nlohmann::json json_;
    std::set<std::string> unread_;
};

// Each field of `c` under its key, in the rows' order, into the object `json`; an enum by name.
template <class Config>
void write_fields(const Fields<Config>& fields, const Config& c, nlohmann::ordered_json& json) {
    for (const Field<Config>& field : fields)
        std::visit(
            [&](const auto& v) {
                if constexpr (is_choice<std::decay_t<decltype(v)>>) json[field.key] = v.name(c);
                else json[field.key] = v.member.get(c);
            },
            field.value);
}

// Each field the JSON names, read into `c`; an enum's name goes through its parser, whose
// message about a name it does not know becomes the config's error.
template <class Config>
void read_fields(JsonFields& json, const Fields<Config>& fields, Config& c) {
    for (const Field<Config>& field : fields)
        std::visit(
            [&](const auto& v) {
                if constexpr (is_choice<std::decay_t<decltype(v)>>) {
                    auto names = v.name(c);
                    json.read(field.key, names);
                    try {
                        v.set(c, names);
                    } catch (const std::invalid_argument& e) {
                        json.fail(e.what());
                    }
                } else {
                    json.read(field.key, v.member.at(c));
                }
            },
            field.value);
}

}  // namespace gg::nn
