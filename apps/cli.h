// What the commands of gatedgrad share: the usage error and the one-line message every failure
// ends in, the job a command runs in (data parallel: train starts it, the error handler ends it), the option
// validators and a config's settings as options (config_options.h), --device, and a training
// config's description. Each command is one file: commands.h.
#pragma once
#include <CLI/CLI.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "config_options.h"
#include "distributed/process_group.h"
#include "nn/files.h"
#include "nn/module.h"
#include "nn/train/trainer.h"
#include "nn/transformer.h"
#include "tensor/dtype.h"

// A command line that parses but asks for something impossible: exit code 2, like a parse error.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------- data parallel

// The job a command runs in: train starts it under mpirun, run_command ends it on an error.
struct Job {
    // The job's processes (null: one process). Each rank runs the same command; rank 0 alone
    // writes files and prints.
    std::shared_ptr<gg::dist::ProcessGroup> ranks;
    // Once every rank has agreed that a run can start, an error on one rank alone ends the whole
    // job (MPI_Abort): the others would otherwise wait for it in their next all-reduce forever.
    bool abort_on_error = false;
};
// The signal that asked train to stop (0: none), set by train's handler (train_job.cpp): a
// collective interrupted by it ends the job with 128 + it.
extern std::atomic<int> stop_requested;
// Set just before this rank ends the job (MPI_Abort): mpirun then sends every rank SIGTERM,
// which is the end under way, not a user's second signal, and must not print a line of its own.
extern std::atomic<bool> job_ending;
// Whether mpirun is ending the job around this rank (train_job.cpp). When a rank calls MPI_Abort,
// or a Ctrl-C reaches mpirun, mpirun sends every rank SIGCONT (waking a stopped one), then SIGTERM,
// then SIGKILL, a second apart: true once its SIGTERM came, or its SIGCONT within `seconds`.
bool mpirun_ending_job(double seconds);

// A rank that stops because another rank reported why: it exits with that code, silently.
struct QuietExit {
    int code;
};

// Runs a command in `job` and turns what it throws into the exit code: 2 and one line on stderr
// for a usage error, 1 and one line for any other failure (data parallel: naming the rank and
// ending the job), QuietExit's code without a word.
int run_command(const std::function<int(Job&)>& command, Job& job);

// ---------------------------------------------------------------- text

std::string one_line(std::string text);

// The most a config file (train --config, a run's config.json) may hold, for nn::read_file:
// one is a few KB, so --config /dev/zero or a log given by mistake fails at once.
constexpr uint64_t kMaxConfigFileBytes = 1 << 20;

double bits(double nats);

// The terminal lines train prints about a run before its first step (report shows them too).
std::string describe(const gg::nn::TrainConfig& c, int64_t parameters);

// ---------------------------------------------------------------- validators

// Whole numbers, finite bounds and the library's own names: config_options.h.
constexpr int64_t kMaxSteps = gg::nn::TrainConfigLimits::steps, kMaxSeqLen = gg::nn::LMConfigLimits::max_len;

// ---------------------------------------------------------------- devices

// --device of train, eval, sample, sink and report.
void add_device_option(CLI::App* cmd, std::string& device);

// cuda without a GPU stops here, with backend()'s one line on why (no driver, no device, or a
// library built without the kernels), before anything is loaded or trained.
gg::Device parse_device(std::string name);

// The device a model's parameters live on.
gg::Device device_of(const gg::nn::Module& model);
