#include "nn/train/data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "gatedgrad_config.h"  // GG_FORTUNES_DIR, written by meson
#include "nn/names.h"

namespace gg::nn {

const char* const kDefaultCorpus = GG_FORTUNES_DIR;

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
        if (doc.find_first_not_of(" \t\r\n") != std::string::npos) out.push_back(doc);
        doc.clear();
    };
    while (std::getline(in, line)) {
        if (line == "%" || line == "%\r") flush();  // "\r": a file with Windows line ends
        else doc += line + "\n";
    }
    flush();
}

// The bytes of a regular file, exactly as many as its size when opened: a file that
// grows or shrinks while it is read (a log being written, a copy in progress) would
// otherwise train on whatever part was there.
std::string read_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (!in || ec) throw std::runtime_error("corpus: cannot read '" + path.string() + "'");
    std::string text(size, '\0');
    in.read(text.data(), std::streamsize(size));
    const auto got = uintmax_t(in.gcount());
    const bool more = in.peek() != std::char_traits<char>::eof();
    if (got != size || more || std::filesystem::file_size(path, ec) != size)
        throw std::runtime_error("corpus: '" + path.string() + "' changed while it was read: " + std::to_string(size) +
                                 " bytes when opened, " + (more ? "more" : std::to_string(got)) +
                                 " read; nothing was trained on it (run again once the file is complete)");
    return text;
}

// What a path that is neither a folder nor a regular file is, for the error that refuses it.
std::string not_a_file(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (ec == std::errc::too_many_symbolic_link_levels) return "is a loop of symbolic links";
    if (ec || !fs::exists(status))
        return std::string("does not exist") +
               (path == kDefaultCorpus ? " (install the fortunes package, or pass --data FILE)" : "");
    switch (status.type()) {
        case fs::file_type::fifo: return "is not a regular file but a FIFO (a named pipe)";
        case fs::file_type::character: return "is not a regular file but a character device";
        case fs::file_type::block: return "is not a regular file but a block device";
        case fs::file_type::socket: return "is not a regular file but a socket";
        default: return "is not a regular file";
    }
}

uint64_t fnv1a(uint64_t hash, const std::string& bytes) {
    for (unsigned char b : bytes) hash = (hash ^ b) * 0x100000001b3;
    return hash;
}
}  // namespace

std::string CorpusFingerprint::text() const {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
    std::string out = std::string("fnv1a ") + hex;
    for (const auto& [path, bytes] : files) out += "; " + path + " " + std::to_string(bytes);
    return out;
}

namespace {

// A file to read: named on the command line, or found in a folder named there (then skipped
// when binary).
struct Source {
    std::filesystem::path path;
    bool in_folder;
};

std::vector<Source> corpus_sources(const std::vector<std::string>& paths) {
    namespace fs = std::filesystem;
    std::vector<Source> sources;
    for (const std::string& p : paths) {
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            std::vector<fs::path> found;  // canonical: one entry per file, however many links name it
            for (const auto& entry : fs::directory_iterator(p, ec)) {
                if (entry.path().filename().string().starts_with(".") || !entry.is_regular_file()) continue;
                found.push_back(fs::canonical(entry.path(), ec));
            }
            std::sort(found.begin(), found.end());  // directory order is not stable across machines
            found.erase(std::unique(found.begin(), found.end()), found.end());
            for (const fs::path& f : found) sources.push_back({f, true});
        } else if (fs::is_regular_file(p, ec)) {
            sources.push_back({p, false});
        } else {
            throw std::runtime_error("corpus: '" + p + "' " + not_a_file(p));
        }
    }
    return sources;
}

// A source's bytes; none for a binary file found in a folder (fortunes' .dat indexes). A file
// named on its own that is binary, empty or blank is an error.
std::optional<std::string> read_source(const Source& source) {
    std::string text = read_bytes(source.path);
    const std::string name = source.path.string();
    if (const size_t nul = text.find('\0'); nul != std::string::npos) {
        if (source.in_folder) return std::nullopt;
        throw std::runtime_error("corpus: '" + name + "' is not text: it holds a NUL byte at offset " +
                                 std::to_string(nul) + " (folders skip such files; name text files)");
    }
    if (!source.in_folder && text.find_first_not_of(" \t\r\n%") == std::string::npos)
        throw std::runtime_error("corpus: '" + name + "' " +
                                 (text.empty() ? "is empty" : "holds no text, only blank lines and % separators"));
    return text;
}

[[noreturn]] void no_text_found(const std::vector<std::string>& paths) {
    const std::string where = paths.empty() ? std::string("(no paths)") : paths[0];
    const std::string hint = where == kDefaultCorpus ? " (install the default corpus, the fortunes package, or pass --data FILE)"
                                                     : " (its files are empty, hidden or binary)";
    throw std::runtime_error("corpus: no text found in " + where + hint);
}

}  // namespace

Corpus load_corpus(const std::vector<std::string>& paths) {
    namespace fs = std::filesystem;
    Corpus corpus;
    for (const Source& source : corpus_sources(paths)) {
        const std::optional<std::string> text = read_source(source);
        if (!text) continue;
        corpus.fingerprint.files.emplace_back(fs::absolute(source.path).lexically_normal().string(), text->size());
        corpus.fingerprint.hash = fnv1a(corpus.fingerprint.hash, *text);
        split_fortunes(*text, corpus.documents);
    }
    if (corpus.documents.empty()) no_text_found(paths);
    return corpus;
}

std::vector<std::string> load_texts(const std::vector<std::string>& paths) {
    std::vector<std::string> texts;
    size_t bytes = 0;
    for (const Source& source : corpus_sources(paths))
        if (std::optional<std::string> text = read_source(source)) bytes += text->size(), texts.push_back(std::move(*text));
    if (bytes == 0) no_text_found(paths);
    return texts;
}

std::vector<std::string> load_documents(const std::vector<std::string>& paths) { return load_corpus(paths).documents; }

namespace {
const Names<SplitMode> kSplitModes{
    "split", {{"auto", SplitMode::automatic}, {"documents", SplitMode::documents}, {"bytes", SplitMode::bytes}}};
}  // namespace

SplitMode parse_split_mode(const std::string& name) { return kSplitModes.parse(name); }
std::string split_mode_name(SplitMode mode) { return kSplitModes.name(mode); }

TextDataset::TextDataset(const std::vector<std::string>& documents, const CorpusSplit& split) {
    const double f = split.val_fraction;
    if (!(f > 0 && f <= 0.5))
        throw std::invalid_argument("corpus: validation fraction " + std::to_string(f) + " is not in (0, 0.5]");
    const auto n = static_cast<int64_t>(documents.size());
    const int64_t every = std::llround(1 / f);  // documents: the every-th, 2·every-th, ... to validation
    SplitMode mode = split.mode;
    if (mode == SplitMode::automatic) mode = n >= every ? SplitMode::documents : SplitMode::bytes;
    std::string percent = std::to_string(f * 100);
    percent.erase(percent.find_last_not_of('0') + 1);
    if (percent.back() == '.') percent.pop_back();
    const std::string docs = std::to_string(n) + (n == 1 ? " document" : " documents");

    if (mode == SplitMode::documents) {
        for (int64_t i = 0; i < n; ++i) {
            std::vector<int64_t>& stream = (i + 1) % every == 0 ? val_ : train_;
            const std::vector<int64_t> ids = encode_bytes(documents[size_t(i)] + "\n");
            stream.insert(stream.end(), ids.begin(), ids.end());
        }
        if (train_.empty() || val_.empty())
            throw std::runtime_error("corpus: " + docs + " are too few to send one in every " + std::to_string(every) +
                                     " to validation; split at bytes instead (--split bytes)");
        summary_ = docs + ", one in every " + std::to_string(every) + " to validation (" + std::to_string(n / every) +
                   " of them, " + std::to_string(val_.size()) + " bytes)";
    } else {
        for (const std::string& doc : documents) {
            const std::vector<int64_t> ids = encode_bytes(doc + "\n");
            train_.insert(train_.end(), ids.begin(), ids.end());
        }
        const auto cut = static_cast<int64_t>(std::floor(double(train_.size()) * (1 - f)));
        val_.assign(train_.begin() + cut, train_.end());
        train_.resize(size_t(cut));
        if (train_.empty() || val_.empty())
            throw std::runtime_error("corpus: " + std::to_string(train_.size() + val_.size()) +
                                     " bytes of text are too few to split into training and validation text");
        summary_ = docs + " of " + std::to_string(train_.size() + val_.size()) + " bytes, the last " + percent +
                   "% (" + std::to_string(val_.size()) + " bytes) to validation";
    }
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
