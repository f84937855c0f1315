// files.h — whole files in and out: the one reader and the one atomic writer of the library.
//
// Reading. A config, a model folder or a tokenizer may come from anyone, and a path may name
// something that is not a file at all: a FIFO (a read waits for a writer that never comes),
// /dev/zero (a read never ends), a folder. The reader opens without waiting (O_NONBLOCK: a
// FIFO opens at once), asks the opened descriptor what it is (fstat, not the path, so nothing
// can be swapped in between the check and the read; a symlink to /dev/zero is refused for
// what it points to), and refuses anything but a regular file, and a file larger than the
// caller's limit before reading any of it.
//
// Writing. A file is replaced atomically: whoever opens `path` finds the old file or the whole
// new one, after a crash or a power cut too. The bytes go to a temp file beside `path` under
// a name no one else uses ("<path>.tmp.<pid>.<n>", created with O_EXCL | O_NOFOLLOW, so a
// planted file or symlink of that name is never written through), are fsynced, renamed over
// `path`, and the folder is fsynced so that the rename itself is on disk. A folder is written
// the same way: filled beside its place, then renamed into it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gg::nn {

// A regular file opened for reading, as read_file checks it; for readers that take a file
// piece by piece (a safetensors header, then one tensor at a time).
class RegularFile {
public:
    // Throws std::runtime_error "cannot read PATH: ..." for a path that does not open or is
    // not a regular file (naming what it is: a FIFO, a character device, a folder...).
    explicit RegularFile(const std::string& path);
    ~RegularFile();
    RegularFile(const RegularFile&) = delete;
    RegularFile& operator=(const RegularFile&) = delete;
    const std::string& path() const { return path_; }
    uint64_t size() const { return size_; }  // when it was opened
    // Exactly `n` bytes at `offset` into dst; throws naming both when the file holds fewer.
    void read(uint64_t offset, void* dst, uint64_t n) const;

private:
    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

// The whole of a regular file of at most `limit` bytes. Throws std::runtime_error with one
// line "cannot read PATH: ..." naming what is wrong: not a regular file (and what it is), its
// size and the limit, an I/O error, or a file that shrank while it was read.
std::string read_file(const std::string& path, uint64_t limit);

// Replaces `path` atomically by `bytes`, or by the pieces one after the other (a large file
// written as it is made, never gathered in memory). Temp files of `path` whose writer is gone
// (killed: no process has their pid) are removed first. Throws std::runtime_error "cannot
// write PATH: ..." on any failure, after removing its temp file; `path` is then untouched.
void write_file_atomically(const std::string& path, std::string_view bytes);
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces);

// Writes the folder `dir` atomically: `fill` gets a new, empty folder beside `dir` and fills
// it (with write_file_atomically or any writer); it is then fsynced and renamed into place.
// `dir` may be missing or an empty folder. Anything else is refused before `fill` runs,
// unless `replace`: then the new folder takes its place in one step (renameat2's exchange)
// and what was there is removed, so nothing of it survives beside the new files. On any
// failure the new folder is removed and `dir` is as it was.
void write_folder_atomically(const std::string& dir, bool replace,
                             const std::function<void(const std::string& folder)>& fill);

}  // namespace gg::nn
