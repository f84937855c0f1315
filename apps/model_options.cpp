// Opening the model a command runs and the text it runs it on (model_options.h).
#include "model_options.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "autograd/ops.h"
#include "cli.h"
#include "nn/untrusted.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

// ---------------------------------------------------------------- the model (--ckpt FILE, --hf DIR)

void add_model_options(CLI::App* cmd, ModelArgs& a) {
    CLI::Option* ckpt = cmd->add_option("--ckpt", a.ckpt, "a checkpoint written by train")->type_name("FILE");
    cmd->add_option("--hf", a.hf, "a Hugging Face model folder (config.json, safetensors, tokenizer.json): Qwen3, "
                                  "or the dense text model of Qwen3-Next or Qwen3.5; instead of --ckpt")
        ->type_name("DIR")
        ->excludes(ckpt);
    cmd->add_option("--precision", a.precision, "auto (a --hf folder's dtype; float32 for --ckpt), f32 or bf16")
        ->check(CLI::IsMember({"auto", "f32", "bf16"}))
        ->capture_default_str();
    add_device_option(cmd, a.device);
}

OpenedModel ModelArgs::open() const {
    if (ckpt.empty() && hf.empty())
        throw UsageError("give --ckpt FILE (a checkpoint of train) or --hf DIR (a Hugging Face model)");
    OpenOptions options;
    if (precision != "auto") options.dtype = parse_precision(precision);
    options.device = parse_device(device);
    return open_model(path(), options);  // a folder is a Hugging Face folder, whichever flag named it
}

std::optional<TrainConfig> training_context(const OpenedModel& m) {
    const auto it = m.provenance.metadata.find("train_config");
    if (it == m.provenance.metadata.end()) return std::nullopt;
    TrainConfig train;
    try {
        train = TrainConfig::from_json(it->second);
    } catch (const std::invalid_argument& e) {
        throw std::runtime_error("checkpoint: " + m.provenance.path + ": " + e.what());
    }
    train.model = m.model->config();
    return train;
}

// ---------------------------------------------------------------- the text to run on

void add_data_options(CLI::App* cmd, DataArgs& a, int64_t default_batch) {
    a.default_batch = default_batch;
    add_model_options(cmd, a.model);
    cmd->add_option("--data", a.data, "text files or folders to run on, in the model's own tokens (default: the "
                                      "validation split of the text the model was trained on; with --hf, required)")
        ->type_name("PATH");
    cmd->add_option("--seq-len", a.seq_len, "tokens per sequence (default: the training length; 256 for a model "
                                            "trained elsewhere)")
        ->check(count(2, kMaxSeqLen));
    cmd->add_option("--batch", a.batch, "sequences per batch (default: the training batch; " +
                                            std::to_string(default_batch) + " for a model trained elsewhere)")
        ->check(count(1, TrainConfigLimits::batch_size));
    cmd->add_option("--bos", a.bos, "before each sequence of --data's text: auto (what the tokenizer's post-processor "
                                    "puts before a text: BOS for our models, nothing for Qwen3), always, never")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
}

ModelOnText open_on_text(const DataArgs& a) {
    ModelOnText m{a.model.open(), std::nullopt};
    m.train = training_context(m.opened);
    return m;
}

std::vector<int64_t> text_ids(const OpenedModel& m, const std::vector<std::string>& paths, size_t* files) {
    if (!m.tokenizer)
        throw std::runtime_error(m.provenance.path + ": no tokenizer to turn --data's text into this model's ids" +
                                 (m.provenance.format == ModelFormat::hf_folder ? " (no tokenizer.json)" : ""));
    const std::vector<std::string> texts = load_texts(paths);
    if (files) *files = texts.size();
    std::string text;
    for (const std::string& file : texts) text += file;
    return m.tokenizer->encode(text);
}

std::optional<int64_t> bos_token(const OpenedModel& m, const std::string& policy) {
    const std::optional<int64_t> bos = m.tokenizer ? m.tokenizer->prepended_token() : std::nullopt;
    if (policy == "never") return std::nullopt;
    if (policy == "always" && !bos)
        throw UsageError("--bos always: this model's tokenizer puts no BOS before a text, so there is none to put");
    return bos;
}

std::vector<int64_t> prompt_ids(const OpenedModel& m, const std::string& prompt, const std::string& bos,
                                Workload workload, int64_t min_tokens) {
    if (!m.tokenizer) throw UsageError(m.provenance.path + " has no tokenizer to read --prompt with");
    std::vector<int64_t> ids;
    if (const std::optional<int64_t> first = bos_token(m, bos)) ids.push_back(*first);
    for (const int64_t id : m.tokenizer->encode(prompt)) ids.push_back(id);
    if (ids.empty()) throw UsageError("--prompt is empty and there is no BOS to read instead");
    const int64_t T = int64_t(ids.size());
    if (T < min_tokens)
        throw UsageError("--prompt is " + std::to_string(T) + " token" + (T == 1 ? "" : "s") + " with --bos " + bos +
                         ", fewer than the " + std::to_string(min_tokens) + " this command reads");
    const LMConfig& c = m.model->config();
    if (c.positions == PositionEncoding::learned && T > c.max_len)
        throw UsageError("--prompt is " + std::to_string(T) + " tokens, more than the " + std::to_string(c.max_len) +
                         " learned positions of this model");
    try {
        check_memory(c, workload, 1, T);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--prompt: ") + e.what());
    }
    return ids;
}

std::string token_text(const OpenedModel& m, int64_t id) {
    if (!m.tokenizer || id >= m.tokenizer->vocab_size()) return "#" + std::to_string(id);
    return printable(m.tokenizer->decode({id}), 24);
}

ModelOnText open_for_data(DataArgs& a, Workload workload, int64_t per_forward) {
    ModelOnText m = open_on_text(a);
    const bool from_flags = a.seq_len > 0 || a.batch > 0;
    if (a.seq_len == 0) a.seq_len = m.train ? m.train->seq_len : 256;
    if (a.batch == 0) a.batch = m.train ? m.train->batch_size : a.default_batch;
    const LMConfig& c = m.model().config();
    if (c.positions == PositionEncoding::learned && a.seq_len > c.max_len)
        throw UsageError("--seq-len " + std::to_string(a.seq_len) + " is longer than the " + std::to_string(c.max_len) +
                         " learned positions of this model");
    try {
        check_memory(c, workload, a.batch * per_forward, a.seq_len);
    } catch (const std::invalid_argument& e) {
        if (from_flags) throw UsageError(e.what());
        throw std::runtime_error(a.model.path() + ": " + e.what());
    }
    return m;
}

namespace {

// The text a checkpoint was trained on, split as in training. Runs from before paths were saved
// absolute name their corpus relative to the folder they were trained in.
TextDataset validation_text(const TrainConfig& train) {
    try {
        return TextDataset(load_documents(train.data), train.split);
    } catch (const std::runtime_error& e) {
        for (const std::string& path : train.data)
            if (fs::path(path).is_relative() && !fs::exists(path))
                throw std::runtime_error(std::string(e.what()) + " here, in " + fs::current_path().string() +
                                         "; the checkpoint names it relative to the folder it was trained in: run "
                                         "from there, or pass --data PATH");
        throw;
    }
}

// The first `batches` validation batches (fewer where the text has fewer; not even one throws).
Tensor validation_windows(const TrainConfig& train, int64_t batches, int64_t B, int64_t T) {
    const TextDataset data = validation_text(train);
    if (data.val_batches(B, T) < 1)
        throw std::runtime_error("the validation text (" + std::to_string(data.val_stream().size()) +
                                 " bytes) is too short for one batch of " + std::to_string(B) + " x " + std::to_string(T) +
                                 "; pass a smaller --batch or --seq-len");
    std::vector<Tensor> windows;
    for (int64_t i = 0; i < std::min(batches, data.val_batches(B, T)); ++i) {
        const Batch b = data.val_batch(i, B, T);  // inputs BOS first, targets one token on
        windows.push_back(cat({b.inputs, b.targets.narrow(1, T - 1, 1)}, 1));  // (B, T + 1)
    }
    return cat(windows, 0);
}

// Up to n windows of T + 1 tokens of text_ids, each `bos` first when there is one.
Tensor tokenized_windows(const std::vector<int64_t>& stream, std::optional<int64_t> bos, int64_t n, int64_t T) {
    const int64_t first = bos ? 1 : 0, body = T + 1 - first;  // tokens of text per window
    const int64_t count = std::max<int64_t>(1, std::min<int64_t>(n, int64_t(stream.size()) / body));
    const int64_t length = std::min<int64_t>(body, int64_t(stream.size()));
    if (length + first < 2) throw std::runtime_error("the text gives fewer than 2 tokens");
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < count; ++i) {
        if (bos) ids.push_back(*bos);
        ids.insert(ids.end(), stream.begin() + i * body, stream.begin() + i * body + length);
    }
    return from_vector(ids, {count, length + first});
}

}  // namespace

Tensor text_windows(const ModelOnText& m, const DataArgs& a, int64_t batches) {
    const Device device = device_of(m.model());
    if (!a.data.empty())
        return tokenized_windows(text_ids(m.opened, a.data), bos_token(m.opened, a.bos), a.batch * batches, a.seq_len)
            .to(device);
    if (a.bos != "auto")
        throw UsageError("--bos " + a.bos + " is for --data's text: the validation split is read as in training, BOS "
                                            "first");
    if (!m.train && m.opened.provenance.format == ModelFormat::hf_folder)
        throw UsageError("--hf needs --data FILE: the text to run the model on");
    if (!m.train)
        throw UsageError(a.model.path() + " names no text it was trained on (a model from elsewhere): give --data "
                                          "FILE, the text to run it on");
    return validation_windows(*m.train, batches, a.batch, a.seq_len).to(device);
}

std::string first_token_note(const ModelOnText& m, const DataArgs& a) {
    if (a.data.empty()) return "BOS first";
    if (bos_token(m.opened, a.bos)) return "BOS first, --bos " + a.bos;
    return "no BOS, --bos " + a.bos + ": the text's own first token";
}
