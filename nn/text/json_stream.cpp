// json_stream.cpp — finding model.vocab and model.merges in a tokenizer.json, and reading
// them as streams of values (json_stream.h).
#include "nn/text/json_stream.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "nn/untrusted.h"

namespace gg::nn {

namespace {

using nlohmann::json;
constexpr size_t npos = std::string_view::npos;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_space(std::string_view text, size_t i) {
    while (i < text.size() && is_space(text[i])) ++i;
    return i;
}

// The closing quote of the string that opens at text[i], or npos. A quote ends the string
// unless an odd number of backslashes stands before it.
size_t string_end(std::string_view text, size_t i) {
    for (;;) {
        i = text.find('"', i + 1);
        if (i == npos) return npos;
        size_t backslashes = 0;
        while (text[i - 1 - backslashes] == '\\') ++backslashes;
        if (backslashes % 2 == 0) return i;
    }
}

// The end of the JSON value that starts at text[i], or npos where the text ends first.
size_t skip_value(std::string_view text, size_t i) {
    size_t depth = 0;
    for (; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '"') {
            i = string_end(text, i);
            if (i == npos) return npos;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if (c == '}' || c == ']') {
            if (depth == 0) return i;  // a number, true, false or null ends where its container does
            --depth;
        } else if (depth == 0 && (c == ',' || is_space(c))) {
            return i;
        }
        if (depth == 0 && (c == '"' || c == '}' || c == ']')) return i + 1;
    }
    return depth == 0 ? i : npos;
}

struct Span {
    size_t begin, end;
};

// Where the value of the first member named `key` (written without escapes) of the object
// at text[at] lies.
std::optional<Span> member(std::string_view text, size_t at, std::string_view key) {
    size_t i = skip_space(text, at);
    if (i >= text.size() || text[i] != '{') return std::nullopt;
    for (i = skip_space(text, i + 1); i < text.size() && text[i] == '"';) {
        const size_t key_end = skip_value(text, i);
        if (key_end == npos) return std::nullopt;
        const std::string_view name = text.substr(i + 1, key_end - i - 2);
        i = skip_space(text, key_end);
        if (i >= text.size() || text[i] != ':') return std::nullopt;
        const size_t value = skip_space(text, i + 1), end = skip_value(text, value);
        if (end == npos) return std::nullopt;
        if (name == key) return Span{value, end};
        i = skip_space(text, end);
        if (i >= text.size() || text[i] != ',') break;
        i = skip_space(text, i + 1);
    }
    return std::nullopt;
}

// The errors of the file's two tables, each naming the file and the table.
struct TableErrors {
    const std::string& file;
    const char* table;
    [[noreturn]] void fail(const std::string& what) const {
        throw std::invalid_argument("BpeTokenizer: " + file + ": " + table + " " + what);
    }
    [[noreturn]] void not_json(const json::exception& e) const {
        // "[json.exception.parse_error.101] parse error at line 1, column 6: ..."
        std::string what = e.what();
        if (const size_t end = what.find("] "); end != std::string::npos) what.erase(0, end + 2);
        fail("is not valid JSON: " + printable(what, 160));
    }
};

// nlohmann's parser calls one of these for each value, key and bracket (its SAX interface).
// Each handler keeps only its depth and the value in hand.
// The events of a single value, each passed on as one json to Events::value.
template <class Events>
struct ValueEvents {
    bool null() { return self().value(nullptr); }
    bool boolean(bool b) { return self().value(b); }
    bool number_integer(json::number_integer_t n) { return self().value(n); }
    bool number_unsigned(json::number_unsigned_t n) { return self().value(n); }
    bool number_float(json::number_float_t x, const std::string&) { return self().value(x); }
    bool string(json::string_t& s) { return self().value(std::move(s)); }
    bool binary(json::binary_t&) { return self().value(nullptr); }
    Events& self() { return static_cast<Events&>(*this); }
};

class VocabEvents : public ValueEvents<VocabEvents> {
public:
    using Entry = std::function<void(std::string&, const json&)>;
    VocabEvents(const Entry& entry, const TableErrors& errors) : entry_(entry), errors_(errors) {}
    bool start_object(std::size_t) { return open(json::object()); }
    bool start_array(std::size_t) { return open(json::array()); }
    bool end_object() { return --depth_, true; }
    bool end_array() { return --depth_, true; }
    bool key(json::string_t& k) {
        key_ = std::move(k);
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const json::exception& e) { errors_.not_json(e); }

private:
    friend struct ValueEvents<VocabEvents>;
    bool value(const json& v) {
        if (depth_ == 0) errors_.fail("is not a JSON object");
        if (depth_ == 1) entry_(key_, v);
        return true;
    }
    bool open(const json& empty) {
        if (depth_ == 0 && !empty.is_object()) errors_.fail("is not a JSON object");
        if (depth_ == 1) entry_(key_, empty);  // a container where an id belongs: entry refuses it
        ++depth_;
        return true;
    }
    const Entry& entry_;
    const TableErrors& errors_;
    std::string key_;
    size_t depth_ = 0;
};

class MergeEvents : public ValueEvents<MergeEvents> {
public:
    using Merge = std::function<void(size_t, const json&)>;
    MergeEvents(const Merge& merge, const TableErrors& errors) : merge_(merge), errors_(errors) {}
    bool start_object(std::size_t) { return open(false); }
    bool start_array(std::size_t) { return open(true); }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool key(json::string_t&) { return true; }
    bool parse_error(std::size_t, const std::string&, const json::exception& e) { errors_.not_json(e); }

private:
    friend struct ValueEvents<MergeEvents>;
    // An element of the list: a string, or the strings of an array, which stays null once it
    // holds anything else (merge refuses both).
    bool value(json&& v) {
        if (depth_ == 0) errors_.fail("is not a JSON array");
        if (depth_ == 1) {
            merge_(rank_++, v);
        } else if (depth_ == 2 && element_.is_array() && v.is_string() && element_.size() < 3) {
            element_.push_back(std::move(v));
        } else {
            element_ = nullptr;
        }
        return true;
    }
    bool open(bool array) {
        if (depth_ == 0 && !array) errors_.fail("is not a JSON array");
        if (depth_ == 1) element_ = array ? json::array() : json();
        if (depth_ >= 2) element_ = nullptr;
        ++depth_;
        return true;
    }
    bool close() {
        if (--depth_ == 1) merge_(rank_++, element_);
        return true;
    }
    const Merge& merge_;
    const TableErrors& errors_;
    json element_;
    size_t depth_ = 0, rank_ = 0;
};

}  // namespace

TokenizerJsonParts cut_tokenizer_json(std::string_view text) {
    TokenizerJsonParts parts;
    std::vector<std::pair<Span, std::string_view*>> cuts;
    if (const auto model = member(text, 0, "model"))
        for (auto [key, table] : {std::pair{"vocab", &parts.vocab}, std::pair{"merges", &parts.merges}})
            if (const auto span = member(text, model->begin, key); span && (text[span->begin] == '{' || text[span->begin] == '['))
                cuts.push_back({*span, table});
    std::sort(cuts.begin(), cuts.end(), [](const auto& a, const auto& b) { return a.first.begin < b.first.begin; });
    size_t done = 0;
    for (const auto& [span, table] : cuts) {
        *table = text.substr(span.begin, span.end - span.begin);
        parts.rest.append(text.substr(done, span.begin - done)).append(text[span.begin] == '{' ? "{}" : "[]");
        done = span.end;
    }
    parts.rest.append(text.substr(done));
    return parts;
}

void stream_vocab(std::string_view object, const std::string& file,
                  const std::function<void(std::string&, const json&)>& entry) {
    const TableErrors errors{file, "model.vocab"};
    VocabEvents events(entry, errors);
    json::sax_parse(object.begin(), object.end(), &events);
}

void stream_merges(std::string_view array, const std::string& file,
                   const std::function<void(size_t, const json&)>& merge) {
    const TableErrors errors{file, "model.merges"};
    MergeEvents events(merge, errors);
    json::sax_parse(array.begin(), array.end(), &events);
}

}  // namespace gg::nn
