// The model a command runs and the text it runs it on. Every command opens its model through
// one door (nn/io/model.h): --ckpt FILE, a checkpoint of ours, or --hf DIR, a Hugging Face
// Qwen3 folder, give the same model, tokenizer, precision and provenance, and every option
// after that works for both. eval, sink and report also share the text (DataArgs): the
// validation split of the text a checkpoint was trained on, or --data's files in the model's
// own tokens.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/io/model.h"
#include "nn/train/data.h"
#include "nn/train/trainer.h"
#include "nn/transformer.h"
#include "tensor/tensor.h"

// ---------------------------------------------------------------- the model (--ckpt FILE, --hf DIR)

struct ModelArgs {
    std::string ckpt, hf, precision = "auto", device = "cpu";

    // Through the door, at --precision, on --device; a UsageError when neither --ckpt nor --hf
    // is given.
    gg::nn::OpenedModel open() const;
    const std::string& path() const { return ckpt.empty() ? hf : ckpt; }
};

// --ckpt and --hf (each excluding the other), --precision, --device.
void add_model_options(CLI::App* cmd, ModelArgs& a);

// The TrainConfig a checkpoint of train was trained with (its metadata's "train_config"); none
// for a model that holds no training context (a Hugging Face folder, an import).
std::optional<gg::nn::TrainConfig> training_context(const gg::nn::OpenedModel& m);

// ---------------------------------------------------------------- the text to run on

// What eval, sink and report share: the model and the text to run it on.
struct DataArgs {
    ModelArgs model;
    std::vector<std::string> data;
    int64_t seq_len = 0, batch = 0;  // 0: as in training
    int64_t default_batch = 0;       // --batch of a model without a training context
    std::string bos = "auto";        // auto, always, never: bos_token
};

// --ckpt, --hf, --precision, --device, --data, --seq-len, --batch, --bos; `default_batch` for a
// model without a training context.
void add_data_options(CLI::App* cmd, DataArgs& a, int64_t default_batch);

// A model opened to run on text, with its training context when it has one.
struct ModelOnText {
    gg::nn::OpenedModel opened;
    std::optional<gg::nn::TrainConfig> train;
    gg::nn::GatedTransformerLM& model() const { return *opened.model; }
};

// The model through the door, with its training context; nothing filled in, nothing checked.
ModelOnText open_on_text(const DataArgs& a);

// --data's files, each exactly as it is, one after another, in the model's own tokens: no
// separator is added (scoring files a b is scoring the file `cat a b`; our byte models have no
// EOS, and the eos_token_id of a chat model's config.json ends a turn, not a document).
// How many files there were goes into *files when asked.
std::vector<int64_t> text_ids(const gg::nn::OpenedModel& m, const std::vector<std::string>& paths,
                              size_t* files = nullptr);

// The token --bos puts before each sequence of --data's text: auto, the one the tokenizer's
// post-processor puts before a text (our models' BOS; none for Qwen3); always, that one, a usage
// error where there is none; never, none.
std::optional<int64_t> bos_token(const gg::nn::OpenedModel& m, const std::string& policy);

// A prompt in the model's own tokens, --bos's token first (bos_token), for a command that reads
// it in one forward pass for `workload` (lens, report --prompt): a usage error naming the counts
// where the model has no tokenizer, the prompt has fewer than `min_tokens`, or is longer than its
// learned positions or the memory allows.
std::vector<int64_t> prompt_ids(const gg::nn::OpenedModel& m, const std::string& prompt, const std::string& bos,
                                gg::nn::Workload workload, int64_t min_tokens = 1);

// A token as text (printable: control bytes escaped), or "#id" where the model's tokenizer has
// no such id.
std::string token_text(const gg::nn::OpenedModel& m, int64_t id);

// Opens the model and fills in --seq-len and --batch: the training ones, or for a model without
// a training context 256 tokens and the command's default batch. Checks that the model can run at that
// length and that `per_forward` batches in one forward pass fit in memory for `workload`, on
// every kind of model: a usage error when --seq-len or --batch asked for too much.
ModelOnText open_for_data(DataArgs& a, gg::nn::Workload workload, int64_t per_forward = 1);

// Up to `batches` batches of --batch windows of --seq-len + 1 tokens, one after another:
// (n·B, T + 1) int64 on the model's device, each window's first token the sequence's first.
//   without --data: the validation split of the text the model was trained on, BOS first, as
//     in training (a model without a training context needs --data);
//   with --data: text_ids, each window --bos's token first (bos_token), else the text's own
//     first token; a text shorter than one window is one shorter window.
gg::Tensor text_windows(const ModelOnText& m, const DataArgs& a, int64_t batches);

// How a sequence of the text begins, for the header lines: "BOS first" (the validation split,
// as in training), or with --data "BOS first, --bos auto", "no BOS, --bos never: the text's own
// first token".
std::string first_token_note(const ModelOnText& m, const DataArgs& a);
