// test_fuzz_corpus.cpp — replays every file of tests/fuzz/corpus/ (the fuzzer's seeds and
// one regression file per hostile input ever found) through load_untrusted.h, in the
// default suite, with or without clang: each must load or end in a clean one-line error.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/fuzz/load_tokenizer.h"
#include "tests/fuzz/load_untrusted.h"

namespace fs = std::filesystem;

TEST_CASE("fuzz corpus: every seed and regression file loads or fails cleanly") {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator("tests/fuzz/corpus"))  // tests run from the source root
        if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    REQUIRE(files.size() >= 20);
    for (const fs::path& file : files) {
        CAPTURE(file.filename().string());
        std::ifstream in(file, std::ios::binary);
        std::stringstream bytes;
        bytes << in.rdbuf();
        const std::vector<std::string> problems = gg::fuzz::load_untrusted(bytes.str());
        CHECK_MESSAGE(problems.empty(), (problems.empty() ? "" : problems.front()));
    }
    // The seeds are real checkpoints: at least one of them must load as a model.
    CHECK_NOTHROW(gg::nn::load_model("tests/fuzz/corpus/seed_trained.safetensors", gg::fuzz::kMemory));
}

TEST_CASE("fuzz corpus: every tokenizer seed and regression file reads and encodes or fails cleanly") {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator("tests/fuzz/corpus/tokenizer"))
        if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    REQUIRE(files.size() >= 8);
    for (const fs::path& file : files) {
        CAPTURE(file.filename().string());
        std::ifstream in(file, std::ios::binary);
        std::stringstream bytes;
        bytes << in.rdbuf();
        const std::vector<std::string> problems = gg::fuzz::load_tokenizer(bytes.str());
        CHECK_MESSAGE(problems.empty(), (problems.empty() ? "" : problems.front()));
    }
    // The seeds are tokenizers: at least one of them must read.
    std::ifstream seed("tests/fuzz/corpus/tokenizer/seed_qwen2_nfc.json", std::ios::binary);
    std::stringstream text;
    text << seed.rdbuf();
    const std::string json = text.str();
    CHECK_NOTHROW(gg::nn::BpeTokenizer::from_json(json.substr(0, json.find(std::string("\0\0", 2)))));
}
