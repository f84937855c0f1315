// Opening the model a command runs and the text it runs it on (model_options.h).
#include "model_options.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "autograd/ops.h"
#include "cli.h"
#include "nn/io/hf.h"
#include "nn/io/safetensors.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

// ---------------------------------------------------------------- checkpoints

Checkpoint open_checkpoint(const std::string& path) {
    Checkpoint ck;
    ck.model = load_model(path);  // checks the file and every tensor
    const SafetensorsFile file = read_safetensors(path);
    if (auto it = file.metadata.find("train_config"); it != file.metadata.end()) {
        try {
            ck.train = TrainConfig::from_json(it->second);
        } catch (const std::invalid_argument& e) {
            throw std::runtime_error("checkpoint: " + path + ": " + e.what());
        }
    }
    ck.train.model = ck.model->config();
    return ck;
}

// ---------------------------------------------------------------- Hugging Face models (--hf DIR)

CLI::Option* add_hf_options(CLI::App* cmd, std::string& dir, std::string& precision) {
    CLI::Option* hf = cmd->add_option("--hf", dir, "a Hugging Face Qwen3 model folder (config.json, safetensors, "
                                                   "tokenizer.json) instead of --ckpt")->type_name("DIR");
    cmd->add_option("--precision", precision, "with --hf: auto (the file's dtype), f32 or bf16")
        ->check(CLI::IsMember({"auto", "f32", "bf16"}))
        ->capture_default_str();
    return hf;
}

std::unique_ptr<HfModel> open_hf(const std::string& dir, const std::string& precision, const std::string& device,
                                 bool need_tokenizer) {
    auto out = std::make_unique<HfModel>();
    hf::LoadOptions options;
    if (precision != "auto") options.dtype = parse_precision(precision);
    out->model = hf::load(dir, options);
    out->model->to(parse_device(device));
    const fs::path tokenizer = fs::path(dir) / "tokenizer.json";
    if (fs::exists(tokenizer)) out->tokenizer = BpeTokenizer::from_file(tokenizer.string());
    else if (need_tokenizer) throw std::runtime_error(dir + ": no tokenizer.json to turn text into this model's ids");
    if (out->tokenizer && out->tokenizer->vocab_size() > out->model->config().vocab_size)
        throw std::runtime_error(dir + ": tokenizer.json has " + std::to_string(out->tokenizer->vocab_size()) +
                                 " tokens but the model only " + std::to_string(out->model->config().vocab_size));
    if (out->model->parameters().front().dtype() == DType::bf16) out->autocast.emplace(DType::bf16);
    return out;
}

Tensor hf_windows(const HfModel& m, const std::vector<std::string>& paths, int64_t n, int64_t T) {
    if (paths.empty()) throw UsageError("--hf needs --data FILE: the text to run the model on");
    std::string text;
    for (const std::string& doc : load_documents(paths)) text += doc + "\n";
    const std::vector<int64_t> stream = m.tokenizer->encode(text);
    const std::optional<int64_t> first = m.tokenizer->prepended_token();
    const int64_t body = T + 1 - (first ? 1 : 0);  // tokens of text per window
    const int64_t count = std::max<int64_t>(1, std::min<int64_t>(n, int64_t(stream.size()) / body));
    const int64_t length = std::min<int64_t>(body, int64_t(stream.size()));
    if (length + (first ? 1 : 0) < 2) throw std::runtime_error("the text gives fewer than 2 tokens");
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < count; ++i) {
        if (first) ids.push_back(*first);
        ids.insert(ids.end(), stream.begin() + i * body, stream.begin() + i * body + length);
    }
    return from_vector(ids, {count, length + (first ? 1 : 0)}).to(device_of(*m.model));
}

// ---------------------------------------------------------------- the text to run on

void add_data_options(CLI::App* cmd, DataArgs& a) {
    CLI::Option* ckpt = cmd->add_option("--ckpt", a.ckpt, "a checkpoint written by train")->type_name("FILE");
    add_hf_options(cmd, a.hf, a.precision)->excludes(ckpt);
    cmd->add_option("--data", a.data, "corpus files or folders (default: those the model was trained on; with --hf, "
                                      "required)")->type_name("PATH");
    cmd->add_option("--seq-len", a.seq_len, "tokens per sequence (default: the training length)")
        ->check(count(2, kMaxSeqLen));
    cmd->add_option("--batch", a.batch, "sequences per batch (default: the training batch)")
        ->check(count(1, TrainConfigLimits::batch_size));
    add_device_option(cmd, a.device);
}

Checkpoint open_for_data(DataArgs& a, Workload workload) {
    if (a.ckpt.empty()) throw UsageError("give --ckpt FILE (a checkpoint of train) or --hf DIR (a Hugging Face model)");
    const Device device = parse_device(a.device);
    Checkpoint ck = open_checkpoint(a.ckpt);
    ck.model->to(device);
    if (!a.data.empty()) ck.train.data = a.data;
    const bool from_flags = a.seq_len > 0 || a.batch > 0;
    if (a.seq_len == 0) a.seq_len = ck.train.seq_len;
    if (a.batch == 0) a.batch = ck.train.batch_size;
    const LMConfig& m = ck.model->config();
    if (m.positions == PositionEncoding::learned && a.seq_len > m.max_len)
        throw UsageError("--seq-len " + std::to_string(a.seq_len) + " is longer than the " + std::to_string(m.max_len) +
                         " learned positions of this model");
    try {
        check_memory(m, workload, a.batch, a.seq_len);
    } catch (const std::invalid_argument& e) {
        if (from_flags) throw UsageError(e.what());
        throw std::runtime_error(a.ckpt + ": " + e.what());
    }
    return ck;
}

TextDataset validation_text(const Checkpoint& ck, const DataArgs& a) {
    try {
        return TextDataset(load_documents(ck.train.data), ck.train.split);
    } catch (const std::runtime_error& e) {
        for (const std::string& path : ck.train.data)
            if (a.data.empty() && fs::path(path).is_relative() && !fs::exists(path))
                throw std::runtime_error(std::string(e.what()) + " here, in " + fs::current_path().string() +
                                         "; the checkpoint names it relative to the folder it was trained in: run "
                                         "from there, or pass --data PATH");
        throw;
    }
}

int64_t validation_batch_count(const TextDataset& data, int64_t n, int64_t B, int64_t T) {
    if (data.val_batches(B, T) < 1)
        throw std::runtime_error("the validation text (" + std::to_string(data.val_stream().size()) +
                                 " bytes) is too short for one batch of " + std::to_string(B) + " x " + std::to_string(T) +
                                 "; pass a smaller --batch or --seq-len");
    return std::min(n, data.val_batches(B, T));
}

Tensor validation_ids(const Checkpoint& ck, const DataArgs& a, int64_t batches) {
    const int64_t B = a.batch, T = a.seq_len;
    const TextDataset data = validation_text(ck, a);
    std::vector<Tensor> sequences;
    const int64_t n = validation_batch_count(data, batches, B, T);
    for (int64_t i = 0; i < n; ++i) sequences.push_back(data.val_batch(i, B, T).inputs);
    return cat(sequences, 0).to(device_of(*ck.model));
}
