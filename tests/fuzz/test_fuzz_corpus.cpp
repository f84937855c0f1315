// test_fuzz_corpus.cpp — replays every file of tests/fuzz/corpus/ (the fuzzers' seeds and one
// regression file per hostile input ever found) through what its target runs, in the default
// suite, with or without clang: each must load or end in a clean one-line error.
//   corpus/checkpoint/  checkpoints and config files (load_untrusted.h, fuzz_checkpoint.cpp)
//   corpus/hf_folder/   Hugging Face folders, one input each (hf_folder.h, fuzz_hf_folder.cpp)
//   corpus/tokenizer/   tokenizer.json and a text to encode (load_tokenizer.h, fuzz_tokenizer.cpp)
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/fuzz/hf_folder.h"
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

TEST_CASE("fuzz corpus: every checkpoint seed and regression file loads or fails cleanly") {
    replay("tests/fuzz/corpus/checkpoint", 20, gg::fuzz::load_untrusted);
    // The seeds are real checkpoints: at least one of them must load as a model.
    CHECK_NOTHROW(gg::nn::load_checkpoint("tests/fuzz/corpus/checkpoint/seed_trained.safetensors", gg::fuzz::kMemory));
}

TEST_CASE("fuzz corpus: every Hugging Face folder seed and regression input loads or fails cleanly") {
    replay("tests/fuzz/corpus/hf_folder", 10, gg::fuzz::load_hf_folder);
    // The seeds are models that load.
    for (const char* seed : {"seed_plain", "seed_headwise", "seed_elementwise_bf16_tied", "seed_interleaved", "seed_yarn",
                             "seed_sharded"}) {
        CAPTURE(seed);
        const std::string bytes = read_all(fs::path("tests/fuzz/corpus/hf_folder") / seed);
        CHECK_NOTHROW(gg::nn::hf::load_folder(gg::fuzz::write_hf_folder(bytes)));
    }
}

TEST_CASE("fuzz corpus: every tokenizer seed and regression file reads and encodes or fails cleanly") {
    replay("tests/fuzz/corpus/tokenizer", 8, gg::fuzz::load_tokenizer);
    // The seeds are tokenizers: at least one of them must read.
    const std::string seed = read_all("tests/fuzz/corpus/tokenizer/seed_qwen2_nfc.json");
    CHECK_NOTHROW(gg::nn::BpeTokenizer::from_json(seed.substr(0, seed.find(std::string("\0\0", 2)))));
}
