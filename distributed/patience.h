// patience.h — when a wait for the other ranks gives up (WaitLimits in process_group.h), for
// every backend: the mpi backend asks it between two polls of MPI_Test (distributed/mpi.cpp), the
// nccl backend's watchdog between two looks at the GPU's queue (distributed/nccl.cpp).
//
// Two rules. The time counted is the other ranks' silence, not this process's own absence: a
// gap of over a second between two looks means this process was not running (stopped by
// SIGSTOP, or starved), and that gap is not counted. Once the stop flag is set (a Ctrl-C),
// the wait ends `after_stop_s` later, so a job whose other ranks do not answer still stops.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "distributed/process_group.h"

namespace gg::dist {

class Patience {
public:
    using clock = std::chrono::steady_clock;

    Patience(const char* op, clock::time_point start) : op_(op), start_(start), last_look_(start) {}

    // Throws RankTimeout or Interrupted when the wait should end at `now`; else returns the
    // seconds waited so far.
    double check(const WaitLimits& limits, clock::time_point now) {
        if (now - last_look_ > std::chrono::seconds(1)) start_ += now - last_look_;  // we were not running
        last_look_ = now;
        const double waited = std::chrono::duration<double>(now - start_).count();
        if (limits.stop && limits.stop->load() != 0) {
            if (!stop_seen_) stop_seen_ = now;
            const double since = std::chrono::duration<double>(now - *stop_seen_).count();
            if (since > std::min(limits.after_stop_s, limits.timeout_s))
                throw Interrupted(text("asked to stop, and the other ranks gave no answer for", waited));
        }
        if (waited > limits.timeout_s) throw RankTimeout(text("no answer from the other ranks for", waited));
        return waited;
    }

private:
    std::string text(const char* what, double waited) const {
        char line[200];
        std::snprintf(line, sizeof line, "%s: %s %.0f s", op_.c_str(), what, waited);
        return line;
    }
    std::string op_;
    clock::time_point start_, last_look_;
    std::optional<clock::time_point> stop_seen_;
};

}  // namespace gg::dist
