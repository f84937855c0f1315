#include "nn/train/log_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace gg::nn {

namespace {
[[noreturn]] void fail(const std::string& what, int error) { throw std::runtime_error(what + ": " + std::strerror(error)); }
}  // namespace

LogFile::LogFile(const std::string& path, bool fresh) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (fresh ? O_TRUNC : 0), 0644);
    if (fd_ < 0) fail("cannot open " + path_, errno);
}

LogFile::~LogFile() { ::close(fd_); }

void LogFile::append(const std::string& line) {
    const std::string bytes = line + "\n";
    const off_t before = ::lseek(fd_, 0, SEEK_END);
    // write(2) may take less than asked (a disk that fills up on the way), so loop.
    for (size_t done = 0; done < bytes.size();) {
        const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int error = errno;
            // Shrinking needs no free space. Should it fail, the torn line stays, and readers skip it.
            if (done > 0) (void)!::ftruncate(fd_, before);
            fail("cannot append to " + path_, error);
        }
        done += size_t(n);
    }
}

void LogFile::sync() {
    if (::fsync(fd_) != 0) fail("cannot write " + path_ + ": fsync", errno);
}

LogCut cut_log(const std::string& path, int64_t step) {
    LogCut cut;
    std::ifstream in(path, std::ios::binary);
    if (!in) return cut;
    uint64_t keep = 0;          // bytes of the lines kept
    bool unterminated = false;  // the last line kept has no newline (a whole object all the same)
    std::string line;
    for (int64_t number = 1; std::getline(in, line); ++number) {
        const bool whole = !in.eof();  // getline stopped at a newline
        const auto j = nlohmann::json::parse(line, nullptr, false);
        const bool log_line = j.is_object() && j.contains("step") && j["step"].is_number_integer();
        const std::string where = path + ":" + std::to_string(number) + ": ";
        if (!log_line && !whole) {
            cut.warning = where + "the last line is torn (" + std::to_string(line.size()) +
                          " bytes, no newline, not a log line): left out";
            break;
        }
        if (!log_line && !line.empty())
            throw std::runtime_error(where + "not a training log line (want a JSON object with an integer step); "
                                             "resume keeps every line logged before the checkpoint, so mend or remove it");
        if (log_line && j["step"].get<int64_t>() > step) break;
        if (log_line) cut.last_step = j["step"].get<int64_t>();
        keep += line.size() + (whole ? 1 : 0);
        unterminated = !whole;
    }
    in.close();
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) != keep && !ec) std::filesystem::resize_file(path, keep, ec);
    if (ec) throw std::runtime_error("cannot cut " + path + " back to step " + std::to_string(step) + ": " + ec.message());
    if (unterminated) LogFile(path, false).append("");
    return cut;
}

}  // namespace gg::nn
