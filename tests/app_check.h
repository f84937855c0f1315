// app_check.h — what the tests of the gatedgrad command line share: a scratch folder, the
// app run to completion (run_app) or started and signalled (spawn_app), and the check that
// a failure is one line on stderr.
#pragma once
#include <doctest/doctest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

namespace gg::testing {

namespace fs = std::filesystem;

inline size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

inline std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// A fresh folder under /tmp, removed at the end of the test.
struct TempDir {
    fs::path path = fs::temp_directory_path() / ("gg_test_app_" + std::to_string(getpid()));
    TempDir() {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
};

// The app sits next to this test in the build tree: <build>/apps/gatedgrad.
inline fs::path app_path() { return fs::canonical("/proc/self/exe").parent_path().parent_path() / "apps" / "gatedgrad"; }

struct Outcome {
    int code;
    std::string out, err;
};

// Runs the app with `args` after the shell commands `before` ("ulimit -v 600000 && ").
inline Outcome run_app_after(const TempDir& tmp, const std::string& before, const std::string& args) {
    const fs::path out = tmp.path / "stdout.txt", err = tmp.path / "stderr.txt";
    const std::string command = before + "OMP_NUM_THREADS=1 " + app_path().string() + " " + args + " >" + out.string() +
                                " 2>" + err.string();
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

// Runs the app with `args`, from the folder `cwd` when one is given.
inline Outcome run_app(const TempDir& tmp, const std::string& args, const fs::path& cwd = {}) {
    return run_app_after(tmp, cwd.empty() ? "" : "cd " + cwd.string() + " && ", args);
}

// A failure is exactly one line on stderr, starting "gatedgrad: ".
inline void check_error(const Outcome& o, int code, const std::string& mentions) {
    INFO("stderr: " << o.err);
    CHECK(o.code == code);
    CHECK(o.err.rfind("gatedgrad: ", 0) == 0);
    CHECK(count(o.err, "\n") == 1);
    CHECK(o.err.find(mentions) != std::string::npos);
}

// The app started in the background, writing stdout and stderr into `name`.out/.err in
// tmp: through sh's exec, so that pid is the app's own and a signal sent to it reaches it.
// One never waited for (a failed REQUIRE on the way) is killed when the Child goes.
struct Child {
    pid_t pid = -1;
    fs::path out, err;
    bool reaped = false;
    Child(const TempDir& tmp, const std::string& args, const std::string& name)
        : out(tmp.path / (name + ".out")), err(tmp.path / (name + ".err")) {
        std::ofstream(out).close(), std::ofstream(err).close();  // there from the start, for polling
        const std::string command = "OMP_NUM_THREADS=1 exec " + app_path().string() + " " + args + " >" +
                                    out.string() + " 2>" + err.string();
        const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
        REQUIRE(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) == 0);
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    ~Child() {
        if (reaped || pid <= 0) return;
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
};

// Waits for the child to end: its outcome, and in `usage` what it used (ru_maxrss: its
// peak resident memory, KiB).
inline Outcome wait_app(Child& child, rusage* usage = nullptr) {
    int status = 0;
    rusage ignored{};
    REQUIRE(wait4(child.pid, &status, 0, usage ? usage : &ignored) == child.pid);
    child.reaped = true;
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(child.out), read_file(child.err)};
}

// Polls `ready` every 20 ms for up to `seconds`; whether it became true.
inline bool wait_until(const std::function<bool()>& ready, double seconds = 60) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!ready()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

}  // namespace gg::testing
