// run_pool.h — independent training runs side by side, one child process each.
//
// Tutorials 07 and 08 train dozens of small models that share nothing but the corpus.
// A forked child is a copy of the parent: the corpus loaded before the fork is shared
// (copy-on-write), each child seeds its own generators, and a crash or a NaN in one run
// cannot touch another. The parent does no tensor work itself, so no OpenMP or BLAS
// thread pool exists when it forks.
#pragma once
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace tutorial {

// Calls work(i) for every i in [0, n), each in its own child process, at most `jobs` at
// a time, and returns what each returned (the child writes it to an unlinked temporary
// file the parent opened before forking). Throws naming the runs that failed.
inline std::vector<std::string> run_in_processes(int64_t n, int jobs, const std::function<std::string(int64_t)>& work) {
    using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;
    std::vector<File> results;
    for (int64_t i = 0; i < n; ++i) {
        results.emplace_back(std::tmpfile(), &std::fclose);
        if (!results.back()) throw std::runtime_error("run_in_processes: cannot create a temporary file");
    }
    std::map<pid_t, int64_t> running;
    std::string failed;
    int64_t next = 0;
    while (next < n || !running.empty()) {
        while (next < n && static_cast<int>(running.size()) < std::max(1, jobs)) {
            std::fflush(nullptr);  // or the child would print the parent's buffered output again
            const pid_t pid = fork();
            if (pid < 0) throw std::runtime_error("run_in_processes: fork failed");
            if (pid == 0) {
                int code = 0;
                try {
                    const std::string text = work(next);
                    const int fd = fileno(results[next].get());
                    for (size_t done = 0; done < text.size();) {
                        const ssize_t w = write(fd, text.data() + done, text.size() - done);
                        if (w <= 0) throw std::runtime_error("cannot write the run's result");
                        done += static_cast<size_t>(w);
                    }
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "run %lld failed: %s\n", static_cast<long long>(next), e.what());
                    code = 1;
                }
                std::fflush(nullptr);
                _exit(code);
            }
            running[pid] = next++;
        }
        int status = 0;
        const pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) throw std::runtime_error("run_in_processes: waitpid failed");
        const auto it = running.find(pid);
        if (it == running.end()) continue;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed += " " + std::to_string(it->second);
        running.erase(it);
    }
    if (!failed.empty()) throw std::runtime_error("these runs failed:" + failed);
    std::vector<std::string> out;
    for (const File& f : results) {
        std::string text;
        char buffer[4096];
        const int fd = fileno(f.get());
        for (off_t at = 0;;) {
            const ssize_t r = pread(fd, buffer, sizeof buffer, at);
            if (r < 0) throw std::runtime_error("run_in_processes: cannot read a run's result");
            if (r == 0) break;
            text.append(buffer, static_cast<size_t>(r));
            at += r;
        }
        out.push_back(std::move(text));
    }
    return out;
}

// CPU seconds used by all finished child processes (their user + system time): on a shared
// machine a fairer measure of a run's cost than the wall clock.
inline double children_cpu_seconds() {
    rusage usage{};
    getrusage(RUSAGE_CHILDREN, &usage);
    auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace tutorial
