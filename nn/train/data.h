// data.h — text to training batches: a byte tokenizer, a corpus split, a batch sampler.
//
// Tokens are bytes (0–255) plus BOS = 256. Every sequence the model sees starts with BOS:
// the attention-sink experiments need a fixed first token for heads to park on.
// The default corpus is the `fortunes` package: plain-text files whose entries are
// separated by lines holding only "%". Any text works: one file (nanoGPT's input.txt), a
// folder of text files, or several of either.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nn/text/bytes.h"
#include "tensor/random.h"

namespace gg::nn {


std::vector<int64_t> encode_bytes(const std::string& text);     // no BOS added
std::string decode_bytes(const std::vector<int64_t>& ids);       // BOS and non-bytes are skipped

// The fortunes folder, found when gatedgrad is configured (meson -Dfortunes_dir=PATH; Debian
// and Ubuntu: /usr/share/games/fortunes).
extern const char* const kDefaultCorpus;

// What a run trained on, to notice on resume that it changed: every file read, with its
// size, and one FNV-1a hash of all their bytes in order.
struct CorpusFingerprint {
    std::vector<std::pair<std::string, uint64_t>> files;  // path, bytes
    uint64_t hash = 0xcbf29ce484222325;                    // FNV-1a's offset basis: no bytes yet
    // "fnv1a 0123456789abcdef; /data/a.txt 1234; /data/b.txt 99": what TrainConfig stores.
    std::string text() const;
};

struct Corpus {
    std::vector<std::string> documents;
    CorpusFingerprint fingerprint;
};

// Documents from files and folders, in path order:
//   - a file is read whole, to the size it had when opened: one that changes meanwhile
//     is an error, not a partial text;
//   - a folder contributes the files directly in it (not its subfolders), each once however
//     many links name it, except hidden ones (".name") and binary ones (a NUL byte: the
//     fortunes package's .dat indexes);
//   - each file is cut into documents at lines holding only "%" (the fortunes format); a
//     file without such a line is one document.
// Throws a one-line error naming the path: it does not exist, is a loop of symbolic links,
// is not a regular file (a FIFO, a device), is empty, or, named on its own, is binary.
// When nothing is found in the default corpus, it says what to install.
Corpus load_corpus(const std::vector<std::string>& paths);
std::vector<std::string> load_documents(const std::vector<std::string>& paths);  // load_corpus's documents
// Each file's bytes exactly as they are, in the same order and with the same refusals, not cut
// into documents: the text eval scores.
std::vector<std::string> load_texts(const std::vector<std::string>& paths);

// How documents are split into training and validation text (TextDataset).
enum class SplitMode {
    automatic,  // documents when there are enough of them for both parts, else bytes
    documents,  // every k-th document to validation, k = round(1 / val_fraction)
    bytes,      // the last val_fraction of the bytes, wherever that cut falls (nanoGPT)
};
struct CorpusSplit {
    double val_fraction = 0.1;  // in (0, 0.5]
    SplitMode mode = SplitMode::automatic;
};
SplitMode parse_split_mode(const std::string& name);  // "auto", "documents", "bytes", any case
std::string split_mode_name(SplitMode mode);

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

// Documents are split deterministically (CorpusSplit: by default every 10th document to
// validation, or the last 10% of the bytes when there are fewer than 10 documents), each
// part becomes one byte stream (every document followed by "\n"), and a sequence is BOS
// followed by a window of the stream. Throws when either part would be empty.
class TextDataset : public BatchSource {
public:
    explicit TextDataset(const std::vector<std::string>& documents, const CorpusSplit& split = {});
    const std::vector<int64_t>& train_stream() const { return train_; }
    const std::vector<int64_t>& val_stream() const { return val_; }
    // How the split went, in one line: "60 documents, every 10th to validation (6 of them,
    // 1234 bytes)" or "1 document of 5000 bytes, its last 10% (500 bytes) to validation".
    const std::string& split_summary() const { return summary_; }

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
    std::string summary_;
};

}  // namespace gg::nn
