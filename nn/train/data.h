// data.h — text to training batches: a byte tokenizer, a corpus split, a batch sampler.
//
// Tokens are bytes (0–255) plus BOS = 256. Every sequence the model sees starts with BOS:
// the attention-sink experiments need a fixed first token for heads to park on.
// The default corpus is the Debian `fortunes` package: plain-text files whose entries
// are separated by lines holding only "%".
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/random.h"

namespace gg::nn {

constexpr int64_t kBOS = 256;
constexpr int64_t kByteVocab = 257;

std::vector<int64_t> encode_bytes(const std::string& text);     // no BOS added
std::string decode_bytes(const std::vector<int64_t>& ids);       // BOS and non-bytes are skipped

constexpr const char* kDefaultCorpus = "/usr/share/games/fortunes";

// Documents from files and folders (a folder contributes its regular files without an
// extension, which is how `fortunes` ships its text). Throws a one-line error that says
// what to install or pass when nothing is found.
std::vector<std::string> load_documents(const std::vector<std::string>& paths);

struct Batch {
    Tensor inputs;   // (B, T) int64, column 0 is BOS
    Tensor targets;  // (B, T) int64, the next token of each input
};

// Where training and validation batches come from: natural text (TextDataset) or a
// synthetic task. Batches are BOS-first (B, T) inputs with next-token targets.
class BatchSource {
public:
    virtual ~BatchSource() = default;
    virtual Batch train_batch(int64_t B, int64_t T, Generator& gen) const = 0;  // seeded, reproducible
    virtual Batch val_batch(int64_t i, int64_t B, int64_t T) const = 0;         // fixed: same every call
    virtual int64_t val_batches(int64_t B, int64_t T) const = 0;                // how many distinct ones
};

// Documents are split deterministically (every `val_every`-th one to validation), each
// split becomes one byte stream (documents joined by "\n"), and a sequence is BOS
// followed by a window of the stream.
class TextDataset : public BatchSource {
public:
    TextDataset(const std::vector<std::string>& documents, int64_t val_every = 10);
    const std::vector<int64_t>& train_stream() const { return train_; }
    const std::vector<int64_t>& val_stream() const { return val_; }

    // Random windows of the training stream, drawn from `gen` (seeded: reproducible).
    Batch train_batch(int64_t B, int64_t T, Generator& gen) const override;
    // The i-th fixed validation batch: consecutive windows of the validation text.
    Batch val_batch(int64_t i, int64_t B, int64_t T) const override;
    int64_t val_batches(int64_t B, int64_t T) const override;

    // Entropy of the training bytes' frequencies, in nats per byte: the loss of the best
    // model that ignores context, a baseline any trained LM must beat.
    double unigram_entropy() const;

private:
    static Batch make_batch(const std::vector<int64_t>& stream, const std::vector<int64_t>& starts, int64_t T);
    std::vector<int64_t> train_, val_;
};

}  // namespace gg::nn
