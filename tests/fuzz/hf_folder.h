// hf_folder.h — a Hugging Face model folder built from one candidate input and opened with
// hf::load_folder: the fuzzer (fuzz_hf_folder.cpp) feeds it mutated bytes, and the default test
// suite (test_fuzz_corpus.cpp) replays the committed corpus tests/fuzz/corpus/hf_folder/.
//
// The input is the folder's files one after the other, cut at each line "====":
//   config.json ==== model.safetensors.index.json ==== model.safetensors ==== model-1.safetensors ...
// an empty part writes no file (so no index: the single model.safetensors is read). As with
// load_untrusted.h, the load must succeed or throw a std::exception of one clean line; a crash,
// a sanitizer report, a hang or an allocation past the fuzzer's limit is a bug.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/load_untrusted.h"

namespace gg::fuzz {

constexpr std::string_view kFileBreak = "\n====\n";
constexpr size_t kMaxShards = 6;

// The name of part `i` of the input in the folder.
inline std::string hf_part_name(size_t i) {
    if (i == 0) return "config.json";
    if (i == 1) return "model.safetensors.index.json";
    return i == 2 ? "model.safetensors" : "model-" + std::to_string(i - 2) + ".safetensors";
}

// Writes the folder the input describes (a folder of this process's own, in memory where there
// is a tmpfs, emptied first); returns its path.
inline std::string write_hf_folder(std::string_view bytes) {
    namespace fs = std::filesystem;
    struct ScratchFolder {
        fs::path path;
        ~ScratchFolder() { fs::remove_all(path); }
    };
    static const ScratchFolder scratch{(fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path()) /
                                       ("gatedgrad_fuzz_hf_" + std::to_string(::getpid()))};
    fs::remove_all(scratch.path);
    fs::create_directories(scratch.path);
    for (size_t i = 0; i < 2 + kMaxShards && !bytes.empty(); ++i) {
        const size_t cut = bytes.find(kFileBreak);
        const std::string_view part = bytes.substr(0, cut);
        if (!part.empty())
            std::ofstream(scratch.path / hf_part_name(i), std::ios::binary).write(part.data(), std::streamsize(part.size()));
        bytes = cut == std::string_view::npos ? std::string_view() : bytes.substr(cut + kFileBreak.size());
    }
    return scratch.path.string();
}

// Loads the folder the input describes; returns the problems found (none: the loader held up).
inline std::vector<std::string> load_hf_folder(std::string_view bytes) {
    const std::string dir = write_hf_folder(bytes);
    std::vector<std::string> problems;
    try {
        const auto model = nn::hf::load_folder(dir, {.memory = kMemory});
        // What loaded must run: two tokens through it, as the app runs a model of its dtype.
        NoGradGuard no_grad;
        std::optional<Autocast> autocast;
        if (model->parameters().front().dtype() == DType::bf16) autocast.emplace(DType::bf16);
        const int64_t V = model->config().vocab_size;
        model->forward(from_vector(std::vector<int64_t>{0, V - 1}, {1, 2}));
    } catch (const std::exception& e) {
        if (const std::string why = bad_message(e.what()); !why.empty()) problems.push_back("hf::load_folder: " + why);
    }
    return problems;
}

}  // namespace gg::fuzz
