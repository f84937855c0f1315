// byte_tokenizer.cpp — the byte tokenizer as a byte-level BPE tokenizer.json.
#include "nn/text/byte_tokenizer.h"

#include <nlohmann/json.hpp>

#include "nn/text/bytes.h"

namespace gg::nn {

using json = nlohmann::json;

std::string byte_tokenizer_json() {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_level_symbol(uint8_t(b))] = b;
    const json bos = {{"id", kBOS}, {"content", "<|bos|>"}, {"single_word", false}, {"lstrip", false},
                      {"rstrip", false}, {"normalized", false}, {"special", true}};
    const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                             {"use_regex", false}};
    const json bos_first = {{"SpecialToken", {{"id", "<|bos|>"}, {"type_id", 0}}}};
    const json text = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
    const json pair = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
    return json{{"version", "1.0"},
                {"truncation", nullptr},
                {"padding", nullptr},
                {"added_tokens", json::array({bos})},
                {"normalizer", nullptr},
                {"pre_tokenizer", byte_level},
                {"post_processor", {{"type", "TemplateProcessing"},
                                    {"single", json::array({bos_first, text})},
                                    {"pair", json::array({bos_first, text, pair})},
                                    {"special_tokens", {{"<|bos|>", {{"id", "<|bos|>"}, {"ids", {kBOS}},
                                                                     {"tokens", {"<|bos|>"}}}}}}}},
                {"decoder", byte_level},
                {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                           {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                           {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
                           {"merges", json::array()}}}}
        .dump();
}

BpeTokenizer byte_tokenizer() { return BpeTokenizer::from_json(byte_tokenizer_json()); }

bool is_byte_tokenizer(const BpeTokenizer& t) {
    if (t.vocab_size() != kByteVocab || t.prepended_token() != kBOS) return false;
    for (int b = 0; b < 256; ++b) {
        const std::string byte(1, char(b));
        if (t.encode(byte) != std::vector<int64_t>{b} || t.decode({b}) != byte) return false;
    }
    return true;
}

}  // namespace gg::nn
