// bpe.cpp — the five steps of encode, and decode (bpe.h). Reading tokenizer.json is in
// bpe_json.cpp.
#include "nn/text/bpe.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "nn/text/added_tokens.h"
#include "nn/text/byte_level.h"
#include "nn/text/regex.h"

namespace gg::nn {

using byte_level::utf8_length;

namespace {

// Pre-tokens repeat (" the", "\n"): a cache of their ids saves merging them again. Hugging
// Face caches pre-tokens under 256 characters; this cache forgets everything when it is full,
// so that a text of endless new words cannot make it grow without end.
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCachedWords = size_t(1) << 16;

// Calls text(stretch) for each stretch of `all` between two added tokens, and puts each
// token's id into `ids`, in order.
void around_tokens(const AddedTokens& tokens, std::string_view all, std::vector<int64_t>& ids,
                   const std::function<void(std::string_view)>& text) {
    size_t done = 0;
    for (const AddedTokens::Match& m : tokens.find(all)) {
        if (m.begin > done) text(all.substr(done, m.begin - done));
        ids.push_back(m.id);
        done = m.end;
    }
    if (done < all.size()) text(all.substr(done));
}

}  // namespace

struct BpeTokenizer::Session {
    // One symbol of a pre-token being merged, in a list linked through its neighbours' indices.
    struct Symbol {
        int32_t id;  // -1 once merged into its left neighbour
        int32_t prev, next;
    };
    // A pair that may merge: the left symbol's index, both ids when it was found, the result.
    struct Candidate {
        int32_t rank, left, left_id, right_id, merged_id;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };

    Session(std::vector<int64_t>& out, size_t text_bytes) : ids(out), regexes(text_bytes) {}

    std::vector<int64_t>& ids;
    RegexRun regexes;
    // Each cached pre-token's ids, once merged, as a range of `cached`.
    std::unordered_map<std::string, std::pair<size_t, size_t>, TextHash, std::equal_to<>> cache;
    std::vector<int64_t> cached;
    std::string normalized, prefixed;
    std::vector<std::string_view> pieces, split_pieces, words;
    std::vector<Symbol> symbols;
    std::vector<Candidate> queue;  // a min-heap
};

std::vector<int64_t> BpeTokenizer::encode(const std::string& text) const {
    std::vector<int64_t> ids;
    Session s(ids, text.size());
    around_tokens(*added_raw_, text, ids, [&](std::string_view segment) { encode_segment(segment, s); });
    return ids;
}

std::vector<int64_t> BpeTokenizer::encode_for_model(const std::string& text) const {
    std::vector<int64_t> ids;
    if (prepended_token_) ids.push_back(*prepended_token_);
    const std::vector<int64_t> body = encode(text);
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
}

// A text between added tokens: its valid UTF-8 spans go on, each byte that is not UTF-8 is
// its own single-byte token.
void BpeTokenizer::encode_segment(std::string_view segment, Session& s) const {
    size_t span = 0;
    for (size_t i = 0; i < segment.size();) {
        if (const size_t n = utf8_length(segment, i)) {
            i += n;
            continue;
        }
        encode_valid(segment.substr(span, i - span), s);
        s.ids.push_back(byte_ids_[uint8_t(segment[i])]);
        span = ++i;
    }
    encode_valid(segment.substr(span), s);
}

// A valid UTF-8 span: normalized, split by the normalized added tokens, pre-tokenized.
void BpeTokenizer::encode_valid(std::string_view span, Session& s) const {
    if (span.empty()) return;
    const std::string_view normal = nfc_ ? byte_level::nfc(span, s.normalized) : span;
    around_tokens(*added_normalized_, normal, s.ids, [&](std::string_view piece) { pre_tokenize(piece, s); });
}

// The Split regexes one after the other, each over every piece the last one left, then
// ByteLevel on each piece.
void BpeTokenizer::pre_tokenize(std::string_view piece, Session& s) const {
    s.pieces.assign(1, piece);
    for (const auto& split : splits_) {
        s.split_pieces.clear();
        for (std::string_view p : s.pieces) split->split(p, s.regexes, s.split_pieces);
        s.pieces.swap(s.split_pieces);
    }
    for (std::string_view p : s.pieces) {
        if (add_prefix_space_ && p.front() != ' ') {
            s.prefixed.assign(1, ' ').append(p);
            p = s.prefixed;
        }
        if (!byte_level_regex_) {
            encode_word(p, s);
            continue;
        }
        s.words.clear();
        byte_level_regex_->split(p, s.regexes, s.words);
        for (std::string_view word : s.words) encode_word(word, s);
    }
}

// One pre-token: its cached ids, or the vocabulary's whole token (ignore_merges), or BPE.
void BpeTokenizer::encode_word(std::string_view bytes, Session& s) const {
    if (bytes.size() == 1) {
        s.ids.push_back(byte_ids_[uint8_t(bytes[0])]);
        return;
    }
    if (bytes.size() > kMaxWordBytes) {  // bpe.h: pieces of at most kMaxWordBytes, cut between characters
        while (!bytes.empty()) {
            size_t cut = std::min(bytes.size(), kMaxWordBytes);
            while (cut < bytes.size() && (uint8_t(bytes[cut]) & 0xC0) == 0x80) --cut;
            encode_word(bytes.substr(0, cut), s);
            bytes.remove_prefix(cut);
        }
        return;
    }
    const bool cacheable = bytes.size() <= kMaxCachedWordBytes;
    if (cacheable) {
        if (const auto hit = s.cache.find(bytes); hit != s.cache.end()) {
            s.ids.insert(s.ids.end(), s.cached.begin() + std::ptrdiff_t(hit->second.first),
                         s.cached.begin() + std::ptrdiff_t(hit->second.second));
            return;
        }
        if (s.cache.size() == kMaxCachedWords) s.cache.clear(), s.cached.clear();
    }
    const size_t begin = s.cached.size();
    const auto whole = ignore_merges_ ? vocab_.find(byte_level::to_alphabet(bytes)) : vocab_.end();
    if (whole != vocab_.end())
        s.cached.push_back(whole->second);
    else
        merge(bytes, s);
    s.ids.insert(s.ids.end(), s.cached.begin() + std::ptrdiff_t(begin), s.cached.end());
    if (cacheable)
        s.cache.emplace(std::string(bytes), std::pair{begin, s.cached.size()});
    else
        s.cached.resize(begin);
}

// BPE on one pre-token, appending its ids to s.cached: the lowest-ranked mergeable pair merges
// first, the leftmost among equals, each merge offering the merged symbol's two new pairs.
// A heap of candidates makes it O(n log n), where a rescan after each merge would be O(n²)
// on a long run of letters.
void BpeTokenizer::merge(std::string_view bytes, Session& s) const {
    const auto n = int32_t(bytes.size());
    std::vector<Session::Symbol>& symbols = s.symbols;
    symbols.clear();
    for (int32_t i = 0; i < n; ++i)
        symbols.push_back({int32_t(byte_ids_[uint8_t(bytes[size_t(i)])]), i - 1, i + 1 < n ? i + 1 : -1});
    s.queue.clear();
    const auto offer = [&](int32_t left) {
        if (left < 0 || symbols[size_t(left)].next < 0) return;
        const int32_t a = symbols[size_t(left)].id, b = symbols[size_t(symbols[size_t(left)].next)].id;
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
    if (const auto it = added_.find(token); it != added_.end()) return it->second;
    if (const auto it = vocab_.find(token); it != vocab_.end()) return it->second;
    return std::nullopt;
}

}  // namespace gg::nn
