// model.cpp — open_model: a checkpoint of ours or a Hugging Face folder, the same way.
#include "nn/io/model.h"

#include <filesystem>
#include <stdexcept>

#include "nn/io/hf.h"
#include "nn/text/byte_tokenizer.h"
#include "nn/text/bytes.h"

namespace gg::nn {

namespace fs = std::filesystem;

namespace {

// A checkpoint's tokenizer: the tokenizer.json import-hf kept in its metadata, else the byte
// tokenizer for a model of the byte vocabulary, else none.
std::optional<BpeTokenizer> checkpoint_tokenizer(const OpenedModel& m, std::string& source) {
    const Metadata& metadata = m.provenance.metadata;
    if (const auto it = metadata.find("tokenizer"); it != metadata.end()) {
        source = "the checkpoint";
        try {
            return BpeTokenizer::from_json(it->second);
        } catch (const std::invalid_argument& e) {
            throw std::runtime_error("checkpoint: " + m.provenance.path + ": its tokenizer: " + e.what());
        }
    }
    if (m.model->config().vocab_size != kByteVocab) return std::nullopt;
    source = "the byte tokenizer";
    return byte_tokenizer();
}

}  // namespace

OpenedModel open_model(const std::string& path, const OpenOptions& options) {
    OpenedModel m;
    m.provenance.path = path;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        m.provenance.format = ModelFormat::hf_folder;
        m.model = hf::load_folder(path, {.dtype = options.dtype, .memory = options.memory});
        const fs::path tokenizer = fs::path(path) / "tokenizer.json";
        if (fs::exists(tokenizer, ec)) {
            m.tokenizer = BpeTokenizer::from_file(tokenizer.string());
            m.provenance.tokenizer_source = "tokenizer.json";
        }
    } else {
        m.model = load_checkpoint(path, options.memory.value_or(0), &m.provenance.metadata);
        if (options.dtype && *options.dtype != DType::f32) m.model->to(*options.dtype);
        m.tokenizer = checkpoint_tokenizer(m, m.provenance.tokenizer_source);
    }
    const int64_t rows = m.model->config().vocab_size;
    if (m.tokenizer && m.tokenizer->vocab_size() > rows)
        throw std::runtime_error(path + ": the tokenizer (" + m.provenance.tokenizer_source + ") has " +
                                 std::to_string(m.tokenizer->vocab_size()) + " tokens but the model only " +
                                 std::to_string(rows));
    m.byte_tokens = m.tokenizer && is_byte_tokenizer(*m.tokenizer);
    m.precision = m.model->parameters().front().dtype() == DType::bf16 ? DType::bf16 : DType::f32;
    m.model->to(options.device);
    m.model->eval();
    return m;
}

std::vector<bool> decodable_ids(const OpenedModel& m) {
    const int64_t rows = m.model->config().vocab_size;
    std::vector<bool> out(size_t(rows), true);
    if (!m.tokenizer) return out;
    for (int64_t id = 0; id < rows; ++id) {
        if (id >= m.tokenizer->vocab_size()) {
            out[size_t(id)] = false;
            continue;
        }
        try {
            m.tokenizer->decode({id});
        } catch (const std::out_of_range&) {  // an id inside the range that names no token
            out[size_t(id)] = false;
        }
    }
    return out;
}

}  // namespace gg::nn
