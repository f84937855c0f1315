// timing.cpp — the clocks of timing.h.
#include "common/timing.h"

#include <sys/resource.h>

#include <cstdio>

namespace tutorial {

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

double children_cpu_seconds() {
    rusage usage{};
    getrusage(RUSAGE_CHILDREN, &usage);
    auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string minutes_and_cpu_minutes(Clock::time_point start) {
    char text[64];
    std::snprintf(text, sizeof text, "%.1f min (%.1f CPU-min)", seconds_since(start) / 60, children_cpu_seconds() / 60);
    return text;
}

}  // namespace tutorial
