// timing.h — how long an experiment took: wall-clock seconds, and the CPU time of the
// child processes that trained its runs.
#pragma once
#include <chrono>
#include <string>

namespace tutorial {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start);

// CPU seconds used by all finished child processes (their user + system time): on a shared
// machine a fairer measure of a run's cost than the wall clock.
double children_cpu_seconds();

// "14.7 min (21.7 CPU-min)": the wall time since `start` and the children's CPU time.
std::string minutes_and_cpu_minutes(Clock::time_point start);

}  // namespace tutorial
