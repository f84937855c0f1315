// gatedgrad logits — a Hugging Face model's float32 logits for the ids of a safetensors file,
// for comparing with another implementation (tools/hf-check).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "autograd/engine.h"
#include "commands.h"
#include "model_options.h"
#include "nn/io/checkpoint.h"
#include "tensor/dtype.h"

using namespace gg;
using namespace gg::nn;

namespace {

struct LogitsArgs {
    CLI::App* cmd = nullptr;
    std::string hf, precision = "auto", ids, out;
};

void add_logits(CLI::App& app, LogitsArgs& a) {
    a.cmd = app.add_subcommand("logits", "a Hugging Face model's float32 logits for the ids of a safetensors file");
    add_hf_options(a.cmd, a.hf, a.precision)->required();
    a.cmd->add_option("--ids", a.ids, "a safetensors file with input_ids, int64 (B, T)")->type_name("FILE")->required();
    a.cmd->add_option("--out", a.out, "the safetensors file to write: logits, float32 (B, T, V)")
        ->type_name("FILE")
        ->required();
}

int run_logits(const LogitsArgs& a) {
    const auto m = open_hf(a.hf, a.precision, "cpu", false);
    Tensor ids;
    for (const auto& [name, t] : load_tensors(a.ids))
        if (name == "input_ids") ids = t;
    if (!ids.defined() || ids.dim() != 2 || ids.dtype() != DType::i64)
        throw std::runtime_error(a.ids + ": no input_ids tensor of int64 (B, T)");
    NoGradGuard no_grad;
    save_tensors(a.out, {{"logits", m->model->forward(ids).logits.to(DType::f32)}});
    std::printf("wrote %s: logits %s\n", a.out.c_str(), shape_str(Shape{ids.size(0), ids.size(1), m->model->config().vocab_size}).c_str());
    return 0;
}

}  // namespace

Command logits_command(CLI::App& app) { return make_command<LogitsArgs>(app, add_logits, run_logits); }
