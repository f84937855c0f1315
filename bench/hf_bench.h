// hf_bench.h — what the benchmarks of a Hugging Face checkpoint against PyTorch share
// (bench/hf_forward.cpp, bench/decode.cpp): the ids both sides draw without sharing a file, and
// the process's own clocks and memory counters.
#pragma once
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "gatedgrad.h"

namespace gg::bench {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// User and system time of every thread of this process so far.
inline double cpu_seconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

inline double peak_rss_bytes() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return double(usage.ru_maxrss) * 1024;  // Linux counts kilobytes
}

// The kernel's own counters of this process, in bytes: VmHWM (the high-water mark since the
// start or the last reset_peak) and VmRSS (now).
inline double status_bytes(const char* field) {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, field, std::strlen(field)) == 0) kb = std::atof(line + std::strlen(field) + 1);
    std::fclose(f);
    return kb * 1024;
}

// Writing 5 to clear_refs restarts VmHWM from the current RSS (Linux ≥ 4.0), so that a phase's
// own peak can be read: the load's, then the forwards'.
inline void reset_peak() {
    if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
        std::fputs("5", f);
        std::fclose(f);
    }
}

// Reads argv[i] as one of `flags` (a name and the count it sets) and its value, moving i past
// them; false when argv[i] is no such flag or has no value after it.
inline bool read_count_flag(int& i, int argc, char** argv, std::span<const std::pair<const char*, int64_t*>> flags) {
    const auto flag = std::ranges::find_if(flags, [&](const auto& f) { return std::strcmp(argv[i], f.first) == 0; });
    if (flag == flags.end() || i + 1 >= argc) return false;
    *flag->second = std::atoll(argv[++i]);
    return true;
}

inline double bytes_of(const Tensor& t) { return t.defined() ? double(t.numel()) * double(dtype_size(t.dtype())) : 0; }

// Sebastiano Vigna's splitmix64: a generator a few lines long, so that the PyTorch peers
// (random_ids in bench/hf_forward_torch.py) can draw the same ids without sharing a file.
inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// B · T ids: token i of the batch in row-major order is splitmix64(seed · B · T + i) mod V.
inline std::vector<int64_t> random_ids(int64_t B, int64_t T, int64_t V, uint64_t seed) {
    std::vector<int64_t> ids(size_t(B * T));
    for (int64_t i = 0; i < B * T; ++i) ids[size_t(i)] = int64_t(splitmix64(seed * B * T + i) % uint64_t(V));
    return ids;
}

}  // namespace gg::bench
