// What the commands share (cli.h): errors and their exit codes, validators, --device, a
// training config's description.
#include "cli.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>

#include "nn/attention.h"
#include "nn/untrusted.h"
#include "tensor/backend.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

std::shared_ptr<dist::ProcessGroup> job;
bool abort_job_on_error = false;

int run_command(const std::function<int()>& command) {
    try {
        return command();
    } catch (const QuietExit& e) {
        return e.code;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "gatedgrad: %s (see --help)\n", one_line(e.what()).c_str());
        return 2;
    } catch (const dist::CollectiveAbandoned& e) {
        // A collective gave up waiting for the other ranks: MPI cannot go on, so the job ends here.
        const int code = dynamic_cast<const dist::Interrupted*>(&e) ? 128 + stop_requested.load() : 1;
        std::fflush(stdout);
        std::fprintf(stderr, "gatedgrad: rank %d: %s\n", job->rank(), one_line(e.what()).c_str());
        job_ending = true;
        job->abort(code);
    } catch (const std::exception& e) {
        std::fflush(stdout);
        // Data parallel, a rank that fails alone names itself and ends the job.
        std::fprintf(stderr, "gatedgrad: %s%s\n",
                     abort_job_on_error ? ("rank " + std::to_string(job->rank()) + ": ").c_str() : "",
                     one_line(e.what()).c_str());
        if (abort_job_on_error) job_ending = true, job->abort(1);
        return 1;
    }
}

std::string one_line(std::string text) {
    for (char& c : text)
        if (c == '\n' || c == '\r') c = ' ';
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return printable(text, 2000);
}

double bits(double nats) { return nats / std::log(2.0); }

std::string describe(const TrainConfig& c, int64_t parameters) {
    const LMConfig& m = c.model;
    const AttentionOptions& at = m.attn;
    std::string gate = gate_position_name(at.gate);
    if (at.gate != GatePosition::none)
        gate += " (" + gate_function_name(at.gate_fn) + ", " + gate_sharing_name(at.sharing) + ", init " +
                gate_init_name(at.gate_init) + ")";
    std::string ffn = !m.ffn ? "none" : m.n_experts > 0 ? std::to_string(m.n_experts) + " experts, top " + std::to_string(m.top_k)
                                                        : "SwiGLU " + std::to_string(m.ffn_hidden());
    std::string data;
    for (const std::string& d : c.data) data += (data.empty() ? "" : " ") + d;
    char text[1024];
    std::snprintf(text, sizeof text,
                  "model     %lld layers, d_model %lld, %lld heads (%lld kv), attention %s%s%s, %s positions, FFN %s\n"
                  "          %lld parameters\n"
                  "training  %lld steps, batch %s%lld x %lld tokens, lr %g (warmup %lld, cosine to %g), weight decay %g, "
                  "clip %g, seed %llu\n"
                  "          validate every %lld steps, checkpoint every %lld (0: at the end) and every %g minutes\n",
                  (long long)m.n_layers, (long long)m.d_model, (long long)at.n_heads, (long long)at.kv_heads(), gate.c_str(),
                  at.qk_norm ? ", qk-norm" : "", at.window > 0 ? (", window " + std::to_string(at.window)).c_str() : "",
                  m.positions == PositionEncoding::rope ? "RoPE" : "learned", ffn.c_str(), (long long)parameters,
                  (long long)c.steps,
                  c.world_size > 1 ? (std::to_string(c.world_size) + " ranks x ").c_str() : "", (long long)c.batch_size,
                  (long long)c.seq_len, c.lr, (long long)c.warmup,
                  c.lr * c.min_lr_ratio, c.weight_decay, c.grad_clip, (unsigned long long)c.seed, (long long)c.eval_every,
                  (long long)c.ckpt_every, c.ckpt_minutes);
    // Then every other setting of the table (nn/config_fields.h) that is not its default, so
    // that a field added there is shown without a word here.
    static const std::set<std::string> shown = {
        "n_layers", "d_model", "n_heads", "n_kv_heads", "gate", "gate_fn", "gate_sharing", "gate_init", "qk_norm",
        "window", "positions", "ffn", "d_ff", "n_experts", "top_k", "steps", "batch_size", "seq_len", "lr", "warmup",
        "min_lr_ratio", "weight_decay", "grad_clip", "seed", "eval_every", "ckpt_every", "ckpt_minutes", "data"};
    std::string other;
    for (const auto& [field, was, now] : differences(run_fields(), TrainConfig(), c))
        if (!shown.contains(field->key)) other += (other.empty() ? "" : ", ") + name(*field) + " " + now;
    return text + (other.empty() ? "" : "other     " + other + "\n") + "data      " + data + "\n";
}

void add_device_option(CLI::App* cmd, std::string& device) {
    cmd->add_option("--device", device, "where to run: cpu, cuda (the GPU), or auto (cuda when a GPU answers, else cpu)")
        ->check(CLI::IsMember({"cpu", "cuda", "auto"}, CLI::ignore_case))
        ->capture_default_str();
}

Device parse_device(std::string name) {
    std::ranges::transform(name, name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (name == "auto") return device_available(Device::CUDA) ? Device::CUDA : Device::CPU;
    if (name != "cuda") return Device::CPU;
    backend(Device::CUDA);
    return Device::CUDA;
}

Device device_of(const Module& model) { return model.parameters().front().device(); }
