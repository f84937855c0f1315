// bpe.cpp — reading tokenizer.json, and the five steps of encode (bpe.h).
#include "nn/text/bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "nn/untrusted.h"

namespace gg::nn {

namespace {

using nlohmann::json;

// An id bound far above any released vocabulary (Gemma's 262k), so that a file naming id
// 2^31 cannot make decode's table take gigabytes.
constexpr int64_t kMaxTokenId = int64_t(1) << 24;

// GPT-2's byte alphabet: the printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
// themselves, the other 68 take U+0100 onwards in byte order, so that every token is text.
struct ByteAlphabet {
    std::array<char32_t, 256> char_of{};
    std::array<int, 0x144> byte_of{};  // U+0000..U+0143 → its byte; -1 where none
    ByteAlphabet() {
        byte_of.fill(-1);
        char32_t next = 0x100;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            char_of[size_t(b)] = printable ? char32_t(b) : next++;
            byte_of[char_of[size_t(b)]] = b;
        }
    }
};

const ByteAlphabet& alphabet() {
    static const ByteAlphabet a;
    return a;
}

// The length of the valid UTF-8 sequence that starts at text[i] (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or 0 where none does.
size_t utf8_length(std::string_view text, size_t i) {
    const auto at = [&](size_t k) { return i + k < text.size() ? uint8_t(text[i + k]) : 0; };
    const auto cont = [&](size_t k, uint8_t lo = 0x80, uint8_t hi = 0xBF) { return at(k) >= lo && at(k) <= hi; };
    const uint8_t b = at(0);
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return cont(1) ? 2 : 0;
    if (b >= 0xE0 && b <= 0xEF) {
        const bool second = b == 0xE0 ? cont(1, 0xA0) : b == 0xED ? cont(1, 0x80, 0x9F) : cont(1);
        return second && cont(2) ? 3 : 0;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        const bool second = b == 0xF0 ? cont(1, 0x90) : b == 0xF4 ? cont(1, 0x80, 0x8F) : cont(1);
        return second && cont(2) && cont(3) ? 4 : 0;
    }
    return 0;
}

void append_utf8(std::string& out, char32_t c) {  // c < U+0800, which the byte alphabet is
    if (c < 0x80) {
        out += char(c);
    } else {
        out += char(0xC0 | (c >> 6));
        out += char(0x80 | (c & 0x3F));
    }
}

// `bytes` spelled in the byte alphabet, as model.vocab spells tokens.
std::string to_alphabet(std::string_view bytes) {
    std::string out;
    for (char b : bytes) append_utf8(out, alphabet().char_of[uint8_t(b)]);
    return out;
}

// The bytes a vocabulary token stands for. A token with a character outside the byte alphabet
// stands for its own UTF-8, as in Hugging Face's ByteLevel decoder.
std::string token_to_bytes(const std::string& token) {
    std::string out;
    for (size_t i = 0; i < token.size();) {
        const size_t n = utf8_length(token, i);
        if (n == 0 || n > 2) return token;
        const char32_t c = n == 1 ? char32_t(uint8_t(token[i])) : char32_t((token[i] & 0x1F) << 6 | (token[i + 1] & 0x3F));
        if (c >= alphabet().byte_of.size() || alphabet().byte_of[c] < 0) return token;
        out += char(alphabet().byte_of[c]);
        i += n;
    }
    return out;
}

// `text`, valid UTF-8, in Normalization Form C (Unicode Standard Annex #15), in `out` where it
// had to be rewritten.
std::string_view nfc(std::string_view text, std::string& out) {
    if (std::all_of(text.begin(), text.end(), [](char c) { return uint8_t(c) < 0x80; })) return text;  // ASCII is NFC
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), utf8proc_ssize_t(text.size()),
                                            &mapped, utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) throw std::runtime_error(std::string("BpeTokenizer: NFC of a ") + std::to_string(text.size()) +
                                        "-byte span failed: " + utf8proc_errmsg(n));
    out.assign(reinterpret_cast<const char*>(mapped), size_t(n));
    std::free(mapped);
    return out;
}

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
        if (!object.contains(key)) fail(where + " has no '" + key + "'");
        return object.at(key);
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
};

// The ids of a merge's pair as one hash key.
uint64_t pair_key(int64_t left, int64_t right) { return uint64_t(left) << 32 | uint64_t(right); }

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

void read_pre_tokenizer(const json& step, const std::string& where, const Reader& r, PreTokenizerSteps& steps) {
    const std::string type = r.type_of(step, where);
    // After ByteLevel a regex would see the byte alphabet ("Ġ" for a space), not the text.
    if (steps.byte_level) r.fail(where + " (" + printable(type) + ") comes after ByteLevel, which must be the last step");
    if (type == "Sequence") {
        const json& list = r.typed(step, "pretokenizers", where, json::value_t::array);
        for (size_t i = 0; i < list.size(); ++i)
            read_pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]", r, steps);
    } else if (type == "Split") {
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

}  // namespace

std::string byte_level_symbol(uint8_t byte) { return to_alphabet(std::string_view(reinterpret_cast<const char*>(&byte), 1)); }

// ---------------------------------------------------------------- regexes

namespace {

// Hugging Face runs these regexes in Oniguruma, whose \s is Unicode's White_Space property.
// PCRE2's \s (10.42, UCP) also takes U+180E, which left White_Space in Unicode 6.3: so \s and
// \S become the property itself, which PCRE2 reads inside character classes too.
std::string with_unicode_white_space(const std::string& regex) {
    std::string out;
    bool quoted = false;  // inside \Q...\E, where a backslash stands for itself
    for (size_t i = 0; i < regex.size(); ++i) {
        if (regex[i] != '\\' || i + 1 == regex.size()) {
            out += regex[i];
            continue;
        }
        const char escaped = regex[++i];
        if (!quoted && escaped == 's')
            out += "\\p{White_Space}";
        else if (!quoted && escaped == 'S')
            out += "\\P{White_Space}";
        else
            out.append(1, '\\').append(1, escaped);
        if (escaped == 'Q') quoted = true;
        if (escaped == 'E') quoted = false;
    }
    return out;
}

}  // namespace

// A regex compiled once for Unicode text (PCRE2_UTF | PCRE2_UCP: \p{L}, and \s and \w by
// Unicode properties), with PCRE2's JIT where the library has one.
class BpeTokenizer::Pattern {
public:
    Pattern(const std::string& regex, const std::string& where, const Reader& r) {
        int error = 0;
        PCRE2_SIZE offset = 0;
        const std::string pattern = with_unicode_white_space(regex);
        code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                              &offset, nullptr);
        if (!code_) r.fail(where + ": the regex does not compile: " + message(error));
        pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // where it fails, pcre2_match interprets instead
    }
    ~Pattern() { pcre2_code_free(code_); }
    Pattern(const Pattern&) = delete;
    Pattern& operator=(const Pattern&) = delete;

    // Calls piece(part) for each match in `text` (valid UTF-8) and each stretch between two,
    // in order: the pieces are never empty and together are `text` (Hugging Face's Isolated).
    template <class Piece>
    void split(std::string_view text, pcre2_match_data* match, const Piece& piece) const {
        const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
        size_t done = 0, from = 0;
        uint32_t options = 0;
        while (from <= text.size()) {
            const int rc = pcre2_match(code_, subject, text.size(), from, options | PCRE2_NO_UTF_CHECK, match, nullptr);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0)
                throw std::runtime_error("BpeTokenizer: a regex failed on a " + std::to_string(text.size()) +
                                         "-byte piece: " + message(rc));
            const size_t begin = pcre2_get_ovector_pointer(match)[0], end = pcre2_get_ovector_pointer(match)[1];
            if (begin == end) {  // an empty match gives no piece: look on from there for a longer one
                from = begin;
                options = PCRE2_NOTEMPTY_ATSTART;
                continue;
            }
            if (begin > done) piece(text.substr(done, begin - done));
            piece(text.substr(begin, end - begin));
            done = from = end;
            options = 0;
        }
        if (done < text.size()) piece(text.substr(done));
    }

private:
    static std::string message(int code) {
        PCRE2_UCHAR text[256];
        pcre2_get_error_message(code, text, sizeof text);
        return reinterpret_cast<const char*>(text);
    }
    pcre2_code* code_ = nullptr;
};

// ---------------------------------------------------------------- one encode call

struct BpeTokenizer::Session {
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    // One symbol of a pre-token being merged, in a list linked through its neighbours' indices.
    struct Symbol {
        int64_t id;  // -1 once merged into its left neighbour
        int32_t prev, next;
    };
    // A pair that may merge: the left symbol's index, both ids when it was found, the result.
    struct Candidate {
        int64_t rank;
        int32_t left;
        int64_t left_id, right_id, merged_id;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };

    explicit Session(std::vector<int64_t>& out) : ids(out), match(pcre2_match_data_create(1, nullptr)) {
        if (!match) throw std::bad_alloc();
    }
    ~Session() { pcre2_match_data_free(match); }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    std::vector<int64_t>& ids;
    pcre2_match_data* match;  // shared by every regex: split reads a match before it recurses
    // Pre-tokens repeat (" the", "\n"): each one's ids, once merged, as a range of `cached`.
    std::unordered_map<std::string, std::pair<size_t, size_t>, Hash, std::equal_to<>> cache;
    std::vector<int64_t> cached;
    std::string normalized, prefixed;
    std::vector<Symbol> symbols;
    std::vector<Candidate> queue;  // a min-heap
};

std::vector<int64_t> BpeTokenizer::encode(const std::string& text) const {
    std::vector<int64_t> ids;
    Session s(ids);
    const std::string_view all(text);
    size_t done = 0;
    for (size_t i = 0; i < all.size(); ++i) {
        if (!added_starts_[uint8_t(all[i])]) continue;
        const auto found = std::find_if(added_.begin(), added_.end(), [&](const AddedToken& t) {
            return all.compare(i, t.content.size(), t.content) == 0;
        });
        if (found == added_.end()) continue;
        encode_segment(all.substr(done, i - done), s);
        ids.push_back(found->id);
        done = i + found->content.size();
        i = done - 1;
    }
    encode_segment(all.substr(done), s);
    return ids;
}

std::vector<int64_t> BpeTokenizer::encode_for_model(const std::string& text) const {
    std::vector<int64_t> ids;
    if (prepended_token_) ids.push_back(*prepended_token_);
    const std::vector<int64_t> body = encode(text);
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
}

// A text between added tokens: its valid UTF-8 spans normalized and pre-tokenized, each byte
// that is not UTF-8 its own single-byte token.
void BpeTokenizer::encode_segment(std::string_view segment, Session& s) const {
    const auto valid = [&](std::string_view span) {
        if (!span.empty()) pre_tokenize(nfc_ ? nfc(span, s.normalized) : span, 0, s);
    };
    size_t span = 0;
    for (size_t i = 0; i < segment.size();) {
        if (const size_t n = utf8_length(segment, i)) {
            i += n;
            continue;
        }
        valid(segment.substr(span, i - span));
        s.ids.push_back(byte_ids_[uint8_t(segment[i])]);
        span = ++i;
    }
    valid(segment.substr(span));
}

// Step `step` of the pre-tokenizer on a non-empty piece: the Split regexes, then ByteLevel.
void BpeTokenizer::pre_tokenize(std::string_view piece, size_t step, Session& s) const {
    if (step < splits_.size()) {
        splits_[step]->split(piece, s.match, [&](std::string_view part) { pre_tokenize(part, step + 1, s); });
        return;
    }
    if (add_prefix_space_ && piece.front() != ' ') {
        s.prefixed.assign(1, ' ').append(piece);
        piece = s.prefixed;
    }
    if (byte_level_regex_)
        byte_level_regex_->split(piece, s.match, [&](std::string_view part) { encode_pre_token(part, s); });
    else
        encode_pre_token(piece, s);
}

void BpeTokenizer::encode_pre_token(std::string_view bytes, Session& s) const {
    if (bytes.size() == 1) {
        s.ids.push_back(byte_ids_[uint8_t(bytes[0])]);
        return;
    }
    auto hit = s.cache.find(bytes);
    if (hit == s.cache.end()) {
        const size_t begin = s.cached.size();
        const auto whole = ignore_merges_ ? vocab_.find(to_alphabet(bytes)) : vocab_.end();
        if (whole != vocab_.end())
            s.cached.push_back(whole->second);
        else
            merge(bytes, s);
        hit = s.cache.emplace(std::string(bytes), std::pair{begin, s.cached.size()}).first;
    }
    s.ids.insert(s.ids.end(), s.cached.begin() + std::ptrdiff_t(hit->second.first),
                 s.cached.begin() + std::ptrdiff_t(hit->second.second));
}

// BPE on one pre-token, appending its ids to s.cached: the lowest-ranked mergeable pair merges
// first, the leftmost among equals, each merge offering the merged symbol's two new pairs.
// A heap of candidates makes it O(n log n), where a rescan after each merge would be O(n²)
// on a long run of letters.
void BpeTokenizer::merge(std::string_view bytes, Session& s) const {
    const auto n = int32_t(bytes.size());
    std::vector<Session::Symbol>& symbols = s.symbols;
    symbols.clear();
    for (int32_t i = 0; i < n; ++i) symbols.push_back({byte_ids_[uint8_t(bytes[size_t(i)])], i - 1, i + 1 < n ? i + 1 : -1});
    s.queue.clear();
    const auto offer = [&](int32_t left) {
        if (left < 0 || symbols[size_t(left)].next < 0) return;
        const int64_t a = symbols[size_t(left)].id, b = symbols[size_t(symbols[size_t(left)].next)].id;
        const auto m = merges_.find(pair_key(a, b));
        if (m == merges_.end()) return;
        s.queue.push_back({m->second.rank, left, a, b, m->second.id});
        std::push_heap(s.queue.begin(), s.queue.end(), std::greater<>{});
    };
    for (int32_t i = 0; i + 1 < n; ++i) offer(i);
    while (!s.queue.empty()) {
        std::pop_heap(s.queue.begin(), s.queue.end(), std::greater<>{});
        const Session::Candidate c = s.queue.back();
        s.queue.pop_back();
        Session::Symbol& left = symbols[size_t(c.left)];
        // Stale when either symbol has merged since: a symbol's id only ever grows longer.
        if (left.id != c.left_id || left.next < 0 || symbols[size_t(left.next)].id != c.right_id) continue;
        Session::Symbol& right = symbols[size_t(left.next)];
        left.id = c.merged_id;
        right.id = -1;
        left.next = right.next;
        if (left.next >= 0) symbols[size_t(left.next)].prev = c.left;
        offer(left.prev);
        offer(c.left);
    }
    for (int32_t i = 0; i >= 0; i = symbols[size_t(i)].next) s.cached.push_back(symbols[size_t(i)].id);
}

// ---------------------------------------------------------------- decode and look-ups

std::string BpeTokenizer::decode(const std::vector<int64_t>& ids) const {
    std::string out;
    for (int64_t id : ids) {
        if (id < 0 || id >= vocab_size())
            throw std::out_of_range("BpeTokenizer::decode: id " + std::to_string(id) + " is out of range (vocab size " +
                                    std::to_string(vocab_size()) + ")");
        if (!has_token_[size_t(id)])
            throw std::out_of_range("BpeTokenizer::decode: id " + std::to_string(id) + " names no token (vocab size " +
                                    std::to_string(vocab_size()) + ")");
        out += token_bytes_[size_t(id)];
    }
    return out;
}

std::optional<int64_t> BpeTokenizer::token_id(const std::string& token) const {
    if (const auto it = vocab_.find(token); it != vocab_.end()) return it->second;
    for (const AddedToken& t : added_)
        if (t.content == token) return t.id;
    return std::nullopt;
}

// ---------------------------------------------------------------- reading tokenizer.json

BpeTokenizer BpeTokenizer::from_file(const std::string& tokenizer_json_path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(tokenizer_json_path, ec))
        throw std::runtime_error("BpeTokenizer: cannot read " + tokenizer_json_path + ": not a regular file");
    std::ifstream in(tokenizer_json_path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) throw std::runtime_error("BpeTokenizer: cannot read " + tokenizer_json_path + ": " + std::strerror(errno));
    return parse(text.str(), tokenizer_json_path);
}

BpeTokenizer BpeTokenizer::from_json(const std::string& json_text) { return parse(json_text, "tokenizer.json"); }

BpeTokenizer BpeTokenizer::parse(const std::string& json_text, const std::string& name) {
    const Reader r{name};
    json root;
    try {
        root = parse_untrusted_json(json_text);
    } catch (const std::invalid_argument& e) {
        r.fail(e.what());
    }
    if (!root.is_object()) r.fail(std::string("a JSON ") + root.type_name() + ", not an object");
    BpeTokenizer t;

    const json& model = r.typed(root, "model", "the file", json::value_t::object);
    if (const std::string type = r.string(model, "type", "model"); type != "BPE")
        r.fail("model.type is '" + printable(type) + "', not BPE");
    if (model.contains("dropout") && !model["dropout"].is_null())
        r.fail("model.dropout is set: BPE dropout samples its merges, and encode is deterministic");
    for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
        if (model.contains(affix) && !model[affix].is_null() && model[affix] != "")
            r.fail(std::string("model.") + affix + " is set, which no byte-level BPE uses");
    t.ignore_merges_ = r.flag(model, "ignore_merges", "model", false);

    // The vocabulary, then the added tokens: both give ids their bytes.
    int64_t max_id = -1;
    std::vector<std::string> id_token;
    const json& vocab = r.typed(model, "vocab", "model", json::value_t::object);
    t.vocab_.reserve(vocab.size());
    for (const auto& [token, value] : vocab.items()) {
        // Messages are built only on failure: a vocabulary has 150k tokens.
        if (!is_token_id(value)) r.not_an_id("model.vocab['" + printable(token) + "']");
        const int64_t id = value.get<int64_t>();
        if (size_t(id) >= id_token.size()) id_token.resize(size_t(id) + 1);
        if (!id_token[size_t(id)].empty())
            r.fail("model.vocab gives id " + std::to_string(id) + " to both '" + printable(id_token[size_t(id)]) + "' and '" +
                   printable(token) + "'");
        if (token.empty()) r.fail("model.vocab holds an empty token");
        id_token[size_t(id)] = token;
        t.vocab_.emplace(token, id);
        max_id = std::max(max_id, id);
    }
    if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
        const json& list = r.typed(root, "added_tokens", "the file", json::value_t::array);
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string where = "added_tokens[" + std::to_string(i) + "]";
            AddedToken token{r.string(list[i], "content", where), r.id(r.at(list[i], "id", where), where + ".id")};
            if (token.content.empty()) r.fail(where + ".content is empty");
            for (const char* option : {"lstrip", "rstrip", "single_word"})
                if (r.flag(list[i], option, where, false))
                    r.fail(where + " ('" + printable(token.content) + "') sets " + option + ", which is not supported");
            max_id = std::max(max_id, token.id);
            t.added_.push_back(std::move(token));
        }
    }
    t.token_bytes_.resize(size_t(max_id + 1));
    t.has_token_.resize(size_t(max_id + 1));
    for (size_t id = 0; id < id_token.size(); ++id)
        if (!id_token[id].empty()) t.token_bytes_[id] = token_to_bytes(id_token[id]), t.has_token_[id] = true;
    // An added token decodes to the text it matched, so that decode undoes encode.
    for (const AddedToken& token : t.added_) {
        t.token_bytes_[size_t(token.id)] = token.content;
        t.has_token_[size_t(token.id)] = true;
        t.added_starts_[uint8_t(token.content[0])] = true;
    }
    std::stable_sort(t.added_.begin(), t.added_.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
    for (int b = 0; b < 256; ++b) {
        std::string token;
        append_utf8(token, alphabet().char_of[size_t(b)]);
        const auto it = t.vocab_.find(token);
        if (it == t.vocab_.end())
            r.fail("model.vocab has no token for byte " + std::to_string(b) + " ('" + token +
                   "'): not a byte-level vocabulary");
        t.byte_ids_[size_t(b)] = it->second;
    }

    // Merges, ranked by their place in the list: "a b" (the older form) or ["a", "b"].
    const json& merges = r.typed(model, "merges", "model", json::value_t::array);
    t.merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto where = [&] { return "model.merges[" + std::to_string(rank) + "]"; };
        const json& merge = merges[rank];
        std::string a, b;
        if (merge.is_string()) {
            const std::string pair = merge.get<std::string>();
            const size_t space = pair.find(' ');
            if (space == std::string::npos || pair.find(' ', space + 1) != std::string::npos)
                r.fail(where() + " '" + printable(pair) + "' is not two tokens and one space");
            a = pair.substr(0, space), b = pair.substr(space + 1);
        } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
            a = merge[0].get<std::string>(), b = merge[1].get<std::string>();
        } else {
            r.fail(where() + " is neither \"a b\" nor [\"a\", \"b\"]");
        }
        const auto id_of = [&](const std::string& token, const char* what) {
            const auto it = t.vocab_.find(token);
            if (it == t.vocab_.end()) r.fail(where() + ": " + what + " '" + printable(token) + "' is not in model.vocab");
            return it->second;
        };
        const int64_t left = id_of(a, "the token"), right = id_of(b, "the token");
        t.merges_[pair_key(left, right)] = Merge{int64_t(rank), id_of(a + b, "the merged token")};
    }

    t.nfc_ = read_normalizer(root.contains("normalizer") ? root["normalizer"] : json(), "normalizer", r);
    if (!root.contains("pre_tokenizer") || root["pre_tokenizer"].is_null())
        r.fail("pre_tokenizer is null: a byte-level BPE needs a ByteLevel pre-tokenizer");
    PreTokenizerSteps steps;
    read_pre_tokenizer(root["pre_tokenizer"], "pre_tokenizer", r, steps);
    if (!steps.byte_level) r.fail("pre_tokenizer has no ByteLevel step: the vocabulary would not be byte-level");
    for (size_t i = 0; i < steps.split_regexes.size(); ++i)
        t.splits_.push_back(std::make_shared<const Pattern>(steps.split_regexes[i], "pre_tokenizer Split " + std::to_string(i), r));
    t.add_prefix_space_ = steps.add_prefix_space;
    // GPT-2's pre-tokenizer regex (its encoder.py), which ByteLevel applies with use_regex.
    if (steps.use_regex)
        t.byte_level_regex_ = std::make_shared<const Pattern>(
            R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", "ByteLevel", r);

    const json& decoder = root.contains("decoder") ? root["decoder"] : json();
    if (decoder.is_null() || r.type_of(decoder, "decoder") != "ByteLevel")
        r.fail("decoder is " + (decoder.is_null() ? std::string("null") : "'" + printable(r.type_of(decoder, "decoder")) + "'") +
               ", not ByteLevel");
    t.prepended_token_ = read_post_processor(root.contains("post_processor") ? root["post_processor"] : json(), "post_processor", r);
    if (t.prepended_token_ && (*t.prepended_token_ >= t.vocab_size() || !t.has_token_[size_t(*t.prepended_token_)]))
        r.fail("post_processor puts id " + std::to_string(*t.prepended_token_) + " first, which names no token");
    return t;
}

}  // namespace gg::nn
