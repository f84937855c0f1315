// What the commands share (cli.h): errors and their exit codes, validators, --device (a
// training config's description: describe.cpp).
#include "cli.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "nn/untrusted.h"
#include "tensor/backend.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

int run_command(const std::function<int(Job&)>& command, Job& job) {
    try {
        return command(job);
    } catch (const QuietExit& e) {
        return e.code;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "gatedgrad: %s (see --help)\n", one_line(e.what()).c_str());
        return 2;
    } catch (const dist::CollectiveAbandoned& e) {
        // A collective gave up waiting for the other ranks: MPI cannot go on, so the job ends here.
        // Unless mpirun is already ending it: then the ranks this one waited for are gone, and the
        // rank that ended the job has said why. The stopped rank, woken by mpirun only to be killed
        // and not killed yet (mpirun is slow on a loaded machine), would add a second verdict.
        if (mpirun_ending_job(job.ranks->wait_limits().timeout_s + 2)) {
            std::fflush(stdout);
            std::_Exit(1);
        }
        const int code = dynamic_cast<const dist::Interrupted*>(&e) ? 128 + stop_requested.load() : 1;
        std::fflush(stdout);
        std::fprintf(stderr, "gatedgrad: rank %d: %s\n", job.ranks->rank(), one_line(e.what()).c_str());
        job_ending = true;
        job.ranks->abort(code);
        // ProcessGroup::abort is [[noreturn]], which GCC cannot see through the virtual call.
        __builtin_unreachable();
    } catch (const std::exception& e) {
        std::fflush(stdout);
        // Data parallel, a rank that fails alone names itself and ends the job.
        std::fprintf(stderr, "gatedgrad: %s%s\n",
                     job.abort_on_error ? ("rank " + std::to_string(job.ranks->rank()) + ": ").c_str() : "",
                     one_line(e.what()).c_str());
        if (job.abort_on_error) job_ending = true, job.ranks->abort(1);
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
