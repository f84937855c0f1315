#include "nn/train/data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gg::nn {

std::vector<int64_t> encode_bytes(const std::string& text) {
    std::vector<int64_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
}

std::string decode_bytes(const std::vector<int64_t>& ids) {
    std::string text;
    for (int64_t id : ids)
        if (id >= 0 && id < 256) text += static_cast<char>(id);
    return text;
}

namespace {
// Splits a fortunes file at lines that hold only "%"; other text is one document.
void split_fortunes(const std::string& text, std::vector<std::string>& out) {
    std::istringstream in(text);
    std::string line, doc;
    auto flush = [&] {
        if (doc.find_first_not_of(" \t\n") != std::string::npos) out.push_back(doc);
        doc.clear();
    };
    while (std::getline(in, line)) {
        if (line == "%") flush();
        else doc += line + "\n";
    }
    flush();
}
}  // namespace

std::vector<std::string> load_documents(const std::vector<std::string>& paths) {
    namespace fs = std::filesystem;
    std::vector<fs::path> files;
    for (const std::string& p : paths) {
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            for (const auto& entry : fs::directory_iterator(p, ec))
                if (entry.is_regular_file() && !entry.is_symlink() && entry.path().extension().empty())
                    files.push_back(entry.path());
        } else if (fs::is_regular_file(p, ec)) {
            files.push_back(p);
        } else {
            throw std::runtime_error("corpus: '" + p + "' does not exist" +
                                     (p == kDefaultCorpus ? " (install it: apt-get install fortunes)" : ""));
        }
    }
    std::sort(files.begin(), files.end());  // directory order is not stable across machines
    std::vector<std::string> docs;
    for (const fs::path& f : files) {
        std::ifstream in(f, std::ios::binary);
        std::stringstream text;
        text << in.rdbuf();
        split_fortunes(text.str(), docs);
    }
    if (docs.empty())
        throw std::runtime_error("corpus: no text found in " + (paths.empty() ? std::string("(no paths)") : paths[0]) +
                                 " (install the default corpus with apt-get install fortunes, or pass --data FILE)");
    return docs;
}

TextDataset::TextDataset(const std::vector<std::string>& documents, int64_t val_every) {
    for (size_t i = 0; i < documents.size(); ++i) {
        const bool val = val_every > 0 && int64_t(i % size_t(val_every)) == val_every - 1;
        std::vector<int64_t>& stream = val ? val_ : train_;
        const std::vector<int64_t> ids = encode_bytes(documents[i] + "\n");
        stream.insert(stream.end(), ids.begin(), ids.end());
    }
    if (train_.empty() || val_.empty())
        throw std::runtime_error("corpus: " + std::to_string(documents.size()) +
                                 " documents are too few to split into training and validation text");
}

Batch TextDataset::make_batch(const std::vector<int64_t>& stream, const std::vector<int64_t>& starts, int64_t T) {
    const auto B = static_cast<int64_t>(starts.size());
    std::vector<int64_t> x(B * T), y(B * T);
    for (int64_t b = 0; b < B; ++b) {
        // x = BOS s_o … s_{o+T−2},  y = s_o … s_{o+T−1}
        x[b * T] = kBOS;
        for (int64_t t = 0; t < T; ++t) {
            y[b * T + t] = stream[starts[b] + t];
            if (t + 1 < T) x[b * T + t + 1] = stream[starts[b] + t];
        }
    }
    return {from_vector(x, {B, T}), from_vector(y, {B, T})};
}

Batch TextDataset::train_batch(int64_t B, int64_t T, Generator& gen) const {
    if (static_cast<int64_t>(train_.size()) < T)
        throw std::runtime_error("dataset: the training text (" + std::to_string(train_.size()) +
                                 " bytes) is shorter than one sequence of " + std::to_string(T));
    std::vector<int64_t> starts(B);
    for (int64_t& s : starts) s = gen.randint(0, static_cast<int64_t>(train_.size()) - T + 1);
    return make_batch(train_, starts, T);
}

int64_t TextDataset::val_batches(int64_t B, int64_t T) const {
    return static_cast<int64_t>(val_.size()) / (B * T);
}

Batch TextDataset::val_batch(int64_t i, int64_t B, int64_t T) const {
    const int64_t n = val_batches(B, T);
    if (n == 0)
        throw std::runtime_error("dataset: the validation text (" + std::to_string(val_.size()) +
                                 " bytes) is too short for one batch of " + std::to_string(B) + "x" + std::to_string(T));
    std::vector<int64_t> starts(B);
    for (int64_t b = 0; b < B; ++b) starts[b] = ((i % n) * B + b) * T;  // consecutive, non-overlapping windows
    return make_batch(val_, starts, T);
}

double TextDataset::unigram_entropy() const {
    std::vector<double> counts(256, 0);
    for (int64_t id : train_) counts[id] += 1;
    double h = 0;
    for (double c : counts)
        if (c > 0) h -= c / train_.size() * std::log(c / train_.size());
    return h;
}

}  // namespace gg::nn
