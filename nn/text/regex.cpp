// regex.cpp — PCRE2 for the pre-tokenizer, under a budget of time per text (regex.h).
#include "nn/text/regex.h"

#include <time.h>

#include <new>
#include <stdexcept>

namespace gg::nn {

namespace {

std::string pcre2_message(int code) {
    PCRE2_UCHAR text[256];
    pcre2_get_error_message(code, text, sizeof text);
    return reinterpret_cast<const char*>(text);
}

double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

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

RegexRun::RegexRun(size_t text_bytes)
    : match_(pcre2_match_data_create(1, nullptr)),
      context_(pcre2_match_context_create(nullptr)),
      text_bytes_(text_bytes),
      deadline_(thread_cpu_seconds() + kRegexSeconds + kRegexSecondsPerMB * double(text_bytes) / 1e6) {
    if (!match_ || !context_) {
        pcre2_match_data_free(match_);
        pcre2_match_context_free(context_);
        throw std::bad_alloc();
    }
}

RegexRun::~RegexRun() {
    pcre2_match_data_free(match_);
    pcre2_match_context_free(context_);
}

void RegexRun::check_time() {
    if (thread_cpu_seconds() > deadline_)
        throw std::runtime_error("BpeTokenizer: the pre-tokenizer's regexes ran past their budget on a " +
                                 std::to_string(text_bytes_) + "-byte text (" + std::to_string(int(kRegexSeconds)) +
                                 " s + " + std::to_string(int(kRegexSecondsPerMB)) +
                                 " s per MB of CPU time): a regex that backtracks without end?");
}

int RegexRun::match(const pcre2_code* code, std::string_view text, size_t from, uint32_t options) {
    // 16 backtracks complete nearly every call of a real regex; a clock read costs as much as
    // a short match, so the time is read every 64 calls and at each doubling.
    for (uint32_t limit = 16;; limit *= 2) {
        pcre2_set_match_limit(context_, limit);
        const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from,
                                   options | PCRE2_NO_UTF_CHECK, match_, context_);
        if (rc == PCRE2_ERROR_MATCHLIMIT || ++calls_ % 64 == 0) check_time();
        if (rc != PCRE2_ERROR_MATCHLIMIT || limit == uint32_t(1) << 31) return rc;
    }
}

Regex::Regex(const std::string& regex) {
    if (regex.size() > kMaxRegexBytes)
        throw std::invalid_argument("the regex has " + std::to_string(regex.size()) + " bytes, more than " +
                                    std::to_string(kMaxRegexBytes));
    int error = 0;
    PCRE2_SIZE offset = 0;
    const std::string pattern = with_unicode_white_space(regex);
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                          &offset, nullptr);
    if (!code_) throw std::invalid_argument("the regex does not compile: " + pcre2_message(error));
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // where it fails, pcre2_match interprets instead
}

Regex::~Regex() { pcre2_code_free(code_); }

void Regex::split(std::string_view text, RegexRun& run, std::vector<std::string_view>& pieces) const {
    size_t done = 0, from = 0;
    uint32_t options = 0;
    while (from <= text.size()) {
        const int rc = run.match(code_, text, from, options);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0)
            throw std::runtime_error("BpeTokenizer: a regex failed on a " + std::to_string(text.size()) +
                                     "-byte piece: " + pcre2_message(rc));
        const PCRE2_SIZE* span = pcre2_get_ovector_pointer(run.match_);
        const size_t begin = span[0], end = span[1];
        if (begin == end) {  // an empty match gives no piece: look on from there for a longer one
            from = begin;
            options = PCRE2_NOTEMPTY_ATSTART;
            continue;
        }
        if (begin > done) pieces.push_back(text.substr(done, begin - done));
        pieces.push_back(text.substr(begin, end - begin));
        done = from = end;
        options = 0;
    }
    if (done < text.size()) pieces.push_back(text.substr(done));
}

}  // namespace gg::nn
