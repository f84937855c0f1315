// json_fields.h — reading a JSON config object into C++ fields, with one-line errors.
//
// LMConfig and TrainConfig are stored as JSON (checkpoint metadata, config.json). Both
// read them the same way: a field that is absent keeps its default; one of the wrong type
// is an error naming the config, the field and the JSON type it had (never the value
// itself: a hostile file could make that megabytes long); finish() rejects fields nobody
// read, so a typo is an error rather than a silently ignored setting.
#pragma once
#include <set>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace gg::nn {

class JsonFields {
public:
    // `what` names the config in messages ("LMConfig", "train config").
    JsonFields(std::string what, const std::string& text) : what_(std::move(what)) {
        json_ = nlohmann::json::parse(text, nullptr, false);
        if (json_.is_discarded() || !json_.is_object()) fail("not a JSON object");
        for (const auto& item : json_.items()) unread_.insert(item.key());
    }

    template <class T>
    void read(const char* name, T& out) {
        unread_.erase(name);
        if (!json_.contains(name)) return;
        try {
            json_.at(name).get_to(out);
        } catch (const nlohmann::json::exception&) {
            fail(std::string("field '") + name + "' has the wrong type (" + json_.at(name).type_name() + ")");
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
        if (!unread_.empty()) fail("unknown field '" + *unread_.begin() + "'");
    }

    [[noreturn]] void fail(const std::string& msg) const { throw std::invalid_argument(what_ + ": " + msg); }

private:
    std::string what_;
    nlohmann::json json_;
    std::set<std::string> unread_;
};

}  // namespace gg::nn
