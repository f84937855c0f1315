// gatedgrad train under mpirun: 2 ranks log what 1 process with their whole batch logs; a
// rank killed with -9 ends the job within seconds and the last checkpoint resumes; Ctrl-C
// stops every rank with a checkpoint; a changed number of ranks on resume is refused; a
// rank that alone meets bad input stops the job with one line; ranks given different
// settings stop before the first step naming the setting; a rank that stops answering
// (SIGSTOP) ends the job after --rank-timeout, and a Ctrl-C ends it while it waits; a
// signal to one rank is named as it came. Every collective checks that the ranks pass it
// the same sizes (GG_CHECK_COLLECTIVES). (tests/meson.build runs this suite where MPI was
// found.)
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <vector>

#include "tests/app_check.h"

using namespace gg::testing;
namespace fs = std::filesystem;

namespace {

// As root (CI), Open MPI wants --allow-run-as-root; --oversubscribe lets 3 ranks share 2 cores.
const std::string kMpirun =
    "mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x GG_CHECK_COLLECTIVES=1 ";

std::string mpirun(int ranks, const std::string& args, const std::string& mpirun_options = "") {
    return kMpirun + mpirun_options + "-np " + std::to_string(ranks) + " " + app_path().string() + " " + args;
}

// A shell command to its end, from `tmp`.
Outcome run_command(const TempDir& tmp, const std::string& command) {
    const fs::path out = tmp.path / "stdout.txt", err = tmp.path / "stderr.txt";
    const int status = std::system(("cd " + tmp.path.string() + " && " + command + " >" + out.string() + " 2>" +
                                    err.string()).c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

// The lines of stderr that gatedgrad wrote (mpirun adds its own banners).
std::vector<std::string> app_lines(const std::string& err) {
    std::vector<std::string> lines;
    std::stringstream in(err);
    for (std::string line; std::getline(in, line);)
        if (line.rfind("gatedgrad: ", 0) == 0) lines.push_back(line);
    return lines;
}

fs::path write_corpus(const TempDir& tmp) {
    const fs::path corpus = tmp.path / "corpus.txt";
    std::ofstream out(corpus);
    for (int i = 0; i < 60; ++i) out << "Fortune number " << i << ": the quick brown fox jumps over the lazy dog.\n%\n";
    return corpus;
}

std::string model(const fs::path& corpus) {
    return " --data " + corpus.string() + " --layers 1 --d-model 32 --heads 2 --seq-len 16 --quiet";
}

std::vector<nlohmann::json> log_lines(const fs::path& run) {
    std::vector<nlohmann::json> lines;
    std::ifstream in(run / "log.jsonl");
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
}

// The processes whose parent is `parent`.
std::vector<pid_t> children(pid_t parent) {
    std::vector<pid_t> found;
    for (const auto& entry : fs::directory_iterator("/proc")) {
        const std::string name = entry.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string pid, comm, state;
        pid_t ppid = 0;
        if (stat >> pid >> comm >> state >> ppid && ppid == parent) found.push_back(std::stoi(pid));
    }
    return found;
}

// mpirun started in the background from `tmp` (stdout and stderr into job.out, job.err): its pid.
pid_t spawn_mpirun(const TempDir& tmp, const std::string& args, const std::string& mpirun_options = "") {
    const std::string command =
        "cd " + tmp.path.string() + " && exec " + mpirun(2, args, mpirun_options) + " >job.out 2>job.err";
    pid_t job = -1;
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    REQUIRE(posix_spawn(&job, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) == 0);
    return job;
}

size_t lines_in(const fs::path& file) {
    std::ifstream in(file);
    return size_t(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
}

// Resumes the run on 2 ranks, cut short to `steps` in all: every step logged once.
void check_resumes(const TempDir& tmp, const fs::path& run, size_t steps) {
    const Outcome resumed = run_command(tmp, mpirun(2, "train --resume --out run --quiet --steps " + std::to_string(steps)));
    INFO("stderr: " << resumed.err);
    REQUIRE(resumed.code == 0);
    const auto lines = log_lines(run);
    REQUIRE(lines.size() == steps);  // those after the checkpoint were cut and done again
    for (size_t i = 0; i < lines.size(); ++i) CHECK(lines[i]["step"] == int64_t(i) + 1);
}

}  // namespace

TEST_CASE("mpirun -np 2 train --batch 4 logs what train --batch 8 logs") {
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp);
    const std::string common = model(corpus) + " --steps 12 --eval-every 6 --probe-every 6";
    REQUIRE(run_command(tmp, mpirun(2, "train --batch 4 --out two" + common)).code == 0);
    REQUIRE(run_command(tmp, app_path().string() + " train --batch 8 --out one" + common).code == 0);
    const auto two = log_lines(tmp.path / "two"), one = log_lines(tmp.path / "one");
    REQUIRE(two.size() == 12);
    REQUIRE(one.size() == 12);
    for (size_t i = 0; i < 12; ++i) {
        CAPTURE(i);
        for (const auto& [key, value] : one[i].items()) {
            CAPTURE(key);
            REQUIRE(two[i].contains(key));
            if (key == "tokens_per_s" || key == "run") continue;  // timing, and each run's own id
            const auto a = two[i][key].is_array() ? two[i][key] : nlohmann::json::array({two[i][key]});
            const auto b = value.is_array() ? value : nlohmann::json::array({value});
            REQUIRE(a.size() == b.size());
            for (size_t j = 0; j < a.size(); ++j)  // the probe's statistics move with the weights' last bits
                CHECK(std::abs(a[j].get<double>() - b[j].get<double>()) <=
                      (key == "loss" || key == "grad_norm" || key == "lr" || key == "val_loss" ? 1e-6 : 1e-4) *
                          std::max(1.0, std::abs(b[j].get<double>())));
        }
    }
    CHECK(nlohmann::json::parse(read_file(tmp.path / "two" / "config.json"))["world_size"] == 2);
}

TEST_CASE("mpirun: a rank killed with -9 ends the job at once, and the last checkpoint resumes on 2 ranks") {
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "run";
    const pid_t job = spawn_mpirun(tmp, "train --batch 4 --steps 100000 --warmup 2 --ckpt-every 5 --out run" + model(corpus));
    REQUIRE(wait_until([&] { return lines_in(run / "log.jsonl") >= 12 && fs::exists(run / "model.safetensors"); }, 120));
    // Rank 0 holds the run folder's lock and wrote its pid there; the other rank is the one killed.
    const pid_t rank0 = std::stoi(read_file(run / "lock"));
    pid_t victim = -1;
    for (pid_t pid : children(job))
        if (pid != rank0) victim = pid;
    REQUIRE(victim > 0);
    REQUIRE(kill(victim, SIGKILL) == 0);
    const auto killed = std::chrono::steady_clock::now();
    int status = 0;
    REQUIRE(wait_until([&] { return waitpid(job, &status, WNOHANG) == job; }, 60));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
    MESSAGE("the job ended " << seconds << " s after the kill");
    CHECK(seconds < 30);
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
    const size_t logged = log_lines(run).size();
    check_resumes(tmp, run, logged + 10);
}

TEST_CASE("mpirun: Ctrl-C stops every rank at a step boundary with a checkpoint, and the run resumes") {
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "run";
    const pid_t job = spawn_mpirun(tmp, "train --batch 4 --steps 100000 --warmup 2 --out run" + model(corpus));
    REQUIRE(wait_until([&] { return lines_in(run / "log.jsonl") >= 5; }, 120));
    REQUIRE(kill(job, SIGINT) == 0);  // mpirun passes it on to the ranks as SIGTERM
    int status = 0;
    REQUIRE(wait_until([&] { return waitpid(job, &status, WNOHANG) == job; }, 60));
    const auto lines = app_lines(read_file(tmp.path / "job.err"));
    REQUIRE(lines.size() == 1);  // rank 0's, not one per rank
    CAPTURE(lines[0]);
    CHECK(lines[0].find("stopped by SIGTERM from mpirun (which passes a Ctrl-C on as SIGTERM) after step") !=
          std::string::npos);
    // mpirun itself exits 1 whenever it was signalled (Open MPI's rule), whatever the ranks return.
    CHECK(WIFEXITED(status));
    check_resumes(tmp, run, log_lines(run).size() + 10);
}

TEST_CASE("mpirun: a run resumed on another number of ranks is refused in one line") {
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp);
    REQUIRE(run_command(tmp, mpirun(2, "train --batch 4 --steps 4 --out run" + model(corpus))).code == 0);
    check_error(run_app(tmp, "train --resume --steps 8 --out " + (tmp.path / "run").string()), 2,
                "trained on 2 process(es) and this job has 1");
    const Outcome three = run_command(tmp, mpirun(3, "train --resume --steps 8 --out run"));
    CHECK(three.code == 2);
    const auto lines = app_lines(three.err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("trained on 2 process(es) and this job has 3") != std::string::npos);
    CHECK(lines[0].find("resume it with mpirun -np 2") != std::string::npos);
    CHECK(log_lines(tmp.path / "run").size() == 4);  // untouched
}

TEST_CASE("mpirun: bad input on one rank alone stops every rank, with one line from that rank") {
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp);
    // Two programs in one job (mpirun's A : B): rank 1 is given a corpus that is not there.
    const std::string good = app_path().string() + " train --batch 4 --steps 4 --out run" + model(corpus);
    const Outcome o = run_command(tmp, kMpirun + "-np 1 " + good + " : -np 1 " + good + " --data /no/such/corpus.txt");
    CHECK(o.code == 1);
    const auto lines = app_lines(o.err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("/no/such/corpus.txt") != std::string::npos);
    CHECK_FALSE(fs::exists(tmp.path / "run"));  // a run that never started leaves no folder
    // A bad command line: every rank refuses it, rank 0 alone says so.
    const Outcome typo = run_command(tmp, mpirun(2, "train --out x --stpes 3"));
    CHECK(typo.code == 2);
    REQUIRE(app_lines(typo.err).size() == 1);
    CHECK(app_lines(typo.err)[0].find("did you mean --steps?") != std::string::npos);
}

namespace {

// The rank of a 2-rank job that is not rank 0 (rank 0 wrote its pid into the run's lock).
pid_t rank1_of(pid_t job, const fs::path& run) {
    const pid_t rank0 = std::stoi(read_file(run / "lock"));
    for (pid_t pid : children(job))
        if (pid != rank0) return pid;
    return -1;
}

// Waits for the job to end: its exit status, or -1 when it did not end within `seconds`.
int wait_for_job(pid_t job, double seconds) {
    int status = 0;
    if (!wait_until([&] { return waitpid(job, &status, WNOHANG) == job; }, seconds)) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("mpirun: ranks given different settings stop before the first step, naming the first that differs") {
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), other = tmp.path / "other.txt";
    {
        std::ofstream out(other);
        for (int i = 0; i < 60; ++i) out << "Another text, number " << i << ", with other words in it than the first.\n%\n";
    }
    // Rank 0 runs `a`, rank 1 the same with one setting changed (mpirun's A : B).
    const std::map<std::string, std::string> a{{"--data", corpus.string()}, {"--layers", "1"}, {"--d-model", "32"},
                                               {"--steps", "4"}, {"--eval-every", "2"}, {"--lr", "0.003"},
                                               {"--seed", "1"}, {"--batch", "4"}, {"--precision", "f32"}};
    const auto command = [](const std::map<std::string, std::string>& flags, const std::string& extra) {
        std::string line = app_path().string() + " train --out run --heads 2 --seq-len 16 --warmup 1 --quiet" + extra;
        for (const auto& [flag, value] : flags) line += " " + flag + " " + value;
        return line;
    };
    struct Case {
        std::string flag, value, said;
    };
    const std::vector<Case> cases{
        {"--d-model", "64", "on model.d_model: 64 vs 32"}, {"--layers", "2", "on model.n_layers: 2 vs 1"},
        {"--eval-every", "3", "on eval_every: 3 vs 2"},    {"--steps", "6", "on steps: 6 vs 4"},
        {"--lr", "0.01", "on lr: 0.01 vs 0.003"},          {"--seed", "7", "on seed: 7 vs 1"},
        {"--batch", "2", "on batch_size: 2 vs 4"},
        {"--data", other.string(), "on data: [\"" + other.string() + "\"] vs [\"" + corpus.string() + "\"]"},
        {"--precision", "bf16", "on precision: \"bf16\" vs \"f32\""}};
    for (const Case& c : cases) {
        CAPTURE(c.flag);
        std::map<std::string, std::string> b = a;
        b[c.flag] = c.value;
        const Outcome o = run_command(tmp, kMpirun + "-np 1 " + command(a, "") + " : -np 1 " + command(b, ""));
        INFO("stderr: " << o.err);
        CHECK(o.code == 2);
        const auto lines = app_lines(o.err);
        REQUIRE(lines.size() == 1);
        CHECK(lines[0].find("rank 1 disagrees with rank 0 " + c.said) != std::string::npos);
        CHECK_FALSE(fs::exists(tmp.path / "run"));  // a run that never started leaves no folder
    }
    // Rank 0 resumes the run while rank 1 would start it over: the run stays as it was.
    REQUIRE(run_command(tmp, mpirun(2, "train --batch 4 --steps 4 --out run" + model(corpus))).code == 0);
    const std::string again = app_path().string() + " train --batch 4 --steps 8 --out run" + model(corpus);
    const Outcome o = run_command(tmp, kMpirun + "-np 1 " + again + " --resume : -np 1 " + again + " --force");
    INFO("stderr: " << o.err);
    CHECK(o.code == 2);
    const auto lines = app_lines(o.err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("rank 1 disagrees with rank 0 on --resume/--force: --force vs --resume") != std::string::npos);
    CHECK(log_lines(tmp.path / "run").size() == 4);
    check_resumes(tmp, tmp.path / "run", 8);
}

TEST_CASE("mpirun: a rank that stops answering (SIGSTOP) ends the job after --rank-timeout, the checkpoint whole") {
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "run";
    // When rank 0 ends the job, mpirun wakes the stopped rank (SIGCONT) and kills it a second or
    // two later; on a loaded machine mpirun may be slower than that. Here it waits 7 s between its
    // signals, so the woken rank lives past its own --rank-timeout: it must not add a second line.
    const pid_t job = spawn_mpirun(
        tmp, "train --batch 4 --steps 100000 --warmup 2 --ckpt-every 5 --rank-timeout 5 --out run" + model(corpus),
        "--mca odls_base_sigkill_timeout 7 ");
    REQUIRE(wait_until([&] { return lines_in(run / "log.jsonl") >= 12 && fs::exists(run / "model.safetensors"); }, 120));
    const pid_t victim = rank1_of(job, run);
    REQUIRE(victim > 0);
    REQUIRE(kill(victim, SIGSTOP) == 0);
    const int code = wait_for_job(job, 120);
    if (code < 0) kill(victim, SIGKILL);  // never leave a stopped process behind
    REQUIRE(code >= 0);
    CHECK(code == 1);
    const std::string err = read_file(tmp.path / "job.err");
    INFO("job.err: " << err);
    const auto lines = app_lines(err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("rank 0: ") != std::string::npos);
    CHECK(lines[0].find("no answer from the other ranks for") != std::string::npos);
    CHECK(lines[0].find("(--rank-timeout 5): a rank has stopped or hung") != std::string::npos);
    CHECK(lines[0].find("is whole (train --resume goes on from it)") != std::string::npos);
    check_resumes(tmp, run, log_lines(run).size() + 10);
}

TEST_CASE("mpirun: a Ctrl-C reaches rank 0 while it waits for a stopped rank, and ends the job with 130") {
    TempDir tmp;
    const fs::path corpus = write_corpus(tmp), run = tmp.path / "run";
    // A timeout far beyond the test's deadline: only the signal can end this wait.
    const pid_t job =
        spawn_mpirun(tmp, "train --batch 4 --steps 100000 --warmup 2 --ckpt-every 5 --rank-timeout 3600 --out run" + model(corpus));
    REQUIRE(wait_until([&] { return lines_in(run / "log.jsonl") >= 12 && fs::exists(run / "model.safetensors"); }, 120));
    const pid_t rank0 = std::stoi(read_file(run / "lock")), victim = rank1_of(job, run);
    REQUIRE(victim > 0);
    REQUIRE(kill(victim, SIGSTOP) == 0);
    REQUIRE(kill(rank0, SIGINT) == 0);
    const int code = wait_for_job(job, 120);
    if (code < 0) kill(victim, SIGKILL);
    REQUIRE(code >= 0);
    CHECK(code == 130);
    const std::string err = read_file(tmp.path / "job.err");
    CAPTURE(err);
    const auto lines = app_lines(err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("rank 0: stopped by SIGINT after step") != std::string::npos);
    CHECK(lines[0].find("while waiting for the other ranks") != std::string::npos);
    check_resumes(tmp, run, log_lines(run).size() + 10);
}

TEST_CASE("mpirun: a signal to one rank stops every rank, which exit 128 + that signal, named with its rank") {
    struct Case {
        int rank, signal, code;
        std::string said;
    };
    for (const Case& c : {Case{1, SIGTERM, 143, "stopped by SIGTERM on rank 1 after step"},
                          Case{0, SIGINT, 130, "stopped by SIGINT after step"},
                          Case{1, SIGINT, 130, "stopped by SIGINT on rank 1 after step"}}) {
        CAPTURE(c.said);
        TempDir tmp;
        const fs::path corpus = write_corpus(tmp), run = tmp.path / "run";
        const pid_t job = spawn_mpirun(tmp, "train --batch 4 --steps 100000 --warmup 2 --out run" + model(corpus));
        REQUIRE(wait_until([&] { return lines_in(run / "log.jsonl") >= 5; }, 120));
        const pid_t target = c.rank == 0 ? std::stoi(read_file(run / "lock")) : rank1_of(job, run);
        REQUIRE(target > 0);
        REQUIRE(kill(target, c.signal) == 0);
        CHECK(wait_for_job(job, 60) == c.code);  // mpirun gives the ranks' code
        const std::string err = read_file(tmp.path / "job.err");
        INFO("job.err: " << err);
        const auto lines = app_lines(err);
        REQUIRE(lines.size() == 1);
        CHECK(lines[0].find(c.said) != std::string::npos);
        check_resumes(tmp, run, log_lines(run).size() + 10);
    }
}
