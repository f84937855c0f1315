// gatedgrad import-hf — a Hugging Face Qwen3 folder (nn/io/hf.h) converted into a gatedgrad
// checkpoint in float32, its tokenizer.json kept in the metadata, which eval, sample and sink
// then open with --ckpt as they open the folder with --hf.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

#include "cli.h"
#include "commands.h"
#include "nn/attention.h"
#include "nn/io/checkpoint.h"
#include "nn/io/model.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

// Qwen3's tokenizer.json is 11 MB; a safetensors header holds at most 100 MB.
constexpr std::uintmax_t kMaxTokenizerBytes = std::uintmax_t(64) << 20;

struct ImportArgs {
    CLI::App* cmd = nullptr;
    std::string dir, out;
};

void add_import(CLI::App& app, ImportArgs& a) {
    a.cmd = app.add_subcommand("import-hf", "convert a Hugging Face Qwen3 folder into a gatedgrad checkpoint (float32)");
    a.cmd->add_option("DIR", a.dir, "the folder: config.json, model.safetensors or its sharded index")->required();
    a.cmd->add_option("--out", a.out, "the checkpoint to write")->type_name("FILE")->required();
}

int run_import(const ImportArgs& a) {
    if (!fs::is_directory(a.dir)) throw std::runtime_error(a.dir + ": not a Hugging Face folder (no such directory)");
    const OpenedModel m = open_model(a.dir, {.dtype = DType::f32});
    // The tokenizer goes into the checkpoint's metadata, where the door (nn/io/model.h) finds it:
    // one file to copy, written at once with the weights, never a stale tokenizer.json beside them.
    Metadata metadata{{"config", m.model->config().to_json()}};
    if (m.tokenizer) metadata["tokenizer"] = read_file((fs::path(a.dir) / "tokenizer.json").string(), kMaxTokenizerBytes);
    save(*m.model, a.out, metadata);
    std::printf("wrote %s: %lld parameters, attention %s%s\n", a.out.c_str(), (long long)m.model->num_parameters(),
                gate_position_name(m.model->config().attn.gate).c_str(), m.tokenizer ? ", its tokenizer in it" : "");
    return 0;
}

}  // namespace

Command import_hf_command(CLI::App& app) { return make_command<ImportArgs>(app, add_import, run_import); }
