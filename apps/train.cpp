// gatedgrad train — trains a byte-level gated-attention language model (nn/train/trainer.h) on
// any text, alone or on N processes under mpirun, and writes the run's folder: model.safetensors,
// log.jsonl, config.json. Its options are the settings of a run that have a flag
// (nn/config_fields.h); the config they make is in train_config.cpp, the signals that stop a
// run and the ranks' agreement in train_job.cpp.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "cuda/cuda.h"
#include "distributed/process_group.h"
#include "nn/files.h"
#include "nn/attention.h"
#include "nn/train/data.h"
#include "nn/train/run_lock.h"
#include "nn/transformer.h"
#include "train.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

std::string device_label(Device device) { return device == Device::CUDA ? "cuda (" + cuda::device_name() + ")" : "cpu"; }

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
    cmd->add_option("--hybrid", a.hybrid,
                    "linear-attention (Gated DeltaNet) and full-attention layers mixed: L linear then F full, repeated "
                    "through --layers (3:1 as Qwen3-Next and Qwen3.5: layers 3, 7, ... full); sets layer_types")
        ->type_name("L:F");

    // One option for each setting of a run that has a flag, with its row's check, help and
    // default (nn/config_fields.h). The options above are no settings: they choose the base
    // config, the folder, how the process runs. Four settings do more than set their field:
    // --steps rescales a preset's warmup and evaluation interval unless those are given,
    // --seq-len sets the model's max_len too, --data is saved as absolute paths (train_config
    // does these three), and --top-k means nothing without --experts.
    a.options = std::make_unique<ConfigOptions<TrainConfig>>(cmd, with_flags(run_fields()));
    a.steps = a.options->option("steps"), a.warmup = a.options->option("warmup");
    a.eval_every = a.options->option("eval_every");
    a.steps->description(a.steps->get_description() +
                         " (a preset's warmup and eval interval keep their share of the run unless given)");
    a.options->option("top_k")->needs(a.options->option("n_experts"));
    a.options->show_defaults(TrainConfig(), {{"tiny", TrainConfig::preset("tiny")}, {"small", TrainConfig::preset("small")}});
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

// Under mpirun: this process joins the job as one of its ranks.
void join_job(const TrainArgs& a, Job& job) {
    try {
        job.ranks = dist::init_mpi();
    } catch (const std::exception&) {  // a build without MPI: every rank fails alike, rank 0 says why
        if (dist::launcher_rank() > 0) throw QuietExit{1};
        throw;
    }
    // Until the trainer measures its steps: --rank-timeout, or the default.
    job.ranks->set_wait_limits({a.rank_timeout > 0 ? a.rank_timeout : Trainer::kDefaultRankTimeout, 10, &stop_requested});
}

// What a run needs before its trainer is built, each part checked.
struct Plan {
    TrainConfig requested;           // the config this command asks for
    std::optional<TrainConfig> run;  // --resume: the config the run began with
    std::shared_ptr<const TextDataset> data;
    std::string changes;             // what a resumed run changes ("" none)
    Device device = Device::CPU;
};

// The run's config, folder, device and data, on every rank; rank 0 takes the folder's lock.
Plan plan_run(const TrainArgs& a, const Job& job, std::optional<RunLock>& lock) {
    const int rank = job.ranks ? job.ranks->rank() : 0, world = job.ranks ? job.ranks->world_size() : 1;
    const fs::path dir = fs::path(a.out), ckpt = dir / "model.safetensors";
    Plan p;
    p.requested = train_config(a);
    p.requested.world_size = world;
    if (rank == 0) lock.emplace(dir.string());
    if (job.ranks && a.device.rfind("cuda", 0) == 0) one_gpu_per_rank(job.ranks->local_rank());
    p.device = parse_device(a.device);
    if (!a.resume && !a.force)
        for (const char* name : {"model.safetensors", "log.jsonl", "config.json"})
            if (fs::exists(dir / name))
                throw UsageError(dir.string() + " already holds a run (" + name + "); " +
                                 (fs::exists(ckpt) ? "pass --resume to continue it or --force to replace it"
                                                   : "it has no checkpoint to resume from: pass --force to start over"));
    if (a.resume && !fs::exists(ckpt)) throw std::runtime_error("--resume: no checkpoint at " + ckpt.string());
    p.run = a.resume ? run_config(dir) : std::nullopt;
    if (p.run && p.run->world_size != world)
        throw UsageError("the run in " + dir.string() + " trained on " + std::to_string(p.run->world_size) +
                         " process(es) and this job has " + std::to_string(world) + ": each step was a batch of " +
                         std::to_string(p.run->world_size) + " x " + std::to_string(p.run->batch_size) +
                         " sequences; resume it with " +
                         (p.run->world_size == 1 ? std::string("one process (no mpirun)")
                                                 : "mpirun -np " + std::to_string(p.run->world_size)));
    p.requested.run_id = p.run && !p.run->run_id.empty() ? p.run->run_id : new_run_id();
    if (p.run) p.changes = resume_changes(*p.run, p.requested);
    const Corpus corpus = load_corpus(p.requested.data);
    p.requested.data_fingerprint = corpus.fingerprint.text();
    if (p.run && !p.run->data_fingerprint.empty() && p.run->data_fingerprint != p.requested.data_fingerprint &&
        !a.allow_data_change)
        throw std::runtime_error("the training data changed since the run began: " +
                                 fingerprint_change(p.run->data_fingerprint, p.requested.data_fingerprint) +
                                 "; pass --allow-data-change to go on with these");
    p.data = std::make_shared<const TextDataset>(corpus.documents, p.requested.split);
    return p;
}

// The lines train prints before its first step (rank 0, unless --quiet), and, even when quiet,
// what a resumed run changes: one that trains otherwise than it began says so.
void print_start(const TrainArgs& a, Trainer& trainer, const Plan& p, const Job& job) {
    const TrainConfig& config = trainer.config();  // resume may restart the schedule
    const int world = trainer.world_size();
    if (!a.quiet) {
        std::printf("%s", describe(config, trainer.model().num_parameters()).c_str());
        if (config.model.attn.gate == GatePosition::sdpa_output)  // the paper's G1: what train builds unless told otherwise
            std::printf("          (g1 is train's default attention; --attn baseline trains the same model ungated)\n");
        std::printf("          %s\n", p.data->split_summary().c_str());
        std::printf("device    %s%s\n", device_label(p.device).c_str(),
                    world > 1 ? (", " + std::to_string(world) + " processes (" + job.ranks->backend_name() + ")").c_str() : "");
        std::printf("run       %s in %s\n", config.run_id.c_str(), a.out.c_str());
        const double h = p.data->unigram_entropy();
        std::printf("unigram baseline (no context): %.4f nats/byte, %.3f bits/byte\n", h, bits(h));
        if (a.resume) std::printf("resuming at step %lld\n", (long long)trainer.step());
    }
    if (!p.changes.empty()) std::printf("changed for the rest of the run: %s\n", p.changes.c_str());
    if (!trainer.resume_note().empty()) std::printf("%s\n", trainer.resume_note().c_str());
    std::fflush(stdout);
}

// Trains; a rank that stops answering (or a stop that comes while the ranks wait) ends the job
// with what the run keeps: main() turns the error into the job's end.
TrainResult train_or_end_job(Trainer& trainer, const Job& job, bool quiet, const fs::path& ckpt) {
    try {
        return trainer.run(quiet);
    } catch (const dist::CollectiveAbandoned& e) {
        const int64_t saved = trainer.saved_step();
        const std::string kept = saved >= 0 ? "; the checkpoint of step " + std::to_string(saved) + " in " + ckpt.string() +
                                                  " is whole (train --resume goes on from it)"
                                            : "; no checkpoint was written yet";
        if (dynamic_cast<const dist::Interrupted*>(&e))
            throw dist::Interrupted("stopped by " + stop_cause(job, stop_requested.load(), trainer.rank(), trainer.rank()) +
                                    " after step " + std::to_string(trainer.step()) +
                                    " while waiting for the other ranks (" + e.what() + ")" + kept);
        throw dist::RankTimeout(std::string(e.what()) + " (--rank-timeout " +
                                std::to_string(int64_t(std::ceil(job.ranks->wait_limits().timeout_s))) +
                                "): a rank has stopped or hung; ending the job" + kept);
    }
}

int run_train(const TrainArgs& a, Job& job) {
    stop_on_signals();
    if (dist::launched_by_mpi()) join_job(a, job);
    const int rank = job.ranks ? job.ranks->rank() : 0;
    const fs::path dir = fs::path(a.out), ckpt = dir / "model.safetensors";
    const bool existed = fs::exists(dir);
    std::optional<RunLock> lock;  // rank 0's, held until the process ends
    // Everything that can fail before the first step runs on every rank, in two parts with the
    // collective calls between them; a failure removes the folder this run made, so that it
    // does not block the next attempt.
    const auto undo = [&] {  // only by the process holding the folder's lock: never another run's folder
        std::error_code ec;
        if (!existed && lock) fs::remove_all(dir, ec);
    };
    Plan plan;
    std::exception_ptr failure;
    try {
        plan = plan_run(a, job, lock);
    } catch (...) {
        failure = std::current_exception();
    }
    agree_to_start(job, failure, undo);
    const std::string resumed_id = plan.run ? plan.run->run_id : "";
    if (job.ranks) plan.requested.run_id = rank0_run_id(*job.ranks, plan.requested.run_id);  // drawn on each rank
    // GPU tensors are reduced by NCCL where this build has it (else through host copies, by MPI).
    if (job.ranks && plan.device != Device::CPU && dist::built_with_nccl()) job.ranks = dist::init_nccl(job.ranks);
    std::unique_ptr<Trainer> trainer;
    try {
        trainer = std::make_unique<Trainer>(plan.requested, plan.data, plan.device);
        if (a.resume) trainer->resume(ckpt.string());
    } catch (...) {
        failure = std::current_exception();
    }
    agree_to_start(job, failure, undo);
    if (job.ranks) check_ranks_agree(*job.ranks, a, *trainer, resumed_id, undo);
    if (job.ranks) trainer->distribute(job.ranks);
    trainer->set_rank_timeout(a.rank_timeout);
    if (rank == 0) write_file_atomically((dir / "config.json").string(), trainer->config().to_json() + "\n");
    if (rank == 0) print_start(a, *trainer, plan, job);
    trainer->stop_on(stop_requested);
    const TrainResult result = train_or_end_job(*trainer, job, a.quiet || rank != 0, ckpt);
    if (result.stopped) {
        std::fflush(stdout);
        if (rank == 0)
            std::fprintf(stderr, "gatedgrad: stopped by %s after step %lld; saved %s (train --resume --out %s goes on)\n",
                         stop_cause(job, result.stop_reason, result.stop_rank, rank).c_str(), (long long)trainer->step(),
                         ckpt.string().c_str(), dir.string().c_str());
        return 128 + result.stop_reason;
    }
    if (result.diverged) {  // the same on every rank (the loss and weights are): rank 0 says so
        job.abort_on_error = false;
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

}  // namespace

Command train_command(CLI::App& app) { return make_command<TrainArgs>(app, add_train, run_train); }
