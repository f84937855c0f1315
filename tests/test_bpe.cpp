#include "nn/text/bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <doctest/doctest.h>
#include <pcre2.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using gg::nn::BpeTokenizer;
using Ids = std::vector<int64_t>;
using nlohmann::json;

// Failed checks print the ids.
template <>
struct doctest::StringMaker<std::vector<int64_t>> {
    static doctest::String convert(const std::vector<int64_t>& ids) {
        std::string text = "{";
        for (size_t i = 0; i < ids.size(); ++i) text += (i ? ", " : "") + std::to_string(ids[i]);
        return (text + "}").c_str();
    }
};

namespace {

// Qwen2's pre-tokenizer regex: letters with one leading non-letter, single digits, the
// contractions in either case, newlines kept with what precedes them.
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The GPT-2 byte alphabet, written here from its definition (printable bytes as themselves,
// the rest U+0100 onwards in byte order), so that the test does not lean on the code it checks.
std::string spelled(const std::string& bytes) {
    std::string out;
    for (unsigned char b : bytes) {
        unsigned c = b;
        if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
            c = 0x100;
            for (unsigned below = 0; below < b; ++below)
                if (!((below >= 0x21 && below <= 0x7E) || (below >= 0xA1 && below <= 0xAC) || below >= 0xAE)) ++c;
        }
        if (c < 0x80) {
            out += char(c);
        } else {
            out += char(0xC0 | (c >> 6));
            out += char(0x80 | (c & 0x3F));
        }
    }
    return out;
}

// A small tokenizer.json: byte b has id b, merges take ids from 256 in their order, then the
// added tokens. The merge list is ordered so that applying merges by any rule other than
// rank changes the result ("the": h+e before t+h, and "th e" exists only to catch the error).
const std::vector<std::pair<std::string, std::string>> kMerges{
    {"h", "e"},   {"t", "h"},    {"th", "e"},       {" ", "t"},        {" t", "he"},   {"i", "n"},
    {"in", "g"},  {"l", "l"},    {"'", "ll"},       {"\n", "\n"},      {" ", " "},     {"  ", "  "},
    {"1", "2"},   {"D", "O"},    {"DO", "N"},       {"'", "T"},        {"a", "b"},     {"\xE4", "\xBD"},
    {"\xE4\xBD", "\xA0"},        {"\xE5", "\xA5"},  {"\xE5\xA5", "\xBD"}, {"\xC3", "\xA9"}, {" ", "w"},
    {" w", "o"},  {" wo", "r"},  {"l", "d"},        {" wor", "ld"},    {"e", "r"},     {"o", "u"},
    {"a", "n"},   {"an", "d"},   {" ", "and"},      {"o", "n"},        {" t", "o"},    {"s", "t"},
    {"(", "t"},   {"\x8E", "!"},
};
const int64_t kEndOfText = 256 + int64_t(kMerges.size()), kImStart = kEndOfText + 1, kXyz = kImStart + 1;

struct Options {
    std::string pre_tokenizer = "qwen2";  // qwen2 (Split + ByteLevel) or gpt2 (ByteLevel's own regex)
    bool add_prefix_space = false, ignore_merges = false, merges_as_pairs = false, nfc = true;
    json post_processor = nullptr;
};

json tokenizer_json(const Options& o = {}) {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[spelled(std::string(1, char(b)))] = b;
    json merges = json::array();
    for (size_t i = 0; i < kMerges.size(); ++i) {
        const auto& [a, b] = kMerges[i];
        vocab[spelled(a + b)] = 256 + int64_t(i);
        if (o.merges_as_pairs)
            merges.push_back({spelled(a), spelled(b)});
        else
            merges.push_back(spelled(a) + " " + spelled(b));
    }
    vocab["xyz"] = kXyz;  // in the vocabulary with no merges to make it: ignore_merges alone gives it
    const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", o.add_prefix_space}, {"trim_offsets", false},
                             {"use_regex", o.pre_tokenizer == "gpt2"}};
    const json split = {{"type", "Split"}, {"pattern", {{"Regex", kQwen2Regex}}}, {"behavior", "Isolated"}, {"invert", false}};
    const auto added = [](int64_t id, const char* content) {
        return json{{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
                    {"rstrip", false},   {"normalized", false}, {"special", true}};
    };
    return {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", {added(kEndOfText, "<|endoftext|>"), added(kImStart, "<|im_start|>")}},
        {"normalizer", o.nfc ? json{{"type", "NFC"}} : json(nullptr)},
        {"pre_tokenizer", o.pre_tokenizer == "gpt2" ? byte_level : json{{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}}},
        {"post_processor", o.post_processor},
        {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
        {"model",
         {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
          {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", o.ignore_merges},
          {"vocab", vocab}, {"merges", merges}}},
    };
}

BpeTokenizer tokenizer(const Options& o = {}) { return BpeTokenizer::from_json(tokenizer_json(o).dump()); }

// The id the test's file gives the merge of a and b.
int64_t merged(const std::string& a, const std::string& b) {
    for (size_t i = 0; i < kMerges.size(); ++i)
        if (kMerges[i].first == a && kMerges[i].second == b) return 256 + int64_t(i);
    throw std::logic_error("no merge " + a + " + " + b + " in the test's list");
}

// The message from_json throws for the file's text, or "" where it accepts it.
std::string rejection(const std::string& text) {
    try {
        BpeTokenizer::from_json(text);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

void check_rejected(const std::string& text, std::initializer_list<const char*> words) {
    const std::string message = rejection(text);
    CAPTURE(message);
    CHECK(message.rfind("BpeTokenizer: tokenizer.json: ", 0) == 0);
    CHECK(message.find('\n') == std::string::npos);
    for (const char* w : words) CHECK(message.find(w) != std::string::npos);
}

void check_rejected(const json& file, std::initializer_list<const char*> words) { check_rejected(file.dump(), words); }

void check_round_trip(const BpeTokenizer& t, const std::string& text, const std::string& expected) {
    CAPTURE(text);
    CHECK(t.decode(t.encode(text)) == expected);
}

std::string encode_utf8(uint32_t c) {
    if (c < 0x80) return std::string(1, char(c));
    if (c < 0x800) return {char(0xC0 | c >> 6), char(0x80 | (c & 0x3F))};
    if (c < 0x10000) return {char(0xE0 | c >> 12), char(0x80 | (c >> 6 & 0x3F)), char(0x80 | (c & 0x3F))};
    return {char(0xF0 | c >> 18), char(0x80 | (c >> 12 & 0x3F)), char(0x80 | (c >> 6 & 0x3F)), char(0x80 | (c & 0x3F))};
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("bpe: merges apply by rank, whatever the order of the pairs in the text") {
    const BpeTokenizer t = tokenizer();
    CHECK(t.vocab_size() == kXyz + 1);
    CHECK(t.encode("") == Ids{});
    // h+e (rank 0) before t+h (rank 1): "the" is t|he; the other order would reach "th e".
    CHECK(t.encode("the") == Ids{'t', merged("h", "e")});
    CHECK(t.encode(" the") == Ids{merged(" t", "he")});
    CHECK(t.encode("the the") == Ids{'t', merged("h", "e"), merged(" t", "he")});
    CHECK(t.encode("thing") == Ids{merged("t", "h"), merged("in", "g")});
    CHECK(t.encode("The") == Ids{'T', merged("h", "e")});
    CHECK(t.encode(" world") == Ids{merged(" wor", "ld")});
    CHECK(t.encode(" and") == Ids{merged(" ", "and")});
    CHECK(t.encode("你好") == Ids{merged("\xE4\xBD", "\xA0"), merged("\xE5\xA5", "\xBD")});
    // Equal ranks merge leftmost first: three spaces are "  " then " ".
    CHECK(t.encode("\n\n\n") == Ids{merged("\n", "\n"), '\n'});
    CHECK(t.encode("    x") == Ids{merged(" ", " "), ' ', ' ', 'x'});
    CHECK(t.encode("        ") == Ids{merged("  ", "  "), merged("  ", "  ")});
    CHECK(t.token_id(spelled(" the")) == merged(" t", "he"));
    CHECK(t.token_id("<|im_start|>") == kImStart);
    CHECK(t.token_id("nope") == std::nullopt);
    // The old merge form, "a b", and the new, ["a", "b"], read the same.
    Options pairs;
    pairs.merges_as_pairs = true;
    CHECK(tokenizer(pairs).encode("the thing, the world") == t.encode("the thing, the world"));
}

TEST_CASE("bpe: the pre-tokenizer's regex decides what may merge") {
    const BpeTokenizer qwen = tokenizer();
    Options gpt2_options;
    gpt2_options.pre_tokenizer = "gpt2";
    const BpeTokenizer gpt2 = tokenizer(gpt2_options);
    // Qwen2 takes digits one at a time; GPT-2 takes runs of them.
    CHECK(qwen.encode("12") == Ids{'1', '2'});
    CHECK(gpt2.encode("12") == Ids{merged("1", "2")});
    // Contractions: Qwen2's group ignores case, GPT-2's does not.
    CHECK(qwen.encode("I'll") == Ids{'I', merged("'", "ll")});
    CHECK(qwen.encode("DON'T") == Ids{merged("DO", "N"), merged("'", "T")});
    CHECK(gpt2.encode("DON'T") == Ids{merged("DO", "N"), '\'', 'T'});
    // Qwen2 keeps one leading punctuation mark with a word; GPT-2 only a space.
    CHECK(qwen.encode("(the") == Ids{merged("(", "t"), merged("h", "e")});
    CHECK(gpt2.encode("(the") == Ids{'(', 't', merged("h", "e")});
    // \s is Unicode's White_Space, as in Hugging Face's regex engine: U+180E (bytes E1 A0 8E)
    // is not space, so it and the '!' after it are one piece, where their bytes can merge.
    CHECK(qwen.encode("\xE1\xA0\x8E!") == Ids{0xE1, 0xA0, merged("\x8E", "!")});
    CHECK(gpt2.encode("\xE1\xA0\x8E!") == Ids{0xE1, 0xA0, merged("\x8E", "!")});
}

TEST_CASE("bpe: added tokens are matched in the text, longest first, and decode to themselves") {
    const BpeTokenizer t = tokenizer();
    CHECK(t.encode("<|endoftext|>") == Ids{kEndOfText});
    CHECK(t.encode("<|im_start|>the<|endoftext|> the") ==
          Ids{kImStart, 't', merged("h", "e"), kEndOfText, merged(" t", "he")});
    // A text around a token is encoded as if the token split it into two texts.
    CHECK(t.encode("the<|endoftext|>the") == Ids{'t', merged("h", "e"), kEndOfText, 't', merged("h", "e")});
    CHECK(t.encode("<|endoftext") == Ids{'<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't'});
    check_round_trip(t, "<|im_start|>user\nhello<|endoftext|>", "<|im_start|>user\nhello<|endoftext|>");
    // Longest first: with both "<|a|>" and "<|a|>b" added, "<|a|>b" wins where it matches.
    json file = tokenizer_json();
    file["added_tokens"].push_back({{"id", kXyz + 1}, {"content", "<|a|>"}, {"special", true}});
    file["added_tokens"].push_back({{"id", kXyz + 2}, {"content", "<|a|>b"}, {"special", true}});
    const BpeTokenizer longer = BpeTokenizer::from_json(file.dump());
    CHECK(longer.encode("<|a|>b<|a|>") == Ids{kXyz + 2, kXyz + 1});
    CHECK(longer.vocab_size() == kXyz + 3);
}

TEST_CASE("bpe: decode(encode(s)) is s for NFC text in any script, and NFC(s) otherwise") {
    const BpeTokenizer t = tokenizer();
    for (const std::string& text : std::vector<std::string>{
             "Hello, world! The quick brown fox jumps over the lazy dog.",
             "你好，世界。我们今天去公园吧！",                                  // Chinese
             "مرحبا بالعالم، كيف حالك؟",                                       // Arabic
             "नमस्ते दुनिया, आप कैसे हैं?",                                       // Hindi
             "Ça va très bien, merci. Grüße aus Köln. ñandú",                  // composed accents
             "Привет, мир! Ελληνικά κείμενα. 日本語のテキスト。한국어 텍스트.",
             "👨‍👩‍👧‍👦 family, 👍🏽 thumbs, 🏳️‍🌈 flag, 🇯🇵 Japan",                 // ZWJ, modifiers, flags
             "  \n\n\t  x \r\n\r\n  \t\t y   ",                                  // whitespace runs
             "I'll, you'd, we're, they've, I'm, DON'T, She'S",                   // contractions
             "0123456789 3.14159 1,000,000 ١٢٣ ⅻ ½",                            // digits
             std::string("nul\0byte", 8),
         })
        check_round_trip(t, text, text);
    // Decomposed input comes back composed: e + U+0301, A + U+030A, Hangul jamo.
    check_round_trip(t, "caf\x65\xCC\x81", "caf\xC3\xA9");
    check_round_trip(t, "\x41\xCC\x8A", "\xC3\x85");
    check_round_trip(t, "\xE1\x84\x80\xE1\x85\xA1", "\xEA\xB0\x80");
    CHECK(t.encode("caf\x65\xCC\x81") == t.encode("caf\xC3\xA9"));
    // Without a normalizer every valid text comes back as it was.
    Options raw;
    raw.nfc = false;
    check_round_trip(tokenizer(raw), "caf\x65\xCC\x81", "caf\x65\xCC\x81");
}

TEST_CASE("bpe: bytes that are not UTF-8 are single-byte tokens and round-trip exactly") {
    const BpeTokenizer t = tokenizer();
    CHECK(t.encode("\xFF") == Ids{0xFF});
    CHECK(t.encode("a\x80" "b") == Ids{'a', 0x80, 'b'});                 // a lone continuation byte
    CHECK(t.encode("\xE4\xBD" "x") == Ids{0xE4, 0xBD, 'x'});             // a truncated sequence
    CHECK(t.encode("\xC0\xAF") == Ids{0xC0, 0xAF});                      // an overlong '/'
    CHECK(t.encode("\xE0\x80\xAF") == Ids{0xE0, 0x80, 0xAF});            // overlong, three bytes
    CHECK(t.encode("\xED\xA0\x80") == Ids{0xED, 0xA0, 0x80});            // a surrogate
    CHECK(t.encode("\xF4\x90\x80\x80") == Ids{0xF4, 0x90, 0x80, 0x80});  // above U+10FFFF
    CHECK(t.encode("\xE4\xBD\xA0") == Ids{merged("\xE4\xBD", "\xA0")});  // and the valid one merges
    // An invalid byte ends the pre-token before it: "ab" merges, "a\xFF" + "b" cannot.
    CHECK(t.encode("ab\xFF" "ab") == Ids{merged("a", "b"), 0xFF, merged("a", "b")});
    for (const char* text : {"\x80", "\xC3", "\xC3(", "\xE2\x82", "\xF0\x9F\x98", "\xFE\xFF", "th\xC3\xA9\xFF the"})
        check_round_trip(t, text, text);

    // Random bytes: exact without a normalizer; with NFC a second pass changes nothing.
    Options raw;
    raw.nfc = false;
    const BpeTokenizer exact = tokenizer(raw);
    std::mt19937 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
        std::string bytes(size_t(rng() % 200), '\0');
        for (char& c : bytes) c = char(trial % 3 == 0 ? rng() % 256 : rng() % 2 ? 0x80 + rng() % 64 : rng() % 128);
        CAPTURE(trial);
        CHECK(exact.decode(exact.encode(bytes)) == bytes);
        const std::string once = t.decode(t.encode(bytes));
        CHECK(t.decode(t.encode(once)) == once);
    }
}

TEST_CASE("bpe: long runs of one kind of character") {
    const BpeTokenizer t = tokenizer();
    for (const std::string& text : {std::string(1 << 20, ' '), std::string(1 << 20, 'a'), std::string(1 << 20, '\n')})
        check_round_trip(t, text, text);
    std::string chinese;
    for (int i = 0; i < 100000; ++i) chinese += i % 2 ? "你" : "好";
    const Ids ids = t.encode(chinese);
    CHECK(ids.size() == 100000);
    CHECK(t.decode(ids) == chinese);
}

TEST_CASE("bpe: ignore_merges takes a pre-token that is in the vocabulary whole") {
    Options o;
    CHECK(tokenizer(o).encode("xyz") == Ids{'x', 'y', 'z'});
    o.ignore_merges = true;
    CHECK(tokenizer(o).encode("xyz") == Ids{kXyz});
    CHECK(tokenizer(o).encode("the") == Ids{merged("th", "e")});  // a token, though no merge order reaches it
    CHECK(tokenizer(o).encode("thing") == Ids{merged("t", "h"), merged("in", "g")});
}

TEST_CASE("bpe: add_prefix_space puts a space before each piece that lacks one") {
    Options o;
    o.pre_tokenizer = "gpt2";
    o.add_prefix_space = true;
    const BpeTokenizer t = tokenizer(o);
    CHECK(t.encode("the") == Ids{merged(" t", "he")});
    CHECK(t.encode(" the") == Ids{merged(" t", "he")});
    CHECK(t.decode(t.encode("the world")) == " the world");
    // Each text between added tokens is a piece of its own.
    CHECK(t.encode("the<|endoftext|>the") == Ids{merged(" t", "he"), kEndOfText, merged(" t", "he")});
}

TEST_CASE("bpe: a TemplateProcessing post-processor gives the token put before the text") {
    CHECK(tokenizer().prepended_token() == std::nullopt);
    CHECK(tokenizer().encode_for_model("the") == tokenizer().encode("the"));
    const json template_processing = {
        {"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", json::array()},
        {"special_tokens", {{"<|endoftext|>", {{"id", "<|endoftext|>"}, {"ids", {kEndOfText}}, {"tokens", {"<|endoftext|>"}}}}}},
    };
    Options o;
    o.post_processor = template_processing;
    CHECK(tokenizer(o).prepended_token() == kEndOfText);
    CHECK(tokenizer(o).encode_for_model("the") == Ids{kEndOfText, 't', merged("h", "e")});
    CHECK(tokenizer(o).encode("the") == Ids{'t', merged("h", "e")});
    // Llama 3's form: a Sequence of ByteLevel (offsets only) and the template.
    o.post_processor = {{"type", "Sequence"},
                        {"processors", {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}}, template_processing}}};
    CHECK(tokenizer(o).prepended_token() == kEndOfText);
    o.post_processor = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}};
    CHECK(tokenizer(o).prepended_token() == std::nullopt);
    // A token after the text is not something encode_for_model can give.
    json trailing = tokenizer_json();
    trailing["post_processor"] = template_processing;
    trailing["post_processor"]["single"].push_back({{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}});
    check_rejected(trailing, {"post_processor.single[2]", "after the text", "<|endoftext|>"});
}

TEST_CASE("bpe: a Split regex that can match nothing still splits and round-trips") {
    json file = tokenizer_json();
    file["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "x*";
    const BpeTokenizer t = BpeTokenizer::from_json(file.dump());
    CHECK(t.encode("abxxab") == Ids{merged("a", "b"), 'x', 'x', merged("a", "b")});
    check_round_trip(t, "xxhexx the x", "xxhexx the x");
}

// A file with the Split steps `regexes`, in order, before ByteLevel.
json with_splits(const std::vector<std::string>& regexes) {
    json file = tokenizer_json();
    json steps = json::array();
    for (const std::string& regex : regexes)
        steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}});
    steps.push_back(file["pre_tokenizer"]["pretokenizers"][1]);
    file["pre_tokenizer"]["pretokenizers"] = steps;
    return file;
}

TEST_CASE("bpe: Split steps are bounded in number and run one after the other, not nested") {
    // 80k steps used to recurse once per step in encode, and overflowed the stack.
    check_rejected(with_splits(std::vector<std::string>(80000, kQwen2Regex)),
                   {"pre_tokenizer.pretokenizers[16]", "Split step 17", "more than 16"});
    // 16 are read, and a pre-token cut again by the same regex stays whole.
    const BpeTokenizer sixteen = BpeTokenizer::from_json(with_splits(std::vector<std::string>(16, kQwen2Regex)).dump());
    for (const char* text : {"the thing, the world", "I'll  12 你好\n\n"}) {
        CAPTURE(text);
        CHECK(sixteen.encode(text) == tokenizer().encode(text));
    }
    // Each step cuts what the previous one left: digits, then letters.
    const BpeTokenizer two = BpeTokenizer::from_json(with_splits({"\\p{N}", "\\p{L}+"}).dump());
    CHECK(two.encode("ab12ab") == Ids{merged("a", "b"), '1', '2', merged("a", "b")});
    check_round_trip(two, "the 12 things\n", "the 12 things\n");
}

TEST_CASE("bpe: the regexes of one text have a budget of time, not one per match") {
    // Every start inside a run of letters tries every way to split the run in two. Each call
    // of pcre2_match stays under PCRE2's own match limit, and this 20 KB text took minutes.
    const BpeTokenizer t = BpeTokenizer::from_json(with_splits({"\\p{L}*\\p{L}*!|x"}).dump());
    std::string text;
    for (int i = 0; i < 100; ++i) text += std::string(200, 'a') + "x";
    std::string message;
    try {
        t.encode(text);
    } catch (const std::runtime_error& e) {
        message = e.what();
    }
    CAPTURE(message);
    CHECK(message.find("regexes ran past their budget on a 20100-byte text") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
    // The same regex on a text it matches at once costs nothing.
    CHECK(t.encode("ab!") == Ids{merged("a", "b"), '!'});
}

TEST_CASE("bpe: a pre-token longer than kMaxWordBytes merges in pieces cut between characters") {
    const BpeTokenizer t = tokenizer();
    // "ab" merges, except across the cut after kMaxWordBytes bytes.
    std::string word(gg::nn::kMaxWordBytes - 1, 'x');
    word += "ab";
    Ids ids = t.encode(word);
    REQUIRE(ids.size() == word.size());
    CHECK(Ids(ids.end() - 2, ids.end()) == Ids{'a', 'b'});
    CHECK(t.encode(word.substr(1)).back() == merged("a", "b"));
    // A cut never splits a character: "你" is E4 BD A0, whose bytes merge whole.
    std::string chinese(gg::nn::kMaxWordBytes - 1, 'x');
    chinese += "你";
    ids = t.encode(chinese);
    CHECK(ids.back() == merged("\xE4\xBD", "\xA0"));
    CHECK(ids.size() == gg::nn::kMaxWordBytes);
    // One word of 50 MB ended in bad_alloc; in pieces, each takes a few MB to merge.
    const std::string huge(size_t(20) << 20, 'a');
    CHECK(t.encode(huge).size() == huge.size());
}

TEST_CASE("bpe: added tokens match leftmost first, then longest, in one pass over the text") {
    json file = tokenizer_json();
    const auto add = [&](const char* content, bool normalized = false) {
        const int64_t id = 1000 + int64_t(file["added_tokens"].size());
        file["added_tokens"].push_back({{"id", id}, {"content", content}, {"special", !normalized}, {"normalized", normalized}});
        return id;
    };
    const int64_t ab = add("ab"), bcd = add("bcd"), abc = add("abc"), b = add("b");
    const BpeTokenizer t = BpeTokenizer::from_json(file.dump());
    CHECK(t.encode("abcd") == Ids{abc, 'd'});                 // leftmost, then longest: not "ab", not "bcd"
    CHECK(t.encode("xbcd") == Ids{'x', bcd});                // "b" starts there too, "bcd" is longer
    CHECK(t.encode("abab b") == Ids{ab, ab, ' ', b});
    CHECK(t.token_id("bcd") == bcd);
}

TEST_CASE("bpe: 300k added tokens are read, and found in 1 MiB of text, in time linear in both") {
    // Tried at every byte, one token after the other, 20k added tokens took 108 s on 1 MB of
    // text; here every byte is a '<' that all 300k tokens begin with, which would take hours.
    const auto token = [](int i) { return std::string(1, '<').append(std::to_string(i)).append(1, '>'); };
    json file = tokenizer_json();
    for (int i = 0; i < 300000; ++i) file["added_tokens"].push_back({{"id", 2000 + i}, {"content", token(i)}, {"special", true}});
    const BpeTokenizer t = BpeTokenizer::from_json(file.dump());
    CHECK(t.vocab_size() == 302000);
    CHECK(t.token_id("<299999>") == 301999);
    std::string text;
    for (int i = 0; text.size() < (1 << 20); i = (i + 7919) % 300000) text += "<<<<<<<" + token(i);
    const Ids ids = t.encode(text);
    CHECK(t.decode(ids) == text);
    CHECK(std::count_if(ids.begin(), ids.end(), [](int64_t id) { return id >= 2000; }) > 50000);
    CHECK(Ids(ids.begin(), ids.begin() + 8) == Ids{'<', '<', '<', '<', '<', '<', '<', 2000});
}

TEST_CASE("bpe: added tokens with normalized set are matched after the normalizer, as in Hugging Face") {
    json file = tokenizer_json();  // its normalizer is NFC
    // "é" composed (C3 A9) and decomposed (65 CC 81); HF normalizes the content of a normalized token too.
    file["added_tokens"].push_back({{"id", 1000}, {"content", "caf\x65\xCC\x81"}, {"special", false}, {"normalized", true}});
    file["added_tokens"].push_back({{"id", 1001}, {"content", "<b>"}, {"special", true}, {"normalized", false}});
    file["added_tokens"].push_back({{"id", 1002}, {"content", "a<b"}, {"special", false}, {"normalized", true}});
    file["added_tokens"].push_back({{"id", 1003}, {"content", "n\xCC\x83o"}, {"special", true}, {"normalized", false}});
    const BpeTokenizer t = BpeTokenizer::from_json(file.dump());
    CHECK(t.encode("caf\xC3\xA9!") == Ids{1000, '!'});
    CHECK(t.encode("caf\x65\xCC\x81!") == Ids{1000, '!'});
    // The raw tokens split the text first: "<b>" wins over the normalized "a<b" that starts earlier.
    CHECK(t.encode("a<b>") == Ids{'a', 1001});
    CHECK(t.encode("a<b") == Ids{1002});
    // A raw token is matched before NFC would compose it away ("ñ" is n + U+0303 decomposed).
    CHECK(t.encode("n\xCC\x83o") == Ids{1003});
    // Its content twice is refused.
    file["added_tokens"].push_back({{"id", 1004}, {"content", "<b>"}, {"special", true}});
    check_rejected(file, {"added_tokens[6]", "added_tokens[3]", "<b>"});
}

TEST_CASE("bpe: a file whose large tables the scan cannot find is read from the JSON tree, the same") {
    // The scan (json_stream.h) knows keys only as written plainly; JSON may escape any letter.
    const std::string text = tokenizer_json().dump();
    const auto with_escape = [&](const std::string& key, const std::string& escaped) {
        std::string t = text;
        t.replace(t.find(key), key.size(), escaped);
        return t;
    };
    for (const auto& pair : std::vector<std::pair<std::string, std::string>>{
             {"\"vocab\"", "\"voc\\u0061b\""}, {"\"merges\"", "\"merge\\u0073\""}, {"\"model\"", "\"mod\\u0065l\""}}) {
        const auto& [key, escaped] = pair;
        CAPTURE(pair.second);  // the pair's member: clang 14's CAPTURE cannot name a structured binding
        const BpeTokenizer t = BpeTokenizer::from_json(with_escape(key, escaped));
        CHECK(t.encode("the thing, the world") == tokenizer().encode("the thing, the world"));
    }
    // Cut out, the tables are checked as strictly as in the tree.
    check_rejected(with_escape("\"merges\":[", "\"merges\":[[[\"a\"]],"), {"model.merges[0]", "neither"});
    check_rejected(with_escape("\"vocab\":{", "\"vocab\":{\"zz\":[1],"), {"model.vocab['zz']", "not a token id"});
    check_rejected(with_escape("\"vocab\":{", "\"vocab\":{\"a\":1,"), {"model.vocab has the token 'a' twice"});
}

TEST_CASE("bpe: decode names an id that names no token") {
    const BpeTokenizer t = tokenizer();
    CHECK(t.decode({'t', merged("h", "e"), kEndOfText}) == "the<|endoftext|>");
    for (int64_t id : {kXyz + 1, int64_t(-1), int64_t(1) << 40}) {
        CAPTURE(id);
        std::string message;
        try {
            t.decode({'a', id});
        } catch (const std::out_of_range& e) {
            message = e.what();
        }
        CHECK(message.find("id " + std::to_string(id)) != std::string::npos);
        CHECK(message.find("vocab size " + std::to_string(kXyz + 1)) != std::string::npos);
    }
}

TEST_CASE("bpe: a malformed or unsupported tokenizer.json gives one clear error") {
    json file = tokenizer_json();
    SUBCASE("not JSON") {
        const std::string message = [] {
            try {
                BpeTokenizer::from_json("{\"model\":");
            } catch (const std::invalid_argument& e) {
                return std::string(e.what());
            }
            return std::string();
        }();
        CHECK(message.rfind("BpeTokenizer: tokenizer.json: ", 0) == 0);
    }
    SUBCASE("no model") {
        file.erase("model");
        check_rejected(file, {"has no 'model'"});
    }
    SUBCASE("not a BPE model") {
        file["model"]["type"] = "WordPiece";
        check_rejected(file, {"model.type", "'WordPiece'", "not BPE"});
    }
    SUBCASE("a merge naming a token the vocabulary lacks") {
        file["model"]["merges"].push_back("zz q");
        const std::string where = "model.merges[" + std::to_string(kMerges.size()) + "]";
        check_rejected(file, {where.c_str(), "'zz'", "not in model.vocab"});
    }
    SUBCASE("a merge whose result the vocabulary lacks") {
        file["model"]["merges"].push_back("x y");
        check_rejected(file, {"merged token", "'xy'", "not in model.vocab"});
    }
    SUBCASE("a merge that is not a pair") {
        file["model"]["merges"].push_back("a b c");
        check_rejected(file, {"not two tokens and one space"});
    }
    SUBCASE("an unknown pre-tokenizer") {
        file["pre_tokenizer"]["pretokenizers"][1] = {{"type", "Metaspace"}, {"replacement", "_"}};
        check_rejected(file, {"pre_tokenizer.pretokenizers[1].type", "'Metaspace'", "not supported"});
    }
    SUBCASE("no ByteLevel step") {
        file["pre_tokenizer"]["pretokenizers"].erase(1);
        check_rejected(file, {"no ByteLevel"});
    }
    SUBCASE("a regex that does not compile") {
        file["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(a";
        check_rejected(file, {"Split 0", "does not compile"});
    }
    SUBCASE("an unsupported normalizer") {
        file["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}};
        check_rejected(file, {"normalizer.normalizers[1].type", "'Lowercase'", "not supported"});
    }
    SUBCASE("a byte without its token") {
        file["model"]["vocab"].erase(spelled("\xFF"));
        check_rejected(file, {"byte 255", "not a byte-level vocabulary"});
    }
    SUBCASE("two tokens with one id") {
        file["model"]["vocab"]["zz"] = 5;
        check_rejected(file, {"id 5", "'zz'"});
    }
    SUBCASE("an added token that strips spaces") {
        file["added_tokens"][0]["lstrip"] = true;
        check_rejected(file, {"added_tokens[0]", "<|endoftext|>", "lstrip"});
    }
    SUBCASE("a decoder that is not ByteLevel") {
        file["decoder"] = {{"type", "WordPiece"}};
        check_rejected(file, {"decoder", "'WordPiece'", "not ByteLevel"});
    }
}

TEST_CASE("bpe: from_file names the path it cannot read or parse") {
    const fs::path dir = fs::temp_directory_path() / ("gg_bpe_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string missing = (dir / "missing.json").string(), bad = (dir / "bad.json").string();
    std::ofstream(bad) << R"({"model": {"type": "Unigram"}})";
    for (const std::string& path : {missing, bad}) {
        CAPTURE(path);
        std::string message;
        try {
            BpeTokenizer::from_file(path);
        } catch (const std::exception& e) {
            message = e.what();
        }
        CHECK(message.find(path) != std::string::npos);
    }
    fs::remove_all(dir);
}

TEST_CASE("bpe: the ids of a file, for tests/reference/bpe_reference.py") {
    // bpe_reference.py sets GG_BPE_TOKENIZER (a tokenizer.json it wrote), GG_BPE_TEXT (its
    // corpus) and GG_BPE_OUT (a folder): this writes ids.txt, the ids on one line, and
    // decoded.bin, their decoding, and prints the encoding speed. Unset, it runs on this
    // file's own tokenizer and a short text, so that from_file is read here too.
    const char* tokenizer_path = std::getenv("GG_BPE_TOKENIZER");
    const char* text_path = std::getenv("GG_BPE_TEXT");
    const char* out = std::getenv("GG_BPE_OUT");
    const fs::path scratch = fs::temp_directory_path() / ("gg_bpe_reference_" + std::to_string(::getpid()));
    if (!tokenizer_path) {
        fs::create_directories(scratch);
        std::ofstream((scratch / "tokenizer.json").string()) << tokenizer_json().dump();
        std::ofstream((scratch / "text.txt").string(), std::ios::binary) << "the thing<|endoftext|> 你好 \xFF";
    }
    const BpeTokenizer t = BpeTokenizer::from_file(tokenizer_path ? tokenizer_path : (scratch / "tokenizer.json").string());
    const std::string text = read_all(text_path ? text_path : (scratch / "text.txt").string());
    const auto start = std::chrono::steady_clock::now();
    const Ids ids = t.encode(text);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("encoded %zu bytes into %zu ids in %.3f s: %.2f MB/s\n", text.size(), ids.size(), seconds,
                double(text.size()) / 1e6 / seconds);
    const fs::path folder = out ? fs::path(out) : scratch;
    {
        std::ofstream line((folder / "ids.txt").string());
        for (size_t i = 0; i < ids.size(); ++i) line << (i ? " " : "") << ids[i];
        line << "\n";
    }
    std::ofstream((folder / "decoded.bin").string(), std::ios::binary) << t.decode(ids);
    if (!tokenizer_path) {
        CHECK(ids == Ids{'t', merged("h", "e"), ' ', merged("t", "h"), merged("in", "g"), kEndOfText, ' ',
                         merged("\xE4\xBD", "\xA0"), merged("\xE5\xA5", "\xBD"), ' ', 0xFF});
        CHECK(read_all((scratch / "decoded.bin").string()) == text);
        fs::remove_all(scratch);
    }
}

// ---------------------------------------------------------------- against Hugging Face's tokenizers
// tests/reference/tokenizers/compare.mjs runs the two cases below (--no-skip): the first tells
// it which code points PCRE2's Unicode tables leave unassigned, the second checks our ids
// against the ones Hugging Face's tokenizers gave, text by text, vocabulary by vocabulary.

TEST_CASE("bpe: the code points PCRE2 does not know, for compare.mjs" * doctest::skip()) {
    const char* out = std::getenv("GG_BPE_UNKNOWN_OUT");
    REQUIRE(out != nullptr);
    int error = 0;
    PCRE2_SIZE offset = 0;
    const std::string regex = "^\\p{Cn}$";
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.data()), regex.size(), PCRE2_UTF, &error, &offset, nullptr);
    REQUIRE(code != nullptr);
    pcre2_match_data* match = pcre2_match_data_create(1, nullptr);
    json ranges = json::array();
    for (uint32_t c = 0; c <= 0x10FFFF; ++c) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        const std::string utf8 = encode_utf8(c);
        if (pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(utf8.data()), utf8.size(), 0, 0, match, nullptr) < 0) continue;
        if (!ranges.empty() && ranges.back()[1] == c - 1)
            ranges.back()[1] = c;
        else
            ranges.push_back({c, c});
    }
    pcre2_match_data_free(match);
    pcre2_code_free(code);
    std::ofstream(out) << ranges.dump();
    CHECK(ranges.size() > 100);  // Unicode 14 leaves some 830k code points in some 700 ranges unassigned
}

TEST_CASE("bpe: real vocabularies, id for id with Hugging Face's tokenizers" * doctest::skip()) {
    const char* folder = std::getenv("GG_BPE_HF_CASES");
    REQUIRE(folder != nullptr);
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(folder))
        if (entry.path().filename().string().rfind("cases-", 0) == 0) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    REQUIRE(files.size() >= 4);
    for (const fs::path& file : files) {
        const json reference = json::parse(read_all(file.string()));
        const std::string vocabulary = reference["vocabulary"];
        const auto start = std::chrono::steady_clock::now();
        const BpeTokenizer t = BpeTokenizer::from_file(reference["tokenizer"]);
        const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        size_t same = 0, newer_differ = 0, bytes = 0;
        for (const json& c : reference["cases"]) {
            const std::string name = c["name"], text = c["text"], decoded = c["decoded"];
            const Ids expected = c["ids"].get<Ids>();
            const Ids ids = t.encode(text);
            bytes += text.size();
            CAPTURE(vocabulary);
            CAPTURE(name);
            CHECK(t.decode(expected) == decoded);
            if (ids == expected) {
                ++same;
                continue;
            }
            if (c["newer_unicode"].get<bool>()) {  // its twin without those code points is checked instead
                ++newer_differ;
                continue;
            }
            const size_t at = size_t(std::mismatch(ids.begin(), ids.end(), expected.begin(), expected.end()).first - ids.begin());
            const auto window = [&](const Ids& v) { return Ids(v.begin() + std::ptrdiff_t(std::min(at, v.size())), v.begin() + std::ptrdiff_t(std::min(at + 8, v.size()))); };
            CAPTURE(at);
            CHECK(window(ids) == window(expected));
            CHECK(ids.size() == expected.size());
        }
        std::printf("%-12s %zu of %zu texts (%.2f MB) id for id; %zu with code points newer than PCRE2's Unicode differ; "
                    "loaded in %.2f s (Hugging Face: %.2f s)\n",
                    vocabulary.c_str(), same, reference["cases"].size(), double(bytes) / 1e6, newer_differ, load_s,
                    reference["reference_load_s"].get<double>());
    }
}
