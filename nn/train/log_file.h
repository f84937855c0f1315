// log_file.h — a run's log.jsonl as train writes it: one JSON line per step, appended.
//
// Every append is checked. A full disk (ENOSPC), a file size limit (EFBIG) or an I/O error
// throws, naming the file and the OS error, and the part of the line that did get out is cut
// off again: the log still ends on a whole line, and the trainer stops (trainer.h) instead
// of training on unlogged. A process killed in the middle of an append can still leave a
// torn last line, without its newline: cut_log here and read_training_log
// (nn/analysis/training_log.h) leave that one out with a warning and keep every whole line.
#pragma once
#include <cstdint>
#include <string>

namespace gg::nn {

class LogFile {
public:
    // Opens `path` to append to, emptied first when `fresh`; throws naming the path and the OS error.
    LogFile(const std::string& path, bool fresh);
    LogFile(const LogFile&) = delete;
    LogFile& operator=(const LogFile&) = delete;
    ~LogFile();
    // Appends `line` and a newline, or throws std::runtime_error "cannot append to PATH: <OS
    // error>" with the file as it was before.
    void append(const std::string& line);
    // fsync(2): what was appended is on the disk, not only in the page cache. The trainer calls
    // it before each checkpoint, so a checkpoint never holds steps the log could still lose.
    void sync();

private:
    std::string path_;
    int fd_ = -1;
};

struct LogCut {
    int64_t last_step = 0;  // the step of the last line kept; 0: none
    std::string warning;    // "PATH:LINE: ..." when a torn last line was left out; empty: none
};

// Cuts the log at `path` back to `step`, for a run resumed from that step's checkpoint: keeps
// every line up to the first one of a later step and leaves out a torn last line (no newline,
// not a log line). In place, by truncate(2): it needs no free space (a copy of a 3 MB log
// does), and a kill leaves the file before or after the cut, never half of it. A line before
// the cut that is not a log line (a JSON object with an integer step), other than a torn last
// one, throws naming the path and the line: the run goes on only with every line it logged.
// No file: nothing to cut.
LogCut cut_log(const std::string& path, int64_t step);

}  // namespace gg::nn
