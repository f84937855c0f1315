// gatedgrad — the command line over the library: train a byte-level gated-attention LM,
// evaluate it (also past its training length with a RoPE scaling), sample from it, measure
// its attention sink (nn/analysis/analysis.h), plot loss curves, and put all of it on one
// page (nn/analysis/report.h).
//
//   gatedgrad train --preset tiny --attn g1 --out runs/g1
//   gatedgrad train --preset tiny --data input.txt --out runs/mine     (any text: see train --help)
//   gatedgrad eval  --ckpt runs/g1/model.safetensors --seq-len 256 --rope-scaling yarn
//   gatedgrad sample --ckpt runs/g1/model.safetensors --prompt "The "
//   gatedgrad sink  --ckpt runs/g1/model.safetensors --png runs/g1/attention
//   gatedgrad plot  --out loss.svg runs/baseline/log.jsonl runs/g1/log.jsonl
//   gatedgrad report runs/baseline runs/g1 --out compare.html
//   gatedgrad tokenize --tokenizer Qwen3-0.6B --text "Hello"   (a Hugging Face tokenizer.json's ids)
//
// Exit codes: 0 done; 1 the work failed (a missing corpus, a corrupt checkpoint, a loss
// that went NaN, a run folder in use); 2 the command line is wrong (unknown flag, bad value,
// a model too big for this machine); 130 or 143, train stopped by SIGINT or SIGTERM after
// saving a checkpoint (128 + the signal, as a shell reports it). Each is one line on stderr,
// "gatedgrad: <message>", with anything unprintable escaped: it may quote a file someone
// else wrote.
#include <CLI/CLI.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda.h"
#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

// A command line that parses but asks for something impossible: exit code 2, like a parse error.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------- data parallel

// Started by mpirun: the job's processes (null in one process). Each rank runs the same
// command; rank 0 alone writes files and prints.
std::shared_ptr<dist::ProcessGroup> job;
// Once every rank has agreed that a run can start, an error on one rank alone ends the whole
// job (MPI_Abort): the others would otherwise wait for it in their next all-reduce forever.
bool abort_job_on_error = false;

// A rank that stops because another rank reported why: it exits with that code, silently.
struct QuietExit {
    int code;
};

int exit_code(const std::exception_ptr& failure) {
    try {
        std::rethrow_exception(failure);
    } catch (const UsageError&) {
        return 2;
    } catch (...) {
        return 1;
    }
}

// Every rank runs the same checks before the first step. When any fails, every rank stops:
// the lowest rank that failed rethrows its error (one line on stderr), the others exit with
// its code without a word; `undo` (rank 0: remove the folder this run made) runs first.
void agree_to_start(std::exception_ptr failure, const std::function<void()>& undo) {
    int first = failure ? 0 : -1, code = failure ? exit_code(failure) : 0;
    if (job) {
        const Tensor codes = zeros({job->world_size()}, DType::f64);
        codes.data<double>()[job->rank()] = code;
        job->all_reduce(codes, dist::ReduceOp::sum);
        first = -1;
        for (int r = 0; r < job->world_size() && first < 0; ++r)
            if (const double c = codes.data<const double>()[r]; c != 0) first = r, code = int(c);
    }
    if (first < 0) {
        abort_job_on_error = job && job->world_size() > 1;
        return;
    }
    undo();
    if (failure && (!job || job->rank() == first)) std::rethrow_exception(failure);
    throw QuietExit{code};
}

std::string one_line(std::string text) {
    for (char& c : text)
        if (c == '\n' || c == '\r') c = ' ';
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return printable(text, 2000);
}

// The text of a small file (a config): a regular file of at most `limit` bytes, so that
// --config /dev/zero fails at once instead of reading forever.
std::string read_file(const std::string& path, std::uintmax_t limit = 1 << 20) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw std::runtime_error("cannot read " + path + ": not a regular file");
    if (fs::file_size(path, ec) > limit)
        throw std::runtime_error("cannot read " + path + ": larger than " + std::to_string(limit) + " bytes");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

double bits(double nats) { return nats / std::log(2.0); }

// Accepts a value when the library's own parser does (parse_gate_position, ...), so the
// command line and config files know the same names and say the same thing about bad ones.
template <class Parse>
CLI::Validator accepted_by(Parse parse) {
    return CLI::Validator(
        [parse](std::string& value) -> std::string {
            try {
                parse(value);
                return "";
            } catch (const std::exception& e) {
                return e.what();
            }
        },
        "");
}

// A finite number in [low, high] (above low when `strict`). A value that is not a number
// passes here and fails in CLI11's own conversion, which says so.
CLI::Validator bounded(double low, double high = INFINITY, bool strict = false) {
    return CLI::Validator(
        [=](std::string& value) -> std::string {
            char* end = nullptr;
            const double x = std::strtod(value.c_str(), &end);
            if (end == value.c_str() || *end != '\0') return "";
            if (std::isfinite(x) && (strict ? x > low : x >= low) && x <= high) return "";
            char why[96];
            if (std::isfinite(high)) std::snprintf(why, sizeof why, "must be between %g and %g", low, high);
            else std::snprintf(why, sizeof why, "must be a finite number %s %g", strict ? "above" : "at least", low);
            return why + (", got " + value);
        },
        "");
}
const CLI::Validator kNonNegative = bounded(0), kPositive = bounded(0, INFINITY, true);

// A whole number in [low, high], in decimal. CLI11's own conversion would take 010 as
// octal, saturate 99999999999999999999 to INT64_MAX and wrap -1 into an unsigned seed;
// so the value is parsed here, exactly, and handed on in plain decimal.
template <class T>
CLI::Validator whole(T low, T high) {
    return CLI::Validator(
        [=](std::string& value) -> std::string {
            T x{};
            const char *first = value.data(), *last = value.data() + value.size();
            if (first != last && *first == '+') ++first;
            const auto [stop, err] = std::from_chars(first, last, x);
            if (err == std::errc() && stop == last && x >= low && x <= high) {
                value = std::to_string(x);
                return "";
            }
            return "must be a whole number between " + std::to_string(low) + " and " + std::to_string(high) +
                   ", got " + value;
        },
        "");
}
CLI::Validator count(int64_t low, int64_t high) { return whole<int64_t>(low, high); }
const CLI::Validator kSeed = whole<uint64_t>(0, UINT64_MAX);
constexpr int64_t kMaxSteps = TrainConfigLimits::steps, kMaxSeqLen = LMConfigLimits::max_len;

// ---------------------------------------------------------------- train

// Flags that, when given, override one field of the TrainConfig built from the preset,
// the --config file or the run being resumed.
class Overrides {
public:
    explicit Overrides(CLI::App* cmd) : cmd_(cmd) {}

    template <class T>
    CLI::Option* option(const std::string& name, std::function<void(TrainConfig&, const T&)> set, const std::string& help) {
        auto value = std::make_shared<T>();
        CLI::Option* opt = cmd_->add_option(name, *value, help);
        apply_.push_back([opt, value, set](TrainConfig& c) {
            if (opt->count()) set(c, *value);
        });
        return opt;
    }
    CLI::Option* flag(const std::string& name, std::function<void(TrainConfig&)> set, const std::string& help) {
        CLI::Option* opt = cmd_->add_flag(name, help);
        apply_.push_back([opt, set](TrainConfig& c) {
            if (opt->count()) set(c);
        });
        return opt;
    }
    void apply(TrainConfig& c) const {
        for (const auto& a : apply_) a(c);
    }

private:
    CLI::App* cmd_;
    std::vector<std::function<void(TrainConfig&)>> apply_;
};

// Each train option that sets a TrainConfig field, with the field's value as text: the
// --help defaults, and on --resume the architecture a run keeps and the changes it takes.
struct TrainField {
    const char* flag;
    bool architecture;  // part of the model: a resumed run cannot change it
    std::function<std::string(const TrainConfig&)> get;
};

const std::vector<TrainField>& train_fields() {
    const auto text = [](auto value) {
        std::ostringstream out;
        out << value;
        return out.str();
    };
    using C = const TrainConfig&;
    static const std::vector<TrainField> fields = {
        {"--attn", true, [](C c) { return gate_position_name(c.model.attn.gate); }},
        {"--gate-fn", true, [](C c) { return gate_function_name(c.model.attn.gate_fn); }},
        {"--gate-sharing", true, [](C c) { return gate_sharing_name(c.model.attn.sharing); }},
        {"--gate-init", true, [](C c) { return gate_init_name(c.model.attn.gate_init); }},
        {"--layers", true, [=](C c) { return text(c.model.n_layers); }},
        {"--d-model", true, [=](C c) { return text(c.model.d_model); }},
        {"--heads", true, [=](C c) { return text(c.model.attn.n_heads); }},
        {"--kv-heads", true, [=](C c) { return c.model.attn.n_kv_heads ? text(c.model.attn.n_kv_heads) : "--heads"; }},
        {"--qk-norm", true, [](C c) { return c.model.attn.qk_norm ? "on" : "off"; }},
        {"--window", true, [=](C c) { return text(c.model.attn.window); }},
        {"--positions", true, [](C c) { return c.model.positions == PositionEncoding::rope ? "rope" : "learned"; }},
        {"--no-ffn", true, [](C c) { return c.model.ffn ? "off" : "on"; }},
        {"--experts", true, [=](C c) { return text(c.model.n_experts); }},
        {"--top-k", true, [=](C c) { return text(c.model.top_k); }},
        {"--steps", false, [=](C c) { return text(c.steps); }},
        {"--batch", false, [=](C c) { return text(c.batch_size); }},
        {"--seq-len", false, [=](C c) { return text(c.seq_len); }},
        {"--lr", false, [=](C c) { return text(c.lr); }},
        {"--warmup", false, [=](C c) { return text(c.warmup); }},
        {"--weight-decay", false, [=](C c) { return text(c.weight_decay); }},
        {"--independent-wd", false, [](C c) { return c.independent_weight_decay ? "on" : "off"; }},
        {"--z-loss", false, [=](C c) { return text(c.z_loss); }},
        {"--precision", false, [](C c) { return precision_name(c.precision); }},
        {"--clip", false, [=](C c) { return text(c.grad_clip); }},
        {"--seed", false, [=](C c) { return text(c.seed); }},
        {"--eval-every", false, [=](C c) { return text(c.eval_every); }},
        {"--probe-every", false, [=](C c) { return text(c.probe_every); }},
        {"--ckpt-every", false, [=](C c) { return text(c.ckpt_every); }},
        {"--ckpt-minutes", false, [=](C c) { return text(c.ckpt_minutes); }},
        {"--data", false, [](C c) {
             std::string paths;
             for (const std::string& d : c.data) paths += (paths.empty() ? "" : " ") + d;
             return paths;
         }},
        {"--val-fraction", false, [=](C c) { return text(c.split.val_fraction); }},
        {"--split", false, [](C c) { return split_mode_name(c.split.mode); }},
    };
    return fields;
}

// Appends each train option's default to its --help line: the plain TrainConfig's value,
// and the presets' where they differ: "(default 300; tiny 600, small 2000)".
void show_defaults(CLI::App* cmd) {
    const TrainConfig plain, tiny = TrainConfig::preset("tiny"), small = TrainConfig::preset("small");
    for (const auto& [name, architecture, get] : train_fields()) {
        std::string shown = "default " + get(plain);
        if (get(tiny) != get(plain) || get(small) != get(plain)) shown += "; tiny " + get(tiny) + ", small " + get(small);
        CLI::Option* opt = cmd->get_option(name);
        opt->description(opt->get_description() + " (" + shown + ")");
    }
}

// ---------------------------------------------------------------- devices

// --device of train, eval, sample and sink.
void add_device_option(CLI::App* cmd, std::string& device) {
    cmd->add_option("--device", device, "where to run: cpu, cuda (the GPU), or auto (cuda when a GPU answers, else cpu)")
        ->check(CLI::IsMember({"cpu", "cuda", "auto"}, CLI::ignore_case))
        ->capture_default_str();
}

// cuda without a GPU stops here, with backend()'s one line on why (no driver, no device, or a
// library built without the kernels), before anything is loaded or trained.
Device parse_device(std::string name) {
    std::ranges::transform(name, name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (name == "auto") return device_available(Device::CUDA) ? Device::CUDA : Device::CPU;
    if (name != "cuda") return Device::CPU;
    backend(Device::CUDA);
    return Device::CUDA;
}

std::string device_label(Device device) { return device == Device::CUDA ? "cuda (" + cuda::device_name() + ")" : "cpu"; }

// The device a model's parameters live on.
Device device_of(const Module& model) { return model.parameters().front().device(); }

struct TrainArgs {
    CLI::App* cmd = nullptr;
    std::string preset, config_file, out, device = "cpu";
    bool resume = false, force = false, quiet = false, allow_data_change = false;
    double rank_timeout = 0;  // 0: Trainer's default
    std::unique_ptr<Overrides> overrides;
    CLI::Option *steps = nullptr, *warmup = nullptr, *eval_every = nullptr;  // --steps rescales the others
};

void add_train(CLI::App& app, TrainArgs& a) {
    a.cmd = app.add_subcommand("train", "train a language model; writes DIR/model.safetensors, DIR/log.jsonl, DIR/config.json");
    CLI::App* cmd = a.cmd;
    CLI::Option* preset = cmd->add_option("--preset", a.preset, "start from a preset: tiny (~0.14M parameters), small (~0.9M) or medium (~15M, for a GPU)")
                              ->check(CLI::IsMember({"tiny", "small", "medium"}, CLI::ignore_case));
    cmd->add_option("--config", a.config_file, "start from a TrainConfig JSON file (fields not in it keep their defaults)")
        ->type_name("FILE")
        ->excludes(preset);
    cmd->add_option("--out", a.out, "output directory")->type_name("DIR")->required();
    CLI::Option* resume =
        cmd->add_flag("--resume", a.resume, "continue the run in DIR from DIR/model.safetensors (config from DIR/config.json)");
    cmd->add_flag("--force", a.force, "start a new run in DIR even if one is there, replacing its checkpoint and log")
        ->excludes(resume);
    cmd->add_flag("--allow-data-change", a.allow_data_change,
                  "with --resume: go on although the training data differ from those the run began on")
        ->needs(resume);
    cmd->add_flag("--quiet", a.quiet, "print only the final result");
    cmd->add_option("--rank-timeout", a.rank_timeout,
                    "under mpirun: end the job when the other ranks give no answer for S seconds (0: 300 s or ten "
                    "times the slowest step so far, whichever is longer)")
        ->check(bounded(0, 1e9, false))
        ->type_name("S");
    add_device_option(cmd, a.device);

    a.overrides = std::make_unique<Overrides>(cmd);
    Overrides& o = *a.overrides;
    using S = std::string;
    using I = int64_t;
    o.option<S>("--attn", [](TrainConfig& c, const S& v) { c.model.attn.gate = parse_gate_position(v); },
                "gate position: baseline, g1..g5 (the walk-through's numbers) or by where the gate sits: sdpa (g1), "
                "scores-x (g2), scores-query (g3), residual (g4), output (g5), value, key, query; the paper's own G1-G5 "
                "are sdpa, value, key, query, output (docs/paper.md)")
        ->check(accepted_by(parse_gate_position));
    o.option<S>("--gate-fn", [](TrainConfig& c, const S& v) { c.model.attn.gate_fn = parse_gate_function(v); },
                "gate function: sigmoid, tanh, relu, silu, none")
        ->check(accepted_by(parse_gate_function));
    o.option<S>("--gate-sharing", [](TrainConfig& c, const S& v) { c.model.attn.sharing = parse_gate_sharing(v); },
                "gate sharing: elementwise, headwise, shared")
        ->check(accepted_by(parse_gate_sharing));
    o.option<S>("--gate-init", [](TrainConfig& c, const S& v) { c.model.attn.gate_init = parse_gate_init(v); },
                "gate weight init: zero, normal, kaiming, xavier")
        ->check(accepted_by(parse_gate_init));
    o.option<I>("--kv-heads", [](TrainConfig& c, const I& v) { c.model.attn.n_kv_heads = v; },
                "key/value heads for grouped-query attention (must divide --heads)")
        ->check(count(1, LMConfigLimits::d_model));
    o.flag("--qk-norm", [](TrainConfig& c) { c.model.attn.qk_norm = true; }, "RMSNorm on each query and key head");
    o.option<I>("--window", [](TrainConfig& c, const I& v) { c.model.attn.window = v; },
                "sliding-window attention over the last N keys (0: full)")
        ->check(count(0, LMConfigLimits::window));
    o.option<S>("--positions", [](TrainConfig& c, const S& v) {
        c.model.positions = v == "rope" ? PositionEncoding::rope : PositionEncoding::learned;
    }, "position encoding: rope or learned")->check(CLI::IsMember({"rope", "learned"}, CLI::ignore_case));
    o.option<I>("--layers", [](TrainConfig& c, const I& v) { c.model.n_layers = v; }, "transformer blocks")
        ->check(count(1, LMConfigLimits::n_layers));
    o.option<I>("--d-model", [](TrainConfig& c, const I& v) { c.model.d_model = v; }, "model width")
        ->check(count(1, LMConfigLimits::d_model));
    o.option<I>("--heads", [](TrainConfig& c, const I& v) { c.model.attn.n_heads = v; }, "attention heads")
        ->check(count(1, LMConfigLimits::d_model));
    o.flag("--no-ffn", [](TrainConfig& c) { c.model.ffn = false; }, "attention-only blocks (no feed-forward)");
    CLI::Option* experts = o.option<I>("--experts", [](TrainConfig& c, const I& v) { c.model.n_experts = v; },
                                       "mixture of N SwiGLU experts as the feed-forward (0: dense)")
                               ->check(count(0, LMConfigLimits::n_experts));
    o.option<I>("--top-k", [](TrainConfig& c, const I& v) { c.model.top_k = v; }, "experts per token")
        ->check(count(1, LMConfigLimits::n_experts))
        ->needs(experts);
    a.steps = o.option<I>("--steps", [](TrainConfig& c, const I& v) { c.steps = v; },
                          "training steps (a preset's warmup and eval interval keep their share of the run unless given)")
                  ->check(count(0, kMaxSteps));
    o.option<I>("--batch", [](TrainConfig& c, const I& v) { c.batch_size = v; },
                "sequences per batch (per rank under mpirun: N ranks train on N x this)")
        ->check(count(1, TrainConfigLimits::batch_size));
    o.option<I>("--seq-len", [](TrainConfig& c, const I& v) { c.seq_len = c.model.max_len = v; },
                            "tokens per sequence, BOS included")
                    ->check(count(2, kMaxSeqLen));
    o.option<double>("--lr", [](TrainConfig& c, const double& v) { c.lr = v; }, "peak learning rate")
        ->check(kPositive);
    a.warmup = o.option<I>("--warmup", [](TrainConfig& c, const I& v) { c.warmup = v; }, "linear warmup steps")
                   ->check(count(0, kMaxSteps));
    o.option<double>("--weight-decay", [](TrainConfig& c, const double& v) { c.weight_decay = v; }, "AdamW weight decay")
        ->check(kNonNegative);
    o.flag("--independent-wd", [](TrainConfig& c) { c.independent_weight_decay = true; },
           "weight decay independent of the learning rate: each step keeps 1 - weight_decay * lr/peak of every "
           "weight (Wortsman et al. 2023), not 1 - lr * weight_decay");
    o.option<double>("--z-loss", [](TrainConfig& c, const double& v) { c.z_loss = v; },
                     "add this times the mean (log Z)^2 of the output softmax to the loss (0: off)")
        ->check(kNonNegative);
    o.option<S>("--precision", [](TrainConfig& c, const S& v) { c.precision = parse_precision(v); },
                "f32, or bf16: mixed precision as torch.autocast (matmuls and attention in bfloat16 with float32 sums; "
                "norms, softmax, the loss, the weights and AdamW's moments in float32)")
        ->check(accepted_by(parse_precision));
    o.option<double>("--clip", [](TrainConfig& c, const double& v) { c.grad_clip = v; },
                     "clip the gradient norm to this (0: off)")
        ->check(kNonNegative);
    o.option<uint64_t>("--seed", [](TrainConfig& c, const uint64_t& v) { c.seed = v; }, "initialisation and batch order")
        ->check(kSeed);
    a.eval_every = o.option<I>("--eval-every", [](TrainConfig& c, const I& v) { c.eval_every = v; },
                               "validate every N steps (and at the end)")
                       ->check(count(0, kMaxSteps));
    o.option<I>("--probe-every", [](TrainConfig& c, const I& v) { c.probe_every = v; },
                "every N steps, write the largest attention logit, smallest attention entropy, mean gate, output "
                "log Z and largest activation of a fixed validation batch into log.jsonl (0: never)")
        ->check(count(0, kMaxSteps));
    o.option<I>("--ckpt-every", [](TrainConfig& c, const I& v) { c.ckpt_every = v; },
                "checkpoint every N steps (0: only at the end)")
        ->check(count(0, kMaxSteps));
    o.option<double>("--ckpt-minutes", [](TrainConfig& c, const double& v) { c.ckpt_minutes = v; },
                     "also checkpoint when M minutes have passed since the last checkpoint (0: never)")
        ->check(kNonNegative)
        ->type_name("M");
    o.option<std::vector<S>>("--data", [](TrainConfig& c, const std::vector<S>& v) { c.data = v; },
                             "text files or folders of them (see Data below)")
        ->type_name("PATH");
    o.option<double>("--val-fraction", [](TrainConfig& c, const double& v) { c.split.val_fraction = v; },
                     "share of the text kept for validation")
        ->check(bounded(0, 0.5, true));
    o.option<S>("--split", [](TrainConfig& c, const S& v) { c.split.mode = parse_split_mode(v); },
                "where validation text is cut off: auto, documents or bytes")
        ->check(accepted_by(parse_split_mode));
    show_defaults(cmd);
    cmd->footer(
        "Data: each --data PATH is a text file or a folder. A folder gives the files directly in it (not its\n"
        "subfolders), skipping hidden files and binary ones (with a NUL byte). Each file is cut into documents at\n"
        "lines holding only \"%\" (the fortunes format); a file without such a line is one document. Then\n"
        "--split documents sends one document in every round(1/F) to validation (F = --val-fraction: every 10th),\n"
        "--split bytes the last F of the text (nanoGPT's input.txt split), and --split auto does documents when\n"
        "there are at least round(1/F) of them, else bytes. The paths are saved absolute in DIR/config.json.\n"
        "A file named on its own must be text: an empty or binary one, a FIFO or a device is refused, and so is a\n"
        "file that changes while it is read.\n"
        "Defaults: those shown, from a plain config; --preset and --config replace them, and flags given replace those.\n"
        "--resume with another --steps lengthens (or shortens) a run: the learning rate goes on from where the run\n"
        "stands, along a cosine to its minimum at the new end; a finished run, already at the minimum, stays there.\n"
        "A resumed run keeps its architecture (--attn, --layers, ... are refused if they differ) and its data (its\n"
        "files, sizes and a hash of their bytes; --allow-data-change to go on with others); every other setting that\n"
        "changes is printed before the first step.\n"
        "Runs that never lose work: DIR/model.safetensors is replaced atomically, every --ckpt-every steps, every\n"
        "--ckpt-minutes and at the end. The first Ctrl-C (SIGINT) or SIGTERM finishes the step under way, saves a\n"
        "checkpoint and exits with 130 (SIGINT) or 143 (SIGTERM); a second one exits at once. One process writes a\n"
        "folder at a time: a second train into it (--force included) is refused, naming the pid that holds it.\n"
        "Everything is checked before the first step (sizes, memory, data long enough for a batch and for\n"
        "validation); a run that fails before it starts leaves no new folder behind.\n"
        "Data parallel: mpirun -np N gatedgrad train ... trains on N processes (one GPU each with --device cuda),\n"
        "each on --batch sequences of every step's N x --batch, with the gradients averaged: the same steps as one\n"
        "process with --batch N x B. Rank 0 writes the folder; --resume needs the N the run began with. Before the\n"
        "first step the ranks check that they agree (the whole config, the data's fingerprint, the step they start\n"
        "at, --resume/--force), and stop naming the first setting that differs. A rank that dies ends the job; one\n"
        "that stops answering ends it after --rank-timeout. Either way the last checkpoint stays whole.");
}

// The config a run in `dir` was started with: its config.json or, where that is gone, the
// one its checkpoint holds; none when neither is there.
std::optional<TrainConfig> run_config(const fs::path& dir) {
    if (fs::exists(dir / "config.json")) return TrainConfig::from_json(read_file((dir / "config.json").string()));
    const fs::path ckpt = dir / "model.safetensors";
    if (!fs::exists(ckpt)) return std::nullopt;
    const Metadata saved = read_safetensors(ckpt.string()).metadata;
    if (!saved.contains("train_config")) return std::nullopt;
    return TrainConfig::from_json(saved.at("train_config"));
}

// The config of a run: a base (preset, --config file, the resumed run's config or the
// defaults), then every flag given on top.
TrainConfig train_config(const TrainArgs& a) {
    TrainConfig c;
    bool rescale = true;  // a base the user did not write: --steps may stretch its schedule
    if (!a.config_file.empty()) {
        const std::string text = read_file(a.config_file);  // unreadable: a runtime error
        try {
            c = TrainConfig::from_json(text);
        } catch (const std::invalid_argument& e) {  // what the user asked for is wrong: a usage error
            throw UsageError(a.config_file + ": " + e.what());
        }
        rescale = false;
    } else if (!a.preset.empty()) {
        c = TrainConfig::preset(a.preset);
    } else if (const std::optional<TrainConfig> run = a.resume ? run_config(a.out) : std::nullopt) {
        c = *run;
        rescale = false;
    }
    const TrainConfig base = c;
    a.overrides->apply(c);
    if (rescale && a.steps->count() && base.steps > 0) {
        // Keep warmup and evaluation the same share of the run (tiny: 30 of 600 steps warm up).
        if (!a.warmup->count()) c.warmup = base.warmup * c.steps / base.steps;
        if (!a.eval_every->count() && base.eval_every > 0) c.eval_every = std::max<int64_t>(1, base.eval_every * c.steps / base.steps);
    }
    // A warmup not given here and this long is the resumed run's or the --config file's (a
    // preset's is rescaled with --steps), perhaps derived from a longer run: say so, and what to pass.
    if (c.steps > 0 && c.warmup >= c.steps)
        throw UsageError("warmup " + std::to_string(c.warmup) + " must be below steps " + std::to_string(c.steps) +
                         " (the cosine schedule needs steps after the warmup)" +
                         (a.warmup->count() ? ""
                                            : "; that warmup is " +
                                                  (a.config_file.empty() ? "the run's (config.json)" : a.config_file + "'s") +
                                                  ": pass --warmup below " + std::to_string(c.steps) + " with --steps"));
    if (c.model.d_model % c.model.attn.n_heads != 0)
        throw UsageError("d-model " + std::to_string(c.model.d_model) + " is not a multiple of heads " +
                         std::to_string(c.model.attn.n_heads));
    c.out_dir = a.out;
    // Saved absolute in config.json and the checkpoint, so that eval and sink find the corpus
    // from any folder.
    for (std::string& path : c.data) path = fs::absolute(path).lexically_normal().string();
    // Every size checked, and the memory of a training step estimated, before anything is built.
    try {
        c.validate();
        check_memory(c.model, Workload::training, c.batch_size, c.seq_len);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    return c;
}

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
                  "          validate every %lld steps, checkpoint every %lld (0: at the end) and every %g minutes\n"
                  "data      %s\n",
                  (long long)m.n_layers, (long long)m.d_model, (long long)at.n_heads, (long long)at.kv_heads(), gate.c_str(),
                  at.qk_norm ? ", qk-norm" : "", at.window > 0 ? (", window " + std::to_string(at.window)).c_str() : "",
                  m.positions == PositionEncoding::rope ? "RoPE" : "learned", ffn.c_str(), (long long)parameters,
                  (long long)c.steps,
                  c.world_size > 1 ? (std::to_string(c.world_size) + " ranks x ").c_str() : "", (long long)c.batch_size,
                  (long long)c.seq_len, c.lr, (long long)c.warmup,
                  c.lr * c.min_lr_ratio, c.weight_decay, c.grad_clip, (unsigned long long)c.seed, (long long)c.eval_every,
                  (long long)c.ckpt_every, c.ckpt_minutes, data.c_str());
    return text;
}

// ---------------------------------------------------------------- stopping

// The first SIGINT or SIGTERM asks the trainer to stop at the next step boundary, where it
// saves a checkpoint; a second one ends the process at once. A handler may only store to
// lock-free atomics and call async-signal-safe functions (_exit): it does nothing else.
// stop_requested holds the signal's number (0: none), stop_sender the pid that sent it.
std::atomic<int> stop_requested{0}, stop_sender{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int signal, siginfo_t* info, void*) {
    if (stop_requested.load() != 0) {
        static const char kAtOnce[] =
            "gatedgrad: stopped at once by a second signal; no checkpoint saved for the step under way\n";
        (void)!::write(STDERR_FILENO, kAtOnce, sizeof kAtOnce - 1);
        ::_exit(128 + signal);
    }
    stop_sender.store(info ? int(info->si_pid) : 0);
    stop_requested.store(signal);
}

void stop_on_signals() {
    struct sigaction action {};
    action.sa_sigaction = on_stop_signal;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    for (int signal : {SIGINT, SIGTERM}) ::sigaction(signal, &action, nullptr);
}

const char* signal_name(int signal) { return signal == SIGTERM ? "SIGTERM" : signal == SIGINT ? "SIGINT" : "a signal"; }

// "SIGTERM", "SIGTERM on rank 1", "SIGTERM from mpirun (which passes Ctrl-C on as SIGTERM)":
// Open MPI's mpirun turns a SIGINT or SIGTERM it receives into SIGTERM to every rank (it
// cannot forward SIGINT), so a rank can only say which signal came and from where.
std::string stop_cause(int signal, int rank, int my_rank) {
    std::string cause = signal_name(signal);
    if (job && rank != my_rank) return cause + " on rank " + std::to_string(rank);
    if (job && signal == SIGTERM && stop_sender.load() == int(::getppid()))
        cause += " from mpirun (which passes a Ctrl-C on as SIGTERM)";
    return cause;
}

// ---------------------------------------------------------------- resuming

// What a resumed run may and may not change, against the config it was started with.
// Throws a UsageError naming the first architecture field that differs; returns the
// settings that change, "--lr 0.003 → 0.01, --steps 6 → 12", or "".
std::string resume_changes(TrainConfig run, TrainConfig given) {
    // config.json spells out the key/value heads that a config may leave to --heads (0).
    for (TrainConfig* c : {&run, &given}) c->model.attn.n_kv_heads = c->model.attn.kv_heads();
    std::string changes;
    for (const auto& [flag, architecture, get] : train_fields()) {
        const std::string was = get(run), now = get(given);
        if (was == now) continue;
        // Learned positions are weights, one per position: their count is architecture too.
        if (architecture || (std::string(flag) == "--seq-len" && run.model.positions == PositionEncoding::learned &&
                             run.model.max_len != given.model.max_len))
            throw UsageError("a resumed run keeps its architecture: " + std::string(flag) + " is " + was +
                             " in the run, " + now + " given");
        changes += (changes.empty() ? "" : ", ") + std::string(flag) + " " + was + " → " + now;
    }
    return changes;
}

// The first part of two CorpusFingerprint texts that differs, for the error that refuses it.
std::string fingerprint_change(const std::string& was, const std::string& now) {
    const auto parts = [](const std::string& text) {
        std::vector<std::string> out;
        for (size_t at = 0; at <= text.size();) {
            const size_t end = std::min(text.find("; ", at), text.size());
            out.push_back(text.substr(at, end - at));
            at = end + 2;
        }
        return out;
    };
    const std::vector<std::string> a = parts(was), b = parts(now);
    for (size_t i = 1; i < std::max(a.size(), b.size()); ++i) {
        const std::string x = i < a.size() ? a[i] : "no file", y = i < b.size() ? b[i] : "no file";
        if (x != y) return "file " + std::to_string(i) + " was " + x + " (path, bytes), now " + y;
    }
    return "the same files and sizes, other bytes (" + a[0] + " then, " + b[0] + " now)";
}

// One GPU per rank: rank k of a machine sees only the k-th of the GPUs it could see (before
// anything touches CUDA), as device 0.
void one_gpu_per_rank(int local_rank) {
    std::vector<std::string> visible;
    if (const char* list = std::getenv("CUDA_VISIBLE_DEVICES"); list && *list) {
        std::stringstream in(list);
        for (std::string id; std::getline(in, id, ',');) visible.push_back(id);
    }
    const std::string mine = visible.empty() ? std::to_string(local_rank)
                                             : visible[size_t(local_rank) % visible.size()];
    ::setenv("CUDA_VISIBLE_DEVICES", mine.c_str(), 1);
}

// The run's id as rank 0 drew it: 16 hex digits sent as two exact 32-bit halves.
std::string rank0_run_id(const std::string& mine) {
    const uint64_t id = std::stoull(mine, nullptr, 16);
    const Tensor halves = from_vector(std::vector<double>{double(id >> 32), double(id & 0xffffffffu)}, {2});
    job->broadcast(halves, 0);
    const double* h = halves.data<const double>();
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", (unsigned long long)((uint64_t(h[0]) << 32) | uint64_t(h[1])));
    return text;
}

// Every rank's settings against rank 0's (dist/agreement.h), before the first collective whose
// size depends on them: the whole config, the data, the step it starts at, the run it resumes.
// On a difference every rank stops; rank 0 names the field (exit 2 for a setting of the command
// line or config file, 1 for the data or the checkpoint's state).
void check_ranks_agree(const TrainArgs& a, const Trainer& trainer, const std::string& resumed_id,
                       const std::function<void()>& undo) {
    dist::Fields fields{{"--resume/--force", a.resume ? "--resume" : a.force ? "--force" : "neither"}};
    // The model's fields in LMConfig's own order (d_model before the d_ff it implies), then the rest.
    for (const auto& [name, value] : dist::json_fields(trainer.config().model.to_json()))
        fields.push_back({"model." + name, value});
    for (const auto& field : dist::json_fields(trainer.config().to_json()))
        if (field.first.rfind("model.", 0) != 0) fields.push_back(field);
    fields.push_back({"the run id in config.json", resumed_id});
    fields.push_back({"the step it starts at", std::to_string(trainer.step())});
    const std::optional<dist::Disagreement> d = dist::find_disagreement(*job, fields);
    if (!d) return;
    undo();
    const bool state = d->field == "data_fingerprint" || d->field == "run_id" || d->field.rfind("the ", 0) == 0 ||
                       d->field.rfind("restart_", 0) == 0;
    if (job->rank() != 0) throw QuietExit{state ? 1 : 2};
    if (state) throw std::runtime_error(d->message());
    throw UsageError(d->message());
}

int run_train(const TrainArgs& a) {
    stop_on_signals();
    if (dist::launched_by_mpi()) {
        try {
            job = dist::init_mpi();
        } catch (const std::exception&) {  // a build without MPI: every rank fails alike, rank 0 says why
            if (dist::launcher_rank() > 0) throw QuietExit{1};
            throw;
        }
        // Until the trainer measures its steps: --rank-timeout, or the default.
        job->set_wait_limits({a.rank_timeout > 0 ? a.rank_timeout : Trainer::kDefaultRankTimeout, 10, &stop_requested});
    }
    const int rank = job ? job->rank() : 0, world = job ? job->world_size() : 1;
    const fs::path dir = fs::path(a.out), ckpt = dir / "model.safetensors";
    const bool existed = fs::exists(dir);
    std::optional<RunLock> lock;  // rank 0's, held until the process ends
    TrainConfig requested;
    std::optional<TrainConfig> run;
    std::shared_ptr<const TextDataset> data;
    std::unique_ptr<Trainer> trainer;
    std::string changes, resumed_id;
    Device device = Device::CPU;
    // Everything that can fail before the first step runs here, on every rank, in two parts
    // with the collective calls between them; a failure removes the folder this run made, so
    // that it does not block the next attempt.
    const auto undo = [&] {  // only by the process holding the folder's lock: never another run's folder
        std::error_code ec;
        if (!existed && lock) fs::remove_all(dir, ec);
    };
    std::exception_ptr failure;
    try {
        requested = train_config(a);
        requested.world_size = world;
        if (rank == 0) lock.emplace(dir.string());
        if (job && a.device.rfind("cuda", 0) == 0) one_gpu_per_rank(job->local_rank());
        device = parse_device(a.device);
        if (!a.resume && !a.force)
            for (const char* name : {"model.safetensors", "log.jsonl", "config.json"})
                if (fs::exists(dir / name))
                    throw UsageError(dir.string() + " already holds a run (" + name + "); " +
                                     (fs::exists(ckpt) ? "pass --resume to continue it or --force to replace it"
                                                       : "it has no checkpoint to resume from: pass --force to start over"));
        if (a.resume && !fs::exists(ckpt)) throw std::runtime_error("--resume: no checkpoint at " + ckpt.string());
        run = a.resume ? run_config(dir) : std::nullopt;
        if (run && run->world_size != world)
            throw UsageError("the run in " + dir.string() + " trained on " + std::to_string(run->world_size) +
                             " process(es) and this job has " + std::to_string(world) + ": each step was a batch of " +
                             std::to_string(run->world_size) + " x " + std::to_string(run->batch_size) +
                             " sequences; resume it with " +
                             (run->world_size == 1 ? std::string("one process (no mpirun)")
                                                   : "mpirun -np " + std::to_string(run->world_size)));
        resumed_id = run ? run->run_id : "";
        requested.run_id = run && !run->run_id.empty() ? run->run_id : new_run_id();
        if (run) changes = resume_changes(*run, requested);
        const Corpus corpus = load_corpus(requested.data);
        requested.data_fingerprint = corpus.fingerprint.text();
        if (run && !run->data_fingerprint.empty() && run->data_fingerprint != requested.data_fingerprint &&
            !a.allow_data_change)
            throw std::runtime_error("the training data changed since the run began: " +
                                     fingerprint_change(run->data_fingerprint, requested.data_fingerprint) +
                                     "; pass --allow-data-change to go on with these");
        data = std::make_shared<const TextDataset>(corpus.documents, requested.split);
    } catch (...) {
        failure = std::current_exception();
    }
    agree_to_start(failure, undo);
    if (job) requested.run_id = rank0_run_id(requested.run_id);  // a new run's id is drawn on each rank
    // GPU tensors are reduced by NCCL where this build has it (else through host copies, by MPI).
    if (job && device != Device::CPU && dist::built_with_nccl()) job = dist::init_nccl(job);
    try {
        trainer = std::make_unique<Trainer>(requested, data, device);
        if (a.resume) trainer->resume(ckpt.string());
    } catch (...) {
        failure = std::current_exception();
    }
    agree_to_start(failure, undo);
    if (job) check_ranks_agree(a, *trainer, resumed_id, undo);
    if (job) trainer->distribute(job);
    trainer->set_rank_timeout(a.rank_timeout);
    if (rank == 0) write_text_file((dir / "config.json").string(), trainer->config().to_json() + "\n");
    const TrainConfig& config = trainer->config();  // resume may restart the schedule
    const bool quiet = a.quiet || rank != 0;
    if (!quiet) {
        std::printf("%s", describe(config, trainer->model().num_parameters()).c_str());
        if (config.model.attn.gate == GatePosition::sdpa_output)  // the paper's G1: what train builds unless told otherwise
            std::printf("          (g1 is train's default attention; --attn baseline trains the same model ungated)\n");
        std::printf("          %s\n", data->split_summary().c_str());
        std::printf("device    %s%s\n", device_label(device).c_str(),
                    world > 1 ? (", " + std::to_string(world) + " processes (" + job->backend_name() + ")").c_str() : "");
        std::printf("run       %s in %s\n", config.run_id.c_str(), dir.string().c_str());
        const double h = data->unigram_entropy();
        std::printf("unigram baseline (no context): %.4f nats/byte, %.3f bits/byte\n", h, bits(h));
        if (a.resume) std::printf("resuming at step %lld\n", (long long)trainer->step());
    }
    // Even when quiet: a resumed run that trains otherwise than it began says so.
    if (rank == 0 && !changes.empty()) std::printf("changed for the rest of the run: %s\n", changes.c_str());
    if (rank == 0 && !trainer->resume_note().empty()) std::printf("%s\n", trainer->resume_note().c_str());
    std::fflush(stdout);
    trainer->stop_on(stop_requested);
    TrainResult result;
    try {
        result = trainer->run(quiet);
    } catch (const dist::CollectiveAbandoned& e) {  // a rank stopped answering: main() ends the job
        const int64_t saved = trainer->saved_step();
        const std::string kept = saved >= 0 ? "; the checkpoint of step " + std::to_string(saved) + " in " + ckpt.string() +
                                                  " is whole (train --resume goes on from it)"
                                            : "; no checkpoint was written yet";
        if (dynamic_cast<const dist::Interrupted*>(&e))
            throw dist::Interrupted("stopped by " + stop_cause(stop_requested.load(), rank, rank) + " after step " +
                                    std::to_string(trainer->step()) + " while waiting for the other ranks (" + e.what() +
                                    ")" + kept);
        throw dist::RankTimeout(std::string(e.what()) + " (--rank-timeout " +
                                std::to_string(int64_t(std::ceil(job->wait_limits().timeout_s))) +
                                "): a rank has stopped or hung; ending the job" + kept);
    }
    if (result.stopped) {
        std::fflush(stdout);
        if (rank == 0)
            std::fprintf(stderr, "gatedgrad: stopped by %s after step %lld; saved %s (train --resume --out %s goes on)\n",
                         stop_cause(result.stop_reason, result.stop_rank, rank).c_str(), (long long)trainer->step(),
                         ckpt.string().c_str(), dir.string().c_str());
        return 128 + result.stop_reason;
    }
    if (result.diverged) {  // the same on every rank (the loss and weights are): rank 0 says so
        abort_job_on_error = false;
        if (rank != 0) throw QuietExit{1};
        throw std::runtime_error(result.message);
    }
    if (result.log_failed) throw std::runtime_error(result.message);  // rank 0's alone: the error ends the job
    // Nothing left to train (a finished run resumed): measure the model as it is.
    const double val = result.log.empty() ? trainer->evaluate() : result.final_val_loss;
    if (rank == 0)
        std::printf("final validation loss %.4f nats/byte, %.3f bits/byte (step %lld, %.1f s); saved %s\n", val,
                    bits(val), (long long)trainer->step(), result.seconds, ckpt.string().c_str());
    return 0;
}

// ---------------------------------------------------------------- checkpoints

// A trained model with the TrainConfig it was trained with (defaults where the file has none).
struct Checkpoint {
    std::shared_ptr<GatedTransformerLM> model;
    TrainConfig train;
};

Checkpoint open_checkpoint(const std::string& path) {
    Checkpoint ck;
    ck.model = load_model(path);  // checks the file and every tensor
    const SafetensorsFile file = read_safetensors(path);
    if (auto it = file.metadata.find("train_config"); it != file.metadata.end()) {
        try {
            ck.train = TrainConfig::from_json(it->second);
        } catch (const std::invalid_argument& e) {
            throw std::runtime_error("checkpoint: " + path + ": " + e.what());
        }
    }
    ck.train.model = ck.model->config();
    return ck;
}

// ---------------------------------------------------------------- Hugging Face models (--hf DIR)

// A Qwen3 folder (config.json, safetensors, tokenizer.json): nn/io/hf.h. Its weights keep
// the file's dtype unless --precision says otherwise; bfloat16 ones run under autocast.
CLI::Option* add_hf_options(CLI::App* cmd, std::string& dir, std::string& precision) {
    CLI::Option* hf = cmd->add_option("--hf", dir, "a Hugging Face Qwen3 model folder (config.json, safetensors, "
                                                   "tokenizer.json) instead of --ckpt")->type_name("DIR");
    cmd->add_option("--precision", precision, "with --hf: auto (the file's dtype), f32 or bf16")
        ->check(CLI::IsMember({"auto", "f32", "bf16"}))
        ->capture_default_str();
    return hf;
}

struct HfModel {
    std::shared_ptr<GatedTransformerLM> model;
    std::optional<BpeTokenizer> tokenizer;  // from DIR/tokenizer.json, when there is one
    std::optional<Autocast> autocast;       // on while the weights are bfloat16
};

std::unique_ptr<HfModel> open_hf(const std::string& dir, const std::string& precision, const std::string& device,
                                 bool need_tokenizer) {
    auto out = std::make_unique<HfModel>();
    hf::LoadOptions options;
    if (precision != "auto") options.dtype = parse_precision(precision);
    out->model = hf::load(dir, options);
    out->model->to(parse_device(device));
    const fs::path tokenizer = fs::path(dir) / "tokenizer.json";
    if (fs::exists(tokenizer)) out->tokenizer = BpeTokenizer::from_file(tokenizer.string());
    else if (need_tokenizer) throw std::runtime_error(dir + ": no tokenizer.json to turn text into this model's ids");
    if (out->tokenizer && out->tokenizer->vocab_size() > out->model->config().vocab_size)
        throw std::runtime_error(dir + ": tokenizer.json has " + std::to_string(out->tokenizer->vocab_size()) +
                                 " tokens but the model only " + std::to_string(out->model->config().vocab_size));
    if (out->model->parameters().front().dtype() == DType::bf16) out->autocast.emplace(DType::bf16);
    return out;
}

// Up to n windows of T + 1 tokens of the text (documents joined by newlines, tokenized as one
// stream): each its own sequence, the tokenizer's leading token (BOS) first where its
// post-processor puts one, else the text's own first token. A text shorter than one window is
// one shorter sequence. (n', T' + 1) int64, on the model's device.
Tensor hf_windows(const HfModel& m, const std::vector<std::string>& paths, int64_t n, int64_t T) {
    if (paths.empty()) throw UsageError("--hf needs --data FILE: the text to run the model on");
    std::string text;
    for (const std::string& doc : load_documents(paths)) text += doc + "\n";
    const std::vector<int64_t> stream = m.tokenizer->encode(text);
    const std::optional<int64_t> first = m.tokenizer->prepended_token();
    const int64_t body = T + 1 - (first ? 1 : 0);  // tokens of text per window
    const int64_t count = std::max<int64_t>(1, std::min<int64_t>(n, int64_t(stream.size()) / body));
    const int64_t length = std::min<int64_t>(body, int64_t(stream.size()));
    if (length + (first ? 1 : 0) < 2) throw std::runtime_error("the text gives fewer than 2 tokens");
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < count; ++i) {
        if (first) ids.push_back(*first);
        ids.insert(ids.end(), stream.begin() + i * body, stream.begin() + i * body + length);
    }
    return from_vector(ids, {count, length + (first ? 1 : 0)}).to(device_of(*m.model));
}

// What eval and sink share: the checkpoint and the validation text to run it on.
struct DataArgs {
    std::string ckpt, hf, precision = "auto", device = "cpu";
    std::vector<std::string> data;
    int64_t seq_len = 0, batch = 0;  // 0: as in training
};

void add_data_options(CLI::App* cmd, DataArgs& a) {
    CLI::Option* ckpt = cmd->add_option("--ckpt", a.ckpt, "a checkpoint written by train")->type_name("FILE");
    add_hf_options(cmd, a.hf, a.precision)->excludes(ckpt);
    cmd->add_option("--data", a.data, "corpus files or folders (default: those the model was trained on; with --hf, "
                                      "required)")->type_name("PATH");
    cmd->add_option("--seq-len", a.seq_len, "tokens per sequence (default: the training length)")
        ->check(count(2, kMaxSeqLen));
    cmd->add_option("--batch", a.batch, "sequences per batch (default: the training batch)")
        ->check(count(1, TrainConfigLimits::batch_size));
    add_device_option(cmd, a.device);
}

// Fills in the training defaults and checks the model can run at that length, and that a
// batch of that size fits in memory for `workload`.
Checkpoint open_for_data(DataArgs& a, Workload workload) {
    if (a.ckpt.empty()) throw UsageError("give --ckpt FILE (a checkpoint of train) or --hf DIR (a Hugging Face model)");
    const Device device = parse_device(a.device);
    Checkpoint ck = open_checkpoint(a.ckpt);
    ck.model->to(device);
    if (!a.data.empty()) ck.train.data = a.data;
    const bool from_flags = a.seq_len > 0 || a.batch > 0;
    if (a.seq_len == 0) a.seq_len = ck.train.seq_len;
    if (a.batch == 0) a.batch = ck.train.batch_size;
    const LMConfig& m = ck.model->config();
    if (m.positions == PositionEncoding::learned && a.seq_len > m.max_len)
        throw UsageError("--seq-len " + std::to_string(a.seq_len) + " is longer than the " + std::to_string(m.max_len) +
                         " learned positions of this model");
    try {
        check_memory(m, workload, a.batch, a.seq_len);
    } catch (const std::invalid_argument& e) {
        if (from_flags) throw UsageError(e.what());
        throw std::runtime_error(a.ckpt + ": " + e.what());
    }
    return ck;
}

// The text a checkpoint was trained on (or --data's), split as in training. Runs from before
// paths were saved absolute name their corpus relative to the folder they were trained in.
TextDataset validation_text(const Checkpoint& ck, const DataArgs& a) {
    try {
        return TextDataset(load_documents(ck.train.data), ck.train.split);
    } catch (const std::runtime_error& e) {
        for (const std::string& path : ck.train.data)
            if (a.data.empty() && fs::path(path).is_relative() && !fs::exists(path))
                throw std::runtime_error(std::string(e.what()) + " here, in " + fs::current_path().string() +
                                         "; the checkpoint names it relative to the folder it was trained in: run "
                                         "from there, or pass --data PATH");
        throw;
    }
}

// How many of the first n validation batches exist; throws when not even one fits.
int64_t validation_batch_count(const TextDataset& data, int64_t n, int64_t B, int64_t T) {
    if (data.val_batches(B, T) < 1)
        throw std::runtime_error("the validation text (" + std::to_string(data.val_stream().size()) +
                                 " bytes) is too short for one batch of " + std::to_string(B) + " x " + std::to_string(T) +
                                 "; pass a smaller --batch or --seq-len");
    return std::min(n, data.val_batches(B, T));
}

// ---------------------------------------------------------------- eval

struct EvalArgs {
    CLI::App* cmd = nullptr;
    DataArgs data;
    int64_t batches = 0;
    std::string rope_scaling = "none";
    double rope_factor = 0;
};

void add_eval(CLI::App& app, EvalArgs& a) {
    a.cmd = app.add_subcommand("eval", "validation loss and perplexity of a checkpoint, optionally at a longer context");
    add_data_options(a.cmd, a.data);
    a.cmd->add_option("--batches", a.batches, "validation batches (default: as in training)")
        ->check(count(1, TrainConfigLimits::eval_batches));
    a.cmd->add_option("--rope-scaling", a.rope_scaling, "RoPE rescaling for long contexts: none, pi, ntk, yarn")
        ->check(accepted_by(parse_rope_scaling))
        ->capture_default_str();
    a.cmd->add_option("--rope-factor", a.rope_factor, "scaling factor s ≥ 1 (default: --seq-len / training length)")
        ->check(bounded(1, 1e6));
}

int run_eval_hf(const DataArgs& a, int64_t batches) {
    const auto m = open_hf(a.hf, a.precision, a.device, true);
    const int64_t B = a.batch > 0 ? a.batch : 8, T = a.seq_len > 0 ? a.seq_len : 256;
    const Tensor windows = hf_windows(*m, a.data, B * (batches > 0 ? batches : 4), T);  // (n, T + 1)
    const int64_t n = windows.size(0), L = windows.size(1) - 1;
    NoGradGuard no_grad;
    double total = 0;
    for (int64_t i = 0; i < n; i += B) {
        const Tensor w = windows.narrow(0, i, std::min(B, n - i));
        const double loss = m->model->forward(w.narrow(1, 0, L), w.narrow(1, 1, L)).loss.item();
        total += loss * double(w.size(0));
    }
    const double loss = total / double(n);
    if (!std::isfinite(loss)) throw std::runtime_error("the loss is " + std::to_string(loss) + ": non-finite logits");
    std::printf("%s: %lld sequences of %lld tokens (%s), %s weights\n", a.hf.c_str(), (long long)n, (long long)L,
                m->tokenizer->prepended_token() ? "BOS first" : "no BOS: the text's own first token",
                dtype_name(m->model->parameters().front().dtype()));
    std::printf("mean next-token loss %.4f nats/token, perplexity %.3f\n", loss, std::exp(loss));
    return 0;
}

int run_eval(EvalArgs& a) {
    if (!a.data.hf.empty()) return run_eval_hf(a.data, a.batches);
    Checkpoint ck = open_for_data(a.data, Workload::inference);
    const int64_t B = a.data.batch, T = a.data.seq_len, L = ck.train.seq_len;
    const RopeScaling scaling = parse_rope_scaling(a.rope_scaling);
    std::string scaling_note;
    if (scaling != RopeScaling::none) {
        if (ck.model->config().positions != PositionEncoding::rope)
            throw UsageError("--rope-scaling needs a model with RoPE positions; this one has learned positions");
        RopeOptions rope = ck.model->config().attn.rope_options;  // keeps the trained base
        rope.scaling = scaling;
        rope.factor = a.rope_factor > 0 ? a.rope_factor : std::max(1.0, double(T) / double(L));
        rope.original_length = L;
        ck.model->set_rope_options(rope);
        char note[96];
        std::snprintf(note, sizeof note, " (RoPE scaling %s x%g)", rope_scaling_name(scaling), rope.factor);
        scaling_note = note;
    }
    const TextDataset data = validation_text(ck, a.data);
    const int64_t n = validation_batch_count(data, a.batches > 0 ? a.batches : ck.train.eval_batches, B, T);
    ck.model->eval();
    NoGradGuard no_grad;
    const Device device = device_of(*ck.model);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
        const Batch b = data.val_batch(i, B, T);
        total += ck.model->forward(b.inputs.to(device), b.targets.to(device)).loss.item();
    }
    const double loss = total / double(n);
    if (!std::isfinite(loss))
        throw std::runtime_error("the validation loss is " + std::to_string(loss) + ": the model" + scaling_note +
                                 " gives non-finite logits on this text");
    std::printf("%s: trained at %lld tokens, evaluated at %lld%s, %lld batches of %lld\n", a.data.ckpt.c_str(),
                (long long)L, (long long)T, scaling_note.c_str(), (long long)n, (long long)B);
    std::printf("validation loss %.4f nats/byte, %.3f bits/byte, perplexity %.3f\n", loss, bits(loss), std::exp(loss));
    return 0;
}

// ---------------------------------------------------------------- export

struct ExportArgs {
    CLI::App* cmd = nullptr;
    std::string ckpt, out, hf, dtype = "bf16";
};

void add_export(CLI::App& app, ExportArgs& a) {
    a.cmd = app.add_subcommand("export", "write a checkpoint's weights for sharing, in bfloat16 (half the bytes) or "
                                         "float32, without the optimiser state; the checkpoint itself stays float32");
    a.cmd->add_option("--ckpt", a.ckpt, "a checkpoint written by train")->type_name("FILE")->required();
    CLI::Option* out = a.cmd->add_option("--out", a.out, "the safetensors file to write")->type_name("FILE");
    a.cmd->add_option("--hf", a.hf, "write a Hugging Face Qwen3 folder instead (config.json with the authors' gate "
                                    "flags, model.safetensors, tokenizer.json for byte models)")
        ->type_name("DIR")
        ->excludes(out);
    a.cmd->add_option("--dtype", a.dtype, "bf16 or f32")->check(accepted_by(parse_precision))->capture_default_str();
}

int run_export(const ExportArgs& a) {
    if (a.out.empty() == a.hf.empty()) throw UsageError("give one of --out FILE and --hf DIR");
    const std::shared_ptr<GatedTransformerLM> model = load_model(a.ckpt);
    const DType dtype = parse_precision(a.dtype);
    if (!a.hf.empty()) {
        try {
            hf::save(*model, a.hf, dtype);
        } catch (const std::invalid_argument& e) {  // what the Qwen3 layout cannot hold
            throw std::runtime_error(e.what());
        }
        std::printf("wrote %s: config.json, model.safetensors (%s)%s\n", a.hf.c_str(), dtype_name(dtype),
                    fs::exists(fs::path(a.hf) / "tokenizer.json") ? ", tokenizer.json" : "");
        return 0;
    }
    // The training context goes along, as in a checkpoint: eval, sink and report then run the
    // export at the length, batch and text it was trained on.
    const Checkpoint ck = open_checkpoint(a.ckpt);
    export_model(*model, a.out, dtype,
                 {{"config", model->config().to_json()}, {"train_config", ck.train.to_json()}, {"dtype", dtype_name(dtype)}});
    std::printf("wrote %s: %zu tensors, %s, %llu bytes\n", a.out.c_str(), model->state_dict().size(),
                dtype_name(dtype), (unsigned long long)fs::file_size(a.out));
    return 0;
}

// ---------------------------------------------------------------- import-hf, logits

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

// The logits of given ids, for comparing with another implementation (tools/hf-check).
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

// ---------------------------------------------------------------- sample

struct SampleArgs {
    CLI::App* cmd = nullptr;
    std::string ckpt, hf, precision = "auto", prompt, prompt_file, device = "cpu";
    SampleOptions options;
    uint64_t seed = 1;
};

void add_sample(CLI::App& app, SampleArgs& a) {
    a.cmd = app.add_subcommand("sample", "continue a prompt with a trained model");
    CLI::Option* ckpt = a.cmd->add_option("--ckpt", a.ckpt, "a checkpoint written by train")->type_name("FILE");
    add_hf_options(a.cmd, a.hf, a.precision)->excludes(ckpt);
    CLI::Option* prompt = a.cmd->add_option("--prompt", a.prompt, "text to continue (after BOS)");
    a.cmd->add_option("--prompt-file", a.prompt_file, "continue the text of this file")
        ->type_name("FILE")
        ->excludes(prompt);
    a.cmd->add_option("--tokens", a.options.max_new_tokens, "bytes to generate")
        ->check(count(0, kMaxSeqLen))
        ->capture_default_str();
    a.cmd->add_option("--temperature", a.options.temperature, "softmax temperature (0: greedy)")
        ->check(kNonNegative)
        ->capture_default_str();
    a.cmd->add_option("--top-k", a.options.top_k, "draw from the K likeliest bytes (0: all)")
        ->check(count(0, LMConfigLimits::vocab_size))
        ->capture_default_str();
    a.cmd->add_option("--context", a.options.context,
                      "each new byte attends to the last N tokens, itself included (default: the model's training "
                      "length); the prompt is cut to its last N - 1 bytes")
        ->check(count(2, kMaxSeqLen));
    a.cmd->add_option("--seed", a.seed, "sampling seed")->check(kSeed)->capture_default_str();
    add_device_option(a.cmd, a.device);
}

// A Hugging Face model continues the prompt in its own tokens; the whole prompt goes in.
int run_sample_hf(const SampleArgs& a, const std::string& text_in) {
    const auto m = open_hf(a.hf, a.precision, a.device, true);
    const std::vector<int64_t> prompt = m->tokenizer->encode_for_model(text_in);
    if (prompt.empty()) throw UsageError("--hf needs a prompt: this tokenizer puts no token before an empty text");
    Generator gen(a.seed);
    std::vector<int64_t> tokens;
    try {
        tokens = generate(*m->model, prompt, a.options, gen);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    const std::string text = text_in + m->tokenizer->decode(tokens);
    std::printf("%s%s", text.c_str(), !text.empty() && text.back() == '\n' ? "" : "\n");
    return 0;
}

int run_sample(const SampleArgs& a) {
    const Device device = parse_device(a.device);
    const std::string text_in = a.prompt_file.empty() ? a.prompt : read_file(a.prompt_file, std::uintmax_t(1) << 30);
    if (!a.hf.empty()) return run_sample_hf(a, text_in);
    if (a.ckpt.empty()) throw UsageError("give --ckpt FILE (a checkpoint of train) or --hf DIR (a Hugging Face model)");
    const auto model = load_model(a.ckpt);
    model->to(device);
    // The model was trained on windows of max_len tokens, BOS first, so by default it attends
    // to as many: the prompt's last max_len - 1 bytes, then a window sliding over what it
    // writes. Time and memory per byte stay fixed; a whole 100 KB prompt took minutes.
    SampleOptions options = a.options;
    if (options.context == 0) options.context = model->config().max_len;
    const auto keep = size_t(options.context - 1);
    std::vector<int64_t> prompt{kBOS};
    if (text_in.size() > keep)
        std::fprintf(stderr, "gatedgrad: note: the prompt is %zu bytes; the model attends to %lld tokens, so only its "
                             "last %zu bytes are given to it (--context)\n",
                     text_in.size(), (long long)options.context, keep);
    for (int64_t id : encode_bytes(text_in.substr(text_in.size() > keep ? text_in.size() - keep : 0)))
        prompt.push_back(id);
    Generator gen(a.seed);
    std::vector<int64_t> tokens;
    try {
        tokens = generate(*model, prompt, options, gen);
    } catch (const std::invalid_argument& e) {  // --tokens beyond the model's positions, or its memory
        throw UsageError(e.what());
    }
    const std::string text = text_in + decode_bytes(tokens);
    std::printf("%s%s", text.c_str(), !text.empty() && text.back() == '\n' ? "" : "\n");
    return 0;
}

// ---------------------------------------------------------------- sink

struct SinkArgs {
    CLI::App* cmd = nullptr;
    DataArgs data;
    int64_t batches = 4;
    double threshold = 0.3;
    std::string png_dir, json_file;
    bool random_tokens = false;  // Gu et al.'s probe: do sinks form without any text?
    std::vector<int64_t> layers;  // which layers to capture and report; empty: all
    uint64_t seed = 1;
};

void add_sink(CLI::App& app, SinkArgs& a) {
    a.cmd = app.add_subcommand("sink", "attention-sink report: per layer, the attention queries give to the first token");
    a.cmd->footer(
        "Columns, one row per layer (nn/analysis/analysis.h; tutorial 06):\n"
        "  first-token share  mean attention that queries 1..T-1 give to position 0 (BOS), alpha\n"
        "  sink               whether the layer's alpha is above --threshold\n"
        "  entropy            mean entropy -sum p log p of the attention rows (nats; 0: one key only)\n"
        "  gated-entropy      the same, counting a closed gate's share as attention sent nowhere (G1)\n"
        "  gate-mean, gate<0.1  the mean gate value and the share of gate values below 0.1\n"
        "  max|h|, max|h@0|   largest |value| of the layer's output, anywhere and at position 0");
    add_data_options(a.cmd, a.data);
    a.cmd->add_option("--batches", a.batches, "validation batches to average over")
        ->check(count(1, TrainConfigLimits::eval_batches))
        ->capture_default_str();
    a.cmd->add_option("--threshold", a.threshold, "a layer is a sink layer when its mean share is above this")
        ->check(bounded(0, 1))
        ->capture_default_str();
    a.cmd->add_option("--png", a.png_dir,
                      "write DIR/layer<l>_head<h>.png heat maps of the first sequence, and first_token_share.svg/.csv")
        ->type_name("DIR");
    a.cmd->add_option("--json", a.json_file, "write the report as JSON")->type_name("FILE");
    a.cmd->add_flag("--random-tokens", a.random_tokens,
                    "with --hf: uniformly random token ids instead of text (Gu et al. 2024's probe)");
    a.cmd->add_option("--seed", a.seed, "with --random-tokens: the ids' seed")->check(kSeed)->capture_default_str();
    a.cmd->add_option("--layers", a.layers, "report only these layers, e.g. 0,13,27: each kept layer's probabilities "
                                            "take 4·sequences·heads·T² bytes")
        ->delimiter(',')
        ->check(CLI::NonNegativeNumber);
}

// Heat maps of the first sequence's attention, and the per-layer bars of the first-token share.
void write_sink_pictures(GatedTransformerLM& model, const Tensor& ids, const ModelAnalysis& analysis,
                         const std::string& dir_name) {
    const fs::path dir(dir_name);
    fs::create_directories(dir);
    const int64_t T = ids.size(1);
    LMCapture capture;
    for (const LayerAnalysis& layer : analysis.layers) capture.layers.push_back(layer.layer);  // those measured
    {
        NoGradGuard no_grad;
        model.forward(ids.narrow(0, 0, 1), Tensor(), nullptr, &capture);  // (1, T)
    }
    const int scale = int(std::clamp<int64_t>(256 / T, 1, 64));  // about 256 pixels a side
    for (size_t l = 0; l < model.blocks.size(); ++l) {
        if (!capture.keeps(l)) continue;
        const Tensor probs = capture.attention[l].probs.select(0, 0);  // (H, T, T): query rows, key columns
        for (int64_t h = 0; h < probs.size(0); ++h) {
            HeatmapOptions options;
            options.title = "layer " + std::to_string(l) + ", head " + std::to_string(h) + " (" +
                            gate_position_name(model.config().attn.gate) + ")";
            write_heatmap_png((dir / ("layer" + std::to_string(l) + "_head" + std::to_string(h) + ".png")).string(),
                              probs.select(0, h), scale, options);
        }
    }

    std::vector<std::string> groups, header{"layer"};
    std::vector<BarSeries> heads;
    std::vector<std::vector<double>> rows;
    for (size_t l = 0; l < analysis.layers.size(); ++l) {
        const LayerAnalysis& layer = analysis.layers[l];
        groups.push_back("layer " + std::to_string(layer.layer));
        heads.resize(layer.first_token_share.size());
        rows.push_back({double(layer.layer)});
        for (size_t h = 0; h < layer.first_token_share.size(); ++h) {
            heads[h].label = "head " + std::to_string(h);
            heads[h].values.push_back(layer.first_token_share[h]);
            rows.back().push_back(layer.first_token_share[h]);
        }
        rows.back().push_back(layer.mean_first_token_share);
    }
    for (size_t h = 0; h < heads.size(); ++h) header.push_back("head" + std::to_string(h));
    header.push_back("mean");
    ChartOptions chart;
    chart.title = "attention on the first token (" + gate_position_name(model.config().attn.gate) + ")";
    chart.x_label = "layer";
    chart.y_label = "mean attention to position 0 (fraction)";
    chart.reference_y = analysis.threshold;
    chart.reference_label = "sink threshold";
    write_text_file((dir / "first_token_share.svg").string(), svg_bar_chart(groups, heads, chart));
    write_text_file((dir / "first_token_share.csv").string(), csv_table(header, rows));
}

// The first `batches` validation batches (fewer where the text has fewer), one after another:
// (n·B, T), each sequence BOS first, on the model's device.
Tensor validation_ids(const Checkpoint& ck, const DataArgs& a, int64_t batches) {
    const int64_t B = a.batch, T = a.seq_len;
    const TextDataset data = validation_text(ck, a);
    std::vector<Tensor> sequences;
    const int64_t n = validation_batch_count(data, batches, B, T);
    for (int64_t i = 0; i < n; ++i) sequences.push_back(data.val_batch(i, B, T).inputs);
    return cat(sequences, 0).to(device_of(*ck.model));
}

// The report on a Hugging Face model: sequences of its own tokenizer's ids, whose first token is
// whatever the text's is (Qwen3 puts no BOS first), or uniformly random ids.
int run_sink_hf(SinkArgs& a) {
    const DataArgs& d = a.data;
    const auto m = open_hf(d.hf, d.precision, d.device, !a.random_tokens);
    const int64_t B = d.batch > 0 ? d.batch : 4, T = d.seq_len > 0 ? d.seq_len : 256;
    Tensor ids;
    std::string first;
    if (a.random_tokens) {
        Generator gen(a.seed);
        ids = randint(0, m->model->config().vocab_size, {B * a.batches, T}, gen).to(device_of(*m->model));
        first = "random ids";
    } else {
        const Tensor windows = hf_windows(*m, d.data, B * a.batches, T);
        ids = windows.narrow(1, 0, windows.size(1) - 1);
        first = m->tokenizer->prepended_token() ? "BOS first" : "the text's own first token";
    }
    const ModelAnalysis analysis = analyze(*m->model, ids, a.threshold, a.layers);
    std::printf("%s: attention %s, %lld sequences of %lld tokens (%s)\n", d.hf.c_str(),
                gate_position_name(m->model->config().attn.gate).c_str(), (long long)ids.size(0),
                (long long)ids.size(1), first.c_str());
    std::printf("%s", analysis.table().c_str());
    if (!a.png_dir.empty()) {
        write_sink_pictures(*m->model, ids, analysis, a.png_dir);
        std::printf("wrote %s/layer<l>_head<h>.png, first_token_share.svg, first_token_share.csv\n", a.png_dir.c_str());
    }
    if (!a.json_file.empty()) {
        write_text_file(a.json_file, analysis.to_json() + "\n");
        std::printf("wrote %s\n", a.json_file.c_str());
    }
    return 0;
}

int run_sink(SinkArgs& a) {
    if (!a.data.hf.empty()) return run_sink_hf(a);
    if (a.random_tokens) throw UsageError("--random-tokens needs --hf");
    Checkpoint ck = open_for_data(a.data, Workload::analysis);
    const int64_t T = a.data.seq_len;
    const Tensor ids = validation_ids(ck, a.data, a.batches);  // (n·B, T)
    ck.model->eval();
    const ModelAnalysis analysis = analyze(*ck.model, ids, a.threshold, a.layers);
    std::printf("%s: attention %s, %lld sequences of %lld tokens (BOS first)\n", a.data.ckpt.c_str(),
                gate_position_name(ck.model->config().attn.gate).c_str(), (long long)ids.size(0), (long long)T);
    std::printf("%s", analysis.table().c_str());
    if (!a.png_dir.empty()) {  // first: --json may point into this folder
        write_sink_pictures(*ck.model, ids, analysis, a.png_dir);
        std::printf("wrote %s/layer<l>_head<h>.png, first_token_share.svg, first_token_share.csv\n", a.png_dir.c_str());
    }
    if (!a.json_file.empty()) {
        write_text_file(a.json_file, analysis.to_json() + "\n");
        std::printf("wrote %s\n", a.json_file.c_str());
    }
    return 0;
}

// ---------------------------------------------------------------- plot

struct PlotArgs {
    CLI::App* cmd = nullptr;
    std::vector<std::string> logs, labels;
    std::string out, title = "loss";
};

void add_plot(CLI::App& app, PlotArgs& a) {
    a.cmd = app.add_subcommand("plot", "loss curves of one or more runs (training loss, smoothed, and validation points)");
    a.cmd->add_option("LOG", a.logs, "log.jsonl files written by train")->type_name("LOG.jsonl")->required();
    a.cmd->add_option("--out", a.out, "the SVG to write")->type_name("FILE.svg")->required();
    a.cmd->add_option("--labels", a.labels, "one legend label per log, comma-separated (default: the run's folder)")
        ->delimiter(',')
        ->type_name("A,B,...");
    a.cmd->add_option("--title", a.title, "chart title")->capture_default_str();
}

int run_plot(const PlotArgs& a) {
    if (!a.labels.empty() && a.labels.size() != a.logs.size())
        throw UsageError("--labels has " + std::to_string(a.labels.size()) + " labels for " + std::to_string(a.logs.size()) +
                         " logs");
    std::vector<Series> series;
    size_t longest = 0;  // steps in the longest log
    for (size_t i = 0; i < a.logs.size(); ++i) {
        const TrainingLog log = read_training_log(a.logs[i]);
        if (!log.warning.empty()) std::fprintf(stderr, "gatedgrad: warning: %s\n", log.warning.c_str());
        const fs::path path(a.logs[i]);
        std::string label = !a.labels.empty() ? a.labels[i] : path.parent_path().filename().string();
        if (label.empty()) label = path.stem().string();
        longest = std::max(longest, log.step.size());
        for (Series& s : loss_series(log, label, chart_color(i))) series.push_back(downsample(s, ReportOptions{}.max_points));
    }
    ChartOptions chart;
    chart.title = a.title;
    chart.x_label = "training step";
    chart.y_label = "loss (nats/byte)";
    write_text_file(a.out, svg_line_chart(series, chart));
    const size_t points = ReportOptions{}.max_points;
    std::printf("wrote %s (%zu run%s%s)\n", a.out.c_str(), a.logs.size(), a.logs.size() == 1 ? "" : "s",
                longest <= points ? ""
                                  : ("; " + std::to_string(longest) + " steps drawn as " + std::to_string(points) +
                                     " points a curve, each run of consecutive steps as its lowest and highest value")
                                        .c_str());
    return 0;
}

// ---------------------------------------------------------------- report

struct ReportArgs {
    CLI::App* cmd = nullptr;
    std::vector<std::string> runs;
    std::string out, device = "cpu";
    int64_t batches = 4, map_tokens = 128, watch = 0;
    double threshold = 0.3;
};

void add_report(CLI::App& app, ReportArgs& a) {
    a.cmd = app.add_subcommand("report", "one HTML page to look at a run, or at two side by side: loss and learning-rate "
                                         "curves, stability probes, the sink table and every attention map");
    a.cmd->add_option("RUN_DIR", a.runs, "one or two folders written by train (log.jsonl in each; model.safetensors "
                                         "once the run has saved one)")
        ->required();
    a.cmd->add_option("--out", a.out, "the page to write (default: report.html in the first RUN_DIR)")->type_name("FILE.html");
    a.cmd->add_option("--batches", a.batches, "validation batches the sink table averages over, as sink --batches")
        ->check(count(1, TrainConfigLimits::eval_batches))
        ->capture_default_str();
    a.cmd->add_option("--threshold", a.threshold, "a layer is a sink layer when its mean share is above this")
        ->check(bounded(0, 1))
        ->capture_default_str();
    a.cmd->add_option("--map-tokens", a.map_tokens,
                      "the attention maps show the first N tokens of the first validation sequence (at most the "
                      "training length; the page holds N x N numbers per head)")
        ->check(count(2, 512))
        ->capture_default_str();
    a.cmd->add_option("--watch", a.watch,
                      "a live page: write it again every N seconds, and the page reloads itself as often, until "
                      "every run has finished (its last step logged and saved) or Ctrl-C")
        ->check(count(1, 86400))
        ->type_name("SECONDS");
    add_device_option(a.cmd, a.device);
    a.cmd->footer(
        "The page (nn/analysis/report.h) needs no server and no network: open it in any browser. It shows each run's\n"
        "loss and learning rate from DIR/log.jsonl, the stability probes when the run took them (train --probe-every),\n"
        "the sink report of `gatedgrad sink` (first-token share per layer, on the validation text at the training\n"
        "length), and the attention map of every layer and head, the head chosen on the page, with the gate's value\n"
        "at each query beside it for a gated model. Two runs, say a baseline and G1, are drawn side by side, and the\n"
        "runs table marks the settings in which they differ. A run still training, with no checkpoint yet, shows its\n"
        "curves; its sink table and maps come with its first checkpoint.\n"
        "  gatedgrad report runs/baseline runs/g1 --out compare.html\n"
        "  gatedgrad report runs/g1 --watch 30     # while it trains: open runs/g1/report.html, it follows the run");
}

// A run's settings as its config.json holds them, one "name value" pair per field, for the runs
// table to mark what two runs do not share. The id and the folder differ between any two runs.
std::vector<std::pair<std::string, std::string>> run_settings(const std::string& config_json) {
    std::vector<std::pair<std::string, std::string>> out;
    const nlohmann::json flat = nlohmann::json::parse(config_json).flatten();
    for (const auto& [pointer, value] : flat.items()) {
        const std::string name = pointer.substr(1);  // "/model/n_layers" → "model.n_layers"
        if (name == "run_id" || name == "out_dir") continue;
        std::string dotted;
        for (char c : name) dotted += c == '/' ? '.' : c;
        out.emplace_back(dotted, value.is_string() ? value.get<std::string>() : value.dump());
    }
    return out;
}

// describe()'s terminal lines, each with its padding, as one line.
std::string joined_lines(const std::string& text) {
    std::string out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        std::string words;
        std::istringstream in(line);
        for (std::string word; in >> word;) words += (words.empty() ? "" : " ") + word;
        out += (out.empty() ? "" : "; ") + words;
    }
    return out;
}

// What a run folder holds and when it last changed: a watched page measures a checkpoint again
// only when it was replaced.
struct RunFiles {
    fs::path dir, ckpt, log, config;
    bool has_ckpt = false;
    fs::file_time_type ckpt_time{};
};

RunFiles run_files(const std::string& folder) {
    RunFiles f{fs::path(folder), fs::path(folder) / "model.safetensors", fs::path(folder) / "log.jsonl",
               fs::path(folder) / "config.json"};
    std::error_code ec;
    if (!fs::is_directory(f.dir, ec)) throw std::runtime_error(folder + ": not a run folder (no such directory)");
    if (!fs::exists(f.log, ec)) throw std::runtime_error(folder + ": not a run folder: no log.jsonl in it");
    f.has_ckpt = fs::exists(f.ckpt, ec);
    if (f.has_ckpt) f.ckpt_time = fs::last_write_time(f.ckpt, ec);
    return f;
}

// One run's curves, sink report and maps, measured as sink measures them; a run without a
// checkpoint yet gets its curves and its config.json's description. `last` is this run's
// previous report (report --watch): its sink and maps are kept while the checkpoint is the same.
RunReport measure_run(const RunFiles& f, const ReportArgs& a, const RunReport* last, fs::file_time_type last_ckpt_time) {
    RunReport run;
    run.log = read_training_log(f.log.string());
    if (!run.log.warning.empty()) std::fprintf(stderr, "gatedgrad: warning: %s\n", run.log.warning.c_str());
    run.name = f.dir.lexically_normal().filename().string();
    if (run.name.empty()) run.name = f.dir.lexically_normal().parent_path().filename().string();  // "runs/g1/"
    if (!f.has_ckpt) {
        std::error_code ec;
        if (fs::exists(f.config, ec)) {
            const std::string json = read_file(f.config.string());
            const TrainConfig config = TrainConfig::from_json(json);
            run.gate = gate_position_name(config.model.attn.gate);
            run.settings = run_settings(json);
            run.description = joined_lines(describe(config, GatedTransformerLM(config.model).num_parameters()));
        } else {
            run.gate = "unknown";
            run.description = "no config.json in the folder";
        }
        run.pending = "no checkpoint yet (still training?): its sink table and attention maps come with its first "
                      "model.safetensors (train --ckpt-every, --ckpt-minutes, or the end of the run).";
        return run;
    }
    DataArgs data;
    data.ckpt = f.ckpt.string(), data.device = a.device;
    Checkpoint ck = open_for_data(data, Workload::analysis);
    run.gate = gate_position_name(ck.model->config().attn.gate);
    run.description = joined_lines(describe(ck.train, ck.model->num_parameters()));
    run.settings = run_settings(ck.train.to_json());
    if (last && last->pending.empty() && last_ckpt_time == f.ckpt_time) {
        run.sink = last->sink, run.maps = last->maps, run.sink_data = last->sink_data;
        return run;
    }
    const Tensor ids = validation_ids(ck, data, a.batches);  // (n·B, T)
    ck.model->eval();
    run.sink = analyze(*ck.model, ids, a.threshold);
    run.maps = capture_attention_maps(*ck.model, ids.narrow(0, 0, 1).narrow(1, 0, std::min(a.map_tokens, ids.size(1))));
    run.sink_data = std::to_string(ids.size(0)) + " validation sequences of " + std::to_string(ids.size(1)) +
                    " tokens (BOS first); the maps show the first " + std::to_string(run.maps.tokens.size()) +
                    " tokens of the first one";
    return run;
}

// A run is over when it has logged its last step and saved a checkpoint: a watched page then
// stops reloading. Its config.json says how many steps it takes.
bool finished(const RunFiles& f, const RunReport& run) {
    std::error_code ec;
    if (!f.has_ckpt || !fs::exists(f.config, ec)) return false;
    return run.log.step.back() >= double(TrainConfig::from_json(read_file(f.config.string())).steps);
}

int run_report(const ReportArgs& a) {
    if (a.runs.size() > 2)
        throw UsageError("report takes one or two run folders, got " + std::to_string(a.runs.size()));
    const std::string out = !a.out.empty() ? a.out : (fs::path(a.runs.front()) / "report.html").string();
    std::vector<RunReport> runs;
    std::vector<fs::file_time_type> ckpt_times(a.runs.size());
    for (;;) {
        std::vector<RunReport> now;
        bool all_finished = true;
        for (size_t i = 0; i < a.runs.size(); ++i) {
            const RunFiles f = run_files(a.runs[i]);
            now.push_back(measure_run(f, a, i < runs.size() ? &runs[i] : nullptr, ckpt_times[i]));
            ckpt_times[i] = f.ckpt_time;
            all_finished = all_finished && finished(f, now.back());
        }
        runs = std::move(now);
        if (runs.size() == 2 && runs[0].name == runs[1].name) runs[0].name += " (1)", runs[1].name += " (2)";
        ReportOptions options;
        if (a.watch > 0 && !all_finished) options.refresh_seconds = int(a.watch);
        write_text_file(out, report_html(runs, options));
        size_t maps = 0;
        std::string steps;
        for (const RunReport& run : runs) {
            for (const Tensor& layer : run.maps.probs) maps += size_t(layer.size(0));
            steps += (steps.empty() ? "" : ", ") + run.name + " at step " + std::to_string(int64_t(run.log.step.back()));
        }
        std::printf("wrote %s (%zu run%s, %zu attention maps%s)\n", out.c_str(), runs.size(), runs.size() == 1 ? "" : "s",
                    maps, a.watch > 0 ? ("; " + steps).c_str() : "");
        if (a.watch == 0) return 0;
        if (all_finished) {
            std::printf("every run has finished: the page no longer reloads\n");
            return 0;
        }
        std::fflush(stdout);
        ::sleep(unsigned(a.watch));
    }
}

// ---------------------------------------------------------------- tokenize

struct TokenizeArgs {
    CLI::App* cmd = nullptr;
    std::string tokenizer, text, file;
    bool decode = false;
};

void add_tokenize(CLI::App& app, TokenizeArgs& a) {
    a.cmd = app.add_subcommand("tokenize", "the ids a Hugging Face byte-level BPE tokenizer (GPT-2, Qwen2, Qwen3) gives a "
                                           "text, with no special token added; with --decode the text of ids");
    a.cmd->add_option("--tokenizer", a.tokenizer, "a tokenizer.json, or a model folder holding one")
        ->type_name("FILE|DIR")
        ->required();
    CLI::Option* text = a.cmd->add_option("--text", a.text, "the text (or the ids); default: standard input");
    a.cmd->add_option("--file", a.file, "read the text (or the ids) from this file")->type_name("FILE")->excludes(text);
    a.cmd->add_flag("--decode", a.decode, "read ids separated by white space and write their bytes as they are");
}

int run_tokenize(const TokenizeArgs& a) {
    const fs::path in_folder = fs::path(a.tokenizer) / "tokenizer.json";
    const BpeTokenizer tokenizer = BpeTokenizer::from_file(fs::is_directory(a.tokenizer) ? in_folder.string() : a.tokenizer);
    std::string input = a.text;
    if (!a.file.empty()) {
        input = read_file(a.file, std::uintmax_t(1) << 32);
    } else if (a.cmd->count("--text") == 0) {
        std::stringstream in;
        in << std::cin.rdbuf();
        input = in.str();
    }
    if (!a.decode) {
        std::string line;
        for (int64_t id : tokenizer.encode(input)) line += (line.empty() ? "" : " ") + std::to_string(id);
        std::printf("%s\n", line.c_str());
        return 0;
    }
    std::vector<int64_t> ids;
    std::istringstream words(input);
    for (std::string word; words >> word;) {
        int64_t id = 0;
        const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), id);
        if (error != std::errc() || end != word.data() + word.size())
            throw std::runtime_error("tokenize --decode: '" + printable(word) + "' is not a token id");
        ids.push_back(id);
    }
    const std::string bytes = tokenizer.decode(ids);
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return 0;
}

// ---------------------------------------------------------------- typos

// The fewest one-character insertions, deletions, substitutions and swaps of neighbours
// that turn a into b (the optimal-string-alignment distance: "trian" is 1 from "train").
size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));  // d[i][j]: a[0, i) → b[0, j)
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
        for (size_t j = 1; j <= b.size(); ++j) {
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

// "; did you mean X?" for the name nearest to `typed`, when near enough to be a typo (at
// most a third of its letters wrong, dashes aside); else "".
std::string did_you_mean(const std::string& typed, const std::vector<std::string>& names) {
    const size_t letters = typed.size() - std::min(typed.find_first_not_of('-'), typed.size());
    size_t best_distance = std::max<size_t>(1, letters / 3) + 1;  // the first distance too far
    std::string best;
    for (const std::string& name : names)
        if (const size_t d = edit_distance(typed, name); d < best_distance) best = name, best_distance = d;
    return best.empty() ? "" : "; did you mean " + best + "?";
}

// After CLI11 found arguments it did not expect: a suggestion for the first unknown option.
std::string unknown_option_hint(CLI::App& app, int argc, char** argv) {
    CLI::App* cmd = argv[1][0] == '-' ? &app : app.get_subcommand(argv[1]);
    std::vector<std::string> names;
    for (const CLI::Option* opt : cmd->get_options()) {
        for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
        for (const std::string& n : opt->get_snames()) names.push_back("-" + n);
    }
    for (int i = cmd == &app ? 1 : 2; i < argc; ++i) {
        const std::string arg = argv[i], name = arg.substr(0, arg.find('='));
        if (name.size() < 2 || name == "--" || name[0] != '-' || std::isdigit(static_cast<unsigned char>(name[1])) ||
            name[1] == '.')
            continue;  // a value (perhaps a negative number), or the end of the options
        if (!cmd->get_option_no_throw(name)) return did_you_mean(name, names);
    }
    return "";
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"gatedgrad: train and study byte-level language models with gated attention", "gatedgrad"};
    app.require_subcommand(1);
    app.footer("Exit codes: 0 done, 1 the work failed, 2 a bad command line, 130/143 train stopped by SIGINT/SIGTERM\n"
               "(after saving a checkpoint).");
    TrainArgs train;
    EvalArgs eval;
    SampleArgs sample;
    SinkArgs sink;
    PlotArgs plot;
    ReportArgs report;
    ExportArgs exported;
    TokenizeArgs tokenize;
    ImportArgs import_hf;
    LogitsArgs logits;
    add_train(app, train);
    add_eval(app, eval);
    add_sample(app, sample);
    add_sink(app, sink);
    add_plot(app, plot);
    add_report(app, report);
    add_export(app, exported);
    add_tokenize(app, tokenize);
    add_import(app, import_hf);
    add_logits(app, logits);

    // Without this, "gatedgrad trian" reads as "A subcommand is required".
    const std::vector<std::string> commands{"train", "eval",     "sample",    "sink",  "plot",
                                            "report", "export", "tokenize", "import-hf", "logits"};
    if (argc < 2 || (argv[1][0] != '-' && std::find(commands.begin(), commands.end(), argv[1]) == commands.end())) {
        const std::string hint = argc < 2 ? "" : did_you_mean(argv[1], commands);
        std::fprintf(stderr, "gatedgrad: %s%s (see --help)\n",
                     argc < 2 ? "no command given" : ("unknown command '" + std::string(argv[1]) + "'").c_str(),
                     hint.empty() ? "; the commands are train, eval, sample, sink, plot, report, export, tokenize, "
                                                 "import-hf and logits"
                                  : hint.c_str());
        return 2;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (dist::launcher_rank() > 0) return e.get_exit_code() ? 2 : 0;  // every rank parsed the same: rank 0 says it
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
        const std::string hint = dynamic_cast<const CLI::ExtrasError*>(&e) ? unknown_option_hint(app, argc, argv) : "";
        std::fprintf(stderr, "gatedgrad: %s%s (see --help)\n", one_line(e.what()).c_str(), hint.c_str());
        return 2;
    }
    try {
        if (train.cmd->parsed()) return run_train(train);
        if (eval.cmd->parsed()) return run_eval(eval);
        if (sample.cmd->parsed()) return run_sample(sample);
        if (sink.cmd->parsed()) return run_sink(sink);
        if (report.cmd->parsed()) return run_report(report);
        if (exported.cmd->parsed()) return run_export(exported);
        if (tokenize.cmd->parsed()) return run_tokenize(tokenize);
        if (import_hf.cmd->parsed()) return run_import(import_hf);
        if (logits.cmd->parsed()) return run_logits(logits);
        return run_plot(plot);
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
        job->abort(code);
    } catch (const std::exception& e) {
        std::fflush(stdout);
        // Data parallel, a rank that fails alone names itself and ends the job.
        std::fprintf(stderr, "gatedgrad: %s%s\n",
                     abort_job_on_error ? ("rank " + std::to_string(job->rank()) + ": ").c_str() : "",
                     one_line(e.what()).c_str());
        if (abort_job_on_error) job->abort(1);
        return 1;
    }
}
