// What the commands of gatedgrad share: the usage error and the one-line message every failure
// ends in, the data-parallel job that train starts and the error handler ends, the option
// validators (whole numbers, finite bounds, the library's own names), --device, and a
// training config's description. Each command is one file: commands.h.
#pragma once
#include <CLI/CLI.hpp>

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>

#include "dist/process_group.h"
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

// Started by mpirun: the job's processes (null in one process). Each rank runs the same
// command; rank 0 alone writes files and prints.
extern std::shared_ptr<gg::dist::ProcessGroup> job;
// Once every rank has agreed that a run can start, an error on one rank alone ends the whole
// job (MPI_Abort): the others would otherwise wait for it in their next all-reduce forever.
extern bool abort_job_on_error;
// The signal that asked train to stop (0: none), set by train's handler (train_job.cpp): a
// collective interrupted by it ends the job with 128 + it.
extern std::atomic<int> stop_requested;
// Set just before this rank ends the job (MPI_Abort): mpirun then sends every rank SIGTERM,
// which is the end under way, not a user's second signal, and must not print a line of its own.
extern std::atomic<bool> job_ending;

// A rank that stops because another rank reported why: it exits with that code, silently.
struct QuietExit {
    int code;
};

// Runs a command and turns what it throws into the exit code: 2 and one line on stderr for a
// usage error, 1 and one line for any other failure (data parallel: naming the rank and ending
// the job), QuietExit's code without a word.
int run_command(const std::function<int()>& command);

// ---------------------------------------------------------------- text

std::string one_line(std::string text);

// The most a config file (train --config, a run's config.json) may hold, for nn::read_file:
// one is a few KB, so --config /dev/zero or a log given by mistake fails at once.
constexpr uint64_t kMaxConfigFileBytes = 1 << 20;

double bits(double nats);

// The terminal lines train prints about a run before its first step (report shows them too).
std::string describe(const gg::nn::TrainConfig& c, int64_t parameters);

// ---------------------------------------------------------------- validators

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
CLI::Validator bounded(double low, double high = INFINITY, bool strict = false);
inline const CLI::Validator kNonNegative = bounded(0), kPositive = bounded(0, INFINITY, true);

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
inline CLI::Validator count(int64_t low, int64_t high) { return whole<int64_t>(low, high); }
inline const CLI::Validator kSeed = whole<uint64_t>(0, UINT64_MAX);
constexpr int64_t kMaxSteps = gg::nn::TrainConfigLimits::steps, kMaxSeqLen = gg::nn::LMConfigLimits::max_len;

// ---------------------------------------------------------------- devices

// --device of train, eval, sample, sink and report.
void add_device_option(CLI::App* cmd, std::string& device);

// cuda without a GPU stops here, with backend()'s one line on why (no driver, no device, or a
// library built without the kernels), before anything is loaded or trained.
gg::Device parse_device(std::string name);

// The device a model's parameters live on.
gg::Device device_of(const gg::nn::Module& model);
