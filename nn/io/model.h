// model.h — one door for every model. open_model(path) opens a checkpoint of ours (a
// .safetensors file that train, export or import-hf wrote: load_checkpoint, nn/io/checkpoint.h)
// or a Hugging Face folder (Qwen3, or a Qwen3-Next / Qwen3.5 hybrid: nn/io/hf.h), and gives back
// the same four things for both:
//   model       — the GatedTransformerLM, in eval mode, on the device asked for;
//   tokenizer   — what turns text into the model's ids: a folder's tokenizer.json, the one
//                 import-hf kept in the checkpoint, or, for our byte models, the byte
//                 tokenizer as a byte-level BPE (nn/text/byte_tokenizer.h), so that every
//                 command reads text one way;
//   precision   — the dtype the model runs in (bfloat16 weights: under Autocast(bf16));
//   provenance  — where it came from, and what the file says beside the weights (a trained
//                 checkpoint's TrainConfig, nn/train/trainer.h, which the commands read).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/io/checkpoint.h"
#include "nn/text/bpe.h"
#include "nn/transformer.h"

namespace gg::nn {

enum class ModelFormat {
    checkpoint,  // one .safetensors file of ours, the model's LMConfig in its metadata
    hf_folder,   // config.json, the weights (one file or shards), tokenizer.json
};

struct OpenOptions {
    // The parameters' dtype. Empty: a folder's own (a bfloat16 checkpoint stays bfloat16), and
    // float32 for a checkpoint of ours (its master weights; a bfloat16 export widens exactly).
    std::optional<DType> dtype{};
    Device device = Device::CPU;
    // The bytes the model may take, checked before its weights are read, for both formats;
    // empty: what this process may use (memory_limit(), nn/transformer.h), named in the error.
    std::optional<uint64_t> memory{};
};

struct Provenance {
    ModelFormat format = ModelFormat::checkpoint;
    std::string path;   // as given
    // A checkpoint's metadata ("config"; "train_config" from train and export; "tokenizer" from
    // import-hf). Empty for a folder.
    Metadata metadata;
    // Where the tokenizer came from: "tokenizer.json", "the checkpoint" (import-hf kept it),
    // "the byte tokenizer"; empty when there is none.
    std::string tokenizer_source;
};

struct OpenedModel {
    std::shared_ptr<GatedTransformerLM> model;
    std::optional<BpeTokenizer> tokenizer;  // none: a folder without tokenizer.json, or a
                                            // checkpoint of another vocabulary that kept none
    bool byte_tokens = false;               // the tokenizer is the byte tokenizer: a token is a byte
    DType precision = DType::f32;           // f32, or bf16
    Provenance provenance;
};

// A folder is a Hugging Face folder; anything else is read as a checkpoint of ours. Errors are
// one line naming the path: load_checkpoint's and hf::load_folder's, or a tokenizer that is
// malformed or has more ids than the model has rows.
OpenedModel open_model(const std::string& path, const OpenOptions& options = {});

// Per id of the model's vocabulary, whether the tokenizer can write it as text. Real
// checkpoints pad their embedding past the tokenizer (Qwen3: 151,936 rows for 151,669 ids);
// those rows were never trained and name nothing, so sampling must never draw them
// (SampleOptions::can_draw). Without a tokenizer, every id.
std::vector<bool> decodable_ids(const OpenedModel& m);

}  // namespace gg::nn
