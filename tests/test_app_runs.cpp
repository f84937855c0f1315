// test_app_runs.cpp — what `gatedgrad train` guarantees about a run folder, tried the way a
// user with hostile habits would: signals sent to a real train process, two processes on
// one folder, a checkpoint copied from another run, data changed under a run, a resume
// that changes the model; checks that come before the first step, memory limits included;
// sampling whose memory stays linear in the tokens; and data paths that are not text, each
// refused in one line.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/app_check.h"

using namespace gg::testing;
namespace fs = std::filesystem;

namespace {

// 40 short fortunes, ~3 KB: enough for tiny models with batches of 2 x 16.
fs::path write_corpus(const TempDir& tmp) {
    const fs::path corpus = tmp.path / "corpus.txt";
    std::ofstream out(corpus);
    for (int i = 0; i < 40; ++i) out << "Fortune number " << i << ": the quick brown fox jumps over the lazy dog.\n%\n";
    return corpus;
}

std::string tiny(const fs::path& corpus) {
    return " --data " + corpus.string() + " --layers 1 --d-model 16 --heads 2 --batch 2 --seq-len 16";
}

// The lines of a run's log.jsonl, parsed.
std::vector<nlohmann::json> log_lines(const fs::path& run) {
    std::vector<nlohmann::json> lines;
    std::istringstream in(read_file(run / "log.jsonl"));
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
}

// Started and running: it has logged a step.
bool training(const fs::path& run) {
    std::error_code ec;
    const auto size = fs::file_size(run / "log.jsonl", ec);
    return !ec && size > 0;
}

std::string run_id(const fs::path& run) {
    return nlohmann::json::parse(read_file(run / "config.json"))["run_id"].get<std::string>();
}

// The steps of a run's log.jsonl, in order.
std::vector<int64_t> logged_steps(const fs::path& run) {
    std::vector<int64_t> steps;
    for (const nlohmann::json& line : log_lines(run)) steps.push_back(line["step"].get<int64_t>());
    return steps;
}

std::vector<int64_t> steps_from(int64_t first, int64_t last) {
    std::vector<int64_t> steps;
    for (int64_t s = first; s <= last; ++s) steps.push_back(s);
    return steps;
}

// The app run as run_app runs it, under a file size limit (RLIMIT_FSIZE) of `bytes`: a write
// past it fails with EFBIG, as one on a full disk fails with ENOSPC (with SIGXFSZ ignored,
// which would otherwise kill the process). The same on any file system, and no mount needed.
Outcome run_app_limited(const TempDir& tmp, const std::string& args, rlim_t bytes) {
    const fs::path out = tmp.path / "stdout.txt", err = tmp.path / "stderr.txt";
    const std::string command = "OMP_NUM_THREADS=1 " + app_path().string() + " " + args + " >" + out.string() + " 2>" +
                                err.string();
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // async-signal-safe calls only, up to the exec
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        const rlimit limit{bytes, bytes};
        if (sigaction(SIGXFSZ, &ignore, nullptr) == 0 && setrlimit(RLIMIT_FSIZE, &limit) == 0)
            execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

}  // namespace

TEST_CASE("train: the first SIGINT or SIGTERM saves a checkpoint at a step boundary and exits 130 or 143") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp);
    for (const auto& [signal, code, signal_name] :
         {std::tuple{SIGINT, 130, "SIGINT"}, std::tuple{SIGTERM, 143, "SIGTERM"}}) {
        const std::string name = signal_name;  // CAPTURE's lambda cannot capture a structured binding (clang)
        CAPTURE(name);
        const fs::path run = tmp.path / name;
        // Checkpoints only at the end of a million steps: without the handler all is lost.
        Child child(tmp, "train" + tiny(corpus) + " --steps 1000000 --warmup 1 --out " + run.string(), name);
        REQUIRE(wait_until([&] { return training(run); }));
        REQUIRE(kill(child.pid, signal) == 0);
        const Outcome o = wait_app(child);
        INFO("stderr: " << o.err);
        CHECK(o.code == code);
        CHECK(o.err.find(std::string("gatedgrad: stopped by ") + name + " after step ") == 0);
        CHECK(count(o.err, "\n") == 1);
        REQUIRE(fs::exists(run / "model.safetensors"));
        const int64_t stopped_at = std::stoll(o.err.substr(o.err.find("after step ") + 11));
        CHECK(stopped_at >= 1);
        CHECK(log_lines(run).back()["step"] == stopped_at);  // every logged step is in the checkpoint

        // The folder resumes where the signal left it.
        const Outcome resumed = run_app(tmp, "train --resume --quiet --steps " + std::to_string(stopped_at + 2) +
                                                 " --out " + run.string());
        INFO("resumed: " << resumed.out << resumed.err);
        CHECK(resumed.code == 0);
        CHECK(log_lines(run).size() == size_t(stopped_at + 2));
    }
}

TEST_CASE("train: a second signal stops at once, without waiting for the step under way") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    // Steps of about half a second (d_model 128, 32 x 256 tokens) on 200 KB of words, so
    // that two signals sent back to back both arrive inside one step.
    const fs::path corpus = tmp.path / "words.txt", run = tmp.path / "run";
    {
        std::ofstream out(corpus);
        const char* words[] = {"gate ", "sink ", "head ", "token ", "attention ", "softmax "};
        for (int i = 0; i < 40000; ++i) out << words[(i * 7 + i / 5) % 6] << (i % 12 == 11 ? "\n" : "");
    }
    Child child(tmp, "train --data " + corpus.string() + " --layers 2 --d-model 128 --heads 4 --batch 32 --seq-len 256 "
                "--steps 1000 --warmup 1 --eval-every 0 --out " + run.string(), "twice");
    REQUIRE(wait_until([&] { return training(run); }));
    kill(child.pid, SIGINT);
    kill(child.pid, SIGTERM);
    const Outcome o = wait_app(child);
    INFO("stderr: " << o.err);
    CHECK((o.code == 130 || o.code == 143));  // 128 + whichever signal came second
    CHECK(o.err == "gatedgrad: stopped at once by a second signal; no checkpoint saved for the step under way\n");
    CHECK_FALSE(fs::exists(run / "model.safetensors"));
}

TEST_CASE("train: one process per run folder; a second one, --force included, is refused naming the holder") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "run";
    const std::string long_run = "train" + tiny(corpus) + " --steps 1000000 --warmup 1 --out ";
    Child first(tmp, long_run + run.string(), "first");
    REQUIRE(wait_until([&] { return training(run); }));
    const std::string holder = "in use by another train process (pid " + std::to_string(first.pid) + ")";
    check_error(run_app(tmp, "train" + tiny(corpus) + " --force --steps 2 --out " + run.string()), 1, holder);
    check_error(run_app(tmp, "train --resume --steps 2 --out " + run.string()), 1, holder);
    CHECK(log_lines(run).size() >= 1);  // the running run's files are untouched
    kill(first.pid, SIGTERM);
    CHECK(wait_app(first).code == 143);
    // The kernel released the lock with the process: the folder is free again.
    CHECK(run_app(tmp, "train --resume --quiet --steps " + std::to_string(log_lines(run).size() + 1) + " --out " +
                           run.string()).code == 0);

    // Two started at once on a fresh folder: one trains, the other is refused.
    const fs::path raced = tmp.path / "raced";
    Child a(tmp, long_run + raced.string(), "a"), b(tmp, long_run + raced.string(), "b");
    REQUIRE(wait_until([&] { return fs::file_size(a.err) > 0 || fs::file_size(b.err) > 0; }));
    const bool a_lost = fs::file_size(a.err) > 0;
    Child &loser = a_lost ? a : b, &winner = a_lost ? b : a;
    check_error(wait_app(loser), 1, "in use by another train process (pid " + std::to_string(winner.pid) + ")");
    REQUIRE(wait_until([&] { return training(raced); }));
    kill(winner.pid, SIGINT);
    CHECK(wait_app(winner).code == 130);
}

TEST_CASE("train --resume: the run's id, data and architecture must agree; other changes are printed") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), x = tmp.path / "x", y = tmp.path / "y";
    REQUIRE(run_app(tmp, "train" + tiny(corpus) + " --attn g1 --steps 2 --quiet --out " + x.string()).code == 0);
    REQUIRE(run_app(tmp, "train" + tiny(corpus) + " --attn g1 --steps 2 --quiet --out " + y.string()).code == 0);
    const std::string id = run_id(x);
    CHECK(id.size() == 16);
    CHECK(id != run_id(y));
    for (const nlohmann::json& line : log_lines(x)) CHECK(line["run"] == id);

    // A checkpoint copied in from another run.
    fs::copy_file(x / "model.safetensors", y / "model.safetensors", fs::copy_options::overwrite_existing);
    check_error(run_app(tmp, "train --resume --steps 4 --out " + y.string()), 1,
                "belongs to run " + id + ", not to run " + run_id(y));

    // The architecture stays; the first field that differs is named.
    check_error(run_app(tmp, "train --resume --attn baseline --steps 4 --out " + x.string()), 2,
                "a resumed run keeps its architecture: --attn is g1 in the run, baseline given");
    check_error(run_app(tmp, "train --resume --preset tiny --out " + x.string()), 2,
                "a resumed run keeps its architecture: --d-model is 16 in the run, 64 given");

    // A checkpoint alone in a new folder (no config.json) continues its own run.
    const fs::path z = tmp.path / "z";
    fs::create_directories(z);
    fs::copy_file(x / "model.safetensors", z / "model.safetensors");
    const Outcome moved = run_app(tmp, "train --resume --steps 3 --quiet --out " + z.string());
    INFO("moved: " << moved.out << moved.err);
    CHECK(moved.code == 0);
    CHECK(run_id(z) == id);

    // The data changed under the run: refused unless allowed.
    std::ofstream(corpus, std::ios::app) << "One more fortune.\n%\n";
    const Outcome changed = run_app(tmp, "train --resume --steps 4 --out " + x.string());
    check_error(changed, 1, "the training data changed since the run began: file 1 was " + corpus.string());
    CHECK(changed.err.find("--allow-data-change") != std::string::npos);
    CHECK(log_lines(x).size() == 2);  // nothing trained

    // Allowed, with a higher learning rate: every change is printed, and the schedule says
    // it climbs to the new minimum (lr 0.01 x 0.1) from where the finished run stands (0.0003).
    const Outcome allowed = run_app(tmp, "train --resume --allow-data-change --steps 4 --lr 0.01 --quiet --out " + x.string());
    INFO("allowed: " << allowed.out << allowed.err);
    CHECK(allowed.code == 0);
    CHECK(allowed.out.find("changed for the rest of the run: --steps 2 → 4, --lr 0.003 → 0.01") != std::string::npos);
    CHECK(allowed.out.find("up a half cosine to 1.00e-03") != std::string::npos);
    CHECK(allowed.out.find("down a cosine to 1.00e-03") == std::string::npos);
    CHECK(log_lines(x).size() == 4);
}

TEST_CASE("train: everything is checked before the first step, and a run that fails there leaves no folder") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "run";
    // The corpus's validation part (~300 bytes) cannot fill one batch of 64 x 64.
    const std::string too_long = "train --data " + corpus.string() + " --layers 1 --d-model 16 --heads 2 --batch 64 "
                                 "--seq-len 64 --out " + run.string();
    check_error(run_app(tmp, too_long), 1, "validation text (");
    CHECK_FALSE(fs::exists(run));
    check_error(run_app(tmp, "train" + tiny(corpus) + " --out /proc/gatedgrad_run"), 1, "cannot write into /proc/gatedgrad_run");
    // A folder the user made stays, and so does a run already in it.
    fs::create_directories(run);
    check_error(run_app(tmp, too_long), 1, "validation text (");
    CHECK(fs::exists(run));
    // A divergence with no checkpoint written says so, instead of promising one.
    const Outcome diverged = run_app(tmp, "train" + tiny(corpus) + " --lr 1e6 --warmup 0 --clip 0 --steps 50 --force --out " +
                                              run.string());
    check_error(diverged, 1, "no checkpoint was written before it, so there is none to resume from");
    check_error(run_app(tmp, "train" + tiny(corpus) + " --steps 2 --out " + run.string()), 2,
                "already holds a run (log.jsonl); it has no checkpoint to resume from: pass --force to start over");
}

TEST_CASE("train: the memory check obeys ulimit -v, not just the machine's memory") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp);
    // A training step of 256 x 1024 tokens needs about 1.3 GiB: within this machine's
    // memory, so without a limit the run passes the memory check and stops at the next
    // one (the short corpus); with 600 MB of address space above what the program maps
    // before it starts (its libraries: over 1 GB with CUDA's), it is refused for memory.
    // This test links the same libraries, so its own size stands for the app's at start.
    const std::string big = "train --data " + corpus.string() + " --layers 1 --d-model 16 --heads 2 --batch 256 "
                            "--seq-len 1024 --out " + (tmp.path / "big").string();
    check_error(run_app(tmp, big), 1, "validation text (");
    long long mapped_kb = 0;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmSize:", 0) == 0) mapped_kb = std::stoll(line.substr(7));
    REQUIRE(mapped_kb > 0);
    const Outcome limited = run_app_after(tmp, "ulimit -v " + std::to_string(mapped_kb + 600000) + " && ", big);
    check_error(limited, 2, "asks for too much memory");
    CHECK(limited.err.find("available (what ulimit -v leaves)") != std::string::npos);
}

TEST_CASE("sample: memory stays linear in the tokens, and a long prompt is cut to the model's window") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "lm", ckpt = run / "model.safetensors";
    // The tiny preset's shape (2 layers, d_model 64, 4 heads, RoPE), trained one step.
    REQUIRE(run_app(tmp, "train --data " + corpus.string() + " --layers 2 --d-model 64 --heads 4 --batch 2 --seq-len 16 "
                         "--steps 1 --quiet --out " + run.string()).code == 0);
    const auto peak_kib = [&](int tokens, const std::string& context) {
        rusage usage{};
        Child sample(tmp, "sample --ckpt " + ckpt.string() + " --tokens " + std::to_string(tokens) + context,
                     "sample" + std::to_string(tokens));
        const Outcome o = wait_app(sample, &usage);
        CHECK(o.code == 0);
        CHECK_FALSE(o.out.empty());
        return usage.ru_maxrss;
    };
    // Under AddressSanitizer freed memory waits in a quarantine of up to 256 MB, which 2000
    // tokens' allocations fill and 200 tokens' do not: the runs measured here go without it,
    // so that their peak is the program's own (elsewhere the option is ignored).
    struct NoQuarantine {
        const bool had = std::getenv("ASAN_OPTIONS") != nullptr;
        const std::string before = had ? std::getenv("ASAN_OPTIONS") : "";
        NoQuarantine() {
            setenv("ASAN_OPTIONS", ((before.empty() ? "" : before + ":") + "quarantine_size_mb=0").c_str(), 1);
        }
        ~NoQuarantine() { had ? setenv("ASAN_OPTIONS", before.c_str(), 1) : unsetenv("ASAN_OPTIONS"); }
    } no_quarantine;
    // Attending to every token (a cache that grows to 2000 positions, ~1 MB), and to the
    // model's 16 (the default: a cache of fixed size).
    for (const std::string context : {" --context 4096", ""}) {
        CAPTURE(context);
        const long short_run = peak_kib(200, context), long_run = peak_kib(2000, context);
        MESSAGE("sample" << context << " peak memory: 200 tokens " << short_run << " KiB, 2000 tokens " << long_run << " KiB");
        CHECK(long_run < 2 * short_run);  // concatenating the cache each token held ~1.5 GB at 2000
    }

    // A 100 KB prompt on a model that reads 16 tokens: a note, and only the last 15 bytes go in.
    const fs::path prompt = tmp.path / "prompt.txt";
    std::ofstream(prompt) << std::string(100000, 'x') << "The end: ";
    const auto start = std::chrono::steady_clock::now();
    const Outcome o = run_app(tmp, "sample --ckpt " + ckpt.string() + " --prompt-file " + prompt.string() + " --tokens 20");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO("stderr: " << o.err);
    CHECK(o.code == 0);
    CHECK(o.err.find("note: the prompt is 100009 bytes; the model attends to 16 tokens, so only its last 15 bytes") !=
          std::string::npos);
    CHECK(o.out.starts_with(std::string(100000, 'x') + "The end: "));
    CHECK(seconds < 30);  // a full forward over 100 KB took minutes
    check_error(run_app(tmp, "sample --ckpt " + ckpt.string() + " --prompt a --prompt-file " + prompt.string()), 2,
                "excludes");
}

TEST_CASE("train --data: what is not a readable text file is named for what it is, in one line") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path run = tmp.path / "run";
    const auto refused = [&](const fs::path& data, const std::string& why) {
        CAPTURE(data);
        check_error(run_app(tmp, "train --data " + data.string() + " --steps 1 --out " + run.string()), 1,
                    "corpus: '" + data.string() + "' " + why);
        CHECK_FALSE(fs::exists(run));
    };
    REQUIRE(mkfifo((tmp.path / "fifo").c_str(), 0600) == 0);
    refused(tmp.path / "fifo", "is not a regular file but a FIFO");
    refused("/dev/zero", "is not a regular file but a character device");
    fs::create_symlink(tmp.path / "loop_b", tmp.path / "loop_a");
    fs::create_symlink(tmp.path / "loop_a", tmp.path / "loop_b");
    refused(tmp.path / "loop_a", "is a loop of symbolic links");
    std::ofstream(tmp.path / "empty.txt").close();
    refused(tmp.path / "empty.txt", "is empty");
    std::ofstream(tmp.path / "model.bin", std::ios::binary) << std::string("weights\0\1\2", 10);
    refused(tmp.path / "model.bin", "is not text: it holds a NUL byte at offset 7");
    check_error(run_app(tmp, "train --data /proc/self/status --steps 1 --out " + run.string()), 1,
                "changed while it was read");
}

TEST_CASE("train --precision bf16: kept in config.json and on resume; export writes a bfloat16 copy") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "run";
    const Outcome first = run_app(tmp, "train" + tiny(corpus) + " --steps 4 --precision bf16 --quiet --out " + run.string());
    REQUIRE_MESSAGE(first.code == 0, first.err);
    const auto config_text = [&] {
        std::ifstream in(run / "config.json");
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    CHECK(config_text().find("\"precision\": \"bf16\"") != std::string::npos);
    const Outcome resumed = run_app(tmp, "train --steps 6 --resume --quiet --out " + run.string());
    REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
    CHECK(config_text().find("\"precision\": \"bf16\"") != std::string::npos);
    const fs::path shared = tmp.path / "shared.safetensors";
    const Outcome exported = run_app(tmp, "export --ckpt " + (run / "model.safetensors").string() + " --out " + shared.string());
    REQUIRE_MESSAGE(exported.code == 0, exported.err);
    CHECK(exported.out.find("bfloat16") != std::string::npos);
    std::ifstream in(shared, std::ios::binary);
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    CHECK(bytes.find("\"dtype\":\"BF16\"") != std::string::npos);
    CHECK(bytes.find("\"dtype\":\"F32\"") == std::string::npos);  // every weight, none left float32
    // The checkpoint itself keeps float32 master weights and AdamW state, more than 4× the bytes.
    CHECK(fs::file_size(run / "model.safetensors") > 4 * fs::file_size(shared));
    check_error(run_app(tmp, "train" + tiny(corpus) + " --precision fp16 --out " + run.string()), 2,
                "precision 'fp16' is not one of f32, bf16");
}

TEST_CASE("train --score-fn: kept in config.json and the checkpoint, held on resume; sink shows the slot's share") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp);
    for (const std::string score_fn : {"sink", "sigmoid"}) {
        CAPTURE(score_fn);
        const fs::path run = tmp.path / score_fn, ckpt = run / "model.safetensors";
        const Outcome first = run_app(tmp, "train" + tiny(corpus) + " --steps 2 --score-fn " + score_fn + " --out " + run.string());
        REQUIRE_MESSAGE(first.code == 0, first.err);
        CHECK(first.out.find("other     --score-fn " + score_fn) != std::string::npos);  // describe() names it
        const auto config = [&] { return nlohmann::json::parse(read_file(run / "config.json")); };
        CHECK(config()["model"]["score_fn"] == score_fn);
        const Outcome resumed = run_app(tmp, "train --resume --steps 3 --quiet --out " + run.string());
        REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
        CHECK(config()["model"]["score_fn"] == score_fn);
        CHECK(log_lines(run).size() == 3);
        check_error(run_app(tmp, "train --resume --score-fn softmax --steps 4 --out " + run.string()), 2,
                    "a resumed run keeps its architecture: --score-fn is " + score_fn + " in the run, softmax given");
        // The checkpoint alone (no config.json beside it) knows its score function.
        const fs::path alone = tmp.path / (score_fn + ".safetensors");
        fs::copy_file(ckpt, alone);
        const Outcome sink = run_app(tmp, "sink --ckpt " + alone.string() + " --batches 1");
        REQUIRE_MESSAGE(sink.code == 0, sink.err);
        const std::string header = sink.out.substr(sink.out.find("layer  first-token share"));
        const std::string columns = header.substr(0, header.find('\n'));
        CHECK((columns.find("slot") != std::string::npos) == (score_fn == "sink"));
        CHECK((columns.find("row-sum") != std::string::npos) == (score_fn == "sigmoid"));
    }
    check_error(run_app(tmp, "train" + tiny(corpus) + " --score-fn softmax2 --out " + (tmp.path / "bad").string()), 2,
                "--score-fn: score function 'softmax2' is not one of softmax, softmax1, sink, sigmoid, softpick");
    CHECK(!fs::exists(tmp.path / "bad"));
}

TEST_CASE("train --kv-rank: latent attention trains, prints its KV cache beside the heads', resumes; a bad rank refused") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp);
    const fs::path run = tmp.path / "mla";
    const Outcome first = run_app(tmp, "train" + tiny(corpus) + " --steps 2 --kv-rank 8 --out " + run.string());
    REQUIRE_MESSAGE(first.code == 0, first.err);
    // d_model 16, 2 heads of 8, 1 layer: the latent 8 and the rotary key 4, 12 floats, against 2 × 2 × 8.
    CHECK(first.out.find("latent    MLA, kv rank 8, rope dim 4: KV cache 48 bytes per token in float32, 128 with "
                         "these heads' own keys and values") != std::string::npos);
    const auto config = [&] { return nlohmann::json::parse(read_file(run / "config.json")); };
    CHECK(config()["model"]["kv_rank"] == 8);
    const Outcome resumed = run_app(tmp, "train --resume --steps 3 --quiet --out " + run.string());
    REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
    CHECK(log_lines(run).size() == 3);
    CHECK(std::isfinite(log_lines(run).back()["loss"].get<double>()));
    check_error(run_app(tmp, "train --resume --kv-rank 4 --steps 4 --out " + run.string()), 2,
                "a resumed run keeps its architecture: --kv-rank is 8 in the run, 4 given");
    check_error(run_app(tmp, "train" + tiny(corpus) + " --kv-rank -3 --out " + (tmp.path / "bad").string()), 2, "-3");
    check_error(run_app(tmp, "train" + tiny(corpus) + " --kv-rank 8 --qk-norm --out " + (tmp.path / "bad").string()), 2,
                "kv_rank 8 (latent attention) takes no QK-norm");
    CHECK(!fs::exists(tmp.path / "bad"));
}

TEST_CASE("train --hybrid 3:1: Gated DeltaNet layers before each full one; resumes, samples, and sink reports both kinds") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "hybrid", ckpt = run / "model.safetensors";
    const auto layers = [&](int n) {  // tiny(corpus) with n layers
        return " --data " + corpus.string() + " --layers " + std::to_string(n) + " --d-model 16 --heads 2 --batch 2 --seq-len 16";
    };
    const Outcome first = run_app(tmp, "train" + layers(4) + " --hybrid 3:1 --steps 2 --out " + run.string());
    REQUIRE_MESSAGE(first.code == 0, first.err);
    CHECK(first.out.find("model     4 layers (3 Gated DeltaNet, full attention at 3), d_model 16") != std::string::npos);
    const auto config = [&] { return nlohmann::json::parse(read_file(run / "config.json")); };
    const nlohmann::json types = {"linear_attention", "linear_attention", "linear_attention", "full_attention"};
    CHECK(config()["model"]["layer_types"] == types);
    const Outcome resumed = run_app(tmp, "train --resume --steps 3 --quiet --out " + run.string());
    REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
    CHECK(config()["model"]["layer_types"] == types);
    CHECK(log_lines(run).size() == 3);
    check_error(run_app(tmp, "train --resume --hybrid 1:1 --steps 4 --out " + run.string()), 2,
                "a resumed run keeps its architecture: layer_types is linear_attention linear_attention "
                "linear_attention full_attention in the run, linear_attention full_attention linear_attention "
                "full_attention given");
    const Outcome sample = run_app(tmp, "sample --ckpt " + ckpt.string() + " --tokens 12 --seed 3");
    REQUIRE_MESSAGE(sample.code == 0, sample.err);
    // sink measures the one full-attention layer (3) and reports the three linear ones' state and decay.
    const Outcome sink = run_app(tmp, "sink --ckpt " + ckpt.string() + " --batches 1");
    REQUIRE_MESSAGE(sink.code == 0, sink.err);
    const std::string table = sink.out.substr(sink.out.find("layer  first-token share"));
    CHECK(table.find("\n    3  ") != std::string::npos);
    CHECK(table.find("\n    0  ") == std::string::npos);
    CHECK(table.find("sink layers 0 of 1;") != std::string::npos);
    const std::string linear = table.substr(table.find("linear layer  state norm  decay"));
    for (const char* layer : {"\n           0  ", "\n           1  ", "\n           2  "})
        CHECK(linear.find(layer) != std::string::npos);
    for (const std::string bad : {"3:x", "0:1", "3"})
        check_error(run_app(tmp, "train" + layers(4) + " --hybrid " + bad + " --out " + (tmp.path / "bad").string()),
                    2, "--hybrid: hybrid '" + bad + "' is not L:F");
    check_error(run_app(tmp, "train" + layers(6) + " --hybrid 3:1 --out " + (tmp.path / "bad").string()), 2,
                "--hybrid: hybrid 3:1 repeats 4 layers, which do not divide n_layers 6");
    CHECK(!fs::exists(tmp.path / "bad"));
}

TEST_CASE("train: a log that cannot take a step stops the run in one line, after a checkpoint; --resume misses no step") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), first = tmp.path / "first", run = tmp.path / "run";
    const fs::path log = run / "log.jsonl", ckpt = run / "model.safetensors";
    REQUIRE(run_app(tmp, "train" + tiny(corpus) + " --steps 1 --quiet --out " + first.string()).code == 0);
    const auto checkpoint_bytes = fs::file_size(first / "model.safetensors");
    // Room for a checkpoint and some 100 log lines more: the log, of lines over 100 bytes, outgrows it first.
    const rlim_t limit = checkpoint_bytes + 16384;
    const std::string steps = std::to_string(limit / 100);
    const std::string train = "train" + tiny(corpus) + " --ckpt-minutes 0 --quiet --out " + run.string();

    const Outcome stopped = run_app_limited(tmp, train + " --steps " + steps, limit);
    check_error(stopped, 1, "cannot append to " + log.string() + ": File too large; saved the checkpoint of step ");
    REQUIRE(stopped.err.find("training stopped after step ") != std::string::npos);
    const int64_t at = std::stoll(stopped.err.substr(stopped.err.find("after step ") + 11));
    CHECK(read_file(log).back() == '\n');  // the part of the line that got out was cut off again
    CHECK(logged_steps(run) == steps_from(1, at - 1));
    REQUIRE(fs::exists(ckpt));
    // Without the limit the run goes on from that checkpoint, first appending the step the log could not take.
    const Outcome resumed = run_app(tmp, "train --resume --quiet --out " + run.string());
    INFO("resumed: " << resumed.out << resumed.err);
    CHECK(resumed.code == 0);
    CHECK(resumed.err.empty());
    CHECK(logged_steps(run) == steps_from(1, std::stoll(steps)));

    // A limit below a checkpoint's size: the save after the failed line fails too, and the
    // checkpoint of step 50 stays whole, with no temp file left beside it.
    REQUIRE(run_app(tmp, train + " --force --steps 50").code == 0);
    const std::string saved = read_file(ckpt);
    const rlim_t small = fs::file_size(log) + 4096;
    REQUIRE(small < checkpoint_bytes);
    const Outcome failed = run_app_limited(tmp, "train --resume --steps " + steps + " --quiet --out " + run.string(), small);
    check_error(failed, 1, "cannot append to " + log.string() + ": File too large; saving the checkpoint failed too (");
    CHECK(failed.err.find("File too large); the checkpoint of step 50 is kept") != std::string::npos);
    CHECK(read_file(ckpt) == saved);
    for (const auto& entry : fs::directory_iterator(run))
        CHECK(entry.path().filename().string().find(".tmp.") == std::string::npos);
    const Outcome again = run_app(tmp, "train --resume --quiet --out " + run.string());
    INFO("again: " << again.out << again.err);
    CHECK(again.code == 0);
    CHECK(logged_steps(run) == steps_from(1, std::stoll(steps)));
}

TEST_CASE("train --resume: the log is cut back in place, so a disk too full for a copy of it loses no line") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "run", log = run / "log.jsonl";
    REQUIRE(run_app(tmp, "train" + tiny(corpus) + " --steps 60 --quiet --out " + run.string()).code == 0);
    const std::string kept = read_file(log);
    // As if the run had gone on to log steps 61 and 62 and then been killed before its next checkpoint.
    std::ofstream(log, std::ios::app) << R"({"step":61,"loss":1})" << "\n" << R"({"step":62,"loss":1})" << "\n";
    // Less room than the lines to keep: a copy of them cannot be written, nor can one more line.
    const Outcome stopped = run_app_limited(tmp, "train --resume --steps 80 --quiet --out " + run.string(), kept.size() - 1000);
    check_error(stopped, 1, "training stopped after step 61: cannot append to " + log.string() + ": File too large");
    CHECK(read_file(log) == kept);
    const Outcome resumed = run_app(tmp, "train --resume --quiet --out " + run.string());
    INFO("resumed: " << resumed.out << resumed.err);
    CHECK(resumed.code == 0);
    CHECK(logged_steps(run) == steps_from(1, 80));
}

TEST_CASE("report, plot and train --resume take a log whose last line is torn, with a warning; a bad line before stays an error") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "run", log = run / "log.jsonl";
    REQUIRE(run_app(tmp, "train" + tiny(corpus) + " --steps 4 --quiet --out " + run.string()).code == 0);
    const std::string whole = read_file(log);
    std::ofstream(log, std::ios::app) << R"({"step":5,"loss":1.2,"l)";  // killed in the middle of an append
    const std::string warning = log.string() + ":5: the last line is torn (23 bytes, no newline, not a log line): left out\n";

    const Outcome plot = run_app(tmp, "plot --out " + (tmp.path / "loss.svg").string() + " " + log.string());
    CHECK(plot.code == 0);
    CHECK(plot.err == "gatedgrad: warning: " + warning);
    const Outcome report = run_app(tmp, "report " + run.string() + " --batches 2");
    CHECK(report.code == 0);
    CHECK(report.err == "gatedgrad: warning: " + warning);
    const Outcome resumed = run_app(tmp, "train --resume --steps 6 --quiet --out " + run.string());
    INFO("resumed: " << resumed.out << resumed.err);
    CHECK(resumed.code == 0);
    CHECK(resumed.err == "warning: " + warning);
    CHECK(logged_steps(run) == steps_from(1, 6));

    // The same bytes with whole lines after them are no write cut short: resume and report refuse them.
    const std::string damaged = whole.substr(0, whole.find('\n') + 1) + R"({"step":2,"lo)" + "\n" +
                                whole.substr(whole.find('\n', whole.find('\n') + 1) + 1);
    std::ofstream(log, std::ios::trunc) << damaged;
    check_error(run_app(tmp, "train --resume --steps 8 --quiet --out " + run.string()), 1,
                log.string() + ":2: not a training log line");
    CHECK(read_file(log) == damaged);
    check_error(run_app(tmp, "report " + run.string() + " --batches 2"), 1, log.string() + ":2: not a training log line");
}

TEST_CASE("train --resume --steps: a warmup too long for the new length says it is the run's and what to pass") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "run";
    // --steps 200 stretches the default warmup of 30 in 300 steps to 20, which config.json keeps.
    REQUIRE(run_app(tmp, "train" + tiny(corpus) + " --steps 200 --quiet --out " + run.string()).code == 0);
    check_error(run_app(tmp, "train --resume --steps 15 --out " + run.string()), 2,
                "warmup 20 must be below steps 15 (the cosine schedule needs steps after the warmup); that warmup is "
                "the run's (config.json): pass --warmup below 15 with --steps");
    const Outcome shorter = run_app(tmp, "train --resume --steps 15 --warmup 5 --quiet --out " + run.string());
    INFO("shorter: " << shorter.out << shorter.err);
    CHECK(shorter.code == 0);
    CHECK(shorter.out.find("--warmup 20 → 5") != std::string::npos);
}
