// bpe.h — the byte-level BPE tokenizer of GPT-2, Qwen2 and Qwen3, read from a Hugging Face
// tokenizer.json.
//
// The models in this library read bytes; checkpoints trained elsewhere read the ids of a
// byte-level BPE (Sennrich et al., arXiv:1508.07909; byte-level as in GPT-2). Encoding a text:
//   1. added tokens ("<|endoftext|>", "<|im_start|>") split it, leftmost and longest match
//      first, each occurrence becoming its id; they are matched in the raw text;
//   2. bytes that are not UTF-8 split each remaining segment again (our rule, as Hugging Face
//      takes only valid text): a byte that begins no valid UTF-8 sequence (a lone continuation
//      byte, a truncated or overlong sequence, a surrogate, 0xF5-0xFF) is a pre-token of its
//      own, the id of its single-byte token; every maximal valid span goes on alone;
//   3. the normalizer (NFC or none) rewrites each valid span;
//   4. the pre-tokenizer cuts it into pre-tokens: each Split regex in turn (Qwen2's file holds
//      one), then ByteLevel, which puts a space before each piece that lacks one where
//      add_prefix_space is set and cuts pieces with GPT-2's regex where use_regex is set;
//   5. each pre-token's bytes start as single-byte tokens; the adjacent pair whose merge comes
//      first in the file's list merges (leftmost among equals) until no pair has a merge. With
//      ignore_merges a pre-token that is itself in the vocabulary is taken whole.
// decode concatenates each id's bytes: the GPT-2 byte alphabet read back (each printable byte
// is its own character, the other 68 are U+0100 onwards) and an added token's content as it
// stands. It is the exact inverse of encode for NFC-normal text without add_prefix_space;
// otherwise decode(encode(s)) is s normalized, with the spaces add_prefix_space put in.
// padding and truncation in the file concern batches for a model and are not read.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gg::nn {

// How byte-level BPE files spell one byte: GPT-2's byte alphabet, as UTF-8 ("Ġ" for a space).
std::string byte_level_symbol(uint8_t byte);

class BpeTokenizer {
public:
    // Throw std::invalid_argument naming the file (from_json: "tokenizer.json") and the field
    // that is malformed or asks for something unsupported; from_file std::runtime_error where
    // the file cannot be read.
    static BpeTokenizer from_file(const std::string& tokenizer_json_path);
    static BpeTokenizer from_json(const std::string& json_text);

    // The ids of `text`, which may be any bytes. Adds no special token (encode_for_model does).
    std::vector<int64_t> encode(const std::string& text) const;
    // The bytes of `ids`. Throws std::out_of_range naming an id that names no token.
    std::string decode(const std::vector<int64_t>& ids) const;
    // 1 + the largest id of the vocabulary and the added tokens.
    int64_t vocab_size() const { return int64_t(token_bytes_.size()); }
    // The id of a token as the file spells it: in the byte alphabet ("Ġthe") or an added token.
    std::optional<int64_t> token_id(const std::string& token) const;
    // The token a TemplateProcessing post-processor puts before a single text (Llama 3's
    // <|begin_of_text|>); none for ByteLevel and null post-processors (GPT-2, Qwen2, Qwen3).
    std::optional<int64_t> prepended_token() const { return prepended_token_; }
    // What the model reads: prepended_token(), where there is one, then encode(text).
    std::vector<int64_t> encode_for_model(const std::string& text) const;

private:
    class Pattern;   // a compiled PCRE2 regex (bpe.cpp)
    struct Session;  // one encode call's scratch: match data, the pre-token cache, the ids
    struct Merge {
        int64_t rank, id;  // rank: the merge's place in the file's list
    };
    struct AddedToken {
        std::string content;
        int64_t id;
    };

    static BpeTokenizer parse(const std::string& json_text, const std::string& name);
    void encode_segment(std::string_view segment, Session& s) const;
    void pre_tokenize(std::string_view piece, size_t step, Session& s) const;
    void encode_pre_token(std::string_view bytes, Session& s) const;
    void merge(std::string_view bytes, Session& s) const;

    std::unordered_map<std::string, int64_t> vocab_;  // model.vocab, as spelled in the file
    std::vector<std::string> token_bytes_;            // id → the bytes decode writes
    std::vector<bool> has_token_;                     // false for ids no token has
    std::array<int64_t, 256> byte_ids_{};             // byte → its single-byte token
    std::unordered_map<uint64_t, Merge> merges_;      // (left id << 32 | right id) → merge
    std::vector<AddedToken> added_;                   // longest first
    std::array<bool, 256> added_starts_{};            // bytes some added token begins with
    bool nfc_ = false, ignore_merges_ = false, add_prefix_space_ = false;
    std::vector<std::shared_ptr<const Pattern>> splits_;  // the Split steps, in order
    std::shared_ptr<const Pattern> byte_level_regex_;     // GPT-2's, where use_regex is set
    std::optional<int64_t> prepended_token_;
};

}  // namespace gg::nn
