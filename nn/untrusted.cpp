// untrusted.cpp — bounded JSON parsing and safe quoting (untrusted.h).
#include "nn/untrusted.h"

#include <set>
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

nlohmann::json parse_untrusted_json(std::string_view text) {
    using nlohmann::json;
    const auto fail = [](const std::string& why) { throw std::invalid_argument(why); };
    // The parser itself is iterative; this callback sees every value as it is read and
    // stops the parse at the first one that breaks a limit, before the tree grows further.
    std::vector<std::set<std::string>> keys;  // the keys seen so far in each open object
    size_t values = 0;
    const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
        switch (event) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
                if (depth >= kMaxJsonDepth) fail("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
                if (event == json::parse_event_t::object_start) keys.emplace_back();
                [[fallthrough]];
            case json::parse_event_t::value:
                if (++values > kMaxJsonValues) fail("JSON with more than " + std::to_string(kMaxJsonValues) + " values");
                break;
            case json::parse_event_t::key:
                if (!keys.back().insert(parsed.get<std::string>()).second)
                    fail("JSON object has the key '" + printable(parsed.get<std::string>()) + "' twice");
                break;
            case json::parse_event_t::object_end: keys.pop_back(); break;
            case json::parse_event_t::array_end: break;
        }
        return true;
    };
    try {
        return json::parse(text.begin(), text.end(), check);
    } catch (const json::exception& e) {  // a syntax error, or out_of_range for a number like 1e3088
        // "[json.exception.parse_error.101] parse error at line 1, column 6: ...; last read: '<input>'"
        std::string what = e.what();
        if (const size_t end = what.find("] "); end != std::string::npos) what.erase(0, end + 2);
        throw std::invalid_argument("not valid JSON: " + printable(what, 160));
    }
}

}  // namespace gg::nn
