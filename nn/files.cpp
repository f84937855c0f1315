// files.cpp — the checked reader and the atomic writers (files.h).
#include "nn/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace gg::nn {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail_read(const std::string& path, const std::string& why) {
    throw std::runtime_error("cannot read " + path + ": " + why);
}

[[noreturn]] void fail_write(const std::string& path, const std::string& why) {
    throw std::runtime_error("cannot write " + path + ": " + why);
}

std::string errno_text() { return std::strerror(errno); }

// What a file that is not a regular one is, for the message that refuses it.
std::string file_kind(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO (a named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISSOCK(mode)) return "a socket";
    return "something else";
}

// A file descriptor closed when it goes.
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

// write(2) may write less than asked (signals, full disks): loop.
void write_all(int fd, std::string_view bytes, const std::string& path, const std::string& tmp) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail_write(path, "writing " + tmp + " failed: " + errno_text());
        bytes.remove_prefix(size_t(n));
    }
}

// fsync of a folder: what makes a rename inside it last through a power cut. A file system
// that cannot sync folders (EINVAL) has nothing more to offer.
void sync_folder(const fs::path& folder, const std::string& path) {
    Fd dir{::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    if (dir.fd < 0) fail_write(path, "cannot open its folder " + folder.string() + ": " + errno_text());
    if (::fsync(dir.fd) != 0 && errno != EINVAL) fail_write(path, "fsync of " + folder.string() + " failed: " + errno_text());
}

fs::path folder_of(const fs::path& path) { return path.has_parent_path() ? path.parent_path() : fs::path("."); }

// A writer killed between creating its temp file (or folder) and the rename leaves
// "<name>.tmp.<pid>[.<n>]" behind, and nothing else would ever remove it. Removes those whose
// writer is gone (no process has that pid); a live writer's are its work in progress.
void remove_stale_temps(const fs::path& target) {
    const std::string prefix = target.filename().string() + ".tmp.";
    std::error_code ec;
    for (fs::directory_iterator it(folder_of(target), ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (!name.starts_with(prefix)) continue;
        const char *first = name.data() + prefix.size(), *last = name.data() + name.size();
        pid_t pid = 0;
        const auto [stop, err] = std::from_chars(first, last, pid);
        if (err != std::errc() || (stop != last && *stop != '.') || pid <= 0) continue;
        if (::kill(pid, 0) != 0 && errno == ESRCH) {
            std::error_code ignored;  // another cleaner may have been first
            fs::remove_all(it->path(), ignored);
        }
    }
}

// "<target>.tmp.<pid>.<n>", with n counting this process's temps: unique among live
// writers, so none ever opens another's file.
std::string temp_name(const fs::path& target) {
    static std::atomic<uint64_t> counter{0};
    return target.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

// Creates a new temp file (or folder) beside `path` under a name that was free: O_EXCL (mkdir
// alike) never opens an existing name, and O_NOFOLLOW not even a dangling symlink. Returns the
// file's descriptor (-1 for a folder); its name into `tmp`.
int create_temp(const std::string& path, bool folder, std::string& tmp) {
    for (int attempt = 0;; ++attempt) {
        tmp = temp_name(path);
        const int fd = folder ? ::mkdir(tmp.c_str(), 0777)
                              : ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) return folder ? -1 : fd;
        if (errno != EEXIST || attempt == 100) fail_write(path, "cannot create " + tmp + ": " + errno_text());
    }
}

// What `target` holds that a new folder put in its place would remove, in a few words; empty
// when there is nothing (no such path, or an empty folder, which a rename replaces).
std::string occupant(const fs::path& target) {
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(target, ec);
    if (fs::is_symlink(status)) return "it is a symlink";
    if (fs::exists(status) && !fs::is_directory(status)) return "it is a file";
    std::string names;
    int count = 0;
    for (fs::directory_iterator it(target, ec), end; !ec && it != end; it.increment(ec), ++count)
        if (count < 3) names += (count ? ", " : "") + it->path().filename().string();
    if (count > 3) names += " and " + std::to_string(count - 3) + " more";
    return names;
}

}  // namespace

// ---------------------------------------------------------------- reading

RegularFile::RegularFile(const std::string& path) : path_(path) {
    // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; it changes nothing for a
    // regular file, the only kind read further.
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0) fail_read(path, errno_text());
    struct stat st {};
    const bool stated = ::fstat(fd_, &st) == 0;
    const std::string why = !stated ? errno_text() : "not a regular file but " + file_kind(st.st_mode);
    if (!stated || !S_ISREG(st.st_mode)) {
        ::close(fd_);
        fail_read(path, why);
    }
    size_ = uint64_t(st.st_size);
}

RegularFile::~RegularFile() { ::close(fd_); }

void RegularFile::read(uint64_t offset, void* dst, uint64_t n) const {
    char* out = static_cast<char*>(dst);
    for (uint64_t done = 0; done < n;) {
        const ssize_t got = ::pread(fd_, out + done, size_t(n - done), off_t(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) fail_read(path_, errno_text());
        if (got == 0)
            fail_read(path_, "it ends at byte " + std::to_string(offset + done) + ", before " + std::to_string(n) +
                                 " bytes at offset " + std::to_string(offset) + " (it shrank while it was read)");
        done += uint64_t(got);
    }
}

std::string read_file(const std::string& path, uint64_t limit) {
    const RegularFile file(path);
    if (file.size() > limit)
        fail_read(path, "it holds " + std::to_string(file.size()) + " bytes, more than the " + std::to_string(limit) +
                            " this file may have");
    std::string bytes(file.size(), '\0');
    file.read(0, bytes.data(), bytes.size());
    return bytes;
}

// ---------------------------------------------------------------- writing

void write_file_atomically(const std::string& path, std::string_view bytes) {
    write_file_atomically(path, std::vector<std::string_view>{bytes});
}

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces) {
    remove_stale_temps(path);  // first: on a full disk their space may be what this write needs
    std::string tmp;
    Fd file{create_temp(path, false, tmp)};
    try {
        for (const std::string_view piece : pieces) write_all(file.fd, piece, path, tmp);
        if (::fsync(file.fd) != 0) fail_write(path, "fsync of " + tmp + " failed: " + errno_text());
        const int closed = ::close(file.fd);
        file.fd = -1;
        if (closed != 0) fail_write(path, "closing " + tmp + " failed: " + errno_text());
        if (::rename(tmp.c_str(), path.c_str()) != 0)
            fail_write(path, "renaming " + tmp + " to it failed: " + errno_text());
    } catch (...) {
        ::unlink(tmp.c_str());
        throw;
    }
    sync_folder(folder_of(path), path);
}

void write_folder_atomically(const std::string& dir, bool replace,
                             const std::function<void(const std::string& folder)>& fill) {
    fs::path target = fs::path(dir).lexically_normal();
    if (!target.has_filename()) target = target.parent_path();  // "out/" is "out"
    std::error_code ec;
    fs::create_directories(folder_of(target), ec);
    if (ec) fail_write(dir, "cannot create its folder: " + ec.message());
    remove_stale_temps(target);
    const std::string holds = occupant(target);
    const bool occupied = !holds.empty();
    if (occupied && !replace) fail_write(dir, "it is not an empty folder (" + holds + "), and replacing it was not asked for");

    std::string tmp;
    create_temp(target, true, tmp);
    const auto give_up = [&](const std::string& why) {
        fs::remove_all(tmp, ec);
        fail_write(dir, why);
    };
    try {
        fill(tmp);
        sync_folder(tmp, dir);
    } catch (...) {
        fs::remove_all(tmp, ec);
        throw;
    }
    if (!occupied) {
        if (::rename(tmp.c_str(), target.c_str()) != 0) give_up("renaming " + tmp + " to it failed: " + errno_text());
    } else {
        // One step: `target` holds the old contents, then the new, never neither; the temp
        // name holds the old ones afterwards, for removal. A file system without the
        // exchange (EINVAL) gets two renames: for a moment `target` is missing.
        std::string old = tmp;
        if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
            if (errno != EINVAL) give_up("exchanging " + tmp + " with it failed: " + errno_text());
            old = temp_name(target);
            if (::rename(target.c_str(), old.c_str()) != 0) give_up("moving it aside failed: " + errno_text());
            if (::rename(tmp.c_str(), target.c_str()) != 0) {
                const std::string why = errno_text();
                ::rename(old.c_str(), target.c_str());
                give_up("renaming " + tmp + " to it failed: " + why);
            }
        }
        fs::remove_all(old, ec);
        if (ec) fail_write(dir, "written, but what it replaced is left in " + old + ": " + ec.message());
    }
    sync_folder(folder_of(target), dir);
}

}  // namespace gg::nn
