// gatedgrad export — a checkpoint's weights for sharing, in bfloat16 or float32, without the
// optimiser state: a safetensors file (--out) or a Hugging Face Qwen3 folder (--hf, nn/io/hf.h).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "nn/io/checkpoint.h"
#include "nn/io/hf.h"
#include "nn/train/trainer.h"
#include "tensor/dtype.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

struct ExportArgs {
    CLI::App* cmd = nullptr;
    std::string ckpt, out, hf, dtype = "bf16";
    bool force = false;
};

void add_export(CLI::App& app, ExportArgs& a) {
    a.cmd = app.add_subcommand("export", "write a checkpoint's weights for sharing, in bfloat16 (half the bytes) or "
                                         "float32, without the optimiser state; the checkpoint itself stays float32");
    a.cmd->add_option("--ckpt", a.ckpt, "a checkpoint written by train")->type_name("FILE")->required();
    CLI::Option* out = a.cmd->add_option("--out", a.out, "the safetensors file to write")->type_name("FILE");
    CLI::Option* hf = a.cmd->add_option("--hf", a.hf, "write a Hugging Face Qwen3 folder instead (config.json with the "
                                                      "authors' gate flags, model.safetensors, tokenizer.json for byte "
                                                      "models), as a new folder: DIR must be missing or empty")
                          ->type_name("DIR")
                          ->excludes(out);
    a.cmd->add_flag("--force", a.force, "with --hf: replace DIR when it holds anything (what it holds is removed)")->needs(hf);
    a.cmd->add_option("--dtype", a.dtype, "bf16 or f32")->check(accepted_by(parse_precision))->capture_default_str();
}

int run_export(const ExportArgs& a) {
    if (a.out.empty() == a.hf.empty()) throw UsageError("give one of --out FILE and --hf DIR");
    Metadata file;
    const std::shared_ptr<GatedTransformerLM> model = load_checkpoint(a.ckpt, 0, &file);
    const DType dtype = parse_precision(a.dtype);
    if (!a.hf.empty()) {
        std::vector<std::string> written;
        try {
            written = hf::save_folder(*model, a.hf, {.dtype = dtype, .replace = a.force});
        } catch (const std::invalid_argument& e) {  // what the Qwen3 layout cannot hold
            throw std::runtime_error(e.what());
        }
        std::string files;
        for (const std::string& name : written)
            files += (files.empty() ? "" : ", ") + name + (name == "model.safetensors" ? " (" + std::string(dtype_name(dtype)) + ")" : "");
        std::printf("wrote %s: %s\n", a.hf.c_str(), files.c_str());
        return 0;
    }
    // The training context and an imported model's tokenizer go along, as in a checkpoint: eval,
    // sink and report then run the export at the length, batch and text it was trained on.
    Metadata metadata{{"config", model->config().to_json()}, {"dtype", dtype_name(dtype)}};
    for (const char* key : {"train_config", "tokenizer"})
        if (const auto it = file.find(key); it != file.end()) metadata[key] = it->second;
    export_model(*model, a.out, dtype, metadata);
    std::printf("wrote %s: %zu tensors, %s, %llu bytes\n", a.out.c_str(), model->state_dict().size(),
                dtype_name(dtype), (unsigned long long)fs::file_size(a.out));
    return 0;
}

}  // namespace

Command export_command(CLI::App& app) { return make_command<ExportArgs>(app, add_export, run_export); }
