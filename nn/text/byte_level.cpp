// byte_level.cpp — UTF-8, GPT-2's byte alphabet and NFC (byte_level.h).
#include "nn/text/byte_level.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <stdexcept>

#include "nn/text/bpe.h"

namespace gg::nn {

namespace {

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

void append_utf8(std::string& out, char32_t c) {  // c < U+0800, which the byte alphabet is
    if (c < 0x80) {
        out += char(c);
    } else {
        out += char(0xC0 | (c >> 6));
        out += char(0x80 | (c & 0x3F));
    }
}

}  // namespace

std::string byte_level_symbol(uint8_t byte) {
    return byte_level::to_alphabet(std::string_view(reinterpret_cast<const char*>(&byte), 1));
}

namespace byte_level {

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

std::string to_alphabet(std::string_view bytes) {
    std::string out;
    for (char b : bytes) append_utf8(out, alphabet().char_of[uint8_t(b)]);
    return out;
}

std::string token_to_bytes(std::string_view token) {
    std::string out;
    for (size_t i = 0; i < token.size();) {
        const size_t n = utf8_length(token, i);
        if (n == 0 || n > 2) return std::string(token);
        const char32_t c = n == 1 ? char32_t(uint8_t(token[i])) : char32_t((token[i] & 0x1F) << 6 | (token[i + 1] & 0x3F));
        if (c >= alphabet().byte_of.size() || alphabet().byte_of[c] < 0) return std::string(token);
        out += char(alphabet().byte_of[c]);
        i += n;
    }
    return out;
}

std::string_view nfc(std::string_view text, std::string& out) {
    if (std::all_of(text.begin(), text.end(), [](char c) { return uint8_t(c) < 0x80; })) return text;
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), utf8proc_ssize_t(text.size()),
                                            &mapped, utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) throw std::runtime_error(std::string("BpeTokenizer: NFC of a ") + std::to_string(text.size()) +
                                        "-byte span failed: " + utf8proc_errmsg(n));
    out.assign(reinterpret_cast<const char*>(mapped), size_t(n));
    std::free(mapped);
    return out;
}

}  // namespace byte_level

}  // namespace gg::nn
