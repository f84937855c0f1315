// byte_tokenizer.h — the byte tokenizer of our own models (ids 0–255 the bytes, 256 BOS first;
// nn/text/bytes.h) written as what every other model brings: a byte-level BPE tokenizer.json
// with no merges, whose post-processor puts BOS before each text. So one tokenizer type
// (BpeTokenizer) serves every model, and an exported folder (nn/io/hf.h) carries it.
#pragma once
#include <string>

#include "nn/text/bpe.h"

namespace gg::nn {

// The tokenizer.json text: 256 byte tokens, the added token "<|bos|>" (id 256), no merges.
// Like any added token, "<|bos|>" written in a text encodes as BOS, as Hugging Face's
// tokenizers read the same file.
std::string byte_tokenizer_json();
BpeTokenizer byte_tokenizer();

// Whether `t` is that tokenizer, however it was spelled: 257 ids, BOS (256) put first, and
// every byte its own id both ways. Text is then measured per byte.
bool is_byte_tokenizer(const BpeTokenizer& t);

}  // namespace gg::nn
