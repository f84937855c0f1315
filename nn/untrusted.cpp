// untrusted.cpp — bounded JSON parsing and safe quoting (untrusted.h).
#include "nn/untrusted.h"

#include <stdexcept>
#include <vector>

namespace gg::nn {

namespace {

// The length of the UTF-8 sequence starting at text[i], or 0 when it is not a valid one
// (a stray continuation byte, a truncated or overlong sequence, a surrogate, past U+10FFFF).
size_t utf8_length(std::string_view text, size_t i) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char b = byte(i);
    size_t n = 0;
    uint32_t code = 0;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) n = 2, code = b & 0x1F;
    else if (b >= 0xE0 && b <= 0xEF) n = 3, code = b & 0x0F;
    else if (b >= 0xF0 && b <= 0xF4) n = 4, code = b & 0x07;
    else return 0;
    if (i + n > text.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
        code = (code << 6) | (byte(i + k) & 0x3F);
    }
    const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < smallest[n] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
    return n;
}

}  // namespace

std::string printable(std::string_view text, size_t max_bytes) {
    std::string out;
    size_t i = 0;
    for (; i < text.size() && i < max_bytes;) {
        const unsigned char b = static_cast<unsigned char>(text[i]);
        const size_t n = utf8_length(text, i);
        // U+0080..U+009F are C1 control characters: a terminal may act on them.
        const bool c1_control = n == 2 && b == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0;
        if (n == 1 && b >= 0x20 && b < 0x7F && b != '\\') {
            out += static_cast<char>(b);
        } else if (n > 1 && !c1_control) {
            out.append(text.substr(i, n));
        } else {
            const size_t m = n == 0 ? 1 : n;  // an invalid byte is escaped alone
            for (size_t k = 0; k < m; ++k) {
                static const char hex[] = "0123456789abcdef";
                const unsigned char e = static_cast<unsigned char>(text[i + k]);
                out += {'\\', 'x', hex[e >> 4], hex[e & 15]};
            }
            i += m;
            continue;
        }
        i += n;
    }
    if (i < text.size()) out += "...";
    return out;
}

namespace {

using nlohmann::json;

// Builds the tree from nlohmann's SAX events, checking every limit as each value arrives, so
// a hostile text stops the parse before the tree grows past them. (The parser with a callback
// would do the same checks, but after each object it scans the object's parent for values the
// callback dropped: quadratic in the number of siblings, 3.4 s of CPU for 20k tensors' header.)
class BoundedBuilder {
public:
    json root;
    std::string error;  // nlohmann's message for a syntax error or a number out of range

    bool null() { return add(nullptr); }
    bool boolean(bool b) { return add(b); }
    bool number_integer(json::number_integer_t n) { return add(n); }
    bool number_unsigned(json::number_unsigned_t n) { return add(n); }
    bool number_float(json::number_float_t x, const std::string&) { return add(x); }
    bool string(json::string_t& s) { return add(std::move(s)); }
    bool binary(json::binary_t& b) { return add(json::binary(std::move(b))); }
    bool start_object(std::size_t) { return open(json::object()); }
    bool start_array(std::size_t) { return open(json::array()); }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool key(json::string_t& k) {
        // An object is a std::map: finding the key is logarithmic, so the whole stays n log n.
        if (open_.back()->contains(k)) throw std::invalid_argument("JSON object has the key '" + printable(k) + "' twice");
        key_ = std::move(k);
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const json::exception& e) {
        error = e.what();
        return false;
    }

private:
    std::vector<json*> open_;  // the containers not closed yet, outermost first
    std::string key_;          // the key of the next value, inside an object
    size_t values_ = 0;

    // Puts a value in its place in the tree: the root, the next element of an array, or the
    // value of the last key of an object.
    bool add(json&& value) {
        place(std::move(value));
        return true;
    }
    json& place(json&& value) {
        if (++values_ > kMaxJsonValues)
            throw std::invalid_argument("JSON with more than " + std::to_string(kMaxJsonValues) + " values");
        if (open_.empty()) return root = std::move(value);
        json& parent = *open_.back();
        if (parent.is_array()) return parent.emplace_back(std::move(value));
        return parent[std::move(key_)] = std::move(value);
    }
    bool open(json&& container) {
        if (open_.size() >= size_t(kMaxJsonDepth))
            throw std::invalid_argument("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        // A container is the last value of its parent until it closes, and nothing is added
        // to the parent before then: the pointer stays valid.
        open_.push_back(&place(std::move(container)));
        return true;
    }
    bool close() {
        open_.pop_back();
        return true;
    }
};

}  // namespace

nlohmann::json parse_untrusted_json(std::string_view text) {
    BoundedBuilder builder;
    if (!json::sax_parse(text.begin(), text.end(), &builder)) {
        // "[json.exception.parse_error.101] parse error at line 1, column 6: ...; last read: '<input>'"
        std::string what = builder.error;
        if (const size_t end = what.find("] "); end != std::string::npos) what.erase(0, end + 2);
        throw std::invalid_argument("not valid JSON: " + printable(what, 160));
    }
    return std::move(builder.root);
}

}  // namespace gg::nn
