// test_app_ablate.cpp — ablate and lens on the command line. ablate's losses before and after
// each intervention equal tests/reference/ablate_reference.py's, which computes the same
// interventions as edits of a separate float64 PyTorch forward (hf_qwen3.py), on Hugging Face
// folders of every gate layout and on the same model imported as our checkpoint; lens lists each
// layer's prediction; bad input ends in one line.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <string>

#include "tests/app_check.h"

namespace {

namespace fs = std::filesystem;
using gg::testing::check_error;
using gg::testing::Outcome;
using gg::testing::run_app;
using gg::testing::TempDir;

const std::string kText = " --data tests/reference/text/eval_b.txt";

// The number after the last `label` in `text`.
double last_number_after(const std::string& text, const std::string& label) {
    const size_t at = text.rfind(label);
    REQUIRE(at != std::string::npos);
    return std::stod(text.substr(at + label.size()));
}

// The last line of `text`.
std::string last_line(const std::string& text) {
    const size_t end = text.find_last_not_of('\n'), start = text.rfind('\n', end);
    return text.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1));
}

}  // namespace

TEST_CASE("app: ablate's losses before and after each intervention equal an independent PyTorch computation") {
    const TempDir tmp;
    const nlohmann::json cases = nlohmann::json::parse(gg::testing::read_file("tests/reference/hf/ablate_reference.json"));
    for (const nlohmann::json& c : cases) {
        std::string args;
        for (const auto& arg : c.at("args")) args += " '" + arg.get<std::string>() + "'";
        const std::string folder = "tests/reference/hf/" + c.at("folder").get<std::string>();
        CAPTURE(folder + args);
        const Outcome o = run_app(tmp, "ablate --hf " + folder + kText + args);
        INFO(o.out << o.err);
        REQUIRE(o.code == 0);
        CHECK(std::abs(last_number_after(o.out, "before: loss ") - c.at("reference").at("before").get<double>()) < 1e-4);
        CHECK(std::abs(last_number_after(o.out, "after: loss ") - c.at("reference").at("after").get<double>()) < 1e-4);
        CHECK(last_line(o.out).rfind("after: loss ", 0) == 0);
        CHECK(o.out.find("4 sequences of 19 tokens") != std::string::npos);
        CHECK(o.out.find("sink report after it:") != std::string::npos);
        CHECK(o.out.find("first-token") != std::string::npos);  // the report's table
    }
    // The same model as our checkpoint gives the same numbers through --ckpt.
    const fs::path ckpt = tmp.path / "headwise.safetensors";
    REQUIRE(run_app(tmp, "import-hf tests/reference/hf/headwise --out " + ckpt.string()).code == 0);
    const Outcome ours = run_app(tmp, "ablate --ckpt " + ckpt.string() + kText + " --seq-len 19 --batch 4 --force-gate 1");
    INFO(ours.out << ours.err);
    REQUIRE(ours.code == 0);
    const nlohmann::json& forced = cases.at(0);
    REQUIRE(forced.at("args").back() == "1");
    CHECK(std::abs(last_number_after(ours.out, "after: loss ") - forced.at("reference").at("after").get<double>()) < 1e-4);
}

TEST_CASE("app: ablate refuses what it cannot do with one line") {
    const TempDir tmp;
    const std::string base = "ablate --hf tests/reference/hf/baseline" + kText + " --seq-len 19 --batch 4 ";
    const std::string gated = "ablate --hf tests/reference/hf/headwise" + kText + " --seq-len 19 --batch 4 ";
    check_error(run_app(tmp, base), 2, "give an intervention");
    check_error(run_app(tmp, base + "--force-gate 1"), 2, "--force-gate: this model's attention has no gate");
    check_error(run_app(tmp, gated + "--force-gate 2"), 2, "--force-gate");
    check_error(run_app(tmp, base + "--zero-heads 2.0"), 2, "--zero-heads: '2.0' is not LAYER.HEAD with a layer in [0, 2)");
    check_error(run_app(tmp, base + "--zero-heads 1.x"), 2, "is not LAYER.HEAD");
    check_error(run_app(tmp, base + "--zero-heads 1.4"), 2, "--zero-heads: ablate_heads: head 1.4 is outside [0, 4)");
    check_error(run_app(tmp, base + "--mean-heads"), 2, "--mean-heads needs --zero-heads");
    check_error(run_app(tmp, base + "--drop-first --swap-first the"), 2, "give one of them");
    check_error(run_app(tmp, base + "--swap-first 'the gate'"), 2, "tokens for this model's tokenizer, not one");
    check_error(run_app(tmp, gated + "--force-gate 1 --layers 2"), 2, "--layers: layer 2 is outside [0, 2)");
    check_error(run_app(tmp, base + "--clamp-massive half"), 2, "--clamp-massive");
    const Outcome help = run_app(tmp, "ablate --help");
    CHECK(help.code == 0);
    for (const char* option : {"--force-gate", "--drop-first", "--swap-first", "--zero-heads", "--mean-heads",
                               "--clamp-massive", "--layers"})
        CHECK(help.out.find(option) != std::string::npos);
}

TEST_CASE("app: lens lists each layer's prediction and the target's rank, and refuses bad input with one line") {
    const TempDir tmp;
    const std::string lens = "lens --hf tests/reference/hf/elementwise --prompt 'the gate closes' ";
    const Outcome o = run_app(tmp, lens + "--top-k 3 --target the");
    INFO(o.out << o.err);
    REQUIRE(o.code == 0);
    CHECK(o.out.find("target 'the' rank, p;  top 3 (p)") != std::string::npos);
    for (const char* row : {"\n    0 ", "\n    1 "}) CHECK(o.out.find(row) != std::string::npos);
    CHECK(o.out.find("\n    2 ") == std::string::npos);  // two layers
    check_error(run_app(tmp, lens + "--top-k 0"), 2, "--top-k");
    check_error(run_app(tmp, lens + "--target 'the gate'"), 2, "tokens for this model's tokenizer, not one");
    check_error(run_app(tmp, "lens --hf tests/reference/hf/elementwise --prompt ''"), 2, "--prompt is empty");
    check_error(run_app(tmp, "lens --hf tests/reference/hf/elementwise"), 2, "--prompt");
    CHECK(run_app(tmp, "lens --help").out.find("--target") != std::string::npos);
}
