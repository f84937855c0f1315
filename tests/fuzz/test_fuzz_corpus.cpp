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

namespace {

std::string read_all(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
}

// Each file of `folder` (tests run from the source root) through `load`: none may show a problem.
void replay(const char* folder, size_t at_least, std::vector<std::string> (*load)(std::string_view)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(folder))
        if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    REQUIRE(files.size() >= at_least);
    for (const fs::path& file : files) {
        CAPTURE(file.filename().string());
        const std::vector<std::string> problems = load(read_all(file));
        CHECK_MESSAGE(problems.empty(), (problems.empty() ? "" : problems.front()));
    }
}

}  // namespace

TEST_CASE("fuzz corpus: every seed and regression file loads or fails cleanly") {
    replay("tests/fuzz/corpus", 20, gg::fuzz::load_untrusted);
    // The seeds are real checkpoints: at least one of them must load as a model.
    CHECK_NOTHROW(gg::nn::load_model("tests/fuzz/corpus/seed_trained.safetensors", gg::fuzz::kMemory));
}

TEST_CASE("fuzz corpus: every tokenizer seed and regression file reads and encodes or fails cleanly") {
    replay("tests/fuzz/corpus/tokenizer", 8, gg::fuzz::load_tokenizer);
    // The seeds are tokenizers: at least one of them must read.
    const std::string seed = read_all("tests/fuzz/corpus/tokenizer/seed_qwen2_nfc.json");
    CHECK_NOTHROW(gg::nn::BpeTokenizer::from_json(seed.substr(0, seed.find(std::string("\0\0", 2)))));
}
