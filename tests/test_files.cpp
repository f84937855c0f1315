// test_files.cpp — the one file reader and the atomic writers (nn/files.h): what is not a
// regular file, a file over its limit, planted temp names, folders replaced or refused.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "nn/files.h"
#include "tests/app_check.h"

namespace {

using namespace gg::nn;
namespace fs = std::filesystem;
using gg::testing::TempDir;

void put(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::string read_error(const std::string& path, uint64_t limit = 1 << 20) {
    try {
        read_file(path, limit);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "(read)";
}

size_t entries(const fs::path& dir) { return size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator())); }

}  // namespace

TEST_CASE("files: read_file refuses what is not a regular file, without waiting, and says what it is") {
    const TempDir tmp;
    const fs::path fifo = tmp.path / "config.json", zero = tmp.path / "zero.json";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);  // no writer: a plain open would wait for ever
    fs::create_symlink("/dev/zero", zero);     // endless: a plain read would fill the memory
    const std::pair<std::string, std::string> cases[] = {
        {fifo.string(), "not a regular file but a FIFO (a named pipe)"},
        {"/dev/zero", "not a regular file but a character device"},
        {zero.string(), "not a regular file but a character device"},
        {tmp.path.string(), "not a regular file but a folder"},
        {(tmp.path / "missing").string(), "No such file or directory"},
    };
    for (const auto& c : cases) {  // not a structured binding: clang 14's CAPTURE cannot name one
        const std::string& path = c.first;
        CAPTURE(path);
        CHECK(read_error(path) == "cannot read " + path + ": " + c.second);
    }
}

TEST_CASE("files: read_file refuses a file over its limit before reading it, naming the size and the limit") {
    const TempDir tmp;
    const fs::path file = tmp.path / "a.json";
    put(file, std::string(1000, 'x'));
    CHECK(read_file(file.string(), 1000) == std::string(1000, 'x'));
    CHECK(read_error(file.string(), 999) ==
          "cannot read " + file.string() + ": it holds 1000 bytes, more than the 999 this file may have");
    // A sparse file of 1 TB: refused at once, nothing read.
    const fs::path huge = tmp.path / "huge.json";
    put(huge, "");
    fs::resize_file(huge, uint64_t(1) << 40);
    CHECK(read_error(huge.string()).find("it holds 1099511627776 bytes, more than the 1048576") != std::string::npos);
    put(file, "");
    CHECK(read_file(file.string(), 0).empty());
}

TEST_CASE("files: RegularFile reads at an offset and names a file that ends too soon") {
    const TempDir tmp;
    const fs::path file = tmp.path / "w.bin";
    put(file, "0123456789");
    const RegularFile f(file.string());
    CHECK(f.size() == 10);
    char part[4] = {};
    f.read(3, part, 4);
    CHECK(std::string(part, 4) == "3456");
    CHECK_THROWS_WITH_AS(f.read(8, part, 4), doctest::Contains("it ends at byte 10, before 4 bytes at offset 8"),
                         std::runtime_error);
}

TEST_CASE("files: write_file_atomically replaces the file, leaves no temp file and names the path when it cannot") {
    const TempDir tmp;
    const fs::path file = tmp.path / "a.txt";
    write_file_atomically(file.string(), "first");
    write_file_atomically(file.string(), std::vector<std::string_view>{"sec", "", "ond"});
    CHECK(gg::testing::read_file(file) == "second");
    CHECK(entries(tmp.path) == 1);
    const std::string missing = (tmp.path / "no" / "such" / "dir.txt").string();
    CHECK_THROWS_WITH_AS(write_file_atomically(missing, "x"), doctest::Contains(("cannot write " + missing + ": cannot create").c_str()),
                         std::runtime_error);
    CHECK(entries(tmp.path) == 1);
}

TEST_CASE("files: a planted file or symlink at a temp name is never written through") {
    // Every name this process could pick next is taken: by symlinks to a file outside the
    // folder (what a fixed name like config.json.tmp let an attacker redirect) and, for the
    // earlier writers' names, by the bare "<path>.tmp" and "<path>.tmp.<pid>".
    const TempDir tmp;
    const fs::path outside = tmp.path / "outside.txt", dir = tmp.path / "model";
    fs::create_directories(dir);
    put(outside, "keep me");
    const std::string target = (dir / "config.json").string(), pid = std::to_string(getpid());
    fs::create_symlink(outside, target + ".tmp");
    fs::create_symlink(outside, target + ".tmp." + pid);
    for (int n = 0; n < 64; ++n) fs::create_symlink(outside, target + ".tmp." + pid + "." + std::to_string(n));
    for (int i = 0; i < 3; ++i) write_file_atomically(target, "{\"written\": " + std::to_string(i) + "}");
    CHECK(gg::testing::read_file(outside) == "keep me");
    CHECK(fs::is_regular_file(fs::symlink_status(target)));
    CHECK(gg::testing::read_file(target) == "{\"written\": 2}");
}

TEST_CASE("files: write_folder_atomically makes a new folder, refuses one in use, and replaces it only when asked") {
    const TempDir tmp;
    const fs::path dir = tmp.path / "out" / "model";
    const auto fill = [](const std::string& name, const std::string& text) {
        return [=](const std::string& folder) { write_file_atomically((fs::path(folder) / name).string(), text); };
    };
    write_folder_atomically(dir.string(), false, fill("config.json", "1"));  // its parent is created too
    CHECK(gg::testing::read_file(dir / "config.json") == "1");
    CHECK(entries(dir.parent_path()) == 1);

    // In use: refused before anything is written, naming what it holds.
    bool filled = false;
    CHECK_THROWS_WITH_AS(write_folder_atomically(dir.string(), false, [&](const std::string&) { filled = true; }),
                         ("cannot write " + dir.string() + ": it is not an empty folder (config.json), and replacing it "
                          "was not asked for").c_str(),
                         std::runtime_error);
    CHECK_FALSE(filled);

    // Replaced: what it held is gone (a stale index, a stale tokenizer), the new files are there.
    put(dir / "model.safetensors.index.json", "{}");
    write_folder_atomically(dir.string(), true, fill("model.safetensors", "weights"));
    CHECK(entries(dir) == 1);
    CHECK(gg::testing::read_file(dir / "model.safetensors") == "weights");
    CHECK(entries(dir.parent_path()) == 1);  // no temp folder left, nor the old contents

    // A fill that fails leaves the folder as it was, and no temp folder.
    CHECK_THROWS_WITH_AS(write_folder_atomically(dir.string(), true, [](const std::string&) { throw std::runtime_error("disk full"); }),
                         "disk full", std::runtime_error);
    CHECK(gg::testing::read_file(dir / "model.safetensors") == "weights");
    CHECK(entries(dir.parent_path()) == 1);

    // An empty folder is taken as it is; a file, or a symlink to a folder, only when asked,
    // and then the link goes, not what it points to.
    const fs::path empty = tmp.path / "empty", file = tmp.path / "file", link = tmp.path / "link";
    fs::create_directories(empty);
    write_folder_atomically(empty.string(), false, fill("a", "a"));
    CHECK(gg::testing::read_file(empty / "a") == "a");
    put(file, "x");
    CHECK_THROWS_WITH_AS(write_folder_atomically(file.string(), false, fill("a", "a")), doctest::Contains("(it is a file)"),
                         std::runtime_error);
    write_folder_atomically(file.string(), true, fill("a", "a"));
    CHECK(fs::is_directory(file));
    fs::create_directory_symlink(empty, link);
    CHECK_THROWS_WITH_AS(write_folder_atomically(link.string(), false, fill("b", "b")), doctest::Contains("(it is a symlink)"),
                         std::runtime_error);
    write_folder_atomically(link.string(), true, fill("b", "b"));
    CHECK(fs::is_directory(fs::symlink_status(link)));
    CHECK(gg::testing::read_file(empty / "a") == "a");
    CHECK_FALSE(fs::exists(empty / "b"));
}
