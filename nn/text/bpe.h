// bpe.h — the byte-level BPE tokenizer of GPT-2, Qwen2, Qwen3, Llama 3 and DeepSeek-V3, read
// from a Hugging Face tokenizer.json.
//
// The models in this library read bytes; checkpoints trained elsewhere read the ids of a
// byte-level BPE (Sennrich et al., arXiv:1508.07909; byte-level as in GPT-2). Encoding a text:
//   1. added tokens ("<|endoftext|>", "<|im_start|>") whose `normalized` is false split it,
//      each occurrence becoming its id: the leftmost match first, the longest one that starts
//      there (added_tokens.h); they are matched in the raw text;
//   2. bytes that are not UTF-8 split each remaining segment again (our rule, as Hugging Face
//      takes only valid text): a byte that begins no valid UTF-8 sequence (a lone continuation
//      byte, a truncated or overlong sequence, a surrogate, 0xF5-0xFF) is a pre-token of its
//      own, the id of its single-byte token; every maximal valid span goes on alone;
//   3. the normalizer (NFC or none) rewrites each valid span, and the added tokens whose
//      `normalized` is true (their content normalized too) split it as in 1;
//   4. the pre-tokenizer cuts each piece into pre-tokens: each Split regex in turn (Qwen2's
//      file holds one, DeepSeek-V3's three), then ByteLevel, which puts a space before each
//      piece that lacks one where add_prefix_space is set and cuts pieces with GPT-2's regex
//      where use_regex is set. The regexes of one text share a budget of time (regex.h);
//   5. each pre-token's bytes start as single-byte tokens; the adjacent pair whose merge comes
//      first in the file's list merges (leftmost among equals) until no pair has a merge. With
//      ignore_merges a pre-token that is itself in the vocabulary is taken whole. A pre-token
//      longer than kMaxWordBytes is first cut into pieces of at most that many bytes (each cut
//      moved back to the start of a character), which merge each on their own: a token never
//      spans a cut, where Hugging Face would merge the whole. Such pre-tokens are runs of one
//      kind of character (64 KiB of letters with no space, digit or punctuation mark): no
//      real text has them, and 1 MiB runs of a space, a letter or a CJK character still get
//      Hugging Face's ids (tests/reference/tokenizers/).
// decode concatenates each id's bytes: the GPT-2 byte alphabet read back (each printable byte
// is its own character, the other 68 are U+0100 onwards) and an added token's content as it
// stands. It is the exact inverse of encode for NFC-normal text without add_prefix_space;
// otherwise decode(encode(s)) is s normalized, with the spaces add_prefix_space put in.
// padding and truncation in the file concern batches for a model and are not read. Added
// tokens with lstrip, rstrip or single_word are refused: no byte-level tokenizer uses them.
#pragma once
#include <array>
#include <functional>
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

class AddedTokens;  // added_tokens.h
class Regex;        // regex.h

// A pre-token longer than this is merged in pieces (see above): the bound keeps the scratch
// of merging one pre-token under 5 MB (12 bytes a symbol, 20 a candidate pair), whatever the text.
constexpr size_t kMaxWordBytes = size_t(64) << 10;

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
    friend class TokenizerJson;  // bpe_json.cpp: reads a tokenizer.json into one
    struct Session;  // one encode call's scratch: the regexes' budget, the pre-token cache, the ids
    struct Merge {
        int32_t rank, id;  // rank: the merge's place in the file's list
    };
    // Looks strings up by std::string_view too, with no copy.
    struct TextHash {
        using is_transparent = void;
        size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
    };
    using TextMap = std::unordered_map<std::string, int64_t, TextHash, std::equal_to<>>;
    // The ids of a merge's pair as one hash key.
    static uint64_t pair_key(int64_t left, int64_t right) { return uint64_t(left) << 32 | uint64_t(right); }

    void encode_segment(std::string_view segment, Session& s) const;
    void encode_valid(std::string_view span, Session& s) const;
    void pre_tokenize(std::string_view piece, Session& s) const;
    void encode_word(std::string_view bytes, Session& s) const;
    void merge(std::string_view bytes, Session& s) const;

    TextMap vocab_;                                   // model.vocab, as spelled in the file
    std::vector<std::string> token_bytes_;            // id → the bytes decode writes
    std::vector<bool> has_token_;                     // false for ids no token has
    std::array<int64_t, 256> byte_ids_{};             // byte → its single-byte token
    std::unordered_map<uint64_t, Merge> merges_;      // (left id << 32 | right id) → merge
    TextMap added_;                                   // each added token's content → its id
    std::shared_ptr<const AddedTokens> added_raw_, added_normalized_;  // steps 1 and 3
    bool nfc_ = false, ignore_merges_ = false, add_prefix_space_ = false;
    std::vector<std::shared_ptr<const Regex>> splits_;  // the Split steps, in order
    std::shared_ptr<const Regex> byte_level_regex_;     // GPT-2's, where use_regex is set
    std::optional<int64_t> prepended_token_;
};

}  // namespace gg::nn
