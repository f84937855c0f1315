// byte_level.h — what byte-level BPE files and texts are made of: UTF-8, GPT-2's byte
// alphabet, and NFC. Shared by reading a tokenizer.json (bpe_json.cpp) and encoding (bpe.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace gg::nn::byte_level {

// The length of the valid UTF-8 sequence that starts at text[i] (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or 0 where none does.
size_t utf8_length(std::string_view text, size_t i);

// `bytes` spelled in GPT-2's byte alphabet, as model.vocab spells tokens: the printable bytes
// ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves, the other 68 take U+0100 onwards in
// byte order ("Ġ" for a space), so that every token is text.
std::string to_alphabet(std::string_view bytes);

// The bytes a vocabulary token stands for. A token with a character outside the byte alphabet
// stands for its own UTF-8, as in Hugging Face's ByteLevel decoder.
std::string token_to_bytes(std::string_view token);

// `text`, valid UTF-8, in Normalization Form C (Unicode Standard Annex #15): `text` itself
// where it is ASCII (which NFC never changes), else `out`, rewritten.
std::string_view nfc(std::string_view text, std::string& out);

}  // namespace gg::nn::byte_level
