// gatedgrad import-hf — a Hugging Face Qwen3 folder (nn/io/hf.h) converted into a gatedgrad
// checkpoint in float32, which eval, sample and sink then open with --ckpt.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "commands.h"
#include "nn/attention.h"
#include "nn/io/checkpoint.h"
#include "nn/io/hf.h"

using namespace gg;
using namespace gg::nn;

namespace {

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
    const auto model = hf::load(a.dir, {.dtype = DType::f32});
    save(*model, a.out, {{"config", model->config().to_json()}});
    std::printf("wrote %s: %lld parameters, attention %s\n", a.out.c_str(), (long long)model->num_parameters(),
                gate_position_name(model->config().attn.gate).c_str());
    return 0;
}

}  // namespace

Command import_hf_command(CLI::App& app) { return make_command<ImportArgs>(app, add_import, run_import); }
