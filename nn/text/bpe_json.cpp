// bpe_json.cpp — reading a Hugging Face tokenizer.json into a BpeTokenizer (bpe.h): every
// field it uses checked, every error naming the file and the field.
#include <stdexcept>

#include "nn/files.h"
#include "nn/text/added_tokens.h"
#include "nn/text/bpe.h"
#include "nn/text/byte_level.h"
#include "nn/text/json_stream.h"
#include "nn/text/regex.h"
#include "nn/untrusted.h"

namespace gg::nn {

namespace {

using nlohmann::json;

// An id bound far above any released vocabulary (Gemma's 262k), so that a file naming id
// 2^31 cannot make decode's table take gigabytes.
constexpr int64_t kMaxTokenId = int64_t(1) << 24;
// DeepSeek-V3's pre-tokenizer has the most Split steps of the real ones: three. Each step is
// a regex over the whole text; a file with 80k of them was a hostile one.
constexpr size_t kMaxSplitSteps = 16;

// A token id: a whole number in [0, kMaxTokenId).
bool is_token_id(const json& value) {
    return value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() < kMaxTokenId;
}

// Reads the JSON of one file; every error names the file and the field.
struct Reader {
    std::string name;

    [[noreturn]] void fail(const std::string& what) const {
        throw std::invalid_argument("BpeTokenizer: " + name + ": " + what);
    }
    const json& at(const json& object, const char* key, const std::string& where) const {
        if (!object.is_object()) fail(where + " is a JSON " + object.type_name() + ", not an object");
        const auto it = object.find(key);
        if (it == object.end()) fail(where + " has no '" + key + "'");
        return *it;
    }
    const json& typed(const json& object, const char* key, const std::string& where, json::value_t type) const {
        const json& value = at(object, key, where);
        if (value.type() != type) fail(where + "." + key + " is a JSON " + value.type_name() + ", not " + json(type).type_name());
        return value;
    }
    std::string string(const json& object, const char* key, const std::string& where) const {
        return typed(object, key, where, json::value_t::string).get<std::string>();
    }
    bool flag(const json& object, const char* key, const std::string& where, bool absent) const {
        if (!object.contains(key)) return absent;
        return typed(object, key, where, json::value_t::boolean).get<bool>();
    }
    int64_t id(const json& value, const std::string& where) const {
        if (!is_token_id(value)) not_an_id(where);
        return value.get<int64_t>();
    }
    [[noreturn]] void not_an_id(const std::string& where) const {
        fail(where + " is not a token id (a whole number from 0 below " + std::to_string(kMaxTokenId) + ")");
    }
    std::string type_of(const json& step, const std::string& where) const { return string(step, "type", where); }
    // An optional member: null where absent.
    static const json& optional(const json& object, const char* key) {
        static const json null;
        const auto it = object.find(key);
        return it == object.end() ? null : *it;
    }
};

bool read_normalizer(const json& normalizer, const std::string& where, const Reader& r) {
    if (normalizer.is_null()) return false;
    const std::string type = r.type_of(normalizer, where);
    if (type == "NFC") return true;
    if (type != "Sequence")
        r.fail(where + ".type '" + printable(type) + "' is not supported (null, NFC, or a Sequence of them)");
    const json& list = r.typed(normalizer, "normalizers", where, json::value_t::array);
    bool nfc = false;
    for (size_t i = 0; i < list.size(); ++i)
        nfc = read_normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]", r) || nfc;
    return nfc;
}

struct PreTokenizerSteps {
    std::vector<std::string> split_regexes;
    bool byte_level = false, add_prefix_space = false, use_regex = true;
};

// Sequences nest at most as deep as the JSON (kMaxJsonDepth); their Split steps, in order,
// are at most kMaxSplitSteps.
void read_pre_tokenizer(const json& step, const std::string& where, const Reader& r, PreTokenizerSteps& steps) {
    const std::string type = r.type_of(step, where);
    // After ByteLevel a regex would see the byte alphabet ("Ġ" for a space), not the text.
    if (steps.byte_level) r.fail(where + " (" + printable(type) + ") comes after ByteLevel, which must be the last step");
    if (type == "Sequence") {
        const json& list = r.typed(step, "pretokenizers", where, json::value_t::array);
        for (size_t i = 0; i < list.size(); ++i)
            read_pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]", r, steps);
    } else if (type == "Split") {
        if (steps.split_regexes.size() == kMaxSplitSteps)
            r.fail(where + " is Split step " + std::to_string(kMaxSplitSteps + 1) + ": more than " +
                   std::to_string(kMaxSplitSteps) + " are not supported (real tokenizers have at most 3)");
        const json& pattern = r.typed(step, "pattern", where, json::value_t::object);
        if (!pattern.contains("Regex")) r.fail(where + ".pattern is not {\"Regex\": ...}, the one form supported");
        const std::string behavior = r.string(step, "behavior", where);
        if (behavior != "Isolated")
            r.fail(where + ".behavior '" + printable(behavior) + "' is not supported (Isolated keeps every byte)");
        if (r.flag(step, "invert", where, false)) r.fail(where + ".invert true is not supported");
        steps.split_regexes.push_back(r.string(pattern, "Regex", where + ".pattern"));
    } else if (type == "ByteLevel") {
        steps.byte_level = true;
        steps.add_prefix_space = r.typed(step, "add_prefix_space", where, json::value_t::boolean).get<bool>();
        steps.use_regex = r.flag(step, "use_regex", where, true);
    } else {
        r.fail(where + ".type '" + printable(type) + "' is not supported (ByteLevel, Split, or a Sequence of them)");
    }
}

// The id a post-processor puts before a single text, if any.
std::optional<int64_t> read_post_processor(const json& processor, const std::string& where, const Reader& r) {
    if (processor.is_null()) return std::nullopt;
    const std::string type = r.type_of(processor, where);
    if (type == "ByteLevel") return std::nullopt;  // it trims offsets, which encode does not return
    if (type == "Sequence") {
        const json& list = r.typed(processor, "processors", where, json::value_t::array);
        std::optional<int64_t> first;
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string item = where + ".processors[" + std::to_string(i) + "]";
            const std::optional<int64_t> one = read_post_processor(list[i], item, r);
            if (one && first) r.fail(item + " puts a second token before the text, which is not supported");
            if (one) first = one;
        }
        return first;
    }
    if (type != "TemplateProcessing")
        r.fail(where + ".type '" + printable(type) + "' is not supported (null, ByteLevel, TemplateProcessing, or a Sequence of them)");
    const json& single = r.typed(processor, "single", where, json::value_t::array);
    std::optional<int64_t> first;
    bool text_seen = false;
    for (size_t i = 0; i < single.size(); ++i) {
        const std::string item = where + ".single[" + std::to_string(i) + "]";
        if (single[i].is_object() && single[i].contains("Sequence")) {
            text_seen = true;
            continue;
        }
        const std::string token = r.string(r.at(single[i], "SpecialToken", item), "id", item + ".SpecialToken");
        if (text_seen) r.fail(item + ": a special token after the text ('" + printable(token) + "') is not supported");
        if (first) r.fail(item + ": a second special token before the text ('" + printable(token) + "') is not supported");
        const std::string entry = where + ".special_tokens['" + printable(token) + "']";
        const json& ids = r.typed(r.at(r.at(processor, "special_tokens", where), token.c_str(), where + ".special_tokens"),
                                  "ids", entry, json::value_t::array);
        if (ids.size() != 1) r.fail(entry + ".ids holds " + std::to_string(ids.size()) + " ids, not one");
        first = r.id(ids[0], entry + ".ids[0]");
    }
    return first;
}

// The added tokens of the file, split by where they are matched (bpe.h, steps 1 and 3).
struct AddedTokenLists {
    std::vector<AddedTokens::Token> raw, normalized;
};

AddedTokenLists read_added_tokens(const json& list, bool nfc, const Reader& r) {
    AddedTokenLists lists;
    if (list.is_null()) return lists;
    if (!list.is_array()) r.fail(std::string("added_tokens is a JSON ") + list.type_name() + ", not array");
    std::unordered_map<std::string_view, size_t> first_with;  // content → the entry that has it
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string where = "added_tokens[" + std::to_string(i) + "]";
        AddedTokens::Token token{r.string(list[i], "content", where), r.id(r.at(list[i], "id", where), where + ".id")};
        if (token.content.empty()) r.fail(where + ".content is empty");
        for (const char* option : {"lstrip", "rstrip", "single_word"})
            if (r.flag(list[i], option, where, false))
                r.fail(where + " ('" + printable(token.content) + "') sets " + option + ", which is not supported");
        const std::string& content = list[i]["content"].get_ref<const std::string&>();
        if (const auto [it, fresh] = first_with.emplace(content, i); !fresh)
            r.fail(where + " has the content of added_tokens[" + std::to_string(it->second) + "] ('" + printable(content) + "')");
        // Hugging Face's default: a special token is matched in the raw text, another normalized.
        const bool special = r.flag(list[i], "special", where, false);
        (r.flag(list[i], "normalized", where, !special) ? lists.normalized : lists.raw).push_back(std::move(token));
    }
    // A normalized token is matched in normalized text: its content is normalized first.
    if (nfc)
        for (AddedTokens::Token& t : lists.normalized) {
            std::string out;
            t.content = std::string(byte_level::nfc(t.content, out));
        }
    return lists;
}

}  // namespace

// The parts of a file that fill a BpeTokenizer's tables, in the order they need each other.
class TokenizerJson {
public:
    static BpeTokenizer read(const std::string& json_text, const std::string& name);

private:
    static void read_vocabulary(const json& model, std::string_view table, const Reader& r, BpeTokenizer& t);
    static void read_merges(const json& model, std::string_view table, const Reader& r, BpeTokenizer& t);
    static void add_added_tokens(AddedTokenLists added, BpeTokenizer& t);
    static void read_pre_tokenizer_steps(const json& root, const Reader& r, BpeTokenizer& t);
};

// A vocabulary of a million tokens with as many merges is some 50 MB of JSON: a larger file
// is not a tokenizer, and is refused before it is read.
constexpr uint64_t kMaxTokenizerBytes = uint64_t(256) << 20;

BpeTokenizer BpeTokenizer::from_file(const std::string& tokenizer_json_path) {
    std::string text;
    try {
        text = read_file(tokenizer_json_path, kMaxTokenizerBytes);  // a regular file, not a FIFO or /dev/zero
    } catch (const std::runtime_error& e) {
        throw std::runtime_error(std::string("BpeTokenizer: ") + e.what());
    }
    return TokenizerJson::read(text, tokenizer_json_path);
}

BpeTokenizer BpeTokenizer::from_json(const std::string& json_text) { return TokenizerJson::read(json_text, "tokenizer.json"); }

BpeTokenizer TokenizerJson::read(const std::string& json_text, const std::string& name) {
    const Reader r{name};
    const TokenizerJsonParts parts = cut_tokenizer_json(json_text);  // json_stream.h
    json root;
    try {
        root = parse_untrusted_json(parts.rest);
    } catch (const std::invalid_argument& e) {
        // Where it fails, the file itself tells the line and column.
        try {
            parse_untrusted_json(json_text);
        } catch (const std::invalid_argument& whole) {
            r.fail(whole.what());
        }
        r.fail(e.what());
    }
    if (!root.is_object()) r.fail(std::string("a JSON ") + root.type_name() + ", not an object");
    BpeTokenizer t;
    const json& model = r.typed(root, "model", "the file", json::value_t::object);
    if (const std::string type = r.string(model, "type", "model"); type != "BPE")
        r.fail("model.type is '" + printable(type) + "', not BPE");
    if (!Reader::optional(model, "dropout").is_null())
        r.fail("model.dropout is set: BPE dropout samples its merges, and encode is deterministic");
    for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
        if (const json& value = Reader::optional(model, affix); !value.is_null() && value != "")
            r.fail(std::string("model.") + affix + " is set, which no byte-level BPE uses");
    t.ignore_merges_ = r.flag(model, "ignore_merges", "model", false);
    read_vocabulary(model, parts.vocab, r, t);
    read_merges(model, parts.merges, r, t);
    t.nfc_ = read_normalizer(Reader::optional(root, "normalizer"), "normalizer", r);
    add_added_tokens(read_added_tokens(Reader::optional(root, "added_tokens"), t.nfc_, r), t);
    read_pre_tokenizer_steps(root, r, t);

    const json& decoder = Reader::optional(root, "decoder");
    if (decoder.is_null() || r.type_of(decoder, "decoder") != "ByteLevel")
        r.fail("decoder is " + (decoder.is_null() ? std::string("null") : "'" + printable(r.type_of(decoder, "decoder")) + "'") +
               ", not ByteLevel");
    t.prepended_token_ = read_post_processor(Reader::optional(root, "post_processor"), "post_processor", r);
    if (t.prepended_token_ && (*t.prepended_token_ >= t.vocab_size() || !t.has_token_[size_t(*t.prepended_token_)]))
        r.fail("post_processor puts id " + std::to_string(*t.prepended_token_) + " first, which names no token");
    return t;
}

// The text of a large table: as the scan found it, or else read back from the tree.
std::string_view table_text(const json& placeholder, std::string_view found, std::string& dumped) {
    if (!found.empty()) return found;
    dumped = placeholder.dump();
    return dumped;
}

// model.vocab: each token's id, and the bytes it decodes to.
void TokenizerJson::read_vocabulary(const json& model, std::string_view table, const Reader& r, BpeTokenizer& t) {
    std::string dumped;
    table = table_text(r.typed(model, "vocab", "model", json::value_t::object), table, dumped);
    std::vector<const std::string*> id_token;  // id → its token, a key of vocab_
    t.vocab_.reserve(table.size() / 16);       // a token takes some 20 bytes of the file
    stream_vocab(table, r.name, [&](std::string& token, const json& value) {
        // Messages are built only on failure: a vocabulary has 150k tokens.
        if (!is_token_id(value)) r.not_an_id("model.vocab['" + printable(token) + "']");
        if (token.empty()) r.fail("model.vocab holds an empty token");
        const auto id = size_t(value.get<int64_t>());
        if (id >= id_token.size()) id_token.resize(id + 1);
        if (id_token[id])
            r.fail("model.vocab gives id " + std::to_string(id) + " to both '" + printable(*id_token[id]) + "' and '" +
                   printable(token) + "'");
        const auto [it, fresh] = t.vocab_.emplace(std::move(token), int64_t(id));
        if (!fresh) r.fail("model.vocab has the token '" + printable(it->first) + "' twice");
        id_token[id] = &it->first;
    });
    t.token_bytes_.resize(id_token.size());
    t.has_token_.resize(id_token.size());
    for (size_t id = 0; id < id_token.size(); ++id)
        if (id_token[id]) t.token_bytes_[id] = byte_level::token_to_bytes(*id_token[id]), t.has_token_[id] = true;
    for (int b = 0; b < 256; ++b) {
        const std::string token = byte_level_symbol(uint8_t(b));
        const auto it = t.vocab_.find(token);
        if (it == t.vocab_.end())
            r.fail("model.vocab has no token for byte " + std::to_string(b) + " ('" + token + "'): not a byte-level vocabulary");
        t.byte_ids_[size_t(b)] = it->second;
    }
}

// model.merges, ranked by their place in the list: "a b" (the older form) or ["a", "b"].
void TokenizerJson::read_merges(const json& model, std::string_view table, const Reader& r, BpeTokenizer& t) {
    std::string dumped;
    table = table_text(r.typed(model, "merges", "model", json::value_t::array), table, dumped);
    std::string joined;
    t.merges_.reserve(table.size() / 16);  // a merge takes some 20 bytes of the file
    stream_merges(table, r.name, [&](size_t rank, const json& merge) {
        const auto where = [&] { return "model.merges[" + std::to_string(rank) + "]"; };
        std::string_view a, b;
        if (merge.is_string()) {
            const std::string_view pair = merge.get_ref<const std::string&>();
            const size_t space = pair.find(' ');
            if (space == std::string::npos || pair.find(' ', space + 1) != std::string::npos)
                r.fail(where() + " '" + printable(pair) + "' is not two tokens and one space");
            a = pair.substr(0, space), b = pair.substr(space + 1);
        } else if (merge.is_array() && merge.size() == 2) {
            a = merge[0].get_ref<const std::string&>(), b = merge[1].get_ref<const std::string&>();
        } else {
            r.fail(where() + " is neither \"a b\" nor [\"a\", \"b\"]");
        }
        const auto id_of = [&](std::string_view token, const char* what) {
            const auto it = t.vocab_.find(token);
            if (it == t.vocab_.end()) r.fail(where() + ": " + what + " '" + printable(token) + "' is not in model.vocab");
            return it->second;
        };
        joined.assign(a).append(b);
        const int64_t left = id_of(a, "the token"), right = id_of(b, "the token");
        t.merges_[BpeTokenizer::pair_key(left, right)] = BpeTokenizer::Merge{int32_t(rank), int32_t(id_of(joined, "the merged token"))};
    });
}

// The added tokens' ids, their bytes for decode, and the two matchers of encode.
void TokenizerJson::add_added_tokens(AddedTokenLists added, BpeTokenizer& t) {
    for (const auto* list : {&added.raw, &added.normalized})
        for (const AddedTokens::Token& token : *list) {
            if (size_t(token.id) >= t.token_bytes_.size()) {
                t.token_bytes_.resize(size_t(token.id) + 1);
                t.has_token_.resize(size_t(token.id) + 1);
            }
            // An added token decodes to the text it matched, so that decode undoes encode.
            t.token_bytes_[size_t(token.id)] = token.content;
            t.has_token_[size_t(token.id)] = true;
            t.added_.emplace(token.content, token.id);
        }
    t.added_raw_ = std::make_shared<const AddedTokens>(std::move(added.raw));
    t.added_normalized_ = std::make_shared<const AddedTokens>(std::move(added.normalized));
}

// The Split regexes and ByteLevel's options, compiled.
void TokenizerJson::read_pre_tokenizer_steps(const json& root, const Reader& r, BpeTokenizer& t) {
    const json& pre_tokenizer = Reader::optional(root, "pre_tokenizer");
    if (pre_tokenizer.is_null()) r.fail("pre_tokenizer is null: a byte-level BPE needs a ByteLevel pre-tokenizer");
    PreTokenizerSteps steps;
    read_pre_tokenizer(pre_tokenizer, "pre_tokenizer", r, steps);
    if (!steps.byte_level) r.fail("pre_tokenizer has no ByteLevel step: the vocabulary would not be byte-level");
    const auto compile = [&](const std::string& regex, const std::string& where) {
        try {
            return std::make_shared<const Regex>(regex);
        } catch (const std::invalid_argument& e) {
            r.fail(where + ": " + e.what());
        }
    };
    for (size_t i = 0; i < steps.split_regexes.size(); ++i)
        t.splits_.push_back(compile(steps.split_regexes[i], "pre_tokenizer Split " + std::to_string(i)));
    t.add_prefix_space_ = steps.add_prefix_space;
    // GPT-2's pre-tokenizer regex (its encoder.py), which ByteLevel applies with use_regex.
    if (steps.use_regex)
        t.byte_level_regex_ =
            compile(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", "ByteLevel");
}

}  // namespace gg::nn
