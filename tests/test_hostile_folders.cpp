// test_hostile_folders.cpp — Hugging Face folders and export targets built to hurt, run through
// the command line as a user would meet them: each case under `timeout 30` and a 4 GB address
// space, and each must end in the right answer or in one line on stderr, with no hang, no crash
// and no large allocation (the peak resident memory of the run is checked too).
//
// The cases are the hostile-folder findings of the Hugging Face path: a config.json or index
// that is a FIFO or a symlink to /dev/zero, JSON of many sibling values (parsed in quadratic
// time), a config far larger than its weights, a tensor in two shards, an index that points
// outside its folder, and export targets holding an older export or a planted temp symlink.
#include <doctest/doctest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gatedgrad.h"
#include "tests/app_check.h"

namespace {

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;
using gg::testing::app_path;
using gg::testing::count;
using gg::testing::read_file;
using gg::testing::TempDir;

const std::string kFixtures = "tests/reference/hf/";

struct Contained {
    int code = -1;       // the app's exit status; 137: killed at the time limit
    std::string out, err;
    long peak_rss_mb = 0;  // the run's peak resident memory
};

// The app with `args` under `timeout 30` and `ulimit -v` 4 GB.
Contained run_contained(const TempDir& tmp, const std::string& args) {
    const fs::path out = tmp.path / "stdout.txt", err = tmp.path / "stderr.txt";
    const std::string command = "ulimit -v 4000000 && OMP_NUM_THREADS=1 exec timeout -s KILL 30 " + app_path().string() +
                                " " + args + " >" + out.string() + " 2>" + err.string();
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    pid_t pid = -1;
    REQUIRE(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) == 0);
    int status = 0;
    rusage usage{};  // the shell's, with its waited-for descendants': timeout and the app
    REQUIRE(wait4(pid, &status, 0, &usage) == pid);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err), usage.ru_maxrss / 1024};
}

// A run that must fail at once with one line on stderr naming `mentions`.
void check_refused(const Contained& run, const std::string& mentions) {
    INFO("stderr: " << run.err << " (exit " << run.code << ", peak " << run.peak_rss_mb << " MB)");
    CHECK(run.code == 1);
    CHECK(run.err.rfind("gatedgrad: ", 0) == 0);
    CHECK(count(run.err, "\n") == 1);
    CHECK(run.err.find(mentions) != std::string::npos);
    CHECK(run.peak_rss_mb < 500);
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// import-hf on `dir`: hf::load_folder, then a checkpoint written.
Contained import_hf(const TempDir& tmp, const fs::path& dir) {
    return run_contained(tmp, "import-hf " + dir.string() + " --out " + (tmp.path / "out.safetensors").string());
}

// A copy of a fixture folder, `edit`ed, under `name` in tmp.
fs::path folder(const TempDir& tmp, const std::string& fixture, const std::string& name,
                const std::function<void(const fs::path&)>& edit = {}) {
    const fs::path dir = tmp.path / name;
    fs::copy(kFixtures + fixture, dir, fs::copy_options::recursive);
    fs::remove(dir / "reference.safetensors");
    if (edit) edit(dir);
    return dir;
}

std::vector<std::string> listing(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

// `n` sibling objects, as a JSON object's members (no braces).
std::string siblings(const std::string& prefix, int n, const std::string& value) {
    std::string text;
    for (int i = 0; i < n; ++i) text.append(i ? "," : "").append("\"" + prefix + std::to_string(i) + "\":" + value);
    return text;
}

}  // namespace

TEST_CASE("hostile folders: files that are no files, and JSON built to be slow, end in one line at once") {
    const TempDir tmp;
    SUBCASE("a config.json that is a FIFO") {
        const fs::path dir = folder(tmp, "headwise", "fifo", [](const fs::path& d) {
            fs::remove(d / "config.json");
            REQUIRE(mkfifo((d / "config.json").c_str(), 0600) == 0);
        });
        check_refused(import_hf(tmp, dir), "config.json: not a regular file but a FIFO");
    }
    SUBCASE("a config.json that is a symlink to /dev/zero") {
        const fs::path dir = folder(tmp, "headwise", "zero", [](const fs::path& d) {
            fs::remove(d / "config.json");
            fs::create_symlink("/dev/zero", d / "config.json");
        });
        check_refused(import_hf(tmp, dir), "config.json: not a regular file but a character device");
    }
    SUBCASE("an index or a tokenizer.json (every command opens one: nn/io/model.h) that is a FIFO, or a link to /dev/zero") {
        for (const std::string file : {"model.safetensors.index.json", "tokenizer.json"})
            for (const bool fifo : {true, false}) {
                CAPTURE(file);
                const fs::path dir = folder(tmp, "sharded_mqa", file + (fifo ? "_fifo" : "_zero"), [&](const fs::path& d) {
                    const fs::path path = d / file;
                    fs::remove(path);
                    if (fifo) REQUIRE(mkfifo(path.c_str(), 0600) == 0);
                    else fs::create_symlink("/dev/zero", path);
                });
                check_refused(import_hf(tmp, dir),
                              file + ": not a regular file but a " + (fifo ? "FIFO" : "character device"));
            }
    }
    SUBCASE("a config.json of 50k sibling objects loads; one over 1 MiB is refused unread") {
        const fs::path dir = folder(tmp, "headwise", "wide_config", [](const fs::path& d) {
            std::string config = read_file(d / "config.json");
            config.insert(config.rfind('}'), "," + siblings("unused_", 50'000, "{}"));
            write(d / "config.json", config);
        });
        const Contained ok = import_hf(tmp, dir);
        INFO(ok.err);
        CHECK(ok.code == 0);
        CHECK(fs::file_size(dir / "config.json") < (1 << 20));
        std::string config = read_file(dir / "config.json");
        write(dir / "config.json", config.insert(config.rfind('}'), "," + siblings("more_", 40'000, "{}")));
        check_refused(import_hf(tmp, dir), "config.json: it holds " + std::to_string(fs::file_size(dir / "config.json")) +
                                          " bytes, more than the 1048576 this file may have");
    }
    SUBCASE("an index of 250k entries, and a header of 40k tensors, are parsed at once") {
        const fs::path index_dir = folder(tmp, "sharded_mqa", "long_index", [](const fs::path& d) {
            std::string index = read_file(d / "model.safetensors.index.json");
            index.insert(index.find("\"weight_map\": {") + 15,
                         siblings("zz.unplaced.", 250'000, "\"model-00001-of-00003.safetensors\"") + ",");
            write(d / "model.safetensors.index.json", index);
        });
        check_refused(import_hf(tmp, index_dir), "model-00001-of-00003.safetensors holds no tensor 'zz.unplaced.0'");
        const fs::path header_dir = folder(tmp, "headwise", "long_header", [](const fs::path& d) {
            NamedTensors tensors = load_tensors((d / "model.safetensors").string());
            for (int i = 0; i < 40'000; ++i) tensors.emplace_back("extra." + std::to_string(i), zeros({0}));
            save_tensors((d / "model.safetensors").string(), tensors);
        });
        check_refused(import_hf(tmp, header_dir), "tensor 'extra.0' is not part of a Qwen3 model of this config");
    }
}

TEST_CASE("hostile folders: weights that cannot be what the config says are refused before anything is allocated") {
    const TempDir tmp;
    SUBCASE("a config of 2.5 GB of weights (vocabulary 151936, hidden size 2048) over 167 KB of them") {
        const fs::path dir = folder(tmp, "headwise", "big_config", [](const fs::path& d) {
            std::string config = read_file(d / "config.json");
            for (const auto& [from, to] : {std::pair<std::string, std::string>{"\"hidden_size\": 32", "\"hidden_size\": 2048"},
                                           {"\"vocab_size\": 300", "\"vocab_size\": 151936"}})
                config.replace(config.find(from), from.size(), to);
            write(d / "config.json", config);
        });
        check_refused(import_hf(tmp, dir), "tensor 'model.embed_tokens.weight' has shape (300,32) but config.json needs (151936,2048)");
    }
    SUBCASE("a tensor in two shards, which the loader used to read from the shard the index does not name") {
        const fs::path dir = folder(tmp, "sharded_mqa", "twice", [](const fs::path& d) {
            const std::string first = (d / "model-00001-of-00003.safetensors").string();
            NamedTensors shard = load_tensors(first);
            shard.emplace_back("model.norm.weight", full({32}, 3.0));
            save_tensors(first, shard);
        });
        check_refused(import_hf(tmp, dir), "tensor 'model.norm.weight' is in two files, model-00001-of-00003.safetensors and "
                                      "model-00003-of-00003.safetensors");
    }
    SUBCASE("an index that names a file outside the folder") {
        const fs::path dir = folder(tmp, "sharded_mqa", "outside", [&](const fs::path& d) {
            fs::copy_file(d / "model-00002-of-00003.safetensors", tmp.path / "elsewhere.safetensors");
            std::string index = read_file(d / "model.safetensors.index.json");
            for (size_t at; (at = index.find("model-00002-of-00003")) != std::string::npos;)
                index.replace(at, 20, "../elsewhere");
            write(d / "model.safetensors.index.json", index);
        });
        check_refused(import_hf(tmp, dir), "is not the name of a file in the folder");
    }
}

TEST_CASE("hostile folders: export --hf writes a new folder, and only what it says it writes") {
    const TempDir tmp;
    const fs::path corpus = tmp.path / "corpus.txt", run = tmp.path / "run", out = tmp.path / "out";
    {
        std::ofstream text(corpus);
        for (int i = 0; i < 200; ++i) text << "an export replaces what was there " << i << "\n";
    }
    const Contained train = run_contained(tmp, "train --data " + corpus.string() + " --layers 1 --d-model 16 --heads 2 "
                                               "--batch 2 --seq-len 16 --steps 2 --eval-every 2 --quiet --out " + run.string());
    INFO(train.err);
    REQUIRE(train.code == 0);
    const std::string byte_model = (run / "model.safetensors").string();
    const auto export_hf = [&](const std::string& ckpt, const std::string& flags) {
        return run_contained(tmp, "export --ckpt " + ckpt + " --hf " + out.string() + flags);
    };

    // A folder holding an older sharded checkpoint, and a planted config.json.tmp pointing out.
    fs::copy(kFixtures + "sharded_mqa", out, fs::copy_options::recursive);
    write(tmp.path / "victim.txt", "keep me");
    fs::create_symlink(tmp.path / "victim.txt", out / "config.json.tmp");
    check_refused(export_hf(byte_model, ""), "it is not an empty folder (");
    CHECK(fs::exists(out / "model.safetensors.index.json"));  // refused: untouched
    const Contained forced = export_hf(byte_model, " --force");
    INFO(forced.err);
    REQUIRE(forced.code == 0);
    CHECK(forced.out == "wrote " + out.string() + ": config.json, model.safetensors (bfloat16), tokenizer.json\n");
    CHECK(listing(out) == std::vector<std::string>{"config.json", "model.safetensors", "tokenizer.json"});
    CHECK(read_file(tmp.path / "victim.txt") == "keep me");
    CHECK(listing(tmp.path) == std::vector<std::string>{"corpus.txt", "out", "run", "stderr.txt", "stdout.txt", "victim.txt"});

    // A model with a vocabulary of its own (no tokenizer we could write) over that byte export:
    // the old tokenizer.json must not survive, nor be claimed.
    const std::string imported = (tmp.path / "imported.safetensors").string();
    REQUIRE(run_contained(tmp, "import-hf " + kFixtures + "headwise --out " + imported).code == 0);
    const Contained other = export_hf(imported, " --force --dtype f32");
    INFO(other.err);
    REQUIRE(other.code == 0);
    CHECK(other.out == "wrote " + out.string() + ": config.json, model.safetensors (float32)\n");
    CHECK(listing(out) == std::vector<std::string>{"config.json", "model.safetensors"});
    // And what is there is the new model: import-hf reads it back as the headwise fixture.
    const Contained eval = run_contained(tmp, "logits --hf " + out.string() + " --ids " + kFixtures +
                                                  "headwise/reference.safetensors --out " + (tmp.path / "l.safetensors").string());
    INFO(eval.err);
    CHECK(eval.code == 0);
    fs::remove(imported);
}
