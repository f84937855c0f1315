// regex.h — the pre-tokenizer's regexes (PCRE2), and what one text may cost them.
//
// Hugging Face runs a tokenizer's Split regexes in Oniguruma; PCRE2 reads the same syntax
// (\p{L}, (?i:...), lookahead) once told to take \s as Unicode's White_Space (regex.cpp).
//
// A regex comes from the tokenizer.json, so from anyone, and a backtracking engine can spend
// any time on one: "\p{L}*\p{L}*!|x" tries every split of a run of letters at every start.
// PCRE2's match limit bounds one call of pcre2_match, not a text, which holds a call for each
// piece: a 92 KB text took 211 s. Nor does the limit bound time: it counts backtracks, and
// one backtrack of "\p{L}*" may rescan the whole run. So a text gets a budget of time:
// kRegexSeconds plus kRegexSecondsPerMB for each MB, in the thread's CPU time (a busy machine
// does not shrink it), spent by all the regexes of one encode together. Qwen3's regex took
// 0.38 s of one core over 5.2 MB of text (fortunes, on a busy machine): a fourteenth of what
// is allowed. A text over budget throws; no id ever depends on the time taken.
#pragma once
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gg::nn {

constexpr double kRegexSeconds = 1.0;
constexpr double kRegexSecondsPerMB = 1.0;
// A Split regex is a line (Qwen3's is 125 bytes); far longer ones only cost compile time.
constexpr size_t kMaxRegexBytes = size_t(64) << 10;

// One text's matching: PCRE2's scratch for a match, and the time left to the text.
class RegexRun {
public:
    explicit RegexRun(size_t text_bytes);
    ~RegexRun();
    RegexRun(const RegexRun&) = delete;
    RegexRun& operator=(const RegexRun&) = delete;

private:
    friend class Regex;
    // pcre2_match from `from`, with the match limit doubled until the call completes, so a
    // single call cannot outrun the budget by more than it has already spent.
    int match(const pcre2_code* code, std::string_view text, size_t from, uint32_t options);
    void check_time();

    pcre2_match_data* match_ = nullptr;
    pcre2_match_context* context_ = nullptr;
    size_t text_bytes_;
    double deadline_;  // in the thread's CPU seconds
    uint32_t calls_ = 0;
};

// A regex compiled once for Unicode text (PCRE2_UTF | PCRE2_UCP: \p{L}, and \s and \w by
// Unicode properties), with PCRE2's JIT where the library has one.
class Regex {
public:
    // Throws std::invalid_argument with PCRE2's reason where it does not compile or is longer
    // than kMaxRegexBytes.
    explicit Regex(const std::string& regex);
    ~Regex();
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Appends to `pieces` each match in `text` (valid UTF-8) and each stretch between two, in
    // order: the pieces are never empty and together are `text` (Hugging Face's Isolated).
    void split(std::string_view text, RegexRun& run, std::vector<std::string_view>& pieces) const;

private:
    pcre2_code* code_ = nullptr;
};

}  // namespace gg::nn
