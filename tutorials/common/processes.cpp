// processes.cpp — the process pool of processes.h: fork, wait, collect.
#include "common/processes.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>

namespace tutorial {

namespace {

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

File temporary_file(const char* who) {
    File f(std::tmpfile(), &std::fclose);
    if (!f) throw std::runtime_error(std::string(who) + ": cannot create a temporary file");
    return f;
}

void write_all(int fd, const std::string& text) {
    for (size_t done = 0; done < text.size();) {
        const ssize_t w = write(fd, text.data() + done, text.size() - done);
        if (w <= 0) throw std::runtime_error("cannot write the run's result");
        done += static_cast<size_t>(w);
    }
}

// The whole file, read from its start whatever its current position.
std::string read_all(std::FILE* f, const char* who) {
    std::string text;
    char buffer[4096];
    const int fd = fileno(f);
    for (off_t at = 0;;) {
        const ssize_t r = pread(fd, buffer, sizeof buffer, at);
        if (r < 0) throw std::runtime_error(std::string(who) + ": cannot read a temporary file");
        if (r == 0) break;
        text.append(buffer, static_cast<size_t>(r));
        at += r;
    }
    return text;
}

}  // namespace

std::vector<std::string> run_in_processes(int64_t n, int jobs, const std::function<std::string(int64_t)>& work) {
    std::vector<File> results;
    for (int64_t i = 0; i < n; ++i) results.push_back(temporary_file("run_in_processes"));
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
                    write_all(fileno(results[next].get()), work(next));
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
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed.append(" ").append(std::to_string(it->second));
        running.erase(it);
    }
    if (!failed.empty()) throw std::runtime_error("these runs failed:" + failed);
    std::vector<std::string> out;
    for (const File& f : results) out.push_back(read_all(f.get(), "run_in_processes"));
    return out;
}

std::string capture_stdout(const std::function<void()>& work) {
    const File held = temporary_file("capture_stdout");
    std::fflush(stdout);
    const int saved = dup(STDOUT_FILENO);
    if (saved < 0 || dup2(fileno(held.get()), STDOUT_FILENO) < 0)
        throw std::runtime_error("capture_stdout: cannot redirect standard output");
    auto restore = [&] {
        std::fflush(stdout);
        dup2(saved, STDOUT_FILENO);
        close(saved);
    };
    try {
        work();
    } catch (...) {
        restore();
        throw;
    }
    restore();
    return read_all(held.get(), "capture_stdout");
}

void run_side_by_side(const std::vector<std::function<void()>>& parts) {
    const int64_t n = std::ssize(parts);
    const std::vector<std::string> held = run_in_processes(n, static_cast<int>(n), [&](int64_t i) {
        if (i == 0) {
            parts[0]();
            return std::string();
        }
        return capture_stdout(parts[i]);
    });
    for (const std::string& text : held) std::fwrite(text.data(), 1, text.size(), stdout);
}

}  // namespace tutorial
