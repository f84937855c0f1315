// gatedgrad logits — a model's float32 logits for the ids of a safetensors file, for comparing
// with another implementation (tools/hf-check).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "cli.h"
#include "commands.h"
#include "model_options.h"
#include "nn/io/checkpoint.h"
#include "tensor/dtype.h"

using namespace gg;
using namespace gg::nn;

namespace {

struct LogitsArgs {
    CLI::App* cmd = nullptr;
    ModelArgs model;
    std::string ids, out;
};

void add_logits(CLI::App& app, LogitsArgs& a) {
    a.cmd = app.add_subcommand("logits", "a model's float32 logits for the ids of a safetensors file");
    add_model_options(a.cmd, a.model);
    a.cmd->add_option("--ids", a.ids, "a safetensors file with input_ids, int64 (B, T)")->type_name("FILE")->required();
    a.cmd->add_option("--out", a.out, "the safetensors file to write: logits, float32 (B, T, V)")
        ->type_name("FILE")
        ->required();
}

int run_logits(const LogitsArgs& a) {
    const OpenedModel m = a.model.open();
    Tensor ids;
    for (const auto& [name, t] : load_tensors(a.ids))
        if (name == "input_ids") ids = t;
    if (!ids.defined() || ids.dim() != 2 || ids.dtype() != DType::i64)
        throw std::runtime_error(a.ids + ": no input_ids tensor of int64 (B, T)");
    const LMConfig& c = m.model->config();
    try {
        check_memory(c, Workload::inference, ids.size(0), ids.size(1));
    } catch (const std::invalid_argument& e) {
        throw std::runtime_error(a.ids + ": " + e.what());
    }
    const Autocast precision(m.precision);
    NoGradGuard no_grad;
    save_tensors(a.out, {{"logits", m.model->forward(ids.to(device_of(*m.model))).logits.to(DType::f32)}});
    std::printf("wrote %s: logits %s\n", a.out.c_str(), shape_str(Shape{ids.size(0), ids.size(1), c.vocab_size}).c_str());
    return 0;
}

}  // namespace

Command logits_command(CLI::App& app) { return make_command<LogitsArgs>(app, add_logits, run_logits); }
