// bytes.h — the byte tokenizer's alphabet: ids 0–255 are the bytes themselves and 256 is BOS,
// which every sequence of our own models starts with (train/data.h), so that attention-sink
// experiments have a fixed first token. Here, below the trainer, so that the model's file
// formats (io/hf.h) know it too.
#pragma once
#include <cstdint>

namespace gg::nn {

constexpr int64_t kBOS = 256;
constexpr int64_t kByteVocab = 257;

}  // namespace gg::nn
