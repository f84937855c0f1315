// The model a command runs and the text it runs it on: a checkpoint of train (--ckpt) with
// the TrainConfig it was trained with, or a Hugging Face Qwen3 folder (--hf), and the
// validation text, split as in training. eval, sink and report share --ckpt, --hf, --data,
// --seq-len and --batch (DataArgs); sample and logits open --hf models the same way.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "nn/text/bpe.h"
#include "nn/train/data.h"
#include "nn/train/trainer.h"
#include "nn/transformer.h"
#include "tensor/tensor.h"

// ---------------------------------------------------------------- checkpoints

// A trained model with the TrainConfig it was trained with (defaults where the file has none).
struct Checkpoint {
    std::shared_ptr<gg::nn::GatedTransformerLM> model;
    gg::nn::TrainConfig train;
};

Checkpoint open_checkpoint(const std::string& path);

// ---------------------------------------------------------------- Hugging Face models (--hf DIR)

// A Qwen3 folder (config.json, safetensors, tokenizer.json): nn/io/hf.h. Its weights keep
// the file's dtype unless --precision says otherwise; bfloat16 ones run under autocast.
CLI::Option* add_hf_options(CLI::App* cmd, std::string& dir, std::string& precision);

struct HfModel {
    std::shared_ptr<gg::nn::GatedTransformerLM> model;
    std::optional<gg::nn::BpeTokenizer> tokenizer;  // from DIR/tokenizer.json, when there is one
    std::optional<gg::Autocast> autocast;           // on while the weights are bfloat16
};

std::unique_ptr<HfModel> open_hf(const std::string& dir, const std::string& precision, const std::string& device,
                                 bool need_tokenizer);

// Up to n windows of T + 1 tokens of the text (documents joined by newlines, tokenized as one
// stream): each its own sequence, the tokenizer's leading token (BOS) first where its
// post-processor puts one, else the text's own first token. A text shorter than one window is
// one shorter sequence. (n', T' + 1) int64, on the model's device.
gg::Tensor hf_windows(const HfModel& m, const std::vector<std::string>& paths, int64_t n, int64_t T);

// ---------------------------------------------------------------- the text to run on

// What eval and sink share: the checkpoint and the validation text to run it on.
struct DataArgs {
    std::string ckpt, hf, precision = "auto", device = "cpu";
    std::vector<std::string> data;
    int64_t seq_len = 0, batch = 0;  // 0: as in training
};

void add_data_options(CLI::App* cmd, DataArgs& a);

// Fills in the training defaults and checks the model can run at that length, and that a
// batch of that size fits in memory for `workload`.
Checkpoint open_for_data(DataArgs& a, gg::nn::Workload workload);

// The text a checkpoint was trained on (or --data's), split as in training. Runs from before
// paths were saved absolute name their corpus relative to the folder they were trained in.
gg::nn::TextDataset validation_text(const Checkpoint& ck, const DataArgs& a);

// How many of the first n validation batches exist; throws when not even one fits.
int64_t validation_batch_count(const gg::nn::TextDataset& data, int64_t n, int64_t B, int64_t T);

// The first `batches` validation batches (fewer where the text has fewer), one after another:
// (n·B, T), each sequence BOS first, on the model's device.
gg::Tensor validation_ids(const Checkpoint& ck, const DataArgs& a, int64_t batches);
