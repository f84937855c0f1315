// load_tokenizer.h — reading a tokenizer.json someone else wrote and encoding a text with
// it, on one candidate input: the fuzzer (fuzz_tokenizer.cpp) feeds it mutated bytes, and the
// default suite (test_fuzz_corpus.cpp) replays tests/fuzz/corpus/tokenizer/ through it.
//
// The input is a tokenizer.json, then optionally two zero bytes and a text to encode (else a
// fixed text with an added token, digits, spaces and bytes that are not UTF-8). Reading must
// give a tokenizer or a clean one-line error; encoding must give ids that decode, or a clean
// one-line error (a regex over its budget). Anything else — a crash, a sanitizer report, a
// hang, an allocation past the fuzzer's limit — is a bug to fix.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "gatedgrad.h"
#include "tests/fuzz/load_untrusted.h"

namespace gg::fuzz {

inline std::vector<std::string> load_tokenizer(std::string_view bytes) {
    std::vector<std::string> problems;
    const size_t cut = bytes.find(std::string_view("\0\0", 2));
    const std::string json(bytes.substr(0, cut));
    const std::string text = cut == std::string_view::npos ? std::string("the <|endoftext|> 12  \xFF caf\x65\xCC\x81 \xE4\xBD\xA0")
                                                           : std::string(bytes.substr(cut + 2));
    const auto clean = [&](const char* step, const std::exception& e) {
        if (const std::string why = bad_message(e.what()); !why.empty()) problems.push_back(std::string(step) + ": " + why);
    };
    try {
        const nn::BpeTokenizer t = nn::BpeTokenizer::from_json(json);
        try {
            const std::vector<int64_t> ids = t.encode(text);
            if (t.decode(ids).empty() != text.empty()) problems.push_back("decode(encode(text)) lost the text");
        } catch (const std::exception& e) {
            clean("encode", e);
        }
    } catch (const std::exception& e) {
        clean("from_json", e);
    }
    return problems;
}

}  // namespace gg::fuzz
