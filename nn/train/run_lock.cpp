#include "nn/train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace gg::nn {

RunLock::RunLock(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string path = (std::filesystem::path(dir) / kFileName).string();
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
        throw std::runtime_error("cannot write into " + dir + ": " + std::strerror(errno) +
                                 (ec ? " (" + ec.message() + ")" : ""));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        const int error = errno;
        // The holder writes its pid just after it locks: a moment's wait finds it.
        std::string pid;
        for (int attempt = 0; attempt < 50 && pid.empty() && error == EWOULDBLOCK; ++attempt) {
            char holder[32] = {};
            const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
            pid.assign(holder, n > 0 ? size_t(n) : 0);
            while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
            if (pid.empty()) ::usleep(10000);
        }
        ::close(fd_);
        fd_ = -1;
        if (error != EWOULDBLOCK) throw std::runtime_error("cannot lock " + path + ": " + std::strerror(error));
        throw std::runtime_error(dir + " is in use by another train process (pid " + (pid.empty() ? "unknown" : pid) +
                                 "): one run folder takes one writer; wait for it to finish or stop it first");
    }
    // Ours now: the pid replaces whatever an earlier holder left.
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
        const int error = errno;
        ::close(fd_);
        throw std::runtime_error("cannot write into " + path + ": " + std::strerror(error));
    }
}

RunLock::~RunLock() {
    if (fd_ >= 0) ::close(fd_);
}

}  // namespace gg::nn
