// test_checkpoint.cpp — saving and loading modules: round trips, all-or-nothing loading
// of bad files, extra tensors (optimiser state), and files shared with PyTorch.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gatedgrad.h"
#include "tests/check.h"

using namespace gg;
using gg::testing::max_abs_diff;
namespace fs = std::filesystem;

namespace {

// Embedding → RMSNorm → Linear, plus an int64 buffer: every dtype a checkpoint holds.
class TinyModel : public nn::Module {
public:
    explicit TinyModel(uint64_t seed) {
        manual_seed(seed);
        emb = register_module("emb", std::make_shared<nn::Embedding>(10, 6));
        norm = register_module("norm", std::make_shared<nn::RMSNorm>(6));
        proj = register_module("proj", std::make_shared<nn::Linear>(6, 4));
        seen = from_vector(std::vector<int64_t>{int64_t(seed), -int64_t(seed)}, {2});
        register_buffer("seen", seen);
        norm->weight.detach().data<float>()[0] = float(seed);  // so that no two models agree anywhere
    }
    Tensor forward(const Tensor& ids) const { return proj->forward(norm->forward(emb->forward(ids))); }  // (B, T) → (B, T, 4)

    std::shared_ptr<nn::Embedding> emb;
    std::shared_ptr<nn::RMSNorm> norm;
    std::shared_ptr<nn::Linear> proj;
    Tensor seen;
};

// A fresh directory under the system temp dir, removed with everything in it.
struct TempDir {
    fs::path path = fs::temp_directory_path() /
                    ("gg_checkpoint_test_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

// The bytes of every state tensor, to see that nothing changed, to the last bit.
std::vector<std::vector<uint8_t>> snapshot(const nn::Module& m) {
    std::vector<std::vector<uint8_t>> out;
    for (const auto& [name, t] : m.state_dict()) {
        const auto* p = static_cast<const uint8_t*>(t.contiguous().view_desc().data);
        out.emplace_back(p, p + t.numel() * dtype_size(t.dtype()));
    }
    return out;
}

// Runs f, which must throw a checkpoint error about `path`, on one line, containing every word.
template <class F>
void check_error(F&& f, const std::string& path, const std::vector<std::string>& words) {
    std::string msg;
    try {
        f();
    } catch (const std::runtime_error& e) {
        msg = e.what();
    }
    CAPTURE(msg);
    CHECK(msg.starts_with("checkpoint: " + path + ": "));
    CHECK(msg.find('\n') == std::string::npos);
    for (const std::string& w : words) CHECK(msg.find(w) != std::string::npos);
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::vector<char> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("checkpoint: round trip of a module, in place, with metadata") {
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    const TinyModel saved(1);
    const nn::Metadata metadata{{"config", R"({"d_model": 6, "vocab": 10})"}, {"step", "42"}};
    nn::save(saved, path, metadata);

    TinyModel loaded(2);
    REQUIRE(snapshot(loaded) != snapshot(saved));
    const nn::NamedTensors handles = loaded.state_dict();
    CHECK(nn::load(loaded, path) == metadata);
    CHECK(snapshot(loaded) == snapshot(saved));
    const nn::NamedTensors after = loaded.state_dict();
    for (size_t i = 0; i < handles.size(); ++i) CHECK(after[i].second.impl() == handles[i].second.impl());

    const Tensor ids = from_vector(std::vector<int64_t>{1, 4, 9, 0}, {2, 2});
    CHECK(loaded.forward(ids).to_vector<float>() == saved.forward(ids).to_vector<float>());

    // The file holds each tensor under its state_dict name and dtype.
    const nn::NamedTensors in_file = nn::load_tensors(path);
    REQUIRE(in_file.size() == handles.size());
    for (size_t i = 0; i < in_file.size(); ++i) {
        CHECK(in_file[i].first == handles[i].first);
        CHECK(in_file[i].second.dtype() == handles[i].second.dtype());
    }

    SUBCASE("float64 modules are stored as F64") {
        TinyModel wide(3), other(4);
        wide.to(DType::f64);
        other.to(DType::f64);
        nn::save(wide, path);
        CHECK(gg::read_safetensors(path).find("proj.weight")->dtype == "F64");
        nn::load(other, path);
        CHECK(snapshot(other) == snapshot(wide));
    }
}

TEST_CASE("checkpoint: the sink score function's logits are saved and loaded with the model") {
    TempDir dir;
    const std::string path = dir.file("sink.safetensors");
    nn::LMConfig config;
    config.vocab_size = 11, config.max_len = 8, config.d_model = 8, config.n_layers = 2, config.attn.n_heads = 2;
    config.attn.score_fn = ScoreFunction::sink;
    nn::GatedTransformerLM saved(config), loaded(config);
    const NoGradGuard no_grad;
    for (const auto& [name, p] : saved.named_parameters())
        if (name.ends_with("attn.sink")) p.copy_(randn(p.shape(), default_generator()));
    nn::save(saved, path);
    nn::load(loaded, path);
    for (const auto& [name, p] : loaded.named_parameters())
        if (name.ends_with("attn.sink")) CHECK(amax(abs(p)).item() > 0);
    const Tensor ids = from_vector(std::vector<int64_t>{1, 4, 9, 0, 3, 3}, {2, 3});
    CHECK(loaded.forward(ids).logits.to_vector<float>() == saved.forward(ids).logits.to_vector<float>());
}

TEST_CASE("checkpoint: a bad file is an error that leaves the module untouched") {
    TempDir dir;
    const std::string path = dir.file("bad.safetensors");
    const TinyModel source(1);
    // The file's tensors, to be broken one way per subcase. The broken tensor comes late
    // in the file, so that loading in a single pass would already have copied the others.
    nn::NamedTensors tensors = source.state_dict();
    std::vector<std::string> words;

    SUBCASE("truncated") {
        nn::save(source, path);
        std::vector<char> bytes = read_bytes(path);
        bytes.resize(bytes.size() - 16);
        write_bytes(path, bytes);
        words = {"bytes"};
    }
    SUBCASE("corrupted header") {
        nn::save(source, path);
        std::vector<char> bytes = read_bytes(path);
        bytes[8] = 'x';  // the JSON's opening brace
        write_bytes(path, bytes);
        words = {"JSON"};
    }
    SUBCASE("wrong shape") {
        tensors[3].second = zeros({5});  // proj.bias, (4) in the model
        nn::save_tensors(path, tensors);
        words = {"tensor 'proj.bias' has shape (5) in the file but (4) in the model"};
    }
    SUBCASE("missing tensor") {
        tensors.pop_back();  // seen
        nn::save_tensors(path, tensors);
        words = {"tensor 'seen' ((2) int64) is missing from the file"};
    }
    SUBCASE("unexpected tensor") {
        tensors.emplace_back("head.weight", zeros({3, 6}));
        nn::save_tensors(path, tensors);
        words = {"the file has tensor 'head.weight' ((3,6) float32), which the model does not have"};
    }
    SUBCASE("wrong dtype") {
        tensors[4].second = zeros({2}, DType::f64);  // seen, int64 in the model
        nn::save_tensors(path, tensors);
        words = {"tensor 'seen' has dtype float64 in the file but int64 in the model"};
    }
    SUBCASE("a dtype gatedgrad does not have") {
        gg::SafetensorsFile file;
        file.entries.push_back({"emb.weight", "F16", {1}, {0, 0}});
        gg::write_safetensors(path, file);
        words = {"tensor 'emb.weight' has dtype F16"};
    }
    SUBCASE("no file") {
        words = {"cannot read"};
    }
    SUBCASE("a NaN weight") {
        tensors[2].second = full({4, 6}, NAN);  // proj.weight
        nn::save_tensors(path, tensors);
        words = {"tensor 'proj.weight' holds a NaN"};
    }
    SUBCASE("an infinite weight") {
        tensors[1].second = full({6}, -INFINITY);  // norm.weight
        nn::save_tensors(path, tensors);
        words = {"tensor 'norm.weight' holds an infinity"};
    }

    TinyModel target(2);
    const auto before = snapshot(target);
    check_error([&] { nn::load(target, path); }, path, words);
    CHECK(snapshot(target) == before);
}

TEST_CASE("checkpoint: extra tensors travel with the model") {
    TempDir dir;
    const std::string path = dir.file("with_extra.safetensors");
    const TinyModel model(1);
    const nn::NamedTensors extra = nn::with_prefix(
        "optim.", {{"step", scalar(7, DType::i64)}, {"exp_avg", randn({2, 3}, default_generator(), DType::f64)}});
    nn::save(model, path, {}, extra);

    TinyModel loaded(2);
    SUBCASE("asked for: filled in place") {
        nn::NamedTensors wanted{{"optim.step", scalar(0, DType::i64)}, {"optim.exp_avg", zeros({2, 3}, DType::f64)}};
        const Tensor handle = wanted[1].second;
        nn::load(loaded, path, &wanted);
        CHECK(wanted[0].second.item() == 7);
        CHECK(handle.to_vector<double>() == extra[1].second.to_vector<double>());
        CHECK(snapshot(loaded) == snapshot(model));
    }
    SUBCASE("not asked for: unexpected") {
        check_error([&] { nn::load(loaded, path); }, path, {"'optim.step'", "which the model does not have"});
    }
    SUBCASE("asked for but absent") {
        nn::NamedTensors wanted{{"optim.step", scalar(0, DType::i64)}, {"optim.momentum", zeros({2, 3}, DType::f64)}};
        check_error([&] { nn::load(loaded, path, &wanted); }, path,
                    {"'optim.momentum' ((2,3) float64) is missing from the file"});
    }
    SUBCASE("a name taken by the model") {
        check_error([&] { nn::save(model, path, {}, {{"proj.bias", zeros({4})}}); }, path, {"'proj.bias' appears twice"});
    }
}

TEST_CASE("checkpoint: model and AdamW state resume exactly") {
    TempDir dir;
    const std::string path = dir.file("train.safetensors");
    const Tensor ids = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
    const Tensor targets = from_vector(std::vector<int64_t>{2, 0, 1, 3, 3, 0}, {2, 3});
    const auto train = [&](TinyModel& m, nn::AdamW& opt, int steps) {
        for (int i = 0; i < steps; ++i) {
            opt.zero_grad();
            cross_entropy(m.forward(ids), targets).backward();
            opt.step();
        }
    };

    TinyModel straight(1);
    nn::AdamW straight_opt(straight.parameters(), 1e-2);
    train(straight, straight_opt, 6);

    TinyModel first(1);
    nn::AdamW first_opt(first.parameters(), 1e-2);
    train(first, first_opt, 3);
    nn::save(first, path, {}, nn::with_prefix("optim.", first_opt.state_dict()));

    TinyModel resumed(2);
    nn::AdamW resumed_opt(resumed.parameters(), 1e-2);
    nn::NamedTensors optimiser_state = nn::with_prefix("optim.", resumed_opt.state_dict());
    nn::load(resumed, path, &optimiser_state);
    train(resumed, resumed_opt, 3);
    CHECK(snapshot(resumed) == snapshot(straight));
}

TEST_CASE("checkpoint: loads a PyTorch nn.Linear and reproduces its output") {
    // Written by tests/reference/check_checkpoint.py make.
    nn::Linear linear(4, 3);
    nn::NamedTensors io{{"input", zeros({2, 4})}, {"output", zeros({2, 3})}};
    const nn::Metadata metadata = nn::load(linear, "tests/reference/torch_linear.safetensors", &io);
    CHECK(metadata.count("torch") == 1);
    const double diff = max_abs_diff(linear.forward(io[0].second), io[1].second);
    MESSAGE("max |gatedgrad − torch| on Linear(4, 3) from a PyTorch file: " << diff);
    CHECK(diff <= 1e-6);
}

TEST_CASE("checkpoint: a file for PyTorch") {
    // To check it in PyTorch, see tests/reference/check_checkpoint.py.
    TempDir dir;
    const char* requested = std::getenv("GG_CHECKPOINT_FOR_TORCH");
    const std::string path = requested ? requested : dir.file("for_torch.safetensors");
    manual_seed(5);
    const nn::Linear linear(4, 3);
    const Tensor x = randn({2, 4});
    const Tensor y = linear.forward(x).detach();
    nn::save(linear, path, {{"written_by", "gatedgrad"}}, {{"input", x}, {"output", y}});

    const nn::NamedTensors in_file = nn::load_tensors(path);
    REQUIRE(in_file.size() == 4);
    const std::vector<std::pair<std::string, Tensor>> expected{
        {"weight", linear.weight}, {"bias", linear.bias}, {"input", x}, {"output", y}};
    for (size_t i = 0; i < expected.size(); ++i) {
        CHECK(in_file[i].first == expected[i].first);
        CHECK(in_file[i].second.shape() == expected[i].second.shape());
        CHECK(in_file[i].second.to_vector<float>() == expected[i].second.to_vector<float>());
    }
}

TEST_CASE("checkpoint: a model config in the metadata is validated before the model is built") {
    // A few bytes of metadata could ask for any model: load_checkpoint checks bounds and memory
    // first, and names the field and the bytes, instead of allocating (or hanging).
    TempDir dir;
    const std::string path = dir.file("hostile.safetensors");
    const auto load_with = [&](const std::string& config) {
        nn::save_tensors(path, {}, {{"config", config}});
        return [&] { nn::load_checkpoint(path); };
    };
    check_error(load_with(R"({"n_layers": 1e6})"), path, {"n_layers 1000000 is outside [0, 1024]"});
    check_error(load_with(R"({"d_model": 1000000})"), path, {"d_model 1000000 is outside"});
    check_error(load_with(R"({"vocab_size": 1099511627776})"), path, {"vocab_size 1099511627776 is outside"});
    check_error(load_with(R"({"n_experts": 1e9})"), path, {"n_experts 1000000000 is outside"});
    check_error(load_with(R"({"n_layers": 1.5})"), path, {"'n_layers' is not a whole number"});
    check_error(load_with(R"({"n_layers": 1e300})"), path, {"'n_layers' is not a whole number"});
    check_error(load_with(R"({"d_model": 64, "n_heads": 5})"), path, {"n_heads 5 does not divide d_model 64"});
    check_error(load_with(R"({"rope_base": -1})"), path, {"rope_base"});
    check_error(load_with(R"({"n_layers": 1, "n_layers": 2})"), path, {"key 'n_layers' twice"});
    // Within every bound, but 1024 layers of width 8192 are ~3 TB of weights.
    check_error(load_with(R"({"n_layers": 1024, "d_model": 8192})"), path,
                {"n_layers 1024 × (d_model 8192", "asks for too much memory", "its weights would need about", "bytes"});
    // A modest model against a small budget (the fuzzer's): the same refusal.
    nn::save_tensors(path, {}, {{"config", nn::LMConfig().to_json()}});
    check_error([&] { nn::load_checkpoint(path, 1 << 16); }, path, {"n_layers 2 × (d_model 64", "more than the 6.55e+04 bytes (0.1 MiB)"});
}

TEST_CASE("checkpoint: memory estimates name what asks for the most") {
    nn::LMConfig c;
    const nn::MemoryEstimate w = nn::estimate_memory(c);
    CHECK(w.parameters == doctest::Approx(4.0 * double(nn::GatedTransformerLM(c).num_parameters())).epsilon(0.01));
    const nn::MemoryEstimate t = nn::estimate_memory(c, nn::Workload::training, 16, 64);
    CHECK(t.training_state == 3 * t.parameters);
    CHECK(t.activations > 0);
    CHECK_THROWS_WITH_AS(nn::check_memory(c, nn::Workload::training, 65536, 1 << 20), doctest::Contains("batch 65536 × seq_len 1048576"),
                         std::invalid_argument);
    nn::check_memory(c, nn::Workload::training, 16, 64);  // fits anywhere
}

TEST_CASE("checkpoint: the memory budget is the least of RAM, ulimit -v and the cgroup's memory.max") {
    namespace fs = std::filesystem;
    // A cgroup v2 tree: /sys/fs/cgroup/outer (2 GiB) / inner ("max": none of its own).
    const fs::path root = fs::temp_directory_path() / ("gg_cgroup_" + std::to_string(getpid()));
    fs::create_directories(root / "outer" / "inner");
    std::ofstream(root / "outer" / "memory.max") << "2147483648\n";
    std::ofstream(root / "outer" / "inner" / "memory.max") << "max\n";
    CHECK(nn::cgroup_memory_max("0::/outer/inner\n", root.string()) == uint64_t(2147483648));
    CHECK(nn::cgroup_memory_max("0::/outer\n", root.string()) == uint64_t(2147483648));
    std::ofstream(root / "outer" / "inner" / "memory.max") << "1073741824\n";  // the smaller, lower down
    CHECK(nn::cgroup_memory_max("12:memory:/v1\n0::/outer/inner\n", root.string()) == uint64_t(1073741824));
    CHECK(nn::cgroup_memory_max("12:memory:/v1-only\n", root.string()) == UINT64_MAX);  // cgroup v1: nothing to read
    CHECK(nn::cgroup_memory_max("0::/elsewhere\n", root.string()) == UINT64_MAX);
    fs::remove_all(root);

    // ulimit -v, in a child so that this process keeps its own limits: the budget falls
    // under it (less what the child has already mapped), though RAM is far larger. The
    // limit is 3 GiB above what is mapped now: a sanitized build maps terabytes of shadow
    // memory, under which a fixed 3 GiB would leave nothing to run on.
    const uint64_t unlimited = nn::memory_budget();
    uint64_t mapped = 0;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmSize:", 0) == 0) mapped = std::stoull(line.substr(7)) * 1024;
    REQUIRE(mapped > 0);
    const uint64_t limit = mapped + (uint64_t(3) << 30);
    int pipe_fds[2];
    REQUIRE(pipe(pipe_fds) == 0);
    const pid_t child = fork();
    if (child == 0) {
        const rlimit r{limit, limit};
        const uint64_t budget = setrlimit(RLIMIT_AS, &r) == 0 ? nn::memory_budget() : 0;
        (void)!write(pipe_fds[1], &budget, sizeof budget);
        _exit(0);
    }
    close(pipe_fds[1]);  // so that a child that dies gives end-of-file here, not a wait forever
    uint64_t limited = 0;
    const ssize_t got = read(pipe_fds[0], &limited, sizeof limited);
    waitpid(child, nullptr, 0);
    close(pipe_fds[0]);
    REQUIRE(got == ssize_t(sizeof limited));
    MESSAGE("budget " << unlimited << " bytes; under ulimit -v 3 GiB: " << limited);
    CHECK(limited > 0);
    CHECK(limited < (uint64_t(3) << 30) + (uint64_t(64) << 20));  // the 3 GiB, less what the child mapped since
    CHECK(limited <= unlimited);
}
