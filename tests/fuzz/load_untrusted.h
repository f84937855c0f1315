// load_untrusted.h — every way gatedgrad reads a checkpoint or a config someone else wrote,
// run on one candidate file: the fuzzer (fuzz_checkpoint.cpp) feeds it mutated bytes, and
// the default test suite (test_fuzz_corpus.cpp) replays the committed corpus through it.
//
// Each reader must either accept the bytes or throw a std::exception whose message is one
// clean line (no newline, no control or non-UTF-8 bytes, short). Anything else — a crash,
// a sanitizer report, a hang, an allocation past the fuzzer's limit — is a bug to fix.
// (Short: under 4000 bytes, for two shapes of 32 dims and a path; it was 120 KB.)
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gatedgrad.h"

namespace gg::fuzz {

// Models and training steps may claim at most this much memory: enough for the corpus's
// real checkpoints, little enough that every input runs in milliseconds.
constexpr uint64_t kMemory = uint64_t(4) << 20;

// "" when `message` is a clean one-line error, else what is wrong with it.
inline std::string bad_message(std::string_view message) {
    if (message.empty()) return "an empty message";
    if (message.size() > 4000) return "a message of " + std::to_string(message.size()) + " bytes";
    // Clean means printable() would change nothing but backslashes (which it escapes too).
    std::string plain(message);
    for (char& c : plain)
        if (c == '\\') c = '/';
    if (nn::printable(plain, plain.size()) != plain) return "unprintable bytes in: " + nn::printable(message, 200);
    return "";
}

// Runs every reader on `bytes`; returns the problems found (none: the readers held up).
inline std::vector<std::string> load_untrusted(std::string_view bytes) {
    std::vector<std::string> problems;
    const auto attempt = [&](const char* reader, const std::function<void()>& read) {
        try {
            read();
        } catch (const std::exception& e) {
            if (const std::string why = bad_message(e.what()); !why.empty())
                problems.push_back(std::string(reader) + ": " + why);
        }
    };
    // The file readers take a path: the bytes go to a file of this process's own, in memory
    // where there is a tmpfs, removed when the process ends.
    struct ScratchFile {
        std::string path;
        ~ScratchFile() { std::filesystem::remove(path); }
    };
    static const ScratchFile scratch{[] {
        const std::filesystem::path dir =
            std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
        return (dir / ("gatedgrad_fuzz_" + std::to_string(::getpid()) + ".safetensors")).string();
    }()};
    const std::string& path = scratch.path;
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
    // The trainer reads no batch before it runs: any text will do as its data.
    static const auto data = std::make_shared<const nn::TextDataset>(std::vector<std::string>(10, "fuzz"));

    const std::vector<uint8_t> raw(bytes.begin(), bytes.end());
    attempt("parse_safetensors", [&] { parse_safetensors(raw, "fuzz"); });
    attempt("load_checkpoint", [&] { nn::load_checkpoint(path, kMemory); });
    attempt("Trainer::resume", [&] {
        const SafetensorsFile file = read_safetensors(path);
        const auto it = file.metadata.find("train_config");
        if (it == file.metadata.end()) return;
        nn::Trainer trainer(nn::TrainConfig::from_json(it->second), data, Device::CPU, kMemory);
        trainer.resume(path);
    });
    // The bytes as a config file (train --config) or a model config on its own.
    const std::string text(bytes);
    attempt("TrainConfig::from_json", [&] { nn::TrainConfig::from_json(text); });
    attempt("LMConfig::from_json", [&] { nn::LMConfig::from_json(text); });
    return problems;
}

}  // namespace gg::fuzz
