// run_lock.h — one writer per run folder.
//
// Two processes training into one folder would overwrite each other's checkpoints and
// interleave their logs. RunLock holds flock(2)'s exclusive lock on DIR/lock for as long
// as it lives, and writes its process id into the file so the one refused can say who
// holds it. The kernel drops the lock when the holder exits, however it exits (a crash,
// SIGKILL), so a stale lock file never blocks a later run.
#pragma once
#include <string>

namespace gg::nn {

class RunLock {
public:
    // Creates `dir` if needed and takes its lock, or throws std::runtime_error naming the
    // folder and the pid of the process that holds it.
    explicit RunLock(const std::string& dir);
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;
    ~RunLock();  // closing the file releases the lock

    static constexpr const char* kFileName = "lock";

private:
    int fd_ = -1;
};

}  // namespace gg::nn
