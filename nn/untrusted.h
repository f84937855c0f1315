// untrusted.h — reading what someone else wrote: JSON with bounded nesting and size, and
// strings quoted safely into error messages.
//
// Checkpoint headers, their metadata and config files come from downloads and other
// people's runs. A hostile one can nest arrays 100k deep (a recursive printer overflows the
// stack), repeat a key (the reader would keep whichever came last), carry a 100 KB name or
// bytes that are not UTF-8 (and would land raw in a one-line error). Everything that reads
// such text goes through here.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gg::nn {

// Far deeper than any config or safetensors header (they nest 3 levels), far shallower
// than what would strain a stack.
constexpr int kMaxJsonDepth = 64;
// A safetensors header holds about 16 JSON values per tensor: this admits 250k tensors
// and keeps the parsed tree of the largest header allowed to a few hundred MB.
constexpr size_t kMaxJsonValues = 4'000'000;

// Parses JSON text from an untrusted source. Throws std::invalid_argument with a one-line
// reason (a syntax error at byte N, a number out of range, nesting deeper than
// kMaxJsonDepth, more than kMaxJsonValues values, a key twice in one object) that never
// echoes more than a short escaped piece of the input.
nlohmann::json parse_untrusted_json(std::string_view text);

// `text` as it may appear in a message: at most `max_bytes` of it (then "..."), with
// control characters, backslashes and bytes that are not UTF-8 written as \xNN escapes.
std::string printable(std::string_view text, size_t max_bytes = 64);

}  // namespace gg::nn
