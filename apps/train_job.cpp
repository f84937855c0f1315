// How a run of train stops and how the ranks of a data-parallel run agree (train.h): the
// SIGINT/SIGTERM handler, and the checks every rank makes before the first step.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "distributed/agreement.h"
#include "distributed/process_group.h"
#include "tensor/tensor.h"
#include "train.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

// ---------------------------------------------------------------- stopping

// The first SIGINT or SIGTERM asks the trainer to stop at the next step boundary, where it
// saves a checkpoint; a second one ends the process at once. A handler may only store to
// lock-free atomics and call async-signal-safe functions (_exit): it does nothing else.
// stop_requested holds the signal's number (0: none), stop_sender the pid that sent it.
std::atomic<int> stop_requested{0}, stop_sender{0};
std::atomic<bool> job_ending{false};
// When mpirun last sent SIGCONT (CLOCK_MONOTONIC, ns; 0: never): the first signal of its ending
// a job, and the one that wakes a rank someone stopped (mpirun_ending_job).
std::atomic<int64_t> mpirun_continued_ns{0};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free &&
              std::atomic<int64_t>::is_always_lock_free);

namespace {

extern "C" void on_stop_signal(int signal, siginfo_t* info, void*) {
    if (job_ending.load()) ::_exit(128 + signal);  // mpirun ending the job this rank aborted: silently
    if (stop_requested.load() != 0) {
        static const char kAtOnce[] =
            "gatedgrad: stopped at once by a second signal; no checkpoint saved for the step under way\n";
        (void)!::write(STDERR_FILENO, kAtOnce, sizeof kAtOnce - 1);
        ::_exit(128 + signal);
    }
    stop_sender.store(info ? int(info->si_pid) : 0);
    stop_requested.store(signal);
}

int64_t monotonic_ns() {  // clock_gettime may be called in a signal handler
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
}

extern "C" void on_continue(int, siginfo_t* info, void*) {
    if (info && info->si_pid == ::getppid()) mpirun_continued_ns.store(monotonic_ns());
}

bool stopped_by_mpirun() { return stop_requested.load() == SIGTERM && stop_sender.load() == int(::getppid()); }

const char* signal_name(int signal) { return signal == SIGTERM ? "SIGTERM" : signal == SIGINT ? "SIGINT" : "a signal"; }

int exit_code(const std::exception_ptr& failure) {
    try {
        std::rethrow_exception(failure);
    } catch (const UsageError&) {
        return 2;
    } catch (...) {
        return 1;
    }
}

}  // namespace

void stop_on_signals() {
    struct sigaction action {};
    action.sa_sigaction = on_stop_signal;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    for (int signal : {SIGINT, SIGTERM}) ::sigaction(signal, &action, nullptr);
    action.sa_sigaction = on_continue;  // SIGCONT still continues the process; this only notes it
    ::sigaction(SIGCONT, &action, nullptr);
}

bool mpirun_ending_job(double seconds) {
    const int64_t continued = mpirun_continued_ns.load();
    return stopped_by_mpirun() || (continued != 0 && monotonic_ns() - continued <= int64_t(seconds * 1e9));
}

// "SIGTERM", "SIGTERM on rank 1", "SIGTERM from mpirun (which passes Ctrl-C on as SIGTERM)":
// Open MPI's mpirun turns a SIGINT or SIGTERM it receives into SIGTERM to every rank (it
// cannot forward SIGINT), so a rank can only say which signal came and from where.
std::string stop_cause(const Job& job, int signal, int rank, int my_rank) {
    const std::string cause = signal_name(signal);
    // mpirun passes a Ctrl-C on to every rank as SIGTERM, and whichever rank's arrived first
    // is the one the ranks learnt of first: when this rank's own SIGTERM came from mpirun too,
    // the stop was mpirun's, not the other rank's.
    if (job.ranks && signal == SIGTERM && stopped_by_mpirun())
        return cause + " from mpirun (which passes a Ctrl-C on as SIGTERM)";
    if (job.ranks && rank != my_rank) return cause + " on rank " + std::to_string(rank);
    return cause;
}

// ---------------------------------------------------------------- data parallel

void agree_to_start(Job& job, std::exception_ptr failure, const std::function<void()>& undo) {
    int first = failure ? 0 : -1, code = failure ? exit_code(failure) : 0;
    if (job.ranks) {
        const Tensor codes = zeros({job.ranks->world_size()}, DType::f64);
        codes.data<double>()[job.ranks->rank()] = code;
        job.ranks->all_reduce(codes, dist::ReduceOp::sum);
        first = -1;
        for (int r = 0; r < job.ranks->world_size() && first < 0; ++r)
            if (const double c = codes.data<const double>()[r]; c != 0) first = r, code = int(c);
    }
    if (first < 0) {
        job.abort_on_error = job.ranks && job.ranks->world_size() > 1;
        return;
    }
    undo();
    if (failure && (!job.ranks || job.ranks->rank() == first)) std::rethrow_exception(failure);
    throw QuietExit{code};
}

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

std::string rank0_run_id(dist::ProcessGroup& ranks, const std::string& mine) {
    const uint64_t id = std::stoull(mine, nullptr, 16);
    const Tensor halves = from_vector(std::vector<double>{double(id >> 32), double(id & 0xffffffffu)}, {2});
    ranks.broadcast(halves, 0);
    const double* h = halves.data<const double>();
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", (unsigned long long)((uint64_t(h[0]) << 32) | uint64_t(h[1])));
    return text;
}

void check_ranks_agree(dist::ProcessGroup& ranks, const TrainArgs& a, const Trainer& trainer, const std::string& resumed_id,
                       const std::function<void()>& undo) {
    dist::Fields fields{{"--resume/--force", a.resume ? "--resume" : a.force ? "--force" : "neither"}};
    // The model's fields in LMConfig's own order (d_model before the d_ff it implies), then the rest.
    for (const auto& [name, value] : dist::json_fields(trainer.config().model.to_json()))
        fields.push_back({"model." + name, value});
    for (const auto& field : dist::json_fields(trainer.config().to_json()))
        if (field.first.rfind("model.", 0) != 0) fields.push_back(field);
    fields.push_back({"the run id in config.json", resumed_id});
    fields.push_back({"the step it starts at", std::to_string(trainer.step())});
    const std::optional<dist::Disagreement> d = dist::find_disagreement(ranks, fields);
    if (!d) return;
    undo();
    const bool state = d->field == "data_fingerprint" || d->field == "run_id" || d->field.rfind("the ", 0) == 0 ||
                       d->field.rfind("restart_", 0) == 0;
    if (ranks.rank() != 0) throw QuietExit{state ? 1 : 2};
    if (state) throw std::runtime_error(d->message());
    throw UsageError(d->message());
}
